//! The 32-value formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 (`ggml-quants.c`,
//! `quantize_row_q*_ref` / `dequantize_row_q*`).

use half::f16;

use super::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK32};
use super::codec::{BlockCodec, MinKind, Unpack};
use super::search::signed_max;

#[inline(always)]
fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

#[inline(always)]
fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// The 5-bit values of Q5_0/Q5_1: low nibbles in `qs`, bit `j` of `qh` the fifth bit of value `j`.
#[inline(always)]
fn q5_values(qs: &[u8; 16], qh: &[u8; 4]) -> [u8; 32] {
    let qh = u32::from_le_bytes(*qh);
    let mut q = [0u8; 32];
    for j in 0..16 {
        q[j] = (qs[j] & 0xF) | ((((qh >> j) & 1) as u8) << 4);
        q[j + 16] = (qs[j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
    }
    q
}

/// Packs 5-bit values (Q5_0/Q5_1 layout).
#[inline(always)]
fn q5_pack(q: &[u8; 32]) -> ([u8; 16], [u8; 4]) {
    let mut qs = [0u8; 16];
    let mut qh = 0u32;
    for j in 0..16 {
        let (a, b) = (q[j], q[j + 16]);
        qs[j] = (a & 0x0F) | ((b & 0x0F) << 4);
        qh |= (((a & 0x10) >> 4) as u32) << j;
        qh |= (((b & 0x10) >> 4) as u32) << (j + 16);
    }
    (qs, qh.to_le_bytes())
}

impl BlockCodec for BlockQ4_0 {
    fn dequantize(&self, out: &mut [f32]) {
        let out = &mut out[..QK32];
        let d = self.d.to_f32();
        for j in 0..16 {
            out[j] = d * ((self.qs[j] & 0xF) as i32 - 8) as f32;
            out[j + 16] = d * ((self.qs[j] >> 4) as i32 - 8) as f32;
        }
    }

    fn quantize(src: &[f32]) -> Self {
        let x = &src[..QK32];
        let d = signed_max(x).0 / -8.0;
        let id = inverse(d);
        let mut qs = [0u8; 16];
        for j in 0..16 {
            let q0 = ((x[j] * id + 8.5) as i8).min(15) as u8;
            let q1 = ((x[j + 16] * id + 8.5) as i8).min(15) as u8;
            qs[j] = q0 | (q1 << 4);
        }
        BlockQ4_0 { d: f16::from_f32(d), qs }
    }
}

impl Unpack for BlockQ4_0 {
    const GROUP: usize = QK32;
    const MIN: MinKind = MinKind::None;
    #[inline(always)]
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], _m: &mut [f32; 16]) {
        for j in 0..16 {
            q[j] = (self.qs[j] & 0xF) as i8 - 8;
            q[j + 16] = (self.qs[j] >> 4) as i8 - 8;
        }
        d[0] = self.d.to_f32();
    }
}

impl BlockCodec for BlockQ4_1 {
    fn dequantize(&self, out: &mut [f32]) {
        let out = &mut out[..QK32];
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        for j in 0..16 {
            out[j] = d * (self.qs[j] & 0xF) as f32 + m;
            out[j + 16] = d * (self.qs[j] >> 4) as f32 + m;
        }
    }

    fn quantize(src: &[f32]) -> Self {
        let x = &src[..QK32];
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inverse(d);
        let mut qs = [0u8; 16];
        for j in 0..16 {
            let q0 = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
            let q1 = (((x[j + 16] - min) * id + 0.5) as i8).min(15) as u8;
            qs[j] = q0 | (q1 << 4);
        }
        BlockQ4_1 { d: f16::from_f32(d), m: f16::from_f32(min), qs }
    }
}

impl Unpack for BlockQ4_1 {
    const GROUP: usize = QK32;
    const MIN: MinKind = MinKind::Add;
    #[inline(always)]
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], m: &mut [f32; 16]) {
        for j in 0..16 {
            q[j] = (self.qs[j] & 0xF) as i8;
            q[j + 16] = (self.qs[j] >> 4) as i8;
        }
        d[0] = self.d.to_f32();
        m[0] = self.m.to_f32();
    }
}

impl BlockCodec for BlockQ5_0 {
    fn dequantize(&self, out: &mut [f32]) {
        let out = &mut out[..QK32];
        let d = self.d.to_f32();
        for (o, q) in out.iter_mut().zip(q5_values(&self.qs, &self.qh)) {
            *o = d * (q as i32 - 16) as f32;
        }
    }

    fn quantize(src: &[f32]) -> Self {
        let x = &src[..QK32];
        let d = signed_max(x).0 / -16.0;
        let id = inverse(d);
        let mut q = [0u8; 32];
        for (q, &v) in q.iter_mut().zip(x) {
            *q = ((v * id + 16.5) as i8).min(31) as u8;
        }
        let (qs, qh) = q5_pack(&q);
        BlockQ5_0 { d: f16::from_f32(d), qh, qs }
    }
}

impl Unpack for BlockQ5_0 {
    const GROUP: usize = QK32;
    const MIN: MinKind = MinKind::None;
    #[inline(always)]
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], _m: &mut [f32; 16]) {
        for (q, v) in q.iter_mut().zip(q5_values(&self.qs, &self.qh)) {
            *q = v as i8 - 16;
        }
        d[0] = self.d.to_f32();
    }
}

impl BlockCodec for BlockQ5_1 {
    fn dequantize(&self, out: &mut [f32]) {
        let out = &mut out[..QK32];
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        for (o, q) in out.iter_mut().zip(q5_values(&self.qs, &self.qh)) {
            *o = d * q as f32 + m;
        }
    }

    fn quantize(src: &[f32]) -> Self {
        let x = &src[..QK32];
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inverse(d);
        let mut q = [0u8; 32];
        for (q, &v) in q.iter_mut().zip(x) {
            // ggml has no clamp here; the value cannot pass 31 for finite input.
            *q = (((v - min) * id + 0.5) as u8).min(31);
        }
        let (qs, qh) = q5_pack(&q);
        BlockQ5_1 { d: f16::from_f32(d), m: f16::from_f32(min), qh, qs }
    }
}

impl Unpack for BlockQ5_1 {
    const GROUP: usize = QK32;
    const MIN: MinKind = MinKind::Add;
    #[inline(always)]
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], m: &mut [f32; 16]) {
        for (q, v) in q.iter_mut().zip(q5_values(&self.qs, &self.qh)) {
            *q = v as i8;
        }
        d[0] = self.d.to_f32();
        m[0] = self.m.to_f32();
    }
}

/// Q8_0/Q8_1's scale and values: `d = amax/127`, `q = round(x/d)` (half away from zero).
#[inline(always)]
fn q8_values(x: &[f32]) -> (f32, [i8; 32]) {
    // ggml's MAX(a, b) is `a > b ? a : b`.
    let amax = x.iter().fold(0.0f32, |a, v| if a > v.abs() { a } else { v.abs() });
    let d = amax / 127.0;
    let id = inverse(d);
    let mut qs = [0i8; 32];
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = (v * id).round() as i8;
    }
    (d, qs)
}

/// `q·d`: the values of Q8_0 and Q8_1 blocks.
fn dequantize_q8(d: f16, qs: &[i8; 32], out: &mut [f32]) {
    let d = d.to_f32();
    for (o, &q) in out[..QK32].iter_mut().zip(qs) {
        *o = q as f32 * d;
    }
}

impl BlockCodec for BlockQ8_0 {
    fn dequantize(&self, out: &mut [f32]) {
        dequantize_q8(self.d, &self.qs, out);
    }

    fn quantize(src: &[f32]) -> Self {
        let (d, qs) = q8_values(&src[..QK32]);
        BlockQ8_0 { d: f16::from_f32(d), qs }
    }
}

impl Unpack for BlockQ8_0 {
    const GROUP: usize = QK32;
    const MIN: MinKind = MinKind::None;
    #[inline(always)]
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], _m: &mut [f32; 16]) {
        q[..32].copy_from_slice(&self.qs);
        d[0] = self.d.to_f32();
    }
}

impl BlockCodec for BlockQ8_1 {
    /// As Q8_0; `s` is not a value.
    fn dequantize(&self, out: &mut [f32]) {
        dequantize_q8(self.d, &self.qs, out);
    }

    fn quantize(src: &[f32]) -> Self {
        let (d, qs) = q8_values(&src[..QK32]);
        let sum: i32 = qs.iter().map(|&q| q as i32).sum();
        BlockQ8_1 { d: f16::from_f32(d), s: f16::from_f32(sum as f32 * d), qs }
    }
}

impl Unpack for BlockQ8_1 {
    const GROUP: usize = QK32;
    const MIN: MinKind = MinKind::None;
    #[inline(always)]
    fn unpack(&self, q: &mut [i8; 256], d: &mut [f32; 16], _m: &mut [f32; 16]) {
        q[..32].copy_from_slice(&self.qs);
        d[0] = self.d.to_f32();
    }
}
