//! Language models from GGUF files, run on rayo's kernels.
//!
//! The pieces, one per module: the tokenizer built from a file's metadata ([`tokenizer`]),
//! the llama-family model written once over a [`backend`] trait, its KV cache, and sampling.
//! Weights stay quantized in place (the file's memory map); nothing is dequantized to f32 in
//! bulk.

pub use rayo::{Error, Result};
pub mod chat;
pub mod sample;
