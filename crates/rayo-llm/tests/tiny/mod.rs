//! Small random models written with `GgufWriter`, one per architecture the engine runs (the
//! files `tests/model.rs` checks against its f64 reference and `tests/tensor_parallel.rs`
//! splits): `llama`, `qwen2`, `qwen3`, `gemma3`, `phi3`, `llama` with Llama 3's RoPE divisors,
//! `phi3` with LongRoPE. Runs without any downloaded file.
#![allow(dead_code)]

use rayo::gguf::{GgufArray, GgufFile, GgufValue, GgufWriter};
use rayo::quant::{self, GgmlType};
use rayo_llm::Model;

pub const LAYERS: usize = 2;
pub const D: usize = 32;
pub const FF: usize = 64;
pub const HEADS: usize = 4;
pub const KV_HEADS: usize = 2;
pub const VOCAB: usize = 257;
pub const CTX: usize = 24;
pub const BASE: f64 = 10000.0;
/// gemma3's RoPE base on its global layers (its local layers take `BASE`, the default of
/// `rope.freq_base_swa`).
pub const GLOBAL_BASE: f64 = 1e6;
/// gemma3's window: positions a query of a local layer sees (layer 0 of the 2; pattern 2 makes
/// layer 1 global).
pub const WINDOW: usize = 5;
pub const EPS: f64 = 1e-5;

/// A deterministic pseudo-random value in [-1, 1).
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// GPT-2's byte-to-character map: the token for byte `b`.
pub fn byte_token(b: u8) -> String {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
    if printable(b) {
        return char::from(b).to_string();
    }
    let n = (0..b).filter(|&c| !printable(c)).count() as u32;
    char::from_u32(256 + n).unwrap().to_string()
}

/// The architectures written: `general.architecture` and how the reference computes it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arch {
    /// RoPE on adjacent pairs (2j, 2j+1), no biases.
    Llama,
    /// RoPE on pairs (j, j + HD/2) (GGUF's NEOX), biases on the q/k/v projections.
    Qwen2,
    /// RoPE on pairs (j, j + HD/2), RMSNorm over each query and key head, heads of 16 values
    /// (queries 64 wide in a 32-wide model).
    Qwen3,
    /// Qwen3's attention; embeddings scaled by √D; RMSNorms after attention and after the MLP;
    /// GELU (tanh form) gating; layer 0 a local layer (window `WINDOW`, RoPE base `BASE`),
    /// layer 1 global (RoPE base `GLOBAL_BASE`).
    Gemma3,
    /// RoPE on pairs (j, j + HD/2); the file holds `attn_qkv` (Q, K, V rows) and an `ffn_up`
    /// of gate then up rows.
    Phi3,
    /// `llama` with `rope_freqs.weight`: pair j's angle divided by `FREQS[j]`.
    Llama3,
    /// `phi3` with LongRoPE: `rope_factors_long/short.weight`, the switch at
    /// `LONG_ROPE_CONTEXT` positions, cos and sin times `ATTN_FACTOR`; a session of more
    /// positions (the model's `CTX`): pair j's angle divided by `LONG[j]`.
    Phi3Long,
    /// The same file, a session of `LONG_ROPE_CONTEXT` positions: divided by `SHORT[j]`.
    Phi3Short,
}

/// LongRoPE's divisors of the `Phi3Long` file's 4 pairs, the context they switch at, and its
/// attention factor.
pub const LONG: [f32; 4] = [1.0, 2.5, 9.0, 40.0];
pub const SHORT: [f32; 4] = [1.0, 1.1, 1.3, 2.0];
pub const LONG_ROPE_CONTEXT: usize = CTX / 2;
pub const ATTN_FACTOR: f32 = 1.19;

/// The Llama-3 divisors of the `Llama3` model's 4 RoPE pairs (heads of 8).
pub const FREQS: [f32; 4] = [1.0, 1.7, 6.0, 32.0];

impl Arch {
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
            Arch::Phi3 | Arch::Phi3Long | Arch::Phi3Short => "phi3",
            Arch::Llama3 => "llama",
        }
    }

    /// Values per head.
    pub fn hd(self) -> usize {
        match self {
            Arch::Qwen3 | Arch::Gemma3 => 16,
            _ => D / HEADS,
        }
    }
}

/// The model's tensors: name → (rows, cols, values); vectors (norms, biases) have one row.
pub struct Weights {
    pub arch: Arch,
    pub tensors: Vec<(String, usize, usize, Vec<f32>)>,
}

impl Weights {
    pub fn random() -> Weights {
        Weights::random_of(Arch::Llama)
    }

    pub fn random_of(arch: Arch) -> Weights {
        let mut t = vec![("token_embd.weight".to_string(), VOCAB, D, values(VOCAB * D, 1))];
        let norm = |seed| values(D, seed).iter().map(|v| 1.0 + 0.2 * v).collect::<Vec<_>>();
        t.push(("output_norm.weight".into(), 1, D, norm(2)));
        let scale = |v: Vec<f32>, k: f32| v.into_iter().map(|x| x * k).collect::<Vec<_>>();
        let (hd, q) = (arch.hd(), HEADS * arch.hd());
        let kv = KV_HEADS * hd;
        for l in 0..LAYERS {
            let s = 100 * (l as u64 + 1);
            let b = |n: &str| format!("blk.{l}.{n}");
            t.push((b("attn_norm.weight"), 1, D, norm(s)));
            t.push((b("attn_q.weight"), q, D, scale(values(q * D, s + 1), 0.3)));
            t.push((b("attn_k.weight"), kv, D, scale(values(kv * D, s + 2), 0.3)));
            t.push((b("attn_v.weight"), kv, D, scale(values(kv * D, s + 3), 0.3)));
            if arch == Arch::Qwen2 {
                // Large enough to matter next to the products (as Qwen2's k biases are).
                t.push((b("attn_q.bias"), 1, q, scale(values(q, s + 10), 0.5)));
                t.push((b("attn_k.bias"), 1, kv, scale(values(kv, s + 11), 2.0)));
                t.push((b("attn_v.bias"), 1, kv, scale(values(kv, s + 12), 0.5)));
            }
            if matches!(arch, Arch::Qwen3 | Arch::Gemma3) {
                // Far from 1, so that leaving the norm out shows.
                let spread = |seed| values(hd, seed).iter().map(|v| 1.0 + 0.8 * v).collect::<Vec<_>>();
                t.push((b("attn_q_norm.weight"), 1, hd, spread(s + 13)));
                t.push((b("attn_k_norm.weight"), 1, hd, spread(s + 14)));
            }
            t.push((b("attn_output.weight"), D, q, scale(values(D * q, s + 4), 0.3)));
            t.push((b("ffn_norm.weight"), 1, D, norm(s + 5)));
            t.push((b("ffn_gate.weight"), FF, D, scale(values(FF * D, s + 6), 0.3)));
            t.push((b("ffn_up.weight"), FF, D, scale(values(FF * D, s + 7), 0.3)));
            t.push((b("ffn_down.weight"), D, FF, scale(values(D * FF, s + 8), 0.3)));
            if arch == Arch::Gemma3 {
                t.push((b("post_attention_norm.weight"), 1, D, norm(s + 15)));
                t.push((b("post_ffw_norm.weight"), 1, D, norm(s + 16)));
            }
        }
        Weights { arch, tensors: t }
    }

    /// The same tensors, those for which `edit(name)` gives values replaced by them: a model
    /// with one part of the architecture left out, for the reference.
    pub fn edited(&self, edit: impl Fn(&str) -> Option<Vec<f32>>) -> Weights {
        Weights {
            arch: self.arch,
            tensors: self.tensors.iter().map(|(n, r, c, v)| (n.clone(), *r, *c, edit(n).unwrap_or_else(|| v.clone()))).collect(),
        }
    }

    pub fn get(&self, name: &str) -> &[f32] {
        &self.tensors.iter().find(|t| t.0 == name).unwrap().3
    }

    /// As the model sees them after writing in `ty` (matrices; norms and biases stay F32).
    pub fn as_stored(&self, ty: GgmlType) -> Weights {
        let tensors = self
            .tensors
            .iter()
            .map(|(n, r, c, v)| {
                let v = if *r > 1 && ty != GgmlType::F32 {
                    let mut out = vec![0.0; v.len()];
                    quant::dequantize(ty, &quant::quantize_to_vec(ty, v).unwrap(), &mut out).unwrap();
                    out
                } else {
                    v.clone()
                };
                (n.clone(), *r, *c, v)
            })
            .collect();
        Weights { arch: self.arch, tensors }
    }
}

/// A GGUF file of the model with matrices in `ty`, after `edit` changes the writer's inputs.
pub fn gguf(w: &Weights, ty: GgmlType, edit: impl FnOnce(&mut GgufWriter, &mut Vec<(String, usize, usize, Vec<f32>)>)) -> GgufFile {
    let mut g = GgufWriter::new();
    let arch = w.arch.name();
    g.set("general.architecture", arch);
    for (k, v) in [
        ("block_count", LAYERS),
        ("embedding_length", D),
        ("feed_forward_length", FF),
        ("attention.head_count", HEADS),
        ("attention.head_count_kv", KV_HEADS),
        ("context_length", CTX),
        ("rope.dimension_count", w.arch.hd()),
        ("attention.key_length", w.arch.hd()),
        ("attention.value_length", w.arch.hd()),
    ] {
        g.set(format!("{arch}.{k}"), v as u32);
    }
    g.set(format!("{arch}.rope.freq_base"), BASE as f32);
    if w.arch == Arch::Gemma3 {
        g.set(format!("{arch}.rope.freq_base"), GLOBAL_BASE as f32);
        g.set(format!("{arch}.attention.sliding_window"), WINDOW as u32);
        g.set(format!("{arch}.attention.sliding_window_pattern"), 2u32);
    }
    g.set(format!("{arch}.attention.layer_norm_rms_epsilon"), EPS as f32);
    g.set("tokenizer.ggml.model", "gpt2");
    g.set("tokenizer.ggml.pre", "gpt-2");
    let mut tokens: Vec<String> = (0..=255u8).map(byte_token).collect();
    tokens.push("<|end|>".into());
    let mut types = vec![1i32; 256];
    types.push(3);
    g.set("tokenizer.ggml.tokens", GgufValue::Array(GgufArray::String(tokens)));
    g.set("tokenizer.ggml.token_type", GgufValue::Array(GgufArray::I32(types)));
    g.set("tokenizer.ggml.merges", GgufValue::Array(GgufArray::String(vec![])));
    g.set("tokenizer.ggml.eos_token_id", 256u32);
    g.set("tokenizer.ggml.bos_token_id", 256u32);
    g.set("tokenizer.ggml.add_bos_token", false);
    let mut tensors = w.tensors.clone();
    if matches!(w.arch, Arch::Phi3 | Arch::Phi3Long | Arch::Phi3Short) {
        fuse(&mut tensors);
    }
    if matches!(w.arch, Arch::Phi3Long | Arch::Phi3Short) {
        tensors.push(("rope_factors_long.weight".into(), 1, LONG.len(), LONG.to_vec()));
        tensors.push(("rope_factors_short.weight".into(), 1, SHORT.len(), SHORT.to_vec()));
        g.set(format!("{arch}.rope.scaling.original_context_length"), LONG_ROPE_CONTEXT as u32);
        g.set(format!("{arch}.rope.scaling.attn_factor"), ATTN_FACTOR);
    }
    if w.arch == Arch::Llama3 {
        tensors.push(("rope_freqs.weight".into(), 1, FREQS.len(), FREQS.to_vec()));
    }
    edit(&mut g, &mut tensors);
    for (name, rows, cols, v) in &tensors {
        let (t, shape): (GgmlType, Vec<u64>) = if *rows == 1 { (GgmlType::F32, vec![*cols as u64]) } else { (ty, vec![*cols as u64, *rows as u64]) };
        let bytes = if t == GgmlType::F32 { v.iter().flat_map(|x| x.to_le_bytes()).collect() } else { quant::quantize_to_vec(t, v).unwrap() };
        g.add_tensor(name, t, &shape, bytes).unwrap();
    }
    GgufFile::from_bytes(g.write_to(Vec::new()).unwrap()).unwrap()
}

/// phi3's fused tensors: each layer's Q, K, V rows as one `attn_qkv`, gate and up rows as one
/// `ffn_up` (gate first), in place of the separate ones.
pub fn fuse(tensors: &mut Vec<(String, usize, usize, Vec<f32>)>) {
    for l in 0..LAYERS {
        let mut take = |n: &str| {
            let i = tensors.iter().position(|t| t.0 == format!("blk.{l}.{n}.weight")).unwrap();
            tensors.remove(i)
        };
        let (q, k, v) = (take("attn_q"), take("attn_k"), take("attn_v"));
        let (gate, up) = (take("ffn_gate"), take("ffn_up"));
        tensors.push((format!("blk.{l}.attn_qkv.weight"), q.1 + k.1 + v.1, D, [q.3, k.3, v.3].concat()));
        tensors.push((format!("blk.{l}.ffn_up.weight"), 2 * FF, D, [gate.3, up.3].concat()));
    }
}

pub fn model(ty: GgmlType) -> Model {
    model_of(Arch::Llama, ty)
}

pub fn model_of(arch: Arch, ty: GgmlType) -> Model {
    Model::from_file(gguf(&Weights::random_of(arch), ty, |_, _| {})).unwrap()
}

/// The error of loading the llama model after `edit` (it must not load).
pub fn model_error(edit: impl FnOnce(&mut GgufWriter, &mut Vec<(String, usize, usize, Vec<f32>)>)) -> String {
    match Model::from_file(gguf(&Weights::random(), GgmlType::F32, edit)) {
        Ok(_) => panic!("the model loaded"),
        Err(e) => e.to_string(),
    }
}
