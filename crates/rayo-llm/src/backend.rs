//! What a device must provide to run the model: the forward pass ([`crate::session`]) is
//! written once over this trait, and each backend (the CPU here; CUDA and wgpu later)
//! supplies the ops on its own buffers.
//!
//! Activations are row-major `m × width` f32 buffers with room for a session's largest batch;
//! each op takes the `m` rows it acts on.

use crate::config::Config;
use crate::shard::Shard;
use crate::weights::WeightRef;
use crate::{Error, Result};
use rayo::gguf::GgufFile;

/// Element type of the KV cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KvType {
    /// IEEE half precision, as llama.cpp stores it by default.
    #[default]
    F16,
    F32,
}

/// A row's `k` largest logits as (id, logit), largest first, the lower id first among equals;
/// or the sampler's error for that row (a NaN or +inf).
pub type RowBest = Result<Vec<(u32, f32)>>;

/// The ops of a llama-family forward pass on one device.
pub trait Backend {
    /// A weight matrix as this backend holds it (in place in the file on the CPU).
    type Weight;
    /// A small f32 vector (norm weights, biases).
    type Vector;
    /// An activation buffer.
    type Buf;
    /// The KV cache of all layers.
    type Kv;

    /// The backend's name, as `--backend` spells it.
    fn name(&self) -> &'static str;

    /// Errors for a model shape this backend cannot run with a KV cache of `context`
    /// positions, before anything is uploaded (`cfg` has passed [`Config::validate`]). By
    /// default every valid shape runs.
    fn check_config(&self, cfg: &Config, context: usize) -> Result<()> {
        let _ = (cfg, context);
        Ok(())
    }

    /// KV caches this backend can hold at once, so sequences one step can run.
    fn max_sequences(&self) -> usize {
        usize::MAX
    }

    /// Makes a weight matrix of `file` usable by this backend.
    fn weight(&mut self, file: &GgufFile, w: &WeightRef) -> Result<Self::Weight>;
    /// Makes a vector usable by this backend.
    fn vector(&mut self, v: &[f32]) -> Result<Self::Vector>;
    /// An activation buffer of `len` values.
    fn buffer(&mut self, len: usize) -> Result<Self::Buf>;
    /// A KV cache for `positions` positions of every layer of `cfg`.
    fn kv_cache(&mut self, cfg: &Config, positions: usize, ty: KvType) -> Result<Self::Kv>;
    /// `n` KV caches as [`Backend::kv_cache`] makes them, one per sequence of a batch. By
    /// default `n` calls of it; a backend whose kernels reach many sequences' caches in one
    /// launch (CUDA) keeps them together, and may replace caches it made before.
    fn kv_caches(&mut self, cfg: &Config, positions: usize, ty: KvType, n: usize) -> Result<Vec<Self::Kv>> {
        (0..n).map(|_| self.kv_cache(cfg, positions, ty)).collect()
    }

    /// `x[i] = table[tokens[i]]` (rows of `width` values).
    fn embed(&mut self, table: &Self::Weight, tokens: &[u32], x: &mut Self::Buf) -> Result<()>;
    /// `out = x / rms(x) · w` per row of `width` values, for `m` rows.
    fn rms_norm(&mut self, x: &Self::Buf, w: &Self::Vector, eps: f32, m: usize, out: &mut Self::Buf) -> Result<()>;
    /// `out = x · Wᵀ` for `m` rows of `x` (`m × w.cols` → `m × w.rows`).
    fn matmul(&mut self, w: &Self::Weight, x: &Self::Buf, m: usize, out: &mut Self::Buf) -> Result<()>;
    /// `x[i] += b` for `m` rows.
    fn add_bias(&mut self, x: &mut Self::Buf, b: &Self::Vector, m: usize) -> Result<()>;
    /// `x += y` over the first `len` values.
    fn add(&mut self, x: &mut Self::Buf, y: &Self::Buf, len: usize) -> Result<()>;
    /// `gate = silu(gate) · up` over the first `len` values.
    fn swiglu(&mut self, gate: &mut Self::Buf, up: &Self::Buf, len: usize) -> Result<()>;
    /// `gate = gelu(gate) · up` over the first `len` values, GELU in its tanh form
    /// ([`crate::arch::Activation::GeluTanh`]). By default an error: a backend without it
    /// refuses such models in [`Backend::check_config`].
    fn geglu(&mut self, gate: &mut Self::Buf, up: &Self::Buf, len: usize) -> Result<()> {
        let _ = (gate, up, len);
        Err(crate::Error::backend(self.name(), "has no GELU MLP"))
    }
    /// `x *= s` over the first `len` values. By default an error, as [`Backend::geglu`].
    fn scale(&mut self, x: &mut Self::Buf, s: f32, len: usize) -> Result<()> {
        let _ = (x, s, len);
        Err(crate::Error::backend(self.name(), "has no scaling op"))
    }
    /// Rotates the first `cfg.n_rot` values of each head of `q` (`cfg.n_head` heads) and `k`
    /// (`cfg.n_head_kv` heads) for `m` rows at positions `pos0, pos0 + 1, ...`, with `layer`'s
    /// angles ([`Config::rope_of`]).
    fn rope(&mut self, cfg: &Config, layer: usize, q: &mut Self::Buf, k: &mut Self::Buf, m: usize, pos0: usize) -> Result<()>;
    /// Stores `k` and `v` (`m` rows) at positions `pos0..pos0 + m` of `layer` in the cache,
    /// then writes causal grouped-query attention of `q` over positions `0..=pos` (the last
    /// [`Config::window`] of them on a local layer) to `out`.
    #[allow(clippy::too_many_arguments)]
    fn attention(
        &mut self,
        cfg: &Config,
        kv: &mut Self::Kv,
        layer: usize,
        q: &Self::Buf,
        k: &Self::Buf,
        v: &Self::Buf,
        m: usize,
        pos0: usize,
        out: &mut Self::Buf,
    ) -> Result<()>;
    /// Copies rows `from..from + rows` of `x` to rows `to..to + rows` of `out` (rows of
    /// `width` values).
    fn copy_rows(&mut self, x: &Self::Buf, from: usize, out: &mut Self::Buf, to: usize, rows: usize, width: usize) -> Result<()>;
    /// Copies the first `out.len()` values of `x` to the host.
    fn read(&mut self, x: &Self::Buf, out: &mut [f32]) -> Result<()>;
    /// Greedy sampling of the first `n` values of `x` (logits): the first maximum, with the
    /// sampler's checks (no NaN or +inf, a finite value). By default read, then scanned here;
    /// a device backend finds it where the logits are and reads one id.
    fn argmax(&mut self, x: &Self::Buf, n: usize) -> Result<u32> {
        let mut v = vec![0.0; n];
        self.read(x, &mut v)?;
        crate::sample::check(&v)
    }
    /// The `k` largest of the first `n` values of `x` (logits) as (id, logit), largest first,
    /// the lower id first among equals, with the sampler's checks: what top-k sampling keeps.
    /// By default read, then scanned here; a device backend finds them where the logits are.
    fn top_k(&mut self, x: &Self::Buf, n: usize, k: usize) -> Result<Vec<(u32, f32)>> {
        let mut v = vec![0.0; n];
        self.read(x, &mut v)?;
        crate::sample::top_k_of(&v, k)
    }
    /// [`Backend::top_k`] of each of the first `rows` rows of `x` (rows of `n` logits), each
    /// row's checks its own: what greedy sampling of many sequences needs, without moving
    /// their logits to the host. By default read, then scanned here.
    fn top_k_rows(&mut self, x: &Self::Buf, n: usize, rows: usize, k: usize) -> Result<Vec<RowBest>> {
        let len = rows.checked_mul(n).ok_or(rayo::Error::SizeOverflow { op: "top_k_rows", dims: vec![rows, n] })?;
        let mut v = vec![0.0; len];
        self.read(x, &mut v)?;
        Ok(v.chunks_exact(n.max(1)).take(rows).map(|row| crate::sample::top_k_of(row, k)).collect())
    }
    /// Says that the first `n` rows of the products that follow are one-token rows (each a
    /// decoding sequence's next token) and the rest prompt rows. A backend whose arithmetic for
    /// a row differs between the kinds (the CPU's: a row alone, or in tiles of eight) keeps each
    /// row's, so that a row's result does not depend on the rows beside it: a batch of many
    /// sequences gives each the bits it gets alone. By default ignored.
    fn one_token_rows(&mut self, n: usize) {
        let _ = n;
    }
    /// Starts the work recorded so far (a backend that records a pass submits it here; the
    /// others run ops as they come). [`crate::Session::forward_queued`] ends with it.
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    // ---- tensor parallelism ([`crate::shard`]): a backend that runs one rank of several ----

    /// The rank this backend runs, of a world of ranks that reach each other through it; by
    /// default [`Shard::ALONE`]. A session takes only a model of this rank.
    fn shard(&self) -> Shard {
        Shard::ALONE
    }
    /// The first `len` values of `buf` summed over every rank (an all-reduce), on every rank,
    /// the same bits everywhere. The pass calls it only in a world of several ranks; by
    /// default it is an error.
    fn all_reduce(&mut self, buf: &mut Self::Buf, len: usize) -> Result<()> {
        let _ = (buf, len);
        Err(Error::backend(self.name(), "has no all-reduce (it runs no tensor-parallel rank)"))
    }
    /// Whole rows from every rank's part of them: `part` holds this rank's `m` rows of
    /// `Shard::part(width)` values; `out` gets `m` rows of `width` values, each row the ranks'
    /// parts in rank order (an all-gather: the logits of a head split by vocabulary rows). The
    /// pass calls it only in a world of several ranks; by default it is an error.
    fn all_gather_rows(&mut self, part: &Self::Buf, m: usize, width: usize, out: &mut Self::Buf) -> Result<()> {
        let _ = (part, m, width, out);
        Err(Error::backend(self.name(), "has no all-gather (it runs no tensor-parallel rank)"))
    }

    // ---- fused ops: each has a default made of the ops above, which a backend may replace
    // with fewer launches (the forward pass calls these) ----

    /// `outs[i] = rms_norm(x)·wsᵢᵀ` for `m` rows (the defaults normalize into `tmp`).
    #[allow(clippy::too_many_arguments)]
    fn norm_matmuls(
        &mut self,
        x: &Self::Buf,
        norm: &Self::Vector,
        eps: f32,
        m: usize,
        ws: &[&Self::Weight],
        tmp: &mut Self::Buf,
        outs: &mut [&mut Self::Buf],
    ) -> Result<()> {
        self.rms_norm(x, norm, eps, m, tmp)?;
        for (w, out) in ws.iter().zip(outs.iter_mut()) {
            self.matmul(w, tmp, m, out)?;
        }
        Ok(())
    }
    /// [`Backend::norm_matmuls`], then `outs[i][r] += biases[i]` for each of the `m` rows (one
    /// bias per matrix; none: the products alone). By default a [`Backend::add_bias`] each.
    #[allow(clippy::too_many_arguments)]
    fn norm_matmuls_bias(
        &mut self,
        x: &Self::Buf,
        norm: &Self::Vector,
        eps: f32,
        m: usize,
        ws: &[&Self::Weight],
        biases: &[&Self::Vector],
        tmp: &mut Self::Buf,
        outs: &mut [&mut Self::Buf],
    ) -> Result<()> {
        self.norm_matmuls(x, norm, eps, m, ws, tmp, outs)?;
        for (out, b) in outs.iter_mut().zip(biases) {
            self.add_bias(out, b, m)?;
        }
        Ok(())
    }
    /// `x += rms_norm(y)·w` per row, for `m` rows (`len` values of `x`; the default normalizes
    /// into `tmp`): a norm after a sublayer, then the residual connection.
    #[allow(clippy::too_many_arguments)]
    fn norm_add(&mut self, x: &mut Self::Buf, y: &Self::Buf, w: &Self::Vector, eps: f32, m: usize, tmp: &mut Self::Buf, len: usize) -> Result<()> {
        self.rms_norm(y, w, eps, m, tmp)?;
        self.add(x, tmp, len)
    }
    /// `acc += x·wᵀ` for `m` rows (`len` values of `acc`; the default multiplies into `tmp`).
    fn matmul_add(&mut self, w: &Self::Weight, x: &Self::Buf, m: usize, tmp: &mut Self::Buf, acc: &mut Self::Buf, len: usize) -> Result<()> {
        self.matmul(w, x, m, tmp)?;
        self.add(acc, tmp, len)
    }
    /// `out = silu(n·gateᵀ) · (n·upᵀ)` with `n = rms_norm(x)`, for `m` rows (`len` values of
    /// `out`; the default uses `tmp` and `up_out`).
    #[allow(clippy::too_many_arguments)]
    fn norm_swiglu(
        &mut self,
        x: &Self::Buf,
        norm: &Self::Vector,
        eps: f32,
        m: usize,
        (gate, up): (&Self::Weight, &Self::Weight),
        tmp: &mut Self::Buf,
        out: &mut Self::Buf,
        up_out: &mut Self::Buf,
        len: usize,
    ) -> Result<()> {
        self.rms_norm(x, norm, eps, m, tmp)?;
        self.matmul(gate, tmp, m, out)?;
        self.matmul(up, tmp, m, up_out)?;
        self.swiglu(out, up_out, len)
    }
    /// [`Backend::norm_swiglu`] with GELU ([`Backend::geglu`]) in place of SiLU.
    #[allow(clippy::too_many_arguments)]
    fn norm_geglu(
        &mut self,
        x: &Self::Buf,
        norm: &Self::Vector,
        eps: f32,
        m: usize,
        (gate, up): (&Self::Weight, &Self::Weight),
        tmp: &mut Self::Buf,
        out: &mut Self::Buf,
        up_out: &mut Self::Buf,
        len: usize,
    ) -> Result<()> {
        self.norm_matmuls(x, norm, eps, m, &[gate, up], tmp, &mut [&mut *out, &mut *up_out])?;
        self.geglu(out, up_out, len)
    }

    /// [`Backend::rope`] on `q` and `k`, then [`Backend::attention`].
    #[allow(clippy::too_many_arguments)]
    fn rope_attention(
        &mut self,
        cfg: &Config,
        kv: &mut Self::Kv,
        layer: usize,
        (q, k, v): (&mut Self::Buf, &mut Self::Buf, &Self::Buf),
        m: usize,
        pos0: usize,
        out: &mut Self::Buf,
    ) -> Result<()> {
        self.rope(cfg, layer, q, k, m, pos0)?;
        self.attention(cfg, kv, layer, q, k, v, m, pos0, out)
    }

    /// [`Backend::rope_attention`] of `q` and `k` with each head RMS-normalized first (a
    /// model's QK-norm: `norms` are the queries' and the keys' weights, `head_dim` values each):
    /// by default the norms into `qn` and `kn`, then attention of those. A backend may fuse the
    /// norms into its attention (CUDA's decoding step), leaving `qn` and `kn` as they were.
    #[allow(clippy::too_many_arguments)]
    fn qk_norm_rope_attention(
        &mut self,
        cfg: &Config,
        kv: &mut Self::Kv,
        layer: usize,
        qkv: (&Self::Buf, &Self::Buf, &Self::Buf),
        norms: (&Self::Vector, &Self::Vector),
        normed: (&mut Self::Buf, &mut Self::Buf),
        (m, pos0): (usize, usize),
        out: &mut Self::Buf,
    ) -> Result<()> {
        qk_norm_then_rope_attention(self, cfg, kv, layer, qkv, norms, normed, (m, pos0), out)
    }

    // ---- one-token steps, recorded once and replayed (a GPU's decoding); the CPU has none ----

    /// Called before each pass with its tokens and first position: a backend whose kernels
    /// read them from device memory writes them there (checked: `pos0 + tokens.len()` within
    /// the KV cache, every id within the vocabulary).
    fn step_inputs(&mut self, tokens: &[u32], pos0: usize) -> Result<()> {
        let _ = (tokens, pos0);
        Ok(())
    }

    /// [`Backend::step_inputs`] for a pass of several sequences: `segments` as (cache, first
    /// position, rows), in row order, their rows adding up to `tokens.len()`.
    fn batch_inputs(&mut self, tokens: &[u32], segments: &[(&Self::Kv, usize, usize)]) -> Result<()> {
        let _ = (tokens, segments);
        Ok(())
    }

    /// [`Backend::rope_attention`] for each of the first `rows.len()` rows of `q`, `k`, `v`
    /// into the same rows of `out`, row `i` a sequence's one token: the cache `kvs[rows[i].0]`
    /// at position `rows[i].1` (the first segments of the last [`Backend::batch_inputs`]), in
    /// fewer launches than one per row or shared among threads; each row's result the bits it
    /// gets alone. `Ok(false)`, with nothing done, where the backend has no such op: the pass
    /// then runs the rows one by one.
    #[allow(clippy::too_many_arguments)]
    fn rope_attention_one_token_rows(
        &mut self,
        cfg: &Config,
        layer: usize,
        (kvs, rows): (&mut [Self::Kv], &[(usize, usize)]),
        (q, k, v): (&mut Self::Buf, &mut Self::Buf, &Self::Buf),
        out: &mut Self::Buf,
    ) -> Result<bool> {
        let _ = (cfg, layer, kvs, rows, q, k, v, out);
        Ok(false)
    }

    /// Runs a one-token step: `ops` queues its ops on this backend, reading the inputs of the
    /// last [`Backend::step_inputs`]. A backend that records (CUDA graphs) may record what
    /// `ops` queues and, on later calls, replay the recording instead of calling `ops`: the
    /// caller passes the same ops every time (as [`crate::Session`] does). A recording
    /// references only memory the backend owns, so no order of calls can replay it over freed
    /// or foreign memory.
    fn one_token_step(&mut self, ops: &mut dyn FnMut(&mut Self) -> Result<()>) -> Result<()> {
        ops(self)
    }
    /// [`Backend::one_token_step`] for a step of `rows` one-token rows, each its own sequence's
    /// (the last [`Backend::batch_inputs`] wrote `rows` segments of one row): a backend that
    /// records may keep a recording per `rows` and replay it. The caller passes the same ops for
    /// the same `rows` every time (as [`crate::BatchSession`] does).
    fn one_token_rows_step(&mut self, rows: usize, ops: &mut dyn FnMut(&mut Self) -> Result<()>) -> Result<()> {
        let _ = rows;
        ops(self)
    }
    /// Device operations (kernel launches and copies) one replay of the recorded step queues;
    /// 0 when there is none.
    fn step_ops(&self) -> usize {
        0
    }
}

/// [`Backend::qk_norm_rope_attention`] as two norms and then [`Backend::rope_attention`]: its
/// default, and what a backend that fuses them runs where it cannot.
#[allow(clippy::too_many_arguments)]
pub(crate) fn qk_norm_then_rope_attention<B: Backend + ?Sized>(
    b: &mut B,
    cfg: &Config,
    kv: &mut B::Kv,
    layer: usize,
    (q, k, v): (&B::Buf, &B::Buf, &B::Buf),
    (nq, nk): (&B::Vector, &B::Vector),
    (qn, kn): (&mut B::Buf, &mut B::Buf),
    (m, pos0): (usize, usize),
    out: &mut B::Buf,
) -> Result<()> {
    // each head is a row of `head_dim` values
    b.rms_norm(q, nq, cfg.eps, m * cfg.n_head, qn)?;
    b.rms_norm(k, nk, cfg.eps, m * cfg.n_head_kv, kn)?;
    b.rope_attention(cfg, kv, layer, (qn, kn, v), m, pos0, out)
}
