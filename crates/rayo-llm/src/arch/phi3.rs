//! `phi3` (Phi-3, Phi-3.5, Phi-4-mini): llama's block with RoPE on half-split pairs and fused
//! projections (one `attn_qkv`, one `ffn_up` holding gate and up). LongRoPE's factors
//! (`rope_factors_long/short.weight`) are not read: a file with them is refused, naming the
//! tensor.

use super::{Architecture, RopeStyle, PLAIN};

pub const PHI3: Architecture = Architecture { name: "phi3", rope: RopeStyle::HalfSplit, fused: true, ..PLAIN };
