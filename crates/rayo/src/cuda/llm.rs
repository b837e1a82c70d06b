//! The ops of a llama-family forward pass on device buffers (rayo-llm's CUDA backend is built
//! on these). Each acts on the first `m` rows of buffers that may be longer (a session's
//! buffers hold its largest batch); every size is checked before a launch, so a kernel never
//! indexes past a buffer.

use super::buffer::{DeviceBuffer, DeviceBytes};
use super::device::CudaDevice;
use super::elementwise::{Expr, FusedKernel};
use super::ffi::drv;
use super::ffi::{launch, Arg};
use crate::error::{Error, Result};
use cudarc::driver::sys;
use rayo_ptx::kernels::{
    AddRowsKernel, AttentionKernel, CopyColsKernel, DecodeAttentionKernel, DequantTKernel, EmbedKernel, GemmKernel, KvStoreKernel, NormKernel,
    NormKind, RopeKernel,
};

pub use rayo_ptx::kernels::{ActFormat, Epilogue, QFormat, QMatvecKernel, RopePairs};

/// The heads of one attention op and the cache's capacity in positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    /// Positions the cache holds.
    pub positions: usize,
    /// Whether the cache holds f16 (else f32).
    pub f16: bool,
}

impl AttentionShape {
    /// Bytes of one layer's K (or V) cache.
    pub fn layer_bytes(&self) -> Option<usize> {
        let esz = if self.f16 { 2 } else { 4 };
        self.positions.checked_mul(self.n_head_kv)?.checked_mul(self.head_dim)?.checked_mul(esz)
    }

    /// An error unless positions `pos0..pos0 + m` fit and `k_cache`, `v_cache` hold one
    /// layer with indices below 2³². The values per position.
    pub(super) fn check_cache(&self, op: &'static str, pos0: usize, m: usize, k_cache: &DeviceBytes, v_cache: &DeviceBytes) -> Result<usize> {
        let width = prod(op, &[self.n_head_kv, self.head_dim])?;
        let end = pos0.checked_add(m).ok_or(Error::SizeOverflow { op, dims: vec![pos0, m] })?;
        if end > self.positions {
            return Err(Error::LengthMismatch { op, expected: self.positions, actual: end });
        }
        let layer = self.layer_bytes().ok_or(Error::SizeOverflow { op, dims: vec![self.positions, width] })?;
        room(op, k_cache.len(), layer)?;
        room(op, v_cache.len(), layer)?;
        u32_of(op, "cache", prod(op, &[self.positions, width])?)?;
        Ok(width)
    }
}

pub(super) fn u32_of(op: &'static str, name: &'static str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::InvalidArgument { op, name, value: v.into(), reason: "past the 32-bit sizes the kernels index with" })
}

/// An error unless the KV heads divide the query heads (grouped-query attention).
pub(super) fn check_heads(op: &'static str, shape: &AttentionShape) -> Result<()> {
    let AttentionShape { n_head, n_head_kv, .. } = *shape;
    if n_head_kv == 0 || !n_head.is_multiple_of(n_head_kv) {
        return Err(Error::InvalidArgument { op, name: "n_head_kv", value: n_head_kv.into(), reason: "must divide the query heads" });
    }
    Ok(())
}

/// `a · b`, an error naming the op when it overflows.
pub(super) fn prod(op: &'static str, dims: &[usize]) -> Result<usize> {
    dims.iter().try_fold(1usize, |p, &d| p.checked_mul(d)).ok_or(Error::SizeOverflow { op, dims: dims.to_vec() })
}

/// An error unless `have ≥ need` (a buffer holding at least the rows an op touches).
pub(super) fn room(op: &'static str, have: usize, need: usize) -> Result<()> {
    if have < need {
        return Err(Error::LengthMismatch { op, expected: need, actual: have });
    }
    Ok(())
}

/// A pass's inputs where the kernels read them: the token ids and the first row's position, in
/// device memory, so that a captured graph of a pass replays for any token at any position.
/// The host side remembers what it wrote, and each launch checks its sizes against that.
///
/// A recorded pass reads these without the host's checks, so every write is checked against
/// what any pass over them may index: `pos0 + rows` within the cache's positions, every id
/// below the embedding table's rows.
pub struct StepInputs {
    tokens: DeviceBytes,
    pub(super) pos: DeviceBytes,
    /// (position, rows) last written, and the largest id.
    written: (usize, usize),
    max_id: u32,
    /// The positions a pass may reach and the ids it may embed.
    positions: usize,
    vocab: usize,
    device: u64,
}

impl StepInputs {
    /// Room for passes of up to `max_rows` tokens, at positions below `positions`, of ids below
    /// `vocab`.
    pub fn new(dev: &CudaDevice, max_rows: usize, positions: usize, vocab: usize) -> Result<StepInputs> {
        let bytes = prod("cuda StepInputs", &[max_rows.max(1), 4])?;
        Ok(StepInputs { tokens: dev.zero_bytes(bytes)?, pos: dev.zero_bytes(4)?, written: (0, 0), max_id: 0, positions, vocab, device: dev.id() })
    }

    /// Writes the ids and the first position of the next pass (queued on the device's stream,
    /// before the pass's work). Errors, with nothing written: more rows than it has room for,
    /// `pos0 + rows` past its positions, an id past its vocabulary.
    pub fn write(&mut self, dev: &CudaDevice, tokens: &[u32], pos0: usize) -> Result<()> {
        const OP: &str = "cuda StepInputs::write";
        dev.check_owner(OP, self.device)?;
        room(OP, self.tokens.len() / 4, tokens.len())?;
        let end = pos0.checked_add(tokens.len()).ok_or(Error::SizeOverflow { op: OP, dims: vec![pos0, tokens.len()] })?;
        if end > self.positions {
            return Err(Error::LengthMismatch { op: OP, expected: self.positions, actual: end });
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(Error::InvalidArgument { op: OP, name: "token", value: (t as usize).into(), reason: "past the vocabulary" });
        }
        let p = u32_of(OP, "pos0", pos0)?;
        let ids: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
        if !ids.is_empty() {
            dev.stream.memcpy_htod(&ids, &mut self.tokens.slice.slice_mut(0..ids.len())).map_err(drv)?;
        }
        dev.stream.memcpy_htod(&p.to_le_bytes(), &mut self.pos.slice.slice_mut(0..4)).map_err(drv)?;
        self.written = (pos0, tokens.len());
        self.max_id = tokens.iter().copied().max().unwrap_or(0);
        Ok(())
    }

    /// An error unless the last write was `m` rows at `pos0` by this device.
    pub(super) fn check(&self, dev: &CudaDevice, op: &'static str, pos0: usize, m: usize) -> Result<()> {
        dev.check_owner(op, self.device)?;
        if self.written != (pos0, m) {
            return Err(Error::InvalidArgument {
                op,
                name: "pos0",
                value: pos0.into(),
                reason: "not the position the step's inputs were written with",
            });
        }
        Ok(())
    }
}

/// A captured stream of work (one decoding step), replayed with one driver call.
pub struct Replay {
    pub(super) graph: cudarc::driver::CudaGraph,
}

impl Replay {
    /// Queues the captured work again.
    ///
    /// # Safety
    /// Every device buffer the captured work used must still be alive (the graph holds their
    /// addresses, not the buffers): replaying after one was dropped reads or writes freed
    /// device memory.
    pub unsafe fn replay(&self) -> Result<()> {
        self.graph.launch().map_err(drv)
    }
}

impl CudaDevice {
    /// Starts recording this device's stream: the work queued until [`CudaDevice::end_capture`]
    /// is recorded, not run. Kernels must be loaded and buffers allocated before (a pass run
    /// once uncaptured does both): meanwhile every allocation on this device is an error, and
    /// so is a second recording.
    pub fn begin_capture(&self) -> Result<()> {
        if self.capturing.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return Err(Error::Device { api: "cuda", message: "begin_capture: the stream is already recording".into() });
        }
        let begun = self.stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).map_err(drv);
        if begun.is_err() {
            self.capturing.store(false, std::sync::atomic::Ordering::Release);
        }
        begun
    }

    /// Ends the recording (see [`CudaDevice::begin_capture`]) as an instantiated graph.
    pub fn end_capture(&self) -> Result<Replay> {
        let flags = sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
        let ended = self.stream.end_capture(flags).map_err(drv);
        self.capturing.store(false, std::sync::atomic::Ordering::Release);
        let graph = ended?.ok_or(Error::Device { api: "cuda", message: "stream capture produced no graph".into() })?;
        graph.upload().map_err(drv)?;
        Ok(Replay { graph })
    }

    /// Rows `tokens[r]` of `table` (`rows × cols` values of `fmt`) into the first `m` rows of
    /// `out`: the ids are the ones `inputs` holds (written for `m` rows; each checked below
    /// `rows` before it was written).
    #[allow(clippy::too_many_arguments)]
    pub fn embed_rows(
        &self,
        fmt: QFormat,
        table: &DeviceBytes,
        rows: usize,
        cols: usize,
        inputs: &StepInputs,
        m: usize,
        out: &mut DeviceBuffer,
    ) -> Result<()> {
        const OP: &str = "cuda embed_rows";
        self.owns(OP, &[out])?;
        self.owns_bytes(OP, &[table])?;
        self.check_owner(OP, inputs.device)?;
        if inputs.written.1 != m {
            return Err(Error::LengthMismatch { op: OP, expected: inputs.written.1, actual: m });
        }
        if m > 0 && inputs.max_id as usize >= rows {
            return Err(Error::InvalidArgument { op: OP, name: "token", value: (inputs.max_id as usize).into(), reason: "past the table's rows" });
        }
        let bv = fmt.block_values() as usize;
        if cols % bv != 0 {
            return Err(Error::NotBlockMultiple { format: "cuda embed_rows", len: cols, block: bv });
        }
        room(OP, table.len(), prod(OP, &[rows, cols / bv, fmt.block_bytes() as usize])?)?;
        room(OP, out.len(), prod(OP, &[m, cols])?)?;
        u32_of(OP, "out", prod(OP, &[m, cols, 4])?)?;
        u32_of(OP, "row bytes", prod(OP, &[cols / bv, fmt.block_bytes() as usize])?)?;
        if m == 0 || cols == 0 {
            return Ok(());
        }
        let k = EmbedKernel::new(fmt);
        let f = self.loaded(&k)?;
        let mut args = [Arg::BytesIn(&table.slice), Arg::BytesIn(&inputs.tokens.slice), Arg::Out(&mut out.slice), Arg::U32(cols as u32)];
        launch(&self.stream, &f, k.launch(m as u32), &mut args)
    }

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
        self.qmatvec_launch(OP, k, args, cols, m, mats, ys)
    }

    /// [`CudaDevice::qmatvec_fused`]'s checks of the matrices and outputs, and its launch, with
    /// `args` the activations' parameters (already checked).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn qmatvec_launch<'a>(
        &self,
        op: &'static str,
        k: QMatvecKernel,
        mut args: Vec<Arg<'a>>,
        cols: usize,
        m: usize,
        mats: &[(&'a DeviceBytes, usize)],
        ys: &'a mut [&mut DeviceBuffer],
    ) -> Result<()> {
        for y in ys.iter() {
            self.owns(op, &[&**y])?;
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
        let swiglu = k.epilogue() == Epilogue::Swiglu;
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
        // `RAYO_CUDA_MATVEC=warp|block` forces either)
        let forced = crate::Config::get().cuda_matvec_block;
        let wide_items = k.activations() == ActFormat::Q8 && k.format() == QFormat::Q4_K;
        let block = forced.unwrap_or(m == 1 && total < 8192 && !wide_items);
        let k = k.per_block(block);
        let f = self.loaded(&k)?;
        args.push(Arg::U32(cols as u32));
        args.extend(mats.iter().map(|(w, _)| Arg::BytesIn(&w.slice)));
        args.extend(ys.iter_mut().map(|y| Arg::Out(&mut y.slice)));
        let nrows = if swiglu { 1 } else { mats.len() };
        args.extend(mats.iter().take(nrows).map(|&(_, r)| Arg::U32(r as u32)));
        launch(&self.stream, &f, k.launch(total, mm), &mut args)
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
        launch(
            &self.stream,
            &f,
            dq.launch(rows as u32, cols as u32),
            &mut [Arg::BytesIn(&w.slice), Arg::Out(&mut wt.slice), u(rows), u(cols), u(ld)],
        )?;
        let g = GemmKernel::for_device(m_pad as u32, cols as u32, ld as u32, self.info().multiprocessors);
        self.gemm_prefix(g, x, wt, yp)?;
        let total = m * rows;
        let cp = CopyColsKernel;
        let f = self.loaded(&cp)?;
        launch(&self.stream, &f, cp.launch(total as u32), &mut [Arg::In(&yp.slice), Arg::Out(&mut y.slice), u(rows), u(ld), u(total)])
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
        launch(&self.stream, &f, k.launch(total as u32), &mut args)
    }

    /// RMSNorm of the first `m` rows of `x` (`cols` values each) into `out`.
    #[allow(clippy::too_many_arguments)]
    pub fn rms_norm_rows(&self, x: &DeviceBuffer, gamma: &DeviceBuffer, m: usize, cols: usize, eps: f32, out: &mut DeviceBuffer) -> Result<()> {
        const OP: &str = "cuda rms_norm_rows";
        self.owns(OP, &[x, gamma, out])?;
        let n = prod(OP, &[m, cols])?;
        room(OP, x.len(), n)?;
        room(OP, out.len(), n)?;
        room(OP, gamma.len(), cols)?;
        super::ops::check_eps(OP, eps)?;
        let c = u32_of(OP, "cols", prod(OP, &[cols, 4])?)? / 4;
        if m == 0 || cols == 0 {
            return Ok(());
        }
        let k = NormKernel::new(NormKind::RmsNorm, c, eps);
        let f = self.loaded(&k)?;
        let mut args = [Arg::In(&x.slice), Arg::In(&gamma.slice), Arg::Out(&mut out.slice), Arg::U32(c), Arg::F32(eps)];
        launch(&self.stream, &f, k.launch(u32_of(OP, "m", m)?), &mut args)
    }

    /// Rotates the first `n_rot` values of each head of the first `m` rows of `q` and `k`, row
    /// `r` at position `pos0 + r`, by the angles of `table` (`positions × n_rot/2` pairs
    /// `(cos, sin)`). The kernel reads `pos0` from `pos` (see [`StepInputs`]); `pos0` here is
    /// what the sizes are checked with.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_rows(
        &self,
        pairs: RopePairs,
        q: &mut DeviceBuffer,
        k: &mut DeviceBuffer,
        table: &DeviceBuffer,
        pos: &StepInputs,
        m: usize,
        heads: (usize, usize),
        head_dim: usize,
        n_rot: usize,
        pos0: usize,
    ) -> Result<()> {
        self.rope_impl(pairs, q, k, None, table, pos, m, heads, head_dim, n_rot, pos0)
    }

    /// [`CudaDevice::rope_rows`], then the rows of `k` (rotated) and `v` stored at their
    /// positions in one layer's caches (`shape`'s heads must be `heads`), in one launch.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_store_rows(
        &self,
        pairs: RopePairs,
        q: &mut DeviceBuffer,
        k: &mut DeviceBuffer,
        v: &DeviceBuffer,
        (shape, k_cache, v_cache): (&AttentionShape, &mut DeviceBytes, &mut DeviceBytes),
        table: &DeviceBuffer,
        pos: &StepInputs,
        m: usize,
        n_rot: usize,
        pos0: usize,
    ) -> Result<()> {
        const OP: &str = "cuda rope_store_rows";
        self.owns(OP, &[v])?;
        self.owns_bytes(OP, &[k_cache, v_cache])?;
        let width = shape.check_cache(OP, pos0, m, k_cache, v_cache)?;
        room(OP, v.len(), prod(OP, &[m, width])?)?;
        let cache = Some((shape.f16, v, k_cache, v_cache));
        self.rope_impl(pairs, q, k, cache, table, pos, m, (shape.n_head, shape.n_head_kv), shape.head_dim, n_rot, pos0)
    }

    #[allow(clippy::too_many_arguments)]
    fn rope_impl(
        &self,
        pairs: RopePairs,
        q: &mut DeviceBuffer,
        k: &mut DeviceBuffer,
        cache: Option<(bool, &DeviceBuffer, &mut DeviceBytes, &mut DeviceBytes)>,
        table: &DeviceBuffer,
        pos: &StepInputs,
        m: usize,
        heads: (usize, usize),
        head_dim: usize,
        n_rot: usize,
        pos0: usize,
    ) -> Result<()> {
        const OP: &str = "cuda rope_rows";
        self.owns(OP, &[q, k, table])?;
        let (n_head, n_head_kv) = heads;
        if n_rot % 2 != 0 || n_rot > head_dim {
            return Err(Error::InvalidArgument { op: OP, name: "n_rot", value: n_rot.into(), reason: "must be even and at most the head size" });
        }
        room(OP, q.len(), prod(OP, &[m, n_head, head_dim])?)?;
        room(OP, k.len(), prod(OP, &[m, n_head_kv, head_dim])?)?;
        let end = pos0.checked_add(m).ok_or(Error::SizeOverflow { op: OP, dims: vec![pos0, m] })?;
        room(OP, table.len(), prod(OP, &[end, n_rot])?)?;
        // every index the kernel forms stays below 2^32
        u32_of(OP, "q", prod(OP, &[m, n_head, head_dim, 4])?)?;
        u32_of(OP, "k", prod(OP, &[m, n_head_kv, head_dim, 4])?)?;
        u32_of(OP, "table", prod(OP, &[end, n_rot, 4])?)?;
        pos.check(self, OP, pos0, m)?;
        if m == 0 {
            return Ok(());
        }
        let kern = match &cache {
            Some((f16, ..)) => RopeKernel::with_cache(pairs, *f16),
            None => RopeKernel::new(pairs),
        };
        let f = self.loaded(&kern)?;
        let u = |v: usize| Arg::U32(v as u32);
        let mut args = vec![Arg::Out(&mut q.slice), Arg::Out(&mut k.slice), Arg::In(&table.slice), Arg::BytesIn(&pos.pos.slice)];
        if let Some((_, v, kc, vc)) = cache {
            args.push(Arg::In(&v.slice));
            args.push(Arg::BytesOut(&mut kc.slice));
            args.push(Arg::BytesOut(&mut vc.slice));
        }
        args.extend([u(n_head), u(n_head_kv), u(head_dim), u(n_rot)]);
        launch(&self.stream, &f, kern.launch(m as u32), &mut args)
    }

    /// Stores the first `m` rows of `k` and `v` (`n_head_kv·head_dim` values each) at positions
    /// `pos0..pos0 + m` of one layer's caches.
    #[allow(clippy::too_many_arguments)]
    pub fn kv_store(
        &self,
        shape: &AttentionShape,
        k: &DeviceBuffer,
        v: &DeviceBuffer,
        m: usize,
        pos: &StepInputs,
        pos0: usize,
        k_cache: &mut DeviceBytes,
        v_cache: &mut DeviceBytes,
    ) -> Result<()> {
        const OP: &str = "cuda kv_store";
        pos.check(self, OP, pos0, m)?;
        self.owns(OP, &[k, v])?;
        self.owns_bytes(OP, &[k_cache, v_cache])?;
        let width = shape.check_cache(OP, pos0, m, k_cache, v_cache)?;
        let n = prod(OP, &[m, width])?;
        room(OP, k.len(), n)?;
        room(OP, v.len(), n)?;
        if n == 0 {
            return Ok(());
        }
        let kern = KvStoreKernel::new(shape.f16);
        let f = self.loaded(&kern)?;
        let n = n as u32;
        let mut args = [
            Arg::In(&k.slice),
            Arg::In(&v.slice),
            Arg::BytesOut(&mut k_cache.slice),
            Arg::BytesOut(&mut v_cache.slice),
            Arg::BytesIn(&pos.pos.slice),
            Arg::U32(width as u32),
            Arg::U32(n),
        ];
        launch(&self.stream, &f, kern.launch(n), &mut args)
    }

    /// What an attention over `m` rows of `q` checks before it launches (the one-block-per-row
    /// kernel and flash attention): the pass's inputs, the buffers' device, `q` and `out`
    /// holding the rows, the cache holding positions `pos0..pos0 + m`, 32-bit indices.
    pub(super) fn check_attention_rows(
        &self,
        op: &'static str,
        shape: &AttentionShape,
        (q, out): (&DeviceBuffer, &DeviceBuffer),
        (k_cache, v_cache): (&DeviceBytes, &DeviceBytes),
        m: usize,
        (pos, pos0): (&StepInputs, usize),
    ) -> Result<()> {
        pos.check(self, op, pos0, m)?;
        self.owns(op, &[q, out])?;
        self.owns_bytes(op, &[k_cache, v_cache])?;
        let n = prod(op, &[m, shape.n_head, shape.head_dim])?;
        room(op, q.len(), n)?;
        room(op, out.len(), n)?;
        shape.check_cache(op, pos0, m, k_cache, v_cache)?;
        u32_of(op, "q", prod(op, &[n, 4])?)?;
        Ok(())
    }

    /// Causal attention of the first `m` rows of `q` (row `i` at position `pos0 + i`, over
    /// positions `0..=pos0 + i` of one layer's caches) into `out`. `round_q` rounds the query
    /// to f16 first (llama.cpp's one-row kernel does).
    #[allow(clippy::too_many_arguments)]
    pub fn attention_rows(
        &self,
        shape: &AttentionShape,
        q: &DeviceBuffer,
        k_cache: &DeviceBytes,
        v_cache: &DeviceBytes,
        m: usize,
        pos: &StepInputs,
        pos0: usize,
        scale: f32,
        round_q: bool,
        out: &mut DeviceBuffer,
    ) -> Result<()> {
        const OP: &str = "cuda attention_rows";
        let kern = attention_kernel(OP, shape)?;
        self.check_attention_rows(OP, shape, (q, &*out), (k_cache, v_cache), m, (pos, pos0))?;
        let AttentionShape { n_head, n_head_kv, .. } = *shape;
        if m == 0 {
            return Ok(());
        }
        let f = self.loaded(&kern)?;
        let u = |v: usize| Arg::U32(v as u32);
        let mut args = [
            Arg::In(&q.slice),
            Arg::BytesIn(&k_cache.slice),
            Arg::BytesIn(&v_cache.slice),
            Arg::Out(&mut out.slice),
            Arg::BytesIn(&pos.pos.slice),
            u(n_head),
            u(n_head_kv),
            Arg::F32(scale),
            Arg::U32(round_q as u32),
        ];
        launch(&self.stream, &f, kern.launch(n_head as u32, m as u32), &mut args)
    }

    /// One decoding row at position `pos0`, in one launch ([`DecodeAttentionKernel`]): RoPE of
    /// `q` and `k` (every dimension: `n_rot` must be the head size), the rotated `k` and `v`
    /// stored at `pos0` in one layer's caches, and attention over positions `0..=pos0` into
    /// `out`, split over the positions ([`decode_attention_scratch`](Self::decode_attention_scratch)
    /// is its scratch) — what [`CudaDevice::rope_store_rows`] and [`CudaDevice::attention_rows`]
    /// do for one row. `q` and `k` are left as they are.
    #[allow(clippy::too_many_arguments)]
    pub fn rope_attention_step(
        &self,
        pairs: RopePairs,
        shape: &AttentionShape,
        (q, k, v): (&DeviceBuffer, &DeviceBuffer, &DeviceBuffer),
        (k_cache, v_cache): (&mut DeviceBytes, &mut DeviceBytes),
        (table, n_rot): (&DeviceBuffer, usize),
        pos: &StepInputs,
        pos0: usize,
        (scale, round_q): (f32, bool),
        scratch: &mut DecodeScratch,
        out: &mut DeviceBuffer,
    ) -> Result<()> {
        const OP: &str = "cuda rope_attention_step";
        pos.check(self, OP, pos0, 1)?;
        self.owns(OP, &[q, k, v, table, out, &scratch.part])?;
        self.owns_bytes(OP, &[k_cache, v_cache, &scratch.done])?;
        let AttentionShape { n_head, n_head_kv, head_dim, positions, f16 } = *shape;
        if n_rot != head_dim {
            return Err(Error::InvalidArgument {
                op: OP,
                name: "n_rot",
                value: n_rot.into(),
                reason: "the fused kernel rotates every dimension of a head",
            });
        }
        attention_kernel(OP, shape)?;
        let kern =
            u32::try_from(head_dim).ok().zip(u32::try_from(positions).ok()).and_then(|(hd, p)| DecodeAttentionKernel::new(hd, p, f16, pairs)).ok_or(
                Error::InvalidArgument {
                    op: OP,
                    name: "positions",
                    value: positions.into(),
                    reason: "a split of the context does not fit the kernel",
                },
            )?;
        let width = shape.check_cache(OP, pos0, 1, k_cache, v_cache)?;
        let n = prod(OP, &[n_head, head_dim])?;
        room(OP, q.len(), n)?;
        room(OP, out.len(), n)?;
        room(OP, k.len(), width)?;
        room(OP, v.len(), width)?;
        room(OP, scratch.part.len(), kern.part_len(n_head))?;
        room(OP, scratch.done.len() / 4, n_head)?;
        let end = pos0.checked_add(1).ok_or(Error::SizeOverflow { op: OP, dims: vec![pos0, 1] })?;
        room(OP, table.len(), prod(OP, &[end, n_rot])?)?;
        u32_of(OP, "table", prod(OP, &[end, n_rot, 4])?)?;
        u32_of(OP, "q", prod(OP, &[n, 4])?)?;
        u32_of(OP, "part", prod(OP, &[kern.part_len(n_head), 4])?)?;
        let f = self.loaded(&kern)?;
        let u = |v: usize| Arg::U32(v as u32);
        let mut args = [
            Arg::In(&q.slice),
            Arg::In(&k.slice),
            Arg::In(&v.slice),
            Arg::In(&table.slice),
            Arg::BytesOut(&mut k_cache.slice),
            Arg::BytesOut(&mut v_cache.slice),
            Arg::Out(&mut out.slice),
            Arg::BytesIn(&pos.pos.slice),
            Arg::Out(&mut scratch.part.slice),
            Arg::BytesOut(&mut scratch.done.slice),
            u(n_head),
            u(n_head_kv),
            Arg::F32(scale),
            Arg::U32(round_q as u32),
        ];
        launch(&self.stream, &f, kern.launch(n_head as u32), &mut args)
    }

    /// The scratch of [`CudaDevice::rope_attention_step`] for `n_head` query heads of
    /// `head_dim` (the per-split partial results, and a per-head count the kernel keeps at 0
    /// between launches).
    pub fn decode_attention_scratch(&self, n_head: usize, head_dim: usize) -> Result<DecodeScratch> {
        const OP: &str = "cuda decode_attention_scratch";
        let len = prod(OP, &[n_head, DecodeAttentionKernel::SPLITS as usize, head_dim + 2])?;
        Ok(DecodeScratch { part: self.zeros(len)?, done: self.zero_bytes(prod(OP, &[n_head, 4])?)? })
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
        launch(&self.stream, &f, k.launch(n, self.info().multiprocessors), &mut args)
    }
}

/// Scratch of a decoding step's split attention ([`CudaDevice::decode_attention_scratch`]).
pub struct DecodeScratch {
    part: DeviceBuffer,
    done: DeviceBytes,
}

impl CudaDevice {
    /// An error unless the attention kernels take `shape` (its heads, head size and positions),
    /// and, with `fused` (the RoPE pairing of a model whose RoPE rotates whole heads), the
    /// decoding step's one-launch RoPE + attention too: what a model's shape must pass before
    /// anything of it is uploaded.
    pub fn check_attention(shape: &AttentionShape, fused: Option<RopePairs>) -> Result<()> {
        const OP: &str = "cuda attention";
        attention_kernel(OP, shape)?;
        shape.layer_bytes().ok_or(Error::SizeOverflow { op: OP, dims: vec![shape.positions, shape.n_head_kv, shape.head_dim] })?;
        let AttentionShape { head_dim, positions, f16, .. } = *shape;
        if let Some(pairs) = fused {
            let hd = u32::try_from(head_dim).ok();
            if hd.zip(u32::try_from(positions).ok()).and_then(|(hd, p)| DecodeAttentionKernel::new(hd, p, f16, pairs)).is_none() {
                return Err(Error::InvalidArgument {
                    op: OP,
                    name: "positions",
                    value: positions.into(),
                    reason: "a split of the context does not fit the decoding kernel",
                });
            }
        }
        Ok(())
    }
}

/// The attention kernel for `shape`, or an error naming what it cannot take.
fn attention_kernel(op: &'static str, shape: &AttentionShape) -> Result<AttentionKernel> {
    let AttentionShape { head_dim, positions, f16, .. } = *shape;
    check_heads(op, shape)?;
    u32::try_from(head_dim).ok().zip(u32::try_from(positions).ok()).and_then(|(hd, p)| AttentionKernel::new(hd, p, f16)).ok_or(
        Error::InvalidArgument {
            op,
            name: "head_dim or positions",
            value: head_dim.into(),
            reason: "the CUDA attention kernel takes head sizes of 32, 64, 96 or 128 and up to 10240 positions",
        },
    )
}
