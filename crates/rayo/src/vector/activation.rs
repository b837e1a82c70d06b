//! Activations: relu leaky_relu elu selu sigmoid tanh swish gelu mish hardswish softmax
//! log_softmax. Each bound below is measured by `tests/accuracy.rs` on every instruction set.

use super::{unary_op, Vector, GRAIN_MATH, GRAIN_REDUCE, GRAIN_STREAM};
use crate::backend::dispatch;
use crate::cpu::kernels::{elementwise::map, reduce, softmax as sm};
use crate::cpu::parallel::{for_each_mut, map_reduce, parts, zip_map};
use crate::cpu::{math, simd::SimdExt};
use crate::error::check_len;
use crate::{Error, Result};

/// SELU's λ and α (Klambauer et al. 2017).
pub const SELU_LAMBDA: f32 = 1.050_700_987_355_480_5;
pub const SELU_ALPHA: f32 = 1.673_263_242_354_377_3;

impl Vector {
    unary_op!(
        /// `max(0, x)`: 0 for x ≤ 0 (including −0), NaN for NaN. Exact.
        relu, relu_into, GRAIN_STREAM, |s, v| s.select(s.le(v, s.zero()), s.zero(), v)
    );
    unary_op!(
        /// `1 / (1 + e^−x)`. Max error 3 ULP; 0 and 1 at ∓inf; NaN for NaN.
        sigmoid, sigmoid_into, GRAIN_MATH, |s, v| math::sigmoid(s, v)
    );
    unary_op!(
        /// tanh. Max error 2 ULP; odd, ±1 at ±inf; NaN for NaN.
        tanh, tanh_into, GRAIN_MATH, |s, v| math::tanh(s, v)
    );
    unary_op!(
        /// `x · sigmoid(x)` (SiLU). Max error 4 ULP; −0 at −inf; NaN for NaN.
        swish, swish_into, GRAIN_MATH, |s, v| math::swish(s, v)
    );
    unary_op!(
        /// Exact GELU `x · Φ(x)` (erf form). Max error 4 ULP where |result| ≥ 1e−30, absolute
        /// error ≤ 1e−37 below that; −0 at −inf; NaN for NaN.
        gelu, gelu_into, GRAIN_MATH, |s, v| math::gelu(s, v)
    );
    unary_op!(
        /// `x · tanh(ln(1 + e^x))`. Max error 4 ULP where |result| ≥ 1e−30, absolute error
        /// ≤ 1e−37 below; −0 at −inf; NaN for NaN.
        mish, mish_into, GRAIN_MATH, |s, v| math::mish(s, v)
    );
    unary_op!(
        /// SELU: `λ·x` for x > 0, `λ·α·(e^x − 1)` otherwise (expm1, accurate near 0).
        /// Max error 3 ULP; keeps −0; NaN for NaN.
        selu, selu_into, GRAIN_MATH, |s, v| {
            let neg = s.mul(s.splat(SELU_ALPHA), math::expm1_nonpositive(s, v));
            s.mul(s.splat(SELU_LAMBDA), s.select(s.lt(s.zero(), v), v, neg))
        }
    );
    unary_op!(
        /// Hard swish: 0 for x ≤ −3, x for x ≥ 3, `x·(x+3)/6` between. Max error 2 ULP.
        hardswish, hardswish_into, GRAIN_STREAM, |s, v| {
            let mid = s.mul(s.mul(v, s.add(v, s.splat(3.0))), s.splat(1.0 / 6.0));
            let hi = s.select(s.le(s.splat(3.0), v), v, mid);
            s.select(s.le(v, s.splat(-3.0)), s.zero(), hi)
        }
    );

    /// `x` for x > 0, `alpha·x` otherwise (−0 gives `alpha·−0`). Exact up to the product.
    pub fn leaky_relu(&self, alpha: f32) -> Vector {
        self.fresh(|o| self.leaky_relu_into(alpha, o))
    }

    /// [`Vector::leaky_relu`] written into `out`; allocates nothing.
    pub fn leaky_relu_into(&self, alpha: f32, out: &mut [f32]) -> Result<()> {
        let b = self.backend;
        self.apply("leaky_relu", out, GRAIN_STREAM, |x, o| {
            dispatch!(b, |s| map(s, x, o, |v| s.select(s.lt(s.zero(), v), v, s.mul(s.splat(alpha), v))))
        })
    }

    /// ELU: `x` for x > 0, `alpha·(e^x − 1)` otherwise (expm1). Max error 3 ULP; keeps −0.
    pub fn elu(&self, alpha: f32) -> Vector {
        self.fresh(|o| self.elu_into(alpha, o))
    }

    /// [`Vector::elu`] written into `out`; allocates nothing.
    pub fn elu_into(&self, alpha: f32, out: &mut [f32]) -> Result<()> {
        let b = self.backend;
        self.apply("elu", out, GRAIN_MATH, |x, o| {
            dispatch!(b, |s| map(s, x, o, |v| {
                let neg = s.mul(s.splat(alpha), math::expm1_nonpositive(s, v));
                s.select(s.lt(s.zero(), v), v, neg)
            }))
        })
    }

    /// `e^(x_i − max) / Σ e^(x_j − max)`: stable for large inputs. Relative error ≤ 1e−6 per
    /// element (exp's 1 ULP plus the blocked sum). Any NaN, or an infinite maximum, makes
    /// every output NaN. An error for an empty vector.
    pub fn softmax(&self) -> Result<Vector> {
        if self.is_empty() {
            return Err(Error::EmptyInput { op: "softmax" });
        }
        Ok(self.fresh(|o| self.softmax_into(o)))
    }

    /// [`Vector::softmax`] written into `out`; allocates nothing.
    pub fn softmax_into(&self, out: &mut [f32]) -> Result<()> {
        check_len("softmax", self.len(), out.len())?;
        let m = self.max().map_err(|_| Error::EmptyInput { op: "softmax" })?;
        if !m.is_finite() {
            out.fill(f32::NAN);
            return Ok(());
        }
        let b = self.backend;
        let x = &self.data;
        let total = if parts(x.len(), GRAIN_MATH) <= 1 {
            dispatch!(b, |s| sm::exp_shifted_into(s, x, m, out))
        } else {
            zip_map(x, out, GRAIN_MATH, &|xp, op| {
                dispatch!(b, |s| map(s, xp, op, |v| math::exp(s, s.sub(v, s.splat(m)))))
            });
            map_reduce(out, GRAIN_REDUCE, &|op| dispatch!(b, |s| reduce::sum(s, op)), &|p, q| p + q)
        };
        let k = (1.0 / total) as f32;
        scale_all(b, out, k);
        Ok(())
    }

    /// `(x_i − max) − ln Σ e^(x_j − max)`. Absolute error ≤ 2e−6·(1 + |result|). Any NaN or
    /// an infinite maximum makes every output NaN. An error for an empty vector.
    pub fn log_softmax(&self) -> Result<Vector> {
        if self.is_empty() {
            return Err(Error::EmptyInput { op: "log_softmax" });
        }
        Ok(self.fresh(|o| self.log_softmax_into(o)))
    }

    /// [`Vector::log_softmax`] written into `out`; allocates nothing.
    pub fn log_softmax_into(&self, out: &mut [f32]) -> Result<()> {
        check_len("log_softmax", self.len(), out.len())?;
        let m = self.max().map_err(|_| Error::EmptyInput { op: "log_softmax" })?;
        if !m.is_finite() {
            out.fill(f32::NAN);
            return Ok(());
        }
        let b = self.backend;
        let total = map_reduce(&self.data, GRAIN_MATH, &|xp| dispatch!(b, |s| sm::sum_exp_shifted(s, xp, m)), &|p, q| p + q);
        let lse = total.ln() as f32;
        self.apply("log_softmax", out, GRAIN_STREAM, |xp, op| {
            dispatch!(b, |s| map(s, xp, op, |v| s.sub(s.sub(v, s.splat(m)), s.splat(lse))))
        })
    }
}

/// out_i *= k, on several threads when large.
fn scale_all(b: crate::Backend, out: &mut [f32], k: f32) {
    for_each_mut(out, GRAIN_STREAM, &|o| dispatch!(b, |s| sm::scale_in_place(s, o, k)));
}
