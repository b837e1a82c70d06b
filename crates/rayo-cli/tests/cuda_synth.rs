//! The CUDA engine against the CPU engine on `rayo synth`'s files of the new architectures:
//! tiny-llama3 (Llama 3's `rope_freqs` divisors), tiny-qwen3 (QK-norm, heads of 128),
//! tiny-phi3 (fused `attn_qkv` and `ffn_up`, split by rows at load), tiny-phi3-long (with
//! LongRoPE: the long divisors and the attention factor in the RoPE table), tiny-gemma3 (Gemma 3's
//! block: scaled embeddings, post-norms, GELU, a window of 16 on 5 of 6 layers with their own
//! RoPE base), gemma3-270m (its heads of 256 and 262,144-token vocabulary) and qwen2-0.5b (Q,
//! K and V biases, added in the products' kernels), random Q8_0 weights.
//! Teacher-forced logits, as a prompt (batched, the tensor cores) and one token at a time
//! (recorded graph replays; on f32 activations, and with the output head on 8-bit ones as the
//! backend runs it), against the CPU engine with f32 activations: top-1 agreement at every
//! position where the CPU's top two are over 0.5 apart, |Δlogit| within 2% (the f16 tensor
//! cores) and 0.5% (f32) of the largest |logit|, or for f16 and 8 bits no farther than the CPU
//! engine's own 8-bit activations move them (random weights make logits larger than a trained
//! model's, so tests/cuda.rs's absolute bounds do not carry over).
//! Without a device a `SKIP cuda: ...` line (`RAYO_REQUIRE_CUDA=1`: a failure). On the GPU
//! machine `RAYO_BIN` names the rayo binary, `RAYO_SMOLLM2` and `RAYO_PHI3_VOCAB` the tokenizers.
#![cfg(feature = "cuda")]

use rayo::cuda::ActFormat;
use rayo::quant::Activations;
use rayo_llm::cpu::Cpu;
use rayo_llm::cuda::Cuda;
use rayo_llm::{Forward, Logits, Model, Session, SessionOptions, TensorParallel};
use std::path::PathBuf;
use std::sync::Arc;

fn file(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(default))
}

/// `rayo synth` of `shape` (Q8_0) into a temporary file, opened.
fn synth(shape: &str) -> Option<(Model, PathBuf)> {
    let tok = match shape {
        s if s.starts_with("tiny-phi3") => file("RAYO_PHI3_VOCAB", ".cache/vocab/ggml-vocab-phi-3.gguf"),
        _ => file("RAYO_SMOLLM2", ".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    };
    if !tok.exists() {
        println!("SKIP cuda synth {shape}: tokenizer {} is absent (scripts/fetch-smollm2.sh, scripts/fetch-vocabs.sh)", tok.display());
        return None;
    }
    let out = std::env::temp_dir().join(format!("rayo-cuda-synth-{}-{shape}.gguf", std::process::id()));
    let bin = std::env::var_os("RAYO_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rayo")));
    let st = std::process::Command::new(bin)
        .args(["synth"])
        .arg(&out)
        .args(["--shape", shape, "--type", "Q8_0", "--tokenizer"])
        .arg(&tok)
        .output()
        .unwrap();
    assert!(st.status.success(), "rayo synth {shape}: {}", String::from_utf8_lossy(&st.stderr));
    Some((Model::open(&out).unwrap(), out))
}

fn cuda(model: &Model) -> Option<Cuda> {
    match Cuda::new(Arc::clone(model.file())) {
        Ok(c) => Some(c),
        Err(e) => {
            assert!(std::env::var("RAYO_REQUIRE_CUDA").map(|v| v != "1").unwrap_or(true), "RAYO_REQUIRE_CUDA=1 but no CUDA device: {e}");
            println!("SKIP cuda: cuda_synth ({e})");
            None
        }
    }
}

fn logits(run: &mut dyn Forward, tokens: &[u32], batch: usize) -> Vec<f32> {
    run.rewind(0);
    tokens.chunks(batch).flat_map(|c| run.forward(c, Logits::All).unwrap()).collect()
}

/// (top-1 agreement where `b`'s top two are over 0.5 apart: agreed, clear; max |Δ|)
fn compare(a: &[f32], b: &[f32], vocab: usize) -> (usize, usize, f32) {
    let top = |r: &[f32]| r.iter().enumerate().fold((0, f32::MIN), |m, (i, &v)| if v > m.1 { (i, v) } else { m });
    let (mut agree, mut clear, mut worst) = (0, 0, 0f32);
    for (ra, rb) in a.chunks_exact(vocab).zip(b.chunks_exact(vocab)) {
        assert!(ra.iter().all(|v| v.is_finite()), "non-finite logits");
        worst = ra.iter().zip(rb).map(|(x, y)| (x - y).abs()).fold(worst, f32::max);
        let (tb, vb) = top(rb);
        let second = rb.iter().enumerate().filter(|&(i, _)| i != tb).map(|(_, &v)| v).fold(f32::MIN, f32::max);
        if vb - second > 0.5 {
            clear += 1;
            agree += (top(ra).0 == tb) as usize;
        }
    }
    (agree, clear, worst)
}

#[test]
fn new_architectures_agree_with_the_cpu_engine() {
    let tokens: Vec<u32> = (0..160u32).map(|i| (i * 7919 + 13) % 30_000).collect();
    for shape in ["tiny-llama3", "tiny-qwen3", "tiny-phi3", "tiny-phi3-long", "tiny-gemma3", "gemma3-270m", "qwen2-0.5b"] {
        let Some((model, path)) = synth(shape) else { return };
        let Some(gpu) = cuda(&model) else { return };
        let opts = SessionOptions { context: 256, ..SessionOptions::default() };
        let mut g = Session::new(&model, gpu, opts).unwrap();
        let mut c = Session::new(&model, Cpu::new(Arc::clone(model.file()), 2).with_activations(Activations::F32), opts).unwrap();
        let vocab = model.config().vocab_size;
        // How far rounding the activations moves this model's logits: the CPU engine with 8-bit
        // activations (llama.cpp's) against f32. f16 rounds 8× finer, so the tensor cores' prompt
        // may move them as far, no farther (a deep model of random weights amplifies rounding:
        // qwen2-0.5b's 24 layers).
        let mut c8 = Session::new(&model, Cpu::new(Arc::clone(model.file()), 2), opts).unwrap();
        let lc = logits(&mut c, &tokens, 128);
        let (agree8, clear8, worst8) = compare(&logits(&mut c8, &tokens, 128), &lc, vocab);
        println!("{shape} the CPU with 8-bit activations: top-1 {agree8}/{clear8}, max |Δlogit| {worst8:.4}");
        let mut failed = Vec::new();
        // (the one-token runs twice: every product on f32 activations, as the CPU's, and as the
        // backend picks them, where the output head takes 8-bit ones; the CPU's logits once)
        let mut g32 = Session::new(&model, cuda(&model).unwrap().with_decode_activations(ActFormat::F32), opts).unwrap();
        let one_token_cpu = logits(&mut c, &tokens[..64], 1);
        for (how, f32_acts, batch, n, bound) in [
            ("prefill in batches of 128 (f16 tensor cores)", false, 128, 160, 0.02),
            ("one token at a time (graph replays, f32 activations)", true, 1, 64, 0.005),
            ("one token at a time (graph replays, the head on 8 bits)", false, 1, 64, 0.005),
        ] {
            let gpu: &mut dyn Forward = if f32_acts { &mut g32 } else { &mut g };
            let lg = logits(gpu, &tokens[..n], batch);
            let lc = if batch == 1 { &one_token_cpu[..] } else { &lc[..n * vocab] };
            let (agree, clear, worst) = compare(&lg, lc, vocab);
            let scale = lc.iter().fold(0f32, |a, &b| a.max(b.abs()));
            println!(
                "{shape} {how}: top-1 {agree}/{clear} where the CPU's top two are > 0.5 apart, max |Δlogit| {worst:.4} (largest |logit| {scale:.2})"
            );
            // f16's rounding (the prompt) and 8 bits' (the head): within the bound, or no
            // worse than the 8-bit CPU's; f32's within the bound, every clear argmax kept
            let (lost_ok, worst_ok) = match how {
                _ if batch > 1 => (clear8 - agree8, worst8.max(bound * scale)),
                _ if how.contains("8 bits") => (0, worst8.max(bound * scale)),
                _ => (0, bound * scale),
            };
            if clear - agree > lost_ok {
                failed.push(format!("{shape} {how}: {} clear argmaxes differ", clear - agree));
            }
            if worst >= worst_ok {
                failed.push(format!("{shape} {how}: max |Δlogit| {worst} is past {worst_ok}"));
            }
        }
        assert!(failed.is_empty(), "{}", failed.join("; "));
        std::fs::remove_file(path).unwrap();
    }
}

/// Tensor parallelism on CUDA ([`TensorParallel`]): each shape split over 2 ranks, each rank a
/// CUDA backend of its own (rank r on device r, or all on device 0; the ranks meet on the
/// host), against the CPU engine's f32 arithmetic: a prompt (the tensor cores) and one token at
/// a time, with the bounds of the whole model's test above (every clear argmax kept; |Δlogit|
/// within 2% and 0.5% of the largest, or no farther than 8-bit activations move the CPU's).
#[test]
fn tensor_parallel_ranks_on_cuda_agree_with_the_cpu_engine() {
    let tokens: Vec<u32> = (0..160u32).map(|i| (i * 7919 + 13) % 30_000).collect();
    for shape in ["tiny-llama3", "tiny-qwen3", "qwen2-0.5b"] {
        let Some((model, path)) = synth(shape) else { return };
        if cuda(&model).is_none() {
            return;
        }
        let opts = SessionOptions { context: 256, ..SessionOptions::default() };
        let devices = rayo::cuda::device_count().max(1);
        let start = move |part: &Model, group: Box<dyn rayo_llm::collective::Collective>| {
            Ok(Cuda::on_device(Arc::clone(part.file()), group.shard().rank % devices)?.with_group(group))
        };
        let mut world = TensorParallel::start(&model, 2, opts, start).unwrap();
        let mut c = Session::new(&model, Cpu::new(Arc::clone(model.file()), 2).with_activations(Activations::F32), opts).unwrap();
        let mut c8 = Session::new(&model, Cpu::new(Arc::clone(model.file()), 2), opts).unwrap();
        let vocab = model.config().vocab_size;
        let lc = logits(&mut c, &tokens, 128);
        let (agree8, clear8, worst8) = compare(&logits(&mut c8, &tokens, 128), &lc, vocab);
        let mut failed = Vec::new();
        for (how, batch, n, bound) in [("prefill in batches of 128", 128, 160, 0.02), ("one token at a time", 1, 64, 0.005)] {
            let lg = logits(&mut world, &tokens[..n], batch);
            let want = if batch == 1 { logits(&mut c, &tokens[..n], 1) } else { lc[..n * vocab].to_vec() };
            let (agree, clear, worst) = compare(&lg, &want, vocab);
            let scale = want.iter().fold(0f32, |a, &b| a.max(b.abs()));
            println!("{shape} on 2 CUDA ranks, {how}: top-1 {agree}/{clear} where the CPU's top two are > 0.5 apart, max |Δlogit| {worst:.4} (largest |logit| {scale:.2})");
            let lost_ok = if batch > 1 { clear8 - agree8 } else { 0 };
            if clear - agree > lost_ok {
                failed.push(format!("{shape} {how}: {} clear argmaxes differ", clear - agree));
            }
            if worst >= worst8.max(bound * scale) {
                failed.push(format!("{shape} {how}: max |Δlogit| {worst} is past {}", worst8.max(bound * scale)));
            }
        }
        assert!(failed.is_empty(), "{}", failed.join("; "));
        std::fs::remove_file(path).unwrap();
    }
}
