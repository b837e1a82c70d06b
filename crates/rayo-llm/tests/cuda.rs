//! The CUDA engine against the CPU engine on SmolLM2 (the same file, the same tokens): logits
//! of a teacher-forced text (batched prefill and one token at a time), top-1 agreement, and
//! greedy continuations of the committed prompts; the same on Qwen2.5-Coder-0.5B (`qwen2`:
//! half-split RoPE, q/k/v biases). Without a device every test prints a `SKIP` line
//! (`RAYO_REQUIRE_CUDA=1` makes that a failure); without a model, as the other tests.
#![cfg(feature = "cuda")]

#[path = "engines/mod.rs"]
mod engines;
#[path = "llama_ref/mod.rs"]
mod llama_ref;

use engines::{argmax, greedy_equals_cpu, models};
use rayo::cuda::ActFormat;
use rayo::quant::Activations;
use rayo_llm::cpu::Cpu;
use rayo_llm::cuda::Cuda;
use rayo_llm::{Forward, Logits, Model, Session, SessionOptions};
use std::sync::Arc;

/// The CUDA backend for `model`, or `None` after a SKIP line.
fn cuda(test: &str, model: &Model) -> Option<Cuda> {
    match Cuda::new(Arc::clone(model.file())) {
        Ok(c) => {
            println!("cuda device: {}", c.device().info());
            Some(c)
        }
        Err(e) => {
            let required = std::env::var("RAYO_REQUIRE_CUDA").map(|v| v == "1").unwrap_or(false);
            assert!(!required, "RAYO_REQUIRE_CUDA=1 but no CUDA device: {e}");
            println!("SKIP cuda: {test} ({e})");
            None
        }
    }
}

/// Runs `tokens` through `run` in batches of `batch` (or one at a time), all logits.
fn logits(run: &mut dyn Forward, tokens: &[u32], batch: usize) -> Vec<f32> {
    run.rewind(0);
    tokens.chunks(batch).flat_map(|c| run.forward(c, Logits::All).unwrap()).collect()
}

/// Compares two engines' logits position by position: top-1 agreement, agreement where `b`'s
/// top two are more than 0.5 apart (must be all), max |Δ|. Returns (agreement %, max |Δ|).
fn compare(what: &str, a: &[f32], b: &[f32], vocab: usize) -> (f64, f32) {
    let n = b.len() / vocab;
    let (mut agree, mut worst, mut clear, mut clear_agree) = (0, 0f32, 0, 0);
    for (p, (ra, rb)) in a.chunks_exact(vocab).zip(b.chunks_exact(vocab)).enumerate() {
        assert!(ra.iter().all(|v| v.is_finite()), "{what}: position {p}: non-finite logits");
        worst = ra.iter().zip(rb).map(|(x, y)| (x - y).abs()).fold(worst, f32::max);
        let (ta, tb) = (argmax(ra), argmax(rb));
        agree += (ta == tb) as usize;
        let second = rb.iter().enumerate().filter(|&(i, _)| i != tb).map(|(_, &v)| v).fold(f32::MIN, f32::max);
        if rb[tb] - second > 0.5 {
            clear += 1;
            clear_agree += (ta == tb) as usize;
        }
    }
    let pct = 100.0 * agree as f64 / n as f64;
    println!("{what}: {n} positions, top-1 agreement {pct:.2}% ({clear_agree}/{clear} where the reference's top two are > 0.5 apart), max |Δlogit| {worst:.4}");
    assert_eq!(clear_agree, clear, "{what}: a clear argmax differs");
    (pct, worst)
}

/// The CUDA engine computes with f32 activations: against the CPU engine with f32 activations
/// it must agree closely (the same arithmetic up to summation order); against the CPU
/// engine's default 8-bit activations (llama.cpp's numerics) the differences are that
/// quantization's, reported. A prompt's products and attention run on the tensor cores by
/// default, their operands rounded to f16 (2⁻¹¹ relative, as llama.cpp's f16 path): checked
/// with a looser bound on |Δlogit|, and the exact fp32 prompt path with the tight one.
#[test]
fn logits_agree_with_the_cpu_engine() {
    let ids = llama_ref::forced_ids();
    let mut failed: Vec<String> = Vec::new();
    for (ty, model) in models("logits_agree_with_the_cpu_engine") {
        let Some(gpu) = cuda("logits_agree_with_the_cpu_engine", &model) else { return };
        let opts = SessionOptions { context: 512, ..SessionOptions::default() };
        let mut g = Session::new(&model, gpu.with_tensor_cores(true), opts).unwrap();
        let gpu32 = Cuda::new(Arc::clone(model.file())).unwrap().with_tensor_cores(false);
        let mut g32 = Session::new(&model, gpu32, opts).unwrap();
        let gpu8 = Cuda::new(Arc::clone(model.file())).unwrap().with_decode_activations(ActFormat::Q8);
        let mut g8 = Session::new(&model, gpu8, opts).unwrap();
        let gpu16 = Cuda::new(Arc::clone(model.file())).unwrap().with_decode_activations(ActFormat::F16);
        let mut g16 = Session::new(&model, gpu16, opts).unwrap();
        // f32 activations in every decoding product, the output head's too (by default the head
        // of a vocabulary of Q8_MIN_ROWS and more takes 8-bit activations)
        let gpu32d = Cuda::new(Arc::clone(model.file())).unwrap().with_decode_activations(ActFormat::F32);
        let mut g32d = Session::new(&model, gpu32d, opts).unwrap();
        // every prompt product on Hopper's wgmma (by default this model's rows are too short)
        let gpuw = Cuda::new(Arc::clone(model.file())).unwrap().with_wgmma(Some(0));
        let mut gw = Session::new(&model, gpuw, opts).unwrap();
        let cpu = |act| Cpu::new(Arc::clone(model.file()), 2).with_activations(act);
        let mut exact = Session::new(&model, cpu(Activations::F32), opts).unwrap();
        let mut q8 = Session::new(&model, cpu(Activations::Quantized), opts).unwrap();
        let vocab = model.config().vocab_size;
        // (what, batch, which session: 0 default, 1 the fp32 prompt path, 2 and 3 8-bit and f16
        // activations in the decoding products, 4 every prompt product on wgmma, 5 f32
        // activations in every decoding product; bound on |Δlogit| against the CPU's f32
        // activations). 8-bit activations round as llama.cpp's do: held to the CPU's own 8-bit
        // path's distance from f32 instead (its top-1 agreement less 2.5 points, 1.25× its
        // max |Δlogit|). The default one-token step takes them in the output head only.
        let cases = [
            ("prefill in batches of 128 (f16 tensor cores)", 128, 0, Some(0.25)),
            ("prefill in batches of 128 (fp32)", 128, 1, Some(0.05)),
            ("one token at a time, f32 activations (graph replays)", 1, 5, Some(0.05)),
            ("one token at a time, default: the output head on 8-bit activations (graph replays)", 1, 0, None),
            ("one token at a time, 8-bit activations (graph replays)", 1, 2, None),
            ("one token at a time, f16 activations (graph replays)", 1, 3, Some(0.25)),
            ("prefill in batches of 128 (every product on wgmma where the device has it)", 128, 4, Some(0.25)),
        ];
        for (how, batch, which, bound) in cases {
            let run = [&mut g, &mut g32, &mut g8, &mut g16, &mut gw, &mut g32d].into_iter().nth(which).expect("six sessions");
            let n = if batch == 1 { 128 } else { ids.len() };
            let lg = logits(run, &ids[..n], batch);
            assert_eq!(lg.len(), n * vocab);
            let (exact_lg, q8_lg) = (logits(&mut exact, &ids[..n], batch), logits(&mut q8, &ids[..n], batch));
            let (pct, worst) = compare(&format!("{ty} {how}: CUDA vs CPU f32 activations"), &lg, &exact_lg, vocab);
            compare(&format!("{ty} {how}: CUDA vs CPU 8-bit activations"), &lg, &q8_lg, vocab);
            // every case is measured and printed before any bound is judged
            match bound {
                Some(bound) => {
                    if pct < 99.0 {
                        failed.push(format!("{ty} {how}: top-1 agreement {pct:.2}% < 99%"));
                    }
                    if worst >= bound {
                        failed.push(format!("{ty} {how}: max |Δlogit| {worst} against the CPU's f32 path (bound {bound})"));
                    }
                }
                None => {
                    let (cpu_pct, cpu_worst) = compare(&format!("{ty} {how}: CPU 8-bit vs CPU f32 activations"), &q8_lg, &exact_lg, vocab);
                    if pct < cpu_pct - 2.5 {
                        failed.push(format!("{ty} {how}: top-1 agreement {pct:.2}% < the CPU 8-bit path's {cpu_pct:.2}% less 2.5"));
                    }
                    if worst > 1.25 * cpu_worst {
                        failed.push(format!("{ty} {how}: max |Δlogit| {worst} > 1.25 × the CPU 8-bit path's {cpu_worst}"));
                    }
                }
            }
        }
        println!("{ty}: one-token steps replay a graph of {} device operations", g.step_ops());
        assert!(g.step_ops() > 0, "no graph was recorded");
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn greedy_text_equals_the_cpu_engine() {
    for (ty, model) in models("greedy_text_equals_the_cpu_engine") {
        let Some(gpu) = cuda("greedy_text_equals_the_cpu_engine", &model) else { return };
        let opts = SessionOptions { context: 256, ..SessionOptions::default() };
        let mut c = Session::new(&model, Cpu::new(Arc::clone(model.file()), 2).with_activations(Activations::F32), opts).unwrap();
        // the default (the output head on 8-bit activations), then f32 activations everywhere
        let mut g = Session::new(&model, gpu, opts).unwrap();
        println!("{ty}: the default decoding step (the output head on 8-bit activations)");
        greedy_equals_cpu(&ty, &model, &mut g, &mut c, 32);
        let gpu32 = Cuda::new(Arc::clone(model.file())).unwrap().with_decode_activations(ActFormat::F32);
        let mut g32 = Session::new(&model, gpu32, opts).unwrap();
        println!("{ty}: f32 activations in every decoding product");
        greedy_equals_cpu(&ty, &model, &mut g32, &mut c, 32);
    }
}

/// Qwen2.5-Coder-0.5B (`qwen2`: half-split RoPE, q/k/v biases, a 151,936-token LM head): its
/// teacher-forced text (forced-ids-qwen2.txt) prefilled on the tensor cores and in fp32, and one
/// token at a time, against the CPU engine with f32 activations (bounds as for SmolLM2 above);
/// then greedy continuations of the committed prompts, 32 tokens each, equal to the CPU's.
#[test]
fn qwen2_agrees_with_the_cpu_engine() {
    let Some(path) = llama_ref::qwen2("cuda qwen2_agrees_with_the_cpu_engine") else { return };
    let model = Model::open(&path).unwrap();
    let Some(gpu) = cuda("qwen2_agrees_with_the_cpu_engine", &model) else { return };
    let ids = llama_ref::forced_ids_of(llama_ref::QWEN2);
    let opts = SessionOptions { context: 512, ..SessionOptions::default() };
    let mut g = Session::new(&model, gpu.with_tensor_cores(true), opts).unwrap();
    let mut g32 = Session::new(&model, Cuda::new(Arc::clone(model.file())).unwrap().with_tensor_cores(false), opts).unwrap();
    let mut exact = Session::new(&model, Cpu::new(Arc::clone(model.file()), 2).with_activations(Activations::F32), opts).unwrap();
    let vocab = model.config().vocab_size;
    for (how, batch, which, bound) in [
        ("prefill in batches of 128 (f16 tensor cores)", 128, 0, 0.25),
        ("prefill in batches of 128 (fp32)", 128, 1, 0.05),
        ("one token at a time (graph replays)", 1, 0, 0.05),
    ] {
        let run: &mut dyn Forward = if which == 0 { &mut g } else { &mut g32 };
        let n = if batch == 1 { 64 } else { ids.len() };
        let lg = logits(run, &ids[..n], batch);
        let (pct, worst) = compare(&format!("qwen2 {how}: CUDA vs CPU f32 activations"), &lg, &logits(&mut exact, &ids[..n], batch), vocab);
        assert!(pct >= 99.0, "qwen2 {how}: top-1 agreement {pct:.2}% < 99%");
        assert!(worst < bound, "qwen2 {how}: max |Δlogit| {worst} against the CPU's f32 path (bound {bound})");
    }
    g.rewind(0);
    exact.rewind(0);
    greedy_equals_cpu(llama_ref::QWEN2, &model, &mut g, &mut exact, 32);
}
