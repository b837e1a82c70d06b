//! [`GpuBuffer`]: f32 data that stays on the device, so chains of ops cost one upload and one
//! download. Ops on buffers are recorded and submitted without waiting; only reads wait.

use super::device::GpuDevice;
use super::elementwise::{encode_chain, BinaryOp, Chain, Src, Step, UnaryOp, MAX_PARAMS};
use super::encoder::{Encoder, Span};
use super::kernels::{encode_matmul, encode_reduce, encode_softmax};
use super::pool::Pooled;
use super::readback::submit_and_read;
use crate::error::check_len;
use crate::ops::ReduceOp;
use crate::{Error, Result};

/// f32 values in a (pooled) device buffer. Dropping it returns the memory to the pool.
pub struct GpuBuffer {
    pub(crate) pooled: Pooled,
    pub(crate) len: usize,
    pub(crate) device: GpuDevice,
}

impl std::fmt::Debug for GpuBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBuffer").field("len", &self.len).finish()
    }
}

impl GpuBuffer {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub(crate) fn span(&self) -> Span {
        Span::whole(self.pooled.buffer(), self.len)
    }

    /// Copies the values back to the host (waits for the work that writes them).
    pub async fn read_async(&self) -> Result<Vec<f32>> {
        let mut out = vec![0.0; self.len];
        self.read_into_async(&mut out).await?;
        Ok(out)
    }

    /// Copies the values into `out` (`out.len() == self.len()`).
    pub async fn read_into_async(&self, out: &mut [f32]) -> Result<()> {
        check_len("GpuBuffer::read_into", self.len, out.len())?;
        let enc = Encoder::new(&self.device)?;
        submit_and_read(enc, &self.span(), out).await
    }

    /// Copies the values back to the host. Native only.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read(&self) -> Result<Vec<f32>> {
        pollster::block_on(self.read_async())
    }
}

/// [`Error::ForeignBuffer`] for a buffer of another device.
fn same_device(op: &'static str, dev: &GpuDevice, bufs: &[&GpuBuffer]) -> Result<()> {
    for b in bufs {
        if !std::sync::Arc::ptr_eq(&dev.inner, &b.device.inner) {
            return Err(Error::ForeignBuffer { op, user: dev.inner.id, owner: b.device.inner.id });
        }
    }
    Ok(())
}

macro_rules! blocking {
    ($(#[$m:meta])* $name:ident => $async_name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty) => {
        $(#[$m])*
        #[cfg(not(target_arch = "wasm32"))]
        pub fn $name(&self, $($arg: $ty),*) -> $ret {
            pollster::block_on(self.$async_name($($arg),*))
        }
    };
}
pub(crate) use blocking;

impl GpuDevice {
    /// Copies `data` into a new device-resident buffer.
    pub fn upload(&self, data: &[f32]) -> Result<GpuBuffer> {
        self.check()?;
        Ok(GpuBuffer { pooled: self.upload_pooled(data)?, len: data.len(), device: self.clone() })
    }

    /// A device-resident buffer of `len` zeros.
    pub fn zeros(&self, len: usize) -> Result<GpuBuffer> {
        let b = GpuBuffer { pooled: self.storage(len)?, len, device: self.clone() };
        let mut enc = Encoder::new(self)?;
        if len > 0 {
            enc.enc.clear_buffer(b.pooled.buffer(), 0, Some(len as u64 * 4));
        }
        enc.submit()?;
        Ok(b)
    }

    /// `out = op(x)` on the device; submitted, not waited for.
    pub async fn apply_async(&self, op: UnaryOp, x: &GpuBuffer, out: &mut GpuBuffer) -> Result<()> {
        op.validate()?;
        check_len(op.name(), x.len, out.len)?;
        same_device(op.name(), self, &[x, out])?;
        let mut enc = Encoder::new(self)?;
        encode_chain(&mut enc, &Chain::unary(op), &[&x.span()], &[&out.span()], x.len).await?;
        enc.submit().map(drop)
    }

    /// `out = ops[k-1](...ops[0](x))` as one generated kernel: one read of `x`, one write of
    /// `out`, whatever the number of ops (at most 16 parameters in all).
    pub async fn apply_fused_async(&self, ops: &[UnaryOp], x: &GpuBuffer, out: &mut GpuBuffer) -> Result<()> {
        let Some(first) = ops.first() else {
            return Err(Error::InvalidArgument { op: "apply_fused", name: "ops", value: 0usize.into(), reason: "no ops given" });
        };
        check_len(first.name(), x.len, out.len)?;
        same_device("apply_fused", self, &[x, out])?;
        let mut steps = Vec::with_capacity(ops.len());
        for (j, &op) in ops.iter().enumerate() {
            op.validate()?;
            steps.push(Step::Unary(op, if j == 0 { Src::Input(0) } else { Src::Step(j - 1) }));
        }
        let chain = Chain { n_inputs: 1, steps, outputs: vec![ops.len() - 1] };
        let np = chain.params().len();
        if np > MAX_PARAMS {
            return Err(Error::InvalidArgument { op: "apply_fused", name: "parameters", value: np.into(), reason: "more than 16 in one chain" });
        }
        let mut enc = Encoder::new(self)?;
        encode_chain(&mut enc, &chain, &[&x.span()], &[&out.span()], x.len).await?;
        enc.submit().map(drop)
    }

    /// `out = a op b` on the device; submitted, not waited for.
    pub async fn apply_binary_async(&self, op: BinaryOp, a: &GpuBuffer, b: &GpuBuffer, out: &mut GpuBuffer) -> Result<()> {
        op.validate()?;
        check_len(op.name(), a.len, b.len)?;
        check_len(op.name(), a.len, out.len)?;
        same_device(op.name(), self, &[a, b, out])?;
        let mut enc = Encoder::new(self)?;
        encode_chain(&mut enc, &Chain::binary(op), &[&a.span(), &b.span()], &[&out.span()], a.len).await?;
        enc.submit().map(drop)
    }

    /// A one-element device buffer holding `op` over `x` (and `y`, for [`ReduceOp::Dot`] only).
    /// Empty `x`: 0, or [`Error::EmptyInput`] for `Max`/`Min`; submitted, not waited for.
    pub async fn reduce_resident_async(&self, op: ReduceOp, x: &GpuBuffer, y: Option<&GpuBuffer>) -> Result<GpuBuffer> {
        check_reduce_args(op, x.len, y.map(|y| y.len))?;
        same_device(op.name(), self, &[x])?;
        if let Some(y) = y {
            same_device(op.name(), self, &[y])?;
        }
        let out = GpuBuffer { pooled: self.storage(1)?, len: 1, device: self.clone() };
        let mut enc = Encoder::new(self)?;
        if x.len == 0 {
            enc.enc.clear_buffer(out.pooled.buffer(), 0, Some(4));
        } else {
            let ys = y.map(|y| y.span());
            encode_reduce(&mut enc, op, &x.span(), ys.as_ref(), &out.span(), 0).await?;
        }
        enc.submit()?;
        Ok(out)
    }

    /// A one-element device buffer holding a · b.
    pub async fn dot_resident_async(&self, a: &GpuBuffer, b: &GpuBuffer) -> Result<GpuBuffer> {
        self.reduce_resident_async(ReduceOp::Dot, a, Some(b)).await
    }

    async fn softmax_resident_impl(&self, x: &GpuBuffer, out: &mut GpuBuffer, rows: usize, cols: usize, log: bool) -> Result<()> {
        let op = softmax_name(log);
        check_softmax_shape(op, x.len, out.len, rows, cols)?;
        same_device(op, self, &[x, out])?;
        let mut enc = Encoder::new(self)?;
        encode_softmax(&mut enc, &x.span(), &out.span(), rows, cols, log).await?;
        enc.submit().map(drop)
    }

    /// `out = softmax(x)` over the whole buffer, on the device.
    pub async fn softmax_resident_async(&self, x: &GpuBuffer, out: &mut GpuBuffer) -> Result<()> {
        self.softmax_resident_impl(x, out, 1, x.len, false).await
    }

    /// `out = log_softmax(x)` over the whole buffer, on the device.
    pub async fn log_softmax_resident_async(&self, x: &GpuBuffer, out: &mut GpuBuffer) -> Result<()> {
        self.softmax_resident_impl(x, out, 1, x.len, true).await
    }

    /// Softmax of each row of a row-major `rows × cols` `x`, on the device.
    pub async fn softmax_rows_resident_async(&self, x: &GpuBuffer, rows: usize, cols: usize, out: &mut GpuBuffer) -> Result<()> {
        self.softmax_resident_impl(x, out, rows, cols, false).await
    }

    /// log_softmax of each row of a row-major `rows × cols` `x`, on the device.
    pub async fn log_softmax_rows_resident_async(&self, x: &GpuBuffer, rows: usize, cols: usize, out: &mut GpuBuffer) -> Result<()> {
        self.softmax_resident_impl(x, out, rows, cols, true).await
    }

    /// `c (m×n) = a (m×k) · b (k×n)` on the device.
    pub async fn matmul_resident_async(&self, a: &GpuBuffer, b: &GpuBuffer, c: &mut GpuBuffer, m: usize, k: usize, n: usize) -> Result<()> {
        check_matmul(a.len, b.len, c.len, m, k, n)?;
        same_device("matmul", self, &[a, b, c])?;
        let mut enc = Encoder::new(self)?;
        encode_matmul(&mut enc, &a.span(), &b.span(), &c.span(), m, k, n).await?;
        enc.submit().map(drop)
    }

    blocking!(
        /// `out = op(x)` on the device; submitted, not waited for.
        apply => apply_async(op: UnaryOp, x: &GpuBuffer, out: &mut GpuBuffer) -> Result<()>);
    blocking!(
        /// Several unary ops fused into one kernel on the device.
        apply_fused => apply_fused_async(ops: &[UnaryOp], x: &GpuBuffer, out: &mut GpuBuffer) -> Result<()>);
    blocking!(
        /// `out = a op b` on the device.
        apply_binary => apply_binary_async(op: BinaryOp, a: &GpuBuffer, b: &GpuBuffer, out: &mut GpuBuffer) -> Result<()>);
    blocking!(
        /// A one-element device buffer holding `op` over `x` (and `y` for `Dot`).
        reduce_resident => reduce_resident_async(op: ReduceOp, x: &GpuBuffer, y: Option<&GpuBuffer>) -> Result<GpuBuffer>);
    blocking!(
        /// A one-element device buffer holding a · b.
        dot_resident => dot_resident_async(a: &GpuBuffer, b: &GpuBuffer) -> Result<GpuBuffer>);
    blocking!(
        /// softmax over the whole buffer, on the device.
        softmax_resident => softmax_resident_async(x: &GpuBuffer, out: &mut GpuBuffer) -> Result<()>);
    blocking!(
        /// log_softmax over the whole buffer, on the device.
        log_softmax_resident => log_softmax_resident_async(x: &GpuBuffer, out: &mut GpuBuffer) -> Result<()>);
    blocking!(
        /// Softmax of each row, on the device.
        softmax_rows_resident => softmax_rows_resident_async(x: &GpuBuffer, rows: usize, cols: usize, out: &mut GpuBuffer) -> Result<()>);
    blocking!(
        /// log_softmax of each row, on the device.
        log_softmax_rows_resident => log_softmax_rows_resident_async(x: &GpuBuffer, rows: usize, cols: usize, out: &mut GpuBuffer) -> Result<()>);
    blocking!(
        /// matmul on the device.
        matmul_resident => matmul_resident_async(a: &GpuBuffer, b: &GpuBuffer, c: &mut GpuBuffer, m: usize, k: usize, n: usize) -> Result<()>);
}

/// Argument checks of a reduction, in the CPU's and CUDA's order: `y` given exactly for `Dot`,
/// equal lengths, then an empty input where the result is undefined.
pub(crate) fn check_reduce_args(op: ReduceOp, x: usize, y: Option<usize>) -> Result<()> {
    op.check_args(op.name(), x, y)?;
    if x == 0 && op.empty_value().is_none() {
        return Err(Error::EmptyInput { op: op.name() });
    }
    Ok(())
}

pub(crate) fn softmax_name(log: bool) -> &'static str {
    if log {
        "log_softmax"
    } else {
        "softmax"
    }
}

/// Softmax shapes, in the CPU's order: `out` as long as `x` ([`Error::LengthMismatch`]),
/// `rows × cols` equal to the length ([`Error::SizeMismatch`], as for a matmul operand whose
/// length is not its shape's product, and as CUDA's row kernels), and
/// no empty row ([`Error::EmptyInput`]).
pub(crate) fn check_softmax_shape(op: &'static str, x: usize, out: usize, rows: usize, cols: usize) -> Result<()> {
    check_len(op, x, out)?;
    if rows.checked_mul(cols) != Some(x) {
        return Err(Error::SizeMismatch { op, shape: vec![rows, cols], len: x });
    }
    if x == 0 {
        return Err(Error::EmptyInput { op });
    }
    Ok(())
}

/// Shape checks of matmul: a is m×k, b is k×n, c is m×n.
pub(crate) fn check_matmul(a: usize, b: usize, c: usize, m: usize, k: usize, n: usize) -> Result<()> {
    let mul = |x: usize, y: usize| x.checked_mul(y).ok_or_else(|| Error::SizeOverflow { op: "matmul", dims: vec![x, y] });
    let shape = |len: usize, r: usize, cc: usize| -> Result<()> {
        let want = mul(r, cc)?;
        if want == len {
            Ok(())
        } else {
            Err(Error::SizeMismatch { op: "matmul", shape: vec![r, cc], len })
        }
    };
    shape(a, m, k)?;
    shape(b, k, n)?;
    shape(c, m, n)
}
