//! Readers for llama.cpp's reference files in `tests/data/` (made by `scripts/ref/llm-refs.sh`;
//! the formats are documented in each file's header), and the lookups of the real models
//! (`smollm2`, `qwen2`, `gemma3`). A test target uses them with `mod llama_ref;` (rayo-cli's tests and the chat
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

/// The variant name of Qwen2.5-Coder-0.5B-Instruct's references (`greedy-qwen2.txt`,
/// `forced-qwen2.txt` and their `-f32kv` twins; `forced-ids-qwen2.txt`): one file, as fetched.
pub const QWEN2: &str = "qwen2";

/// Qwen2.5-Coder-0.5B-Instruct's vocabulary size (rows of its embedding table).
pub const QWEN2_VOCAB: usize = 151_936;

/// The variant name of Gemma 3 270M's references (`greedy-gemma3.txt`, `forced-gemma3.txt`,
/// their `-f32kv` twins, `forced-ids-gemma3.txt`): one file, as fetched.
pub const GEMMA3: &str = "gemma3";

/// A real model fetched by a script, with its own reference files (variant `name`).
pub struct RealModel {
    /// The variant name of its reference files, and of its test output.
    pub name: &'static str,
    /// The environment variable that may give its path, and its file in `.cache/models`.
    pub var: &'static str,
    pub file: &'static str,
    /// Set (by `scripts/test.sh`): a missing file is a failure.
    pub require: &'static str,
    pub fetch: &'static str,
    pub vocab: usize,
}

/// Qwen2.5-Coder-0.5B-Instruct (`qwen2`).
pub const QWEN2_MODEL: RealModel = RealModel {
    name: QWEN2,
    var: "RAYO_QWEN2",
    file: "Qwen2.5-Coder-0.5B-Instruct.gguf",
    require: "RAYO_REQUIRE_QWEN2",
    fetch: "scripts/fetch-qwen2.sh",
    vocab: QWEN2_VOCAB,
};

/// Gemma 3 270M, Q4_K_M (`gemma3`).
pub const GEMMA3_MODEL: RealModel = RealModel {
    name: GEMMA3,
    var: "RAYO_GEMMA3",
    file: "gemma-3-270m-q4_k_m.gguf",
    require: "RAYO_REQUIRE_GEMMA3",
    fetch: "scripts/fetch-gemma3.sh",
    vocab: 262_144,
};

impl RealModel {
    /// Its path when the file is there, or `None` after a `SKIP` line naming `test`.
    pub fn path(&self, test: &str) -> Option<PathBuf> {
        present(model_file(self.var, self.file), self.require, self.fetch, &format!("{}: {test}", self.name))
    }
}

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

/// forced-ids.txt: the teacher-forced sequence (SmolLM2's tokenizer).
pub fn forced_ids() -> Vec<u32> {
    ids(&read("forced-ids.txt"))
}

/// The teacher-forced sequence of variant `ty` (`forced-TYPE.txt` evaluated it): forced-text.txt
/// in the model's tokenizer: `forced-ids-NAME.txt` for a real model's variant `NAME` (and
/// `"NAME-f32kv"`; `synth-SHAPE` for `rayo synth`'s), forced-ids.txt for SmolLM2's.
pub fn forced_ids_of(ty: &str) -> Vec<u32> {
    if let Some(shape) = ty.strip_prefix("synth-") {
        return ids(&read(&format!("forced-ids-synth-{}.txt", shape.trim_end_matches("-f32kv"))));
    }
    match [QWEN2, GEMMA3].into_iter().find(|n| ty.starts_with(n)) {
        Some(n) => ids(&read(&format!("forced-ids-{n}.txt"))),
        None => forced_ids(),
    }
}

/// forced-text.txt, the text of the teacher-forced sequences.
pub fn forced_text() -> String {
    read("forced-text.txt")
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

/// A model file: the path in `var`, or `file` where its fetch script puts it (.cache/models).
fn model_file(var: &str, file: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/models").join(file),
    }
}

/// `path` when the file is there, or `None` after a `SKIP` line naming `test`. With `require`
/// set (not to 0, as `scripts/test.sh` sets it), a missing model is a failure.
fn present(path: PathBuf, require: &str, fetch: &str, test: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    let required = std::env::var_os(require).is_some_and(|v| v != "0");
    assert!(!required, "{require} is set but {} is absent ({fetch} fetches it)", path.display());
    println!("SKIP {test}: {} is absent ({fetch} fetches it)", path.display());
    None
}

/// SmolLM2-135M-Instruct Q4_1: `RAYO_SMOLLM2`, or where scripts/fetch-smollm2.sh puts it.
pub fn smollm2_path() -> PathBuf {
    model_file("RAYO_SMOLLM2", "SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// [`smollm2_path`] when the file is there (`RAYO_REQUIRE_SMOLLM2`: else a failure).
pub fn smollm2(test: &str) -> Option<PathBuf> {
    present(smollm2_path(), "RAYO_REQUIRE_SMOLLM2", "scripts/fetch-smollm2.sh", test)
}

/// Qwen2.5-Coder-0.5B-Instruct: `RAYO_QWEN2`, or where scripts/fetch-qwen2.sh puts it.
pub fn qwen2_path() -> PathBuf {
    model_file("RAYO_QWEN2", "Qwen2.5-Coder-0.5B-Instruct.gguf")
}

/// [`qwen2_path`] when the file is there (`RAYO_REQUIRE_QWEN2`: else a failure).
pub fn qwen2(test: &str) -> Option<PathBuf> {
    QWEN2_MODEL.path(test)
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

/// Whether a greedy step where rayo's argmax is not llama.cpp's token is one that rounding
/// noise decides: a near tie in rayo's logits (`ours`, rayo's best logit less its logit of
/// llama.cpp's token, within `tie`), or in llama.cpp's own (`theirs`, its top two's gap, within
/// `tie`) with rayo's gap within twice that. On Gemma 3 (prompt 3, token 23, llama.cpp's gap
/// 0.33) rayo's gap is 0.28 with libm's `tanhf` in the GELU and 0.62 with rayo's SIMD tanh, 1 ULP
/// from it; on SmolLM2 Q4_K_M (prompt 6, token 21, llama.cpp's gap 0.0000) rayo's is 0.01 to
/// 0.58 depending on the instruction set (scalar, SSE2, AVX2, AVX-512 round differently, and
/// 8-bit activations carry a flipped rounding step through 30 layers).
pub fn near_tie(ours: f32, theirs: f32, tie: f32) -> bool {
    ours <= tie || (theirs <= tie && ours <= 2.0 * tie)
}

/// The first maximum (llama.cpp's greedy choice) and the runner-up.
pub fn top2(l: &[f32]) -> (usize, usize) {
    let mut best = (0, 1);
    if l[1] > l[0] {
        best = (1, 0);
    }
    for (i, &v) in l.iter().enumerate().skip(2) {
        if v > l[best.0] {
            best = (i, best.0);
        } else if v > l[best.1] {
            best.1 = i;
        }
    }
    best
}

/// An engine's teacher-forced logits (every position of `forced_ids_of(ty)`) against
/// `forced-{ty}.txt`: top-1 agreement, overall and where llama.cpp's own top two are more than
/// `tie` apart; the differences that are not near ties (in the engine's logits or llama.cpp's);
/// the KL divergence from llama.cpp's distribution over its 32 most likely tokens plus the rest
/// lumped (a lower bound of the full KL; scripts/ref/kld.py gives the full one from a dump); and
/// llama.cpp's agreement with itself (`forced-{ty}-f32kv.txt`: flash attention off, f32 cache).
#[derive(Debug)]
pub struct ForcedStats {
    pub n: usize,
    pub same: usize,
    /// Positions where llama.cpp's top two are more than `tie` apart, and how many agree there.
    pub clear: usize,
    pub clear_same: usize,
    /// Each difference's smaller gap: in the engine's logits or in llama.cpp's.
    pub ties: Vec<f32>,
    /// Differences that are no near tie: (position, the engine's argmax, llama.cpp's, gap in
    /// the engine's logits, gap in llama.cpp's).
    pub bad: Vec<(usize, u32, u32, f32, f32)>,
    pub kl_mean: f64,
    pub kl_max: f64,
    /// llama.cpp's top-1 agreement with its own -f32kv run.
    pub own: usize,
}

impl ForcedStats {
    pub fn new(ty: &str, all: &[f32], vocab: usize, tie: f32) -> ForcedStats {
        let reference = forced(ty);
        assert_eq!(all.len(), reference.len() * vocab, "{ty}: logits of {} positions expected", reference.len());
        let mut st = ForcedStats { n: 0, same: 0, clear: 0, clear_same: 0, ties: vec![], bad: vec![], kl_mean: 0.0, kl_max: 0.0, own: 0 };
        let mut kl_sum = 0f64;
        for r in &reference {
            let (pos, top1) = (r.pos, r.top1);
            let l = &all[pos * vocab..(pos + 1) * vocab];
            st.n += 1;
            let mine = top2(l).0 as u32;
            let agree = mine == top1;
            if agree {
                st.same += 1;
            } else {
                let theirs = r.top.iter().find(|t| t.0 == mine).map_or(f32::INFINITY, |t| r.top[0].1 - t.1);
                let ours = l[mine as usize] - l[top1 as usize];
                if ours > tie && theirs > tie {
                    st.bad.push((pos, mine, top1, ours, theirs));
                }
                st.ties.push(ours.min(theirs));
            }
            if r.top[0].1 - r.top[1].1 > tie {
                st.clear += 1;
                st.clear_same += agree as usize;
            }
            // log-softmax of the engine's logits.
            let mx = l.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
            let lse = mx + l.iter().map(|&x| (x as f64 - mx).exp()).sum::<f64>().ln();
            let (mut kl, mut p_top, mut q_top) = (0f64, 0f64, 0f64);
            for &(id, lp) in &r.top {
                let (lp, lq) = (lp as f64, l[id as usize] as f64 - lse);
                kl += lp.exp() * (lp - lq);
                p_top += lp.exp();
                q_top += lq.exp();
            }
            let (pr, qr) = ((1.0 - p_top).max(1e-12), (1.0 - q_top).max(1e-12));
            kl += pr * (pr / qr).ln();
            kl_sum += kl;
            st.kl_max = st.kl_max.max(kl);
        }
        st.kl_mean = kl_sum / st.n as f64;
        let other = forced(&format!("{ty}-f32kv"));
        st.own = reference.iter().zip(&other).filter(|(a, b)| a.top1 == b.top1).count();
        st
    }

    /// Every difference is a near tie, at least 70% of the positions are clear, the engine
    /// agrees at ≥ 99% of those, and the mean KL is below `kl`.
    pub fn check(&self, ty: &str, tie: f32, kl: f64) {
        assert!(
            self.bad.is_empty(),
            "{ty}: differences that are no near tie (position, engine's argmax, llama.cpp's, gap in the engine's logits, in llama.cpp's; tie {tie}): {:?}",
            self.bad
        );
        assert!(self.n >= 256 && self.clear * 10 >= self.n * 7, "{ty}: only {} of {} positions are clear", self.clear, self.n);
        assert!(self.clear_same * 100 >= self.clear * 99, "{ty}: {}/{} clear positions agree", self.clear_same, self.clear);
        assert!(self.kl_mean < kl, "{ty}: mean KL {} (bound {kl})", self.kl_mean);
    }
}

impl std::fmt::Display for ForcedStats {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "teacher-forced top-1 agreement {}/{} = {:.2}% (llama.cpp with itself, flash attention on/off: {}/{}); where llama.cpp's top two are clear: {}/{}; near ties {:?}; KL(llama.cpp‖engine) over top-32+rest: mean {:.5}, max {:.4}",
            self.same,
            self.n,
            100.0 * self.same as f64 / self.n as f64,
            self.own,
            self.n,
            self.clear_same,
            self.clear,
            self.ties,
            self.kl_mean,
            self.kl_max
        )
    }
}
