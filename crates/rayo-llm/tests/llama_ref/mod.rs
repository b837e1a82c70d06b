//! Readers for llama.cpp's reference files in `tests/data/` (made by `scripts/ref/llm-refs.sh`;
//! the formats are documented in each file's header), and the one lookup of the real model
//! (`smollm2`). A test target uses them with `mod llama_ref;` (rayo-cli's tests and the chat
//! unit tests include this file by `#[path]`). Malformed files panic: they are committed test
//! data, not user input.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The SmolLM2-135M-Instruct variants the references cover.
pub const TYPES: [&str; 4] = ["Q4_1", "Q8_0", "Q6_K", "Q4_K_M"];

/// The llama.cpp settings of the reference files: `""` is llama-simple's (flash attention
/// auto = on, f16 KV cache), the parity target; `"-f32kv"` is flash attention off with an f32 KV
/// cache, llama.cpp's most precise, to measure its own rounding noise. Files are named
/// `greedy-{TYPE}{SETTING}.txt` and `forced-{TYPE}{SETTING}.txt`; pass `"Q4_1-f32kv"` as the type.
pub const SETTINGS: [&str; 2] = ["", "-f32kv"];

/// SmolLM2's vocabulary size (every id in the files is below it).
pub const VOCAB: usize = 49152;

/// One prompt's greedy continuation by llama.cpp.
#[derive(Clone, Debug)]
pub struct Greedy {
    /// The line of prompts.txt (0-based).
    pub index: usize,
    /// The prompt text (unescaped).
    pub prompt: String,
    pub prompt_ids: Vec<u32>,
    /// Up to 32 ids; fewer when an end-of-generation token came (`eog`).
    pub gen_ids: Vec<u32>,
    pub eog: Option<u32>,
    /// llama.cpp's top-1 minus top-2 logit per step (each generated id, then the eog step).
    pub gap: Vec<f32>,
    /// The generated pieces' bytes (may end inside a UTF-8 character).
    pub text: Vec<u8>,
}

/// One position of the teacher-forced run.
#[derive(Clone, Debug)]
pub struct Forced {
    pub pos: usize,
    /// The input token at this position.
    pub id: u32,
    /// llama.cpp's argmax of the logits after it.
    pub top1: u32,
    /// The 32 largest entries, (id, log-softmax), largest first.
    pub top: Vec<(u32, f32)>,
}

/// `crates/rayo-llm/tests/data`, from any crate of the workspace that includes this file.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../rayo-llm/tests/data")
}

fn read(name: &str) -> String {
    let p = data_dir().join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Undoes the files' escapes (\\ \n \r \t \xHH).
pub fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            i += 1;
            match b[i] {
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'x' if i + 2 < b.len() => {
                    out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).expect("\\xHH"));
                    i += 2;
                }
                c => out.push(c),
            }
        } else {
            out.push(b[i]);
        }
        i += 1;
    }
    out
}

fn ids(s: &str) -> Vec<u32> {
    s.split_whitespace().map(|t| t.parse().expect("id")).collect()
}

/// `KEY REST` (REST may be empty).
fn split(line: &str) -> (&str, &str) {
    line.split_once(' ').unwrap_or((line, ""))
}

/// The prompts (unescaped), in order.
pub fn prompts() -> Vec<String> {
    read("prompts.txt").lines().filter(|l| !l.is_empty()).map(|l| String::from_utf8(unescape(l)).expect("UTF-8 prompt")).collect()
}

/// greedy-TYPE.txt.
pub fn greedy(ty: &str) -> Vec<Greedy> {
    let text = read(&format!("greedy-{ty}.txt"));
    let mut out: Vec<Greedy> = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (key, rest) = split(line);
        if key == "prompt" {
            let (k, p) = split(rest);
            let prompt = String::from_utf8(unescape(p)).expect("UTF-8 prompt");
            out.push(Greedy { index: k.parse().unwrap(), prompt, prompt_ids: vec![], gen_ids: vec![], eog: None, gap: vec![], text: vec![] });
            continue;
        }
        let g = out.last_mut().expect("a prompt line first");
        match key {
            "prompt_ids" => g.prompt_ids = ids(rest),
            "gen_ids" => g.gen_ids = ids(rest),
            "eog" => g.eog = u32::try_from(rest.parse::<i64>().unwrap()).ok(),
            "gap" => g.gap = rest.split_whitespace().map(|t| t.parse().unwrap()).collect(),
            "text" => g.text = unescape(rest),
            _ => panic!("greedy-{ty}.txt: unknown line {line:?}"),
        }
    }
    out
}

/// forced-ids.txt: the teacher-forced sequence.
pub fn forced_ids() -> Vec<u32> {
    ids(&read("forced-ids.txt"))
}

/// forced-TYPE.txt.
pub fn forced(ty: &str) -> Vec<Forced> {
    read(&format!("forced-{ty}.txt"))
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let mut it = l.split_whitespace();
            assert_eq!(it.next(), Some("pos"), "{l}");
            let mut num = || it.next().expect("field").parse::<u32>().unwrap();
            let (pos, id, top1) = (num() as usize, num(), num());
            let top = it
                .map(|t| {
                    let (a, b) = t.split_once(':').expect("ID:LOGPROB");
                    (a.parse().unwrap(), b.parse().unwrap())
                })
                .collect();
            Forced { pos, id, top1, top }
        })
        .collect()
}

/// SmolLM2-135M-Instruct Q4_1: `RAYO_SMOLLM2`, or where scripts/fetch-smollm2.sh puts it.
pub fn smollm2_path() -> PathBuf {
    match std::env::var_os("RAYO_SMOLLM2") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    }
}

/// [`smollm2_path`] when the file is there, or `None` after a `SKIP` line naming `test`. With
/// `RAYO_REQUIRE_SMOLLM2` set (as `scripts/test.sh` does), a missing model is a failure.
pub fn smollm2(test: &str) -> Option<PathBuf> {
    let path = smollm2_path();
    if path.exists() {
        return Some(path);
    }
    assert!(std::env::var_os("RAYO_REQUIRE_SMOLLM2").is_none(), "RAYO_REQUIRE_SMOLLM2 is set but {} is absent", path.display());
    println!("SKIP {test}: {} is absent (scripts/fetch-smollm2.sh fetches it)", path.display());
    None
}

/// The model file of a variant: Q4_1 is [`smollm2_path`]; the others are what
/// `scripts/ref/llm-refs.sh` (or `rayo quantize`) writes next to it in `.cache/models/`.
pub fn model_path(ty: &str) -> PathBuf {
    let q4_1 = smollm2_path();
    if ty == "Q4_1" {
        return q4_1;
    }
    q4_1.with_file_name(format!("SmolLM2-135M-Instruct.{ty}.gguf"))
}
