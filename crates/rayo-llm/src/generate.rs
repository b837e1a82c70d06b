//! The generation loop: the prompt in one batched step, then one token at a time, sampled from
//! the logits, streamed as text, until an end-of-generation token, the token budget or the
//! context's end.

use crate::sample::Sampler;
use crate::session::{Forward, Logits};
use crate::tokenizer::Tokenizer;
use crate::utf8::Utf8Stream;
use crate::{Error, Result};
use std::time::Instant;

/// Why generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The model produced this end-of-generation token (not printed).
    EndOfGeneration(u32),
    /// `max_tokens` were generated.
    MaxTokens,
    /// The KV cache is full.
    ContextFull,
}

/// What a generation did, and how fast.
#[derive(Clone, Debug)]
pub struct Stats {
    pub prompt_tokens: usize,
    /// The generated token ids (an end-of-generation token excluded).
    pub tokens: Vec<u32>,
    /// Seconds for the prompt (one batched forward pass and the first sample).
    pub prefill_s: f64,
    /// Seconds for the tokens after the first.
    pub decode_s: f64,
    pub stop: Stop,
}

impl Stats {
    /// Prompt tokens per second.
    pub fn prefill_tokens_per_s(&self) -> f64 {
        self.prompt_tokens as f64 / self.prefill_s.max(1e-12)
    }
    /// Generated tokens per second after the first (each one a forward pass).
    pub fn decode_tokens_per_s(&self) -> f64 {
        self.tokens.len().saturating_sub(1) as f64 / self.decode_s.max(1e-12)
    }
}

/// Runs `prompt` (token ids) at the session's position, then generates up to `max_tokens`
/// tokens, calling `on_text` with each complete piece of text as it arrives.
pub fn generate(
    run: &mut dyn Forward,
    tokenizer: &Tokenizer,
    sampler: &mut Sampler,
    prompt: &[u32],
    max_tokens: usize,
    on_text: &mut dyn FnMut(&str) -> Result<()>,
) -> Result<Stats> {
    if prompt.is_empty() {
        return Err(Error::EmptyPrompt);
    }
    let t0 = Instant::now();
    // greedy draws, and top-k's candidates, are found where the logits are (a device backend
    // reads one id or k pairs, not the logits)
    let greedy = sampler.is_plain_greedy();
    let top_k = sampler.top_k_only(run.vocab());
    let mut next = |run: &mut dyn Forward, tokens: &[u32], history: &[u32]| -> Result<u32> {
        if greedy {
            return run.forward_greedy(tokens);
        }
        if let Some(k) = top_k {
            let top = run.forward_top_k(tokens, k)?;
            return Ok(sampler.sample_top(&top));
        }
        let logits = run.forward(tokens, Logits::Last)?;
        sampler.sample(&logits, history)
    };
    if max_tokens == 0 {
        run.forward(prompt, Logits::Last)?;
    }
    // the tokens of the next pass: the prompt, then each drawn token
    let mut input = prompt.to_vec();
    let mut history = prompt.to_vec();
    let mut text = Utf8Stream::default();
    let mut stats = Stats { prompt_tokens: prompt.len(), tokens: Vec::new(), prefill_s: 0.0, decode_s: 0.0, stop: Stop::MaxTokens };
    let mut t1 = Instant::now();
    while stats.tokens.len() < max_tokens {
        let id = next(run, &input, &history)?;
        if stats.tokens.is_empty() {
            stats.prefill_s = t0.elapsed().as_secs_f64();
            t1 = Instant::now();
        }
        if tokenizer.is_eog(id) {
            stats.stop = Stop::EndOfGeneration(id);
            break;
        }
        stats.tokens.push(id);
        history.push(id);
        let piece = text.push(tokenizer.token_bytes(id)?);
        if !piece.is_empty() {
            on_text(&piece)?;
        }
        if stats.tokens.len() == max_tokens {
            break;
        }
        if run.position() >= run.context() {
            stats.stop = Stop::ContextFull;
            break;
        }
        input = vec![id];
    }
    let rest = text.finish();
    if !rest.is_empty() {
        on_text(&rest)?;
    }
    if stats.tokens.is_empty() && stats.prefill_s == 0.0 {
        stats.prefill_s = t0.elapsed().as_secs_f64();
    } else {
        stats.decode_s = t1.elapsed().as_secs_f64();
    }
    Ok(stats)
}
