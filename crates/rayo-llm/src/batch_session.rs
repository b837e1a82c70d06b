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
use crate::batch::{check_work, BatchForward, SlotWork, StepOut};
use crate::config::Config;
use crate::model::Model;
use crate::pass::{layers_pass, logits_pass, Alone, Buffers, Segment, Weights};
use crate::session::checked_config;
use crate::{Error, Result};

/// How a batched session is sized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    /// The most rows whose logits one pass computes (the buffers' room).
    logit_rows: usize,
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
        crate::shard::check_rank(&cfg, backend.shard(), backend.name())?;
        let weights = Weights::upload(model, &mut backend)?;
        let kvs = backend.kv_caches(&cfg, context, opts.kv_type, opts.slots)?;
        let logit_rows = opts.slots.min(opts.rows);
        let bufs = Buffers::new(&mut backend, &cfg, opts.rows, logit_rows, opts.slots > 1)?;
        Ok(BatchSession { backend, cfg, weights, kvs, pos: vec![0; opts.slots], bufs, context, rows: opts.rows, logit_rows })
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
        let out = self.step_best(work, &vec![None; work.len()])?;
        Ok(out.into_iter().map(|o| if let StepOut::Logits(l) = o { l } else { unreachable!("no item asked for its best") }).collect())
    }
    fn step_best(&mut self, work: &[SlotWork], best: &[Option<usize>]) -> Result<Vec<StepOut>> {
        check_work(work, self.kvs.len(), self.context, self.cfg.vocab_size, |s| self.pos[s])?;
        let total: usize = work.iter().map(|w| w.tokens.len()).sum();
        if total > self.rows {
            return Err(Error::Batch(format!("a step of {total} tokens, past the {} a step runs", self.rows)));
        }
        if best.len() != work.len() {
            return Err(Error::Batch(format!("{} wishes for {} items", best.len(), work.len())));
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
        let vocab = self.cfg.vocab_size;
        let b = &mut self.backend;
        let inputs: Vec<_> = segments.iter().map(|s| (&self.kvs[s.kv], s.pos0, s.rows)).collect();
        b.batch_inputs(&tokens, &inputs)?;
        let (cfg, weights, kvs, bufs) = (&self.cfg, &self.weights, &mut self.kvs, &mut self.bufs);
        let mut pass = |b: &mut B| {
            layers_pass(b, cfg, weights, kvs, bufs, &tokens, &segments)?;
            logits_pass(b, cfg, weights, bufs, &last, Alone::Each)
        };
        if tokens.len() == work.len() {
            // every item one token: the same ops for every such step of this many rows
            b.one_token_rows_step(tokens.len(), &mut pass)?;
        } else {
            pass(b)?;
        }
        let mut out: Vec<Option<StepOut>> = (0..work.len()).map(|_| None).collect();
        let on_device = |k: &usize| best.iter().all(Option::is_some) && *k <= crate::batch::MAX_BEST && *k < vocab;
        match best.iter().map(|b| b.unwrap_or(0)).max().filter(on_device) {
            // every item wants only its best (a few): found where the logits are
            Some(k) => {
                for (j, r) in b.top_k_rows(&self.bufs.logits, vocab, last.len(), k)?.into_iter().enumerate() {
                    let i = order[j];
                    let want = best[i].unwrap_or(k);
                    out[i] = Some(StepOut::Best(r.map(|mut v| {
                        v.truncate(want);
                        v
                    })));
                }
            }
            None => {
                let mut all = vec![0.0; last.len() * vocab];
                b.read(&self.bufs.logits, &mut all)?;
                for (j, &i) in order.iter().enumerate() {
                    let row = &all[j * vocab..(j + 1) * vocab];
                    out[i] = Some(match best[i] {
                        Some(k) => StepOut::Best(crate::sample::top_k_of(row, k)),
                        None => StepOut::Logits(row.to_vec()),
                    });
                }
            }
        }
        for w in work {
            self.pos[w.slot] += w.tokens.len();
        }
        Ok(out.into_iter().map(|o| o.expect("every item filled")).collect())
    }
    /// In passes of as many rows as the buffers hold logits for (the slots), the output head
    /// over each pass's rows as one product.
    fn prompt_logits(&mut self, slot: usize, tokens: &[u32]) -> Result<Vec<Vec<f32>>> {
        check_work(&[SlotWork { slot, tokens }], self.kvs.len(), self.context, self.cfg.vocab_size, |s| self.pos[s])?;
        let vocab = self.cfg.vocab_size;
        let mut out = Vec::with_capacity(tokens.len());
        for chunk in tokens.chunks(self.logit_rows.max(1)) {
            let pos0 = self.pos[slot];
            let segments = [Segment { kv: slot, pos0, rows: chunk.len() }];
            let b = &mut self.backend;
            b.batch_inputs(chunk, &[(&self.kvs[slot], pos0, chunk.len())])?;
            layers_pass(b, &self.cfg, &self.weights, &mut self.kvs, &mut self.bufs, chunk, &segments)?;
            let rows: Vec<usize> = (0..chunk.len()).collect();
            logits_pass(b, &self.cfg, &self.weights, &mut self.bufs, &rows, Alone::No)?;
            let mut all = vec![0.0; chunk.len() * vocab];
            b.read(&self.bufs.logits, &mut all)?;
            out.extend(all.chunks_exact(vocab).map(<[f32]>::to_vec));
            self.pos[slot] += chunk.len();
        }
        Ok(out)
    }
    fn backend_name(&self) -> &'static str {
        self.backend.name()
    }
}
