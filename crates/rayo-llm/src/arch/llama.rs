//! `llama` (Llama 2/3, SmolLM2, and every model converted as llama): the plain block.

use super::{Architecture, PLAIN};

pub const LLAMA: Architecture = PLAIN;
