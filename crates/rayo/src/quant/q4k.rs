//! Q4_K: 8 sub-blocks of 32 values, `d·sc·q − dmin·m` with 6-bit `sc`, `m` packed in 12 bytes
//! ([`get_scale_min_k4`]) and 4-bit `q`; per 64 values, low nibbles first, then high.

use half::f16;

use super::blocks::BlockQ4K;
use super::codec::{BlockCodec, MinKind, Unpack};
use super::search::{get_scale_min_k4, make_qkx2_quants, nearest_int, pack_scale_min_k4};
use super::QK_K;

/// The sub-block scales and mins of Q4_K and Q5_K (`quantize_row_q{4,5}_K_ref`'s first half):
/// `make_qkx2_quants` per 32 values weighted by `rms + |x|`, the scales then quantized to 6
/// bits against the largest. Returns `(d, dmin, packed scales)`; `l` holds the first pass's
/// values (kept for sub-blocks whose quantized scale is 0).
pub(crate) fn k_scales(x: &[f32], nmax: i32, rmin: f32, nstep: i32, l: &mut [u8; QK_K]) -> (f16, f16, [u8; 12]) {
    let mut l_aux = [0u8; 32];
    let mut weights = [0f32; 32];
    let (mut scales, mut mins) = ([0f32; 8], [0f32; 8]);
    let (mut max_scale, mut max_min) = (0f32, 0f32);
    for j in 0..8 {
        let xj = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0f32;
        for &v in xj {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, v) in weights.iter_mut().zip(xj) {
            *w = av_x + v.abs();
        }
        let (scale, min) = make_qkx2_quants(nmax, xj, &weights, &mut l[32 * j..32 * j + 32], &mut l_aux, rmin, 0.1, nstep, false);
        scales[j] = scale;
        mins[j] = min;
        if scale > max_scale {
            max_scale = scale;
        }
        if min > max_min {
            max_min = min;
        }
    }
    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let (mut ls, mut lm) = ([0u8; 8], [0u8; 8]);
    for j in 0..8 {
        ls[j] = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        lm[j] = (nearest_int(inv_min * mins[j]) as u8).min(63);
    }
    (f16::from_f32(max_scale / 63.0), f16::from_f32(max_min / 63.0), pack_scale_min_k4(&ls, &lm))
}

/// The second pass of Q4_K/Q5_K: each value against its sub-block's quantized scale and min.
pub(crate) fn k_values(x: &[f32], nmax: i32, d: f16, dmin: f16, scales: &[u8; 12], l: &mut [u8; QK_K]) {
    for j in 0..8 {
        let (sc, m) = get_scale_min_k4(j, scales);
        let dj = d.to_f32() * sc as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * m as f32;
        for ii in 0..32 {
            l[32 * j + ii] = nearest_int((x[32 * j + ii] + dm) / dj).clamp(0, nmax) as u8;
        }
    }
}

impl BlockCodec for BlockQ4K {
    fn dequantize(&self, out: &mut [f32]) {
        let out = &mut out[..QK_K];
        let (d, min) = (self.d.to_f32(), self.dmin.to_f32());
        for (c, o) in out.chunks_exact_mut(64).enumerate() {
            let q = &self.qs[32 * c..32 * c + 32];
            let (sc1, m1) = get_scale_min_k4(2 * c, &self.scales);
            let (sc2, m2) = get_scale_min_k4(2 * c + 1, &self.scales);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            for l in 0..32 {
                o[l] = d1 * (q[l] & 0xF) as f32 - m1;
                o[l + 32] = d2 * (q[l] >> 4) as f32 - m2;
            }
        }
    }

    fn quantize(src: &[f32]) -> Self {
        let x = &src[..QK_K];
        let mut l = [0u8; QK_K];
        let (d, dmin, scales) = k_scales(x, 15, -1.0, 20, &mut l);
        k_values(x, 15, d, dmin, &scales, &mut l);
        let mut qs = [0u8; 128];
        for c in 0..4 {
            for i in 0..32 {
                qs[32 * c + i] = l[64 * c + i] | (l[64 * c + i + 32] << 4);
            }
        }
        BlockQ4K { d, dmin, scales, qs }
    }
}

impl Unpack for BlockQ4K {
    const GROUP: usize = 32;
    const MIN: MinKind = MinKind::Sub;
    #[inline(always)]
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], m: &mut [f32; 16]) {
        for c in 0..4 {
            for l in 0..32 {
                let b = self.qs[32 * c + l];
                q[64 * c + l] = (b & 0xF) as i8;
                q[64 * c + l + 32] = (b >> 4) as i8;
            }
        }
        let (dd, min) = (self.d.to_f32(), self.dmin.to_f32());
        for j in 0..8 {
            let (sc, mm) = get_scale_min_k4(j, &self.scales);
            d[j] = dd * sc as f32;
            m[j] = min * mm as f32;
        }
    }
}
