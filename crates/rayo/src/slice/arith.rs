//! Element-wise arithmetic: add sub mul div, scale, abs sqrt exp ln, clip.

use super::{apply, apply2, unary_op, GRAIN_MATH, GRAIN_STREAM};
use crate::backend::dispatch;
use crate::cpu::kernels::elementwise::{map, map2};
use crate::cpu::math;
use crate::cpu::simd::SimdExt;
use crate::{Backend, Error, Result};

macro_rules! binary_op {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub fn $name(backend: Backend, a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()> {
            apply2(stringify!($name), a, b, out, GRAIN_STREAM, |a, b, o| {
                dispatch!(backend, |s| map2(s, a, b, o, |x, y| s.$name(x, y)))
            })
        }
    };
}

binary_op!(
    /// `out[i] = a[i] + b[i]`.
    add
);
binary_op!(
    /// `out[i] = a[i] - b[i]`.
    sub
);
binary_op!(
    /// `out[i] = a[i] * b[i]`.
    mul
);
binary_op!(
    /// `out[i] = a[i] / b[i]` (IEEE: x/0 is ±inf or NaN).
    div
);

/// `out[i] = k * x[i]`.
pub fn scale(backend: Backend, x: &[f32], k: f32, out: &mut [f32]) -> Result<()> {
    apply("scale", x, out, GRAIN_STREAM, |x, o| dispatch!(backend, |s| map(s, x, o, |v| s.mul(v, s.splat(k)))))
}

unary_op!(
    /// `|x|` (clears the sign bit: |−0| = 0, |NaN| = NaN). Exact.
    abs, GRAIN_STREAM, |s, v| s.abs(v)
);
unary_op!(
    /// Square root, correctly rounded (the instruction); NaN for x < 0, −0 for −0.
    sqrt, GRAIN_STREAM, |s, v| s.sqrt(v)
);
unary_op!(
    /// `e^x`. Max error 1 ULP against f64 over [−88, 88] with FMA (AVX2, AVX-512, NEON), 2 ULP
    /// without (SSE2, SIMD128, scalar); 0 below −104, inf above 88.73, NaN for NaN; denormal
    /// results rounded once.
    exp, GRAIN_MATH, |s, v| math::exp(s, v)
);
unary_op!(
    /// Natural log. Max error 1 ULP (2 without FMA) for positive normal and denormal inputs;
    /// ln(±0) = −inf, ln(x < 0) = NaN, ln(inf) = inf, NaN for NaN.
    ln, GRAIN_MATH, |s, v| math::ln(s, v)
);

/// Clamps every element to `[min, max]` (NaN stays NaN). An error if `min > max` or either
/// bound is NaN.
pub fn clip(backend: Backend, x: &[f32], min: f32, max: f32, out: &mut [f32]) -> Result<()> {
    check_clip(min, max)?;
    apply("clip", x, out, GRAIN_STREAM, |x, o| {
        // max(c, NaN) and min(c, NaN) return the NaN (see `Simd`), so NaN passes.
        dispatch!(backend, |s| map(s, x, o, |v| s.min(s.splat(max), s.max(s.splat(min), v))))
    })
}

pub(crate) fn check_clip(min: f32, max: f32) -> Result<()> {
    if min.is_nan() || max.is_nan() || min > max {
        let (name, value) = if min.is_nan() { ("min", min) } else { ("max", max) };
        return Err(Error::InvalidParameter {
            op: "clip",
            name,
            value: value as f64,
            reason: "need min <= max, neither NaN",
        });
    }
    Ok(())
}
