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
        // scripts/test.sh fetches them: there, their absence is a failure.
        assert!(std::env::var_os("RAYO_REQUIRE_VOCABS").is_none(), "RAYO_REQUIRE_VOCABS is set but {} is absent", dir.display());
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

fn smollm2() -> Option<GgufFile> {
    let path =
        std::env::var_os("RAYO_SMOLLM2").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"));
    if !path.exists() {
        assert!(std::env::var_os("RAYO_REQUIRE_SMOLLM2").is_none(), "RAYO_REQUIRE_SMOLLM2 is set but {} is absent", path.display());
        println!("SKIP tokenizer: no SmolLM2 at {} (run scripts/fetch-smollm2.sh or set RAYO_SMOLLM2)", path.display());
        return None;
    }
    Some(GgufFile::open(&path).unwrap())
}

/// The committed corpus and llama-tokenize's ids for it (parse_special, then not).
fn corpus() -> Vec<(String, Vec<u32>, Vec<u32>)> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let text = std::fs::read_to_string(data.join("tokenizer-corpus.txt")).unwrap();
    let golden = std::fs::read_to_string(data.join("tokenizer-golden-smollm2.txt")).unwrap();
    let ids = |line: &str, tag: &str| -> Vec<u32> {
        let list = line.strip_prefix(tag).unwrap().trim().trim_start_matches('[').trim_end_matches(']');
        list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect()
    };
    let lines: Vec<&str> = golden.lines().collect();
    let cases: Vec<&str> = text.split("\n__case__\n").collect();
    assert_eq!(cases.len() * 2, lines.len(), "corpus and golden ids differ in number of cases");
    cases.iter().enumerate().map(|(i, c)| (c.to_string(), ids(lines[2 * i], "parse "), ids(lines[2 * i + 1], "noparse "))).collect()
}

#[test]
fn smollm2_matches_llama_tokenize_on_corpus() {
    let Some(file) = smollm2() else { return };
    let t0 = std::time::Instant::now();
    let tok = Tokenizer::from_gguf(file.metadata()).unwrap();
    println!("SmolLM2 tokenizer built in {:.1} ms ({} tokens)", t0.elapsed().as_secs_f64() * 1e3, tok.vocab_size());
    assert_eq!(tok.vocab_size(), 49152);
    assert_eq!((tok.bos(), tok.eos()), (Some(1), Some(2)));
    assert!(!tok.adds_bos());
    // llama.cpp's EOG set for SmolLM2: <|endoftext|>, <|im_end|>, <reponame> (FIM repo).
    assert_eq!(tok.eog_ids(), vec![0, 2, 4]);
    let cases = corpus();
    let mut bad = Vec::new();
    for (text, parse, noparse) in &cases {
        // llama-tokenize passes add_special = the model's add_bos (false here).
        for (ps, want) in [(true, parse), (false, noparse)] {
            let got = tok.encode(text, tok.adds_bos(), ps).unwrap();
            if &got != want {
                bad.push(format!("{text:?} parse_special={ps}\n  want {want:?}\n  got  {got:?}"));
            }
        }
        assert_eq!(&tok.decode(parse).unwrap(), text, "decode(encode(x)) with special tokens parsed");
        assert_eq!(&tok.decode(noparse).unwrap(), text, "decode(encode(x)) without");
    }
    assert!(bad.is_empty(), "{} of {} encodings differ from llama-tokenize:\n{}", bad.len(), 2 * cases.len(), bad.join("\n"));
    // The corpus must exercise special tokens: parsing them changes some encodings.
    assert!(cases.iter().filter(|(_, p, n)| p != n).count() >= 5);
}
