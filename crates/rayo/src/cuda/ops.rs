//! Typed launches of the rayo-ptx kernels on device buffers. Every size is checked here, before
//! a launch: a mismatch is an `Error` with the numbers, never an out-of-bounds kernel.

use super::buffer::DeviceBuffer;
use super::device::CudaDevice;
use super::elementwise::{Expr, FusedKernel};
use super::ffi::{launch, launch_scalars};
use crate::error::{check_len, Error, Result};
use rayo_ptx::kernels::{GemmKernel, NormKernel, NormKind, ReduceKernel, ReduceOp, SoftmaxKernel};

fn n_u32(op: &'static str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::BufferTooLarge { op, bytes: n as u64 * 4, limit: u32::MAX as u64 * 4 })
}

fn rows_cols(op: &'static str, x: &DeviceBuffer, rows: usize, cols: usize) -> Result<(u32, u32)> {
    if rows.checked_mul(cols) != Some(x.len()) {
        return Err(Error::SizeMismatch { op, shape: vec![rows, cols], len: x.len() });
    }
    if rows == 0 || cols == 0 {
        return Err(Error::EmptyInput { op });
    }
    if rows > i32::MAX as usize {
        return Err(Error::InvalidArgument { op, name: "rows", value: rows.into(), reason: "more rows than the grid allows" });
    }
    // the kernels address a row with a 32-bit byte offset
    if cols > (u32::MAX / 4) as usize {
        return Err(Error::BufferTooLarge { op, bytes: cols as u64 * 4, limit: u32::MAX as u64 });
    }
    Ok((rows as u32, cols as u32))
}

impl CudaDevice {
    /// `out[i] = expr(inputs[0][i], inputs[1][i], ...)`: one fused kernel for the whole chain.
    pub fn elementwise(&self, expr: &Expr, inputs: &[&DeviceBuffer], out: &mut DeviceBuffer) -> Result<()> {
        const OP: &str = "cuda elementwise";
        check_len(OP, expr.arity(), inputs.len())?;
        for x in inputs {
            check_len(OP, out.len(), x.len())?;
        }
        let k = FusedKernel::new(expr)?;
        let n = n_u32(OP, out.len())?;
        if n == 0 {
            return Ok(());
        }
        let f = self.function(&k)?;
        let ins: Vec<_> = inputs.iter().map(|b| &b.slice).collect();
        let cfg = k.launch(n as usize, self.info().multiprocessors);
        launch_scalars(&self.stream, &f, cfg, &ins, &mut [&mut out.slice], &[n], &expr.scalars())
    }

    /// Reduces `x` (and `y` for `Dot`) on the device; the result stays there (one element).
    pub fn reduce_device(&self, op: ReduceOp, x: &DeviceBuffer, y: Option<&DeviceBuffer>) -> Result<DeviceBuffer> {
        const OP: &str = "cuda reduce";
        if let Some(y) = y {
            check_len(OP, x.len(), y.len())?;
        }
        if (op == ReduceOp::Dot) != y.is_some() {
            return Err(Error::InvalidArgument { op: OP, name: "y given", value: y.is_some().into(), reason: "dot needs y; sum/max/min take none" });
        }
        if x.is_empty() && matches!(op, ReduceOp::Max | ReduceOp::Min) {
            return Err(Error::EmptyInput { op: OP });
        }
        let n = n_u32(OP, x.len())?;
        let k1 = ReduceKernel::new(op);
        let cfg = k1.launch(x.len(), self.info().multiprocessors);
        let mut partials = self.zeros(cfg.grid.0 as usize)?;
        let f1 = self.function(&k1)?;
        let mut ins = vec![&x.slice];
        if let Some(y) = y {
            ins.push(&y.slice);
        }
        launch(&self.stream, &f1, cfg, &ins, &mut [&mut partials.slice], &[n])?;
        let k2 = ReduceKernel::new(op.second_pass());
        let f2 = self.function(&k2)?;
        let mut out = self.zeros(1)?;
        let cfg2 = k2.launch(1, 1);
        launch(&self.stream, &f2, cfg2, &[&partials.slice], &mut [&mut out.slice], &[cfg.grid.0])?;
        Ok(out)
    }

    /// Sum, max, min of `x`, or dot of `x` and `y`, returned to the host.
    pub fn reduce(&self, op: ReduceOp, x: &DeviceBuffer, y: Option<&DeviceBuffer>) -> Result<f32> {
        let out = self.reduce_device(op, x, y)?;
        Ok(self.download(&out)?[0])
    }

    /// Row softmax (or log_softmax) of a row-major `[rows, cols]` matrix.
    pub fn softmax(&self, x: &DeviceBuffer, rows: usize, cols: usize, log: bool, out: &mut DeviceBuffer) -> Result<()> {
        const OP: &str = "cuda softmax";
        let (r, c) = rows_cols(OP, x, rows, cols)?;
        check_len(OP, x.len(), out.len())?;
        let k = SoftmaxKernel::new(c, log);
        let f = self.function(&k)?;
        launch(&self.stream, &f, k.launch(r), &[&x.slice], &mut [&mut out.slice], &[])
    }

    /// LayerNorm over each row: `(x - mean) / sqrt(var + eps) * gamma + beta`.
    #[allow(clippy::too_many_arguments)]
    pub fn layernorm(
        &self,
        x: &DeviceBuffer,
        gamma: &DeviceBuffer,
        beta: &DeviceBuffer,
        rows: usize,
        cols: usize,
        eps: f32,
        out: &mut DeviceBuffer,
    ) -> Result<()> {
        const OP: &str = "cuda layernorm";
        let (r, c) = rows_cols(OP, x, rows, cols)?;
        check_len(OP, cols, gamma.len())?;
        check_len(OP, cols, beta.len())?;
        check_len(OP, x.len(), out.len())?;
        check_eps(OP, eps)?;
        let k = NormKernel::new(NormKind::LayerNorm, c, eps);
        let f = self.function(&k)?;
        launch(&self.stream, &f, k.launch(r), &[&x.slice, &gamma.slice, &beta.slice], &mut [&mut out.slice], &[])
    }

    /// RMSNorm over each row: `x / sqrt(mean(x²) + eps) * gamma`.
    pub fn rmsnorm(&self, x: &DeviceBuffer, gamma: &DeviceBuffer, rows: usize, cols: usize, eps: f32, out: &mut DeviceBuffer) -> Result<()> {
        const OP: &str = "cuda rmsnorm";
        let (r, c) = rows_cols(OP, x, rows, cols)?;
        check_len(OP, cols, gamma.len())?;
        check_len(OP, x.len(), out.len())?;
        check_eps(OP, eps)?;
        let k = NormKernel::new(NormKind::RmsNorm, c, eps);
        let f = self.function(&k)?;
        launch(&self.stream, &f, k.launch(r), &[&x.slice, &gamma.slice], &mut [&mut out.slice], &[])
    }

    /// `c = a · b` for row-major `a: [m, k]`, `b: [k, n]`, `c: [m, n]` with the fastest kernel
    /// for the shape.
    pub fn gemm(&self, a: &DeviceBuffer, b: &DeviceBuffer, c: &mut DeviceBuffer, m: usize, n: usize, k: usize) -> Result<()> {
        let dims = [m, n, k].map(|d| u32::try_from(d).unwrap_or(u32::MAX));
        self.gemm_with(GemmKernel::for_device(dims[0], dims[1], dims[2], self.info().multiprocessors), a, b, c)
    }

    /// `c = a · b` with a chosen kernel (its shape is the kernel's).
    pub fn gemm_with(&self, g: GemmKernel, a: &DeviceBuffer, b: &DeviceBuffer, c: &mut DeviceBuffer) -> Result<()> {
        const OP: &str = "cuda gemm";
        let (m, n, k) = (g.m as usize, g.n as usize, g.k as usize);
        if !g.indices_fit() {
            let bytes = (m.max(n) as u64) * (k.max(n) as u64) * 4;
            return Err(Error::BufferTooLarge { op: OP, bytes, limit: u32::MAX as u64 });
        }
        if a.len() != m * k || b.len() != k * n || c.len() != m * n {
            return Err(Error::ShapeMismatch { op: OP, left: vec![m, k, k, n, m, n], right: vec![a.len(), b.len(), c.len()] });
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let f = self.function(&g)?;
        if g.needs_zeroed_output() {
            self.stream.memset_zeros(&mut c.slice).map_err(super::ffi::drv)?;
        }
        launch(&self.stream, &f, g.launch(), &[&a.slice, &b.slice], &mut [&mut c.slice], &[])
    }
}

fn check_eps(op: &'static str, eps: f32) -> Result<()> {
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(Error::InvalidParameter { op, name: "eps", value: eps as f64, reason: "must be finite and >= 0" });
    }
    Ok(())
}
