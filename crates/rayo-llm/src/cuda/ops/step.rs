//! A pass's inputs on the device ([`StepInputs`]), the proof that they were written for the
//! rows an op runs over ([`StepCtx`]), and the ops that need nothing else: the token embedding
//! and RoPE without a cache.

use super::args::{EmbedArgs, RopeArgs};
use super::attention::AttentionShape;
use super::{prod, room, u32_of};
use rayo::cuda::kernels::{EmbedKernel, RopeKernel, RopePairs};
use rayo::cuda::{CudaDevice, DeviceBuffer, DeviceBytes, QFormat};
use rayo::{Error, Result};

/// A pass's inputs where the kernels read them: each token's row of the embedding table (its
/// id; on a tensor-parallel rank, the row of the rank's part or its zero row:
/// [`crate::shard::embedding_row`]), a position per row and a KV cache slot per row, in device
/// memory, so that a captured graph of a pass replays for any token at any position. The host
/// side remembers what it wrote (the pass's segments: each sequence's rows, slot and first
/// position), and each launch checks its sizes against that.
///
/// A recorded pass reads these without the host's checks, so every write is checked against
/// what any pass over them may index: every segment's `pos0 + rows` within the cache's
/// positions, every slot below the cache's slots, every id below the embedding table's rows.
/// Nothing outside this module can write the device copy.
pub struct StepInputs {
    pub(super) tokens: DeviceBytes,
    /// A u32 position per row (a segment's rows at consecutive positions).
    pub(super) pos: DeviceBytes,
    /// A u32 cache slot per row.
    pub(super) slots: DeviceBytes,
    /// The segments last written, in row order, and the rows in all.
    pub(super) written: Vec<Segment>,
    pub(super) rows: usize,
    /// The largest id last written.
    pub(super) max_id: u32,
    /// The positions a pass may reach, the cache slots it may name and the ids it may embed.
    pub(super) positions: usize,
    pub(super) cache_slots: usize,
    vocab: usize,
    /// The rank whose embedding rows the ids are written as (alone: the ids themselves).
    shard: crate::shard::Shard,
    device: u64,
}

/// One sequence's rows of a pass: rows `row0..row0 + rows` at positions `pos0..pos0 + rows` of
/// cache slot `slot`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub slot: usize,
    pub pos0: usize,
    pub rows: usize,
    pub row0: usize,
}

impl StepInputs {
    /// Room for passes of up to `max_rows` tokens, at positions below `positions` of a cache
    /// of `cache_slots` slots, of ids below `vocab`.
    pub fn new(dev: &CudaDevice, max_rows: usize, positions: usize, vocab: usize) -> Result<StepInputs> {
        StepInputs::with_slots(dev, max_rows, positions, 1, vocab)
    }

    /// [`StepInputs::new`] for a cache of `cache_slots` slots (one per sequence of a batch).
    pub fn with_slots(dev: &CudaDevice, max_rows: usize, positions: usize, cache_slots: usize, vocab: usize) -> Result<StepInputs> {
        let bytes = prod("cuda StepInputs", &[max_rows.max(1), 4])?;
        Ok(StepInputs {
            tokens: dev.zero_bytes(bytes)?,
            pos: dev.zero_bytes(bytes)?,
            slots: dev.zero_bytes(bytes)?,
            written: vec![Segment { slot: 0, pos0: 0, rows: 0, row0: 0 }],
            rows: 0,
            max_id: 0,
            positions,
            cache_slots: cache_slots.max(1),
            vocab,
            shard: crate::shard::Shard { rank: 0, world: 1 },
            device: dev.id(),
        })
    }

    /// The same inputs for tensor-parallel rank `shard`: each id written as the row of the
    /// rank's embedding table it reads ([`crate::shard::embedding_row`]).
    pub fn for_shard(mut self, shard: crate::shard::Shard) -> StepInputs {
        self.shard = shard;
        self
    }

    /// The positions a pass over these inputs may reach.
    pub fn positions(&self) -> usize {
        self.positions
    }

    /// The rows the last write holds.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Writes the ids and the first position of the next pass, one sequence in slot 0 (queued
    /// on the device's stream, before the pass's work). Errors, with nothing written: more
    /// rows than it has room for, `pos0 + rows` past its positions (`pos0` itself, for no
    /// rows), an id past its vocabulary. So the device copy always names a position below
    /// [`StepInputs::positions`].
    pub fn write(&mut self, dev: &CudaDevice, tokens: &[u32], pos0: usize) -> Result<()> {
        self.write_segments(dev, tokens, &[(0, pos0, tokens.len())])
    }

    /// [`StepInputs::write`] for a pass of several sequences: `segments` as (slot, first
    /// position, rows), in row order, their rows adding up to `tokens.len()`. Errors, with
    /// nothing written: as `write`, for each segment, and a slot past the cache's.
    pub fn write_segments(&mut self, dev: &CudaDevice, tokens: &[u32], segments: &[(usize, usize, usize)]) -> Result<()> {
        const OP: &str = "cuda StepInputs::write";
        check_owner(dev, OP, self.device)?;
        room(OP, self.tokens.len() / 4, tokens.len())?;
        let total = segments.iter().try_fold(0usize, |a, s| a.checked_add(s.2)).ok_or(Error::SizeOverflow { op: OP, dims: vec![segments.len()] })?;
        if total != tokens.len() || segments.is_empty() {
            return Err(Error::LengthMismatch { op: OP, expected: tokens.len(), actual: total });
        }
        let (mut written, mut pos, mut slots) = (Vec::with_capacity(segments.len()), Vec::with_capacity(4 * total), Vec::with_capacity(4 * total));
        for &(slot, pos0, rows) in segments {
            // (an empty write still names a position: a recorded one-row pass may read it)
            let end = pos0.checked_add(rows.max(1)).ok_or(Error::SizeOverflow { op: OP, dims: vec![pos0, rows] })?;
            if end > self.positions {
                return Err(Error::LengthMismatch { op: OP, expected: self.positions, actual: end });
            }
            if slot >= self.cache_slots {
                return Err(Error::InvalidArgument { op: OP, name: "slot", value: slot.into(), reason: "past the cache's slots" });
            }
            written.push(Segment { slot, pos0, rows, row0: pos.len() / 4 });
            // (an empty pass names its first position, in row 0)
            for p in pos0..pos0 + rows.max(usize::from(total == 0)) {
                pos.extend_from_slice(&u32_of(OP, "pos", p)?.to_le_bytes());
                slots.extend_from_slice(&u32_of(OP, "slot", slot)?.to_le_bytes());
            }
        }
        pos.truncate(4 * total.max(1));
        slots.truncate(4 * total.max(1));
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(Error::InvalidArgument { op: OP, name: "token", value: (t as usize).into(), reason: "past the vocabulary" });
        }
        // (every id below the vocabulary, checked above)
        let rows: Vec<u32> = tokens.iter().map(|&t| crate::shard::row_of_id(self.shard, self.vocab, t)).collect();
        let ids: Vec<u8> = rows.iter().flat_map(|t| t.to_le_bytes()).collect();
        dev.write_bytes_at(&mut self.tokens, 0, &ids)?;
        dev.write_bytes_at(&mut self.pos, 0, &pos)?;
        dev.write_bytes_at(&mut self.slots, 0, &slots)?;
        self.written = written;
        self.rows = total;
        self.max_id = rows.iter().copied().max().unwrap_or(0);
        Ok(())
    }

    /// The pass over all the rows last written, on `dev` (the device that made these inputs).
    pub fn step<'a>(&'a self, dev: &'a CudaDevice) -> Result<StepCtx<'a>> {
        check_owner(dev, "cuda StepInputs::step", self.device)?;
        let first = self.written[0];
        Ok(StepCtx { dev, inputs: self, pos0: first.pos0, m: self.rows, row0: 0, slot: first.slot })
    }

    /// [`StepInputs::segment`] of slot 0: the pass of one sequence.
    pub fn step_at<'a>(&'a self, dev: &'a CudaDevice, pos0: usize, m: usize) -> Result<StepCtx<'a>> {
        self.segment(dev, 0, pos0, m)
    }

    /// The rows of the last write's segment of `m` rows at `pos0` in `slot`, or an error
    /// when it wrote no such segment.
    pub fn segment<'a>(&'a self, dev: &'a CudaDevice, slot: usize, pos0: usize, m: usize) -> Result<StepCtx<'a>> {
        const OP: &str = "cuda StepInputs::segment";
        check_owner(dev, OP, self.device)?;
        match self.written.iter().find(|s| (s.slot, s.pos0, s.rows) == (slot, pos0, m)) {
            Some(s) => Ok(StepCtx { dev, inputs: self, pos0, m, row0: s.row0, slot }),
            None => Err(Error::InvalidArgument {
                op: OP,
                name: "pos0",
                value: pos0.into(),
                reason: "not a position and slot the step's inputs were written with",
            }),
        }
    }

    /// The first `n` rows of the last write, an error unless each is a segment of one row (a
    /// decoding sequence's next token): what [`LayerCache::decode_rows`](super::LayerCache::decode_rows) runs over.
    pub fn one_token_rows<'a>(&'a self, dev: &'a CudaDevice, n: usize) -> Result<OneTokenRows<'a>> {
        const OP: &str = "cuda StepInputs::one_token_rows";
        check_owner(dev, OP, self.device)?;
        let ok = self.written.len() >= n && self.written[..n].iter().enumerate().all(|(i, s)| s.rows == 1 && s.row0 == i);
        if !ok {
            return Err(Error::InvalidArgument {
                op: OP,
                name: "n",
                value: n.into(),
                reason: "the step's first rows are not that many one-token sequences",
            });
        }
        Ok(OneTokenRows { dev, inputs: self, n })
    }
}

/// The first `n` rows of a pass, each one sequence's one token (its own slot and position).
/// Made only by [`StepInputs::one_token_rows`].
pub struct OneTokenRows<'a> {
    pub(super) dev: &'a CudaDevice,
    pub(super) inputs: &'a StepInputs,
    pub(super) n: usize,
}

fn check_owner(dev: &CudaDevice, op: &'static str, owner: u64) -> Result<()> {
    if owner == dev.id() {
        Ok(())
    } else {
        Err(Error::ForeignBuffer { op, owner, user: dev.id() })
    }
}

/// One pass over the rows a [`StepInputs`] was last written with, or one sequence's rows of it:
/// `m` rows (from row `row0` of the inputs) at positions `pos0..pos0 + m` of cache slot `slot`,
/// on the device that made the inputs. Made only by [`StepInputs::step`] and
/// [`StepInputs::segment`], so an op that takes one runs over exactly what the kernels will
/// read.
pub struct StepCtx<'a> {
    pub(super) dev: &'a CudaDevice,
    pub(super) inputs: &'a StepInputs,
    pub(super) pos0: usize,
    pub(super) m: usize,
    pub(super) row0: usize,
    pub(super) slot: usize,
}

/// A model's RoPE: which elements pair, the `(cos, sin)` table (`positions × n_rot/2` pairs),
/// and how many values of each head rotate.
#[derive(Clone, Copy)]
pub struct Rope<'a> {
    pub pairs: RopePairs,
    pub table: &'a DeviceBuffer,
    pub n_rot: usize,
}

impl StepCtx<'_> {
    /// The pass's rows.
    pub fn m(&self) -> usize {
        self.m
    }

    /// The first row's position.
    pub fn pos0(&self) -> usize {
        self.pos0
    }

    /// Rows `tokens[r]` of `table` (`rows × cols` values of `fmt`) into the first `m` rows of
    /// `out` (the ids the inputs hold, each checked below the vocabulary when written, and
    /// here below `rows`).
    pub fn embed(&self, fmt: QFormat, table: &DeviceBytes, (rows, cols): (usize, usize), out: &mut DeviceBuffer) -> Result<()> {
        self.dev.launch(&EmbedKernel::new(fmt), &mut EmbedArgs { st: self, fmt, table, rows, cols, out })
    }

    /// Rotates the first `rope.n_rot` values of each head (`shape`'s heads and head size) of
    /// the first `m` rows of `q` and `k`, row `r` at position `pos0 + r`.
    pub fn rope(&self, rope: &Rope, shape: &AttentionShape, q: &mut DeviceBuffer, k: &mut DeviceBuffer) -> Result<()> {
        let args = &mut RopeArgs { st: self, rope: *rope, heads: (shape.n_head, shape.n_head_kv), head_dim: shape.head_dim, q, k, cache: None };
        self.dev.launch(&RopeKernel::new(rope.pairs), args)
    }
}
