//! Element-wise arithmetic: add sub mul div, scale, abs sqrt exp ln, clip.

use super::{apply, apply2, unary_op, GRAIN_MATH, GRAIN_STREAM};
use crate::backend::dispatch;
use crate::cpu::kernels::elementwise::{map, map2};
use crate::cpu::kernels::functions as f;
use crate::{Backend, Error, Result};

macro_rules! binary_op {
    ($(#[$doc:meta])* $name:ident, $f:expr) => {
        $(#[$doc])*
        pub fn $name(backend: Backend, a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()> {
            apply2(stringify!($name), a, b, out, GRAIN_STREAM, |a, b, o| dispatch!(backend, |s| map2(s, a, b, o, $f)))
        }
    };
}

binary_op!(
    /// `out[i] = a[i] + b[i]`.
    add, f::Add
);
binary_op!(
    /// `out[i] = a[i] - b[i]`.
    sub, f::Sub
);
binary_op!(
    /// `out[i] = a[i] * b[i]`.
    mul, f::Mul
);
binary_op!(
    /// `out[i] = a[i] / b[i]` (IEEE: x/0 is ±inf or NaN).
    div, f::Div
);

/// `out[i] = k * x[i]`.
pub fn scale(backend: Backend, x: &[f32], k: f32, out: &mut [f32]) -> Result<()> {
    apply("scale", x, out, GRAIN_STREAM, |x, o| dispatch!(backend, |s| map(s, x, o, f::Scale { k })))
}

unary_op!(
    /// `|x|` (clears the sign bit: |−0| = 0, |NaN| = NaN). Exact.
    abs, GRAIN_STREAM, f::Abs
);
unary_op!(
    /// Square root, correctly rounded (the instruction); NaN for x < 0, −0 for −0.
    sqrt, GRAIN_STREAM, f::Sqrt
);
unary_op!(
    /// `e^x`. Max error 1 ULP against f64 over [−88, 88] with FMA (AVX2, AVX-512, NEON), 2 ULP
    /// without (SSE2, SIMD128, scalar); 0 below −104, inf above 88.73, NaN for NaN; denormal
    /// results rounded once.
    exp, GRAIN_MATH, f::Exp
);
unary_op!(
    /// Natural log. Max error 1 ULP (2 without FMA) for positive normal and denormal inputs;
    /// ln(±0) = −inf, ln(x < 0) = NaN, ln(inf) = inf, NaN for NaN.
    ln, GRAIN_MATH, f::Ln
);

/// Clamps every element to `[min, max]` (NaN stays NaN). An error if `min > max` or either
/// bound is NaN.
pub fn clip(backend: Backend, x: &[f32], min: f32, max: f32, out: &mut [f32]) -> Result<()> {
    check_clip(min, max)?;
    apply("clip", x, out, GRAIN_STREAM, |x, o| dispatch!(backend, |s| map(s, x, o, f::Clip { lo: min, hi: max })))
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

/// `out[i] = alpha·x[i] + y[i]` (one fused multiply-add where the CPU has FMA).
pub fn axpy(backend: Backend, alpha: f32, x: &[f32], y: &[f32], out: &mut [f32]) -> Result<()> {
    apply2("axpy", x, y, out, GRAIN_STREAM, |x, y, o| {
        dispatch!(backend, |s| map2(s, x, y, o, f::Axpy { alpha }))
    })
}
