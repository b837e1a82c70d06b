//! `phi3` (Phi-3, Phi-3.5, Phi-4-mini): llama's block with RoPE on half-split pairs and fused
//! projections (one `attn_qkv`, one `ffn_up` holding gate and up). Its long-context models'
//! LongRoPE (`rope_factors_long/short.weight`, `rope.scaling.attn_factor`) is read for any
//! architecture ([`crate::LongRope`]).

use super::{Architecture, RopeStyle, PLAIN};

pub const PHI3: Architecture = Architecture { name: "phi3", rope: RopeStyle::HalfSplit, fused: true, ..PLAIN };
