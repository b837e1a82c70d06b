//! A layer's KV cache and the ops over it: storing a pass's K and V rows (alone or after RoPE,
//! in one launch), causal attention (one block per row, or flash attention on the tensor
//! cores), and a decoding step's RoPE + store + attention in one launch.

use super::args::{AttentionArgs, DecodeArgs, DecodeRows, FlashArgs, KvStoreArgs, RopeArgs};
use super::step::{OneTokenRows, Rope, StepCtx};
use super::{prod, room, u32_of};
use rayo::cuda::kernels::{AttentionKernel, DecodeAttentionKernel, FlashAttentionKernel, KvStoreKernel, RopeKernel, RopePairs};
use rayo::cuda::{CudaDevice, DeviceBuffer, DeviceBytes};
use rayo::{Error, Result};

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
    /// A sliding-window layer's window: a row at position `p` sees `p + 1 − window ..= p`
    /// ([`crate::Config::window`]); `None` for every position.
    pub window: Option<usize>,
}

impl AttentionShape {
    /// The kernels' `window` parameter: 0 for the whole context; a window past 2³² − 1
    /// positions sees every position the cache can hold, as the whole context does.
    pub(super) fn window_param(&self) -> rayo::cuda::Param<'static> {
        rayo::cuda::Param::U32(self.window.map_or(0, |w| u32::try_from(w).unwrap_or(0)))
    }

    /// Bytes of one layer's K (or V) cache.
    pub fn layer_bytes(&self) -> Option<usize> {
        let esz = if self.f16 { 2 } else { 4 };
        self.positions.checked_mul(self.n_head_kv)?.checked_mul(self.head_dim)?.checked_mul(esz)
    }

    /// An error unless the attention kernels take this shape (its heads, head size and
    /// positions), and, with `fused` (the RoPE pairing of a model whose RoPE rotates whole
    /// heads), the decoding step's one-launch RoPE + attention too: what a model's shape must
    /// pass before anything of it is uploaded.
    pub fn check(&self, fused: Option<RopePairs>) -> Result<()> {
        const OP: &str = "cuda attention";
        self.kernel(OP)?;
        self.layer_bytes().ok_or(Error::SizeOverflow { op: OP, dims: vec![self.positions, self.n_head_kv, self.head_dim] })?;
        if let Some(pairs) = fused {
            self.decode_kernel(OP, pairs)?;
        }
        Ok(())
    }

    /// Whether [`LayerCache::flash_attend`] takes this shape (an f16 cache, heads of 64, 128
    /// or 256, with or without a window).
    pub fn flash_fits(&self) -> bool {
        self.flash_kernel().is_some()
    }

    pub(super) fn flash_kernel(&self) -> Option<FlashAttentionKernel> {
        FlashAttentionKernel::new(u32::try_from(self.head_dim).ok()?).filter(|_| self.f16)
    }

    /// The one-block-per-row attention kernel for this shape, or an error naming what it
    /// cannot take.
    pub(super) fn kernel(&self, op: &'static str) -> Result<AttentionKernel> {
        self.check_heads(op)?;
        let AttentionShape { head_dim, positions, f16, .. } = *self;
        u32::try_from(head_dim).ok().zip(u32::try_from(positions).ok()).and_then(|(hd, p)| AttentionKernel::new(hd, p, f16)).ok_or(
            Error::InvalidArgument {
                op,
                name: "head_dim or positions",
                value: head_dim.into(),
                reason: "the CUDA attention kernel takes head sizes of 32 to 256 in steps of 32 and up to 10240 positions",
            },
        )
    }

    /// The decoding step's kernel (RoPE of `pairs` fused in), or an error.
    pub(super) fn decode_kernel(&self, op: &'static str, pairs: RopePairs) -> Result<DecodeAttentionKernel> {
        self.kernel(op)?;
        let AttentionShape { head_dim, positions, f16, .. } = *self;
        let hd = u32::try_from(head_dim).ok();
        hd.zip(u32::try_from(positions).ok()).and_then(|(hd, p)| DecodeAttentionKernel::new(hd, p, f16, pairs)).ok_or(Error::InvalidArgument {
            op,
            name: "positions",
            value: positions.into(),
            reason: "a split of the context does not fit the decoding kernel",
        })
    }

    /// An error unless the KV heads divide the query heads (grouped-query attention).
    pub(super) fn check_heads(&self, op: &'static str) -> Result<()> {
        if self.n_head_kv == 0 || !self.n_head.is_multiple_of(self.n_head_kv) {
            return Err(Error::InvalidArgument { op, name: "n_head_kv", value: self.n_head_kv.into(), reason: "must divide the query heads" });
        }
        Ok(())
    }

    /// An error unless positions `pos0..pos0 + m` fit and `k_cache`, `v_cache` hold one
    /// layer with indices below 2³². The values per position.
    pub(super) fn check_cache(&self, op: &'static str, (pos0, m): (usize, usize), k_cache: &DeviceBytes, v_cache: &DeviceBytes) -> Result<usize> {
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

/// One layer's K and V caches (`shape.positions × n_head_kv × head_dim` values each, f16 or
/// f32 as `shape` says), or of several sequences: slots of that many values one after another
/// (an op over one sequence's rows takes its [`StepCtx`]'s slot).
pub struct LayerCache<'a> {
    pub shape: AttentionShape,
    pub k: &'a mut DeviceBytes,
    pub v: &'a mut DeviceBytes,
}

impl LayerCache<'_> {
    /// Stores the pass's `m` rows of `k` and `v` (`n_head_kv·head_dim` values each) at their
    /// positions.
    pub fn store(&mut self, st: &StepCtx, k: &DeviceBuffer, v: &DeviceBuffer) -> Result<()> {
        let kern = KvStoreKernel::new(self.shape.f16);
        st.dev.launch(&kern, &mut KvStoreArgs { st, shape: self.shape, k, v, k_cache: self.k, v_cache: self.v })
    }

    /// [`StepCtx::rope`] of the pass's `m` rows of `q` and `k`, then the rows of `k` (rotated)
    /// and `v` stored at their positions, in one launch.
    pub fn rope_store(&mut self, st: &StepCtx, rope: &Rope, q: &mut DeviceBuffer, k: &mut DeviceBuffer, v: &DeviceBuffer) -> Result<()> {
        let shape = self.shape;
        let cache = Some((shape, v, &mut *self.k, &mut *self.v));
        let args = &mut RopeArgs { st, rope: *rope, heads: (shape.n_head, shape.n_head_kv), head_dim: shape.head_dim, q, k, cache };
        st.dev.launch(&RopeKernel::with_cache(rope.pairs, shape.f16), args)
    }

    /// Causal attention of the pass's `m` rows of `q` (row `i` at position `pos0 + i`, over
    /// positions `0..=pos0 + i`, already stored) into `out`. `round_q` rounds the query to f16
    /// first (llama.cpp's one-row kernel does).
    pub fn attend(&self, st: &StepCtx, q: &DeviceBuffer, (scale, round_q): (f32, bool), out: &mut DeviceBuffer) -> Result<()> {
        let kern = self.shape.kernel("cuda attention_rows")?;
        st.dev.launch(&kern, &mut AttentionArgs { st, shape: self.shape, q, k_cache: self.k, v_cache: self.v, scale, round_q, out })
    }

    /// What [`LayerCache::attend`] computes, on the tensor cores: the query and the weights
    /// rounded to f16 (f32 accumulation); an f16 cache and heads of 64, 128 or 256, with the
    /// shape's window if it has one ([`AttentionShape::flash_fits`]).
    pub fn flash_attend(&self, st: &StepCtx, q: &DeviceBuffer, scale: f32, out: &mut DeviceBuffer) -> Result<()> {
        let Some(kern) = self.shape.flash_kernel() else {
            return Err(Error::InvalidArgument {
                op: "cuda flash_attention_rows",
                name: "head_dim",
                value: self.shape.head_dim.into(),
                reason: "flash attention takes an f16 cache and heads of 64, 128 or 256",
            });
        };
        st.dev.launch(&kern, &mut FlashArgs { st, shape: self.shape, q, k_cache: self.k, v_cache: self.v, scale, out })
    }

    /// One decoding row (`m` = 1) at `pos0`, in one launch ([`DecodeAttentionKernel`]): RoPE
    /// of `q` and `k` (every dimension: `rope.n_rot` must be the head size), the rotated `k`
    /// and `v` stored at `pos0`, and attention over positions `0..=pos0` into `out`, split over
    /// the positions (`scratch` holds the splits' partial results) — what
    /// [`LayerCache::rope_store`] and [`LayerCache::attend`] do for one row. `q` and `k` are
    /// left as they are.
    pub fn decode(
        &mut self,
        st: &StepCtx,
        rope: &Rope,
        (q, k, v): (&DeviceBuffer, &DeviceBuffer, &DeviceBuffer),
        (scale, round_q): (f32, bool),
        scratch: &mut DecodeScratch,
        out: &mut DeviceBuffer,
    ) -> Result<()> {
        self.decode_launch(st.dev, DecodeRows::One(st), (rope, None), (q, k, v), (scale, round_q), scratch, out)
    }

    /// [`LayerCache::decode`] with each head of `q` and `k` RMS-normalized first, by the
    /// weights `q_norm` and `k_norm` (`head_dim` values each) with `eps`: a model's QK-norm in
    /// the same launch.
    #[allow(clippy::too_many_arguments)]
    pub fn decode_qk_normed(
        &mut self,
        st: &StepCtx,
        rope: &Rope,
        (q_norm, k_norm, eps): (&DeviceBuffer, &DeviceBuffer, f32),
        (q, k, v): (&DeviceBuffer, &DeviceBuffer, &DeviceBuffer),
        (scale, round_q): (f32, bool),
        scratch: &mut DecodeScratch,
        out: &mut DeviceBuffer,
    ) -> Result<()> {
        self.decode_launch(st.dev, DecodeRows::One(st), (rope, Some((q_norm, k_norm, eps))), (q, k, v), (scale, round_q), scratch, out)
    }

    /// [`LayerCache::decode`] for each of a pass's first `rows.n` rows, each a sequence of its
    /// own (its slot and position as the inputs say), in one launch: row `r` of `q`, `k`, `v`
    /// into row `r` of `out`, each with the bits a pass of that row alone gives.
    pub fn decode_rows(
        &mut self,
        rows: &OneTokenRows,
        rope: &Rope,
        (q, k, v): (&DeviceBuffer, &DeviceBuffer, &DeviceBuffer),
        (scale, round_q): (f32, bool),
        scratch: &mut DecodeScratch,
        out: &mut DeviceBuffer,
    ) -> Result<()> {
        self.decode_launch(rows.dev, DecodeRows::Many(rows), (rope, None), (q, k, v), (scale, round_q), scratch, out)
    }

    /// The launch of [`LayerCache::decode`], [`LayerCache::decode_qk_normed`] and
    /// [`LayerCache::decode_rows`]: the kernel's one-row or batched variant, as `rows` says,
    /// with the QK-norm where `qk_norm` has its weights.
    #[allow(clippy::too_many_arguments)]
    fn decode_launch(
        &mut self,
        dev: &CudaDevice,
        rows: DecodeRows,
        (rope, qk_norm): (&Rope, Option<(&DeviceBuffer, &DeviceBuffer, f32)>),
        (q, k, v): (&DeviceBuffer, &DeviceBuffer, &DeviceBuffer),
        (scale, round_q): (f32, bool),
        scratch: &mut DecodeScratch,
        out: &mut DeviceBuffer,
    ) -> Result<()> {
        let kern = self.shape.decode_kernel("cuda rope_attention_step", rope.pairs)?;
        let kern = if matches!(rows, DecodeRows::Many(_)) { kern.batched() } else { kern };
        let kern = if qk_norm.is_some() { kern.with_qk_norm() } else { kern };
        let (k_cache, v_cache) = (&mut *self.k, &mut *self.v);
        let args = &mut DecodeArgs { rows, shape: self.shape, rope: *rope, qk_norm, q, k, v, k_cache, v_cache, scale, round_q, scratch, out };
        dev.launch(&kern, args)
    }
}

/// Scratch of a decoding step's split attention ([`LayerCache::decode`],
/// [`LayerCache::decode_rows`]): the per-split partial results, and a per-head count the
/// kernel keeps at 0 between launches, for each row.
pub struct DecodeScratch {
    pub(super) part: DeviceBuffer,
    pub(super) done: DeviceBytes,
}

impl DecodeScratch {
    /// Room for one row of `n_head` query heads of `head_dim`.
    pub fn new(dev: &CudaDevice, n_head: usize, head_dim: usize) -> Result<DecodeScratch> {
        DecodeScratch::rows(dev, 1, n_head, head_dim)
    }

    /// Room for `rows` rows of `n_head` query heads of `head_dim`.
    pub fn rows(dev: &CudaDevice, rows: usize, n_head: usize, head_dim: usize) -> Result<DecodeScratch> {
        const OP: &str = "cuda decode_attention_scratch";
        let len = prod(OP, &[rows, n_head, DecodeAttentionKernel::SPLITS as usize, head_dim.saturating_add(2)])?;
        Ok(DecodeScratch { part: dev.zeros(len)?, done: dev.zero_bytes(prod(OP, &[rows, n_head, 4])?)? })
    }
}
