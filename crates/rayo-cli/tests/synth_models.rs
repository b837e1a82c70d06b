//! The CPU engine on the synthetic models of `rayo synth --type Q8_0` (random weights, default
//! seed: the same bytes every time) against llama.cpp on the same files: one test per
//! architecture shape the real-model tests do not reach in full —
//! - `tiny-llama3`: llama with Llama 3's `rope_freqs.weight` (per-pair RoPE divisors);
//! - `tiny-qwen3`: qwen3 (per-head q/k RMSNorms, heads of 128 values);
//! - `tiny-gemma3`: gemma3 with a window of 16 on 5 of 6 layers (so the 293 forced positions
//!   cross the window many times), heads of 128;
//! - `tiny-phi3`: phi3 (fused `attn_qkv` and `ffn_up`), with llama.cpp's phi-3 vocab (32,064);
//! - `tiny-phi3-long`: the same with LongRoPE (long and short divisors, the attention factor).
//!
//! Each test writes its file with the built `rayo`, checks its sha256 is the one in the headers
//! of llama.cpp's reference files (crates/rayo-llm/tests/data/{greedy,forced}-synth-SHAPE*.txt,
//! from `scripts/ref/llm-refs.sh synth`, which writes the same files), then compares
//! teacher-forced logits over forced-text.txt and the greedy continuations of prompts.txt.
//!
//! Without SmolLM2's file (the tokenizer of three shapes; scripts/fetch-smollm2.sh), the phi-3
//! vocab (scripts/fetch-vocabs.sh) or a reference file, a test prints `SKIP synth: ...` and
//! passes; `RAYO_REQUIRE_SMOLLM2=1` / `RAYO_REQUIRE_VOCABS=1` (scripts/test.sh) make that a
//! failure.

mod common;

use common::llama_ref::{self, top2, ForcedStats};
use rayo_llm::cpu::Cpu;
use rayo_llm::{Logits, Model, Session, SessionOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The largest logit gap a differing argmax may have (as for the real models: llama.cpp's own
/// two attention paths, the -f32kv files, split at gaps of this size).
const TIE: f32 = 0.5;

/// `present`'s rule: the variable set, and not to 0.
fn required(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| v != "0")
}

/// `Some(path)` when it exists; else a `SKIP synth: ...` line and `None`, or a failure when
/// `require` is set.
fn input(path: PathBuf, require: &str, how: &str, shape: &str) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    assert!(!required(require), "{require} is set but {} is absent ({how})", path.display());
    println!("SKIP synth: {shape}: {} is absent ({how})", path.display());
    None
}

/// The file `rayo synth` writes for the test, removed when dropped (also on a failure).
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `model synth-SHAPE.gguf sha256 HEX (...)`, the header line of a reference file.
fn header_sha(name: &str) -> String {
    let p = llama_ref::data_dir().join(name);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let line = text.lines().find(|l| l.starts_with("# model ")).unwrap_or_else(|| panic!("{name}: no `# model` line"));
    let mut w = line.split_whitespace().skip(3);
    assert_eq!(w.next(), Some("sha256"), "{name}: {line}");
    w.next().unwrap().to_string()
}

fn sha256(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(std::fs::read(path).unwrap()).iter().map(|b| format!("{b:02x}")).collect()
}

fn session(m: &Model) -> Session<Cpu> {
    Session::new(m, Cpu::new(m.file().clone(), 2), SessionOptions { context: 512, ..SessionOptions::default() }).unwrap()
}

/// What makes each file the test of its architecture.
fn check_shape(shape: &str, m: &Model) {
    let c = m.config();
    let dims = (c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.vocab_size);
    match shape {
        "tiny-llama3" => {
            assert_eq!((c.arch.name, dims), ("llama", (2, 256, 4, 2, 64, 512, 49_152)));
            assert!(c.rope_freqs.is_some(), "no rope_freqs");
        }
        "tiny-qwen3" => {
            assert_eq!((c.arch.name, c.arch.qk_norm, dims), ("qwen3", true, (2, 256, 4, 2, 128, 512, 49_152)));
        }
        "tiny-gemma3" => {
            assert_eq!((c.arch.name, dims), ("gemma3", (6, 256, 4, 1, 128, 512, 49_152)));
            let w = c.sliding_window.as_ref().expect("a sliding window");
            assert_eq!((w.window, w.pattern), (16, 6));
            assert_eq!((c.window(0), c.window(4), c.window(5)), (Some(16), Some(16), None));
        }
        "tiny-phi3" => {
            assert_eq!((c.arch.name, dims), ("phi3", (2, 256, 4, 4, 64, 512, 32_064)));
            assert!(m.file().tensor("blk.0.attn_qkv.weight").is_some(), "no fused attn_qkv");
        }
        "tiny-phi3-long" => {
            assert_eq!((c.arch.name, dims), ("phi3", (2, 256, 4, 4, 64, 512, 32_064)));
            let l = c.long_rope.as_ref().expect("LongRoPE");
            // the long divisors (in every session here: 512 positions) and an attention factor
            assert!(l.original_context == 32 && l.long.iter().any(|&f| f > 2.0) && c.rope_attn_factor > 1.15, "{l:?}, {}", c.rope_attn_factor);
        }
        other => panic!("no shape {other}"),
    }
}

/// Per-position largest differences, summarised: mean, the 99th percentile, max.
struct Spread(Vec<f32>);

impl Spread {
    fn mean(&self) -> f32 {
        (self.0.iter().map(|&x| x as f64).sum::<f64>() / self.0.len() as f64) as f32
    }
    fn max(&self) -> f32 {
        self.0.iter().copied().fold(0f32, f32::max)
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let mut v = self.0.clone();
        v.sort_by(f32::total_cmp);
        write!(f, "mean {:.4}, p99 {:.4}, max {:.4}", self.mean(), v[(v.len() * 99 / 100).min(v.len() - 1)], self.max())
    }
}

/// Teacher-forced log-probs against llama.cpp's (forced-NAME.txt) over its 32 most likely tokens
/// per position: the largest |difference| per position, for rayo's logits and for llama.cpp's
/// own -f32kv run (the tokens both lists hold). Unlike top-1 and KL this sees the tail of the
/// distribution, where a peaked one (tiny-gemma3's: the input token at ~0, the rest below -40)
/// keeps every difference.
fn logprob_diffs(name: &str, all: &[f32], vocab: usize) -> (Spread, Spread) {
    let (r, o) = (llama_ref::forced(name), llama_ref::forced(&format!("{name}-f32kv")));
    let (mut ours, mut own) = (vec![], vec![]);
    for (r, o) in r.iter().zip(&o) {
        let l = &all[r.pos * vocab..(r.pos + 1) * vocab];
        let mx = l.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b)) as f64;
        let lse = mx + l.iter().map(|&x| (x as f64 - mx).exp()).sum::<f64>().ln();
        ours.push(r.top.iter().map(|&(id, lp)| (l[id as usize] as f64 - lse - lp as f64).abs() as f32).fold(0f32, f32::max));
        own.push(r.top.iter().filter_map(|&(id, lp)| Some((o.top.iter().find(|t| t.0 == id)?.1 - lp).abs())).fold(0f32, f32::max));
    }
    (Spread(ours), Spread(own))
}

fn synth_equals_llama_cpp(shape: &str) {
    let t0 = std::time::Instant::now();
    let name = format!("synth-{shape}");
    // The tokenizer's file, and the variable that makes its absence a failure.
    let (tok, require) = if shape.starts_with("tiny-phi3") {
        let dir =
            std::env::var_os("RAYO_VOCAB_DIR").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/vocab"));
        (input(dir.join("ggml-vocab-phi-3.gguf"), "RAYO_REQUIRE_VOCABS", "scripts/fetch-vocabs.sh fetches it", shape), "RAYO_REQUIRE_VOCABS")
    } else {
        (common::smollm2(&format!("synth: {shape}")), "RAYO_REQUIRE_SMOLLM2")
    };
    let Some(tok) = tok else { return };
    let refs = [format!("forced-{name}.txt"), format!("forced-{name}-f32kv.txt"), format!("greedy-{name}.txt"), format!("greedy-{name}-f32kv.txt")];
    for r in refs.iter().chain([&format!("forced-ids-{name}.txt")]) {
        if input(llama_ref::data_dir().join(r), require, "scripts/ref/llm-refs.sh synth writes it", shape).is_none() {
            return;
        }
    }

    let path = std::env::temp_dir().join(format!("rayo-synth-models-{}-{shape}.gguf", std::process::id()));
    let file = TempFile(path.clone());
    let o = Command::new(env!("CARGO_BIN_EXE_rayo"))
        .args(["synth", path.to_str().unwrap(), "--shape", shape, "--type", "Q8_0", "--tokenizer", tok.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "rayo synth {shape}: {}", String::from_utf8_lossy(&o.stderr));
    // The references are llama.cpp's outputs on this very file.
    let sha = sha256(&path);
    for r in &refs {
        assert_eq!(
            header_sha(r),
            sha,
            "{r}: made from another file than `rayo synth --shape {shape}` writes now (rerun scripts/ref/llm-refs.sh synth)"
        );
    }
    let m = Model::open(&path).unwrap();
    check_shape(shape, &m);
    let vocab = m.config().vocab_size;

    // The tokenizer gives llama.cpp's ids (the inputs below are llama.cpp's).
    let input = llama_ref::forced_ids_of(&name);
    assert_eq!(m.tokenizer().encode(&llama_ref::forced_text(), true, true).unwrap(), input, "{shape}: forced-text.txt");
    let cases = llama_ref::greedy(&name);
    for c in &cases {
        assert_eq!(m.tokenizer().encode(&c.prompt, true, true).unwrap(), c.prompt_ids, "{shape}: {:?}", c.prompt);
    }

    // Teacher-forced, in one batch.
    let all = session(&m).forward(&input, Logits::All).unwrap();
    if let Some(dir) = std::env::var_os("RAYO_DUMP_LOGITS") {
        let bytes: Vec<u8> = all.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(Path::new(&dir).join(format!("rayo-forced-{name}.f32")), bytes).unwrap();
    }
    let st = ForcedStats::new(&name, &all, vocab, TIE);
    println!("{name}: {st}");
    let (ours, own) = logprob_diffs(&name, &all, vocab);
    // The same teacher-forced, one token at a time (the decoding path).
    let mut s1 = session(&m);
    let one: Vec<f32> = input.iter().flat_map(|&t| s1.forward(&[t], Logits::Last).unwrap()).collect();
    let (ours1, _) = logprob_diffs(&name, &one, vocab);
    println!("{name}: one token at a time, |log-prob difference|: rayo {ours1}");
    println!("{name}: |log-prob difference| over llama.cpp's top 32, per position's largest: rayo {ours}; llama.cpp with itself {own}");
    // Random weights make these files noisier than a trained model (llama.cpp's own two runs:
    // top-1 agreement 93–100%, log-probs apart by up to 0.23–1.2) and their distributions
    // flatter: ForcedStats::check's "70% of the positions clear" fails for tiny-phi3 (222/318
    // have llama.cpp's top two more than TIE apart). So its other rules are asked here: every
    // difference a near tie, ≥ 99% agreement at the clear positions (and half the positions
    // clear), mean KL below 0.01.
    assert!(
        st.bad.is_empty(),
        "{name}: differences that are no near tie (position, rayo's argmax, llama.cpp's, gap in rayo's logits, in llama.cpp's; tie {TIE}): {:?}",
        st.bad
    );
    assert!(st.n >= 256 && st.clear * 2 >= st.n, "{name}: only {} of {} positions are clear", st.clear, st.n);
    assert!(st.clear_same * 100 >= st.clear * 99, "{name}: {}/{} clear positions agree", st.clear_same, st.clear);
    assert!(st.kl_mean < 0.01, "{name}: mean KL {} (bound 0.01)", st.kl_mean);
    // And the tail: top-1 and KL do not see it, and tiny-gemma3's distributions are all peak
    // (its scaled input embedding dominates: the argmax is the input token, the runner-up ~40
    // below; top-1 agreement is 100% and KL 0 even for llama.cpp itself on a copy of the file
    // with the window 15 or 17 instead of 16, or 512, where these differences average 1.25–6.6).
    // rayo's must be llama.cpp's own size (ratios here 0.85–1.02 of the mean, 1.05–1.26 of the
    // max).
    assert!(
        ours.mean() <= 1.25 * own.mean() && ours.max() <= 2.0 * own.max(),
        "{name}: rayo's log-probs differ from llama.cpp's more than llama.cpp's own runs do: rayo {ours}; llama.cpp {own}"
    );
    assert!(
        ours1.mean() <= 1.25 * own.mean() && ours1.max() <= 2.0 * own.max(),
        "{name}: one token at a time, rayo's log-probs differ from llama.cpp's more than llama.cpp's own runs do: rayo {ours1}; llama.cpp {own}"
    );

    // Greedy: llama.cpp's tokens fed one at a time; rayo's argmax at each step is llama.cpp's
    // token, or a near tie in rayo's logits, or the token llama.cpp's own -f32kv run chose there
    // (after the same tokens); where rayo's own greedy text would leave llama.cpp's, llama.cpp's
    // top two are a near tie too (or its -f32kv run leaves it there the same way). The -f32kv
    // rule is for tiny-llama3's prompt 1, token 21: rayo's argmax 299 is 0.87 above llama.cpp's
    // 34992 in rayo's logits, and llama.cpp with flash attention off picks 299 too. And a step
    // whose two logits moved apart by no more than twice what one log-prob moves between
    // llama.cpp's own two runs on this model (`own.max()` above: each of the two by at most
    // that): tiny-phi3-long's prompt 1, token 27 (llama.cpp's top two 0.03 apart, rayo's 1.18
    // the other way) and prompt 5, token 13 (0.93, and 0.73 the other way), where llama.cpp's
    // own runs are up to 1.35 apart and rayo's teacher-forced log-probs, batched or one token
    // at a time, are within them (checked above).
    let flip_bound = 2.0 * own.max();
    let other = llama_ref::greedy(&format!("{name}-f32kv"));
    let (mut same, mut total, mut ties, mut whole, mut own_choice) = (0, 0, vec![], 0, vec![]);
    for (case, f) in cases.iter().zip(&other) {
        assert_eq!(case.index, f.index);
        let mut want = case.gen_ids.clone();
        want.extend(case.eog);
        let mut theirs = f.gen_ids.clone();
        theirs.extend(f.eog);
        // llama.cpp's -f32kv run chose `id` at step k after the same tokens.
        let f32kv_chose = |k: usize, id: usize| theirs.len() > k && theirs[..k] == want[..k] && theirs[k] as usize == id;
        let mut s = session(&m);
        let mut l = s.forward(&case.prompt_ids, Logits::Last).unwrap();
        let mut first_diff = None;
        for (k, &w) in want.iter().enumerate() {
            total += 1;
            let mine = top2(&l).0;
            if mine == w as usize {
                same += 1;
            } else {
                let ours = l[mine] - l[w as usize];
                if ours > TIE && f32kv_chose(k, mine) {
                    own_choice.push((case.index, k, ours));
                } else {
                    assert!(
                        ours <= TIE || ours + case.gap[k] <= flip_bound,
                        "{name} prompt {} token {k}: rayo's argmax {mine}, llama.cpp's {w}: {ours} apart in rayo's logits, {} in llama.cpp's, not a near tie (nor within {flip_bound})",
                        case.index,
                        case.gap[k]
                    );
                    ties.push(ours);
                }
                first_diff.get_or_insert((k, mine, ours));
            }
            if k + 1 < want.len() {
                l = s.forward(&[w], Logits::Last).unwrap();
            }
        }
        match first_diff {
            None => whole += 1,
            Some((k, mine, ours)) => {
                let gap = case.gap[k];
                assert!(
                    gap <= TIE || f32kv_chose(k, mine) || ours + gap <= flip_bound,
                    "{name} prompt {}: rayo's greedy text leaves llama.cpp's at token {k}, where llama.cpp's top two are {gap} apart",
                    case.index
                );
            }
        }
    }
    println!(
        "{name}: {same}/{total} greedy tokens equal llama.cpp's; near ties (gap in rayo's logits): {ties:?}; llama.cpp -f32kv's choice (prompt, token, gap in rayo's logits): {own_choice:?}; greedy text equal on {whole}/{} prompts ({:.1} s)",
        cases.len(),
        t0.elapsed().as_secs_f64()
    );
    drop(file);
}

#[test]
fn tiny_llama3_equals_llama_cpp() {
    synth_equals_llama_cpp("tiny-llama3");
}

#[test]
fn tiny_qwen3_equals_llama_cpp() {
    synth_equals_llama_cpp("tiny-qwen3");
}

#[test]
fn tiny_gemma3_equals_llama_cpp() {
    synth_equals_llama_cpp("tiny-gemma3");
}

#[test]
fn tiny_phi3_equals_llama_cpp() {
    synth_equals_llama_cpp("tiny-phi3");
}

#[test]
fn tiny_phi3_with_long_rope_equals_llama_cpp() {
    synth_equals_llama_cpp("tiny-phi3-long");
}
