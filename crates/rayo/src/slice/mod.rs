//! Every op on borrowed slices, with the backend explicit: what `Vector` calls, and what a
//! caller with its own buffers (possibly unaligned, possibly views into larger arrays) uses
//! directly. Outputs are written into `out`, whose length must match; nothing allocates.

mod activation;
mod arith;
mod elementwise;
mod reduce;

pub use activation::*;
pub use arith::*;
pub use elementwise::{binary, unary};
pub use reduce::*;

use crate::cpu::parallel;
use crate::error::check_len;
use crate::Result;

/// Elements per thread for memory-bound element-wise ops (below this a second thread costs
/// more than it saves on the 2-core machine this was measured on).
pub(crate) const GRAIN_STREAM: usize = 1 << 18;
/// Elements per thread for ops with a polynomial per element (exp, gelu, ...).
pub(crate) const GRAIN_MATH: usize = 1 << 15;
/// Elements per thread for reductions.
pub(crate) const GRAIN_REDUCE: usize = 1 << 18;

/// Checks lengths, then runs `kernel` over matching parts (several threads when large).
fn apply(op: &'static str, x: &[f32], out: &mut [f32], grain: usize, kernel: impl Fn(&[f32], &mut [f32]) + Sync) -> Result<()> {
    check_len(op, x.len(), out.len())?;
    parallel::zip_map(x, out, grain, &kernel);
    Ok(())
}

/// Two-input [`apply`].
fn apply2(op: &'static str, a: &[f32], b: &[f32], out: &mut [f32], grain: usize, kernel: impl Fn(&[f32], &[f32], &mut [f32]) + Sync) -> Result<()> {
    check_len(op, a.len(), b.len())?;
    check_len(op, a.len(), out.len())?;
    parallel::zip_map2(a, b, out, grain, &kernel);
    Ok(())
}

/// Defines `pub fn name(backend, x, out) -> Result<()>`: [`unary`] with the op fixed.
macro_rules! named_unary {
    ($(#[$doc:meta])* $name:ident, $op:expr) => {
        $(#[$doc])*
        pub fn $name(backend: $crate::Backend, x: &[f32], out: &mut [f32]) -> $crate::Result<()> {
            super::unary(backend, $op, x, out)
        }
    };
}
use named_unary;

/// Defines `pub fn name(backend, a, b, out) -> Result<()>`: [`binary`] with the op fixed.
macro_rules! named_binary {
    ($(#[$doc:meta])* $name:ident, $op:expr) => {
        $(#[$doc])*
        pub fn $name(backend: $crate::Backend, a: &[f32], b: &[f32], out: &mut [f32]) -> $crate::Result<()> {
            super::binary(backend, $op, a, b, out)
        }
    };
}
use named_binary;
