//! The general GEMM entry point: `C = alpha·op(A)·op(B) + beta·C` over strided views
//! (`op` is a transpose when the view is `.t()`: no copy). `Matrix::matmul`, `matvec` and
//! the batched tensor product all come through here.

use super::{MatMut, MatRef};
use crate::cpu::parallel::Par;
use crate::{Backend, Error, Result};

/// `C = alpha·A·B + beta·C` on the selected CPU backend, with the threads the process-wide
/// [`crate::set_max_threads`] allows ([`gemm_par`] takes them as an argument instead).
///
/// Shapes: A is m×k, B is k×n, C is m×n, or [`Error::ShapeMismatch`] naming both shapes.
/// A product whose `m·n·k` exceeds `isize::MAX` is [`Error::SizeOverflow`].
/// With `beta == 0`, C is only written: whatever it held (NaN too) does not reach the result.
/// Accuracy: each element is an f32 sum of k products, accumulated in blocks, so its error is
/// within `k·ε·Σ|a_ik||b_kj|` (ε = 2⁻²³), as for any BLAS.
pub fn gemm(alpha: f32, a: MatRef, b: MatRef, beta: f32, c: MatMut) -> Result<()> {
    gemm_par(Backend::selected(), Par::global(), alpha, a, b, beta, c)
}

/// [`gemm`] on a chosen instruction set (an error if this CPU lacks it).
pub fn gemm_with(backend: Backend, alpha: f32, a: MatRef, b: MatRef, beta: f32, c: MatMut) -> Result<()> {
    gemm_par(backend, Par::global(), alpha, a, b, beta, c)
}

/// [`gemm_with`] with the parallelism given for this call (`Par::Seq`: the calling thread
/// only; `Par::Rayon(n)`: up to n threads), whatever [`crate::set_max_threads`] says.
pub fn gemm_par(backend: Backend, par: Par, alpha: f32, a: MatRef, b: MatRef, beta: f32, c: MatMut) -> Result<()> {
    let backend = backend.require()?;
    if a.cols != b.rows {
        return Err(Error::ShapeMismatch { op: "gemm (A·B)", left: vec![a.rows, a.cols], right: vec![b.rows, b.cols] });
    }
    if c.rows != a.rows || c.cols != b.cols {
        return Err(Error::ShapeMismatch { op: "gemm (C)", left: vec![a.rows, b.cols], right: vec![c.rows, c.cols] });
    }
    let dims = [a.rows, a.cols, b.cols];
    match crate::error::checked_product("gemm", &dims) {
        Ok(w) if w <= isize::MAX as usize => {}
        _ => return Err(Error::SizeOverflow { op: "gemm (m·k·n)", dims: dims.to_vec() }),
    }
    crate::cpu::gemm::gemm(backend, par, alpha, a, b, beta, c);
    Ok(())
}
