//! Element-wise arithmetic: add sub mul div, scale, abs sqrt exp ln, clip.

use super::{unary_op, Vector, GRAIN_MATH, GRAIN_STREAM};
use crate::backend::dispatch;
use crate::cpu::kernels::elementwise::{map, map2};
use crate::cpu::math;
use crate::cpu::simd::SimdExt;
use crate::{Error, Result};

/// Defines `name(&self, other) -> Result<Vector>` and its `_into` twin for a binary op.
macro_rules! binary_op {
    ($(#[$doc:meta])* $name:ident, $into:ident, $method:ident) => {
        $(#[$doc])*
        pub fn $name(&self, other: &Vector) -> Result<Vector> {
            crate::error::check_len(stringify!($name), self.len(), other.len())?;
            Ok(self.fresh(|o| self.$into(other, o)))
        }
        #[doc = concat!("[`Vector::", stringify!($name), "`] written into `out`; allocates nothing.")]
        pub fn $into(&self, other: &Vector, out: &mut [f32]) -> Result<()> {
            let bk = self.backend;
            self.apply2(stringify!($name), &other.data, out, GRAIN_STREAM, |a, b, o| {
                dispatch!(bk, |s| map2(s, a, b, o, |x, y| s.$method(x, y)))
            })
        }
    };
}

impl Vector {
    binary_op!(
        /// `self[i] + other[i]`; the lengths must agree.
        add, add_into, add
    );
    binary_op!(
        /// `self[i] - other[i]`; the lengths must agree.
        sub, sub_into, sub
    );
    binary_op!(
        /// `self[i] * other[i]`; the lengths must agree.
        mul, mul_into, mul
    );
    binary_op!(
        /// `self[i] / other[i]` (IEEE: x/0 is ±inf or NaN); the lengths must agree.
        div, div_into, div
    );

    /// `k * self[i]`.
    pub fn scale(&self, k: f32) -> Vector {
        self.fresh(|o| self.scale_into(k, o))
    }

    /// [`Vector::scale`] written into `out`; allocates nothing.
    pub fn scale_into(&self, k: f32, out: &mut [f32]) -> Result<()> {
        let b = self.backend;
        self.apply("scale", out, GRAIN_STREAM, |x, o| dispatch!(b, |s| map(s, x, o, |v| s.mul(v, s.splat(k)))))
    }

    unary_op!(
        /// `|x|` (clears the sign bit: |−0| = 0, |NaN| = NaN).
        abs, abs_into, GRAIN_STREAM, |s, v| s.abs(v)
    );
    unary_op!(
        /// Square root, correctly rounded (the instruction); NaN for x < 0, −0 for −0.
        sqrt, sqrt_into, GRAIN_STREAM, |s, v| s.sqrt(v)
    );
    unary_op!(
        /// `e^x`. Max error 1 ULP against f64 over [−88, 88] (2 ULP on SSE2/SIMD128/scalar,
        /// which lack FMA); 0 below −104, inf above 88.73, NaN for NaN; denormal results rounded once.
        exp, exp_into, GRAIN_MATH, |s, v| math::exp(s, v)
    );
    unary_op!(
        /// Natural log. Max error 1 ULP (2 without FMA) for positive normal and denormal
        /// inputs; ln(±0) = −inf, ln(x < 0) = NaN, ln(inf) = inf, NaN for NaN.
        ln, ln_into, GRAIN_MATH, |s, v| math::ln(s, v)
    );

    /// Clamps every element to `[min, max]` (NaN stays NaN). An error if `min > max` or
    /// either bound is NaN.
    pub fn clip(&self, min: f32, max: f32) -> Result<Vector> {
        check_clip(min, max)?;
        Ok(self.fresh(|o| self.clip_into(min, max, o)))
    }

    /// [`Vector::clip`] written into `out`; allocates nothing.
    pub fn clip_into(&self, min: f32, max: f32, out: &mut [f32]) -> Result<()> {
        check_clip(min, max)?;
        let b = self.backend;
        self.apply("clip", out, GRAIN_STREAM, |x, o| {
            // max(c, NaN) and min(c, NaN) return the NaN (see `Simd`), so NaN passes.
            dispatch!(b, |s| map(s, x, o, |v| s.min(s.splat(max), s.max(s.splat(min), v))))
        })
    }
}

fn check_clip(min: f32, max: f32) -> Result<()> {
    if min.is_nan() || max.is_nan() || min > max {
        let value = if min.is_nan() { min } else { max };
        let name = if min.is_nan() { "min" } else { "max" };
        return Err(Error::InvalidParameter {
            op: "clip",
            name,
            value: value as f64,
            reason: "need min <= max, neither NaN",
        });
    }
    Ok(())
}
