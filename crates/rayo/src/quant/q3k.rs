//! Q3_K: 16 sub-blocks of 16 values, `d·(sc − 32)·(q − 4·!h)` with 6-bit `sc` packed in 12
//! bytes, 2 low bits of `q` in `qs` and the high bit in `hmask` (set: no −4).

use half::f16;

use super::blocks::BlockQ3K;
use super::codec::{BlockCodec, MinKind, Unpack};
use super::search::{make_q3_quants, nearest_int};
use super::QK_K;

impl BlockQ3K {
    /// The 6-bit scale of sub-block `j` (0..16), minus 32.
    #[inline(always)]
    fn scale(&self, j: usize) -> i8 {
        let s = &self.scales;
        let low = if j < 8 { s[j] & 0xF } else { s[j - 8] >> 4 };
        let high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        (low | (high << 4)) as i8 - 32
    }

    /// Value `i` (0..256) in −4..=3.
    #[inline(always)]
    fn q(&self, i: usize) -> i8 {
        let low = (self.qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3;
        let high = (self.hmask[i % 32] >> (i / 32)) & 1;
        low as i8 - if high != 0 { 0 } else { 4 }
    }
}

impl BlockCodec for BlockQ3K {
    fn dequantize(&self, out: &mut [f32]) {
        let out = &mut out[..QK_K];
        let d = self.d.to_f32();
        for (g, o) in out.chunks_exact_mut(16).enumerate() {
            let dl = d * self.scale(g) as f32;
            for (l, o) in o.iter_mut().enumerate() {
                *o = dl * self.q(16 * g + l) as f32;
            }
        }
    }

    fn quantize(src: &[f32]) -> Self {
        let x = &src[..QK_K];
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; 16];
        let (mut max_scale, mut amax) = (0f32, 0f32);
        for j in 0..16 {
            scales[j] = make_q3_quants(4, &x[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16], true);
            let scale = scales[j].abs();
            if scale > amax {
                amax = scale;
                max_scale = scales[j];
            }
        }
        let mut y = BlockQ3K { hmask: [0; 32], qs: [0; 64], scales: [0; 12], d: f16::ZERO };
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for (j, &scale) in scales.iter().enumerate() {
                let lj = (nearest_int(iscale * scale) as i8).clamp(-32, 31) + 32;
                let lj = lj as u8;
                if j < 8 {
                    y.scales[j] = lj & 0xF;
                } else {
                    y.scales[j - 8] |= (lj & 0xF) << 4;
                }
                y.scales[j % 4 + 8] |= (lj >> 4) << (2 * (j / 4));
            }
            y.d = f16::from_f32(1.0 / iscale);
        }
        for j in 0..16 {
            let d = y.d.to_f32() * y.scale(j) as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                l[16 * j + ii] = nearest_int(x[16 * j + ii] / d).clamp(-4, 3) as i8 + 4;
            }
        }
        // The high bit of value j goes to bit j/32 of hmask[j % 32].
        for (j, lj) in l.iter_mut().enumerate() {
            if *lj > 3 {
                y.hmask[j % 32] |= 1 << (j / 32);
                *lj -= 4;
            }
        }
        for j in (0..QK_K).step_by(128) {
            for i in 0..32 {
                y.qs[j / 4 + i] = (l[j + i] | (l[j + i + 32] << 2) | (l[j + i + 64] << 4) | (l[j + i + 96] << 6)) as u8;
            }
        }
        y
    }
}

impl Unpack for BlockQ3K {
    const GROUP: usize = 16;
    const MIN: MinKind = MinKind::None;
    #[inline(always)]
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], _m: &mut [f32; 16]) {
        // As `q(i)`, in loops the compiler vectorizes: value 128h + 32k + l.
        for h in 0..2 {
            for k in 0..4 {
                for l in 0..32 {
                    let low = ((self.qs[32 * h + l] >> (2 * k)) & 3) as i8;
                    let high = ((self.hmask[l] >> (4 * h + k)) & 1) as i8;
                    q[128 * h + 32 * k + l] = low - 4 + 4 * high;
                }
            }
        }
        let dd = self.d.to_f32();
        for (g, d) in d.iter_mut().enumerate() {
            *d = dd * self.scale(g) as f32;
        }
    }
}
