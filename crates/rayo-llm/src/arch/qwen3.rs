//! `qwen3` (Qwen3 dense): no q/k/v biases, an RMSNorm over each query and key head before RoPE
//! on half-split pairs, and a head size from `attention.key_length` independent of the width.

use super::{Architecture, RopeStyle, PLAIN};

pub const QWEN3: Architecture = Architecture { name: "qwen3", rope: RopeStyle::HalfSplit, qk_norm: true, ..PLAIN };
