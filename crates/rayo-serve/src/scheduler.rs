//! The scheduler: one thread owns the engine (a [`BatchForward`]) and runs it a step at a time
//! over every active sequence: one decode token for each sequence that is generating, plus
//! chunks of waiting prompts under a per-step token budget (chunked prefill: a long prompt never
//! stalls the streams already running). Requests arrive over a bounded channel (the router
//! answers 429 when it is full); tokens go back over one channel per request, and a request
//! whose channel is closed (its client went away) is cancelled and its slot freed before the
//! next step.
//!
//! Prefix reuse: each slot keeps the tokens its KV cache holds after its request ends; a new
//! request takes the free slot whose tokens share the longest prefix with its prompt, rewinds
//! it to that prefix and runs only the rest (`usage.prompt_tokens_details.cached_tokens`).

use crate::api::{Endpoint, Sampling};
use crate::chunks::{ChunkRule, Class};
use crate::sampling::{logprobs, SeqSampler};
use crate::stop::StopMatcher;
use crate::Shared;
use rayo_llm::{BatchForward, Model, SlotWork, StepOut, Utf8Stream};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// A request the router has checked and tokenized.
pub struct Job {
    pub id: String,
    pub endpoint: Endpoint,
    pub prompt: Vec<u32>,
    /// None: until the end of the context.
    pub max_tokens: Option<usize>,
    pub sampling: Sampling,
    pub stop: Vec<String>,
    pub logprobs: Option<usize>,
    /// `echo` with `logprobs`: the prompt tokens' log-probabilities come first (the top
    /// `logprobs` alternatives each).
    pub prompt_logprobs: bool,
    pub ignore_eos: bool,
    pub received: Instant,
    pub deadline: Instant,
    pub events: UnboundedSender<Event>,
}

/// What a request's channel carries, in order: deltas, then one `Done` or `Error`.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Delta(Delta),
    Done(Done),
    Error(String),
}

/// New text and the log-probabilities of the tokens that made it (when asked for).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Delta {
    pub text: String,
    pub logprobs: Vec<TokenLogprob>,
}

/// One generated token's log-probability and the most likely alternatives.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    pub token: String,
    pub bytes: Vec<u8>,
    /// None: a prompt's first token (nothing comes before it).
    pub logprob: Option<f32>,
    pub top: Vec<(String, Vec<u8>, f32)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// An end-of-generation token or a stop string.
    Stop,
    /// `max_tokens`, the context's end, or the request's time limit.
    Length,
}

impl Finish {
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub completion_tokens: usize,
    pub cached_tokens: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Done {
    pub finish: Finish,
    pub usage: Usage,
}

/// How the scheduler runs.
#[derive(Clone, Copy, Debug)]
pub struct SchedulerOptions {
    /// The most tokens one step runs (decode tokens first, then prompt chunks; a chunk may go
    /// over it rather than take a size of another class, see [`ChunkRule`]).
    pub step_tokens: usize,
    /// How prompts are cut (the session's batch is capped at the engine's context).
    pub chunks: ChunkRule,
}

impl Default for SchedulerOptions {
    fn default() -> SchedulerOptions {
        SchedulerOptions { step_tokens: 256, chunks: ChunkRule::default() }
    }
}

/// Builds the engine on the scheduler's thread (an engine need not be `Send`).
pub type EngineFactory = Box<dyn FnOnce() -> Result<Box<dyn BatchForward>, String> + Send>;

/// A request in a slot.
struct Seq {
    job: Job,
    /// Arrival order among admitted requests (prompt chunks are run first come, first served).
    order: u64,
    /// The next prompt token to run (the prompt is done when it reaches the prompt's length).
    prompt_at: usize,
    cached: usize,
    /// The last token drawn, to run in the next step.
    next: Option<u32>,
    /// The prompt and the completion so far (the repetition penalty reads it).
    history: Vec<u32>,
    generated: usize,
    /// The most tokens this request may generate (its max_tokens, or the context's end).
    limit: usize,
    sampler: SeqSampler,
    utf8: Utf8Stream,
    stop: StopMatcher,
    /// Log-probabilities of tokens whose text is held back (a partial character or stop string).
    held_logprobs: Vec<TokenLogprob>,
    first_token: Option<Instant>,
    last_token: Instant,
}

/// The scheduler's state: the engine and its slots.
struct Scheduler {
    engine: Box<dyn BatchForward>,
    model: Arc<Model>,
    shared: Arc<Shared>,
    opts: SchedulerOptions,
    /// Each slot's request, if one runs there.
    seqs: Vec<Option<Seq>>,
    /// The tokens each slot's KV cache holds (kept after a request ends, for prefix reuse).
    cache: Vec<Vec<u32>>,
    /// The class of the chunk each of those tokens ran in.
    classes: Vec<Vec<Class>>,
    admitted: u64,
}

/// Runs the scheduler until `shared` says stop: builds the engine with `factory` (the server
/// reports 503 until then), then serves `jobs`.
pub fn run(factory: EngineFactory, model: Arc<Model>, jobs: Receiver<Job>, shared: Arc<Shared>, opts: SchedulerOptions) {
    let engine = match factory() {
        Ok(e) => e,
        Err(e) => {
            shared.fail(format!("the engine could not be built: {e}"));
            return;
        }
    };
    let slots = engine.slots();
    let opts = SchedulerOptions { chunks: ChunkRule { batch: opts.chunks.batch.min(engine.context()).max(1), ..opts.chunks }, ..opts };
    shared.ready(engine.context(), slots);
    log::info!("engine ready: {} slots of {} positions on {}", slots, engine.context(), engine.backend_name());
    let mut s = Scheduler {
        engine,
        model,
        shared,
        opts,
        seqs: (0..slots).map(|_| None).collect(),
        cache: vec![Vec::new(); slots],
        classes: vec![Vec::new(); slots],
        admitted: 0,
    };
    loop {
        if s.shared.stopping() {
            s.abort_all("the server is shutting down");
            // requests still queued are answered too
            while let Ok(job) = jobs.try_recv() {
                s.shared.metrics.queued.fetch_sub(1, Ordering::Relaxed);
                let _ = job.events.send(Event::Error("the server is shutting down".into()));
            }
            return;
        }
        if !s.admit(&jobs) {
            s.abort_all("the server is shutting down");
            return;
        }
        s.reap();
        s.gauges();
        if s.seqs.iter().any(Option::is_some) {
            s.step();
        }
    }
}

impl Scheduler {
    fn active(&self) -> usize {
        self.seqs.iter().filter(|s| s.is_some()).count()
    }

    /// Takes waiting requests into free slots. Waits a little for one when nothing runs.
    /// False when the router has gone (the channel is closed and empty).
    fn admit(&mut self, jobs: &Receiver<Job>) -> bool {
        loop {
            let free: Vec<usize> = (0..self.seqs.len()).filter(|&i| self.seqs[i].is_none()).collect();
            if free.is_empty() {
                return true;
            }
            let job = if self.active() == 0 {
                match jobs.recv_timeout(Duration::from_millis(50)) {
                    Ok(j) => j,
                    Err(RecvTimeoutError::Timeout) => return true,
                    Err(RecvTimeoutError::Disconnected) => return false,
                }
            } else {
                match jobs.try_recv() {
                    Ok(j) => j,
                    Err(TryRecvError::Empty) => return true,
                    Err(TryRecvError::Disconnected) => return false,
                }
            };
            let m = &self.shared.metrics;
            m.queued.fetch_sub(1, Ordering::Relaxed);
            if job.events.is_closed() {
                m.cancelled.fetch_add(1, Ordering::Relaxed);
                log::info!("{} {} cancelled while queued ({} prompt tokens)", job.id, job.endpoint.path(), job.prompt.len());
                continue;
            }
            m.queue_time(job.received.elapsed().as_secs_f64());
            self.start(job, &free);
        }
    }

    /// Puts `job` in the free slot with the longest usable prefix (the lowest index among
    /// equals): tokens equal to the prompt's that ran in the chunk class this prompt wants
    /// ([`ChunkRule`]: so its logits equal `rayo generate`'s).
    fn start(&mut self, job: Job, free: &[usize]) {
        if job.prompt_logprobs || job.max_tokens == Some(0) {
            // scored in the last free slot, whose cache is then forgotten (its passes are not
            // the chunk classes a later prompt could reuse)
            let slot = free[free.len() - 1];
            if job.prompt_logprobs && !self.score_prompt(&job, slot) {
                return;
            }
            if job.max_tokens == Some(0) {
                let usage = Usage { prompt_tokens: job.prompt.len(), completion_tokens: 0, cached_tokens: 0 };
                self.shared.metrics.prompt_tokens.fetch_add(job.prompt.len() as u64, Ordering::Relaxed);
                let _ = job.events.send(Event::Done(Done { finish: Finish::Length, usage }));
                return;
            }
        }
        let want = self.opts.chunks.classes(job.prompt.len());
        let usable = |s: usize| {
            let (cache, classes) = (&self.cache[s], &self.classes[s]);
            cache.iter().zip(classes).zip(job.prompt.iter().zip(&want)).take_while(|((t, c), (u, w))| t == u && c == w).count()
        };
        let (slot, common) = free.iter().map(|&s| (s, usable(s))).fold((free[0], 0), |best, c| if c.1 > best.1 { c } else { best });
        // At least the last token runs (its logits give the first token), in a legal chunk.
        let cached = self.opts.chunks.start(common, job.prompt.len());
        self.engine.rewind(slot, cached);
        self.cache[slot].truncate(cached);
        self.classes[slot].truncate(cached);
        let context = self.engine.context();
        // The k-th generated token runs at position prompt + k - 1: at most context - prompt + 1.
        let room = (context + 1).saturating_sub(job.prompt.len());
        let limit = job.max_tokens.map_or(room, |m| m.min(room));
        let banned = if job.ignore_eos { self.model.tokenizer().eog_ids() } else { Vec::new() };
        let sampler = match SeqSampler::new(&job.sampling, banned) {
            Ok(s) => s,
            Err(e) => {
                let _ = job.events.send(Event::Error(format!("sampling: {e}")));
                return;
            }
        };
        let m = &self.shared.metrics;
        m.prompt_tokens.fetch_add(job.prompt.len() as u64, Ordering::Relaxed);
        m.cached_tokens.fetch_add(cached as u64, Ordering::Relaxed);
        self.admitted += 1;
        let stop = StopMatcher::new(job.stop.clone());
        let history = job.prompt.clone();
        self.seqs[slot] = Some(Seq {
            order: self.admitted,
            prompt_at: cached,
            cached,
            next: None,
            history,
            generated: 0,
            limit,
            sampler,
            utf8: Utf8Stream::default(),
            stop,
            held_logprobs: Vec::new(),
            first_token: None,
            last_token: Instant::now(),
            job,
        });
    }

    /// Sends the log-probability of each of `job`'s prompt tokens after the ones before it (the
    /// first has none), each with its top `job.logprobs` alternatives, as one delta without
    /// text; the prompt runs in `slot`, which is emptied again. False (and the error sent) when
    /// the engine fails.
    fn score_prompt(&mut self, job: &Job, slot: usize) -> bool {
        self.engine.rewind(slot, 0);
        self.cache[slot].clear();
        self.classes[slot].clear();
        let rows = self.engine.prompt_logits(slot, &job.prompt);
        self.engine.rewind(slot, 0);
        let rows = match rows {
            Ok(r) => r,
            Err(e) => {
                // an engine fault, as a failed step is: sticky
                log::error!("{}: scoring the prompt failed: {e}", job.id);
                self.shared.fault(format!("engine step failed: {e}"));
                let _ = job.events.send(Event::Error(format!("request {}: scoring the prompt failed: {e}", job.id)));
                return false;
            }
        };
        let tok = self.model.tokenizer();
        let piece = |id: u32| {
            let b = tok.token_bytes(id).unwrap_or_default().to_vec();
            (String::from_utf8_lossy(&b).into_owned(), b)
        };
        let top = job.logprobs.unwrap_or(0);
        let lps = job
            .prompt
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                let (token, bytes) = piece(id);
                let (logprob, alts) = match i {
                    0 => (None, Vec::new()),
                    _ => {
                        let (lp, alts) = logprobs(&rows[i - 1], id, top);
                        (Some(lp), alts)
                    }
                };
                let top = alts.into_iter().map(|(a, l)| {
                    let (s, b) = piece(a);
                    (s, b, l)
                });
                TokenLogprob { token, bytes, logprob, top: top.collect() }
            })
            .collect();
        let _ = job.events.send(Event::Delta(Delta { text: String::new(), logprobs: lps }));
        true
    }

    /// Ends requests whose client has gone (freeing the slot) or whose time is up.
    fn reap(&mut self) {
        let now = Instant::now();
        for slot in 0..self.seqs.len() {
            let Some(seq) = &self.seqs[slot] else { continue };
            if seq.job.events.is_closed() {
                let seq = self.release(slot).expect("checked above");
                self.shared.metrics.cancelled.fetch_add(1, Ordering::Relaxed);
                // What ran is in the cache; a prompt cut off mid-way is kept as far as it ran.
                log::info!(
                    "{} {} cancelled: the client went away after {} of {} tokens",
                    seq.job.id,
                    seq.job.endpoint.path(),
                    seq.generated,
                    seq.limit
                );
            } else if now >= seq.job.deadline {
                log::warn!("{} ran past its time limit: ended with finish_reason length", seq.job.id);
                self.finish(slot, crate::scheduler::Finish::Length);
            }
        }
    }

    /// Takes the request out of `slot` (the gauges count it gone before its client hears).
    fn release(&mut self, slot: usize) -> Option<Seq> {
        let seq = self.seqs[slot].take();
        self.gauges();
        seq
    }

    fn gauges(&self) {
        let m = &self.shared.metrics;
        m.active_slots.store(self.active(), Ordering::Relaxed);
        m.kv_used.store((0..self.seqs.len()).map(|s| self.engine.position(s)).sum(), Ordering::Relaxed);
    }

    /// One engine step over every active sequence.
    fn step(&mut self) {
        // decode tokens first, then prompt chunks first come first served, within the budget
        let mut items: Vec<(usize, Vec<u32>)> = Vec::new();
        for (slot, seq) in self.seqs.iter().enumerate() {
            if let Some(Seq { next: Some(t), .. }) = seq {
                items.push((slot, vec![*t]));
            }
        }
        let mut budget = self.opts.step_tokens.saturating_sub(items.len()).max(1);
        let mut waiting: Vec<(u64, usize)> =
            self.seqs.iter().enumerate().filter_map(|(i, s)| s.as_ref().filter(|s| s.prompt_at < s.job.prompt.len()).map(|s| (s.order, i))).collect();
        waiting.sort_unstable();
        for (_, slot) in waiting {
            if budget == 0 {
                break;
            }
            let seq = self.seqs[slot].as_ref().expect("waiting slots hold a request");
            let n = self.opts.chunks.chunk(seq.prompt_at, seq.job.prompt.len(), budget);
            budget = budget.saturating_sub(n);
            items.push((slot, seq.job.prompt[seq.prompt_at..seq.prompt_at + n].to_vec()));
        }
        let work: Vec<SlotWork> = items.iter().map(|(slot, tokens)| SlotWork { slot: *slot, tokens }).collect();
        // a request whose next token its best logits decide (greedy, top-k) gets only those
        let vocab = self.engine.vocab();
        let best: Vec<Option<usize>> = items
            .iter()
            .map(|(slot, tokens)| {
                let seq = self.seqs[*slot].as_ref().expect("a slot in the step holds a request");
                let last = seq.next.is_some() || seq.prompt_at + tokens.len() >= seq.job.prompt.len();
                match (last, seq.job.logprobs) {
                    // a prompt chunk before the last: its logits go unused
                    (false, _) => Some(1),
                    (true, Some(_)) => None,
                    (true, None) => seq.sampler.best_needed(&seq.history, vocab),
                }
            })
            .collect();
        let out = self.engine.step_best(&work, &best);
        self.shared.metrics.steps.fetch_add(1, Ordering::Relaxed);
        let out = match out {
            Ok(o) => o,
            Err(e) => {
                // Nothing ran (the checks come first) or the backend failed mid-way: either way
                // these slots' caches are not trusted again.
                log::error!("engine step failed: {e}");
                // sticky (a CUDA fault stays): /health and new requests answer 503 from now on
                self.shared.fault(format!("engine step failed: {e}"));
                for (slot, _) in &items {
                    self.engine.rewind(*slot, 0);
                    self.cache[*slot].clear();
                    self.classes[*slot].clear();
                    if let Some(seq) = self.release(*slot) {
                        let _ = seq.job.events.send(Event::Error(format!("the engine failed: {e}")));
                    }
                }
                return;
            }
        };
        for ((slot, tokens), logits) in items.into_iter().zip(out) {
            self.cache[slot].extend_from_slice(&tokens);
            let class = self.opts.chunks.class(tokens.len());
            self.classes[slot].extend(std::iter::repeat_n(class, tokens.len()));
            let seq = self.seqs[slot].as_mut().expect("a slot in the step holds a request");
            if seq.next.take().is_none() {
                seq.prompt_at += tokens.len();
                if seq.prompt_at < seq.job.prompt.len() {
                    continue;
                }
            }
            self.on_logits(slot, logits);
        }
    }

    /// Draws the next token of the request in `slot` and sends its text.
    fn on_logits(&mut self, slot: usize, out: StepOut) {
        let tok = self.model.tokenizer();
        let position = self.engine.position(slot);
        let context = self.engine.context();
        let seq = self.seqs[slot].as_mut().expect("on_logits for a running slot");
        let drawn = match &out {
            StepOut::Logits(logits) => seq.sampler.next(logits, &seq.history),
            StepOut::Best(Ok(best)) => seq.sampler.next_from_best(best, &seq.history),
            StepOut::Best(Err(e)) => Err(e.to_string()),
        };
        let id = match drawn {
            Ok(id) => id,
            Err(e) => {
                let seq = self.release(slot).expect("checked");
                log::error!("{}: sampling failed: {e}", seq.job.id);
                let _ = seq.job.events.send(Event::Error(format!("request {}: sampling failed: {e}", seq.job.id)));
                return;
            }
        };
        let now = Instant::now();
        match seq.first_token {
            None => {
                seq.first_token = Some(now);
                self.shared.metrics.time_to_first_token((now - seq.job.received).as_secs_f64());
            }
            Some(_) => self.shared.metrics.time_per_output_token((now - seq.last_token).as_secs_f64()),
        }
        seq.last_token = now;
        if !seq.job.ignore_eos && tok.is_eog(id) {
            self.finish(slot, Finish::Stop);
            return;
        }
        seq.generated += 1;
        seq.history.push(id);
        seq.sampler.accept(id);
        self.shared.metrics.completion_tokens.fetch_add(1, Ordering::Relaxed);
        let bytes = tok.token_bytes(id).unwrap_or_default();
        if let (Some(top), StepOut::Logits(logits)) = (seq.job.logprobs, &out) {
            let (lp, alts) = logprobs(logits, id, top);
            let piece = |id: u32| {
                let b = tok.token_bytes(id).unwrap_or_default().to_vec();
                (String::from_utf8_lossy(&b).into_owned(), b)
            };
            let top = alts.into_iter().map(|(i, l)| {
                let (s, b) = piece(i);
                (s, b, l)
            });
            seq.held_logprobs.push(TokenLogprob {
                token: String::from_utf8_lossy(bytes).into_owned(),
                bytes: bytes.to_vec(),
                logprob: Some(lp),
                top: top.collect(),
            });
        }
        let text = seq.utf8.push(bytes);
        let text = seq.stop.push(&text);
        if !text.is_empty() {
            let delta = Delta { text, logprobs: std::mem::take(&mut seq.held_logprobs) };
            let _ = seq.job.events.send(Event::Delta(delta));
        }
        if seq.stop.stopped() {
            self.finish(slot, Finish::Stop);
        } else if seq.generated >= seq.limit || position >= context {
            self.finish(slot, Finish::Length);
        } else {
            seq.next = Some(id);
        }
    }

    /// Ends the request in `slot`: the held-back text, then `Done`; the slot's cache stays.
    fn finish(&mut self, slot: usize, finish: Finish) {
        let Some(mut seq) = self.release(slot) else { return };
        if !seq.stop.stopped() {
            let rest = seq.utf8.finish();
            let mut text = seq.stop.push(&rest);
            if !seq.stop.stopped() {
                text += &seq.stop.finish();
            }
            if !text.is_empty() {
                let _ = seq.job.events.send(Event::Delta(Delta { text, logprobs: std::mem::take(&mut seq.held_logprobs) }));
            }
        }
        let finish = if seq.stop.stopped() { Finish::Stop } else { finish };
        let usage = Usage { prompt_tokens: seq.job.prompt.len(), completion_tokens: seq.generated, cached_tokens: seq.cached };
        let _ = seq.job.events.send(Event::Done(Done { finish, usage }));
        let total = seq.job.received.elapsed().as_secs_f64();
        let ttft = seq.first_token.map_or(total, |t| (t - seq.job.received).as_secs_f64());
        let decode = seq.first_token.map_or(0.0, |t| t.elapsed().as_secs_f64());
        log::info!(
            "{} {} 200 prompt {} (cached {}) completion {} finish {}; first token {:.0} ms, {:.1} tokens/s after it, total {:.0} ms",
            seq.job.id,
            seq.job.endpoint.path(),
            usage.prompt_tokens,
            usage.cached_tokens,
            usage.completion_tokens,
            finish.as_str(),
            ttft * 1e3,
            usage.completion_tokens.saturating_sub(1) as f64 / decode.max(1e-9),
            total * 1e3
        );
    }

    /// Ends every running request with an error (shutdown).
    fn abort_all(&mut self, why: &str) {
        for slot in 0..self.seqs.len() {
            if let Some(seq) = self.release(slot) {
                log::warn!("{} {} ended: {why}", seq.job.id, seq.job.endpoint.path());
                let _ = seq.job.events.send(Event::Error(why.to_string()));
            }
        }
        self.gauges();
    }
}
