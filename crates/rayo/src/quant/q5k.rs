//! Q5_K: Q4_K with a fifth bit per value in `qh` (bit `2c` for the low-nibble half of the
//! `c`-th 64 values, bit `2c + 1` for the high half).

use super::blocks::BlockQ5K;
use super::codec::{BlockCodec, MinKind, Unpack};
use super::q4k::{k_scales, k_values};
use super::search::get_scale_min_k4;
use super::QK_K;

impl BlockQ5K {
    /// Values `64c .. 64c + 64` (0..=31).
    #[inline(always)]
    fn chunk(&self, c: usize) -> [u8; 64] {
        let mut q = [0u8; 64];
        let ql = &self.qs[32 * c..32 * c + 32];
        for l in 0..32 {
            q[l] = (ql[l] & 0xF) | (((self.qh[l] >> (2 * c)) & 1) << 4);
            q[l + 32] = (ql[l] >> 4) | (((self.qh[l] >> (2 * c + 1)) & 1) << 4);
        }
        q
    }
}

impl BlockCodec for BlockQ5K {
    fn dequantize(&self, out: &mut [f32]) {
        let out = &mut out[..QK_K];
        let (d, min) = (self.d.to_f32(), self.dmin.to_f32());
        for (c, o) in out.chunks_exact_mut(64).enumerate() {
            let q = self.chunk(c);
            let (sc1, m1) = get_scale_min_k4(2 * c, &self.scales);
            let (sc2, m2) = get_scale_min_k4(2 * c + 1, &self.scales);
            let (d1, m1) = (d * sc1 as f32, min * m1 as f32);
            let (d2, m2) = (d * sc2 as f32, min * m2 as f32);
            for l in 0..32 {
                o[l] = d1 * q[l] as f32 - m1;
                o[l + 32] = d2 * q[l + 32] as f32 - m2;
            }
        }
    }

    fn quantize(src: &[f32]) -> Self {
        let x = &src[..QK_K];
        let mut l = [0u8; QK_K];
        let (d, dmin, scales) = k_scales(x, 31, -0.5, 15, &mut l);
        k_values(x, 31, d, dmin, &scales, &mut l);
        let (mut qs, mut qh) = ([0u8; 128], [0u8; 32]);
        for c in 0..4 {
            for j in 0..32 {
                let (mut l1, mut l2) = (l[64 * c + j], l[64 * c + j + 32]);
                if l1 > 15 {
                    l1 -= 16;
                    qh[j] |= 1 << (2 * c);
                }
                if l2 > 15 {
                    l2 -= 16;
                    qh[j] |= 2 << (2 * c);
                }
                qs[32 * c + j] = l1 | (l2 << 4);
            }
        }
        BlockQ5K { d, dmin, scales, qh, qs }
    }
}

impl Unpack for BlockQ5K {
    const GROUP: usize = 32;
    const MIN: MinKind = MinKind::Sub;
    #[inline(always)]
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], m: &mut [f32; 16]) {
        for c in 0..4 {
            for (o, v) in q[64 * c..64 * c + 64].iter_mut().zip(self.chunk(c)) {
                *o = v as i8;
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
