//! Matrix ops: products (through GEMM), transpose, element-wise arithmetic.

use super::{gemm_with, MatMut, MatRef, Matrix};
use crate::backend::dispatch;
use crate::cpu::kernels::transpose;
use crate::{slice, Error, Result, Vector};

/// A two-input slice op of `rayo::slice` (add, sub, mul).
type SliceOp2 = fn(crate::Backend, &[f32], &[f32], &mut [f32]) -> Result<()>;

impl Matrix {
    /// `self · other` (m×k times k×n); a shape error names both shapes.
    pub fn matmul(&self, other: &Matrix) -> Result<Matrix> {
        if self.cols != other.rows {
            return Err(Error::ShapeMismatch { op: "Matrix::matmul", left: vec![self.rows, self.cols], right: vec![other.rows, other.cols] });
        }
        let mut out = Matrix::uninit(self.rows, other.cols, self.backend)?;
        self.product(other, &mut out)?;
        Ok(out)
    }

    /// `self · other` into `out` (must be m×n); nothing allocates.
    pub fn matmul_into(&self, other: &Matrix, out: &mut Matrix) -> Result<()> {
        if self.cols != other.rows {
            return Err(Error::ShapeMismatch { op: "Matrix::matmul", left: vec![self.rows, self.cols], right: vec![other.rows, other.cols] });
        }
        if out.shape() != (self.rows, other.cols) {
            return Err(Error::ShapeMismatch { op: "Matrix::matmul_into (out)", left: vec![self.rows, other.cols], right: vec![out.rows, out.cols] });
        }
        self.product(other, out)
    }

    /// `out = self · other` (shapes checked): on an NVIDIA GPU (feature `cuda`) or another
    /// GPU (feature `gpu`, software adapters excluded) above the measured crossover when a
    /// device is there (`RAYO_FORCE_CPU=1` keeps it here), else the CPU GEMM.
    fn product(&self, other: &Matrix, out: &mut Matrix) -> Result<()> {
        let dims = [self.rows, self.cols, other.cols];
        match crate::error::checked_product("Matrix::matmul", &dims) {
            Ok(w) if w <= isize::MAX as usize => {}
            _ => return Err(Error::SizeOverflow { op: "Matrix::matmul (m·k·n)", dims: dims.to_vec() }),
        }
        #[cfg(feature = "cuda")]
        if crate::cuda::dispatch::try_matmul(&self.data, &other.data, &mut out.data, self.rows, self.cols, other.cols)? {
            return Ok(());
        }
        #[cfg(all(feature = "gpu", not(target_arch = "wasm32")))]
        if crate::gpu::dispatch::try_matmul(&self.data, &other.data, &mut out.data, self.rows, self.cols, other.cols)? {
            return Ok(());
        }
        gemm_with(self.backend, 1.0, self.view(), other.view(), 0.0, out.view_mut())
    }

    /// `self · v` (m×n times n); an error unless `v.len() == cols`.
    pub fn matvec(&self, v: &Vector) -> Result<Vector> {
        if v.len() != self.cols {
            return Err(Error::ShapeMismatch { op: "Matrix::matvec", left: vec![self.rows, self.cols], right: vec![v.len()] });
        }
        let mut out = crate::error::zeroed("Matrix::matvec", crate::error::checked_len("Matrix::matvec", &[self.rows])?)?;
        self.matvec_into(v.as_slice(), &mut out)?;
        Ok(Vector::from_vec(out))
    }

    /// `out = self · v`; lengths must be `cols` and `rows`.
    pub fn matvec_into(&self, v: &[f32], out: &mut [f32]) -> Result<()> {
        if v.len() != self.cols {
            return Err(Error::ShapeMismatch { op: "Matrix::matvec", left: vec![self.rows, self.cols], right: vec![v.len()] });
        }
        crate::error::check_len("Matrix::matvec (out)", self.rows, out.len())?;
        let x = MatRef { data: v, rows: v.len(), cols: 1, rs: 1, cs: 1 };
        let y = MatMut { data: out, rows: self.rows, cols: 1, rs: 1, cs: 1 };
        gemm_with(self.backend, 1.0, self.view(), x, 0.0, y)
    }

    /// The transpose (register-tile kernel, near copy bandwidth).
    pub fn transpose(&self) -> Matrix {
        let mut out = self.uninit_like(self.cols, self.rows);
        self.transpose_write(&mut out.data);
        out
    }

    /// The transpose into `out`, which must be `cols × rows`; nothing allocates.
    pub fn transpose_into(&self, out: &mut Matrix) -> Result<()> {
        if out.shape() != (self.cols, self.rows) {
            return Err(Error::ShapeMismatch { op: "Matrix::transpose_into", left: vec![self.cols, self.rows], right: vec![out.rows, out.cols] });
        }
        self.transpose_write(&mut out.data);
        Ok(())
    }

    fn transpose_write(&self, out: &mut [f32]) {
        if self.data.is_empty() {
            // Nothing to move; and the kernel walks the rows, of which an empty matrix may
            // claim 2^62.
            return;
        }
        let backend = self.backend;
        transpose::transpose_parallel(&self.data, self.rows, self.cols, out, &|src, rows, cols, lda, dst, ldb| {
            dispatch!(backend, |s| transpose::transpose_block(s, src, rows, cols, lda, dst, ldb))
        });
    }

    fn zip(&self, other: &Matrix, op: &'static str, f: SliceOp2) -> Result<Matrix> {
        if self.shape() != other.shape() {
            return Err(Error::ShapeMismatch { op, left: vec![self.rows, self.cols], right: vec![other.rows, other.cols] });
        }
        let mut out = self.uninit_like(self.rows, self.cols);
        f(self.backend, &self.data, &other.data, &mut out.data)?;
        Ok(out)
    }

    /// Element-wise sum; shapes must agree.
    pub fn add(&self, other: &Matrix) -> Result<Matrix> {
        self.zip(other, "Matrix::add", slice::add)
    }

    /// Element-wise difference; shapes must agree.
    pub fn sub(&self, other: &Matrix) -> Result<Matrix> {
        self.zip(other, "Matrix::sub", slice::sub)
    }

    /// Element-wise (Hadamard) product; shapes must agree.
    pub fn mul(&self, other: &Matrix) -> Result<Matrix> {
        self.zip(other, "Matrix::mul", slice::mul)
    }

    /// Every element times `k`.
    pub fn scale(&self, k: f32) -> Matrix {
        let mut out = self.uninit_like(self.rows, self.cols);
        let r = slice::scale(self.backend, &self.data, k, &mut out.data);
        debug_assert!(r.is_ok());
        out
    }
}
