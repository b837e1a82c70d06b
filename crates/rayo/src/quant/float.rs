//! The float types as ggml stores them: F32, F16 (IEEE half, round to nearest even) and BF16
//! (the top 16 bits of an f32, rounded to nearest even, NaN kept quiet:
//! `ggml_compute_fp32_to_bf16`). Little-endian bytes.

use half::f16;

use crate::backend::dispatch;
use crate::Backend;

/// ggml's f32 → bf16 bits: a NaN stays a (quiet) NaN; everything else rounds to nearest even.
#[inline(always)]
pub fn f32_to_bf16_bits(x: f32) -> u16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    // Cannot overflow: the largest non-NaN pattern is 0xff80_0000.
    ((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

/// bf16 bits → f32 (exact).
#[inline(always)]
pub fn bf16_bits_to_f32(b: u16) -> f32 {
    f32::from_bits((b as u32) << 16)
}

/// f16 bits → f32 (exact), branch-free so that loops of it vectorize: ggml's
/// `ggml_compute_fp16_to_fp32` (normals and inf/NaN through an exponent shift and one
/// multiply, subnormals through a magic-number subtraction).
#[inline(always)]
pub fn f16_bits_to_f32(h: u16) -> f32 {
    let w = (h as u32) << 16;
    let sign = w & 0x8000_0000;
    let two_w = w.wrapping_add(w);
    let normalized = f32::from_bits((two_w >> 4) + (0xE0 << 23)) * f32::from_bits(0x0780_0000); // 2^-112
    let denormalized = f32::from_bits((two_w >> 17) | (126 << 23)) - 0.5;
    let bits = if two_w < (1 << 27) { denormalized.to_bits() } else { normalized.to_bits() };
    f32::from_bits(sign | bits)
}

/// `bytes` (little-endian, 2 or 4 bytes per value per `width`) to f32 through `f`.
#[inline(always)]
fn decode<const W: usize>(bytes: &[u8], out: &mut [f32], f: impl Fn([u8; W]) -> f32) {
    for (o, c) in out.iter_mut().zip(bytes.chunks_exact(W)) {
        *o = f(c.try_into().unwrap_or([0; W]));
    }
}

pub(crate) fn dequantize_f32(bytes: &[u8], out: &mut [f32]) {
    decode::<4>(bytes, out, f32::from_le_bytes)
}

pub(crate) fn dequantize_f16(backend: Backend, bytes: &[u8], out: &mut [f32]) {
    // Compiled for the backend's ISA, where the branch-free conversion vectorizes.
    dispatch!(backend, |_s| decode::<2>(bytes, out, |b| f16_bits_to_f32(u16::from_le_bytes(b))))
}

pub(crate) fn dequantize_bf16(bytes: &[u8], out: &mut [f32]) {
    decode::<2>(bytes, out, |b| bf16_bits_to_f32(u16::from_le_bytes(b)))
}

#[inline(always)]
fn encode<const W: usize>(src: &[f32], out: &mut [u8], f: impl Fn(f32) -> [u8; W]) {
    for (c, &x) in out.chunks_exact_mut(W).zip(src) {
        c.copy_from_slice(&f(x));
    }
}

pub(crate) fn quantize_f32(src: &[f32], out: &mut [u8]) {
    encode::<4>(src, out, f32::to_le_bytes)
}

pub(crate) fn quantize_f16(src: &[f32], out: &mut [u8]) {
    encode::<2>(src, out, |x| f16::from_f32(x).to_le_bytes())
}

pub(crate) fn quantize_bf16(src: &[f32], out: &mut [u8]) {
    encode::<2>(src, out, |x| f32_to_bf16_bits(x).to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even_and_keeps_nan_quiet() {
        assert_eq!(f32_to_bf16_bits(1.0), 0x3f80);
        // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16_bits(f32::MAX), 0x7f80); // rounds up to inf
        assert_eq!(f32_to_bf16_bits(f32::from_bits(0x7f80_0001)), 0x7fc0);
        assert_eq!(f32_to_bf16_bits(f32::NEG_INFINITY), 0xff80);
        assert_eq!(bf16_bits_to_f32(0xbf80), -1.0);
    }

    #[test]
    fn f16_conversion_is_exact_for_every_pattern() {
        for h in 0..=u16::MAX {
            let (got, want) = (f16_bits_to_f32(h), f16::from_bits(h).to_f32());
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{h:#06x}: {got:e} vs {want:e}");
        }
    }
}
