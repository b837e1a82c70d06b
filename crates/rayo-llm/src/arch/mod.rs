//! Architectures as data. Each is a short declaration, one file, of how its transformer block
//! differs from llama's: RoPE pairing, biases, QK-norm, the MLP's activation, norms after the
//! sublayers, sliding-window layers, fused tensors. [`crate::Config::from_gguf`] picks one
//! by `general.architecture`, [`crate::weights::Weights::from_gguf`] finds the tensors it
//! declares (and refuses a file with tensors it does not use), and one
//! [`crate::Session`] walks it on every backend, fused where a backend can.
//!
//! The block, with the declared parts in brackets:
//!
//! ```text
//! x = embed(tokens) [· √n_embd]
//! per layer:
//!   n = rms_norm(x, attn_norm)
//!   q, k, v = n·Wq [+ bq], n·Wk [+ bk], n·Wv [+ bv]   [Wq, Wk, Wv: row ranges of one attn_qkv]
//!   [q, k = rms_norm per head (attn_q_norm, attn_k_norm)]
//!   a = attention(rope(q), rope(k), v)·Wo     [over the last `window` positions, on local layers]
//!   x += a                                     [x += rms_norm(a, post_attention_norm)]
//!   n = rms_norm(x, ffn_norm)
//!   f = down(act(n·Wgate) · (n·Wup))           act: silu, or [gelu (tanh form)]
//!                                              [Wgate, Wup: the halves of one ffn_up]
//!   x += f                                     [x += rms_norm(f, post_ffw_norm)]
//! logits = rms_norm(x, output_norm)·Woutput
//! ```
//!
//! RoPE's angles may also be divided by per-pair factors (`rope_freqs.weight`: Llama 3's
//! scaling, in any architecture's file) and positions scaled (`rope.scaling.type` linear).
//!
//! Adding an architecture made of these parts is one file here and one line in
//! [`ARCHITECTURES`].

mod gemma3;
mod llama;
mod phi3;
mod qwen2;
mod qwen3;

pub use gemma3::GEMMA3;
pub use llama::LLAMA;
pub use phi3::PHI3;
pub use qwen2::QWEN2;
pub use qwen3::QWEN3;

/// How RoPE pairs a head's values (llama.cpp's `llama_model_rope_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i+1)` ("NORM"): GGUF `llama`, whose converter permutes the Q/K rows
    /// so that this equals HF's rotate-half on the original weights.
    Adjacent,
    /// Pairs `(i, i + n_rot/2)` ("NEOX"): `qwen2` and others converted without the permutation.
    HalfSplit,
}

/// How one architecture's block is built (see the module's diagram).
#[derive(Debug, PartialEq, Eq)]
pub struct Architecture {
    /// `general.architecture`, and the prefix of its metadata keys.
    pub name: &'static str,
    /// How RoPE pairs values.
    pub rope: RopeStyle,
    /// Biases on the q/k/v projections (`blk.N.attn_{q,k,v}.bias`).
    pub qkv_bias: bool,
    /// An RMSNorm over each query and key head before RoPE (`blk.N.attn_{q,k}_norm.weight`,
    /// `head_dim` values each, with the model's epsilon).
    pub qk_norm: bool,
    /// Embeddings scaled by √n_embd before the first block.
    pub embed_scale: bool,
    /// RMSNorms of each sublayer's output before its residual add
    /// (`blk.N.post_attention_norm.weight`, `blk.N.post_ffw_norm.weight`).
    pub post_norms: bool,
    /// The activation of the MLP's gate.
    pub ffn: Activation,
    /// Sliding-window attention: when the file gives `attention.sliding_window`, layer `i` is
    /// local unless `i % n == n − 1`, `n` from `attention.sliding_window_pattern` or this
    /// default (llama.cpp's rule). `None`: every layer attends to the whole prefix.
    pub swa_pattern: Option<usize>,
    /// Fused projections: Q, K and V may be one `attn_qkv` tensor (their rows in that order;
    /// separate tensors are taken too), and the MLP's gate and up are one `ffn_up` of
    /// `2 · n_ff` rows, the gate's first.
    pub fused: bool,
}

/// The activation of a gated MLP: `act(gate) · up`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `x · sigmoid(x)` (SwiGLU).
    Silu,
    /// GELU in its tanh form, `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` (GeGLU).
    GeluTanh,
}

/// The plain block's choices (llama's): what each declaration starts from.
pub const PLAIN: Architecture = Architecture {
    name: "llama",
    rope: RopeStyle::Adjacent,
    qkv_bias: false,
    qk_norm: false,
    embed_scale: false,
    post_norms: false,
    ffn: Activation::Silu,
    swa_pattern: None,
    fused: false,
};

/// Every architecture this engine runs.
pub const ARCHITECTURES: &[&Architecture] = &[&LLAMA, &QWEN2, &QWEN3, &GEMMA3, &PHI3];

/// The architecture named `name`, or an error naming it and the known ones.
pub fn find(name: &str) -> crate::Result<&'static Architecture> {
    ARCHITECTURES
        .iter()
        .find(|a| a.name == name)
        .copied()
        .ok_or_else(|| crate::Error::UnsupportedArchitecture { arch: name.to_string(), known: ARCHITECTURES.iter().map(|a| a.name).collect() })
}

/// A plain block (llama's) with RoPE on `style`'s pairs: what a test of RoPE alone configures.
pub fn with_rope(style: RopeStyle) -> &'static Architecture {
    match style {
        RopeStyle::Adjacent => &LLAMA,
        RopeStyle::HalfSplit => &QWEN2,
    }
}
