//! `qwen2` (Qwen2, Qwen2.5): llama's block with biases on the q/k/v projections and RoPE on
//! half-split pairs.

use super::{Architecture, RopeStyle, PLAIN};

pub const QWEN2: Architecture = Architecture { name: "qwen2", rope: RopeStyle::HalfSplit, qkv_bias: true, ..PLAIN };
