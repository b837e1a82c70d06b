//! Activations: relu leaky_relu elu selu sigmoid tanh swish gelu mish hardswish softmax
//! log_softmax. Each bound below is measured by `tests/accuracy.rs` on every instruction set.

use super::{apply, named_unary, unary, GRAIN_MATH, GRAIN_REDUCE, GRAIN_STREAM};
use crate::backend::dispatch;
use crate::cpu::kernels::functions as f;
use crate::cpu::kernels::{elementwise::map, reduce, softmax as sm};
use crate::cpu::parallel::{for_each_mut, map_reduce, parts, zip_map};
use crate::error::check_len;
use crate::ops::UnaryOp;
use crate::{Backend, Error, Result};

pub use crate::ops::{SELU_ALPHA, SELU_LAMBDA};

named_unary!(
    /// `max(0, x)`: 0 for x ≤ 0 (including −0), NaN for NaN. Exact.
    relu, UnaryOp::Relu
);
named_unary!(
    /// `1 / (1 + e^−x)`. Max error 3 ULP; 0 and 1 at ∓inf; NaN for NaN.
    sigmoid, UnaryOp::Sigmoid
);
named_unary!(
    /// tanh. Max error 2 ULP; odd, ±1 at ±inf; NaN for NaN.
    tanh, UnaryOp::Tanh
);
named_unary!(
    /// `x · sigmoid(x)` (SiLU). Max error 4 ULP; −0 at −inf; NaN for NaN.
    swish, UnaryOp::Swish
);
named_unary!(
    /// Exact GELU `x · Φ(x)` (erf form, not the tanh approximation). Max error 4 ULP where
    /// |result| ≥ 1e−30 (measured: 2.3 ULP with FMA, 2.7 without), absolute error ≤ 1e−37 below
    /// that (1.5e−37 on scalar/SSE2/SIMD128, which lack FMA); −0 at −inf; NaN for NaN.
    gelu, UnaryOp::Gelu
);
named_unary!(
    /// `x · tanh(ln(1 + e^x))`. Max error 4 ULP where |result| ≥ 1e−30, absolute error ≤ 1e−37
    /// below; −0 at −inf; NaN for NaN.
    mish, UnaryOp::Mish
);
named_unary!(
    /// SELU: `λ·x` for x > 0, `λ·α·(e^x − 1)` otherwise (expm1, accurate near 0).
    /// Max error 3 ULP; keeps −0; NaN for NaN.
    selu, UnaryOp::Selu
);
named_unary!(
    /// Hard swish: 0 for x ≤ −3, x for x ≥ 3, `x·(x+3)/6` between. Max error 2 ULP.
    hardswish, UnaryOp::Hardswish
);

/// `x` for x > 0, `alpha·x` otherwise. Exact up to the product's rounding.
pub fn leaky_relu(backend: Backend, x: &[f32], alpha: f32, out: &mut [f32]) -> Result<()> {
    unary(backend, UnaryOp::LeakyRelu(alpha), x, out)
}

/// ELU: `x` for x > 0, `alpha·(e^x − 1)` otherwise (expm1). Max error 3 ULP; keeps −0.
pub fn elu(backend: Backend, x: &[f32], alpha: f32, out: &mut [f32]) -> Result<()> {
    unary(backend, UnaryOp::Elu(alpha), x, out)
}

/// `e^(x_i − max) / Σ e^(x_j − max)`: stable for large inputs. Relative error ≤ 1e−6 per
/// element. Any NaN, or an infinite maximum, makes every output NaN (as the f64 formula
/// does). An error for an empty slice.
pub fn softmax(backend: Backend, x: &[f32], out: &mut [f32]) -> Result<()> {
    check_len("softmax", x.len(), out.len())?;
    let m = super::max(backend, x).map_err(|_| Error::EmptyInput { op: "softmax" })?;
    if !m.is_finite() {
        out.fill(f32::NAN);
        return Ok(());
    }
    let total = if parts(x.len(), GRAIN_MATH) <= 1 {
        dispatch!(backend, |s| sm::exp_shifted_into(s, x, m, out))
    } else {
        zip_map(x, out, GRAIN_MATH, &|xp, op| dispatch!(backend, |s| map(s, xp, op, f::ExpShifted { m })));
        map_reduce(out, GRAIN_REDUCE, &|op| dispatch!(backend, |s| reduce::sum(s, op)), &|p, q| p + q)
    };
    let k = (1.0 / total) as f32;
    for_each_mut(out, GRAIN_STREAM, &|o| dispatch!(backend, |s| sm::scale_in_place(s, o, k)));
    Ok(())
}

/// `(x_i − max) − ln Σ e^(x_j − max)`. Absolute error ≤ 2e−6·(1 + |result|). Any NaN or an
/// infinite maximum makes every output NaN. An error for an empty slice.
pub fn log_softmax(backend: Backend, x: &[f32], out: &mut [f32]) -> Result<()> {
    check_len("log_softmax", x.len(), out.len())?;
    let m = super::max(backend, x).map_err(|_| Error::EmptyInput { op: "log_softmax" })?;
    if !m.is_finite() {
        out.fill(f32::NAN);
        return Ok(());
    }
    let total = map_reduce(x, GRAIN_MATH, &|xp| dispatch!(backend, |s| sm::sum_exp_shifted(s, xp, m)), &|p, q| p + q);
    let lse = total.ln() as f32;
    apply("log_softmax", x, out, GRAIN_STREAM, |xp, op| dispatch!(backend, |s| map(s, xp, op, f::SubTwice { m, c: lse })))
}
