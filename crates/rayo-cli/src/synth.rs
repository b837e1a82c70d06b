//! `rayo synth OUT --shape NAME --type TYPE --tokenizer FILE`: a llama-family GGUF of a known
//! model's dimensions with random weights, for speed runs: a product's time does not depend on
//! its weights' values, and a model of 1B parameters need not be carried to a machine that can
//! write it in seconds. Blocks are random bytes with their scales set to small finite values
//! (and their mins to what makes the weights average zero), so every value is finite and the
//! activations stay within f16's range; norm weights (vectors) are ones. The tokenizer
//! (every `tokenizer.*` key) is copied from a real model's file, so `rayo generate` runs too
//! (the text is noise). Embeddings are tied (no `output.weight`), as in Llama 3.2 1B. The
//! tensors each layer has follow the architecture's declaration ([`rayo_llm::arch`]): biases,
//! QK-norms, post-norms, fused projections.

use crate::args::SynthArgs;
use crate::out::{errln, outln};
use rayo::gguf::{GgufValue, GgufWriter};
use rayo::quant::GgmlType;
use std::io::Write;

/// A model's dimensions.
pub struct Shape {
    pub name: &'static str,
    layers: u32,
    embd: u64,
    ff: u64,
    heads: u32,
    kv_heads: u32,
    vocab: u64,
    context: u32,
    rope_base: f32,
    /// `general.architecture`, one of [`rayo_llm::arch::ARCHITECTURES`].
    arch: &'static str,
    /// Values per head when not `embd / heads` (`attention.key_length`).
    head_dim: Option<u64>,
    /// Llama 3's RoPE scaling (`rope_freqs.weight`), as the real file has it.
    llama3_rope: Option<Llama3Rope>,
    /// `attention.sliding_window` (gemma3's local layers).
    window: Option<u32>,
    /// LongRoPE (Phi-3's long-context models).
    long_rope: Option<LongRope>,
}

/// LongRoPE as convert_hf_to_gguf.py writes it for Phi-3: `rope_factors_long.weight` and
/// `rope_factors_short.weight` (per-pair divisors; here made-up curves of the real ones' form:
/// 1 at the highest frequency, rising towards the lowest, the long ones far more),
/// `rope.scaling.original_context_length` and `rope.scaling.attn_factor`.
#[derive(Clone, Copy)]
struct LongRope {
    original_context: u32,
    /// The (trained, original) contexts of the attention factor √(1 + ln(trained / original) /
    /// ln(original)): Phi-3-mini-128k's 131,072 / 4,096 (1.19). The tiny shape's own pair,
    /// 4,096 / 32, would give 1.55: the attention's scores times 2.4, far past a real model's.
    factor_of: (f64, f64),
}

impl LongRope {
    /// (long, short) divisors of `pairs` pairs.
    fn divisors(&self, pairs: u64) -> (Vec<f32>, Vec<f32>) {
        let at = |i: u64| i as f32 / (pairs.max(2) - 1) as f32;
        ((0..pairs).map(|i| 1.0 + 31.0 * at(i) * at(i)).collect(), (0..pairs).map(|i| 1.0 + 0.25 * at(i)).collect())
    }

    fn attn_factor(&self) -> f32 {
        let (c, o) = self.factor_of;
        (1.0 + (c / o).ln() / o.ln()).sqrt() as f32
    }
}

/// Llama 3's `rope_scaling` (config.json): the per-pair divisors convert_hf_to_gguf.py writes
/// as `rope_freqs.weight`.
#[derive(Clone, Copy)]
struct Llama3Rope {
    factor: f64,
    low_freq_factor: f64,
    high_freq_factor: f64,
    original_context: f64,
}

impl Llama3Rope {
    /// As convert_hf_to_gguf.py's `LlamaModel.generate_extra_tensors`.
    fn divisors(&self, base: f64, head_dim: u64) -> Vec<f32> {
        let (low, high) = (self.original_context / self.low_freq_factor, self.original_context / self.high_freq_factor);
        (0..head_dim / 2)
            .map(|i| {
                let wavelen = 2.0 * std::f64::consts::PI * base.powf(2.0 * i as f64 / head_dim as f64);
                if wavelen < high {
                    1.0
                } else if wavelen > low {
                    self.factor as f32
                } else {
                    let smooth = (self.original_context / wavelen - self.low_freq_factor) / (self.high_freq_factor - self.low_freq_factor);
                    (1.0 / ((1.0 - smooth) / self.factor + smooth)) as f32
                }
            })
            .collect()
    }
}

/// Llama 3.1's and 3.2's scaling (3.2: a factor of 32).
const LLAMA31_ROPE: Llama3Rope = Llama3Rope { factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_context: 8192.0 };
const LLAMA32_ROPE: Llama3Rope = Llama3Rope { factor: 32.0, ..LLAMA31_ROPE };

/// What a shape does not set.
const PLAIN: Shape = Shape {
    name: "",
    layers: 0,
    embd: 0,
    ff: 0,
    heads: 0,
    kv_heads: 0,
    vocab: 0,
    context: 0,
    rope_base: 10_000.0,
    arch: "llama",
    head_dim: None,
    llama3_rope: None,
    window: None,
    long_rope: None,
};

/// The shapes `--shape` knows.
pub const SHAPES: &[Shape] = &[
    // meta-llama/Llama-3.2-1B (config.json)
    Shape {
        name: "llama-3.2-1b",
        layers: 16,
        embd: 2048,
        ff: 8192,
        heads: 32,
        kv_heads: 8,
        vocab: 128_256,
        context: 131_072,
        rope_base: 500_000.0,
        arch: "llama",
        head_dim: None,
        llama3_rope: Some(LLAMA32_ROPE),
        ..PLAIN
    },
    // meta-llama/Llama-3.2-3B (config.json): heads of 128 values
    Shape {
        name: "llama-3.2-3b",
        layers: 28,
        embd: 3072,
        ff: 8192,
        heads: 24,
        kv_heads: 8,
        vocab: 128_256,
        context: 131_072,
        rope_base: 500_000.0,
        arch: "llama",
        head_dim: None,
        llama3_rope: Some(LLAMA32_ROPE),
        ..PLAIN
    },
    // HuggingFaceTB/SmolLM2-135M
    Shape {
        name: "smollm2-135m",
        layers: 30,
        embd: 576,
        ff: 1536,
        heads: 9,
        kv_heads: 3,
        vocab: 49_152,
        context: 8192,
        rope_base: 100_000.0,
        arch: "llama",
        head_dim: None,
        ..PLAIN
    },
    // Qwen/Qwen2.5-0.5B (config.json): qwen2, with q/k/v biases
    Shape {
        name: "qwen2-0.5b",
        layers: 24,
        embd: 896,
        ff: 4864,
        heads: 14,
        kv_heads: 2,
        vocab: 151_936,
        context: 32_768,
        rope_base: 1_000_000.0,
        arch: "qwen2",
        head_dim: None,
        ..PLAIN
    },
    // Qwen/Qwen3-0.6B (config.json): qwen3, heads of 128 values (queries 2048 wide in a
    // 1024-wide model), per-head q/k norms, tied embeddings
    Shape {
        name: "qwen3-0.6b",
        layers: 28,
        embd: 1024,
        ff: 3072,
        heads: 16,
        kv_heads: 8,
        vocab: 151_936,
        context: 40_960,
        rope_base: 1_000_000.0,
        arch: "qwen3",
        head_dim: Some(128),
        ..PLAIN
    },
    // meta-llama/Llama-3.1-8B (config.json)
    Shape {
        name: "llama-3.1-8b",
        layers: 32,
        embd: 4096,
        ff: 14_336,
        heads: 32,
        kv_heads: 8,
        vocab: 128_256,
        context: 131_072,
        rope_base: 500_000.0,
        llama3_rope: Some(LLAMA31_ROPE),
        ..PLAIN
    },
    // meta-llama/Llama-3.1-70B (config.json)
    Shape {
        name: "llama-3.1-70b",
        layers: 80,
        embd: 8192,
        ff: 28_672,
        heads: 64,
        kv_heads: 8,
        vocab: 128_256,
        context: 131_072,
        rope_base: 500_000.0,
        llama3_rope: Some(LLAMA31_ROPE),
        ..PLAIN
    },
    // google/gemma-3-270m (config.json): heads of 256, one key/value head, a window of 512 on
    // five of every six layers
    Shape {
        name: "gemma3-270m",
        layers: 18,
        embd: 640,
        ff: 2048,
        heads: 4,
        kv_heads: 1,
        vocab: 262_144,
        context: 32_768,
        rope_base: 1_000_000.0,
        arch: "gemma3",
        head_dim: Some(256),
        window: Some(512),
        ..PLAIN
    },
    // google/gemma-3-1b-pt (config.json)
    Shape {
        name: "gemma3-1b",
        layers: 26,
        embd: 1152,
        ff: 6912,
        heads: 4,
        kv_heads: 1,
        vocab: 262_144,
        context: 32_768,
        rope_base: 1_000_000.0,
        arch: "gemma3",
        head_dim: Some(256),
        window: Some(512),
        ..PLAIN
    },
    // microsoft/Phi-3-mini-4k-instruct (config.json): fused q/k/v and gate/up
    Shape { name: "phi3-mini", layers: 32, embd: 3072, ff: 8192, heads: 32, kv_heads: 32, vocab: 32_064, context: 4096, arch: "phi3", ..PLAIN },
    // small models of each architecture, for tests against llama.cpp
    Shape {
        name: "tiny-llama3",
        layers: 2,
        embd: 256,
        ff: 512,
        heads: 4,
        kv_heads: 2,
        vocab: 49_152,
        context: 512,
        rope_base: 500_000.0,
        llama3_rope: Some(LLAMA32_ROPE),
        ..PLAIN
    },
    Shape {
        name: "tiny-qwen3",
        layers: 2,
        embd: 256,
        ff: 512,
        heads: 4,
        kv_heads: 2,
        vocab: 49_152,
        context: 512,
        arch: "qwen3",
        head_dim: Some(128),
        ..PLAIN
    },
    Shape {
        name: "tiny-gemma3",
        layers: 6,
        embd: 256,
        ff: 512,
        heads: 4,
        kv_heads: 1,
        vocab: 49_152,
        context: 512,
        rope_base: 1_000_000.0,
        arch: "gemma3",
        head_dim: Some(128),
        window: Some(16),
        ..PLAIN
    },
    Shape { name: "tiny-phi3", layers: 2, embd: 256, ff: 512, heads: 4, kv_heads: 4, vocab: 32_064, context: 512, arch: "phi3", ..PLAIN },
    // tiny-phi3 with LongRoPE switching at 32 positions (any test's context takes the long
    // divisors, llama.cpp's too)
    Shape {
        name: "tiny-phi3-long",
        layers: 2,
        embd: 256,
        ff: 512,
        heads: 4,
        kv_heads: 4,
        vocab: 32_064,
        context: 4096,
        arch: "phi3",
        long_rope: Some(LongRope { original_context: 32, factor_of: (131_072.0, 4_096.0) }),
        ..PLAIN
    },
    // a small model for tests
    Shape {
        name: "tiny",
        layers: 2,
        embd: 256,
        ff: 512,
        heads: 4,
        kv_heads: 2,
        vocab: 49_152,
        context: 512,
        rope_base: 10_000.0,
        arch: "llama",
        head_dim: None,
        ..PLAIN
    },
];

pub fn run(a: &SynthArgs) -> Result<(), String> {
    let shape = SHAPES.iter().find(|s| s.name == a.shape).ok_or_else(|| format!("unknown shape {}", a.shape))?;
    let ty = GgmlType::from_name(&a.ty).ok_or_else(|| format!("unknown type {}", a.ty))?;
    if matches!(ty, GgmlType::Q8_K) {
        return Err("Q8_K is an activation format, not a weight type: pick another --type".into());
    }
    let arch = rayo_llm::arch::find(shape.arch).map_err(|e| e.to_string())?;
    let tok = crate::input::open_gguf(&a.tokenizer, "tokenizer file", crate::input::FETCH_HINT)?;
    let mut w = GgufWriter::new();
    w.set("general.architecture", shape.arch);
    w.set("general.name", format!("synthetic {} {}", shape.name, ty.name()));
    let hd = shape.head_dim.unwrap_or(shape.embd / shape.heads as u64);
    for (k, v) in [
        ("attention.key_length", GgufValue::from(hd as u32)),
        ("attention.value_length", (hd as u32).into()),
        ("block_count", shape.layers.into()),
        ("context_length", shape.context.into()),
        ("embedding_length", (shape.embd as u32).into()),
        ("feed_forward_length", (shape.ff as u32).into()),
        ("attention.head_count", shape.heads.into()),
        ("attention.head_count_kv", shape.kv_heads.into()),
        ("rope.dimension_count", (hd as u32).into()),
        ("vocab_size", (shape.vocab as u32).into()),
        ("rope.freq_base", shape.rope_base.into()),
        ("attention.layer_norm_rms_epsilon", 1e-5f32.into()),
    ] {
        w.set(format!("{}.{k}", shape.arch), v);
    }
    if let Some(window) = shape.window {
        w.set(format!("{}.attention.sliding_window", shape.arch), window);
    }
    if let Some(l) = shape.long_rope {
        w.set(format!("{}.rope.scaling.original_context_length", shape.arch), l.original_context);
        w.set(format!("{}.rope.scaling.attn_factor", shape.arch), l.attn_factor());
    }
    for (k, v) in tok.metadata().iter().filter(|(k, _)| k.starts_with("tokenizer.")) {
        w.set(k, pad_vocab(k, v, shape.vocab as usize));
    }
    let (d, q, kv) = (shape.embd, hd * shape.heads as u64, hd * shape.kv_heads as u64);
    let mut tensors: Vec<(String, GgmlType, Vec<u64>)> = vec![("token_embd.weight".into(), ty, vec![d, shape.vocab])];
    for i in 0..shape.layers {
        let n = |t: &str| format!("blk.{i}.{t}");
        tensors.push((n("attn_norm.weight"), GgmlType::F32, vec![d]));
        if arch.fused {
            tensors.push((n("attn_qkv.weight"), ty, vec![d, q + 2 * kv]));
        } else {
            tensors.push((n("attn_q.weight"), ty, vec![d, q]));
            tensors.push((n("attn_k.weight"), ty, vec![d, kv]));
            tensors.push((n("attn_v.weight"), ty, vec![d, kv]));
        }
        if arch.qkv_bias {
            tensors.push((n("attn_q.bias"), GgmlType::F32, vec![q]));
            tensors.push((n("attn_k.bias"), GgmlType::F32, vec![kv]));
            tensors.push((n("attn_v.bias"), GgmlType::F32, vec![kv]));
        }
        if arch.qk_norm {
            tensors.push((n("attn_q_norm.weight"), GgmlType::F32, vec![hd]));
            tensors.push((n("attn_k_norm.weight"), GgmlType::F32, vec![hd]));
        }
        tensors.push((n("attn_output.weight"), ty, vec![q, d]));
        tensors.push((n("ffn_norm.weight"), GgmlType::F32, vec![d]));
        if arch.fused {
            tensors.push((n("ffn_up.weight"), ty, vec![d, 2 * shape.ff]));
        } else {
            tensors.push((n("ffn_gate.weight"), ty, vec![d, shape.ff]));
            tensors.push((n("ffn_up.weight"), ty, vec![d, shape.ff]));
        }
        tensors.push((n("ffn_down.weight"), ty, vec![shape.ff, d]));
        if arch.post_norms {
            tensors.push((n("post_attention_norm.weight"), GgmlType::F32, vec![d]));
            tensors.push((n("post_ffw_norm.weight"), GgmlType::F32, vec![d]));
        }
    }
    tensors.push(("output_norm.weight".into(), GgmlType::F32, vec![d]));
    let divisors = shape.llama3_rope.map(|r| r.divisors(shape.rope_base as f64, hd));
    if let Some(f) = &divisors {
        tensors.push(("rope_freqs.weight".into(), GgmlType::F32, vec![f.len() as u64]));
    }
    let long_rope = shape.long_rope.map(|l| l.divisors(hd / 2));
    if long_rope.is_some() {
        tensors.push(("rope_factors_long.weight".into(), GgmlType::F32, vec![hd / 2]));
        tensors.push(("rope_factors_short.weight".into(), GgmlType::F32, vec![hd / 2]));
    }
    let mut total = 0u64;
    for (name, t, dims) in &tensors {
        total += w.declare_tensor(name, *t, dims).map_err(|e| format!("{name}: {e}"))?;
    }
    let file = std::fs::File::create(&a.output).map_err(|e| format!("creating {}: {e}", a.output.display()))?;
    let mut out = w.start(std::io::BufWriter::new(file)).map_err(|e| e.to_string())?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ a.seed);
    for (name, t, dims) in &tensors {
        let n: u64 = dims.iter().product();
        // other norm weights are ones; biases small and varied (so that a bias added to the wrong
        // column shows)
        let bytes = match dims.len() {
            1 if name.ends_with(".bias") => (0..n).flat_map(|i| (0.25 * ((i % 7) as f32 - 3.0)).to_le_bytes()).collect(),
            // q/k norm weights varied too (a norm whose weights were ignored would show)
            1 if name.ends_with("_q_norm.weight") || name.ends_with("_k_norm.weight") => {
                (0..n).flat_map(|i| (1.0 + 0.125 * ((i % 5) as f32 - 2.0)).to_le_bytes()).collect()
            }
            1 if name == "rope_freqs.weight" => divisors.iter().flatten().flat_map(|f| f.to_le_bytes()).collect(),
            1 if name == "rope_factors_long.weight" => long_rope.iter().flat_map(|l| &l.0).flat_map(|f| f.to_le_bytes()).collect(),
            1 if name == "rope_factors_short.weight" => long_rope.iter().flat_map(|l| &l.1).flat_map(|f| f.to_le_bytes()).collect(),
            1 => (0..n).flat_map(|_| 1f32.to_le_bytes()).collect(),
            _ => random_blocks(*t, n, &mut rng),
        };
        out.write_tensor(&bytes).map_err(|e| format!("{name}: {e}"))?;
    }
    let mut f = out.finish().map_err(|e| e.to_string())?;
    f.flush().map_err(|e| e.to_string())?;
    outln!("{}: {} ({}), {} tensors, {:.1} MB of weights", a.output.display(), shape.name, ty.name(), tensors.len(), total as f64 / 1e6);
    if shape.vocab < tok.metadata().get("tokenizer.ggml.tokens").and_then(|v| v.as_array()).map_or(0, |a| a.len() as u64) {
        errln!("rayo synth: the tokenizer has more tokens than the shape's vocabulary: the model will not load");
    }
    Ok(())
}

/// The tokenizer array `key` padded to `vocab` entries with unused tokens, so that the
/// vocabulary matches the embedding's rows (llama.cpp refuses a model where they differ).
fn pad_vocab(key: &str, v: &GgufValue, vocab: usize) -> GgufValue {
    use rayo::gguf::GgufArray;
    /// llama.cpp's `LLAMA_TOKEN_TYPE_UNUSED`
    const UNUSED: i32 = 5;
    let mut v = v.clone();
    if let GgufValue::Array(a) = &mut v {
        match (key, a) {
            ("tokenizer.ggml.tokens", GgufArray::String(t)) => {
                let n = t.len();
                t.extend((n..vocab).map(|i| format!("<unused{i}>")));
            }
            ("tokenizer.ggml.scores", GgufArray::F32(s)) => s.resize(vocab.max(s.len()), 0.0),
            ("tokenizer.ggml.token_type", GgufArray::I32(s)) => s.resize(vocab.max(s.len()), UNUSED),
            _ => {}
        }
    }
    v
}

/// `n` values of `ty`: small random floats for the float types, else random blocks whose f16
/// scales (`d`, and the mins' `dmin`/`m`) are small and finite.
fn random_blocks(ty: GgmlType, n: u64, rng: &mut Rng) -> Vec<u8> {
    use GgmlType::*;
    let small = |rng: &mut Rng| 0.05 * ((rng.next() % 2001) as f32 / 1000.0 - 1.0);
    match ty {
        F32 => return (0..n).flat_map(|_| small(rng).to_le_bytes()).collect(),
        F16 => return (0..n).flat_map(|_| half::f16::from_f32(small(rng)).to_le_bytes()).collect(),
        BF16 => return (0..n).flat_map(|_| half::bf16::from_f32(small(rng)).to_le_bytes()).collect(),
        _ => {}
    }
    // the offsets of the block's f16 fields
    let at: &[usize] = match ty {
        Q4_0 | Q5_0 | Q8_0 => &[0],
        Q4_1 | Q5_1 | Q8_1 | Q4_K | Q5_K => &[0, 2],
        Q2_K => &[80, 82],
        Q3_K => &[108],
        Q6_K => &[208],
        F32 | F16 | BF16 | Q8_K => &[],
    };
    // The mean of a block's quants, where the format subtracts a min (the second field) rather
    // than an offset: that min is set to cancel it, so that the weights average zero as trained
    // weights do. (With a positive mean, a product's outputs grow with its width: on the 1B
    // shape a feed-forward input passed f16's range, and the tensor-core paths gave NaN.)
    let q_mean = match ty {
        Q4_1 | Q4_K => Some(7.5),
        Q5_1 | Q5_K => Some(15.5),
        Q2_K => Some(1.5),
        _ => None,
    };
    // K-quants multiply `d` by a sub-block scale of up to 63 (Q6_K: ±127) as well: a smaller `d`
    // keeps their weights near the others' size
    let k_scale = if matches!(ty, Q3_K | Q4_K | Q5_K | Q6_K) { 1.0 / 16.0 } else { 1.0 };
    let ts = ty.type_size();
    let mut v = vec![0u8; (n / ty.block_size() as u64) as usize * ts];
    rng.fill(&mut v);
    for b in v.chunks_exact_mut(ts) {
        let d = (0.002 + 0.004 * (rng.next() % 1000) as f32 / 1000.0) * k_scale;
        for (i, &o) in at.iter().enumerate() {
            let f = match (i, q_mean) {
                (0, _) | (_, None) => d,
                // legacy formats add `m` (so it is negative); K-quants subtract `dmin · min`,
                // whose 6- or 4-bit mins have the scales' distribution
                (_, Some(q)) if matches!(ty, Q4_1 | Q5_1) => -q * d,
                (_, Some(q)) => q * d,
            };
            b[o..o + 2].copy_from_slice(&half::f16::from_f32(f).to_le_bytes());
        }
    }
    v
}

/// xorshift64*: fast, and enough for weights nobody reads.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn fill(&mut self, v: &mut [u8]) {
        let mut chunks = v.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        let last = self.next().to_le_bytes();
        rest.copy_from_slice(&last[..rest.len()]);
    }
}
