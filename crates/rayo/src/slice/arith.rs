//! Element-wise arithmetic: add sub mul div, scale, abs sqrt exp ln, clip.

use super::{binary, named_binary, named_unary, unary};
use crate::ops::{BinaryOp, UnaryOp};
use crate::{Backend, Result};

named_binary!(
    /// `out[i] = a[i] + b[i]`.
    add, BinaryOp::Add
);
named_binary!(
    /// `out[i] = a[i] - b[i]`.
    sub, BinaryOp::Sub
);
named_binary!(
    /// `out[i] = a[i] * b[i]`.
    mul, BinaryOp::Mul
);
named_binary!(
    /// `out[i] = a[i] / b[i]` (IEEE: x/0 is ±inf or NaN).
    div, BinaryOp::Div
);

/// `out[i] = k * x[i]`.
pub fn scale(backend: Backend, x: &[f32], k: f32, out: &mut [f32]) -> Result<()> {
    unary(backend, UnaryOp::Scale(k), x, out)
}

named_unary!(
    /// `|x|` (clears the sign bit: |−0| = 0, |NaN| = NaN). Exact.
    abs, UnaryOp::Abs
);
named_unary!(
    /// Square root, correctly rounded (the instruction); NaN for x < 0, −0 for −0.
    sqrt, UnaryOp::Sqrt
);
named_unary!(
    /// `e^x`. Max error 1 ULP against f64 over [−88, 88] with FMA (AVX2, AVX-512, NEON), 2 ULP
    /// without (SSE2, SIMD128, scalar); 0 below −104, inf above 88.73, NaN for NaN; denormal
    /// results rounded once.
    exp, UnaryOp::Exp
);
named_unary!(
    /// Natural log. Max error 1 ULP (2 without FMA) for positive normal and denormal inputs;
    /// ln(±0) = −inf, ln(x < 0) = NaN, ln(inf) = inf, NaN for NaN.
    ln, UnaryOp::Ln
);

/// Clamps every element to `[min, max]` (NaN stays NaN). An error if `min > max` or either
/// bound is NaN.
pub fn clip(backend: Backend, x: &[f32], min: f32, max: f32, out: &mut [f32]) -> Result<()> {
    unary(backend, UnaryOp::Clip(min, max), x, out)
}

/// Checks clip's bounds (for callers that allocate before running the op).
pub(crate) fn check_clip(min: f32, max: f32) -> Result<()> {
    UnaryOp::Clip(min, max).validate()
}

/// `out[i] = alpha·x[i] + y[i]` (one fused multiply-add where the CPU has FMA).
pub fn axpy(backend: Backend, alpha: f32, x: &[f32], y: &[f32], out: &mut [f32]) -> Result<()> {
    binary(backend, BinaryOp::Axpy(alpha), x, y, out)
}
