//! The tokenizer against llama.cpp: its vocab-only test files (`models/ggml-vocab-*.gguf` with
//! `.inp`/`.out` pairs, fetched by `scripts/fetch-vocabs.sh`), SmolLM2 on a committed corpus
//! with ids from `llama-tokenize` (`scripts/ref/tokenize-golden.sh`), and hostile metadata.

use std::path::{Path, PathBuf};

use rayo::gguf::GgufFile;
use rayo_llm::Tokenizer;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn vocab_dir() -> PathBuf {
    std::env::var_os("RAYO_VOCAB_DIR").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".cache/vocab"))
}

/// llama.cpp's `test-tokenizer-0` reading of a `.inp`/`.out` pair.
fn read_cases(inp: &Path, out: &Path) -> Vec<(String, Vec<u32>)> {
    let raw = std::fs::read_to_string(inp).unwrap();
    let outs: Vec<String> = std::fs::read_to_string(out).unwrap().lines().map(str::to_string).collect();
    let sep = "\n__ggml_vocab_test__\n";
    let mut inputs = Vec::new();
    let mut pos = 0;
    while pos < raw.len() {
        match raw[pos..].find(sep) {
            Some(n) => {
                inputs.push(raw[pos..pos + n].to_string());
                pos += n + sep.len();
            }
            None => {
                inputs.push(raw[pos..].to_string());
                break;
            }
        }
    }
    assert_eq!(inputs.len(), outs.len(), "{}: inputs and outputs differ in number", inp.display());
    inputs.into_iter().zip(outs).map(|(i, o)| (i, o.split_whitespace().map(|t| t.parse().unwrap()).collect())).collect()
}

/// The vocab files rayo must handle; others in the folder are tried and skipped if unsupported.
const REQUIRED: &[&str] = &["gpt-2", "llama-bpe", "qwen2", "llama-spm", "phi-3", "starcoder", "refact", "command-r", "mpt", "falcon"];

#[test]
fn llama_cpp_vocab_test_files() {
    let dir = vocab_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!("SKIP tokenizer: no vocab folder at {} (run scripts/fetch-vocabs.sh or set RAYO_VOCAB_DIR)", dir.display());
        return;
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|f| f.strip_prefix("ggml-vocab-")?.strip_suffix(".gguf").map(str::to_string))
        .collect();
    names.sort();
    let mut failures = Vec::new();
    let mut passed = Vec::new();
    for name in &names {
        let gguf = dir.join(format!("ggml-vocab-{name}.gguf"));
        let (inp, out) = (dir.join(format!("ggml-vocab-{name}.gguf.inp")), dir.join(format!("ggml-vocab-{name}.gguf.out")));
        if !inp.exists() || !out.exists() {
            continue;
        }
        let file = GgufFile::open(&gguf).unwrap();
        let tok = match Tokenizer::from_gguf(file.metadata()) {
            Ok(t) => t,
            Err(e) => {
                assert!(!REQUIRED.contains(&name.as_str()), "{name}: {e}");
                println!("skip vocab {name}: {e}");
                continue;
            }
        };
        let cases = read_cases(&inp, &out);
        let mut bad = 0;
        for (text, want) in &cases {
            let got = tok.encode(text, false, false).unwrap();
            if &got != want {
                bad += 1;
                if bad <= 3 {
                    failures.push(format!("{name}: {text:?}\n  want {want:?}\n  got  {got:?}"));
                }
            }
        }
        if bad > 0 {
            failures.push(format!("{name}: {bad} of {} cases differ", cases.len()));
        } else {
            passed.push(format!("{name} ({})", cases.len()));
        }
    }
    println!("vocab files passed: {}", passed.join(", "));
    for r in REQUIRED {
        assert!(names.iter().any(|n| n == r), "vocab file ggml-vocab-{r}.gguf missing from {}", dir.display());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
