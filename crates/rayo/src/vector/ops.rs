//! `Vector`'s ops: thin wrappers over `crate::slice`, each allocating form beside its `_into`
//! twin. The bounds and special-value behaviour are documented on the slice functions.

use super::Vector;
use crate::error::check_len;
use crate::{slice, Error, Result};

/// `name(&self) -> Vector` and `name_into(&self, out) -> Result<()>`.
macro_rules! unary {
    ($($name:ident, $into:ident;)*) => {$(
        #[doc = concat!("Element-wise `", stringify!($name), "`; see [`slice::", stringify!($name), "`] for its error bound.")]
        pub fn $name(&self) -> Vector {
            self.fresh(|o| self.$into(o))
        }
        #[doc = concat!("[`Vector::", stringify!($name), "`] written into `out` (same length); allocates nothing.")]
        pub fn $into(&self, out: &mut [f32]) -> Result<()> {
            slice::$name(self.backend, &self.data, out)
        }
    )*};
}

/// `name(&self, other) -> Result<Vector>` and `name_into(&self, other, out) -> Result<()>`.
macro_rules! binary {
    ($($name:ident, $into:ident;)*) => {$(
        #[doc = concat!("Element-wise `", stringify!($name), "`; the lengths must agree.")]
        pub fn $name(&self, other: &Vector) -> Result<Vector> {
            check_len(stringify!($name), self.len(), other.len())?;
            Ok(self.fresh(|o| self.$into(other, o)))
        }
        #[doc = concat!("[`Vector::", stringify!($name), "`] written into `out`; allocates nothing.")]
        pub fn $into(&self, other: &Vector, out: &mut [f32]) -> Result<()> {
            slice::$name(self.backend, &self.data, &other.data, out)
        }
    )*};
}

impl Vector {
    binary! {
        add, add_into;
        sub, sub_into;
        mul, mul_into;
        div, div_into;
    }

    unary! {
        abs, abs_into;
        sqrt, sqrt_into;
        exp, exp_into;
        ln, ln_into;
        relu, relu_into;
        sigmoid, sigmoid_into;
        tanh, tanh_into;
        swish, swish_into;
        gelu, gelu_into;
        mish, mish_into;
        selu, selu_into;
        hardswish, hardswish_into;
    }

    /// `k · self[i]`.
    pub fn scale(&self, k: f32) -> Vector {
        self.fresh(|o| self.scale_into(k, o))
    }
    /// [`Vector::scale`] written into `out`; allocates nothing.
    pub fn scale_into(&self, k: f32, out: &mut [f32]) -> Result<()> {
        slice::scale(self.backend, &self.data, k, out)
    }

    /// Clamps to `[min, max]`; NaN stays NaN. An error if `min > max` or a bound is NaN.
    pub fn clip(&self, min: f32, max: f32) -> Result<Vector> {
        slice::check_clip(min, max)?;
        Ok(self.fresh(|o| self.clip_into(min, max, o)))
    }
    /// [`Vector::clip`] written into `out`; allocates nothing.
    pub fn clip_into(&self, min: f32, max: f32, out: &mut [f32]) -> Result<()> {
        slice::clip(self.backend, &self.data, min, max, out)
    }

    /// `x` for x > 0, `alpha·x` otherwise.
    pub fn leaky_relu(&self, alpha: f32) -> Vector {
        self.fresh(|o| self.leaky_relu_into(alpha, o))
    }
    /// [`Vector::leaky_relu`] written into `out`; allocates nothing.
    pub fn leaky_relu_into(&self, alpha: f32, out: &mut [f32]) -> Result<()> {
        slice::leaky_relu(self.backend, &self.data, alpha, out)
    }

    /// `x` for x > 0, `alpha·(e^x − 1)` otherwise; see [`slice::elu`].
    pub fn elu(&self, alpha: f32) -> Vector {
        self.fresh(|o| self.elu_into(alpha, o))
    }
    /// [`Vector::elu`] written into `out`; allocates nothing.
    pub fn elu_into(&self, alpha: f32, out: &mut [f32]) -> Result<()> {
        slice::elu(self.backend, &self.data, alpha, out)
    }

    /// Stable softmax; see [`slice::softmax`]. An error for an empty vector.
    pub fn softmax(&self) -> Result<Vector> {
        if self.is_empty() {
            return Err(Error::EmptyInput { op: "softmax" });
        }
        Ok(self.fresh(|o| self.softmax_into(o)))
    }
    /// [`Vector::softmax`] written into `out`; allocates nothing.
    pub fn softmax_into(&self, out: &mut [f32]) -> Result<()> {
        slice::softmax(self.backend, &self.data, out)
    }

    /// Stable log-softmax; see [`slice::log_softmax`]. An error for an empty vector.
    pub fn log_softmax(&self) -> Result<Vector> {
        if self.is_empty() {
            return Err(Error::EmptyInput { op: "log_softmax" });
        }
        Ok(self.fresh(|o| self.log_softmax_into(o)))
    }
    /// [`Vector::log_softmax`] written into `out`; allocates nothing.
    pub fn log_softmax_into(&self, out: &mut [f32]) -> Result<()> {
        slice::log_softmax(self.backend, &self.data, out)
    }

    /// `Σ self[i]·other[i]`; the lengths must agree. See [`slice::dot`].
    pub fn dot(&self, other: &Vector) -> Result<f32> {
        slice::dot(self.backend, &self.data, &other.data)
    }
    /// `Σ self[i]`; 0 when empty.
    pub fn sum(&self) -> f32 {
        slice::sum(self.backend, &self.data)
    }
    /// Largest element (NaN if any is NaN); an error when empty.
    pub fn max(&self) -> Result<f32> {
        slice::max(self.backend, &self.data)
    }
    /// Smallest element (NaN if any is NaN); an error when empty.
    pub fn min(&self) -> Result<f32> {
        slice::min(self.backend, &self.data)
    }
    /// Index of the first largest element (first NaN, if any); an error when empty.
    pub fn argmax(&self) -> Result<usize> {
        slice::argmax(self.backend, &self.data)
    }
    /// Index of the first smallest element (first NaN, if any); an error when empty.
    pub fn argmin(&self) -> Result<usize> {
        slice::argmin(self.backend, &self.data)
    }
    /// `Σ |self[i]|`; 0 when empty.
    pub fn norm_l1(&self) -> f32 {
        slice::norm_l1(self.backend, &self.data)
    }
    /// √(`Σ self[i]²`) without spurious overflow/underflow; 0 when empty.
    pub fn norm_l2(&self) -> f32 {
        slice::norm_l2(self.backend, &self.data)
    }
    /// max |`self[i]|` (NaN if any is NaN); 0 when empty.
    pub fn norm_inf(&self) -> f32 {
        slice::norm_inf(self.backend, &self.data)
    }
}
