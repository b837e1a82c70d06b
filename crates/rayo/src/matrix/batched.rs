//! Tensors as matrices: views of a tensor's trailing two dimensions, and the batched
//! product over the leading ones (what attention and an MLP need).

use super::{gemm_with, MatMut, MatRef};
use crate::cpu::parallel;
use crate::{Backend, Error, Result, Tensor};

/// Below this many multiply-adds per matrix, the batch (not each product) is split over
/// the threads.
const BATCH_SPLIT_WORK: usize = 96 * 96 * 96;

impl Tensor {
    /// A 2-D tensor as a matrix view (no copy); an error for any other rank.
    pub fn as_matrix(&self) -> Result<MatRef<'_>> {
        match *self.shape() {
            [r, c] => MatRef::row_major(self.as_slice(), r, c),
            _ => Err(Error::ShapeMismatch { op: "Tensor::as_matrix (needs 2-D)", left: self.shape().to_vec(), right: vec![] }),
        }
    }

    /// Matrix `b` of an n-d tensor `[..., rows, cols]` (batch index over the leading
    /// dimensions, row-major); an error for rank < 2 or `b` past the batch count.
    pub fn matrix(&self, b: usize) -> Result<MatRef<'_>> {
        let (batch, r, c) = split_shape("Tensor::matrix", self.shape())?;
        if b >= batch {
            return Err(Error::IndexOutOfBounds { index: b, len: batch });
        }
        // b < batch, so (b + 1)·r·c is at most the tensor's length.
        let size = r * c;
        MatRef::row_major(&self.as_slice()[b * size..(b + 1) * size], r, c)
    }

    /// Batched matrix product: `[..., m, k] × [..., k, n] → [..., m, n]` with equal leading
    /// dimensions, or `[..., m, k] × [k, n]` (one matrix applied to every batch entry).
    pub fn matmul(&self, other: &Tensor) -> Result<Tensor> {
        let (batch, m, k) = split_shape("Tensor::matmul", self.shape())?;
        let (obatch, k2, n) = split_shape("Tensor::matmul", other.shape())?;
        let shared = other.ndim() == 2;
        let lead_ok = shared || self.shape()[..self.ndim() - 2] == other.shape()[..other.ndim() - 2];
        if k != k2 || !lead_ok {
            return Err(Error::ShapeMismatch { op: "Tensor::matmul", left: self.shape().to_vec(), right: other.shape().to_vec() });
        }
        debug_assert!(shared || obatch == batch);
        let mut shape = self.shape()[..self.ndim() - 2].to_vec();
        shape.extend([m, n]);
        let out_len = crate::error::checked_len("Tensor::matmul", &[batch, m, n])?;
        let mut out = crate::error::zeroed("Tensor::matmul", out_len)?;
        if out_len > 0 {
            // batch, m, n > 0, so m·k and k·n are at most the inputs' lengths.
            let backend = Backend::selected();
            let (a, b) = (self.as_slice(), other.as_slice());
            let one = |i: usize, c: &mut [f32]| {
                let av = MatRef::row_major(&a[i * m * k..(i + 1) * m * k], m, k)?;
                let bi = if shared { 0 } else { i };
                let bv = MatRef::row_major(&b[bi * k * n..(bi + 1) * k * n], k, n)?;
                gemm_with(backend, 1.0, av, bv, 0.0, MatMut::row_major(c, m, n)?)
            };
            run_batch(&mut out, m * n, 0, batch, (m * n).saturating_mul(k) < BATCH_SPLIT_WORK, &one)?;
        }
        Tensor::from_vec(shape, out)
    }
}

/// Runs `one(i, out_i)` for batch entries `first..first+count`, halving the range over the
/// threads when `split`.
fn run_batch(
    out: &mut [f32],
    size: usize,
    first: usize,
    count: usize,
    split: bool,
    one: &(impl Fn(usize, &mut [f32]) -> Result<()> + Sync),
) -> Result<()> {
    if split && count >= 2 && parallel::max_threads() > 1 {
        let half = count / 2;
        let (o0, o1) = out.split_at_mut(half * size);
        let (r0, r1) =
            parallel::both(|| run_batch(o0, size, first, half, split, one), || run_batch(o1, size, first + half, count - half, split, one));
        return r0.and(r1);
    }
    for (j, c) in out.chunks_exact_mut(size).enumerate().take(count) {
        one(first + j, c)?;
    }
    Ok(())
}

/// `[..., r, c]` as (batch count, r, c).
fn split_shape(op: &'static str, shape: &[usize]) -> Result<(usize, usize, usize)> {
    match shape {
        [lead @ .., r, c] => Ok((crate::error::checked_product(op, lead)?, *r, *c)),
        _ => Err(Error::ShapeMismatch { op, left: shape.to_vec(), right: vec![] }),
    }
}
