//! Many sequences in one step on CUDA ([`BatchSession`] over one cache of slots) against each
//! sequence alone ([`Session`] on CUDA): every greedy token is the one the sequence draws alone
//! wherever the sequence alone has its top two more than 0.5 apart (a near tie may go either
//! way: the test prompts are arbitrary token ids, and their logits have such ties), and every
//! logit within 0.25 of its logit alone, whether a step's rows are all decoding rows
//! (their RoPE, KV store and attention in one launch: bit-identical to one-row launches,
//! `tests/cuda_ops.rs`), prompts beside decoding rows, or 16 rows and more (the products on the
//! tensor cores). Not bit-identical by default: a step of several rows sums a product's row in
//! another order than a row alone (a warp per row instead of a block), and from 16 rows on the
//! tensor cores' f16 products round differently. With [`Cuda::with_deterministic`]
//! bit-identical at any width. On SmolLM2 Q4_1 and Qwen2.5-Coder-0.5B. Without a device every test prints a `SKIP` line
//! (`RAYO_REQUIRE_CUDA=1` makes that a failure).
#![cfg(feature = "cuda")]

#[path = "llama_ref/mod.rs"]
mod llama_ref;

use rayo_llm::cuda::Cuda;
use rayo_llm::{BatchForward, BatchOptions, BatchSession, KvType, Logits, Model, Session, SessionOptions, SlotWork};
use std::path::Path;
use std::sync::Arc;

/// The CUDA backend for `model`, or `None` after a SKIP line.
fn cuda(test: &str, model: &Model) -> Option<Cuda> {
    match Cuda::new(Arc::clone(model.file())) {
        Ok(c) => Some(c),
        Err(e) => {
            let required = std::env::var("RAYO_REQUIRE_CUDA").map(|v| v == "1").unwrap_or(false);
            assert!(!required, "RAYO_REQUIRE_CUDA=1 but no CUDA device: {e}");
            println!("SKIP cuda: {test} ({e})");
            None
        }
    }
}

/// `n` prompts of different lengths, 3 to 14 tokens (ids below 1000, in both vocabularies).
fn prompts(n: usize) -> Vec<Vec<u32>> {
    (0..n as u32).map(|s| (0..3 + (s * 5) % 12).map(|i| (i * 97 + s * 31 + 7) % 1000).collect()).collect()
}

/// A greedy token batched may differ from the sequence's alone only where the sequence alone
/// has its top two at most this far apart (nats), as the CPU tests judge near ties.
const NEAR_TIE: f32 = 0.5;

fn argmax(l: &[f32]) -> u32 {
    llama_ref::top2(l).0 as u32
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// The CUDA backend of a test: deterministic or not.
fn backend(model: &Model, deterministic: bool) -> Cuda {
    Cuda::new(Arc::clone(model.file())).unwrap().with_deterministic(deterministic)
}

/// The logits after `prompt` alone on CUDA, then after each of `decode` greedy tokens.
fn alone(model: &Model, prompt: &[u32], decode: usize, det: bool) -> (Vec<Vec<f32>>, Vec<u32>) {
    let opts = SessionOptions { context: 64, kv_type: KvType::F16, batch: 64, logit_rows: 1 };
    let mut s = Session::new(model, backend(model, det), opts).unwrap();
    let mut logits = vec![s.forward(prompt, Logits::Last).unwrap()];
    let mut drawn = Vec::new();
    for _ in 0..decode {
        let next = argmax(logits.last().unwrap());
        drawn.push(next);
        logits.push(s.forward(&[next], Logits::Last).unwrap());
    }
    (logits, drawn)
}

/// `n` sequences in slots `n - 1, …, 0`: `together` = false runs each prompt alone in its own
/// step, then every step decodes all `n` at once; true runs prompt `p` in step `p` beside the
/// decoding rows of the earlier ones (newest first on odd steps, last on even). Each
/// sequence's logits against the same sequence alone: (bit-identical vectors, vectors, largest
/// difference), after asserting that every greedy token is the one drawn alone.
fn batched_against_alone(model: &Model, n: usize, decode: usize, (together, det): (bool, bool), what: &str) -> (usize, usize, f32) {
    let ps = prompts(n);
    let want: Vec<_> = ps.iter().map(|p| alone(model, p, decode, det)).collect();
    let opts = BatchOptions { slots: n, context: 64, kv_type: KvType::F16, rows: 256 };
    let mut b = BatchSession::new(model, backend(model, det), opts).unwrap();
    let slot = |p: usize| n - 1 - p;
    let mut got: Vec<Vec<Vec<f32>>> = vec![Vec::new(); n];
    if !together {
        for (p, prompt) in ps.iter().enumerate() {
            got[p].push(b.step(&[SlotWork { slot: slot(p), tokens: prompt }]).unwrap().remove(0));
        }
    }
    let mut step = 0;
    while got.iter().any(|g| g.len() <= decode) {
        let mut inputs: Vec<(usize, Vec<u32>)> = Vec::new();
        for p in 0..n {
            if together && step == p {
                inputs.push((p, ps[p].clone()));
            } else if !got[p].is_empty() && got[p].len() <= decode {
                inputs.push((p, vec![want[p].1[got[p].len() - 1]]));
            }
        }
        if step % 2 == 1 {
            inputs.reverse();
        }
        let work: Vec<SlotWork> = inputs.iter().map(|(p, t)| SlotWork { slot: slot(*p), tokens: t }).collect();
        for ((p, _), l) in inputs.iter().zip(b.step(&work).unwrap()) {
            got[*p].push(l);
        }
        step += 1;
    }
    let (mut same, mut all, mut worst, mut ties) = (0, 0, 0.0f32, Vec::new());
    for p in 0..n {
        for (i, (g, w)) in got[p].iter().zip(&want[p].0).enumerate() {
            if argmax(g) != argmax(w) {
                // the sequence alone is the reference: its top two within NEAR_TIE is a near tie
                let (a, b) = llama_ref::top2(w);
                let gap = w[a] - w[b];
                assert!(
                    gap <= NEAR_TIE,
                    "{what}: sequence {p}, logits {i}: greedy token {} differs from the sequence alone's {a}, whose top two are {gap} apart (> {NEAR_TIE}: no near tie)",
                    argmax(g)
                );
                ties.push((p, i, argmax(g), a, gap));
            }
            same += usize::from(bits(g) == bits(w));
            all += 1;
            worst = worst.max(max_diff(g, w));
        }
        assert_eq!(b.position(slot(p)), ps[p].len() + decode, "{what}: sequence {p}");
    }
    println!("{what}: {n} sequences, {same}/{all} logit vectors bit-identical to each alone, largest difference {worst:e}; greedy tokens that differ at a near tie (sequence, logits, token, alone, gap alone): {ties:?}");
    if det {
        assert!(ties.is_empty(), "{what}: a deterministic row's greedy token differs from the sequence alone");
    }
    assert!(worst <= 0.25, "{what}: a logit {worst} away from the sequence's alone");
    (same, all, worst)
}

/// `f` on the model at `path` when it is there and a device is.
fn with_model(test: &str, path: Option<std::path::PathBuf>, f: impl Fn(&Model)) {
    let Some(path) = path else { return };
    let model = Model::open(Path::new(&path)).unwrap();
    if cuda(test, &model).is_some() {
        f(&model);
    }
}

#[test]
fn decoding_rows_of_many_sequences_agree_with_each_alone() {
    let t = "decoding_rows_of_many_sequences_agree_with_each_alone";
    let check = |model: &Model, what: &str| {
        // 4 sequences: every step's rows below 16 (the matvec kernels); each prompt alone in
        // its step, so its logits are the bits it gets alone
        let (same, _, _) = batched_against_alone(model, 4, 6, (false, false), what);
        assert!(same >= 4, "{what}: the prompts' logits");
    };
    with_model(t, llama_ref::smollm2(t), |m| check(m, "SmolLM2 Q4_1"));
    with_model(t, llama_ref::qwen2(t), |m| check(m, "Qwen2.5-Coder-0.5B"));
}

#[test]
fn prompts_beside_decoding_rows_and_wide_steps_pick_the_same_tokens() {
    let t = "prompts_beside_decoding_rows_and_wide_steps_pick_the_same_tokens";
    let check = |model: &Model, what: &str| {
        batched_against_alone(model, 5, 4, (true, false), &format!("{what}, prompts beside decoding rows"));
        // 24 sequences decoding at once: the GEMM's rows
        batched_against_alone(model, 24, 3, (false, false), &format!("{what}, 24 rows a step"));
    };
    with_model(t, llama_ref::smollm2(t), |m| check(m, "SmolLM2 Q4_1"));
    with_model(t, llama_ref::qwen2(t), |m| check(m, "Qwen2.5-Coder-0.5B"));
}

#[test]
fn deterministic_rows_are_the_bits_of_each_sequence_alone() {
    let t = "deterministic_rows_are_the_bits_of_each_sequence_alone";
    let check = |model: &Model, what: &str| {
        let cases = [(4, 6, false, "4 rows a step"), (5, 4, true, "prompts beside decoding rows"), (24, 3, false, "24 rows a step")];
        for (n, decode, together, how) in cases {
            let what = format!("{what}, deterministic, {how}");
            let (same, all, _) = batched_against_alone(model, n, decode, (together, true), &what);
            assert_eq!(same, all, "{what}: logit vectors bit-identical to each alone");
        }
    };
    with_model(t, llama_ref::smollm2(t), |m| check(m, "SmolLM2 Q4_1"));
    with_model(t, llama_ref::qwen2(t), |m| check(m, "Qwen2.5-Coder-0.5B"));
}
