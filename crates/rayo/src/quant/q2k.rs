//! Q2_K: 16 sub-blocks of 16 values, `d·sc·q − dmin·m` with 4-bit `sc`, `m` and 2-bit `q`.

use half::f16;

use super::blocks::BlockQ2K;
use super::codec::{BlockCodec, MinKind, Unpack};
use super::search::{make_qkx2_quants, nearest_int};
use super::QK_K;

impl BlockQ2K {
    /// The 2-bit value `i` (0..256): byte `32·(i/128) + i%32` of `qs`, bits `2·((i%128)/32)`.
    #[inline(always)]
    fn q(&self, i: usize) -> u8 {
        (self.qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3
    }
}

impl BlockCodec for BlockQ2K {
    fn dequantize(&self, out: &mut [f32]) {
        let out = &mut out[..QK_K];
        let (d, min) = (self.d.to_f32(), self.dmin.to_f32());
        for (g, o) in out.chunks_exact_mut(16).enumerate() {
            let sc = self.scales[g];
            let dl = d * (sc & 0xF) as f32;
            let ml = min * (sc >> 4) as f32;
            for (l, o) in o.iter_mut().enumerate() {
                *o = dl * self.q(16 * g + l) as f32 - ml;
            }
        }
    }

    fn quantize(src: &[f32]) -> Self {
        let x = &src[..QK_K];
        const Q4SCALE: f32 = 15.0;
        let mut l = [0u8; QK_K];
        let mut l_aux = [0u8; 16];
        let mut weights = [0f32; 16];
        let mut mins = [0f32; 16];
        let mut scales = [0f32; 16];
        let (mut max_scale, mut max_min) = (0f32, 0f32);
        for j in 0..16 {
            let xj = &x[16 * j..16 * j + 16];
            for (w, v) in weights.iter_mut().zip(xj) {
                *w = v.abs();
            }
            let (scale, min) = make_qkx2_quants(3, xj, &weights, &mut l[16 * j..16 * j + 16], &mut l_aux, -0.5, 0.1, 15, true);
            scales[j] = scale;
            mins[j] = min;
            if scale > max_scale {
                max_scale = scale;
            }
            if min > max_min {
                max_min = min;
            }
        }
        let mut y = BlockQ2K { scales: [0; 16], qs: [0; 64], d: f16::ZERO, dmin: f16::ZERO };
        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for (s, &scale) in y.scales.iter_mut().zip(&scales) {
                *s = nearest_int(iscale * scale) as u8;
            }
            y.d = f16::from_f32(max_scale / Q4SCALE);
        }
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for (s, &min) in y.scales.iter_mut().zip(&mins) {
                *s |= (nearest_int(iscale * min) << 4) as u8;
            }
            y.dmin = f16::from_f32(max_min / Q4SCALE);
        }
        for j in 0..16 {
            let d = y.d.to_f32() * (y.scales[j] & 0xF) as f32;
            if d == 0.0 {
                continue;
            }
            let dm = y.dmin.to_f32() * (y.scales[j] >> 4) as f32;
            for ii in 0..16 {
                l[16 * j + ii] = nearest_int((x[16 * j + ii] + dm) / d).clamp(0, 3) as u8;
            }
        }
        for j in (0..QK_K).step_by(128) {
            for i in 0..32 {
                y.qs[j / 4 + i] = l[j + i] | (l[j + i + 32] << 2) | (l[j + i + 64] << 4) | (l[j + i + 96] << 6);
            }
        }
        y
    }
}

impl Unpack for BlockQ2K {
    const GROUP: usize = 16;
    const MIN: MinKind = MinKind::Sub;
    #[inline(always)]
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], m: &mut [f32; 16]) {
        // As `q(i)`, in loops the compiler vectorizes: value 128h + 32k + l.
        for h in 0..2 {
            for k in 0..4 {
                for l in 0..32 {
                    q[128 * h + 32 * k + l] = ((self.qs[32 * h + l] >> (2 * k)) & 3) as i8;
                }
            }
        }
        let (dd, min) = (self.d.to_f32(), self.dmin.to_f32());
        for g in 0..16 {
            d[g] = dd * (self.scales[g] & 0xF) as f32;
            m[g] = min * (self.scales[g] >> 4) as f32;
        }
    }
}
