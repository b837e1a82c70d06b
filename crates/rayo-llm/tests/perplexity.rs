//! `rayo_llm::perplexity` against llama-perplexity on real files: SmolLM2-135M-Instruct Q4_1
//! and Gemma 3 270M over the Debian Policy Manual (scripts/fetch-text.sh), chunks of 512, the
//! chunks llama.cpp scored (tests/data/perplexity-ref.txt, from scripts/ref/perplexity-refs.sh):
//! the same number of scored tokens, and a perplexity within 0.5% of llama.cpp's.
//! Without the text or a model, a `SKIP perplexity: ...` line; `RAYO_REQUIRE_TEXT=1` (with the
//! models' own variables) makes that a failure.

mod llama_ref;

use rayo_llm::cpu::Cpu;
use rayo_llm::perplexity::{self, Perplexity};
use rayo_llm::{KvType, Model, Session};
use std::path::PathBuf;

/// llama-perplexity's line for model `name`: (chunks, tokens scored, PPL).
fn reference(name: &str) -> (usize, usize, f64) {
    let path = llama_ref::data_dir().join("perplexity-ref.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let line = text.lines().find(|l| l.split_whitespace().take(2).eq(["ppl", name])).unwrap_or_else(|| panic!("no `ppl {name}` line"));
    let f: Vec<&str> = line.split_whitespace().collect();
    (f[4].parse().unwrap(), f[5].parse().unwrap(), f[6].parse().unwrap())
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
    let (chunks, scored, want) = reference(name);
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
