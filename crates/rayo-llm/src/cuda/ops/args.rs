//! The parameter lists of the LLM's kernels as Rust types, for rayo's typed launch
//! ([`KernelArgs`]): each `bind` checks the shapes, then lists the parameters in the order the
//! kernel's PTX declares them, each buffer with the extent the kernel may touch. rayo checks
//! the buffers' devices and lengths against those extents, and the list's types against the
//! PTX; what each `unsafe impl` vouches for is that the kernel indexes nothing past them.
//!
//! Positions and ids the kernels read from device memory come from a [`StepInputs`](super::StepInputs):
//! its device copy is written only by [`StepInputs::write_segments`](super::StepInputs::write_segments),
//! which bounds it (every id below the vocabulary, each segment's `pos0 + rows` — at least one
//! row — within its positions, each slot below its cache's slots), and an op's [`StepCtx`] says which write it runs over. A launch queued after
//! that write (stream order) reads exactly what it wrote; a recorded launch replayed later
//! reads a later write, which is why each bind also checks that the cache (and RoPE's table)
//! hold every position the inputs can name.
//!
//! A pass may hold several sequences ([`StepInputs::write_segments`](super::StepInputs::write_segments)),
//! each in its own slot of a cache of slots. An op over one sequence's rows passes the address
//! of its first row's position (the "position `pos`" below) and of its slot's layer (the
//! "cache" below: `SlotLayer`'s bytes, checked inside the buffer): each kernel indexes from
//! them exactly as in a pass of one sequence.

use super::attention::{AttentionShape, DecodeScratch};
use super::step::{OneTokenRows, Rope, StepCtx};
use super::{prod, room, u32_of};
use rayo::cuda::kernels::{
    ArgmaxKernel, AttentionKernel, DecodeAttentionKernel, EmbedKernel, FlashAttentionKernel, KvStoreKernel, RopeKernel, TopKKernel, TopKRowsKernel,
};
use rayo::cuda::{Bound, DeviceBuffer, DeviceBytes, KernelArgs, Param, QFormat};
use rayo::{Error, Result};

/// An error unless `kernel` is the variant the arguments describe (`want`): the extents are
/// worked out for that one.
fn same<K: PartialEq>(op: &'static str, kernel: &K, want: Option<K>) -> Result<()> {
    match want {
        Some(w) if w == *kernel => Ok(()),
        _ => Err(Error::InvalidArgument { op, name: "kernel", value: 0usize.into(), reason: "not the kernel variant these arguments describe" }),
    }
}

/// Where one sequence's layer is in a cache of slots: the values per position, and the byte
/// offset and length of slot `st.slot`'s layer.
struct SlotLayer {
    width: usize,
    at: usize,
    bytes: usize,
}

/// An error unless the cache (`shape`, slots of `shape.positions`) holds every position `st`'s
/// inputs can name, and positions `pos0..pos0 + m` of slot `st.slot`. Where that slot's layer
/// is.
fn check_positions(op: &'static str, st: &StepCtx, shape: &AttentionShape, k_cache: &DeviceBytes, v_cache: &DeviceBytes) -> Result<SlotLayer> {
    room(op, shape.positions, st.inputs.positions)?;
    let width = shape.check_cache(op, (st.pos0, st.m), k_cache, v_cache)?;
    let bytes = shape.layer_bytes().ok_or_else(|| Error::SizeOverflow { op, dims: vec![shape.positions, width] })?;
    let at = prod(op, &[st.slot, bytes])?;
    let end = at.checked_add(bytes).ok_or_else(|| Error::SizeOverflow { op, dims: vec![at, bytes] })?;
    room(op, k_cache.len(), end)?;
    room(op, v_cache.len(), end)?;
    Ok(SlotLayer { width, at, bytes })
}

/// The position parameter of `st`'s rows: its first row's position (the kernels add the row).
fn first_position<'a>(st: &'a StepCtx) -> Param<'a> {
    Param::BytesInAt(&st.inputs.pos, 4 * st.row0, 4)
}

/// [`EmbedKernel`]: rows `tokens[r]` of a table into the first `m` rows of `out`.
pub(super) struct EmbedArgs<'a> {
    pub(super) st: &'a StepCtx<'a>,
    pub(super) fmt: QFormat,
    pub(super) table: &'a DeviceBytes,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) out: &'a mut DeviceBuffer,
}

// SAFETY: the kernel (one block per row r < m, the grid `launch(m)`) reads id `tokens[r]`, then
// the `cols / block_values` blocks of that table row, and writes `out[r·cols + c]` for
// c < cols. `tokens[..m]` are the ids of the write `st` runs over (`st.m` of them, each below
// `max_id + 1 ≤ rows`, checked here), so the table is read below `rows · row_bytes` bytes, the
// ids below `4m` bytes, `out` below `m · cols` values, all below 2³² (the kernel's indices).
unsafe impl KernelArgs for EmbedArgs<'_> {
    type Kernel = EmbedKernel;

    fn bind(&mut self, kernel: &EmbedKernel) -> Result<Option<Bound<'_>>> {
        const OP: &str = "cuda embed_rows";
        same(OP, kernel, Some(EmbedKernel::new(self.fmt)))?;
        let (m, rows, cols, fmt) = (self.st.m, self.rows, self.cols, self.fmt);
        if m > 0 && self.st.inputs.max_id as usize >= rows {
            let id = self.st.inputs.max_id as usize;
            return Err(Error::InvalidArgument { op: OP, name: "token", value: id.into(), reason: "past the table's rows" });
        }
        let bv = fmt.block_values() as usize;
        if cols % bv != 0 {
            return Err(Error::NotBlockMultiple { format: OP, len: cols, block: bv });
        }
        let row_bytes = prod(OP, &[cols / bv, fmt.block_bytes() as usize])?;
        let table_bytes = prod(OP, &[rows, row_bytes])?;
        let out_len = prod(OP, &[m, cols])?;
        u32_of(OP, "out", prod(OP, &[out_len, 4])?)?;
        u32_of(OP, "row bytes", row_bytes)?;
        if m == 0 || cols == 0 {
            return Ok(None);
        }
        Ok(Some(Bound {
            config: kernel.launch(m as u32),
            params: vec![
                Param::BytesIn(self.table, table_bytes),
                Param::BytesIn(&self.st.inputs.tokens, 4 * m),
                Param::Out(self.out, out_len),
                Param::U32(cols as u32),
            ],
        }))
    }
}

/// [`RopeKernel`]: RoPE of the first `m` rows of `q` and `k`; with `cache`, the rows of `k`
/// (rotated) and `v` stored at their positions too.
pub(super) struct RopeArgs<'a> {
    pub(super) st: &'a StepCtx<'a>,
    pub(super) rope: Rope<'a>,
    pub(super) heads: (usize, usize),
    pub(super) head_dim: usize,
    pub(super) q: &'a mut DeviceBuffer,
    pub(super) k: &'a mut DeviceBuffer,
    pub(super) cache: Option<(AttentionShape, &'a DeviceBuffer, &'a mut DeviceBytes, &'a mut DeviceBytes)>,
}

// SAFETY: the kernel (one block per row r < m) reads the position `pos` (4 bytes), rotates
// values `i < n_rot ≤ head_dim` of each head of row r of `q` (`n_head · head_dim` values a
// row) and `k` (`n_head_kv · head_dim`) by table row `pos + r` (`n_rot` values a row), and
// with a cache writes row r of `k` and `v` (`n_head_kv · head_dim` values) at cache position
// `pos + r`. `pos + m` is within the inputs' positions, which the table (`positions · n_rot`
// values, checked) and the cache (checked by `check_positions`, with the heads the kernel is
// given) hold; every index is below 2³².
unsafe impl KernelArgs for RopeArgs<'_> {
    type Kernel = RopeKernel;

    fn bind(&mut self, kernel: &RopeKernel) -> Result<Option<Bound<'_>>> {
        const OP: &str = "cuda rope_rows";
        let Rope { pairs, table, n_rot } = self.rope;
        let want = match &self.cache {
            Some((shape, ..)) => RopeKernel::with_cache(pairs, shape.f16),
            None => RopeKernel::new(pairs),
        };
        same(OP, kernel, Some(want))?;
        let (st, (n_head, n_head_kv), head_dim) = (self.st, self.heads, self.head_dim);
        let m = st.m;
        if n_rot % 2 != 0 || n_rot > head_dim {
            return Err(Error::InvalidArgument { op: OP, name: "n_rot", value: n_rot.into(), reason: "must be even and at most the head size" });
        }
        let (q_len, k_len) = (prod(OP, &[m, n_head, head_dim])?, prod(OP, &[m, n_head_kv, head_dim])?);
        let table_len = prod(OP, &[st.inputs.positions, n_rot])?;
        room(OP, table.len(), table_len)?;
        u32_of(OP, "q", prod(OP, &[q_len, 4])?)?;
        u32_of(OP, "k", prod(OP, &[k_len, 4])?)?;
        u32_of(OP, "table", prod(OP, &[table_len, 4])?)?;
        if let Some((shape, ..)) = &self.cache {
            if (shape.n_head, shape.n_head_kv, shape.head_dim) != (n_head, n_head_kv, head_dim) {
                return Err(Error::InvalidArgument { op: OP, name: "heads", value: n_head.into(), reason: "not the cache's heads" });
            }
        }
        let slot = match &self.cache {
            Some((shape, _, kc, vc)) => Some(check_positions(OP, st, shape, kc, vc)?),
            None => None,
        };
        if m == 0 {
            return Ok(None);
        }
        let mut params = vec![Param::Out(self.q, q_len), Param::Out(self.k, k_len), Param::In(table, table_len), first_position(st)];
        if let (Some((_, v, kc, vc)), Some(l)) = (&mut self.cache, slot) {
            params.extend([Param::In(v, k_len), Param::BytesOutAt(kc, l.at, l.bytes), Param::BytesOutAt(vc, l.at, l.bytes)]);
        }
        let u = |v: usize| Param::U32(v as u32);
        params.extend([u(n_head), u(n_head_kv), u(head_dim), u(n_rot)]);
        Ok(Some(Bound { config: kernel.launch(m as u32), params }))
    }
}

/// [`KvStoreKernel`]: the first `m` rows of `k` and `v` stored at their positions.
pub(super) struct KvStoreArgs<'a> {
    pub(super) st: &'a StepCtx<'a>,
    pub(super) shape: AttentionShape,
    pub(super) k: &'a DeviceBuffer,
    pub(super) v: &'a DeviceBuffer,
    pub(super) k_cache: &'a mut DeviceBytes,
    pub(super) v_cache: &'a mut DeviceBytes,
}

// SAFETY: the kernel (a thread per value i < n = m · width, the grid `launch(n)`) reads `k[i]`,
// `v[i]` and the position `pos`, and writes cache element `pos · width + i` (f16 or f32, as
// the kernel variant checked here). `pos + m` is within the cache's positions
// (`check_positions`), so the writes stay below `layer_bytes`; `n` and the cache's indices are
// below 2³².
unsafe impl KernelArgs for KvStoreArgs<'_> {
    type Kernel = KvStoreKernel;

    fn bind(&mut self, kernel: &KvStoreKernel) -> Result<Option<Bound<'_>>> {
        const OP: &str = "cuda kv_store";
        same(OP, kernel, Some(KvStoreKernel::new(self.shape.f16)))?;
        let l = check_positions(OP, self.st, &self.shape, self.k_cache, self.v_cache)?;
        let width = l.width;
        let n = prod(OP, &[self.st.m, width])?;
        let n32 = u32_of(OP, "n", n)?;
        if n == 0 {
            return Ok(None);
        }
        Ok(Some(Bound {
            config: kernel.launch(n32),
            params: vec![
                Param::In(self.k, n),
                Param::In(self.v, n),
                Param::BytesOutAt(self.k_cache, l.at, l.bytes),
                Param::BytesOutAt(self.v_cache, l.at, l.bytes),
                first_position(self.st),
                Param::U32(width as u32),
                Param::U32(n32),
            ],
        }))
    }
}

/// What both attention kernels check: the cache holds the pass's positions (and every one its
/// inputs can name), `q` and `out` hold `m` rows of `n_head · head_dim` values. Those values.
fn check_attention_rows(
    op: &'static str,
    st: &StepCtx,
    shape: &AttentionShape,
    k_cache: &DeviceBytes,
    v_cache: &DeviceBytes,
) -> Result<(usize, SlotLayer)> {
    shape.check_heads(op)?;
    let l = check_positions(op, st, shape, k_cache, v_cache)?;
    let n = prod(op, &[st.m, shape.n_head, shape.head_dim])?;
    u32_of(op, "q", prod(op, &[n, 4])?)?;
    Ok((n, l))
}

/// [`AttentionKernel`]: causal attention of the first `m` rows of `q` over one layer's caches.
pub(super) struct AttentionArgs<'a> {
    pub(super) st: &'a StepCtx<'a>,
    pub(super) shape: AttentionShape,
    pub(super) q: &'a DeviceBuffer,
    pub(super) k_cache: &'a DeviceBytes,
    pub(super) v_cache: &'a DeviceBytes,
    pub(super) scale: f32,
    pub(super) round_q: bool,
    pub(super) out: &'a mut DeviceBuffer,
}

// SAFETY: the kernel (a block per head h < n_head and row r < m) reads the position `pos`,
// query row r's head h, cache positions `0..=pos + r` (or fewer: a window) of KV head `h / (n_head / n_head_kv)`
// (the KV heads divide the query heads: checked), and writes row r's head h of `out`; its
// scores for up to `shape.positions` positions fit the shared memory of the variant built for
// them (checked equal to `shape.kernel`). `pos + m` is within the cache (`check_positions`), so
// the cache is read below `layer_bytes`, `q` and `out` below `m · n_head · head_dim` values.
unsafe impl KernelArgs for AttentionArgs<'_> {
    type Kernel = AttentionKernel;

    fn bind(&mut self, kernel: &AttentionKernel) -> Result<Option<Bound<'_>>> {
        const OP: &str = "cuda attention_rows";
        same(OP, kernel, Some(self.shape.kernel(OP)?))?;
        let (n, l) = check_attention_rows(OP, self.st, &self.shape, self.k_cache, self.v_cache)?;
        let (m, n_head) = (self.st.m, self.shape.n_head);
        if m == 0 {
            return Ok(None);
        }
        let u = |v: usize| Param::U32(v as u32);
        Ok(Some(Bound {
            config: kernel.launch(n_head as u32, m as u32),
            params: vec![
                Param::In(self.q, n),
                Param::BytesInAt(self.k_cache, l.at, l.bytes),
                Param::BytesInAt(self.v_cache, l.at, l.bytes),
                Param::Out(self.out, n),
                first_position(self.st),
                u(n_head),
                u(self.shape.n_head_kv),
                Param::F32(self.scale),
                Param::U32(self.round_q as u32),
                self.shape.window_param(),
            ],
        }))
    }
}

/// [`FlashAttentionKernel`]: [`AttentionArgs`]'s attention on the tensor cores (f16 cache).
pub(super) struct FlashArgs<'a> {
    pub(super) st: &'a StepCtx<'a>,
    pub(super) shape: AttentionShape,
    pub(super) q: &'a DeviceBuffer,
    pub(super) k_cache: &'a DeviceBytes,
    pub(super) v_cache: &'a DeviceBytes,
    pub(super) scale: f32,
    pub(super) out: &'a mut DeviceBuffer,
}

// SAFETY: as [`AttentionArgs`]: the kernel (blocks of `ROWS` query rows per head, rows past
// `m` masked by the `m` it is given) reads query rows below `m`, f16 cache positions
// `0..=pos + r` (fewer with a window; the cache is f16 and the head size the variant's:
// checked equal to `shape.flash_kernel`), and writes `out` rows below `m`; `pos + m` is
// within the cache.
unsafe impl KernelArgs for FlashArgs<'_> {
    type Kernel = FlashAttentionKernel;

    fn bind(&mut self, kernel: &FlashAttentionKernel) -> Result<Option<Bound<'_>>> {
        const OP: &str = "cuda flash_attention_rows";
        same(OP, kernel, self.shape.flash_kernel())?;
        let (n, l) = check_attention_rows(OP, self.st, &self.shape, self.k_cache, self.v_cache)?;
        let (m, n_head) = (self.st.m, self.shape.n_head);
        if m == 0 {
            return Ok(None);
        }
        let u = |v: usize| Param::U32(v as u32);
        Ok(Some(Bound {
            config: kernel.launch(n_head as u32, m as u32),
            params: vec![
                Param::In(self.q, n),
                Param::BytesInAt(self.k_cache, l.at, l.bytes),
                Param::BytesInAt(self.v_cache, l.at, l.bytes),
                Param::Out(self.out, n),
                first_position(self.st),
                u(n_head),
                u(self.shape.n_head_kv),
                u(m),
                Param::F32(self.scale),
                self.shape.window_param(),
            ],
        }))
    }
}

/// Which decoding rows a [`DecodeArgs`] launch runs: one row of a pass ([`DecodeAttentionKernel`]),
/// or the first `n` rows of a pass, each its own sequence's token ([`DecodeAttentionKernel::batched`]).
pub(super) enum DecodeRows<'a> {
    One(&'a StepCtx<'a>),
    Many(&'a OneTokenRows<'a>),
}

/// [`DecodeAttentionKernel`]: decoding rows' RoPE, KV store and attention.
pub(super) struct DecodeArgs<'a> {
    pub(super) rows: DecodeRows<'a>,
    pub(super) shape: AttentionShape,
    pub(super) rope: Rope<'a>,
    /// The QK-norm's weights (`head_dim` values each) and epsilon, for the variant that has it.
    pub(super) qk_norm: Option<(&'a DeviceBuffer, &'a DeviceBuffer, f32)>,
    pub(super) q: &'a DeviceBuffer,
    pub(super) k: &'a DeviceBuffer,
    pub(super) v: &'a DeviceBuffer,
    pub(super) k_cache: &'a mut DeviceBytes,
    pub(super) v_cache: &'a mut DeviceBytes,
    pub(super) scale: f32,
    pub(super) round_q: bool,
    pub(super) scratch: &'a mut DecodeScratch,
    pub(super) out: &'a mut DeviceBuffer,
}

// SAFETY: one row (`DecodeRows::One`): the kernel (a block per head and split of the positions)
// reads the position `pos`, `q` (`n_head · head_dim`), `k` and `v` (`n_head_kv · head_dim`),
// table row `pos` (`head_dim` values: `n_rot` is the head size, checked), writes the rotated K
// and V row at cache position `pos`, reads cache positions `0..=pos`, and writes its partial
// results (`part_len(n_head)` values), a count per head (`4 · n_head` bytes) and `out`
// (`n_head · head_dim`). The pass is one row (checked) at a position within the cache and the
// table (`check_positions`, the table's `positions · n_rot` values checked); the variant is the
// one built for the shape's head size, positions, cache type and pairing (checked equal to
// `shape.decode_kernel`). With QK-norm, it also reads `head_dim` values of each norm's weights
// (checked).
//
// Many rows (`DecodeRows::Many`, the batched variant): block (h, s, r) does the above for row
// r < n of `q`, `k`, `v`, `out` (n rows of those widths), its own `part` and `done` rows (n of
// each), at position `pos[r]` of slot `slots[r]`'s layer (`slots[r] · positions · width` values
// into each cache). Every position and slot the inputs hold was checked below the inputs'
// positions and cache slots when written; the caches hold that many slots of
// `shape.positions ≥ positions` positions (checked), every cache index is below 2³² (checked),
// so the caches are touched below `cache_slots · layer_bytes`, `pos` and `slots` below `4n`
// bytes (the first n rows, written by the same write).
unsafe impl KernelArgs for DecodeArgs<'_> {
    type Kernel = DecodeAttentionKernel;

    fn bind(&mut self, kernel: &DecodeAttentionKernel) -> Result<Option<Bound<'_>>> {
        const OP: &str = "cuda rope_attention_step";
        let shape = self.shape;
        let Rope { pairs, table, n_rot } = self.rope;
        let want = shape.decode_kernel(OP, pairs)?;
        let want = if matches!(self.rows, DecodeRows::Many(_)) { want.batched() } else { want };
        same(OP, kernel, Some(if self.qk_norm.is_some() { want.with_qk_norm() } else { want }))?;
        if let Some((qn, kn, eps)) = self.qk_norm {
            room(OP, qn.len(), shape.head_dim)?;
            room(OP, kn.len(), shape.head_dim)?;
            rayo::cuda::check_eps(OP, eps)?;
        }
        if n_rot != shape.head_dim {
            return Err(Error::InvalidArgument {
                op: OP,
                name: "n_rot",
                value: n_rot.into(),
                reason: "the fused kernel rotates every dimension of a head",
            });
        }
        let (inputs, n) = match &self.rows {
            DecodeRows::One(st) => (st.inputs, st.m),
            DecodeRows::Many(r) => (r.inputs, r.n),
        };
        let width = prod(OP, &[shape.n_head_kv, shape.head_dim])?;
        let qw = prod(OP, &[shape.n_head, shape.head_dim])?;
        let (q_len, kv_len) = (prod(OP, &[n, qw])?, prod(OP, &[n, width])?);
        let part = prod(OP, &[n, kernel.part_len(shape.n_head)])?;
        let done = prod(OP, &[n, shape.n_head, 4])?;
        let table_len = prod(OP, &[inputs.positions, n_rot])?;
        room(OP, table.len(), table_len)?;
        u32_of(OP, "table", prod(OP, &[table_len, 4])?)?;
        u32_of(OP, "q", prod(OP, &[q_len, 4])?)?;
        u32_of(OP, "part", prod(OP, &[part, 4])?)?;
        let u = |v: usize| Param::U32(v as u32);
        let (k_cache, v_cache) = (&mut *self.k_cache, &mut *self.v_cache);
        let (caches, position, slots, config) = match &self.rows {
            DecodeRows::One(st) => {
                if st.m != 1 {
                    return Err(Error::LengthMismatch { op: OP, expected: 1, actual: st.m });
                }
                let l = check_positions(OP, st, &shape, k_cache, v_cache)?;
                let caches = [Param::BytesOutAt(k_cache, l.at, l.bytes), Param::BytesOutAt(v_cache, l.at, l.bytes)];
                (caches, first_position(st), None, kernel.launch(shape.n_head as u32))
            }
            DecodeRows::Many(r) => {
                room(OP, shape.positions, inputs.positions)?;
                let layer = shape.layer_bytes().ok_or_else(|| Error::SizeOverflow { op: OP, dims: vec![shape.positions, width] })?;
                let all = prod(OP, &[inputs.cache_slots, layer])?;
                room(OP, k_cache.len(), all)?;
                room(OP, v_cache.len(), all)?;
                u32_of(OP, "cache", prod(OP, &[inputs.cache_slots, shape.positions, width])?)?;
                if r.n == 0 {
                    return Ok(None);
                }
                let config = kernel.launch_rows(shape.n_head as u32, u32_of(OP, "rows", r.n)?);
                let slots = Param::BytesIn(&inputs.slots, 4 * r.n);
                ([Param::BytesOut(k_cache, all), Param::BytesOut(v_cache, all)], Param::BytesIn(&inputs.pos, 4 * r.n), Some(slots), config)
            }
        };
        let [kc, vc] = caches;
        let mut params = vec![
            Param::In(self.q, q_len),
            Param::In(self.k, kv_len),
            Param::In(self.v, kv_len),
            Param::In(table, table_len),
            kc,
            vc,
            Param::Out(self.out, q_len),
            position,
            Param::Out(&mut self.scratch.part, part),
            Param::BytesOut(&mut self.scratch.done, done),
        ];
        params.extend(slots);
        params.extend([u(shape.n_head), u(shape.n_head_kv), Param::F32(self.scale), Param::U32(self.round_q as u32), shape.window_param()]);
        if let Some((qn, kn, eps)) = self.qk_norm {
            params.extend([Param::In(qn, shape.head_dim), Param::In(kn, shape.head_dim), Param::F32(eps)]);
        }
        if matches!(self.rows, DecodeRows::Many(_)) {
            params.push(u(shape.positions));
        }
        Ok(Some(Bound { config, params }))
    }
}

/// [`ArgmaxKernel`]: the first maximum of the first `n` values of `x` into 3 words of `out`.
pub(super) struct ArgmaxArgs<'a> {
    pub(super) x: &'a DeviceBuffer,
    pub(super) n: usize,
    pub(super) out: &'a mut DeviceBuffer,
}

// SAFETY: the kernel (one block, the grid `launch()`) reads `x[i]` for i < n (a u32, checked)
// and writes 3 words of `out`.
unsafe impl KernelArgs for ArgmaxArgs<'_> {
    type Kernel = ArgmaxKernel;

    fn bind(&mut self, kernel: &ArgmaxKernel) -> Result<Option<Bound<'_>>> {
        const OP: &str = "cuda argmax";
        if self.n == 0 {
            return Err(Error::EmptyInput { op: OP });
        }
        let n = u32_of(OP, "n", self.n)?;
        Ok(Some(Bound { config: kernel.launch(), params: vec![Param::In(self.x, self.n), Param::Out(self.out, 3), Param::U32(n)] }))
    }
}

/// [`TopKKernel`]: the `k` largest of the first `n` values of `x` into `2k + 1` words of `out`.
pub(super) struct TopKArgs<'a> {
    pub(super) x: &'a DeviceBuffer,
    pub(super) n: usize,
    pub(super) k: usize,
    pub(super) out: &'a mut DeviceBuffer,
}

// SAFETY: the kernel (one block, the grid `launch()`) reads `x[i]` for i < n (a u32, checked)
// and writes `2k + 1` words of `out`; it takes `1 ≤ k ≤ MAX_K` and `k < n` (its shared
// memory and selection are sized for that), checked here.
unsafe impl KernelArgs for TopKArgs<'_> {
    type Kernel = TopKKernel;

    fn bind(&mut self, kernel: &TopKKernel) -> Result<Option<Bound<'_>>> {
        const OP: &str = "cuda top_k";
        let (n, k) = (self.n, self.k);
        if k == 0 || k > TopKKernel::MAX_K as usize || k >= n {
            return Err(Error::InvalidArgument { op: OP, name: "k", value: k.into(), reason: "must be in 1..=128 and below the row's length" });
        }
        let n32 = u32_of(OP, "n", n)?;
        Ok(Some(Bound {
            config: kernel.launch(),
            params: vec![Param::In(self.x, n), Param::Out(self.out, 2 * k + 1), Param::U32(n32), Param::U32(k as u32)],
        }))
    }
}

/// [`TopKRowsKernel`]: [`TopKArgs`] for each of the first `rows` rows of `x` (rows of `n`
/// values), row `r`'s `2k + 1` words from word `r·(2k + 1)` of `out`.
pub(super) struct TopKRowsArgs<'a> {
    pub(super) x: &'a DeviceBuffer,
    pub(super) n: usize,
    pub(super) rows: usize,
    pub(super) k: usize,
    pub(super) out: &'a mut DeviceBuffer,
}

// SAFETY: block r < rows (the grid `launch(rows)`) does what [`TopKArgs`]' kernel does on the
// row of `n` values from `x[r·n]`, writing `2k + 1` words from `out[r·(2k + 1)]`: `x` is read
// below `rows · n` values, `out` written below `rows · (2k + 1)`, both below 2³² (checked), with
// the kernel's `1 ≤ k ≤ MAX_K`, `k < n` (checked).
unsafe impl KernelArgs for TopKRowsArgs<'_> {
    type Kernel = TopKRowsKernel;

    fn bind(&mut self, kernel: &TopKRowsKernel) -> Result<Option<Bound<'_>>> {
        const OP: &str = "cuda top_k_rows";
        let (n, k, rows) = (self.n, self.k, self.rows);
        if k == 0 || k > TopKKernel::MAX_K as usize || k >= n {
            return Err(Error::InvalidArgument { op: OP, name: "k", value: k.into(), reason: "must be in 1..=128 and below the row's length" });
        }
        let (x_len, out_len) = (prod(OP, &[rows, n])?, prod(OP, &[rows, 2 * k + 1])?);
        u32_of(OP, "x", prod(OP, &[x_len, 4])?)?;
        u32_of(OP, "out", prod(OP, &[out_len, 4])?)?;
        if rows == 0 {
            return Ok(None);
        }
        Ok(Some(Bound {
            config: kernel.launch(rows as u32),
            params: vec![Param::In(self.x, x_len), Param::Out(self.out, out_len), Param::U32(n as u32), Param::U32(k as u32)],
        }))
    }
}
