//! What the GPU engines' tests (`cuda.rs`, `wgpu.rs`) share: the models they run, greedy
//! decoding, and the greedy comparison with the CPU engine on the committed prompts. A test
//! target uses it with `mod llama_ref; mod engines;`.
#![allow(dead_code)]

use super::llama_ref;
use rayo_llm::{Forward, Logits, Model};

/// The models to compare: SmolLM2 Q4_1 and, where `rayo quantize` made it, its Q4_K_M mix
/// (Q4_K, Q6_K and Q8_0 tensors).
pub fn models(test: &str) -> Vec<(String, Model)> {
    let Some(q4_1) = llama_ref::smollm2(test) else { return vec![] };
    let mut out = vec![("Q4_1".to_string(), Model::open(&q4_1).unwrap())];
    let kmix = llama_ref::model_path("Q4_K_M");
    if kmix.exists() {
        out.push(("Q4_K_M".to_string(), Model::open(&kmix).unwrap()));
    } else {
        println!("note: {} absent, Q4_1 only", kmix.display());
    }
    out
}

/// The first index of the largest value.
pub fn argmax(v: &[f32]) -> usize {
    v.iter().enumerate().fold(0, |b, (i, &x)| if x > v[b] { i } else { b })
}

/// Up to `n` greedy tokens after `ids` from position 0, stopping after an end-of-generation
/// token of `model`. Each is the backend's own greedy pick (`forward_greedy`: on a device,
/// found where the logits are), checked against the first maximum of the logits read back
/// for the first step.
pub fn greedy(s: &mut dyn Forward, model: &Model, ids: &[u32], n: usize) -> Vec<u32> {
    s.rewind(0);
    let first = argmax(&s.forward(ids, Logits::Last).unwrap()) as u32;
    s.rewind(0);
    let mut out = vec![];
    let mut t = s.forward_greedy(ids).unwrap();
    assert_eq!(t, first, "the backend's greedy pick is not the first maximum of its logits");
    for _ in 0..n {
        out.push(t);
        if model.tokenizer().is_eog(t) {
            break;
        }
        t = s.forward_greedy(&[t]).unwrap();
    }
    out
}

/// Where two engines' greedy texts may part: at a step where the reference's top two logits are
/// at most this far apart (nats), as the CPU tests judge llama.cpp's near ties.
pub const NEAR_TIE: f32 = 0.5;

/// The reference's greedy tokens after `ids` (up to `n`, stopping after an end-of-generation
/// token), each with the gap between its top two logits at that step.
pub fn greedy_with_gaps(s: &mut dyn Forward, model: &Model, ids: &[u32], n: usize) -> (Vec<u32>, Vec<f32>) {
    s.rewind(0);
    let mut logits = s.forward(ids, Logits::Last).unwrap();
    let (mut out, mut gaps) = (vec![], vec![]);
    for _ in 0..n {
        let (t, second) = llama_ref::top2(&logits);
        out.push(t as u32);
        gaps.push(logits[t] - logits[second]);
        if model.tokenizer().is_eog(t as u32) {
            break;
        }
        logits = s.forward(&[t as u32], Logits::Last).unwrap();
    }
    (out, gaps)
}

/// Greedy continuations of the committed prompts for model `ty`, `tokens` each, against
/// `cpu`'s (the CPU engine with f32 activations: the same arithmetic up to summation order and
/// the narrower activations a GPU engine may take). The texts are equal up to the first token
/// where they part, and that token must be a near tie in the reference (its top two within
/// [`NEAR_TIE`]): after it the two continue different texts and are not compared.
pub fn greedy_equals_cpu(ty: &str, model: &Model, gpu: &mut dyn Forward, cpu: &mut dyn Forward, tokens: usize) {
    let (mut same, mut total, mut parted) = (0, 0, 0);
    for r in llama_ref::greedy(ty) {
        let t0 = std::time::Instant::now();
        let a = greedy(gpu, model, &r.prompt_ids, tokens);
        let dt = t0.elapsed().as_secs_f64();
        let (b, gaps) = greedy_with_gaps(cpu, model, &r.prompt_ids, tokens);
        let n = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        let prompt = r.prompt.chars().take(40).collect::<String>();
        if a == b {
            println!("{ty}: {prompt:?}: {n}/{} tokens equal ({dt:.2} s on the GPU)", b.len());
        } else {
            assert!(n < a.len() && n < b.len(), "{ty}: {prompt:?}: one text ends where the other goes on ({} and {} tokens)", a.len(), b.len());
            let gap = gaps[n];
            println!(
                "{ty}: {prompt:?}: {n}/{} tokens equal, then {} where the reference has {} (its top two {gap:.4} apart: a near tie) ({dt:.2} s on the GPU)",
                b.len(),
                a[n],
                b[n]
            );
            assert!(
                gap <= NEAR_TIE,
                "{ty}: greedy text differs on {:?} at token {n}: {} against the reference's {}, whose top two are {gap} apart (> {NEAR_TIE}: no near tie)",
                r.prompt,
                a[n],
                b[n]
            );
            parted += 1;
        }
        same += n;
        total += b.len();
    }
    println!("{ty}: greedy {same}/{total} tokens equal to the CPU engine's; {parted} texts part at a near tie");
}
