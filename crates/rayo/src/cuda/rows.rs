//! Ops over the first `m` rows of buffers that may be longer (an engine's buffers hold its
//! largest batch): quantized products (matvec, fused variants, the fp32 GEMM path), a bias over
//! rows, RMSNorm of rows, element-wise over a prefix. Every size is checked before a launch,
//! so a kernel never indexes past a buffer.

use super::buffer::{DeviceBuffer, DeviceBytes};
use super::device::CudaDevice;
use super::elementwise::{Expr, FusedKernel};
use super::ffi::Arg;
use crate::error::{Error, Result};
use rayo_ptx::kernels::{AddRowsKernel, CopyColsKernel, DequantTKernel, GemmKernel, NormKernel, NormKind};

pub use rayo_ptx::kernels::{ActFormat, Epilogue, QFormat, QMatvecKernel};

pub(super) fn u32_of(op: &'static str, name: &'static str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::InvalidArgument { op, name, value: v.into(), reason: "past the 32-bit sizes the kernels index with" })
}

/// `a · b`, an error naming the op when it overflows.
pub(super) fn prod(op: &'static str, dims: &[usize]) -> Result<usize> {
    dims.iter().try_fold(1usize, |p, &d| p.checked_mul(d)).ok_or_else(|| Error::SizeOverflow { op, dims: dims.to_vec() })
}

/// An error unless `have ≥ need` (a buffer holding at least the rows an op touches).
pub(super) fn room(op: &'static str, have: usize, need: usize) -> Result<()> {
    if have < need {
        return Err(Error::LengthMismatch { op, expected: need, actual: have });
    }
    Ok(())
}

impl CudaDevice {
    /// `y[r] = W · x[r]` for the first `m` rows of `x` (`cols` values each) into the first `m`
    /// rows of `y` (`rows` values each); `w` holds `rows × cols/32` blocks of `fmt`.
    #[allow(clippy::too_many_arguments)]
    pub fn qmatvec(&self, fmt: QFormat, w: &DeviceBytes, rows: usize, cols: usize, x: &DeviceBuffer, m: usize, y: &mut DeviceBuffer) -> Result<()> {
        self.qmatvec_fused(QMatvecKernel::new(fmt), x, None, cols, m, &[(w, rows)], &mut [y])
    }

    /// The products of a [`QMatvecKernel`] variant in one launch: the first `m` rows of `x`
    /// (`cols` values each), normalized first when `norm` is `(gamma, eps)` (the kernel must be
    /// a norm variant), times each matrix `(w, rows)` (all of the kernel's format), into the
    /// first `m` rows of each output (Swiglu: one output of the matrices' rows).
    #[allow(clippy::too_many_arguments)]
    pub fn qmatvec_fused(
        &self,
        k: QMatvecKernel,
        x: &DeviceBuffer,
        norm: Option<(&DeviceBuffer, f32)>,
        cols: usize,
        m: usize,
        mats: &[(&DeviceBytes, usize)],
        ys: &mut [&mut DeviceBuffer],
    ) -> Result<()> {
        self.qmatvec_fused_bias(k, x, norm, cols, m, mats, &[], ys)
    }

    /// [`CudaDevice::qmatvec_fused`] adding `biases[i]` (`rows_i` values) to matrix `i`'s sums:
    /// a kernel [`QMatvecKernel::with_bias`] made, one bias per matrix; none for any other.
    #[allow(clippy::too_many_arguments)]
    pub fn qmatvec_fused_bias(
        &self,
        k: QMatvecKernel,
        x: &DeviceBuffer,
        norm: Option<(&DeviceBuffer, f32)>,
        cols: usize,
        m: usize,
        mats: &[(&DeviceBytes, usize)],
        biases: &[&DeviceBuffer],
        ys: &mut [&mut DeviceBuffer],
    ) -> Result<()> {
        const OP: &str = "cuda qmatvec";
        self.owns(OP, &[x])?;
        if norm.is_some() != k.norm() || k.activations() != ActFormat::F32 {
            return Err(Error::InvalidArgument { op: OP, name: "norm", value: norm.is_some().into(), reason: "not what the kernel variant takes" });
        }
        room(OP, x.len(), prod(OP, &[m, cols])?)?;
        if let Some((g, eps)) = norm {
            self.owns(OP, &[g])?;
            room(OP, g.len(), cols)?;
            super::ops::check_eps(OP, eps)?;
        }
        let mut args = vec![Arg::In(&x.slice)];
        if let Some((g, eps)) = norm {
            args.push(Arg::In(&g.slice));
            args.push(Arg::F32(eps));
        }
        self.qmatvec_launch(OP, k, args, cols, m, (mats, biases), ys)
    }

    /// [`CudaDevice::qmatvec_fused_bias`]'s checks of the matrices, biases and outputs, and its
    /// launch, with `args` the activations' parameters (already checked).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn qmatvec_launch<'a>(
        &self,
        op: &'static str,
        k: QMatvecKernel,
        mut args: Vec<Arg<'a>>,
        cols: usize,
        m: usize,
        (mats, biases): (&[(&'a DeviceBytes, usize)], &[&'a DeviceBuffer]),
        ys: &'a mut [&mut DeviceBuffer],
    ) -> Result<()> {
        for y in ys.iter() {
            self.owns(op, &[&**y])?;
        }
        let want = if k.bias() { mats.len() } else { 0 };
        if biases.len() != want {
            return Err(Error::InvalidArgument {
                op,
                name: "biases",
                value: biases.len().into(),
                reason: "one per matrix for a bias variant, else none",
            });
        }
        self.owns(op, biases)?;
        for (b, (_, rows)) in biases.iter().zip(mats) {
            room(op, b.len(), *rows)?;
        }
        for (w, _) in mats {
            self.owns_bytes(op, &[*w])?;
        }
        if mats.len() != k.mats() as usize || ys.len() != k.outputs() as usize {
            return Err(Error::InvalidArgument { op, name: "matrices", value: mats.len().into(), reason: "not what the kernel variant takes" });
        }
        let bv = k.format().block_values() as usize;
        if cols % bv != 0 {
            return Err(Error::NotBlockMultiple { format: "cuda qmatvec", len: cols, block: bv });
        }
        let swiglu = k.epilogue().gated();
        if swiglu && mats[0].1 != mats[1].1 {
            return Err(Error::LengthMismatch { op, expected: mats[0].1, actual: mats[1].1 });
        }
        for (i, (w, rows)) in mats.iter().enumerate() {
            room(op, w.len(), prod(op, &[*rows, cols / bv, k.format().block_bytes() as usize])?)?;
            if let Some(y) = ys.get(if swiglu { 0 } else { i }) {
                room(op, y.len(), prod(op, &[m, *rows])?)?;
                u32_of(op, "y", prod(op, &[m, *rows, 4])?)?;
            }
        }
        u32_of(op, "cols", prod(op, &[cols, 4])?)?;
        let total = if swiglu { mats[0].1 } else { mats.iter().map(|&(_, r)| r).sum() };
        let total = u32_of(op, "rows", prod(op, &[total, 4])?)? / 4;
        let mm = u32_of(op, "m", m)?;
        if m == 0 || total == 0 || cols == 0 {
            return Ok(());
        }
        // a block per row for a decoding step's products, a warp per row for large ones and for
        // Q4_K on 8 bits, whose 32-value items would leave most of a block idle (H100,
        // Llama-3.2-1B's shape in Q4_K: 1,294 tokens/s against 1,048 with a block per row;
        // `RAYO_CUDA_MATVEC=warp|block` forces either). The two sum a row in different orders:
        // a kernel whose rows must get their bits alone ([`QMatvecKernel::rows_alike`]) takes a
        // warp per row for any `m` (a block per row of several activation rows leaves most of
        // its threads idle on a small model's rows: SmolLM2 served 4,199 tokens/s at 8 streams
        // on an H100 that way, 5,562 with a warp).
        let forced = crate::Config::get().cuda_matvec_block;
        let wide_items = k.activations() == ActFormat::Q8 && k.format() == QFormat::Q4_K;
        let block = forced.unwrap_or(m == 1 && !k.alike() && total < 8192 && !wide_items);
        let k = k.per_block(block);
        let f = self.loaded(&k)?;
        args.push(Arg::U32(cols as u32));
        args.extend(mats.iter().map(|(w, _)| Arg::BytesIn(&w.slice)));
        args.extend(ys.iter_mut().map(|y| Arg::Out(&mut y.slice)));
        let nrows = if swiglu { 1 } else { mats.len() };
        args.extend(mats.iter().take(nrows).map(|&(_, r)| Arg::U32(r as u32)));
        args.extend(biases.iter().map(|b| Arg::In(&b.slice)));
        self.queue(&f, k.launch(total, mm), &mut args)
    }

    /// `y = x·Wᵀ` for the first `m` rows of `x` through the fp32 GEMM (a prompt's rows): `W`
    /// (`rows × cols` of `fmt`) dequantized and transposed into `wt` (`cols × ld`, `ld` = `rows`
    /// rounded up to 128), the first `m_pad` rows of `x` (`m` rounded up to 128: `x` must hold
    /// them; the rows past `m` only make rows of `yp` nobody reads) times it into `yp`
    /// (`m_pad × ld`), then the first `rows` columns of its first `m` rows packed into `y`.
    #[allow(clippy::too_many_arguments)]
    pub fn qmatmul_gemm(
        &self,
        fmt: QFormat,
        w: &DeviceBytes,
        (rows, cols): (usize, usize),
        x: &DeviceBuffer,
        m: usize,
        y: &mut DeviceBuffer,
        wt: &mut DeviceBuffer,
        yp: &mut DeviceBuffer,
    ) -> Result<()> {
        const OP: &str = "cuda qmatmul_gemm";
        self.owns(OP, &[x, y, wt, yp])?;
        self.owns_bytes(OP, &[w])?;
        let bv = fmt.block_values() as usize;
        if cols % bv != 0 {
            return Err(Error::NotBlockMultiple { format: "cuda qmatmul_gemm", len: cols, block: bv });
        }
        let (ld, m_pad) = (rows.next_multiple_of(128), m.next_multiple_of(128));
        room(OP, w.len(), prod(OP, &[rows, cols / bv, fmt.block_bytes() as usize])?)?;
        room(OP, x.len(), prod(OP, &[m_pad, cols])?)?;
        room(OP, wt.len(), prod(OP, &[cols, ld])?)?;
        room(OP, yp.len(), prod(OP, &[m_pad, ld])?)?;
        room(OP, y.len(), prod(OP, &[m, rows])?)?;
        for (name, v) in [("wt", prod(OP, &[cols, ld, 4])?), ("yp", prod(OP, &[m_pad, ld, 4])?), ("x", prod(OP, &[m_pad, cols, 4])?)] {
            u32_of(OP, name, v)?;
        }
        if m == 0 || rows == 0 {
            return Ok(());
        }
        let dq = DequantTKernel::new(fmt);
        let f = self.loaded(&dq)?;
        let u = |v: usize| Arg::U32(v as u32);
        self.queue(&f, dq.launch(rows as u32, cols as u32), &mut [Arg::BytesIn(&w.slice), Arg::Out(&mut wt.slice), u(rows), u(cols), u(ld)])?;
        let g = GemmKernel::for_device(m_pad as u32, cols as u32, ld as u32, self.info().multiprocessors);
        self.gemm_prefix(g, x, wt, yp)?;
        let total = m * rows;
        let cp = CopyColsKernel;
        let f = self.loaded(&cp)?;
        self.queue(&f, cp.launch(total as u32), &mut [Arg::In(&yp.slice), Arg::Out(&mut y.slice), u(rows), u(ld), u(total)])
    }

    /// `x[r] += b` for the first `m` rows of `x` (rows of `b.len()` values): a projection's bias
    /// over a batch, in one launch (a recorded step may hold it).
    pub fn add_rows(&self, x: &mut DeviceBuffer, b: &DeviceBuffer, m: usize) -> Result<()> {
        const OP: &str = "cuda add_rows";
        self.owns(OP, &[x, b])?;
        let total = prod(OP, &[m, b.len()])?;
        room(OP, x.len(), total)?;
        u32_of(OP, "x", prod(OP, &[total, 4])?)?;
        if total == 0 {
            return Ok(());
        }
        let k = AddRowsKernel;
        let f = self.loaded(&k)?;
        let mut args = [Arg::Out(&mut x.slice), Arg::In(&b.slice), Arg::U32(b.len() as u32), Arg::U32(total as u32)];
        self.queue(&f, k.launch(total as u32), &mut args)
    }

    /// RMSNorm of the first `m` rows of `x` (`cols` values each) into `out`.
    pub fn rms_norm_rows(&self, x: &DeviceBuffer, gamma: &DeviceBuffer, m: usize, cols: usize, eps: f32, out: &mut DeviceBuffer) -> Result<()> {
        self.rms_norm_launch("cuda rms_norm_rows", (x, gamma), (m, cols, eps), false, out)
    }

    /// `out[r] += x[r] / rms(x[r]) · gamma` for `m` rows of `cols` values (rounded as
    /// [`CudaDevice::rms_norm_rows`] and then an add): a sublayer's norm and the residual
    /// connection after it in one launch.
    pub fn rms_norm_add_rows(&self, x: &DeviceBuffer, gamma: &DeviceBuffer, m: usize, cols: usize, eps: f32, out: &mut DeviceBuffer) -> Result<()> {
        self.rms_norm_launch("cuda rms_norm_add_rows", (x, gamma), (m, cols, eps), true, out)
    }

    fn rms_norm_launch(
        &self,
        op: &'static str,
        (x, gamma): (&DeviceBuffer, &DeviceBuffer),
        (m, cols, eps): (usize, usize, f32),
        residual: bool,
        out: &mut DeviceBuffer,
    ) -> Result<()> {
        self.owns(op, &[x, gamma, out])?;
        let n = prod(op, &[m, cols])?;
        room(op, x.len(), n)?;
        room(op, out.len(), n)?;
        room(op, gamma.len(), cols)?;
        super::ops::check_eps(op, eps)?;
        let c = u32_of(op, "cols", prod(op, &[cols, 4])?)? / 4;
        if m == 0 || cols == 0 {
            return Ok(());
        }
        let k = NormKernel::new(NormKind::RmsNorm, c, eps);
        let k = if residual { k.residual() } else { k };
        let f = self.loaded(&k)?;
        let mut args = [Arg::In(&x.slice), Arg::In(&gamma.slice), Arg::Out(&mut out.slice), Arg::U32(c), Arg::F32(eps)];
        self.queue(&f, k.launch(u32_of(op, "m", m)?), &mut args)
    }

    /// [`CudaDevice::elementwise`] over the first `n` values of each buffer.
    pub fn elementwise_n(&self, expr: &Expr, inputs: &[&DeviceBuffer], out: &mut DeviceBuffer, n: usize) -> Result<()> {
        const OP: &str = "cuda elementwise_n";
        if inputs.len() != expr.arity() {
            return Err(Error::LengthMismatch { op: OP, expected: expr.arity(), actual: inputs.len() });
        }
        for x in inputs {
            room(OP, x.len(), n)?;
        }
        room(OP, out.len(), n)?;
        self.owns(OP, inputs)?;
        self.owns(OP, &[out])?;
        let nn = u32_of(OP, "n", prod(OP, &[n, 4])?)? / 4;
        if n == 0 {
            return Ok(());
        }
        let k = FusedKernel::new(expr)?;
        let f = self.loaded(&k)?;
        let scalars = expr.scalars();
        let mut args: Vec<Arg> = inputs.iter().map(|b| Arg::In(&b.slice)).collect();
        args.push(Arg::Out(&mut out.slice));
        args.push(Arg::U32(nn));
        args.extend(scalars.iter().map(|&v| Arg::F32(v)));
        self.queue(&f, k.launch(n, self.info().multiprocessors), &mut args)
    }
}
