//! Choosing the next token from a row of logits: greedy, or a seeded draw after llama.cpp's
//! common sampler chain (repetition penalty → top-k → top-p → min-p → temperature → draw).
//!
//! The filters follow llama.cpp's definitions (`src/llama-sampler.cpp`): top-p keeps the
//! shortest prefix of the sorted candidates whose probability reaches `top_p`; min-p keeps the
//! candidates whose probability is at least `min_p` times the largest; both see the
//! probabilities before temperature. The `n`-th draw's uniform number is a counter-based hash of
//! (seed, n) ([`uniform`]): one seed gives one sequence of tokens whatever else runs beside it
//! (not llama.cpp's sequence: its RNG is mt19937).

use crate::{Error, Result};
use rayo::ArgValue;

/// The sampling parameters. `Default` follows llama.cpp's common defaults (temperature 0.8,
/// top-k 40, top-p 0.95, min-p 0.05, no repetition penalty over the last 64 tokens).
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// Logits are divided by it before the draw; 0 is greedy (argmax, first maximum on ties).
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens; 0 = off.
    pub top_k: usize,
    /// Keep the most likely tokens until their probability reaches `top_p`; 1 = off.
    pub top_p: f32,
    /// Keep tokens with probability ≥ `min_p` × the largest; 0 = off.
    pub min_p: f32,
    /// Divide a positive logit (multiply a negative one) of each token seen in the last
    /// `repeat_last_n` tokens of the history by it; 1 = off.
    pub repeat_penalty: f32,
    /// How many of the latest history tokens the penalty looks at; 0 = off.
    pub repeat_last_n: usize,
    /// The random generator's seed.
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> SamplerConfig {
        SamplerConfig { temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05, repeat_penalty: 1.0, repeat_last_n: 64, seed: 0 }
    }
}

impl SamplerConfig {
    /// Argmax of the logits, nothing else.
    pub fn greedy() -> SamplerConfig {
        SamplerConfig { temperature: 0.0, top_k: 0, top_p: 1.0, min_p: 0.0, repeat_penalty: 1.0, repeat_last_n: 0, seed: 0 }
    }

    /// Checks every parameter; the error names the first bad one and its value.
    pub fn validate(&self) -> Result<()> {
        let bad = |name, value: f32, reason| Err(rayo::Error::InvalidParameter { op: "sampler", name, value: value as f64, reason });
        let t = self.temperature;
        if !t.is_finite() || t < 0.0 {
            return Ok(bad("temperature", t, "must be finite and >= 0 (0 = greedy)")?);
        }
        let p = self.top_p;
        if p.is_nan() || p <= 0.0 || p > 1.0 {
            return bad("top_p", p, "must be in (0, 1] (1 = off)").map_err(crate::Error::from);
        }
        let m = self.min_p;
        if m.is_nan() || !(0.0..=1.0).contains(&m) {
            return bad("min_p", m, "must be in [0, 1] (0 = off)").map_err(crate::Error::from);
        }
        let r = self.repeat_penalty;
        if !r.is_finite() || r <= 0.0 {
            return bad("repeat_penalty", r, "must be finite and > 0 (1 = off)").map_err(crate::Error::from);
        }
        Ok(())
    }
}

/// One token still in the running: its id and its (penalized, then scaled) logit.
#[derive(Clone, Copy, Debug)]
struct Cand {
    id: u32,
    logit: f32,
}

/// Most likely first; equal logits keep the lower id first, as argmax does.
fn by_logit_desc(a: &Cand, b: &Cand) -> std::cmp::Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// A sampler: the config, its seeded generator and reused scratch buffers.
#[derive(Clone, Debug)]
pub struct Sampler {
    cfg: SamplerConfig,
    /// Draws made so far: the counter of the next draw's [`uniform`].
    draws: u64,
    cand: Vec<Cand>,
    window: Vec<u32>,
    best: Vec<Cand>,
    probs: Vec<f64>,
}

impl Sampler {
    /// A sampler for `cfg`, after [`SamplerConfig::validate`].
    pub fn new(cfg: SamplerConfig) -> Result<Sampler> {
        cfg.validate()?;
        Ok(Sampler { cfg, draws: 0, cand: Vec::new(), window: Vec::new(), best: Vec::new(), probs: Vec::new() })
    }

    /// The config it samples with.
    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// `Some(k)` when a draw over `vocab` logits depends only on their `k` largest (no
    /// repetition penalty, a temperature, `0 < k ≤ 128`, `k < vocab`): the backend may then
    /// find those where the logits are and [`Sampler::sample_top`] draws from them.
    pub fn top_k_only(&self, vocab: usize) -> Option<usize> {
        let k = self.cfg.top_k;
        let penalized = self.cfg.repeat_penalty != 1.0 && self.cfg.repeat_last_n > 0;
        (self.cfg.temperature > 0.0 && !penalized && k > 0 && k <= SCAN_TOP_K && k < vocab).then_some(k)
    }

    /// The draw [`Sampler::sample`] makes, from the `k` largest logits `top` ((id, logit),
    /// largest first, the lower id first among equals) when
    /// [`Sampler::top_k_only`] is `Some(k)`.
    pub fn sample_top(&mut self, top: &[(u32, f32)]) -> u32 {
        self.cand.clear();
        self.cand.extend(top.iter().map(|&(id, logit)| Cand { id, logit }));
        self.filter();
        self.draw()
    }

    /// Whether a draw is the logits' first maximum and nothing else (temperature 0, no
    /// repetition penalty): the backend may then pick it where the logits are.
    pub fn is_plain_greedy(&self) -> bool {
        self.cfg.temperature == 0.0 && !(self.cfg.repeat_penalty != 1.0 && self.cfg.repeat_last_n > 0)
    }

    /// The next token for `logits` (one per vocabulary entry) after the tokens of `history`
    /// (prompt and generated so far; only an active repetition penalty reads it). Errors: empty
    /// logits, a NaN or +inf logit, no finite logit, and (penalty on) a history id past the
    /// vocabulary.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> Result<u32> {
        let best = check(logits)?;
        let penalized = self.cfg.repeat_penalty != 1.0 && self.cfg.repeat_last_n > 0;
        if self.cfg.temperature == 0.0 && !penalized {
            return Ok(best);
        }
        if self.cfg.temperature == 0.0 {
            self.prepare(logits, history)?;
            // Candidates are in id order here: the first maximum wins ties.
            let mut best = self.cand[0];
            for &c in &self.cand[1..] {
                if c.logit > best.logit {
                    best = c;
                }
            }
            return Ok(best.id);
        }
        let k = self.cfg.top_k;
        if !penalized && k > 0 && k <= SCAN_TOP_K && k < logits.len() {
            // The common case (top-k 40): one scan of the logits, no copy of the vocabulary.
            let all = logits.iter().enumerate().map(|(i, &logit)| Cand { id: i as u32, logit });
            top_k_scan(all, k, &mut self.cand);
        } else {
            self.prepare(logits, history)?;
            self.top_k();
        }
        self.filter();
        Ok(self.draw())
    }

    /// Fills `cand` with every token, penalized, in id order (the logits are checked).
    fn prepare(&mut self, logits: &[f32], history: &[u32]) -> Result<()> {
        let n = logits.len();
        self.cand.clear();
        self.cand.extend(logits.iter().enumerate().map(|(i, &logit)| Cand { id: i as u32, logit }));
        let (penalty, last_n) = (self.cfg.repeat_penalty, self.cfg.repeat_last_n);
        if penalty != 1.0 && last_n > 0 {
            // Each distinct token of the window once, as llama.cpp (counts matter only to its
            // frequency/presence penalties, which this sampler does not have).
            self.window.clear();
            self.window.extend_from_slice(&history[history.len().saturating_sub(last_n)..]);
            self.window.sort_unstable();
            self.window.dedup();
            for &id in &self.window {
                let c = self.cand.get_mut(id as usize).ok_or(rayo::Error::IndexOutOfBounds { index: id as usize, len: n })?;
                c.logit = if c.logit > 0.0 { c.logit / penalty } else { c.logit * penalty };
            }
        }
        Ok(())
    }

    /// top-k on `cand` (every token, in id order).
    fn top_k(&mut self) {
        let k = self.cfg.top_k;
        if k > 0 && k < self.cand.len() {
            if k <= SCAN_TOP_K {
                top_k_scan(self.cand.iter().copied(), k, &mut self.best);
                self.cand.clear();
                self.cand.extend_from_slice(&self.best);
            } else {
                self.cand.select_nth_unstable_by(k - 1, by_logit_desc);
                self.cand.truncate(k);
            }
        }
    }

    /// top-p → min-p on `cand`, then drop masked (-inf) tokens; at least the best one stays.
    fn filter(&mut self) {
        if self.cfg.top_p < 1.0 {
            top_p(&mut self.cand, self.cfg.top_p);
        }
        if self.cfg.min_p > 0.0 {
            // p_i ≥ min_p · p_max  ⇔  logit_i ≥ max + ln(min_p).
            let max = self.cand.iter().fold(f32::NEG_INFINITY, |m, c| m.max(c.logit));
            let floor = max as f64 + (self.cfg.min_p as f64).ln();
            self.cand.retain(|c| c.logit as f64 >= floor);
        }
        self.cand.retain(|c| c.logit > f32::NEG_INFINITY);
    }

    /// One draw from softmax(cand / temperature).
    fn draw(&mut self) -> u32 {
        softmax(&self.cand, self.cfg.temperature, &mut self.probs);
        let mut r = uniform(self.cfg.seed, self.draws);
        self.draws += 1;
        for (c, p) in self.cand.iter().zip(&self.probs) {
            if r < *p {
                return c.id;
            }
            r -= p;
        }
        // Rounding left r just above the sum: the last candidate that can be drawn.
        let last = self.probs.iter().rposition(|p| *p > 0.0).unwrap_or(0);
        self.cand[last].id
    }
}

/// The uniform number in [0, 1) of draw `n` under `seed`: SplitMix64's finalizer over the pair
/// (a counter-based generator: draw `n` needs no state but its number, so a request's draws do
/// not depend on which requests share its steps, nor on how many draws were skipped).
pub fn uniform(seed: u64, n: u64) -> f64 {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let z = mix(mix(seed.wrapping_add(0x9e37_79b9_7f4a_7c15)) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    // the top 53 bits: every value a multiple of 2^-53, below 1
    (z >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The argmax of `logits` (first maximum) after checking them: not empty, ids fit `u32`, no NaN
/// or +inf, at least one finite value. One pass.
pub(crate) fn check(logits: &[f32]) -> Result<u32> {
    let (mut best, mut max, mut bad) = (0, logits.first().copied().unwrap_or(f32::NEG_INFINITY), None);
    for (i, &x) in logits.iter().enumerate() {
        if bad.is_none() && (x.is_nan() || x == f32::INFINITY) {
            bad = Some((i, x));
        }
        if x > max {
            (best, max) = (i, x);
        }
    }
    greedy_verdict(logits.len(), best, max, bad)
}

/// The checks of greedy sampling on a row of `n` logits whose first maximum `max` is at `best`
/// and whose first NaN or +inf is `bad` (index, value) — found here or on a device.
pub(crate) fn greedy_verdict(n: usize, best: usize, max: f32, bad: Option<(usize, f32)>) -> Result<u32> {
    if n == 0 {
        return Err(rayo::Error::EmptyInput { op: "sample" }.into());
    }
    if n > u32::MAX as usize {
        return Err(
            rayo::Error::InvalidArgument { op: "sample", name: "vocabulary size", value: ArgValue::Usize(n), reason: "exceeds u32 ids" }.into()
        );
    }
    if let Some((i, v)) = bad {
        return Err(Error::Logits { what: format!("sample: logit {i} of {n} is {v}") });
    }
    if max == f32::NEG_INFINITY {
        return Err(Error::Logits { what: format!("sample: all {n} logits are -inf") });
    }
    Ok(best as u32)
}

/// The `k` largest of `logits` as (id, logit), largest first, the lower id first among equals,
/// after [`check`]'s checks (what [`Sampler::sample`] keeps of them before its filters).
pub(crate) fn top_k_of(logits: &[f32], k: usize) -> Result<Vec<(u32, f32)>> {
    check(logits)?;
    let mut best = Vec::with_capacity(k);
    top_k_scan(logits.iter().enumerate().map(|(i, &logit)| Cand { id: i as u32, logit }), k, &mut best);
    Ok(best.iter().map(|c| (c.id, c.logit)).collect())
}

/// Up to this `k`, top-k keeps a sorted buffer of the best while scanning once (most tokens are
/// rejected by one comparison) instead of a selection over the whole vocabulary.
const SCAN_TOP_K: usize = 128;

/// The `k` best of `all` into `best`, largest first.
fn top_k_scan(all: impl Iterator<Item = Cand>, k: usize, best: &mut Vec<Cand>) {
    best.clear();
    for c in all {
        if best.len() == k {
            if by_logit_desc(&c, &best[k - 1]).is_ge() {
                continue;
            }
            best.pop();
        }
        let at = best.partition_point(|b| by_logit_desc(b, &c).is_lt());
        best.insert(at, c);
    }
}

/// Keeps the shortest most-likely-first prefix of `cand` whose probability reaches `p`, sorted.
/// Sorts only a growing head of the candidates (256, then ×4): a language model's nucleus is
/// usually a few hundred tokens of a vocabulary of tens of thousands.
fn top_p(cand: &mut Vec<Cand>, p: f32) {
    let max = cand.iter().fold(f32::NEG_INFINITY, |m, c| m.max(c.logit));
    let total: f64 = cand.iter().map(|c| (c.logit - max).exp() as f64).sum();
    let target = p as f64 * total;
    let mut m = cand.len().min(256);
    loop {
        if m < cand.len() {
            cand.select_nth_unstable_by(m - 1, by_logit_desc);
        }
        cand[..m].sort_unstable_by(by_logit_desc);
        let mut cum = 0.0;
        for i in 0..m {
            cum += (cand[i].logit - max).exp() as f64;
            if cum >= target {
                cand.truncate(i + 1);
                return;
            }
        }
        if m == cand.len() {
            return; // rounding: everything
        }
        m = cand.len().min(m * 4);
    }
}

/// Softmax of the candidates' logits divided by `t` into `out` (exponentials in f32, the sum in
/// f64). Subtracting the maximum before dividing keeps a tiny temperature from overflowing:
/// every exponent is ≤ 0.
fn softmax(cand: &[Cand], t: f32, out: &mut Vec<f64>) {
    let max = cand.iter().fold(f32::NEG_INFINITY, |m, c| m.max(c.logit));
    out.clear();
    out.extend(cand.iter().map(|c| ((c.logit - max) / t).exp() as f64));
    let sum: f64 = out.iter().sum();
    out.iter_mut().for_each(|p| *p /= sum);
}

#[cfg(test)]
#[path = "sample_tests.rs"]
mod tests;
