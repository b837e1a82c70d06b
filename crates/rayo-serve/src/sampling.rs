//! Choosing a request's next token on the host from the logits a step returns: OpenAI's
//! frequency and presence penalties and `ignore_eos` applied to a copy of the logits, then
//! [`rayo_llm::sample::Sampler`] (repetition penalty, top-k, top-p, min-p, temperature, the
//! seeded draw; greedy is the first maximum, exactly as `rayo generate` picks). And the
//! log-probabilities a request may ask for.

use crate::api::Sampling;
use rayo_llm::sample::{Sampler, SamplerConfig};
use std::collections::HashMap;

/// One sequence's sampler.
pub struct SeqSampler {
    sampler: Sampler,
    frequency: f32,
    presence: f32,
    /// How often each token has been generated (for the OpenAI penalties).
    counts: HashMap<u32, u32>,
    /// Token ids whose logits are set to -inf (`ignore_eos`: the end-of-generation tokens).
    banned: Vec<u32>,
    scratch: Vec<f32>,
}

impl SeqSampler {
    /// A sampler for `s`; `banned` ids are never drawn. Errors: the values
    /// [`SamplerConfig::validate`] rejects.
    pub fn new(s: &Sampling, banned: Vec<u32>) -> Result<SeqSampler, String> {
        let seed = s.seed.unwrap_or_else(|| {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            t ^ fastrand_seed()
        });
        let cfg = SamplerConfig {
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            min_p: s.min_p,
            repeat_penalty: s.repetition_penalty,
            repeat_last_n: 64,
            seed,
        };
        let sampler = Sampler::new(cfg).map_err(|e| e.to_string())?;
        Ok(SeqSampler { sampler, frequency: s.frequency_penalty, presence: s.presence_penalty, counts: HashMap::new(), banned, scratch: Vec::new() })
    }

    /// The next token after `history` (prompt and completion so far) from `logits`.
    pub fn next(&mut self, logits: &[f32], history: &[u32]) -> Result<u32, String> {
        let penalized = (self.frequency != 0.0 || self.presence != 0.0) && !self.counts.is_empty();
        if !penalized && self.banned.is_empty() {
            return self.sampler.sample(logits, history).map_err(|e| e.to_string());
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(logits);
        if penalized {
            for (&id, &n) in &self.counts {
                if let Some(l) = self.scratch.get_mut(id as usize) {
                    *l -= n as f32 * self.frequency + self.presence;
                }
            }
        }
        for &id in &self.banned {
            if let Some(l) = self.scratch.get_mut(id as usize) {
                *l = f32::NEG_INFINITY;
            }
        }
        self.sampler.sample(&self.scratch, history).map_err(|e| e.to_string())
    }

    /// How many of a step's largest logits decide the next token, when they do: greedy without
    /// penalties takes the first of them that is not banned, so one more than the banned ids.
    /// `None`: the draw needs every logit.
    pub fn best_needed(&self) -> Option<usize> {
        let penalized = self.frequency != 0.0 || self.presence != 0.0;
        (self.sampler.is_plain_greedy() && !penalized).then_some(self.banned.len() + 1)
    }

    /// The next token from a step's largest logits (at least [`SeqSampler::best_needed`] of
    /// them, largest first, the lower id first among equals): the first not banned, as
    /// [`SeqSampler::next`] picks from all of them.
    pub fn next_from_best(&self, best: &[(u32, f32)]) -> Result<u32, String> {
        match best.iter().find(|(id, _)| !self.banned.contains(id)) {
            Some(&(id, logit)) if logit > f32::NEG_INFINITY => Ok(id),
            _ => Err("no finite logit outside the banned tokens".to_string()),
        }
    }

    /// Records a generated token (the OpenAI penalties count them).
    pub fn accept(&mut self, id: u32) {
        if self.frequency != 0.0 || self.presence != 0.0 {
            *self.counts.entry(id).or_insert(0) += 1;
        }
    }
}

/// A little entropy besides the clock, for requests without a seed (two requests in the same
/// nanosecond draw differently).
fn fastrand_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);
    N.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
}

/// The log-probability of `id` under softmax(`logits`) and the `top` most likely (id,
/// log-probability), most likely first (the lower id first among equals).
pub fn logprobs(logits: &[f32], id: u32, top: usize) -> (f32, Vec<(u32, f32)>) {
    let max = logits.iter().copied().filter(|x| !x.is_nan()).fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().filter(|x| !x.is_nan()).map(|&x| ((x - max) as f64).exp()).sum();
    let norm = max as f64 + sum.ln();
    let lp = |x: f32| (x as f64 - norm) as f32;
    let chosen = logits.get(id as usize).map_or(f32::NEG_INFINITY, |&x| lp(x));
    let mut best: Vec<(u32, f32)> = Vec::with_capacity(top + 1);
    if top > 0 {
        for (i, &x) in logits.iter().enumerate() {
            if x.is_nan() || (best.len() == top && x <= best[top - 1].1) {
                continue;
            }
            let at = best.partition_point(|b| b.1 >= x);
            best.insert(at, (i as u32, x));
            best.truncate(top);
        }
    }
    (chosen, best.into_iter().map(|(i, x)| (i, lp(x))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn greedy() -> Sampling {
        Sampling { temperature: 0.0, ..Sampling::default() }
    }

    #[test]
    fn greedy_is_the_first_maximum() {
        let mut s = SeqSampler::new(&greedy(), vec![]).unwrap();
        assert_eq!(s.next(&[0.0, 3.0, 1.0, 3.0], &[]).unwrap(), 1);
    }

    #[test]
    fn the_best_logits_pick_what_all_of_them_pick() {
        let logits = [0.5, 3.0, 1.0, 3.0, 2.5];
        let best = |k: usize| {
            rayo_llm::sample::Sampler::new(rayo_llm::sample::SamplerConfig::greedy()).map(|_| {
                let mut v: Vec<(u32, f32)> = logits.iter().enumerate().map(|(i, &l)| (i as u32, l)).collect();
                v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                v.truncate(k);
                v
            })
        };
        for banned in [vec![], vec![1], vec![1, 3]] {
            let mut s = SeqSampler::new(&greedy(), banned.clone()).unwrap();
            let k = s.best_needed().unwrap();
            assert_eq!(k, banned.len() + 1);
            assert_eq!(s.next_from_best(&best(k).unwrap()).unwrap(), s.next(&logits, &[]).unwrap(), "banned {banned:?}");
        }
        // a draw, or a penalty, needs every logit
        assert_eq!(SeqSampler::new(&Sampling::default(), vec![]).unwrap().best_needed(), None);
        assert_eq!(SeqSampler::new(&Sampling { presence_penalty: 0.5, ..greedy() }, vec![]).unwrap().best_needed(), None);
        assert_eq!(SeqSampler::new(&Sampling { repetition_penalty: 1.1, ..greedy() }, vec![]).unwrap().best_needed(), None);
    }

    #[test]
    fn banned_tokens_and_penalties_move_the_choice() {
        let mut s = SeqSampler::new(&greedy(), vec![1]).unwrap();
        assert_eq!(s.next(&[0.0, 3.0, 1.0, 2.0], &[]).unwrap(), 3);
        let mut s = SeqSampler::new(&Sampling { frequency_penalty: 1.5, ..greedy() }, vec![]).unwrap();
        let logits = [0.0, 3.0, 2.0];
        assert_eq!(s.next(&logits, &[]).unwrap(), 1);
        s.accept(1);
        assert_eq!(s.next(&logits, &[1]).unwrap(), 2, "3 - 1.5 < 2");
        let mut s = SeqSampler::new(&Sampling { presence_penalty: 0.5, ..greedy() }, vec![]).unwrap();
        s.accept(1);
        s.accept(1);
        assert_eq!(s.next(&logits, &[]).unwrap(), 1, "presence counts once: 3 - 0.5 > 2");
    }

    #[test]
    fn a_seed_gives_one_sequence() {
        let s = Sampling { temperature: 1.0, top_k: 0, top_p: 1.0, min_p: 0.0, seed: Some(7), ..Sampling::default() };
        let logits: Vec<f32> = (0..50).map(|i| (i % 7) as f32 * 0.3).collect();
        let draw = || {
            let mut a = SeqSampler::new(&s, vec![]).unwrap();
            (0..20).map(|_| a.next(&logits, &[]).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(draw(), draw());
    }

    #[test]
    fn logprobs_are_a_log_softmax() {
        let (lp, top) = logprobs(&[0.0, (2f32).ln(), 0.0, (4f32).ln()], 1, 2);
        assert!((lp - (2.0f32 / 8.0).ln()).abs() < 1e-6, "{lp}");
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), [3, 1]);
        assert!((top[0].1 - 0.5f32.ln()).abs() < 1e-6);
        let (_, top) = logprobs(&[1.0, 1.0, 1.0], 0, 2);
        assert_eq!(top.iter().map(|t| t.0).collect::<Vec<_>>(), [0, 1], "equal logits: lower id first");
        assert!(logprobs(&[1.0, 2.0], 0, 0).1.is_empty());
    }
}
