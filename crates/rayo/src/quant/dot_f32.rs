//! Dot products of one weight row with `R` rows of f32 activations, dequantizing on the fly:
//! each block (or 256 values of a float type) is decoded once into a stack buffer by the SIMD
//! dequantizer, then multiplied with all `R` rows. No activation quantization: the result
//! differs from the f64 product of the dequantized weights only by f32 rounding.

use super::blocks::*;
use super::codec::Unpack;
use super::{float, kernel, GgmlType};
use crate::cpu::simd::{Simd, SimdExt};

/// Values decoded at a time for the float types.
const CHUNK: usize = 256;

/// `[w · x[r] for r in 0..R]`: `w` holds `x[r].len()` values of `ty` (checked by the caller).
#[inline(always)]
pub(crate) fn dot_rows_f32<S: Simd, const R: usize>(s: S, ty: GgmlType, w: &[u8], x: &[&[f32]; R]) -> [f32; R] {
    use GgmlType::*;
    match ty {
        // The conversions inline into this ISA's context (closures, not function pointers,
        // which were compiled without its features), so their loops vectorize.
        // Aligned f32 weights are read in place (little-endian targets only: the bytes are the
        // file's); otherwise each chunk is decoded.
        F32 => match bytemuck::try_cast_slice::<u8, f32>(w) {
            Ok(wf) if cfg!(target_endian = "little") => f32_rows(s, wf, x),
            _ => floats::<S, R, 4>(s, w, x, f32::from_le_bytes),
        },
        F16 => floats::<S, R, 2>(
            s,
            w,
            x,
            #[inline(always)]
            |b| float::f16_bits_to_f32(u16::from_le_bytes(b)),
        ),
        BF16 => floats::<S, R, 2>(
            s,
            w,
            x,
            #[inline(always)]
            |b| float::bf16_bits_to_f32(u16::from_le_bytes(b)),
        ),
        Q4_0 => blocks::<S, R, BlockQ4_0>(s, w, x),
        Q4_1 => blocks::<S, R, BlockQ4_1>(s, w, x),
        Q5_0 => blocks::<S, R, BlockQ5_0>(s, w, x),
        Q5_1 => blocks::<S, R, BlockQ5_1>(s, w, x),
        Q8_0 => blocks::<S, R, BlockQ8_0>(s, w, x),
        Q8_1 => blocks::<S, R, BlockQ8_1>(s, w, x),
        Q2_K => blocks::<S, R, BlockQ2K>(s, w, x),
        Q3_K => blocks::<S, R, BlockQ3K>(s, w, x),
        Q4_K => blocks::<S, R, BlockQ4K>(s, w, x),
        Q5_K => blocks::<S, R, BlockQ5K>(s, w, x),
        Q6_K => blocks::<S, R, BlockQ6K>(s, w, x),
        Q8_K => blocks::<S, R, BlockQ8K>(s, w, x),
    }
}

/// Adds `buf · x[r][at..at + buf.len()]` to each accumulator.
#[inline(always)]
fn accumulate<S: Simd, const R: usize>(s: S, buf: &[f32], x: &[&[f32]; R], at: usize, acc: &mut [S::V; R]) {
    let n = buf.len();
    let full = n - n % S::LANES;
    for k in (0..full).step_by(S::LANES) {
        let w = s.load(&buf[k..]);
        for r in 0..R {
            acc[r] = s.mul_add(w, s.load(&x[r][at + k..]), acc[r]);
        }
    }
    if full < n {
        let w = s.load_partial(&buf[full..], 0.0);
        for r in 0..R {
            acc[r] = s.mul_add(w, s.load_partial(&x[r][at + full..at + n], 0.0), acc[r]);
        }
    }
}

/// f32 weights in place: two accumulators per row (the FMA latency is not a chain).
#[inline(always)]
fn f32_rows<S: Simd, const R: usize>(s: S, w: &[f32], x: &[&[f32]; R]) -> [f32; R] {
    let mut acc = [[s.zero(); R]; 2];
    let step = 2 * S::LANES;
    let full = w.len() - w.len() % step;
    for k in (0..full).step_by(step) {
        let (w0, w1) = (s.load(&w[k..]), s.load(&w[k + S::LANES..]));
        for r in 0..R {
            acc[0][r] = s.mul_add(w0, s.load(&x[r][k..]), acc[0][r]);
            acc[1][r] = s.mul_add(w1, s.load(&x[r][k + S::LANES..]), acc[1][r]);
        }
    }
    let [mut acc0, acc1] = acc;
    accumulate(s, &w[full..], x, full, &mut acc0);
    let mut out = [0f32; R];
    for r in 0..R {
        out[r] = s.reduce_add(s.add(acc0[r], acc1[r]));
    }
    out
}

#[inline(always)]
fn floats<S: Simd, const R: usize, const SIZE: usize>(s: S, w: &[u8], x: &[&[f32]; R], decode: impl Fn([u8; SIZE]) -> f32) -> [f32; R] {
    let mut acc = [s.zero(); R];
    let mut buf = [0f32; CHUNK];
    for (c, bytes) in w.chunks(CHUNK * SIZE).enumerate() {
        let buf = &mut buf[..bytes.len() / SIZE];
        for (o, v) in buf.iter_mut().zip(bytes.as_chunks::<SIZE>().0) {
            *o = decode(*v);
        }
        accumulate(s, buf, x, c * CHUNK, &mut acc);
    }
    let mut out = [0f32; R];
    for (o, a) in out.iter_mut().zip(acc) {
        *o = s.reduce_add(a);
    }
    out
}

#[inline(always)]
fn blocks<S: Simd, const R: usize, B: Unpack>(s: S, w: &[u8], x: &[&[f32]; R]) -> [f32; R] {
    let mut acc = [s.zero(); R];
    let mut buf = [0f32; 256];
    let buf = &mut buf[..B::VALUES];
    for (i, bytes) in w.chunks_exact(core::mem::size_of::<B>()).enumerate() {
        // A copy of the block: the bytes may sit at any alignment.
        let block: B = bytemuck::pod_read_unaligned(bytes);
        kernel::dequantize_blocks(s, core::slice::from_ref(&block), buf);
        accumulate(s, buf, x, i * B::VALUES, &mut acc);
    }
    let mut out = [0f32; R];
    for (o, a) in out.iter_mut().zip(acc) {
        *o = s.reduce_add(a);
    }
    out
}
