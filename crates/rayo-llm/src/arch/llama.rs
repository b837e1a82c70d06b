//! `llama` (Llama 2/3, SmolLM2, and every model converted as llama): the plain block.

use super::{Architecture, RopeStyle};

pub const LLAMA: Architecture = Architecture { name: "llama", rope: RopeStyle::Adjacent, qkv_bias: false, qk_norm: false };
