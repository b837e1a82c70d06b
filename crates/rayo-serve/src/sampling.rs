//! Choosing a request's next token on the host from what a step returns: the request's changes
//! to single logits ([`SeqSampler`]: `logit_bias`, OpenAI's frequency and presence penalties,
//! llama.cpp's repetition penalty, `ignore_eos`'s banned tokens), then
//! [`rayo_llm::sample::Sampler`] (top-k, top-p, min-p, temperature, the seeded draw; greedy is
//! the first maximum, exactly as `rayo generate` picks). And the log-probabilities a request may
//! ask for.
//!
//! Most requests need only a step's few largest logits, found where the logits are (a GPU reads
//! back k (id, logit) pairs a row, not the vocabulary): greedy needs the largest, a draw with
//! top-k its k largest. A change that can only lower logits (a ban, a positive penalty, a
//! repetition penalty above 1, a negative bias) on `a` tokens needs `a` more: the k best after
//! the changes are among the k + a best before them ([`SeqSampler::best_needed`]). A change that
//! may raise a logit, top-k off, or log-probabilities need every logit.

use crate::api::Sampling;
use rayo_llm::sample::{Sampler, SamplerConfig};
use std::collections::HashMap;

/// How many of the latest tokens (prompt and completion) the repetition penalty looks at.
const REPEAT_LAST_N: usize = 64;

/// One sequence's sampler.
pub struct SeqSampler {
    /// The filters and the draw (without a penalty of its own: the changes below come first).
    sampler: Sampler,
    temperature: f32,
    top_k: usize,
    frequency: f32,
    presence: f32,
    repetition: f32,
    /// `logit_bias`: added to a token's logit (sorted by id, one entry per id).
    bias: Vec<(u32, f32)>,
    /// How often each token has been generated (for the OpenAI penalties).
    counts: HashMap<u32, u32>,
    /// Token ids whose logits are set to -inf (`ignore_eos`: the end-of-generation tokens).
    banned: Vec<u32>,
    scratch: Vec<f32>,
}

/// The tokens whose logits a request changes at one step, and whether a change may raise one.
struct Touched {
    ids: Vec<u32>,
    raises: bool,
}

impl SeqSampler {
    /// A sampler for `s`; `banned` ids are never drawn. Errors: the values
    /// [`SamplerConfig::validate`] rejects.
    pub fn new(s: &Sampling, banned: Vec<u32>) -> Result<SeqSampler, String> {
        let seed = s.seed.unwrap_or_else(|| {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            t ^ fastrand_seed()
        });
        let cfg =
            SamplerConfig { temperature: s.temperature, top_k: s.top_k, top_p: s.top_p, min_p: s.min_p, repeat_penalty: 1.0, repeat_last_n: 0, seed };
        let sampler = Sampler::new(cfg).map_err(|e| e.to_string())?;
        // the repetition penalty's checks, as the sampler's own
        SamplerConfig { repeat_penalty: s.repetition_penalty, ..SamplerConfig::greedy() }.validate().map_err(|e| e.to_string())?;
        let mut bias: Vec<(u32, f32)> = Vec::new();
        for &(id, b) in &s.logit_bias {
            match bias.iter_mut().find(|e| e.0 == id) {
                Some(e) => e.1 = b,
                None => bias.push((id, b)),
            }
        }
        bias.retain(|e| e.1 != 0.0);
        bias.sort_unstable_by_key(|e| e.0);
        Ok(SeqSampler {
            sampler,
            temperature: s.temperature,
            top_k: s.top_k,
            frequency: s.frequency_penalty,
            presence: s.presence_penalty,
            repetition: s.repetition_penalty,
            bias,
            counts: HashMap::new(),
            banned,
            scratch: Vec::new(),
        })
    }

    /// The tokens of the repetition penalty's window after `history`.
    fn window<'h>(&self, history: &'h [u32]) -> &'h [u32] {
        if self.repetition == 1.0 {
            return &[];
        }
        &history[history.len().saturating_sub(REPEAT_LAST_N)..]
    }

    /// `logit` of token `id` after the request's changes (`window`: [`SeqSampler::window`]), in
    /// llama.cpp's order: the bias, then the penalties; a banned token is -inf.
    fn adjust(&self, id: u32, logit: f32, window: &[u32]) -> f32 {
        if self.banned.contains(&id) {
            return f32::NEG_INFINITY;
        }
        let mut l = logit;
        if let Ok(i) = self.bias.binary_search_by_key(&id, |e| e.0) {
            l += self.bias[i].1;
        }
        if let Some(&n) = self.counts.get(&id) {
            l -= n as f32 * self.frequency + self.presence;
        }
        if window.contains(&id) {
            l = if l > 0.0 { l / self.repetition } else { l * self.repetition };
        }
        l
    }

    /// The tokens [`SeqSampler::adjust`] changes after `history`.
    fn touched(&self, history: &[u32]) -> Touched {
        let window = self.window(history);
        let counted = self.frequency != 0.0 || self.presence != 0.0;
        let mut ids: Vec<u32> = self.banned.iter().chain(self.bias.iter().map(|e| &e.0)).chain(window).copied().collect();
        if counted {
            ids.extend(self.counts.keys());
        }
        ids.sort_unstable();
        ids.dedup();
        let raises = self.bias.iter().any(|e| e.1 > 0.0)
            || (counted && self.counts.values().any(|&n| n as f32 * self.frequency + self.presence < 0.0))
            || (!window.is_empty() && self.repetition < 1.0);
        Touched { ids, raises }
    }

    /// The next token after `history` (prompt and completion so far) from every logit.
    pub fn next(&mut self, logits: &[f32], history: &[u32]) -> Result<u32, String> {
        let touched = self.touched(history);
        if touched.ids.is_empty() {
            return self.sampler.sample(logits, history).map_err(|e| e.to_string());
        }
        let window = self.window(history);
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.extend_from_slice(logits);
        for &id in &touched.ids {
            if let Some(l) = scratch.get_mut(id as usize) {
                // (a NaN stays: the sampler's checks name it)
                if !l.is_nan() {
                    *l = self.adjust(id, *l, window);
                }
            }
        }
        let drawn = self.sampler.sample(&scratch, &[]).map_err(|e| e.to_string());
        self.scratch = scratch;
        drawn
    }

    /// How many of a step's largest logits decide the next token after `history` over a
    /// vocabulary of `vocab`, when a few do (see the module's documentation): greedy's one, or
    /// top-k's k, and one more for each token whose logit the request lowers. `None`: the draw
    /// needs every logit (no top-k, or a change that may raise a logit).
    pub fn best_needed(&self, history: &[u32], vocab: usize) -> Option<usize> {
        let base = match self.temperature {
            0.0 => 1,
            _ if self.top_k > 0 && self.top_k <= rayo_llm::batch::MAX_BEST && self.top_k < vocab => self.top_k,
            _ => return None,
        };
        let touched = self.touched(history);
        (!touched.raises).then_some(base + touched.ids.len()).filter(|&k| k < vocab)
    }

    /// The next token after `history` from a step's largest logits (at least
    /// [`SeqSampler::best_needed`] of them, largest first, the lower id first among equals): the
    /// token [`SeqSampler::next`] draws from all of them.
    pub fn next_from_best(&mut self, best: &[(u32, f32)], history: &[u32]) -> Result<u32, String> {
        let window = self.window(history);
        let mut cand: Vec<(u32, f32)> = best.iter().map(|&(id, l)| (id, self.adjust(id, l, window))).collect();
        cand.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        match cand.first() {
            Some(&(_, l)) if l > f32::NEG_INFINITY => {}
            _ => return Err("no finite logit outside the banned tokens".to_string()),
        }
        if self.temperature == 0.0 {
            return Ok(cand[0].0);
        }
        cand.truncate(self.top_k);
        Ok(self.sampler.sample_top(&cand))
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

    /// `k` largest of `logits`, largest first, the lower id first among equals (what a step
    /// gives an item that asks for its best).
    fn best(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
        let mut v: Vec<(u32, f32)> = logits.iter().enumerate().map(|(i, &l)| (i as u32, l)).collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        v.truncate(k);
        v
    }

    #[test]
    fn the_best_logits_pick_what_all_of_them_pick() {
        let logits = [0.5, 3.0, 1.0, 3.0, 2.5];
        for banned in [vec![], vec![1], vec![1, 3]] {
            let mut s = SeqSampler::new(&greedy(), banned.clone()).unwrap();
            let k = s.best_needed(&[], logits.len()).unwrap();
            assert_eq!(k, banned.len() + 1);
            assert_eq!(s.next_from_best(&best(&logits, k), &[]).unwrap(), s.next(&logits, &[]).unwrap(), "banned {banned:?}");
        }
        // a change that may raise a logit needs every logit; so does top-k off
        let v = 100;
        assert_eq!(SeqSampler::new(&Sampling { presence_penalty: -0.5, ..greedy() }, vec![]).unwrap().best_needed(&[], v), Some(1));
        let mut s = SeqSampler::new(&Sampling { presence_penalty: -0.5, ..greedy() }, vec![]).unwrap();
        s.accept(3);
        assert_eq!(s.best_needed(&[3], v), None);
        assert_eq!(SeqSampler::new(&Sampling { logit_bias: vec![(2, 1.0)], ..greedy() }, vec![]).unwrap().best_needed(&[], v), None);
        assert_eq!(SeqSampler::new(&Sampling { repetition_penalty: 0.9, ..greedy() }, vec![]).unwrap().best_needed(&[1, 2], v), None);
        assert_eq!(SeqSampler::new(&Sampling { top_k: 0, ..Sampling::default() }, vec![]).unwrap().best_needed(&[], v), None);
        assert_eq!(SeqSampler::new(&Sampling { top_k: 129, ..Sampling::default() }, vec![]).unwrap().best_needed(&[], 1000), None);
        // lowering changes: one more logit per token they touch
        let s =
            SeqSampler::new(&Sampling { repetition_penalty: 1.3, logit_bias: vec![(7, -5.0), (9, 0.0)], ..Sampling::default() }, vec![5]).unwrap();
        assert_eq!(s.best_needed(&[1, 2, 2, 7], v), Some(40 + 4), "5, 7 and the window's 1 and 2");
        assert_eq!(s.best_needed(&[1, 2, 2, 7], 44), None, "as many as the vocabulary");
    }

    /// Over many steps of drawn tokens, with every change that lowers logits, the draw from the
    /// best logits a step would give is the draw from all of them (the same seed, so the same
    /// uniform numbers): the device's k pairs a row decide exactly what the whole row does.
    #[test]
    fn drawing_from_the_best_equals_drawing_from_every_logit() {
        let vocab = 300;
        let row = |step: usize| -> Vec<f32> {
            (0..vocab).map(|i| (((i * 7919 + step * 104_729) % 1000) as f32 / 125.0) - 4.0 + if i % 37 == 0 { 3.0 } else { 0.0 }).collect()
        };
        let configs = [
            Sampling { seed: Some(1), ..Sampling::default() },
            Sampling { seed: Some(2), top_k: 5, top_p: 1.0, min_p: 0.0, temperature: 1.5, ..Sampling::default() },
            Sampling { seed: Some(3), frequency_penalty: 0.7, presence_penalty: 0.3, ..Sampling::default() },
            Sampling { seed: Some(4), repetition_penalty: 1.5, logit_bias: vec![(0, -100.0), (37, -2.0)], ..Sampling::default() },
            Sampling { seed: Some(5), repetition_penalty: 1.2, frequency_penalty: 0.5, ..greedy() },
        ];
        for (c, cfg) in configs.iter().enumerate() {
            let (mut all, mut few) = (SeqSampler::new(cfg, vec![74, 111]).unwrap(), SeqSampler::new(cfg, vec![74, 111]).unwrap());
            let mut history: Vec<u32> = vec![3, 37, 74];
            for step in 0..200 {
                let logits = row(step);
                let k = few.best_needed(&history, vocab).unwrap_or_else(|| panic!("config {c} step {step}: every logit asked"));
                let a = all.next(&logits, &history).unwrap();
                let b = few.next_from_best(&best(&logits, k), &history).unwrap();
                assert_eq!(a, b, "config {c} step {step} (k {k})");
                assert!(![74, 111].contains(&a), "a banned token drawn");
                all.accept(a);
                few.accept(b);
                history.push(a);
            }
        }
    }

    #[test]
    fn logit_bias_moves_the_choice() {
        let logits = [0.0, 3.0, 2.0];
        let mut s = SeqSampler::new(&Sampling { logit_bias: vec![(2, 1.5)], ..greedy() }, vec![]).unwrap();
        assert_eq!(s.next(&logits, &[]).unwrap(), 2, "2 + 1.5 > 3");
        let mut s = SeqSampler::new(&Sampling { logit_bias: vec![(1, -100.0)], ..Sampling::default() }, vec![]).unwrap();
        for _ in 0..200 {
            assert_ne!(s.next(&logits, &[]).unwrap(), 1, "a bias of -100 bans");
        }
        // the last of repeated ids counts, as JSON's last key does
        let mut s = SeqSampler::new(&Sampling { logit_bias: vec![(0, 9.0), (0, 0.0)], ..greedy() }, vec![]).unwrap();
        assert_eq!(s.next(&logits, &[]).unwrap(), 1);
        // every token banned or biased away: an error, not a token
        let mut s = SeqSampler::new(&greedy(), vec![0, 1, 2]).unwrap();
        assert!(s.next(&logits, &[]).is_err());
        assert!(s.next_from_best(&best(&logits, 3), &[]).is_err());
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
