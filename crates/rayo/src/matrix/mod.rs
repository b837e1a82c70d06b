//! `Matrix`: a dense row-major f32 matrix, and the strided views GEMM works on.

mod batched;
mod conv;
mod gemm;
mod ops;
mod view;

pub use gemm::{gemm, gemm_par, gemm_with};
pub use view::{MatMut, MatRef};

use crate::cpu::pool;
use crate::error::{checked_len, zeroed};
use crate::{Backend, Error, Result};

/// A dense `rows × cols` f32 matrix, row-major. Its ops run on the backend it carries.
///
/// Equality (`==`) compares the shape and the values (as f32: NaN is unequal to itself), not
/// the backend: the same numbers on AVX2 and on scalar code are the same matrix.
#[derive(Debug, Clone)]
pub struct Matrix {
    rows: usize,
    cols: usize,
    data: Vec<f32>,
    backend: Backend,
}

impl Matrix {
    /// Copies `data` (row-major); an error unless `data.len() == rows·cols`.
    pub fn from_slice(rows: usize, cols: usize, data: &[f32]) -> Result<Matrix> {
        Matrix::from_vec(rows, cols, data.to_vec())
    }

    /// Takes `data` (row-major); an error unless `data.len() == rows·cols`.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<f32>) -> Result<Matrix> {
        match rows.checked_mul(cols) {
            Some(n) if n == data.len() => Ok(Matrix { rows, cols, data, backend: Backend::selected() }),
            _ => Err(Error::SizeMismatch { op: "Matrix::from_vec", shape: vec![rows, cols], len: data.len() }),
        }
    }

    /// A `rows × cols` matrix of zeros: [`Error::SizeOverflow`] when `rows·cols` floats do not
    /// fit in `usize` bytes, [`Error::OutOfMemory`] when the system cannot provide them.
    pub fn zeros(rows: usize, cols: usize) -> Result<Matrix> {
        let n = checked_len("Matrix::zeros", &[rows, cols])?;
        Ok(Matrix { rows, cols, data: zeroed("Matrix::zeros", n)?, backend: Backend::selected() })
    }

    /// A matrix whose contents the caller overwrites completely (a reused buffer when
    /// [`crate::set_buffer_reuse`] is on); [`Error::SizeOverflow`] when it cannot exist.
    pub(crate) fn uninit(rows: usize, cols: usize, backend: Backend) -> Result<Matrix> {
        let n = checked_len("Matrix", &[rows, cols])?;
        Ok(Matrix { rows, cols, data: pool::take(n), backend })
    }

    /// A `rows × cols` matrix with as many elements as `self` (a transpose, an element-wise
    /// result), contents to be overwritten.
    pub(crate) fn uninit_like(&self, rows: usize, cols: usize) -> Matrix {
        debug_assert_eq!(rows.checked_mul(cols), Some(self.data.len()));
        Matrix { rows, cols, data: pool::take(self.data.len()), backend: self.backend }
    }

    /// The `n × n` identity; errors as [`Matrix::zeros`].
    pub fn identity(n: usize) -> Result<Matrix> {
        let mut m = Matrix::zeros(n, n)?;
        for i in 0..n {
            m.data[i * n + i] = 1.0;
        }
        Ok(m)
    }

    /// The same matrix, running its ops on `backend` (an error if this CPU lacks it).
    pub fn with_backend(mut self, backend: Backend) -> Result<Matrix> {
        self.backend = backend.require()?;
        Ok(self)
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// (rows, cols).
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.data
    }

    pub fn into_vec(mut self) -> Vec<f32> {
        std::mem::take(&mut self.data)
    }

    /// Element (i, j), or `None` out of range.
    pub fn get(&self, i: usize, j: usize) -> Option<f32> {
        (i < self.rows && j < self.cols).then(|| self.data[i * self.cols + j])
    }

    /// Sets element (i, j); [`Error::MatrixIndexOutOfBounds`] out of range.
    pub fn set(&mut self, i: usize, j: usize, value: f32) -> Result<()> {
        if i >= self.rows || j >= self.cols {
            return Err(Error::MatrixIndexOutOfBounds { row: i, col: j, rows: self.rows, cols: self.cols });
        }
        self.data[i * self.cols + j] = value;
        Ok(())
    }

    /// Row `i` as a slice (panics out of range, like a slice; [`Matrix::get_row`] does not).
    pub fn row(&self, i: usize) -> &[f32] {
        assert!(i < self.rows, "row {i} out of range for a {}x{} matrix", self.rows, self.cols);
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// Row `i` as a slice, or `None` out of range.
    pub fn get_row(&self, i: usize) -> Option<&[f32]> {
        (i < self.rows).then(|| &self.data[i * self.cols..(i + 1) * self.cols])
    }

    /// This matrix as a GEMM view.
    pub fn view(&self) -> MatRef<'_> {
        MatRef { data: &self.data, rows: self.rows, cols: self.cols, rs: self.cols, cs: 1 }
    }

    /// This matrix as a mutable GEMM view.
    pub fn view_mut(&mut self) -> MatMut<'_> {
        MatMut { data: &mut self.data, rows: self.rows, cols: self.cols, rs: self.cols, cs: 1 }
    }
}

impl PartialEq for Matrix {
    fn eq(&self, other: &Matrix) -> bool {
        self.rows == other.rows && self.cols == other.cols && self.data == other.data
    }
}

impl Drop for Matrix {
    fn drop(&mut self) {
        pool::give(std::mem::take(&mut self.data));
    }
}

impl core::ops::Index<(usize, usize)> for Matrix {
    type Output = f32;
    /// Panics out of range, like a slice.
    fn index(&self, (i, j): (usize, usize)) -> &f32 {
        assert!(i < self.rows && j < self.cols, "index ({i}, {j}) out of range for a {}x{} matrix", self.rows, self.cols);
        &self.data[i * self.cols + j]
    }
}

impl core::ops::IndexMut<(usize, usize)> for Matrix {
    fn index_mut(&mut self, (i, j): (usize, usize)) -> &mut f32 {
        assert!(i < self.rows && j < self.cols, "index ({i}, {j}) out of range for a {}x{} matrix", self.rows, self.cols);
        &mut self.data[i * self.cols + j]
    }
}
