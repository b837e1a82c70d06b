//! `rayo_llm::perplexity` against llama-perplexity on real files: SmolLM2-135M-Instruct Q4_1
//! and Gemma 3 270M over the Debian Policy Manual (scripts/fetch-text.sh), chunks of 512, the
//! chunks llama.cpp scored (tests/data/perplexity-ref.txt, from scripts/ref/perplexity-refs.sh):
//! the same number of scored tokens, and a perplexity within 0.5% of llama.cpp's. The suite
//! scores the first 20 of llama.cpp's 100 chunks (against its running value there); the long
//! form is `RAYO_PPL_CHUNKS=100 cargo test --release -p rayo-llm --test perplexity`.
//! Without the text or a model, a `SKIP perplexity: ...` line; `RAYO_REQUIRE_TEXT=1` (with the
//! models' own variables) makes that a failure.

mod llama_ref;

use rayo_llm::cpu::Cpu;
use rayo_llm::perplexity::{self, Perplexity};
use rayo_llm::{KvType, Model, Session};
use std::path::PathBuf;

/// How many of llama.cpp's 100 chunks to score: `RAYO_PPL_CHUNKS` (1 to 100; the long form is
/// 100), else 20. The running perplexity after each chunk is in the reference too, so a prefix of
/// the chunks checks the same thing in a fifth of the time.
fn chunks_to_score() -> usize {
    std::env::var("RAYO_PPL_CHUNKS").ok().map_or(20, |v| v.parse().unwrap_or_else(|_| panic!("RAYO_PPL_CHUNKS={v}: not a number of chunks")))
}

/// llama-perplexity's figures for model `name` after its first `n` chunks: (chunks, tokens
/// scored, PPL): its final line for all of them, else its running value after chunk `n` (4
/// decimals).
fn reference(name: &str, n: usize) -> (usize, usize, f64) {
    let path = llama_ref::data_dir().join("perplexity-ref.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let line = |key: &str| -> Vec<&str> {
        let l = text.lines().find(|l| l.split_whitespace().take(2).eq([key, name])).unwrap_or_else(|| panic!("no `{key} {name}` line"));
        l.split_whitespace().collect()
    };
    let f = line("ppl");
    let (all, scored): (usize, usize) = (f[4].parse().unwrap(), f[5].parse().unwrap());
    assert!((1..=all).contains(&n), "RAYO_PPL_CHUNKS={n}: the reference has 1 to {all} chunks");
    if n == all {
        return (all, scored, f[6].parse().unwrap());
    }
    let running = line("chunks");
    (n, scored / all * n, running[1 + n].parse().unwrap())
}

fn text(test: &str) -> Option<String> {
    let path = std::env::var_os("RAYO_PPL_TEXT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/text/debian-policy-4.6.2.0.txt"));
    if !path.exists() {
        let required = std::env::var_os("RAYO_REQUIRE_TEXT").is_some_and(|v| v != "0");
        assert!(!required, "RAYO_REQUIRE_TEXT is set but {} is absent (scripts/fetch-text.sh fetches it)", path.display());
        println!("SKIP perplexity: {test}: {} is absent (scripts/fetch-text.sh fetches it)", path.display());
        return None;
    }
    Some(std::fs::read_to_string(path).unwrap())
}

/// rayo's perplexity of `model` over the text in llama.cpp's chunks, against its figure.
fn check(name: &str, model: PathBuf, text: &str) {
    let (chunks, scored, want) = reference(name, chunks_to_score());
    let m = Model::open(&model).unwrap();
    let tokens = perplexity::text_tokens(m.tokenizer(), text).unwrap();
    assert_eq!(perplexity::chunks(tokens.len(), 512, Some(chunks)).unwrap(), chunks, "{name}: the text holds {} tokens", tokens.len());
    let mut s = Session::new(&m, Cpu::new(m.file().clone(), 2), perplexity::session_options(512, KvType::F16)).unwrap();
    let t0 = std::time::Instant::now();
    let p: Perplexity = perplexity::perplexity(&mut s, &tokens, 512, chunks, perplexity::chunk_bos(m.tokenizer()), &mut |_, _| Ok(())).unwrap();
    let rel = p.ppl() / want - 1.0;
    println!(
        "perplexity {name}: rayo {:.4} +/- {:.5}, llama.cpp {want:.4} ({:+.3}%), {} tokens scored in {chunks} chunks of 512 ({:.1} s)",
        p.ppl(),
        p.uncertainty(),
        100.0 * rel,
        p.count,
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(p.count, scored, "{name}: tokens scored");
    assert!(rel.abs() < 0.005, "{name}: rayo's perplexity {} is {:+.3}% from llama.cpp's {want}", p.ppl(), 100.0 * rel);
}

#[test]
fn smollm2_q4_1_perplexity_equals_llama_perplexity() {
    let Some(text) = text("smollm2") else { return };
    let Some(model) = llama_ref::smollm2("perplexity smollm2") else { return };
    check("smollm2-Q4_1", model, &text);
}

#[test]
fn gemma3_perplexity_equals_llama_perplexity() {
    let Some(text) = text("gemma3") else { return };
    let Some(model) = llama_ref::GEMMA3_MODEL.path("perplexity") else { return };
    check("gemma3", model, &text);
}
