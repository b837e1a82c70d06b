//! How a prompt is cut into the chunks a step runs, so that its logits are bit-identical to
//! `rayo generate`'s (which runs a prompt in chunks of the session's batch, 256 tokens).
//!
//! The CPU engine's numerics depend on how many rows a chunk has, in three classes (measured on
//! SmolLM2, `tests/chunking.rs`):
//! - **one** row: the decode path (`Session::one_token_step` → the CPU backend's `attend_one`:
//!   a dot product per key and a running sum of the values);
//! - **small**, 2 to 63 rows: `Heads::attend`, two GEMMs per head, the query rounded to f16 for
//!   an f16 KV cache (as llama.cpp's one-row flash-attention kernel);
//! - **big**, 64 rows or more: the same GEMMs with the query kept in f32 (llama.cpp's tiled
//!   kernel).
//!
//! Within a class the cut does not matter (bit-identical); across classes the logits move by up
//! to ~0.7. So a token must run in a chunk of the class `rayo generate` would run it in, and a
//! cached prefix is reused only as far as its tokens ran in the classes this prompt wants.

/// The row classes of a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    One,
    Small,
    Big,
}

/// The engine's chunking: the session's batch (the rows `rayo generate` runs at once) and the
/// rows from which a chunk is big.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkRule {
    pub batch: usize,
    pub big_rows: usize,
}

impl Default for ChunkRule {
    fn default() -> ChunkRule {
        ChunkRule { batch: 256, big_rows: 64 }
    }
}

impl ChunkRule {
    /// The class of a chunk of `m` rows.
    pub fn class(&self, m: usize) -> Class {
        match m {
            0 | 1 => Class::One,
            m if m < self.big_rows => Class::Small,
            _ => Class::Big,
        }
    }

    /// The fewest and most rows a chunk of class `c` may have.
    fn rows(&self, c: Class) -> (usize, usize) {
        match c {
            Class::One => (1, 1),
            Class::Small => (2, self.big_rows.saturating_sub(1).max(2)),
            Class::Big => (self.big_rows.max(2), usize::MAX),
        }
    }

    /// The run of positions of one class that position `i` of a `p`-token prompt is in, as
    /// `rayo generate` runs the prompt (chunks of `batch` from position 0): (start, end, class).
    pub fn run(&self, i: usize, p: usize) -> (usize, usize, Class) {
        let batch = self.batch.max(1);
        let full = p / batch * batch;
        let last = p - full;
        let (kf, kl) = (self.class(batch), self.class(last));
        let merged = full > 0 && last > 0 && kf == kl && kf != Class::One;
        if merged || last == 0 {
            (0, p, kf)
        } else if i < full {
            (0, full, kf)
        } else if full == 0 {
            (0, p, kl)
        } else {
            (full, p, kl)
        }
    }

    /// The class of each position of a `p`-token prompt as `rayo generate` runs it.
    pub fn classes(&self, p: usize) -> Vec<Class> {
        (0..p).map(|i| self.run(i, p).2).collect()
    }

    /// Where a `p`-token prompt starts running when its first `usable` tokens are in the
    /// cache (already checked against [`ChunkRule::classes`]): at least one token runs, and
    /// the rest of its run is a legal chunk of the run's class.
    pub fn start(&self, usable: usize, p: usize) -> usize {
        if p == 0 {
            return 0;
        }
        let c = usable.min(p - 1);
        let (r0, r1, k) = self.run(c, p);
        let (lo, _) = self.rows(k);
        if r1 - c < lo {
            r1.saturating_sub(lo).max(r0)
        } else {
            c
        }
    }

    /// The next chunk of a `p`-token prompt from position `at`, with `budget` tokens left in
    /// the step (a chunk may go over it: never a chunk of the wrong class, nor one that leaves
    /// a remainder too short for its class).
    pub fn chunk(&self, at: usize, p: usize, budget: usize) -> usize {
        let (_, r1, k) = self.run(at, p);
        let (lo, hi) = self.rows(k);
        let remaining = r1 - at;
        let n = budget.clamp(lo, hi);
        if remaining <= n {
            return remaining;
        }
        let left = remaining - n;
        if left >= lo {
            n
        } else if remaining - lo >= lo && remaining - lo <= hi {
            remaining - lo
        } else {
            remaining.min(hi)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Class::*;

    const R: ChunkRule = ChunkRule { batch: 256, big_rows: 64 };

    #[test]
    fn runs_follow_rayo_generates_chunks() {
        assert_eq!(R.run(0, 1), (0, 1, One));
        assert_eq!(R.run(5, 40), (0, 40, Small));
        assert_eq!(R.run(5, 100), (0, 100, Big));
        assert_eq!(R.run(300, 400), (0, 400, Big), "256 + 144: both big");
        assert_eq!(R.run(10, 270), (0, 256, Big));
        assert_eq!(R.run(260, 270), (256, 270, Small), "256 + 14: the last 14 are small");
        assert_eq!(R.run(256, 257), (256, 257, One), "256 + 1: the last one alone");
        assert_eq!(R.run(3, 256), (0, 256, Big));
        let small_ctx = ChunkRule { batch: 32, big_rows: 64 };
        assert_eq!(small_ctx.run(3, 32), (0, 32, Small));
        assert_eq!(R.classes(3), [Small; 3]);
    }

    /// Cuts a `p`-token prompt from `start` with `budget` per step; returns the chunks.
    fn cut(p: usize, start: usize, budget: usize) -> Vec<usize> {
        let mut at = start;
        let mut out = Vec::new();
        while at < p {
            let n = R.chunk(at, p, budget);
            assert!(n >= 1 && at + n <= p, "{p} tokens from {at}, budget {budget}: {n}");
            out.push(n);
            at += n;
        }
        out
    }

    #[test]
    fn every_token_runs_in_the_class_generate_runs_it_in() {
        for p in [1, 2, 3, 5, 40, 63, 64, 65, 100, 127, 128, 255, 256, 257, 258, 300, 319, 320, 600] {
            let want = R.classes(p);
            for budget in [0, 1, 2, 3, 7, 16, 63, 64, 65, 100, 256, 1000] {
                for usable in [0, 1, p / 2, p.saturating_sub(3), p.saturating_sub(1), p] {
                    let start = R.start(usable, p);
                    assert!(start <= usable.min(p.saturating_sub(1)) || p == 0, "{p} {usable}: start {start}");
                    let mut at = start;
                    for n in cut(p, start, budget) {
                        for w in &want[at..at + n] {
                            assert_eq!(R.class(n), *w, "{p} tokens, budget {budget}, from {start}: a chunk of {n} at {at}");
                        }
                        at += n;
                    }
                }
            }
        }
    }

    #[test]
    fn chunks_stay_near_the_budget() {
        assert_eq!(cut(40, 0, 8), [8, 8, 8, 8, 8]);
        assert_eq!(cut(41, 0, 8), [8, 8, 8, 8, 7, 2]);
        assert_eq!(cut(5, 0, 4), [3, 2], "not 4 and then 1");
        assert_eq!(cut(200, 0, 64), [64, 64, 72], "not 64, 64, 64 and then 8");
        assert_eq!(cut(300, 0, 100), [100, 92, 64, 44], "256 big, then 44 small");
        assert_eq!(cut(257, 0, 256), [256, 1]);
    }
}
