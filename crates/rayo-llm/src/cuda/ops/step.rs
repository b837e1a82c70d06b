//! A pass's inputs on the device ([`StepInputs`]), the proof that they were written for the
//! rows an op runs over ([`StepCtx`]), and the ops that need nothing else: the token embedding
//! and RoPE without a cache.

use super::args::{EmbedArgs, RopeArgs};
use super::attention::AttentionShape;
use super::{prod, room, u32_of};
use rayo::cuda::kernels::{EmbedKernel, RopeKernel, RopePairs};
use rayo::cuda::{CudaDevice, DeviceBuffer, DeviceBytes, QFormat};
use rayo::{Error, Result};

/// A pass's inputs where the kernels read them: the token ids and the first row's position, in
/// device memory, so that a captured graph of a pass replays for any token at any position.
/// The host side remembers what it wrote, and each launch checks its sizes against that.
///
/// A recorded pass reads these without the host's checks, so every write is checked against
/// what any pass over them may index: `pos0 + rows` within the cache's positions, every id
/// below the embedding table's rows. Nothing outside this module can write the device copy.
pub struct StepInputs {
    pub(super) tokens: DeviceBytes,
    pub(super) pos: DeviceBytes,
    /// (position, rows) last written, and the largest id.
    pub(super) written: (usize, usize),
    pub(super) max_id: u32,
    /// The positions a pass may reach and the ids it may embed.
    pub(super) positions: usize,
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

    /// The positions a pass over these inputs may reach.
    pub fn positions(&self) -> usize {
        self.positions
    }

    /// Writes the ids and the first position of the next pass (queued on the device's stream,
    /// before the pass's work). Errors, with nothing written: more rows than it has room for,
    /// `pos0 + rows` past its positions (`pos0` itself, for no rows), an id past its
    /// vocabulary. So the device copy always names a position below [`StepInputs::positions`].
    pub fn write(&mut self, dev: &CudaDevice, tokens: &[u32], pos0: usize) -> Result<()> {
        const OP: &str = "cuda StepInputs::write";
        check_owner(dev, OP, self.device)?;
        room(OP, self.tokens.len() / 4, tokens.len())?;
        // (an empty write still names a position: a recorded one-row pass may read it)
        let end = pos0.checked_add(tokens.len().max(1)).ok_or(Error::SizeOverflow { op: OP, dims: vec![pos0, tokens.len()] })?;
        if end > self.positions {
            return Err(Error::LengthMismatch { op: OP, expected: self.positions, actual: end });
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(Error::InvalidArgument { op: OP, name: "token", value: (t as usize).into(), reason: "past the vocabulary" });
        }
        let p = u32_of(OP, "pos0", pos0)?;
        let ids: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
        dev.write_bytes_at(&mut self.tokens, 0, &ids)?;
        dev.write_bytes_at(&mut self.pos, 0, &p.to_le_bytes())?;
        self.written = (pos0, tokens.len());
        self.max_id = tokens.iter().copied().max().unwrap_or(0);
        Ok(())
    }

    /// The pass over the rows last written, on `dev` (the device that made these inputs).
    pub fn step<'a>(&'a self, dev: &'a CudaDevice) -> Result<StepCtx<'a>> {
        check_owner(dev, "cuda StepInputs::step", self.device)?;
        let (pos0, m) = self.written;
        Ok(StepCtx { dev, inputs: self, pos0, m })
    }

    /// [`StepInputs::step`], an error unless the last write was `m` rows at `pos0`.
    pub fn step_at<'a>(&'a self, dev: &'a CudaDevice, pos0: usize, m: usize) -> Result<StepCtx<'a>> {
        const OP: &str = "cuda StepInputs::step_at";
        let st = self.step(dev)?;
        if (st.pos0, st.m) != (pos0, m) {
            return Err(Error::InvalidArgument {
                op: OP,
                name: "pos0",
                value: pos0.into(),
                reason: "not the position the step's inputs were written with",
            });
        }
        Ok(st)
    }
}

fn check_owner(dev: &CudaDevice, op: &'static str, owner: u64) -> Result<()> {
    if owner == dev.id() {
        Ok(())
    } else {
        Err(Error::ForeignBuffer { op, owner, user: dev.id() })
    }
}

/// One pass over the rows a [`StepInputs`] was last written with: `m` rows at positions
/// `pos0..pos0 + m`, on the device that made the inputs. Made only by [`StepInputs::step`], so
/// an op that takes one runs over exactly what the kernels will read.
pub struct StepCtx<'a> {
    pub(super) dev: &'a CudaDevice,
    pub(super) inputs: &'a StepInputs,
    pub(super) pos0: usize,
    pub(super) m: usize,
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
