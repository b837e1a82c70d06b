//! Activations quantized on the fly for the integer dots, as llama.cpp pairs them
//! (`vec_dot_type`): Q8_0 for Q4_0/Q5_0/Q8_0 (and Q8_1 weights), Q8_1 for Q4_1/Q5_1, Q8_K for
//! the k-quants. The values equal those of the reference quantizers (`quantize_row_q8_0_ref`,
//! `_q8_1_ref`, `_q8_K_ref`, tested against [`super::quantize`]); they are kept in a form the
//! kernels read directly: the i8 values of a row, one f32 scale per block (for Q8_0/Q8_1 the
//! f16 value, widened), and for Q8_1 the exact `d·Σq` (the file format rounds it to f16; the
//! product uses the exact value) and for Q8_K the sums of each 16.

use half::f16;

use super::GgmlType;
use crate::cpu::simd::{Simd, SimdExt};

/// The activation format a weight format's integer product pairs with (`None`: the f32 path).
pub fn activation_type(weight: GgmlType) -> Option<GgmlType> {
    use GgmlType::*;
    match weight {
        F32 | F16 | BF16 => None,
        Q4_0 | Q5_0 | Q8_0 | Q8_1 => Some(Q8_0),
        Q4_1 | Q5_1 => Some(Q8_1),
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | Q8_K => Some(Q8_K),
    }
}

/// Quantizes `x` to the activation format `ty` (Q8_0, Q8_1 or Q8_K) with the SIMD path the
/// products use, as ggml blocks (bit-identical to [`super::quantize`]'s reference quantizer).
/// Errors: another `ty` (`UnsupportedType`), `x.len()` not whole blocks (`NotBlockMultiple`).
pub fn quantize_activations_with(backend: crate::Backend, ty: GgmlType, x: &[f32]) -> crate::Result<Vec<u8>> {
    if !matches!(ty, GgmlType::Q8_0 | GgmlType::Q8_1 | GgmlType::Q8_K) {
        return Err(crate::Error::UnsupportedType { id: ty.id(), name: ty.name() });
    }
    ty.bytes_for(x.len())?;
    if x.is_empty() {
        return Ok(Vec::new());
    }
    let a = crate::backend::dispatch!(backend, |s| QActs::quantize(s, ty, x, x.len()));
    Ok(a.row_bytes(0))
}

/// `rows` quantized activation rows of `cols` values.
pub(crate) struct QActs {
    pub ty: GgmlType,
    pub cols: usize,
    pub qs: Vec<i8>,
    /// One per block.
    pub d: Vec<f32>,
    /// Q8_0: `d·Σq` per block (exact, with the f16 `d`); Q8_1: its `s` as llama.cpp stores it.
    pub sums: Vec<f32>,
    /// Q8_K: the sum of each 16 values.
    pub bsums: Vec<i16>,
}

/// One row of [`QActs`].
#[derive(Clone, Copy)]
pub(crate) struct ActRow<'a> {
    pub qs: &'a [i8],
    pub d: &'a [f32],
    pub sums: &'a [f32],
    pub bsums: &'a [i16],
}

impl QActs {
    /// Quantizes `x` (`x.len() / cols` rows; `cols` a whole number of `ty`'s blocks, checked
    /// by the caller) to `ty` (Q8_0, Q8_1 or Q8_K).
    #[inline(always)] // into `vectorize`: compiled alone, its intrinsics would be calls
    pub fn quantize<S: Simd>(s: S, ty: GgmlType, x: &[f32], cols: usize) -> QActs {
        let bs = ty.block_size();
        let nb = x.len() / bs;
        let mut a = QActs { ty, cols, qs: vec![0; x.len()], d: vec![0.0; nb], sums: Vec::new(), bsums: Vec::new() };
        match ty {
            GgmlType::Q8_K => {
                a.bsums = vec![0; x.len() / 16];
                for ((x, q), (d, bs)) in x.chunks_exact(256).zip(a.qs.chunks_exact_mut(256)).zip(a.d.iter_mut().zip(a.bsums.chunks_exact_mut(16))) {
                    *d = q8k_block(s, x, q, bs);
                }
            }
            _ => {
                // Q8_0 rows carry the sums too (not part of its file format): Q4_0 and Q5_0
                // then multiply unsigned `q` and take the offset out as a min (`−8·d`, `−16·d`).
                a.sums = vec![0.0; nb];
                let with_sum = ty == GgmlType::Q8_1;
                for (i, (x, q)) in x.chunks_exact(32).zip(a.qs.chunks_exact_mut(32)).enumerate() {
                    let (d32, sum) = q8_block(s, x, q);
                    let d = f16::from_f32(d32).to_f32();
                    a.d[i] = d;
                    // Q8_1 carries llama.cpp's `s` (f16 of Σq times the unrounded d): the
                    // products of Q4_1/Q5_1 weights then round their min term as llama.cpp does.
                    a.sums[i] = if with_sum { f16::from_f32(sum * d32).to_f32() } else { d * sum };
                }
            }
        }
        a
    }

    pub fn row(&self, r: usize) -> ActRow<'_> {
        let nb = self.cols / self.ty.block_size();
        let sums = if self.sums.is_empty() { &[][..] } else { &self.sums[r * nb..(r + 1) * nb] };
        let bsums = if self.bsums.is_empty() { &[][..] } else { &self.bsums[r * self.cols / 16..(r + 1) * self.cols / 16] };
        ActRow { qs: &self.qs[r * self.cols..(r + 1) * self.cols], d: &self.d[r * nb..(r + 1) * nb], sums, bsums }
    }

    /// Row `r` as ggml blocks (what the reference quantizer writes): for tests and for
    /// handing activations to other code.
    pub fn row_bytes(&self, r: usize) -> Vec<u8> {
        let a = self.row(r);
        let mut out = Vec::new();
        match self.ty {
            GgmlType::Q8_K => {
                for (i, q) in a.qs.chunks_exact(256).enumerate() {
                    out.extend_from_slice(&a.d[i].to_le_bytes());
                    out.extend(q.iter().map(|&v| v as u8));
                    for b in &a.bsums[16 * i..16 * i + 16] {
                        out.extend_from_slice(&b.to_le_bytes());
                    }
                }
            }
            ty => {
                for (i, q) in a.qs.chunks_exact(32).enumerate() {
                    out.extend_from_slice(&f16::from_f32(a.d[i]).to_le_bytes());
                    if ty == GgmlType::Q8_1 {
                        let nb = self.cols / 32;
                        out.extend_from_slice(&f16::from_f32(self.sums[r * nb + i]).to_le_bytes());
                    }
                    out.extend(q.iter().map(|&v| v as u8));
                }
            }
        }
        out
    }
}

/// `roundf`: to nearest, ties away from zero (the reference Q8_0/Q8_1 quantizers use it).
#[inline(always)]
fn round_away<S: Simd>(s: S, v: S::V) -> S::V {
    let r = s.round(v);
    let tie = s.eq(s.abs(s.sub(v, r)), s.splat(0.5));
    let away = s.add(v, s.or(s.splat(0.5), s.sign_bit(v)));
    s.select(tie, away, r)
}

/// A rounded level as the byte it is stored in: NaN (from NaN activations) is 0, as the
/// reference's `(int8_t)` cast of it is here.
#[inline(always)]
fn level<S: Simd>(s: S, v: S::V) -> S::V {
    s.select(s.is_nan(v), s.zero(), v)
}

/// One Q8_0 block of 32: writes `q`, returns `d` (before its f16 rounding) and `Σq`.
#[inline(always)]
fn q8_block<S: Simd>(s: S, x: &[f32], q: &mut [i8]) -> (f32, f32) {
    let mut m = s.zero();
    for c in x.chunks_exact(S::LANES) {
        m = s.max(m, s.abs(s.load(c)));
    }
    let amax = s.reduce_max(m);
    let d = amax / 127.0;
    let id = s.splat(if d != 0.0 { 1.0 / d } else { 0.0 });
    // The levels are integers of at most 127: their f32 sum is exact.
    let mut sum = s.zero();
    for (c, q) in x.chunks_exact(S::LANES).zip(q.chunks_exact_mut(S::LANES)) {
        let r = level(s, round_away(s, s.mul(s.load(c), id)));
        s.store_i8(r, q);
        sum = s.add(sum, r);
    }
    (d, s.reduce_add(sum))
}

/// One Q8_K block of 256: writes `q` and `bsums`, returns `d`.
#[inline(always)]
fn q8k_block<S: Simd>(s: S, x: &[f32], q: &mut [i8], bsums: &mut [i16]) -> f32 {
    let mut m = s.zero();
    for c in x.chunks_exact(S::LANES) {
        m = s.max(m, s.abs(s.load(c)));
    }
    let amax = s.reduce_max(m);
    // The reference keeps the first value of largest magnitude, with its sign.
    let first = x.chunks_exact(S::LANES).find_map(|c| s.first_set(s.eq(s.abs(s.load(c)), s.splat(amax))).map(|j| c[j]));
    let max = match first {
        Some(v) if amax != 0.0 => v,
        _ => {
            q.fill(0);
            bsums.fill(0);
            return 0.0;
        }
    };
    let iscale = -127.0 / max;
    let is = s.splat(iscale);
    // Per 16 values (a whole number of vectors: LANES divides 16), the levels and their sum.
    for ((x, q), b) in x.chunks_exact(16).zip(q.chunks_exact_mut(16)).zip(bsums.iter_mut()) {
        let mut sum = s.zero();
        for (c, q) in x.chunks_exact(S::LANES).zip(q.chunks_exact_mut(S::LANES)) {
            // `nearest_int`: ties to even, as the magic-number add does.
            let r = level(s, s.min(s.round(s.mul(is, s.load(c))), s.splat(127.0)));
            s.store_i8(r, q);
            sum = s.add(sum, r);
        }
        *b = s.reduce_add(sum) as i16;
    }
    1.0 / iscale
}
