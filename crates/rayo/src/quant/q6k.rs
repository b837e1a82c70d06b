//! Q6_K: 16 sub-blocks of 16 values, `d·sc·(q − 32)` with i8 `sc`; 4 low bits of `q` in `ql`,
//! 2 high in `qh`.

use half::f16;

use super::blocks::BlockQ6K;
use super::codec::{BlockCodec, MinKind, Unpack};
use super::search::{make_qx_quants, nearest_int, GROUP_MAX_EPS};
use super::QK_K;

impl BlockQ6K {
    /// Value `i` (0..256) in −32..=31. Per 128 values (`h`), with `l = i % 32` and
    /// `k = (i % 128) / 32`: low nibble of `ql[64h + l + 32(k & 1)]` (high nibble for k ≥ 2),
    /// high bits `2k` of `qh[32h + l]`.
    #[inline(always)]
    fn q(&self, i: usize) -> i8 {
        let (h, k, l) = (i / 128, (i % 128) / 32, i % 32);
        let b = self.ql[64 * h + l + 32 * (k & 1)];
        let low = if k < 2 { b & 0xF } else { b >> 4 };
        let high = (self.qh[32 * h + l] >> (2 * k)) & 3;
        (low | (high << 4)) as i8 - 32
    }
}

impl BlockCodec for BlockQ6K {
    fn dequantize(&self, out: &mut [f32]) {
        let out = &mut out[..QK_K];
        let d = self.d.to_f32();
        for (g, o) in out.chunks_exact_mut(16).enumerate() {
            let dl = d * self.scales[g] as f32;
            for (l, o) in o.iter_mut().enumerate() {
                *o = dl * self.q(16 * g + l) as f32;
            }
        }
    }

    fn quantize(src: &[f32]) -> Self {
        let x = &src[..QK_K];
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; 16];
        let (mut max_scale, mut max_abs_scale) = (0f32, 0f32);
        for ib in 0..16 {
            let scale = make_qx_quants(32, &x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16], 1);
            scales[ib] = scale;
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = scale;
            }
        }
        let mut y = BlockQ6K { ql: [0; 128], qh: [0; 64], scales: [0; 16], d: f16::ZERO };
        if max_abs_scale < GROUP_MAX_EPS {
            return y;
        }
        let iscale = -128.0 / max_scale;
        y.d = f16::from_f32(1.0 / iscale);
        for (s, &scale) in y.scales.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * scale).min(127) as i8;
        }
        for j in 0..16 {
            let d = y.d.to_f32() * y.scales[j] as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                l[16 * j + ii] = (nearest_int(x[16 * j + ii] / d).clamp(-32, 31) + 32) as i8;
            }
        }
        let l = l.map(|v| v as u8);
        for h in 0..2 {
            let (j, ql, qh) = (128 * h, &mut y.ql[64 * h..64 * h + 64], &mut y.qh[32 * h..32 * h + 32]);
            for i in 0..32 {
                let (q1, q2, q3, q4) = (l[j + i], l[j + i + 32], l[j + i + 64], l[j + i + 96]);
                ql[i] = (q1 & 0xF) | ((q3 & 0xF) << 4);
                ql[i + 32] = (q2 & 0xF) | ((q4 & 0xF) << 4);
                qh[i] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
            }
        }
        y
    }
}

impl Unpack for BlockQ6K {
    const GROUP: usize = 16;
    const MIN: MinKind = MinKind::None;
    #[inline(always)]
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], _m: &mut [f32; 16]) {
        // As `q(i)`, in loops the compiler vectorizes: value 128h + 32k + l.
        for h in 0..2 {
            for k in 0..4 {
                for l in 0..32 {
                    let b = self.ql[64 * h + l + 32 * (k & 1)];
                    let low = if k < 2 { b & 0xF } else { b >> 4 };
                    let high = (self.qh[32 * h + l] >> (2 * k)) & 3;
                    q[128 * h + 32 * k + l] = (low | (high << 4)) as i8 - 32;
                }
            }
        }
        let dd = self.d.to_f32();
        for (g, d) in d.iter_mut().enumerate() {
            *d = dd * self.scales[g] as f32;
        }
    }
}
