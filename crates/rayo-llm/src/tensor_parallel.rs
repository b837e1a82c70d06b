//! A model run by a world of tensor-parallel ranks in this process ([`crate::shard`]): a thread
//! per rank, each with its part of the model, its backend and its session. [`TensorParallel`]
//! is a [`Forward`] (each rank a [`Session`]) and [`TensorParallelBatch`] a [`BatchForward`]
//! (each rank a [`BatchSession`]: what `rayo serve` runs). Every call goes to every rank, the
//! ranks meet in their collectives ([`crate::collective`]), and rank 0's answer is the world's
//! (every rank holds the same gathered logits).
//!
//! Input errors (an empty call, a context that is full, a token past the vocabulary, a slot
//! out of range) are found here before any rank runs. Any other error of a rank ends that
//! rank, which breaks the group: the others' collectives fail, and every later call is that
//! error.

use crate::backend::Backend;
use crate::batch::{check_work, BatchForward, SlotWork, StepOut};
use crate::batch_session::{BatchOptions, BatchSession};
use crate::collective::{Collective, LocalGroup};
use crate::model::Model;
use crate::session::{Forward, Logits, Session, SessionOptions};
use crate::shard;
use crate::{Error, Result};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

/// A call, as every rank runs it.
enum Call {
    Forward(Vec<u32>, Logits),
    Greedy(Vec<u32>),
    TopK(Vec<u32>, usize),
    Rewind(usize),
    /// A batch step: (slot, tokens) items, and each item's wish for its best logits.
    Step(Vec<(usize, Vec<u32>)>, Vec<Option<usize>>),
    RewindSlot(usize, usize),
}

/// A rank's answer (rank 0's carries the values; the others' only say they are done).
enum Answer {
    Logits(Vec<f32>),
    Token(u32),
    Best(Vec<(u32, f32)>),
    Outs(Vec<StepOut>),
    Done,
}

/// What a rank runs: a session of one sequence or of many.
enum Engine<B: Backend> {
    One(Session<B>),
    Many(BatchSession<B>),
}

/// Rank 0's engine's shape, for the checks done before any rank runs.
#[derive(Clone, Copy)]
struct Shape {
    context: usize,
    backend: &'static str,
    slots: usize,
    rows: usize,
}

struct Rank {
    calls: Sender<Call>,
    answers: Receiver<Result<Answer>>,
    thread: Option<JoinHandle<()>>,
}

/// A world of rank threads, and the first error that ended one.
struct World {
    ranks: Vec<Rank>,
    shape: Shape,
    failed: Option<Error>,
}

impl World {
    /// `model` split over `world` ranks ([`shard::split`]), each on its own thread with the
    /// backend `backend(part, group)` makes for its part and its side of the group, and the
    /// engine `engine` makes over it.
    fn start<B, F, E>(model: &Model, world: usize, backend: F, engine: E) -> Result<World>
    where
        B: Backend + 'static,
        F: Fn(&Model, Box<dyn Collective>) -> Result<B> + Send + Sync + 'static,
        E: Fn(&Model, B) -> Result<Engine<B>> + Send + Sync + 'static,
    {
        shard::check(model.config(), world)?;
        let make = std::sync::Arc::new((backend, engine));
        let mut ranks = Vec::with_capacity(world);
        let mut started = Vec::with_capacity(world);
        for group in LocalGroup::new(world) {
            let part = shard::split(model, group.shard())?;
            let (calls, inbox) = channel::<Call>();
            let (outbox, answers) = channel::<Result<Answer>>();
            let (ready, started_rx) = channel::<Result<Shape>>();
            let make = std::sync::Arc::clone(&make);
            let rank = group.shard().rank;
            let thread = std::thread::Builder::new()
                .name(format!("rayo-rank-{rank}"))
                .spawn(move || {
                    let (backend, engine) = &*make;
                    let mut engine = match backend(&part, Box::new(group)).and_then(|b| engine(&part, b)) {
                        Ok(e) => {
                            let _ = ready.send(Ok(e.shape()));
                            e
                        }
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return;
                        }
                    };
                    while let Ok(call) = inbox.recv() {
                        let answer = engine.run(call, rank == 0);
                        let failed = answer.is_err();
                        // a failed rank ends here: dropping its session breaks the group
                        if outbox.send(answer).is_err() || failed {
                            return;
                        }
                    }
                })
                .map_err(|e| Error::backend("cpu", format!("cannot start tensor-parallel rank {rank}: {e}")))?;
            ranks.push(Rank { calls, answers, thread: Some(thread) });
            started.push(started_rx);
        }
        let mut shape = None;
        for (r, s) in started.iter().enumerate() {
            let got = s.recv().map_err(|_| Error::backend("cpu", format!("tensor-parallel rank {r} ended while starting")))??;
            shape.get_or_insert(got);
        }
        let shape = shape.expect("a world has at least one rank");
        Ok(World { ranks, shape, failed: None })
    }

    /// `call` on every rank; rank 0's answer.
    fn all(&mut self, call: impl Fn() -> Call) -> Result<Answer> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let gone = |r: usize| Error::backend("cpu", format!("tensor-parallel rank {r} has stopped"));
        for (r, rank) in self.ranks.iter().enumerate() {
            rank.calls.send(call()).map_err(|_| gone(r))?;
        }
        let mut first = None;
        let mut error = None;
        for (r, rank) in self.ranks.iter().enumerate() {
            match rank.answers.recv() {
                Ok(Ok(a)) if r == 0 => first = Some(a),
                Ok(Ok(_)) => {}
                // the rank that failed first names the cause; the others' errors follow from it
                Ok(Err(e)) => error = error.or(Some((r, e))),
                Err(_) => error = error.or(Some((r, gone(r)))),
            }
        }
        match (error, first) {
            (Some((_, e)), _) => {
                self.failed = Some(e.clone());
                Err(e)
            }
            (None, Some(a)) => Ok(a),
            (None, None) => Err(gone(0)),
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for rank in &mut self.ranks {
            // closing its inbox ends the rank's loop
            let (closed, _) = channel();
            rank.calls = closed;
        }
        for rank in &mut self.ranks {
            if let Some(t) = rank.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// `world` ranks of one model in this process, one sequence at a time.
pub struct TensorParallel {
    world: World,
    vocab: usize,
    pos: usize,
}

impl TensorParallel {
    /// `model` split over `world` ranks ([`shard::split`]), each on its own thread with the
    /// backend `backend(part, group)` makes for its part and its side of the group, and a
    /// session sized by `opts`. Errors: a model the world cannot split, a rank whose backend
    /// or session cannot be made (the first such rank's error).
    pub fn start<B, F>(model: &Model, world: usize, opts: SessionOptions, backend: F) -> Result<TensorParallel>
    where
        B: Backend + 'static,
        F: Fn(&Model, Box<dyn Collective>) -> Result<B> + Send + Sync + 'static,
    {
        let world = World::start(model, world, backend, move |part, b| Ok(Engine::One(Session::new(part, b, opts)?)))?;
        Ok(TensorParallel { world, vocab: model.config().vocab_size, pos: 0 })
    }

    /// Ranks in the world.
    pub fn world(&self) -> usize {
        self.world.ranks.len()
    }

    /// The checks of [`Session::forward`], before any rank runs.
    fn check(&self, tokens: &[u32]) -> Result<()> {
        let context = self.world.shape.context;
        if tokens.is_empty() {
            return Err(rayo::Error::EmptyInput { op: "TensorParallel::forward" }.into());
        }
        if tokens.len() > context - self.pos {
            return Err(Error::ContextFull { tokens: tokens.len(), pos: self.pos, context });
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(Error::TokenPastVocab { id: t, vocab: self.vocab });
        }
        Ok(())
    }

    /// `call` after the input checks, then the position moved past `tokens`.
    fn step(&mut self, tokens: &[u32], call: impl Fn() -> Call) -> Result<Answer> {
        self.check(tokens)?;
        let a = self.world.all(call)?;
        self.pos += tokens.len();
        Ok(a)
    }
}

impl<B: Backend> Engine<B> {
    fn shape(&self) -> Shape {
        match self {
            Engine::One(s) => Shape { context: s.context(), backend: s.backend().name(), slots: 1, rows: 0 },
            Engine::Many(s) => Shape { context: s.context(), backend: s.backend_name(), slots: s.slots(), rows: s.max_rows() },
        }
    }

    /// `call` on this rank's engine (`values`: rank 0, whose answer carries them).
    fn run(&mut self, call: Call, values: bool) -> Result<Answer> {
        let a = match (self, call) {
            (Engine::One(s), call) if !matches!(call, Call::Step(..) | Call::RewindSlot(..)) => run(s, call)?,
            (Engine::Many(s), Call::Step(items, best)) => {
                let work: Vec<SlotWork> = items.iter().map(|(slot, tokens)| SlotWork { slot: *slot, tokens }).collect();
                Answer::Outs(s.step_best(&work, &best)?)
            }
            (Engine::Many(s), Call::RewindSlot(slot, pos)) => {
                s.rewind(slot, pos);
                Answer::Done
            }
            _ => return Err(unexpected()),
        };
        Ok(if values { a } else { Answer::Done })
    }
}

/// `call` on one rank's session.
fn run<B: Backend>(s: &mut Session<B>, call: Call) -> Result<Answer> {
    let a = match call {
        Call::Forward(t, which) => Answer::Logits(s.forward(&t, which)?),
        Call::Greedy(t) => Answer::Token(s.forward_greedy(&t)?),
        Call::TopK(t, k) => Answer::Best(s.forward_top_k(&t, k)?),
        Call::Rewind(pos) => {
            s.rewind(pos);
            Answer::Done
        }
        Call::Step(..) | Call::RewindSlot(..) => return Err(unexpected()),
    };
    Ok(a)
}

fn unexpected() -> Error {
    Error::backend("cpu", "a tensor-parallel rank was given a call of the other kind of session")
}

impl Forward for TensorParallel {
    fn forward(&mut self, tokens: &[u32], which: Logits) -> Result<Vec<f32>> {
        match self.step(tokens, || Call::Forward(tokens.to_vec(), which))? {
            Answer::Logits(v) => Ok(v),
            _ => Err(unexpected()),
        }
    }
    fn forward_greedy(&mut self, tokens: &[u32]) -> Result<u32> {
        match self.step(tokens, || Call::Greedy(tokens.to_vec()))? {
            Answer::Token(t) => Ok(t),
            _ => Err(unexpected()),
        }
    }
    fn forward_top_k(&mut self, tokens: &[u32], k: usize) -> Result<Vec<(u32, f32)>> {
        match self.step(tokens, || Call::TopK(tokens.to_vec(), k))? {
            Answer::Best(b) => Ok(b),
            _ => Err(unexpected()),
        }
    }
    fn vocab(&self) -> usize {
        self.vocab
    }
    fn rewind(&mut self, pos: usize) {
        // a failed world stays failed (its error is every later call's)
        if self.world.all(|| Call::Rewind(pos)).is_ok() {
            self.pos = self.pos.min(pos);
        }
    }
    fn position(&self) -> usize {
        self.pos
    }
    fn context(&self) -> usize {
        self.world.shape.context
    }
    fn backend_name(&self) -> &'static str {
        self.world.shape.backend
    }
    fn step_ops(&self) -> usize {
        // the ranks' recordings are theirs, out of reach of a query through `&self`
        0
    }
}

/// `world` ranks of one model in this process, many sequences (slots) a step at a time.
pub struct TensorParallelBatch {
    world: World,
    vocab: usize,
    pos: Vec<usize>,
}

impl TensorParallelBatch {
    /// [`TensorParallel::start`] with a [`BatchSession`] sized by `opts` on every rank.
    pub fn start<B, F>(model: &Model, world: usize, opts: BatchOptions, backend: F) -> Result<TensorParallelBatch>
    where
        B: Backend + 'static,
        F: Fn(&Model, Box<dyn Collective>) -> Result<B> + Send + Sync + 'static,
    {
        let world = World::start(model, world, backend, move |part, b| Ok(Engine::Many(BatchSession::new(part, b, opts)?)))?;
        let slots = world.shape.slots;
        Ok(TensorParallelBatch { world, vocab: model.config().vocab_size, pos: vec![0; slots] })
    }
}

impl BatchForward for TensorParallelBatch {
    fn slots(&self) -> usize {
        self.pos.len()
    }
    fn context(&self) -> usize {
        self.world.shape.context
    }
    fn vocab(&self) -> usize {
        self.vocab
    }
    fn position(&self, slot: usize) -> usize {
        self.pos.get(slot).copied().unwrap_or(0)
    }
    fn rewind(&mut self, slot: usize, pos: usize) {
        if slot < self.pos.len() && self.world.all(|| Call::RewindSlot(slot, pos)).is_ok() {
            self.pos[slot] = self.pos[slot].min(pos);
        }
    }
    fn step(&mut self, work: &[SlotWork]) -> Result<Vec<Vec<f32>>> {
        let out = self.step_best(work, &vec![None; work.len()])?;
        Ok(out.into_iter().map(|o| if let StepOut::Logits(l) = o { l } else { unreachable!("no item asked for its best") }).collect())
    }
    fn step_best(&mut self, work: &[SlotWork], best: &[Option<usize>]) -> Result<Vec<StepOut>> {
        // BatchSession's checks, before any rank runs
        check_work(work, self.pos.len(), self.world.shape.context, self.vocab, |s| self.pos[s])?;
        let total: usize = work.iter().map(|w| w.tokens.len()).sum();
        if total > self.world.shape.rows {
            return Err(Error::Batch(format!("a step of {total} tokens, past the {} a step runs", self.world.shape.rows)));
        }
        if best.len() != work.len() {
            return Err(Error::Batch(format!("{} wishes for {} items", best.len(), work.len())));
        }
        let items: Vec<(usize, Vec<u32>)> = work.iter().map(|w| (w.slot, w.tokens.to_vec())).collect();
        let out = match self.world.all(|| Call::Step(items.clone(), best.to_vec()))? {
            Answer::Outs(o) => o,
            _ => return Err(unexpected()),
        };
        for w in work {
            self.pos[w.slot] += w.tokens.len();
        }
        Ok(out)
    }
    fn backend_name(&self) -> &'static str {
        self.world.shape.backend
    }
}
