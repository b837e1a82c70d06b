//! A model run by a world of tensor-parallel ranks ([`crate::shard`]), each with its part of the
//! model, its backend and its session: threads of this process ([`TensorParallel::start`]), or
//! processes that meet at a rendezvous ([`TensorParallel::host`] in rank 0's, [`serve_rank`] in
//! every other rank's; [`crate::rendezvous`]). [`TensorParallel`]
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
use crate::rendezvous::{Link, Rendezvous, Tag, TcpGroup};
use crate::session::{Forward, Logits, Session, SessionOptions};
use crate::shard;
use crate::{Error, Result};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use wire::Spec;

mod wire;

/// A call, as every rank runs it.
#[derive(Debug, PartialEq)]
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

/// A rank as rank 0's process reaches it.
enum Rank {
    /// A thread of this process.
    Thread { calls: Sender<Call>, answers: Receiver<Result<Answer>>, thread: Option<JoinHandle<()>> },
    /// Another process, through its rendezvous link ([`crate::rendezvous`]).
    Process(Link),
}

/// A world of ranks, and the first error that ended one.
struct World {
    ranks: Vec<Rank>,
    shape: Shape,
    failed: Option<Error>,
}

/// What makes a rank's backend: its part of the model and its side of the group.
type MakeBackend<B> = dyn Fn(&Model, Box<dyn Collective>) -> Result<B> + Send + Sync;

/// A thread running rank `group.shard()` of `model` with the backend `backend` makes and the
/// engine `spec` gives; the receiver says when its engine is made (its shape) or why not.
fn spawn_rank<B: Backend + 'static>(
    model: &Model,
    group: Box<dyn Collective>,
    backend: Arc<MakeBackend<B>>,
    spec: Spec,
) -> Result<(Rank, Receiver<Result<Shape>>)> {
    let rank = group.shard().rank;
    let part = shard::split(model, group.shard())?;
    let (calls, inbox) = channel::<Call>();
    let (outbox, answers) = channel::<Result<Answer>>();
    let (ready, started) = channel::<Result<Shape>>();
    let thread = std::thread::Builder::new()
        .name(format!("rayo-rank-{rank}"))
        .spawn(move || {
            let mut engine = match backend(&part, group).and_then(|b| Engine::new(&part, b, spec)) {
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
        .map_err(|e| Error::TensorParallel(format!("cannot start rank {rank}: {e}")))?;
    Ok((Rank::Thread { calls, answers, thread: Some(thread) }, started))
}

impl World {
    /// `model` split over `world` ranks ([`shard::split`]), each on its own thread with the
    /// backend `backend(part, group)` makes for its part and its side of the group, and the
    /// engine `spec` gives.
    fn start<B: Backend + 'static>(model: &Model, world: usize, backend: Arc<MakeBackend<B>>, spec: Spec) -> Result<World> {
        shard::check(model.config(), world)?;
        let mut ranks = Vec::with_capacity(world);
        let mut started = Vec::with_capacity(world);
        for group in LocalGroup::new(world) {
            let (rank, ready) = spawn_rank(model, Box::new(group), Arc::clone(&backend), spec)?;
            ranks.push(rank);
            started.push(ready);
        }
        let mut shape = None;
        for (r, s) in started.iter().enumerate() {
            let got = s.recv().map_err(|_| Error::TensorParallel(format!("rank {r} ended while starting")))??;
            shape.get_or_insert(got);
        }
        let shape = shape.expect("a world has at least one rank");
        Ok(World { ranks, shape, failed: None })
    }

    /// Rank 0 of a world of processes: waits at `rv`'s address for the other ranks
    /// ([`serve_rank`]), tells them the engine `spec` gives, runs rank 0 on a thread of this
    /// process, and checks every rank made the same engine of the same model.
    fn host<B: Backend + 'static>(model: &Model, rv: &Rendezvous, backend: Arc<MakeBackend<B>>, spec: Spec) -> Result<World> {
        shard::check(model.config(), rv.shard.world)?;
        if rv.shard.rank != 0 {
            return Err(Error::TensorParallel(format!("rank {} joins a world (serve_rank); rank 0 hosts it", rv.shard.rank)));
        }
        let mut links = rv.host()?;
        let welcome = wire::welcome(model, spec);
        for l in &mut links {
            l.send(Tag::Welcome, &welcome)?;
        }
        let group_links = links.iter().map(Link::try_clone).collect::<Result<Vec<_>>>()?;
        let group = TcpGroup::new(rv.shard, group_links);
        let (rank0, ready) = spawn_rank(model, Box::new(group), backend, spec)?;
        let shape = ready.recv().map_err(|_| Error::TensorParallel("rank 0 ended while starting".into()))?;
        let shape = match shape {
            Ok(s) => s,
            Err(e) => {
                links.iter().for_each(Link::hang_up);
                return Err(e);
            }
        };
        let mut ranks = vec![rank0];
        for mut l in links {
            let got = l.expect(Tag::Ready).and_then(|p| Shape::decode(&p));
            let (context, slots, rows, name) = match got {
                Ok(g) => g,
                Err(e) => {
                    // the world cannot run: ending rank 0's thread hangs up every link
                    drop(World { ranks, shape, failed: None });
                    return Err(e);
                }
            };
            if (context, slots, rows, name.as_str()) != (shape.context, shape.slots, shape.rows, shape.backend) {
                let r = l.peer;
                drop(World { ranks, shape, failed: None });
                return Err(Error::TensorParallel(format!(
                        "rank {r} made a {name} engine of {context} positions, {slots} slots, {rows} rows a step; rank 0 a {} engine of {}, {}, {}: give every rank the same --backend",
                        shape.backend, shape.context, shape.slots, shape.rows
                    ),
                ));
            }
            ranks.push(Rank::Process(l));
        }
        Ok(World { ranks, shape, failed: None })
    }

    /// `call` on every rank; rank 0's answer.
    fn all(&mut self, call: impl Fn() -> Call) -> Result<Answer> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let gone = |r: usize| Error::TensorParallel(format!("rank {r} has stopped"));
        // other processes first: a rank's link carries the call before rank 0's collectives
        // reach it (crate::rendezvous)
        let mut sent = Ok(());
        for rank in self.ranks.iter_mut() {
            if let Rank::Process(l) = rank {
                sent = sent.and(l.send(Tag::Call, &call().encode()));
            }
        }
        for (r, rank) in self.ranks.iter().enumerate() {
            if let Rank::Thread { calls, .. } = rank {
                calls.send(call()).map_err(|_| gone(r))?;
            }
        }
        let mut first = None;
        let mut error = sent.err().map(|e| (usize::MAX, e));
        for (r, rank) in self.ranks.iter_mut().enumerate() {
            let got = match rank {
                Rank::Thread { answers, .. } => answers.recv().unwrap_or_else(|_| Err(gone(r))),
                Rank::Process(l) => l.expect(Tag::Answer).map(|_| Answer::Done),
            };
            match got {
                Ok(a) if r == 0 => first = Some(a),
                Ok(_) => {}
                // the rank that failed first names the cause; the others' errors follow from it
                Err(e) => error = error.or(Some((r, e))),
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
            match rank {
                // closing its inbox ends the rank's loop
                Rank::Thread { calls, .. } => *calls = channel().0,
                // a rank's next read fails: it ends
                Rank::Process(l) => l.hang_up(),
            }
        }
        for rank in &mut self.ranks {
            if let Rank::Thread { thread, .. } = rank {
                if let Some(t) = thread.take() {
                    let _ = t.join();
                }
            }
        }
    }
}

/// A rank of a world of processes other than rank 0: connects to rank 0 at `rv`'s address,
/// makes the engine rank 0 asks for over its part of `model` (the same file rank 0 runs) with
/// the backend `backend(part, group)` makes, and runs rank 0's calls until rank 0 hangs up
/// (then `Ok`). Errors: no rank 0 within `rv.wait`, another model than rank 0's, an engine that
/// cannot be made, a call that fails (rank 0 is told first, and its world fails with it).
pub fn serve_rank<B, F>(model: &Model, rv: &Rendezvous, backend: F) -> Result<()>
where
    B: Backend + 'static,
    F: Fn(&Model, Box<dyn Collective>) -> Result<B>,
{
    shard::check(model.config(), rv.shard.world)?;
    let mut link = rv.join()?;
    let spec = link.expect(Tag::Welcome).and_then(|p| wire::check_welcome(model, &p));
    let made = spec.and_then(|spec| {
        let part = shard::split(model, rv.shard)?;
        let group = TcpGroup::new(rv.shard, vec![link.try_clone()?]);
        let engine = Engine::new(&part, backend(&part, Box::new(group))?, spec)?;
        Ok(engine)
    });
    let mut engine = match made {
        Ok(e) => e,
        Err(e) => {
            let _ = link.send(Tag::Failed, e.to_string().as_bytes());
            return Err(e);
        }
    };
    link.send(Tag::Ready, &engine.shape().encode())?;
    loop {
        let call = match link.recv() {
            Ok((Tag::Call, p)) => Call::decode(&p)?,
            Ok((t, _)) => return Err(Error::TensorParallel(format!("rank {}: rank 0 sent {t:?} where a call was due", rv.shard.rank))),
            // rank 0 is done (or gone): so is this rank
            Err(e) => {
                log::info!("tensor-parallel rank {}: {e}; ending", rv.shard.rank);
                return Ok(());
            }
        };
        match engine.run(call, false) {
            Ok(_) => link.send(Tag::Answer, &[])?,
            Err(e) => {
                let _ = link.send(Tag::Failed, e.to_string().as_bytes());
                return Err(e);
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
        let world = World::start(model, world, Arc::new(backend), Spec::One(opts))?;
        Ok(TensorParallel { world, vocab: model.config().vocab_size, pos: 0 })
    }

    /// Rank 0 of a world of processes: waits at `rv`'s address for every other rank (each
    /// running [`serve_rank`] on the same model file), then runs rank 0 here as
    /// [`TensorParallel::start`] runs its ranks. Errors: those of `start`, ranks that do not
    /// come within `rv.wait`, a rank on another model or another backend.
    pub fn host<B, F>(model: &Model, rv: &Rendezvous, opts: SessionOptions, backend: F) -> Result<TensorParallel>
    where
        B: Backend + 'static,
        F: Fn(&Model, Box<dyn Collective>) -> Result<B> + Send + Sync + 'static,
    {
        let world = World::host(model, rv, Arc::new(backend), Spec::One(opts))?;
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
    fn new(part: &Model, backend: B, spec: Spec) -> Result<Engine<B>> {
        Ok(match spec {
            Spec::One(opts) => Engine::One(Session::new(part, backend, opts)?),
            Spec::Many(opts) => Engine::Many(BatchSession::new(part, backend, opts)?),
        })
    }

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
    Error::TensorParallel("a rank was given a call of the other kind of session".into())
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
        let world = World::start(model, world, Arc::new(backend), Spec::Many(opts))?;
        let slots = world.shape.slots;
        Ok(TensorParallelBatch { world, vocab: model.config().vocab_size, pos: vec![0; slots] })
    }

    /// [`TensorParallel::host`] with a [`BatchSession`] sized by `opts` on every rank.
    pub fn host<B, F>(model: &Model, rv: &Rendezvous, opts: BatchOptions, backend: F) -> Result<TensorParallelBatch>
    where
        B: Backend + 'static,
        F: Fn(&Model, Box<dyn Collective>) -> Result<B> + Send + Sync + 'static,
    {
        let world = World::host(model, rv, Arc::new(backend), Spec::Many(opts))?;
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
