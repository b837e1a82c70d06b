//! `rayo perplexity`: a model's perplexity over a text file, as llama-perplexity computes it
//! ([`rayo_llm::perplexity`]), with its progress line on stderr.

use crate::args::PerplexityArgs;
use crate::llm::{open_model, Engine};
use crate::out::{errln, outln};
use rayo_llm::perplexity::{self, Perplexity};
use rayo_llm::KvType;
use std::io::Write;
use std::time::Instant;

/// llama-perplexity's default chunk.
const DEFAULT_CTX: usize = 512;

pub fn run(a: &PerplexityArgs) -> Result<(), String> {
    if crate::llm::other_rank(&a.model)? {
        return Ok(());
    }
    let text = std::fs::read_to_string(&a.file).map_err(|e| format!("{}: {e} (a UTF-8 text file is needed)", a.file.display()))?;
    let m = open_model(&a.model.model)?;
    let ctx = a.model.ctx.unwrap_or(DEFAULT_CTX);
    let tok = m.tokenizer();
    let t0 = Instant::now();
    let tokens = perplexity::text_tokens(tok, &text).map_err(|e| e.to_string())?;
    let chunks = perplexity::chunks(tokens.len(), ctx, a.chunks.map(|c| c as usize)).map_err(|e| e.to_string())?;
    errln!(
        "rayo perplexity: {} tokens ({:.2} s to tokenize); {chunks} chunks of {ctx} on {}, {} threads",
        tokens.len(),
        t0.elapsed().as_secs_f64(),
        a.model.backend,
        a.model.threads
    );
    let kv = if a.model.kv_f32 { KvType::F32 } else { KvType::F16 };
    let opts = perplexity::session_options(ctx, kv);
    let ranks = crate::llm::Ranks::of(&a.model.ranks, &a.model.backend)?;
    let mut e = Engine::with_options(&m, &a.model.backend, ranks.threads_each(a.model.threads), opts, a.model.deterministic, &ranks)?;
    let bos = perplexity::chunk_bos(tok);
    let t1 = Instant::now();
    let mut progress = |c: usize, p: &Perplexity| -> rayo_llm::Result<()> {
        if c == 1 {
            let per = t1.elapsed().as_secs_f64();
            errln!("rayo perplexity: {per:.2} seconds per chunk, ETA {:.1} minutes", per * chunks as f64 / 60.0);
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "[{c}]{:.4},", p.ppl()).and_then(|()| err.flush());
        Ok(())
    };
    let p = perplexity::perplexity(e.forward(), &tokens, ctx, chunks, bos, &mut progress).map_err(|e| e.to_string())?;
    let secs = t1.elapsed().as_secs_f64();
    errln!("");
    errln!("rayo perplexity: {} tokens scored in {secs:.1} s ({:.1} tokens/s through the model)", p.count, (chunks * ctx) as f64 / secs);
    outln!("PPL = {:.4} +/- {:.5}", p.ppl(), p.uncertainty());
    Ok(())
}
