//! Typed launches of the rayo-ptx kernels on device buffers. Every size is checked here, before
//! a launch: a mismatch is an `Error` with the numbers, never an out-of-bounds kernel; every
//! buffer must belong to this device ([`Error::ForeignBuffer`] otherwise). Shapes and scalars
//! are kernel arguments, so the kernel cache holds one entry per kernel variant, not per shape.

use super::buffer::DeviceBuffer;
use super::device::CudaDevice;
use super::elementwise::{Expr, FusedKernel};
use super::ffi::Arg;
use crate::error::{check_len, Error, Result};
use crate::ops::{ReduceCombine, ReduceLoad, ReduceOp};
use rayo_ptx::kernels::{self as ptx, GemmKernel, NormKernel, NormKind, ReduceKernel, SoftmaxKernel};

fn too_large(op: &'static str, n: usize) -> Error {
    Error::BufferTooLarge { op, bytes: (n as u64).saturating_mul(4), limit: u32::MAX as u64 * 4 }
}

fn n_u32(op: &'static str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| too_large(op, n))
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
        return Err(Error::BufferTooLarge { op, bytes: (cols as u64).saturating_mul(4), limit: u32::MAX as u64 });
    }
    Ok((rows as u32, cols as u32))
}

/// The PTX reduction (first pass) of `op`: its load and its combine.
fn reduce_kernel(op: ReduceOp) -> ReduceKernel {
    let load = match op.load() {
        ReduceLoad::Plain => ptx::ReduceLoad::Plain,
        ReduceLoad::Abs => ptx::ReduceLoad::Abs,
        ReduceLoad::Square => ptx::ReduceLoad::Square,
        ReduceLoad::Product => ptx::ReduceLoad::Product,
    };
    let combine = match op.combine() {
        ReduceCombine::Sum => ptx::ReduceCombine::Sum,
        ReduceCombine::Max => ptx::ReduceCombine::Max,
        ReduceCombine::Min => ptx::ReduceCombine::Min,
    };
    ReduceKernel::new(load, combine)
}

impl CudaDevice {
    /// `out[i] = expr(inputs[0][i], inputs[1][i], ...)`: one fused kernel for the whole chain.
    pub fn elementwise(&self, expr: &Expr, inputs: &[&DeviceBuffer], out: &mut DeviceBuffer) -> Result<()> {
        const OP: &str = "cuda elementwise";
        check_len(OP, expr.arity(), inputs.len())?;
        for x in inputs {
            check_len(OP, out.len(), x.len())?;
        }
        self.owns(OP, inputs)?;
        self.owns(OP, &[out])?;
        let k = FusedKernel::new(expr)?;
        let n = n_u32(OP, out.len())?;
        if n == 0 {
            return Ok(());
        }
        let f = self.loaded(&k)?;
        let scalars = expr.scalars();
        let mut args: Vec<Arg> = inputs.iter().map(|b| Arg::In(&b.slice)).collect();
        args.push(Arg::Out(&mut out.slice));
        args.push(Arg::U32(n));
        args.extend(scalars.iter().map(|&v| Arg::F32(v)));
        self.queue(&f, k.launch(n as usize, self.info().multiprocessors), &mut args)
    }

    /// Reduces `x` (and `y` for [`ReduceOp::Dot`]) on the device; the result stays there (one
    /// element). Every [`ReduceOp`], with its semantics: NaN propagates through max, min and
    /// norm_inf; max/min of an empty input is [`Error::EmptyInput`], the others give 0.
    pub fn reduce_device(&self, op: ReduceOp, x: &DeviceBuffer, y: Option<&DeviceBuffer>) -> Result<DeviceBuffer> {
        const OP: &str = "cuda reduce";
        op.check_args(OP, x.len(), y.map(DeviceBuffer::len))?;
        self.owns(OP, &[x])?;
        if let Some(y) = y {
            self.owns(OP, &[y])?;
        }
        if x.is_empty() {
            return match op.empty_value() {
                Some(v) => self.upload(&[v]),
                None => Err(Error::EmptyInput { op: OP }),
            };
        }
        let n = n_u32(OP, x.len())?;
        let k1 = reduce_kernel(op);
        let cfg = k1.launch(x.len(), self.info().multiprocessors);
        let mut partials = self.zeros(cfg.grid.0 as usize)?;
        let f1 = self.loaded(&k1)?;
        let mut args = vec![Arg::In(&x.slice)];
        if let Some(y) = y {
            args.push(Arg::In(&y.slice));
        }
        args.push(Arg::Out(&mut partials.slice));
        args.push(Arg::U32(n));
        self.queue(&f1, cfg, &mut args)?;
        let k2 = k1.second_pass(op == ReduceOp::NormL2);
        let f2 = self.loaded(&k2)?;
        let mut out = self.zeros(1)?;
        let blocks = cfg.grid.0;
        self.queue(&f2, k2.launch(1, 1), &mut [Arg::In(&partials.slice), Arg::Out(&mut out.slice), Arg::U32(blocks)])?;
        Ok(out)
    }

    /// Any [`ReduceOp`] of `x` (with `y` for `Dot`), returned to the host.
    pub fn reduce(&self, op: ReduceOp, x: &DeviceBuffer, y: Option<&DeviceBuffer>) -> Result<f32> {
        let out = self.reduce_device(op, x, y)?;
        Ok(self.download(&out)?[0])
    }

    fn softmax_impl(&self, op: &'static str, x: &DeviceBuffer, rows: usize, cols: usize, log: bool, out: &mut DeviceBuffer) -> Result<()> {
        self.owns(op, &[x, out])?;
        let (r, c) = rows_cols(op, x, rows, cols)?;
        check_len(op, x.len(), out.len())?;
        let k = SoftmaxKernel::new(c, log);
        let f = self.loaded(&k)?;
        self.queue(&f, k.launch(r), &mut [Arg::In(&x.slice), Arg::Out(&mut out.slice), Arg::U32(k.cols())])
    }

    /// `out = softmax(x)` over the whole buffer (one row), as `Vector::softmax`; an empty `x`
    /// is [`Error::EmptyInput`].
    pub fn softmax(&self, x: &DeviceBuffer, out: &mut DeviceBuffer) -> Result<()> {
        self.softmax_impl("cuda softmax", x, 1, x.len(), false, out)
    }

    /// `out = log_softmax(x)` over the whole buffer (one row).
    pub fn log_softmax(&self, x: &DeviceBuffer, out: &mut DeviceBuffer) -> Result<()> {
        self.softmax_impl("cuda log_softmax", x, 1, x.len(), true, out)
    }

    /// Softmax of each row of a row-major `[rows, cols]` matrix.
    pub fn softmax_rows(&self, x: &DeviceBuffer, rows: usize, cols: usize, out: &mut DeviceBuffer) -> Result<()> {
        self.softmax_impl("cuda softmax", x, rows, cols, false, out)
    }

    /// Log-softmax of each row of a row-major `[rows, cols]` matrix.
    pub fn log_softmax_rows(&self, x: &DeviceBuffer, rows: usize, cols: usize, out: &mut DeviceBuffer) -> Result<()> {
        self.softmax_impl("cuda log_softmax", x, rows, cols, true, out)
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
        self.owns(OP, &[x, gamma, beta, out])?;
        let (r, c) = rows_cols(OP, x, rows, cols)?;
        check_len(OP, cols, gamma.len())?;
        check_len(OP, cols, beta.len())?;
        check_len(OP, x.len(), out.len())?;
        check_eps(OP, eps)?;
        let k = NormKernel::new(NormKind::LayerNorm, c, eps);
        let f = self.loaded(&k)?;
        let mut args = [Arg::In(&x.slice), Arg::In(&gamma.slice), Arg::In(&beta.slice), Arg::Out(&mut out.slice), Arg::U32(c), Arg::F32(eps)];
        self.queue(&f, k.launch(r), &mut args)
    }

    /// RMSNorm over each row: `x / sqrt(mean(x²) + eps) * gamma`.
    pub fn rmsnorm(&self, x: &DeviceBuffer, gamma: &DeviceBuffer, rows: usize, cols: usize, eps: f32, out: &mut DeviceBuffer) -> Result<()> {
        const OP: &str = "cuda rmsnorm";
        self.owns(OP, &[x, gamma, out])?;
        let (r, c) = rows_cols(OP, x, rows, cols)?;
        check_len(OP, cols, gamma.len())?;
        check_len(OP, x.len(), out.len())?;
        check_eps(OP, eps)?;
        let k = NormKernel::new(NormKind::RmsNorm, c, eps);
        let f = self.loaded(&k)?;
        let mut args = [Arg::In(&x.slice), Arg::In(&gamma.slice), Arg::Out(&mut out.slice), Arg::U32(c), Arg::F32(eps)];
        self.queue(&f, k.launch(r), &mut args)
    }

    /// `c = a · b` for row-major `a: [m, k]`, `b: [k, n]`, `c: [m, n]` (the argument order of
    /// wgpu's `matmul` and of `Matrix`), with the fastest kernel for the shape.
    pub fn gemm(&self, a: &DeviceBuffer, b: &DeviceBuffer, c: &mut DeviceBuffer, m: usize, k: usize, n: usize) -> Result<()> {
        const OP: &str = "cuda gemm";
        let (m, k, n) = (n_u32(OP, m)?, n_u32(OP, k)?, n_u32(OP, n)?);
        self.gemm_with(GemmKernel::for_device(m, k, n, self.info().multiprocessors), a, b, c)
    }

    /// `c = a · b` with a chosen kernel (its shape `m×k · k×n` is the kernel's; each buffer's
    /// length is checked against it before the launch).
    pub fn gemm_with(&self, g: GemmKernel, a: &DeviceBuffer, b: &DeviceBuffer, c: &mut DeviceBuffer) -> Result<()> {
        const OP: &str = "cuda gemm";
        let (m, k, n) = (g.m() as usize, g.k() as usize, g.n() as usize);
        for (buf, r, cols) in [(a, m, k), (b, k, n), (&*c, m, n)] {
            if (r as u64) * (cols as u64) != buf.len() as u64 {
                return Err(Error::SizeMismatch { op: OP, shape: vec![r, cols], len: buf.len() });
            }
        }
        self.gemm_prefix(g, a, b, c)
    }

    /// [`CudaDevice::gemm_with`] on the first `m·k`, `k·n` and `m·n` values of buffers that may
    /// be longer.
    pub fn gemm_prefix(&self, g: GemmKernel, a: &DeviceBuffer, b: &DeviceBuffer, c: &mut DeviceBuffer) -> Result<()> {
        const OP: &str = "cuda gemm";
        self.owns(OP, &[a, b, c])?;
        let (m, k, n) = (g.m() as usize, g.k() as usize, g.n() as usize);
        if !g.indices_fit() {
            let bytes = (m.max(n) as u64).saturating_mul(k.max(n) as u64).saturating_mul(4);
            return Err(Error::BufferTooLarge { op: OP, bytes, limit: u32::MAX as u64 });
        }
        for (buf, r, cols) in [(a, m, k), (b, k, n), (&*c, m, n)] {
            if buf.len() < r * cols {
                return Err(Error::SizeMismatch { op: OP, shape: vec![r, cols], len: buf.len() });
            }
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let cfg = g.launch();
        if cfg.grid.1 > 65535 {
            return Err(Error::InvalidArgument { op: OP, name: "m", value: m.into(), reason: "more rows than the grid allows" });
        }
        let f = self.loaded(&g)?;
        if g.needs_zeroed_output() {
            self.queued_other("a fill");
            self.stream.memset_zeros(&mut c.slice.slice_mut(0..m * n)).map_err(super::ffi::drv)?;
        }
        let [sm, sk, sn] = g.scalars();
        let mut args = [Arg::In(&a.slice), Arg::In(&b.slice), Arg::Out(&mut c.slice), Arg::U32(sm), Arg::U32(sk), Arg::U32(sn)];
        self.queue(&f, cfg, &mut args)
    }
}

/// An error unless a norm's epsilon is finite and ≥ 0.
pub fn check_eps(op: &'static str, eps: f32) -> Result<()> {
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(Error::InvalidParameter { op, name: "eps", value: eps as f64, reason: "must be finite and >= 0" });
    }
    Ok(())
}
