//! `gemma3` (Gemma 3 text models, as llama.cpp's `llm_build_gemma3` runs them): embeddings
//! scaled by √n_embd; QK-norm; RMSNorms after attention and after the MLP as well as before;
//! a GELU-gated MLP; RoPE on half-split pairs; five of every six layers attend to a sliding
//! window, with their own RoPE base (`rope.freq_base_swa`, 10,000 by default). The norm weights
//! are used as the GGUF stores them: its converter already added Gemma's `1 +`.

use super::{Activation, Architecture, RopeStyle, PLAIN};

pub const GEMMA3: Architecture = Architecture {
    name: "gemma3",
    rope: RopeStyle::HalfSplit,
    qk_norm: true,
    embed_scale: true,
    post_norms: true,
    ffn: Activation::GeluTanh,
    swa_pattern: Some(6),
    ..PLAIN
};
