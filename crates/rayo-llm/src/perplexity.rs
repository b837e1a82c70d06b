//! Perplexity over a text, as llama.cpp's `llama-perplexity` computes it: the tokens cut into
//! chunks of `ctx`, each run from an empty cache (its first token replaced by BOS where the
//! vocabulary adds one), each scored on its second half: the log-probability of token `j + 1`
//! after positions `ctx/2 ..= ctx − 2`. PPL = exp(mean negative log-probability), and its
//! uncertainty from the spread of those values.

use crate::backend::KvType;
use crate::session::{Forward, Logits, SessionOptions};
use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

/// Rows of a chunk's second half run at once: at least 64, so that a batch's attention takes
/// the path of a long prompt (as the chunk would in one batch), and the output head is read
/// once per 64 rows.
pub const SCORE_ROWS: usize = 64;

/// A session for chunks of `ctx` tokens: its cache holds one chunk, and the scored rows' logits
/// come [`SCORE_ROWS`] at a time.
pub fn session_options(ctx: usize, kv_type: KvType) -> SessionOptions {
    SessionOptions { context: ctx, kv_type, batch: 256, logit_rows: SCORE_ROWS }
}

/// The running sums of a perplexity computation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Perplexity {
    /// Σ −log p, Σ (log p)², over `count` scored tokens.
    pub nll: f64,
    pub nll2: f64,
    pub count: usize,
}

impl Perplexity {
    /// exp(mean negative log-probability).
    pub fn ppl(&self) -> f64 {
        (self.nll / self.count as f64).exp()
    }

    /// llama-perplexity's "+/-": the standard error of the mean log-probability, times PPL.
    pub fn uncertainty(&self) -> f64 {
        let n = self.count as f64;
        let mean = self.nll / n;
        let var = self.nll2 / n - mean * mean;
        if var > 0.0 && self.count > 1 {
            (var / (n - 1.0)).sqrt() * self.ppl()
        } else {
            0.0
        }
    }

    /// Adds token `next`'s log-probability under `logits`, as llama.cpp's `log_softmax`: the
    /// maximum in f32, the sum of `expf(x − max)` in f64. Errors: a NaN or infinite logit.
    fn add(&mut self, logits: &[f32], next: u32) -> Result<()> {
        let max = logits.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        if !max.is_finite() || logits.iter().any(|v| v.is_nan()) {
            return Err(Error::Perplexity(format!("logits with a NaN or infinite value (largest {max})")));
        }
        let sum: f64 = logits.iter().map(|&x| (x - max).exp() as f64).sum();
        let lp = (logits[next as usize] - max) as f64 - sum.ln();
        self.nll -= lp;
        self.nll2 += lp * lp;
        self.count += 1;
        Ok(())
    }
}

/// A text's tokens as llama-perplexity takes them from its `-f` file: one trailing newline
/// dropped, the model's BOS added, special-token text taken as plain text.
pub fn text_tokens(tok: &Tokenizer, text: &str) -> Result<Vec<u32>> {
    tok.encode(text.strip_suffix('\n').unwrap_or(text), true, false)
}

/// The token that replaces each chunk's first: BOS, where the model adds one.
pub fn chunk_bos(tok: &Tokenizer) -> Option<u32> {
    tok.bos().filter(|_| tok.adds_bos())
}

/// The chunks `tokens` holds: `min(tokens / ctx, chunks)`. Errors, as llama-perplexity's: fewer
/// than `2 · ctx` tokens, a `ctx` under 4.
pub fn chunks(tokens: usize, ctx: usize, chunks: Option<usize>) -> Result<usize> {
    if ctx < 4 {
        return Err(Error::Perplexity(format!("a context of {ctx} tokens is too short (at least 4)")));
    }
    if tokens < 2 * ctx {
        return Err(Error::Perplexity(format!("the text tokenizes to {tokens} tokens; a context of {ctx} needs at least {} (two chunks)", 2 * ctx)));
    }
    Ok((tokens / ctx).min(chunks.unwrap_or(usize::MAX)))
}

/// Perplexity of `tokens` in chunks of `ctx` ([`chunks`] of them) on `run`, whose context holds
/// at least `ctx` positions; `bos`: the token that replaces each chunk's first (llama.cpp does
/// this where the vocabulary adds BOS). `progress` sees the sums after each chunk (its index
/// from 1) and may stop the run with an error.
pub fn perplexity(
    run: &mut dyn Forward,
    tokens: &[u32],
    ctx: usize,
    chunks: usize,
    bos: Option<u32>,
    progress: &mut dyn FnMut(usize, &Perplexity) -> Result<()>,
) -> Result<Perplexity> {
    if run.context() < ctx {
        return Err(Error::ContextFull { tokens: ctx, pos: 0, context: run.context() });
    }
    let (vocab, first) = (run.vocab(), ctx / 2);
    let mut p = Perplexity::default();
    for c in 0..chunks {
        let chunk = tokens.get(c * ctx..(c + 1) * ctx).ok_or_else(|| Error::Perplexity(format!("chunk {c} is past the {} tokens", tokens.len())))?;
        let mut input = chunk.to_vec();
        if let Some(b) = bos {
            input[0] = b;
        }
        run.rewind(0);
        // the first half only fills the cache
        run.forward(&input[..first], Logits::Last)?;
        // the second half, scored (its last position predicts past the chunk: not scored)
        for r0 in (first..ctx - 1).step_by(SCORE_ROWS) {
            let r1 = (r0 + SCORE_ROWS).min(ctx);
            let logits = run.forward(&input[r0..r1], Logits::All)?;
            for (j, row) in (r0..r1.min(ctx - 1)).zip(logits.chunks_exact(vocab)) {
                p.add(row, chunk[j + 1])?;
            }
        }
        progress(c + 1, &p)?;
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model whose logits after a token `t` put `boost` on `t + 1` (mod `vocab`) and 0 elsewhere;
    /// it records the inputs it saw.
    struct Next {
        vocab: usize,
        boost: f32,
        pos: usize,
        seen: Vec<(usize, Vec<u32>)>,
    }

    impl Forward for Next {
        fn forward(&mut self, tokens: &[u32], which: Logits) -> Result<Vec<f32>> {
            self.seen.push((self.pos, tokens.to_vec()));
            self.pos += tokens.len();
            let rows: &[u32] = if which == Logits::Last { &tokens[tokens.len() - 1..] } else { tokens };
            let (vocab, boost) = (self.vocab, self.boost);
            Ok(rows.iter().flat_map(|&t| (0..vocab).map(move |i| if i == (t as usize + 1) % vocab { boost } else { 0.0 })).collect())
        }
        fn forward_greedy(&mut self, _: &[u32]) -> Result<u32> {
            unreachable!()
        }
        fn forward_top_k(&mut self, _: &[u32], _: usize) -> Result<Vec<(u32, f32)>> {
            unreachable!()
        }
        fn vocab(&self) -> usize {
            self.vocab
        }
        fn rewind(&mut self, pos: usize) {
            self.pos = self.pos.min(pos);
        }
        fn position(&self) -> usize {
            self.pos
        }
        fn context(&self) -> usize {
            1 << 20
        }
        fn backend_name(&self) -> &'static str {
            "test"
        }
        fn step_ops(&self) -> usize {
            0
        }
    }

    /// Against the definition in f64: every scored token is `t + 1` after `t`, so each
    /// log-probability is that of the boosted entry; PPL = exp of its negation, no spread.
    /// Chunks start from an empty cache with BOS first, and only the second halves are scored.
    #[test]
    fn scores_the_second_half_of_each_chunk_as_llama_perplexity() {
        let (vocab, boost, ctx) = (10usize, 2.5f32, 200usize);
        let tokens: Vec<u32> = (0..1000u32).map(|i| i % vocab as u32).collect();
        let mut m = Next { vocab, boost, pos: 0, seen: vec![] };
        let n = chunks(tokens.len(), ctx, None).unwrap();
        assert_eq!(n, 5);
        let mut calls = vec![];
        let p = perplexity(&mut m, &tokens, ctx, n, Some(7), &mut |c, p| {
            calls.push((c, p.count));
            Ok(())
        })
        .unwrap();
        let lp = boost as f64 - ((boost as f64).exp() + (vocab as f64 - 1.0)).ln();
        assert_eq!(p.count, 5 * (ctx - ctx / 2 - 1));
        assert!((p.ppl() / (-lp).exp() - 1.0).abs() < 1e-7, "{} {}", p.ppl(), (-lp).exp());
        assert!(p.uncertainty() < 1e-6);
        assert_eq!(calls, (1..=5).map(|c| (c, c * 99)).collect::<Vec<_>>());
        // each chunk: from position 0, BOS first, then its tokens
        let starts: Vec<&(usize, Vec<u32>)> = m.seen.iter().filter(|(pos, _)| *pos == 0).collect();
        assert_eq!(starts.len(), 5);
        for (c, (_, t)) in starts.iter().enumerate() {
            assert_eq!(t[0], 7);
            assert_eq!(&t[1..], &tokens[c * ctx + 1..c * ctx + ctx / 2]);
        }
    }

    /// A wrong prediction costs its log-probability: a model that never boosts the next token
    /// has PPL = vocab (uniform logits).
    #[test]
    fn uniform_logits_give_the_vocabulary_size() {
        let tokens: Vec<u32> = (0..64u32).map(|i| (i * 7) % 5).collect();
        let mut m = Next { vocab: 5, boost: 0.0, pos: 0, seen: vec![] };
        let p = perplexity(&mut m, &tokens, 16, chunks(64, 16, Some(3)).unwrap(), None, &mut |_, _| Ok(())).unwrap();
        assert_eq!(p.count, 3 * 7);
        assert!((p.ppl() - 5.0).abs() < 1e-9, "{}", p.ppl());
    }

    #[test]
    fn too_few_tokens_and_bad_logits_are_errors() {
        let e = chunks(1000, 512, None).unwrap_err().to_string();
        assert!(e.contains("1000 tokens") && e.contains("at least 1024"), "{e}");
        assert!(chunks(100, 2, None).is_err());
        let mut p = Perplexity::default();
        assert!(p.add(&[0.0, f32::NAN], 0).is_err());
        assert!(p.add(&[f32::INFINITY, 0.0], 0).is_err());
        assert_eq!(p.count, 0);
    }
}
