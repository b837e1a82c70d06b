//! The tokenizer against llama.cpp: its vocab-only test files (`models/ggml-vocab-*.gguf` with
//! `.inp`/`.out` pairs, fetched by `scripts/fetch-vocabs.sh`), SmolLM2 on a committed corpus
//! with ids from `llama-tokenize` (`scripts/ref/tokenize-golden.sh`), and hostile metadata.

mod llama_ref;

use std::path::{Path, PathBuf};

use rayo::gguf::{GgufFile, Metadata};
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
const REQUIRED: &[&str] = &[
    "gpt-2", "llama-bpe", "qwen2", "qwen35", "deepseek-coder", "deepseek-llm", "gemma-4", "llama-spm", "phi-3", "starcoder", "refact", "command-r",
    "mpt", "falcon",
];

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
    llama_ref::smollm2("tokenizer").map(|p| GgufFile::open(p).unwrap())
}

/// The committed corpus and llama-tokenize's ids for it on model `name` (parse_special, then not).
fn corpus(name: &str) -> Vec<(String, Vec<u32>, Vec<u32>)> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let text = std::fs::read_to_string(data.join("tokenizer-corpus.txt")).unwrap();
    let golden = std::fs::read_to_string(data.join(format!("tokenizer-golden-{name}.txt"))).unwrap();
    let ids = |line: &str, tag: &str| -> Vec<u32> {
        let list = line.strip_prefix(tag).unwrap().trim().trim_start_matches('[').trim_end_matches(']');
        list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect()
    };
    let lines: Vec<&str> = golden.lines().collect();
    let cases: Vec<&str> = text.split("\n__case__\n").collect();
    assert_eq!(cases.len() * 2, lines.len(), "corpus and golden ids of {name} differ in number of cases");
    cases.iter().enumerate().map(|(i, c)| (c.to_string(), ids(lines[2 * i], "parse "), ids(lines[2 * i + 1], "noparse "))).collect()
}

/// Encodes the corpus as llama-tokenize did (add_special = the model's add_bos) and compares.
fn check_corpus(name: &str, tok: &Tokenizer, round_trip: bool) {
    let cases = corpus(name);
    let mut bad = Vec::new();
    for (text, parse, noparse) in &cases {
        for (ps, want) in [(true, parse), (false, noparse)] {
            let got = tok.encode(text, tok.adds_bos(), ps).unwrap();
            if &got != want {
                bad.push(format!("{text:?} parse_special={ps}\n  want {want:?}\n  got  {got:?}"));
            }
            if round_trip {
                // The bytes come back (without the BOS the model adds), but for bytes the
                // vocabulary has no token for, which llama.cpp drops (SmolLM2 lacks 0xF2, ...).
                let skip = usize::from(tok.adds_bos() && !want.is_empty() && want.first().copied() == tok.bos());
                let back: Vec<u8> = want[skip..].iter().flat_map(|&id| tok.token_bytes(id).unwrap().to_vec()).collect();
                let has = |b: u8| tok.token_id(&byte_char(b)).is_some() || tok.token_id(&format!("<0x{b:02X}>")).is_some();
                let kept: Vec<u8> = text.bytes().filter(|&b| has(b)).collect();
                assert!(back == kept, "{name}: decode(encode({text:?})) = {:?}, parse_special={ps}", String::from_utf8_lossy(&back));
            }
        }
    }
    assert!(bad.is_empty(), "{name}: {} of {} encodings differ from llama-tokenize:\n{}", bad.len(), 2 * cases.len(), bad.join("\n"));
    // The corpus exercises SmolLM2's special tokens: parsing them changes some encodings.
    if name == "smollm2" {
        assert!(cases.iter().filter(|(_, p, n)| p != n).count() >= 5);
    }
    println!("{name}: {} corpus encodings equal llama-tokenize's", 2 * cases.len());
}

#[test]
fn smollm2_matches_llama_tokenize_on_corpus() {
    let Some(file) = smollm2() else { return };
    // Build time: the fastest of 5 (the machine is shared).
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t0 = std::time::Instant::now();
        std::hint::black_box(Tokenizer::from_gguf(file.metadata()).unwrap());
        best = best.min(t0.elapsed().as_secs_f64());
    }
    let tok = Tokenizer::from_gguf(file.metadata()).unwrap();
    println!("SmolLM2 tokenizer built in {:.1} ms ({} tokens, fastest of 5)", best * 1e3, tok.vocab_size());
    assert_eq!(tok.vocab_size(), 49152);
    assert_eq!((tok.bos(), tok.eos()), (Some(1), Some(2)));
    assert!(!tok.adds_bos());
    // llama.cpp's EOG set for SmolLM2: <|endoftext|>, <|im_end|>, <reponame> (FIM repo).
    assert_eq!(tok.eog_ids(), vec![0, 2, 4]);
    check_corpus("smollm2", &tok, true);

    // Speed (printed; asserted only loosely, the machine is shared): a 64-token prompt.
    let prompt = "<|im_start|>user\nWrite a short Rust function that returns the 10th Fibonacci number, 55, and explain how it works in two sentences. Then list three ways to make it faster for n = 1000000, with one line of code each.<|im_end|>\n<|im_start|>assistant\n";
    let n = tok.encode(prompt, false, true).unwrap().len();
    let t0 = std::time::Instant::now();
    let reps = 200;
    for _ in 0..reps {
        std::hint::black_box(tok.encode(std::hint::black_box(prompt), false, true).unwrap());
    }
    let us = t0.elapsed().as_secs_f64() * 1e6 / reps as f64;
    println!("SmolLM2: encoding a {n}-token prompt takes {us:.1} us");
    assert!((40..=80).contains(&n), "{n}");
}

/// The real Qwen2.5-Coder-0.5B-Instruct file (`tokenizer.ggml.pre` = `qwen2`, 151,936 tokens
/// with Qwen2.5's special tokens) against llama-tokenize on the same file
/// (tokenizer-golden-qwen2.5-coder.txt; the same ids as llama.cpp's vocab-only qwen2 file gives).
#[test]
fn qwen2_file_matches_llama_tokenize_on_corpus() {
    let Some(path) = llama_ref::qwen2("tokenizer") else { return };
    let file = GgufFile::open(path).unwrap();
    let tok = Tokenizer::from_gguf(file.metadata()).unwrap();
    assert_eq!(tok.vocab_size(), 151_936);
    assert_eq!((tok.bos(), tok.eos(), tok.adds_bos()), (Some(151_643), Some(151_645), false));
    // llama.cpp's EOG set for this file (its load log): '</s>' (a normal token here, which
    // llama.cpp makes a control token by its text), <|endoftext|>, <|im_end|>, <|fim_pad|>,
    // <|repo_name|>, <|file_sep|>.
    assert_eq!(tok.eog_ids(), vec![128_247, 151_643, 151_645, 151_662, 151_663, 151_664]);
    check_corpus("qwen2.5-coder", &tok, true);
}

#[test]
fn vocab_files_match_llama_tokenize_on_corpus() {
    let dir = vocab_dir();
    if !dir.exists() {
        println!("SKIP tokenizer: no vocab folder at {} (run scripts/fetch-vocabs.sh or set RAYO_VOCAB_DIR)", dir.display());
        return;
    }
    // BPE decodes back to the text; SentencePiece adds its space prefix.
    let models = [
        ("gpt-2", true),
        ("llama-bpe", true),
        ("qwen2", true),
        ("qwen35", true),
        ("deepseek-coder", true),
        ("deepseek-llm", true),
        ("gemma-4", true),
        ("llama-spm", false),
        ("phi-3", false),
        ("starcoder", true),
    ];
    for (name, round_trip) in models {
        let file = GgufFile::open(dir.join(format!("ggml-vocab-{name}.gguf"))).unwrap();
        let t0 = std::time::Instant::now();
        let tok = Tokenizer::from_gguf(file.metadata()).unwrap();
        println!("{name}: built in {:.1} ms ({} tokens)", t0.elapsed().as_secs_f64() * 1e3, tok.vocab_size());
        check_corpus(name, &tok, round_trip);
        // Random text: never an error, and byte-level BPE gives the text back.
        for text in random_texts(300) {
            for ps in [false, true] {
                let ids = tok.encode(&text, false, ps).unwrap();
                if round_trip {
                    assert_eq!(tok.decode(&ids).unwrap(), text, "{name} parse_special={ps}");
                }
            }
        }
    }
}

#[test]
fn tokenizer_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Tokenizer>();
}

/// A small byte-level BPE vocabulary: the 256 byte characters, then merged tokens.
fn tiny_bpe(extra_tokens: &[&str], merges: &[&str]) -> Metadata {
    let mut tokens: Vec<String> = (0..=255u8).map(byte_char).collect();
    tokens.extend(extra_tokens.iter().map(|s| s.to_string()));
    let mut m = Metadata::new();
    m.set("tokenizer.ggml.model", "gpt2");
    m.set("tokenizer.ggml.pre", "gpt-2");
    m.set("tokenizer.ggml.tokens", tokens);
    m.set("tokenizer.ggml.merges", merges.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    m
}

/// GPT-2's character for byte `b`.
fn byte_char(b: u8) -> String {
    let printable = |x: u32| (0x21..=0x7E).contains(&x) || (0xA1..=0xAC).contains(&x) || (0xAE..=0xFF).contains(&x);
    if printable(b as u32) {
        return char::from_u32(b as u32).unwrap().to_string();
    }
    let n = (0..b as u32).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + n).unwrap().to_string()
}

#[test]
fn tiny_bpe_merges_by_rank() {
    let m = tiny_bpe(&["ab", "Ġab", "bc"], &["a b", "Ġ ab", "b c"]);
    let tok = Tokenizer::from_gguf(&m).unwrap();
    // "abc": "a b" (rank 0) wins over "b c" (rank 2).
    assert_eq!(tok.encode("abc ab", false, false).unwrap(), vec![256, b'c' as u32, 257]);
    assert_eq!(tok.decode(&tok.encode("abc ab", false, false).unwrap()).unwrap(), "abc ab");
    assert_eq!(tok.token_bytes(257).unwrap(), b" ab");
    // Defaults for gpt2 without keys: BOS = EOS = 11, not added.
    assert_eq!((tok.bos(), tok.eos(), tok.adds_bos()), (Some(11), Some(11), false));
    assert!(tok.is_eog(11) && !tok.is_eog(12));
}

fn expect_err(m: &Metadata, needle: &str) {
    match Tokenizer::from_gguf(m) {
        Ok(_) => panic!("metadata accepted; expected an error mentioning {needle:?}"),
        Err(e) => {
            let s = e.to_string();
            assert!(matches!(e, rayo_llm::Error::Tokenizer { .. }), "{s}");
            assert!(s.contains(needle), "error {s:?} does not mention {needle:?}");
        }
    }
}

#[test]
fn hostile_metadata_is_an_error_not_a_panic() {
    let ok = tiny_bpe(&["ab"], &["a b"]);
    Tokenizer::from_gguf(&ok).unwrap();
    let with = |f: &dyn Fn(&mut Metadata)| {
        let mut m = ok.clone();
        f(&mut m);
        m
    };
    expect_err(&Metadata::new(), "tokenizer.ggml.model");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.model", 7u32))), "tokenizer.ggml.model");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.model", "bert"))), "bert");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.pre", "no-such-pre"))), "no-such-pre");
    expect_err(&with(&|m| drop(m.remove("tokenizer.ggml.tokens"))), "tokenizer.ggml.tokens");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.tokens", vec![1u32, 2, 3]))), "tokenizer.ggml.tokens");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.tokens", "abc"))), "tokenizer.ggml.tokens");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.tokens", Vec::<String>::new()))), "tokenizer.ggml.tokens");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.scores", vec!["x".to_string()]))), "tokenizer.ggml.scores");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.scores", vec![0.5f32; 3]))), "tokenizer.ggml.scores");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.token_type", vec![1.0f32; 257]))), "tokenizer.ggml.token_type");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.token_type", vec![1i32; 10]))), "tokenizer.ggml.token_type");
    expect_err(&with(&|m| drop(m.remove("tokenizer.ggml.merges"))), "tokenizer.ggml.merges");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.merges", vec![3i32]))), "tokenizer.ggml.merges");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.merges", vec!["a zz".to_string()]))), "\"zz\"");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.merges", vec!["b c".to_string()]))), "\"bc\"");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.merges", vec!["ab".to_string()]))), "no space");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.bos_token_id", "one"))), "bos_token_id");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.add_bos_token", 1u8))), "add_bos_token");
    expect_err(&with(&|m| drop(m.set("tokenizer.ggml.pre", 2.0f32))), "tokenizer.ggml.pre");
    expect_err(&with(&|m| drop(m.set("general.name", vec![1u8]))), "general.name");

    // A special id past the vocabulary is ignored, as llama.cpp does (it keeps the default,
    // which is itself disabled when past the vocabulary).
    let tok = Tokenizer::from_gguf(&with(&|m| drop(m.set("tokenizer.ggml.eos_token_id", 1_000_000u32)))).unwrap();
    assert_eq!(tok.eos(), Some(11));
    let tiny = tiny_bpe(&[], &[]);
    let mut tiny_bos = tiny.clone();
    tiny_bos.set("tokenizer.ggml.bos_token_id", -5i32);
    assert_eq!(Tokenizer::from_gguf(&tiny_bos).unwrap().bos(), Some(11));

    // Ids past the vocabulary: errors.
    assert!(tok.token_bytes(256).is_ok());
    assert!(matches!(tok.token_bytes(257), Err(rayo_llm::Error::Tokenizer { .. })));
    assert!(tok.decode(&[0, u32::MAX]).is_err());

    // add_bos without a BOS token (a 3-token vocabulary: the default 11 is past it).
    let mut m = Metadata::new();
    m.set("tokenizer.ggml.model", "gpt2");
    m.set("tokenizer.ggml.tokens", vec!["a".to_string(), "b".to_string(), "ab".to_string()]);
    m.set("tokenizer.ggml.merges", vec!["a b".to_string()]);
    m.set("tokenizer.ggml.add_bos_token", true);
    let t = Tokenizer::from_gguf(&m).unwrap();
    assert_eq!(t.bos(), None);
    assert!(t.encode("ab", true, false).is_err());
    // Bytes with no token are dropped, as llama.cpp does; the pre type defaults.
    assert_eq!(t.encode("ab c", false, false).unwrap(), vec![2]);
}

#[test]
fn spm_without_byte_tokens_errors_on_unknown_text() {
    let mut m = Metadata::new();
    m.set("tokenizer.ggml.model", "llama");
    m.set(
        "tokenizer.ggml.tokens",
        vec!["<unk>".to_string(), "<s>".to_string(), "</s>".to_string(), "▁a".to_string(), "a".to_string(), "▁".to_string()],
    );
    m.set("tokenizer.ggml.scores", vec![0.0f32, 0.0, 0.0, -1.0, -2.0, -3.0]);
    m.set("tokenizer.ggml.token_type", vec![2i32, 3, 3, 1, 1, 1]);
    let t = Tokenizer::from_gguf(&m).unwrap();
    assert_eq!(t.encode("a a", true, false).unwrap(), vec![1, 3, 3]);
    assert_eq!(t.decode(&[3, 3]).unwrap(), " a a");
    let e = t.encode("a z", false, false).unwrap_err();
    assert!(e.to_string().contains("0x7A"), "{e}");
    // Control tokens are cut out only when parsing special tokens.
    assert_eq!(t.encode("a</s>", false, true).unwrap(), vec![3, 2]);
    assert!(t.encode("a</s>", false, false).is_err()); // '<' has no token
}

/// A small deterministic generator of text drawn from awkward code points.
fn random_texts(n: usize) -> Vec<String> {
    let pool: Vec<char> = " \t\n\r  0123456789aZé中😀'sS\u{300}\u{a0}\u{3000}<|>!?.-_٣²\u{200d}ẞ"
        .chars()
        .chain(['<', '|', 'i', 'm', '_', 's', 't', 'a', 'r', 'e', 'n', 'd', '>'])
        .collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..n)
        .map(|_| {
            let len = (next() % 40) as usize;
            (0..len).map(|_| pool[(next() % pool.len() as u64) as usize]).collect()
        })
        .collect()
}

#[test]
fn smollm2_round_trips_random_text() {
    let Some(file) = smollm2() else { return };
    let tok = Tokenizer::from_gguf(file.metadata()).unwrap();
    for text in random_texts(2000) {
        for ps in [false, true] {
            let ids = tok.encode(&text, true, ps).unwrap();
            assert_eq!(tok.decode(&ids).unwrap(), text, "parse_special={ps}: {ids:?}");
        }
    }
    // Any code point (unassigned, private use, controls, astral planes).
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..500 {
        let text: String = (0..(state % 24))
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                char::from_u32(((state >> 33) % 0x11_0000) as u32).unwrap_or('\u{FFFD}')
            })
            .collect();
        // SmolLM2 has no token for some bytes (0x04, 0xF2, ...): llama.cpp drops those bytes,
        // and so must rayo; every other byte comes back in order.
        let ids = tok.encode(&text, true, true).unwrap();
        let got: Vec<u8> = ids.iter().flat_map(|&id| tok.token_bytes(id).unwrap().to_vec()).collect();
        let want: Vec<u8> = text.bytes().filter(|&b| tok.token_id(&byte_char(b)).is_some()).collect();
        assert_eq!(got, want, "{text:?} -> {ids:?}");
    }
}

#[test]
fn space_stripping_attributes_by_model_name() {
    // Phi-3: special tokens eat the spaces after them, except <|endoftext|>.
    let mut m = tiny_bpe(&["<|user|>", "<|endoftext|>", "<mask>"], &[]);
    let (user, eot, mask) = (256, 257, 258);
    m.set("tokenizer.ggml.token_type", [vec![1i32; 256], vec![3, 3, 4]].concat());
    m.set("general.name", "Phi-3 mini");
    let t = Tokenizer::from_gguf(&m).unwrap();
    assert_eq!(t.encode("<|user|>  x", false, true).unwrap(), vec![user, b'x' as u32]);
    assert_eq!(t.encode("<|endoftext|> x", false, true).unwrap().len(), 3);
    assert_eq!(t.encode("<|endoftext|> x", false, true).unwrap()[0], eot);
    // Not parsed: the text is plain bytes.
    assert_eq!(t.encode("<|user|>", false, false).unwrap().len(), 8);
    // A user-defined token is cut out even without parse_special.
    assert_eq!(t.encode("a<mask>", false, false).unwrap(), vec![b'a' as u32, mask]);
    // jina-v2: the mask token eats the spaces before it.
    m.set("general.name", "x");
    m.set("tokenizer.ggml.pre", "jina-v2-es");
    let t = Tokenizer::from_gguf(&m).unwrap();
    assert_eq!(t.encode("a \t<mask>", false, false).unwrap(), vec![b'a' as u32, mask]);
    // ... and Phi-3's stripping is off for other names (token i is byte i's character).
    assert_eq!(t.encode("<|user|>  x", false, true).unwrap(), vec![user, b' ' as u32, b' ' as u32, b'x' as u32]);
}
