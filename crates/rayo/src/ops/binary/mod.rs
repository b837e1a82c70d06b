//! Element-wise functions of two inputs, one file each.

mod arith;
mod axpy;
mod minmax;

pub use arith::{Add, Div, Mul, Sub};
pub use axpy::Axpy;
pub use minmax::{Max, Min};
