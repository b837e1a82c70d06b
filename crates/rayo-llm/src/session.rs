//! The forward pass, written once over [`Backend`]: a session holds a backend's copy of the
//! weights, the KV cache and the position, and turns tokens into logits. A prompt runs as
//! batched products (up to `batch` rows at a time); decoding is one row per call.

use crate::backend::{Backend, KvType};
use crate::config::{product, Config};
use crate::model::Model;
use crate::pass::{layers_pass, logits_pass, Alone, Buffers, Segment, Weights};
use crate::{Error, Result};

/// The positions a session holds when [`SessionOptions::context`] is 0 and the model was trained
/// for more: a KV cache of the whole `context_length` (131072 for Llama 3) would take gigabytes
/// that a GPU backend allocates up front.
pub const DEFAULT_CONTEXT: usize = 4096;

/// `model`'s configuration, checked ([`Config::validate`]), and the positions a KV cache of
/// `asked` positions holds: 0 = the model's context length, at most [`DEFAULT_CONTEXT`]; more
/// than the model's context length is an error, and so is a size of `sequences` such caches
/// past `usize`.
pub(crate) fn checked_config(model: &Model, asked: usize, sequences: usize) -> Result<(Config, usize)> {
    let mut cfg = model.config().clone();
    cfg.validate()?;
    let context = match asked {
        0 => cfg.context_length.min(DEFAULT_CONTEXT),
        n if n > cfg.context_length => return Err(Error::ContextTooLong { asked: n, max: cfg.context_length }),
        n => n,
    };
    product(&[
        ("sequences", sequences),
        ("context", context),
        ("key/value width", cfg.kv_width()),
        ("block_count", cfg.n_layer),
        ("keys and values", 2),
        ("bytes per f32", 4),
    ])?;
    // LongRoPE: the divisors of this context (every backend's RoPE reads `rope_freqs`)
    if let (None, Some(l)) = (&cfg.rope_freqs, &cfg.long_rope) {
        cfg.rope_freqs = Some(l.for_context(context).to_vec());
    }
    Ok((cfg, context))
}

/// How a session is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionOptions {
    /// Positions the KV cache holds: 0 = the model's context length, at most
    /// [`DEFAULT_CONTEXT`]; more than the model's context length is an error.
    pub context: usize,
    /// The KV cache's element type.
    pub kv_type: KvType,
    /// The most tokens one batched step processes (longer prompts run in several).
    pub batch: usize,
    /// The most rows whose logits [`Logits::All`] computes in one product (at most `batch`):
    /// more reads the output head fewer times (a 262,144-token head is the largest matrix of a
    /// small model), at `logit_rows × vocab` f32 of memory. With 1, each row's logits are the
    /// bits it gets alone; with more, those of a batched product (a prompt's arithmetic).
    pub logit_rows: usize,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions { context: 0, kv_type: KvType::F16, batch: 256, logit_rows: 1 }
    }
}

/// Which logits [`Session::forward`] returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Those of the last token only (`vocab` values).
    Last,
    /// Those of every token (`tokens × vocab` values, row-major).
    All,
}

/// A model running on a backend, with its KV cache.
pub struct Session<B: Backend> {
    backend: B,
    cfg: Config,
    weights: Weights<B>,
    kv: B::Kv,
    bufs: Buffers<B>,
    context: usize,
    batch: usize,
    logit_rows: usize,
    pos: usize,
}

impl<B: Backend> Session<B> {
    /// Loads `model`'s weights into `backend` and allocates the KV cache and buffers. Errors,
    /// before anything is uploaded: a shape the backend cannot run ([`Backend::check_config`]),
    /// a context past the model's `context_length`, a batch of 0, a buffer or KV cache whose
    /// size does not fit in `usize`.
    pub fn new(model: &Model, mut backend: B, opts: SessionOptions) -> Result<Session<B>> {
        let (cfg, context) = checked_config(model, opts.context, 1)?;
        backend.check_config(&cfg, context)?;
        crate::shard::check_rank(&cfg, backend.shard(), backend.name())?;
        if opts.batch == 0 {
            return Err(rayo::Error::InvalidArgument { op: "Session::new", name: "batch", value: 0usize.into(), reason: "must be at least 1" }.into());
        }
        let batch = opts.batch.min(context);
        let logit_rows = opts.logit_rows.clamp(1, batch);
        let weights = Weights::upload(model, &mut backend)?;
        let kv = backend.kv_cache(&cfg, context, opts.kv_type)?;
        let bufs = Buffers::new(&mut backend, &cfg, batch, logit_rows, false)?;
        Ok(Session { backend, cfg, weights, kv, bufs, context, batch, logit_rows, pos: 0 })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    pub fn kv(&self) -> &B::Kv {
        &self.kv
    }

    /// Positions already in the KV cache (the next token's position).
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Positions the KV cache holds.
    pub fn context(&self) -> usize {
        self.context
    }

    /// Forgets everything after position `pos` (0 starts over); later tokens overwrite the cache.
    pub fn rewind(&mut self, pos: usize) {
        self.pos = self.pos.min(pos);
    }

    /// Runs `tokens` at the next positions and returns their logits. Errors: the tokens do not
    /// fit in the context (nothing is run), a token id past the vocabulary.
    pub fn forward(&mut self, tokens: &[u32], which: Logits) -> Result<Vec<f32>> {
        let vocab = self.cfg.vocab_size;
        if which == Logits::Last {
            self.forward_queued(tokens)?;
            let mut out = vec![0.0; vocab];
            self.backend.read(&self.bufs.logits, &mut out)?;
            return Ok(out);
        }
        self.check_tokens(tokens)?;
        let mut out = Vec::with_capacity(tokens.len() * vocab);
        for chunk in tokens.chunks(self.batch) {
            self.backend.step_inputs(chunk, self.pos)?;
            if chunk.len() == 1 {
                // the step and its logits (one recording on a backend that records)
                self.one_token_step(chunk)?;
                let n = out.len();
                out.resize(n + vocab, 0.0);
                self.backend.read(&self.bufs.logits, &mut out[n..])?;
                continue;
            }
            self.step(chunk)?;
            for r0 in (0..chunk.len()).step_by(self.logit_rows) {
                let rows: Vec<usize> = (r0..chunk.len().min(r0 + self.logit_rows)).collect();
                logits_pass(&mut self.backend, &self.cfg, &self.weights, &mut self.bufs, &rows, Alone::No)?;
                let n = out.len();
                out.resize(n + rows.len() * vocab, 0.0);
                self.backend.read(&self.bufs.logits, &mut out[n..])?;
            }
        }
        Ok(out)
    }

    /// Runs `tokens` as [`Session::forward`] does and returns the greedy choice after the last
    /// one (the first maximum of its logits, [`Backend::argmax`]): on a device backend the host
    /// reads one token id, not the logits.
    pub fn forward_greedy(&mut self, tokens: &[u32]) -> Result<u32> {
        self.forward_queued(tokens)?;
        self.backend.argmax(&self.bufs.logits, self.cfg.vocab_size)
    }

    /// Runs `tokens` as [`Session::forward`] does and returns the `k` largest logits after the
    /// last one ([`Backend::top_k`]): on a device backend the host reads `k` pairs, not the
    /// logits.
    pub fn forward_top_k(&mut self, tokens: &[u32], k: usize) -> Result<Vec<(u32, f32)>> {
        self.forward_queued(tokens)?;
        self.backend.top_k(&self.bufs.logits, self.cfg.vocab_size, k)
    }

    /// Runs `tokens` as [`Session::forward`] does and leaves the last token's logits in
    /// [`Session::logits_buffer`], unread: for a backend whose reads are awaited (wgpu in a
    /// browser), this is the pass, and the read is the caller's.
    pub fn forward_queued(&mut self, tokens: &[u32]) -> Result<()> {
        self.check_tokens(tokens)?;
        let chunks = tokens.len().div_ceil(self.batch);
        for (c, chunk) in tokens.chunks(self.batch).enumerate() {
            self.backend.step_inputs(chunk, self.pos)?;
            if chunk.len() == 1 && c + 1 == chunks {
                self.one_token_step(chunk)?;
                continue;
            }
            self.step(chunk)?;
            if c + 1 == chunks {
                self.logits_ops(chunk.len() - 1)?;
            }
        }
        self.backend.flush()
    }

    /// The buffer [`Session::forward_queued`] leaves the logits in (`vocab` values).
    pub fn logits_buffer(&self) -> &B::Buf {
        &self.bufs.logits
    }

    /// The checks of [`Session::forward`] (nothing is run when one fails).
    fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        let vocab = self.cfg.vocab_size;
        if tokens.is_empty() {
            return Err(rayo::Error::EmptyInput { op: "Session::forward" }.into());
        }
        if tokens.len() > self.context - self.pos {
            return Err(Error::ContextFull { tokens: tokens.len(), pos: self.pos, context: self.context });
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::TokenPastVocab { id: t, vocab });
        }
        Ok(())
    }

    /// A one-token step and its logits (into `bufs.logits`), through
    /// [`Backend::one_token_step`] (which may record it once and replay it).
    fn one_token_step(&mut self, tokens: &[u32]) -> Result<()> {
        let Session { backend, cfg, weights, kv, bufs, pos, .. } = self;
        let at = [Segment { kv: 0, pos0: *pos, rows: 1 }];
        backend.one_token_step(&mut |b| {
            layers_pass(b, cfg, weights, std::slice::from_mut(kv), bufs, tokens, &at)?;
            logits_pass(b, cfg, weights, bufs, &[0], Alone::Each)
        })?;
        *pos += 1;
        Ok(())
    }

    /// One batch through every layer; leaves the final hidden states in `bufs.x`.
    fn step(&mut self, tokens: &[u32]) -> Result<()> {
        let at = [Segment { kv: 0, pos0: self.pos, rows: tokens.len() }];
        layers_pass(&mut self.backend, &self.cfg, &self.weights, std::slice::from_mut(&mut self.kv), &mut self.bufs, tokens, &at)?;
        self.pos += tokens.len();
        Ok(())
    }

    /// The logits of row `r` of the last batch into `bufs.logits`.
    fn logits_ops(&mut self, r: usize) -> Result<()> {
        logits_pass(&mut self.backend, &self.cfg, &self.weights, &mut self.bufs, &[r], Alone::Each)
    }
}

/// A session with its backend type erased, for code that picks the backend at run time
/// (`--backend`): generation and benchmarks run over `&mut dyn Forward`.
pub trait Forward {
    /// [`Session::forward`].
    fn forward(&mut self, tokens: &[u32], which: Logits) -> Result<Vec<f32>>;
    /// [`Session::forward_greedy`].
    fn forward_greedy(&mut self, tokens: &[u32]) -> Result<u32>;
    /// [`Session::forward_top_k`].
    fn forward_top_k(&mut self, tokens: &[u32], k: usize) -> Result<Vec<(u32, f32)>>;
    /// The model's vocabulary size (logits per token).
    fn vocab(&self) -> usize;
    /// [`Session::rewind`].
    fn rewind(&mut self, pos: usize);
    /// [`Session::position`].
    fn position(&self) -> usize;
    /// [`Session::context`].
    fn context(&self) -> usize;
    /// The backend's name.
    fn backend_name(&self) -> &'static str;
    /// [`Backend::step_ops`]: device operations per replayed one-token step (0: none).
    fn step_ops(&self) -> usize;
}

impl<B: Backend> Forward for Session<B> {
    fn forward(&mut self, tokens: &[u32], which: Logits) -> Result<Vec<f32>> {
        Session::forward(self, tokens, which)
    }
    fn forward_greedy(&mut self, tokens: &[u32]) -> Result<u32> {
        Session::forward_greedy(self, tokens)
    }
    fn forward_top_k(&mut self, tokens: &[u32], k: usize) -> Result<Vec<(u32, f32)>> {
        Session::forward_top_k(self, tokens, k)
    }
    fn vocab(&self) -> usize {
        self.cfg.vocab_size
    }
    fn rewind(&mut self, pos: usize) {
        Session::rewind(self, pos)
    }
    fn position(&self) -> usize {
        self.pos
    }
    fn context(&self) -> usize {
        self.context
    }
    fn backend_name(&self) -> &'static str {
        self.backend.name()
    }
    fn step_ops(&self) -> usize {
        self.backend.step_ops()
    }
}
