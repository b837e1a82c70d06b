//! A model run by a world of tensor-parallel ranks in this process ([`crate::shard`]): a thread
//! per rank, each with its part of the model, its backend and its session. [`TensorParallel`]
//! is a [`Forward`]: every call goes to every rank, the ranks meet in their collectives
//! ([`crate::collective`]), and rank 0's answer is the world's (every rank holds the same
//! gathered logits).
//!
//! Input errors (an empty call, a context that is full, a token past the vocabulary) are found
//! here before any rank runs. Any other error of a rank ends that rank, which breaks the
//! group: the others' collectives fail, and every later call is that error.

use crate::backend::Backend;
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
}

/// A rank's answer (rank 0's carries the values; the others' only say they are done).
enum Answer {
    Logits(Vec<f32>),
    Token(u32),
    Best(Vec<(u32, f32)>),
    Done,
}

struct Rank {
    calls: Sender<Call>,
    answers: Receiver<Result<Answer>>,
    thread: Option<JoinHandle<()>>,
}

/// `world` ranks of one model in this process.
pub struct TensorParallel {
    ranks: Vec<Rank>,
    vocab: usize,
    context: usize,
    pos: usize,
    backend: &'static str,
    /// The error that ended a rank: every later call is it.
    failed: Option<Error>,
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
        shard::check(model.config(), world)?;
        let backend = std::sync::Arc::new(backend);
        let mut ranks = Vec::with_capacity(world);
        let mut started = Vec::with_capacity(world);
        for group in LocalGroup::new(world) {
            let part = shard::split(model, group.shard())?;
            let (calls, inbox) = channel::<Call>();
            let (outbox, answers) = channel::<Result<Answer>>();
            let (ready, started_rx) = channel::<Result<(usize, &'static str)>>();
            let make = std::sync::Arc::clone(&backend);
            let rank = group.shard().rank;
            let thread = std::thread::Builder::new()
                .name(format!("rayo-rank-{rank}"))
                .spawn(move || {
                    let session = make(&part, Box::new(group)).and_then(|b| Session::new(&part, b, opts));
                    let mut session = match session {
                        Ok(s) => {
                            let _ = ready.send(Ok((s.context(), s.backend().name())));
                            s
                        }
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return;
                        }
                    };
                    while let Ok(call) = inbox.recv() {
                        let answer = run(&mut session, call, rank == 0);
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
        let (context, backend) = shape.expect("a world has at least one rank");
        Ok(TensorParallel { ranks, vocab: model.config().vocab_size, context, pos: 0, backend, failed: None })
    }

    /// Ranks in the world.
    pub fn world(&self) -> usize {
        self.ranks.len()
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

    /// The checks of [`Session::forward`], before any rank runs.
    fn check(&self, tokens: &[u32]) -> Result<()> {
        if tokens.is_empty() {
            return Err(rayo::Error::EmptyInput { op: "TensorParallel::forward" }.into());
        }
        if tokens.len() > self.context - self.pos {
            return Err(Error::ContextFull { tokens: tokens.len(), pos: self.pos, context: self.context });
        }
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= self.vocab) {
            return Err(Error::TokenPastVocab { id: t, vocab: self.vocab });
        }
        Ok(())
    }

    /// `call` after the input checks, then the position moved past `tokens`.
    fn step(&mut self, tokens: &[u32], call: impl Fn() -> Call) -> Result<Answer> {
        self.check(tokens)?;
        let a = self.all(call)?;
        self.pos += tokens.len();
        Ok(a)
    }
}

/// `call` on one rank's session (`values`: rank 0, whose answer carries them).
fn run<B: Backend>(s: &mut Session<B>, call: Call, values: bool) -> Result<Answer> {
    let a = match call {
        Call::Forward(t, which) => Answer::Logits(s.forward(&t, which)?),
        Call::Greedy(t) => Answer::Token(s.forward_greedy(&t)?),
        Call::TopK(t, k) => Answer::Best(s.forward_top_k(&t, k)?),
        Call::Rewind(pos) => {
            s.rewind(pos);
            Answer::Done
        }
    };
    Ok(if values { a } else { Answer::Done })
}

fn unexpected() -> Error {
    Error::backend("cpu", "tensor-parallel rank 0 answered another call")
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
        if self.all(|| Call::Rewind(pos)).is_ok() {
            self.pos = self.pos.min(pos);
        }
    }
    fn position(&self) -> usize {
        self.pos
    }
    fn context(&self) -> usize {
        self.context
    }
    fn backend_name(&self) -> &'static str {
        self.backend
    }
    fn step_ops(&self) -> usize {
        // the ranks' recordings are theirs, out of reach of a query through `&self`
        0
    }
}

impl Drop for TensorParallel {
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
