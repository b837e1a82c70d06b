//! The element-wise functions, one struct each, applied by `elementwise::map`/`map2`.

use super::elementwise::{binary_fn, unary_fn};
use crate::cpu::math;

/// SELU's λ and α (Klambauer et al. 2017).
pub const SELU_LAMBDA: f32 = 1.050_700_987_355_480_5;
pub const SELU_ALPHA: f32 = 1.673_263_242_354_377_3;

binary_fn!(Add, |self, s, a, b| s.add(a, b));
binary_fn!(Sub, |self, s, a, b| s.sub(a, b));
binary_fn!(Mul, |self, s, a, b| s.mul(a, b));
binary_fn!(Div, |self, s, a, b| s.div(a, b));
binary_fn!(Axpy { alpha: f32 }, |self, s, a, b| s.mul_add(s.splat(self.alpha), a, b));

unary_fn!(Scale { k: f32 }, |self, s, v| s.mul(v, s.splat(self.k)));
unary_fn!(Abs, |self, s, v| s.abs(v));
unary_fn!(Sqrt, |self, s, v| s.sqrt(v));
unary_fn!(Exp, |self, s, v| math::exp(s, v));
unary_fn!(Ln, |self, s, v| math::ln(s, v));
// max(c, NaN) and min(c, NaN) return the NaN (see `Simd`), so NaN passes.
unary_fn!(Clip { lo: f32, hi: f32 }, |self, s, v| s.min(s.splat(self.hi), s.max(s.splat(self.lo), v)));
unary_fn!(Relu, |self, s, v| s.select(s.le(v, s.zero()), s.zero(), v));
unary_fn!(LeakyRelu { alpha: f32 }, |self, s, v| s.select(s.lt(s.zero(), v), v, s.mul(s.splat(self.alpha), v)));
unary_fn!(Elu { alpha: f32 }, |self, s, v| {
    let neg = s.mul(s.splat(self.alpha), math::expm1_nonpositive(s, v));
    s.select(s.lt(s.zero(), v), v, neg)
});
unary_fn!(Selu, |self, s, v| {
    let neg = s.mul(s.splat(SELU_ALPHA), math::expm1_nonpositive(s, v));
    s.mul(s.splat(SELU_LAMBDA), s.select(s.lt(s.zero(), v), v, neg))
});
unary_fn!(Sigmoid, |self, s, v| math::sigmoid(s, v));
unary_fn!(Tanh, |self, s, v| math::tanh(s, v));
unary_fn!(Swish, |self, s, v| math::swish(s, v));
unary_fn!(Gelu, |self, s, v| math::gelu(s, v));
unary_fn!(Mish, |self, s, v| math::mish(s, v));
unary_fn!(Hardswish, |self, s, v| {
    let mid = s.mul(s.mul(v, s.add(v, s.splat(3.0))), s.splat(1.0 / 6.0));
    let hi = s.select(s.le(s.splat(3.0), v), v, mid);
    s.select(s.le(v, s.splat(-3.0)), s.zero(), hi)
});
// e^(x − m) (softmax numerator).
unary_fn!(ExpShifted { m: f32 }, |self, s, v| math::exp(s, s.sub(v, s.splat(self.m))));
// (x − m) − c (log-softmax).
unary_fn!(SubTwice { m: f32, c: f32 }, |self, s, v| s.sub(s.sub(v, s.splat(self.m)), s.splat(self.c)));
