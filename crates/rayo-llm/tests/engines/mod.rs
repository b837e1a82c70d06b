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

/// Greedy continuations of the committed prompts for model `ty`, 32 tokens each: `gpu`'s tokens
/// equal `cpu`'s (the CPU engine with f32 activations: the same arithmetic up to summation order).
pub fn greedy_equals_cpu(ty: &str, model: &Model, gpu: &mut dyn Forward, cpu: &mut dyn Forward) {
    let (mut same, mut total) = (0, 0);
    for r in llama_ref::greedy(ty) {
        let t0 = std::time::Instant::now();
        let a = greedy(gpu, model, &r.prompt_ids, 32);
        let dt = t0.elapsed().as_secs_f64();
        let b = greedy(cpu, model, &r.prompt_ids, 32);
        let n = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        println!("{ty}: {:?}: {n}/{} tokens equal ({dt:.2} s on the GPU)", r.prompt.chars().take(40).collect::<String>(), b.len());
        same += n;
        total += b.len();
        assert_eq!(a, b, "{ty}: greedy text differs on {:?}", r.prompt);
    }
    println!("{ty}: greedy {same}/{total} tokens equal to the CPU engine's (f32 activations)");
}
