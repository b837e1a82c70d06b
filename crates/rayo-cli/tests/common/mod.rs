//! What the CLI tests share: the real model and llama.cpp's reference files, from the LLM
//! crate's test readers (one lookup of SmolLM2 for the whole workspace).
#![allow(dead_code)]

#[path = "../../../rayo-llm/tests/llama_ref/mod.rs"]
pub mod llama_ref;

pub use llama_ref::smollm2;
