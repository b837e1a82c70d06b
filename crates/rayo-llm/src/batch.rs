//! Many sequences at once: a fixed number of slots, each a sequence with its own KV cache and
//! position, run together one step at a time (what a server's scheduler drives). A step takes
//! any mix of decode tokens and prompt chunks, one work item per slot.

use crate::session::{Forward, Logits};
use crate::{Error, Result};

/// One slot's share of a step: `tokens` run at the slot's next positions.
#[derive(Clone, Copy, Debug)]
pub struct SlotWork<'a> {
    pub slot: usize,
    pub tokens: &'a [u32],
}

/// What a step gives back for one item ([`BatchForward::step_best`]).
#[derive(Debug)]
pub enum StepOut {
    /// The logits after the item's last token.
    Logits(Vec<f32>),
    /// The `k` largest of them (what greedy sampling needs), or the sampler's error for them.
    Best(crate::backend::RowBest),
}

/// The most best logits an item gets from a step where the logits are (a device's top-k kernel
/// holds 128 a row): an item that wants more, or the whole vocabulary, still gets them, found on
/// the host after all the step's logits were read.
pub const MAX_BEST: usize = 128;

/// A model that runs many sequences (slots) a step at a time.
///
/// Not `Send`: a CUDA session's recorded graphs stay on the thread that made them, so a server
/// builds its engine on the scheduler's own thread.
pub trait BatchForward {
    /// Slots (sequences that can be in flight at once).
    fn slots(&self) -> usize;
    /// Positions each slot's KV cache holds.
    fn context(&self) -> usize;
    /// Logits per token.
    fn vocab(&self) -> usize;
    /// Positions already in `slot`'s cache.
    fn position(&self, slot: usize) -> usize;
    /// Forgets `slot`'s positions from `pos` on (0 empties it; keeping a prefix is how a prompt
    /// that starts with tokens already in the cache skips them).
    fn rewind(&mut self, slot: usize, pos: usize);
    /// Runs every item's tokens at its slot's next positions, as one step, and returns the
    /// logits after each item's last token, in the order of `work`. Errors, before anything
    /// runs: a slot out of range or named twice, an item without tokens, tokens past a slot's
    /// context or past the vocabulary.
    fn step(&mut self, work: &[SlotWork]) -> Result<Vec<Vec<f32>>>;
    /// [`BatchForward::step`], where item `i` gets its `k` best logits instead of all of them
    /// when `best[i]` is `Some(k)` (`best` as long as `work`). By default all the logits come
    /// back and are scanned here; a device backend finds the best where the logits are.
    fn step_best(&mut self, work: &[SlotWork], best: &[Option<usize>]) -> Result<Vec<StepOut>> {
        let all = self.step(work)?;
        Ok(all
            .into_iter()
            .zip(best)
            .map(|(l, b)| match b {
                Some(k) => StepOut::Best(crate::sample::top_k_of(&l, *k)),
                None => StepOut::Logits(l),
            })
            .collect())
    }
    /// Runs `tokens` at `slot`'s next positions and returns the logits after each of them, in
    /// order (what scoring a prompt needs: the log-probability of token `i + 1` is read from
    /// row `i`). Errors as [`BatchForward::step`]. By default one token a step, whose logits
    /// are the step's; a backend may run them in fewer steps.
    fn prompt_logits(&mut self, slot: usize, tokens: &[u32]) -> Result<Vec<Vec<f32>>> {
        let mut rows = Vec::with_capacity(tokens.len());
        for t in tokens {
            let mut out = self.step(&[SlotWork { slot, tokens: std::slice::from_ref(t) }])?;
            rows.push(out.pop().ok_or_else(|| Error::Batch("a step gave no logits".into()))?);
        }
        Ok(rows)
    }
    /// The backend's name.
    fn backend_name(&self) -> &'static str;
}

/// Checks `work` against `slots` slots of `context` positions each (`position(slot)` filled),
/// as every [`BatchForward::step`] must before it runs anything.
pub fn check_work(work: &[SlotWork], slots: usize, context: usize, vocab: usize, position: impl Fn(usize) -> usize) -> Result<()> {
    let mut seen = vec![false; slots];
    for w in work {
        if w.slot >= slots {
            return Err(Error::Batch(format!("slot {} named, the batch has {slots} slots", w.slot)));
        }
        if std::mem::replace(&mut seen[w.slot], true) {
            return Err(Error::Batch(format!("slot {} named twice in one step", w.slot)));
        }
        if w.tokens.is_empty() {
            return Err(Error::Batch(format!("slot {} has no tokens to run", w.slot)));
        }
        let pos = position(w.slot);
        if w.tokens.len() > context - pos.min(context) {
            return Err(Error::ContextFull { tokens: w.tokens.len(), pos, context });
        }
        if let Some(&t) = w.tokens.iter().find(|&&t| t as usize >= vocab) {
            return Err(Error::TokenPastVocab { id: t, vocab });
        }
    }
    Ok(())
}

/// Slots as separate sessions, run one after another within a step: correct and simple, but
/// each sequence reads the weights again (a batched backend reads them once per step). On the
/// CPU the sessions share the file's mapped weights, so a slot costs only its KV cache.
pub struct SessionPool {
    sessions: Vec<Box<dyn Forward>>,
}

impl SessionPool {
    /// One slot per session; all must have the same context and vocabulary.
    pub fn new(sessions: Vec<Box<dyn Forward>>) -> Result<SessionPool> {
        let Some(first) = sessions.first() else {
            return Err(Error::Batch("a pool needs at least one session".into()));
        };
        let (ctx, vocab) = (first.context(), first.vocab());
        if let Some(s) = sessions.iter().find(|s| s.context() != ctx || s.vocab() != vocab) {
            return Err(Error::Batch(format!("sessions differ: context {} and vocabulary {} against {ctx} and {vocab}", s.context(), s.vocab())));
        }
        Ok(SessionPool { sessions })
    }
}

impl BatchForward for SessionPool {
    fn slots(&self) -> usize {
        self.sessions.len()
    }
    fn context(&self) -> usize {
        self.sessions[0].context()
    }
    fn vocab(&self) -> usize {
        self.sessions[0].vocab()
    }
    fn position(&self, slot: usize) -> usize {
        self.sessions.get(slot).map_or(0, |s| s.position())
    }
    fn rewind(&mut self, slot: usize, pos: usize) {
        if let Some(s) = self.sessions.get_mut(slot) {
            s.rewind(pos);
        }
    }
    fn step(&mut self, work: &[SlotWork]) -> Result<Vec<Vec<f32>>> {
        check_work(work, self.slots(), self.context(), self.vocab(), |s| self.sessions[s].position())?;
        work.iter().map(|w| self.sessions[w.slot].forward(w.tokens, Logits::Last)).collect()
    }
    fn backend_name(&self) -> &'static str {
        self.sessions[0].backend_name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_checked_before_it_runs() {
        let pos = |s: usize| [0, 5][s];
        let ok = [SlotWork { slot: 0, tokens: &[1, 2] }, SlotWork { slot: 1, tokens: &[3] }];
        check_work(&ok, 2, 8, 10, pos).unwrap();
        let bad: [(&[SlotWork], &str); 5] = [
            (&[SlotWork { slot: 2, tokens: &[1] }], "slot 2 named, the batch has 2 slots"),
            (&[SlotWork { slot: 0, tokens: &[1] }, SlotWork { slot: 0, tokens: &[1] }], "slot 0 named twice"),
            (&[SlotWork { slot: 1, tokens: &[] }], "slot 1 has no tokens"),
            (&[SlotWork { slot: 1, tokens: &[1, 2, 3, 4] }], "4 tokens at position 5 do not fit the context of 8"),
            (&[SlotWork { slot: 0, tokens: &[10] }], "token id 10 is past the vocabulary of 10"),
        ];
        for (work, want) in bad {
            let e = check_work(work, 2, 8, 10, pos).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }
}
