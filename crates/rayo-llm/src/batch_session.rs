//! Many sequences on one backend, batched: a step's rows (every slot's tokens, one after
//! another) go through each weight matrix as one product, so the weights are read once per
//! step, not once per sequence; attention runs per sequence over its own KV cache. The logits
//! of every slot's last row come from one product with the output head.
//!
//! A row's result does not depend on its neighbours: the one-token items' rows go first and
//! take a decoding row's arithmetic ([`Backend::one_token_rows`]), a prompt's rows that of a
//! prompt row in any tile (`rayo::quant`'s batch-invariance test); attention, norms and RoPE
//! are per row or per sequence. So a slot's logits are the same bits whether it runs alone or
//! beside others, and equal a [`crate::Session`]'s for the same tokens fed in the same pieces.

use crate::backend::{Backend, KvType};
use crate::batch::{check_work, BatchForward, SlotWork};
use crate::config::Config;
use crate::model::Model;
use crate::pass::{layers_pass, logits_pass, Buffers, Segment, Weights};
use crate::session::checked_config;
use crate::{Error, Result};

/// How a batched session is sized.
#[derive(Clone, Copy, Debug)]
pub struct BatchOptions {
    /// Sequences in flight at once, each with its own KV cache.
    pub slots: usize,
    /// Positions each slot's KV cache holds: 0 = the model's context length, at most
    /// [`DEFAULT_CONTEXT`](crate::DEFAULT_CONTEXT).
    pub context: usize,
    pub kv_type: KvType,
    /// The most rows (tokens of all slots together) one step runs.
    pub rows: usize,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions { slots: 4, context: 0, kv_type: KvType::F16, rows: 256 }
    }
}

/// A model running many sequences on one backend (see the module's documentation).
pub struct BatchSession<B: Backend> {
    backend: B,
    cfg: Config,
    weights: Weights<B>,
    kvs: Vec<B::Kv>,
    pos: Vec<usize>,
    bufs: Buffers<B>,
    context: usize,
    rows: usize,
}

impl<B: Backend> BatchSession<B> {
    /// Loads `model` into `backend` with `opts.slots` KV caches. Errors, before anything is
    /// uploaded: 0 slots or rows, more slots than the backend holds caches
    /// ([`Backend::max_sequences`]), a context past the model's, a size past `usize`.
    pub fn new(model: &Model, mut backend: B, opts: BatchOptions) -> Result<BatchSession<B>> {
        let (cfg, context) = checked_config(model, opts.context, opts.slots)?;
        if opts.slots == 0 || opts.rows == 0 {
            return Err(Error::Batch(format!("{} slots and {} rows per step: both must be at least 1", opts.slots, opts.rows)));
        }
        if opts.slots > backend.max_sequences() {
            let (name, n) = (backend.name(), backend.max_sequences());
            return Err(Error::Batch(format!("the {name} backend holds {n} sequence(s) per session, {} slots asked", opts.slots)));
        }
        backend.check_config(&cfg, context)?;
        let weights = Weights::upload(model, &mut backend)?;
        let kvs = (0..opts.slots).map(|_| backend.kv_cache(&cfg, context, opts.kv_type)).collect::<Result<Vec<_>>>()?;
        let bufs = Buffers::new(&mut backend, &cfg, opts.rows, opts.slots.min(opts.rows), opts.slots > 1)?;
        Ok(BatchSession { backend, cfg, weights, kvs, pos: vec![0; opts.slots], bufs, context, rows: opts.rows })
    }

    /// The most rows one step runs.
    pub fn max_rows(&self) -> usize {
        self.rows
    }
}

impl<B: Backend> BatchForward for BatchSession<B> {
    fn slots(&self) -> usize {
        self.kvs.len()
    }
    fn context(&self) -> usize {
        self.context
    }
    fn vocab(&self) -> usize {
        self.cfg.vocab_size
    }
    fn position(&self, slot: usize) -> usize {
        self.pos.get(slot).copied().unwrap_or(0)
    }
    fn rewind(&mut self, slot: usize, pos: usize) {
        if let Some(p) = self.pos.get_mut(slot) {
            *p = (*p).min(pos);
        }
    }
    fn step(&mut self, work: &[SlotWork]) -> Result<Vec<Vec<f32>>> {
        check_work(work, self.kvs.len(), self.context, self.cfg.vocab_size, |s| self.pos[s])?;
        let total: usize = work.iter().map(|w| w.tokens.len()).sum();
        if total > self.rows {
            return Err(Error::Batch(format!("a step of {total} tokens, past the {} a step runs", self.rows)));
        }
        if work.is_empty() {
            return Ok(Vec::new());
        }
        // one-token items first (their rows take a decoding row's arithmetic), then prompts
        let mut order: Vec<usize> = (0..work.len()).collect();
        order.sort_by_key(|&i| work[i].tokens.len() > 1);
        let tokens: Vec<u32> = order.iter().flat_map(|&i| work[i].tokens.iter().copied()).collect();
        let segments: Vec<Segment> =
            order.iter().map(|&i| Segment { kv: work[i].slot, pos0: self.pos[work[i].slot], rows: work[i].tokens.len() }).collect();
        let mut last = Vec::with_capacity(work.len());
        let mut end = 0;
        for s in &segments {
            end += s.rows;
            last.push(end - 1);
        }
        let b = &mut self.backend;
        layers_pass(b, &self.cfg, &self.weights, &mut self.kvs, &mut self.bufs, &tokens, &segments)?;
        logits_pass(b, &self.cfg, &self.weights, &mut self.bufs, &last)?;
        let vocab = self.cfg.vocab_size;
        let mut all = vec![0.0; last.len() * vocab];
        b.read(&self.bufs.logits, &mut all)?;
        for w in work {
            self.pos[w.slot] += w.tokens.len();
        }
        let mut out = vec![Vec::new(); work.len()];
        for (k, &i) in order.iter().enumerate() {
            out[i] = all[k * vocab..(k + 1) * vocab].to_vec();
        }
        Ok(out)
    }
    fn backend_name(&self) -> &'static str {
        self.backend.name()
    }
}
