//! Language models from GGUF files, run on rayo's kernels.
//!
//! The pieces, one per module: the tokenizer built from a file's metadata ([`tokenizer`]),
//! the llama-family model written once over a [`backend`] trait, its KV cache, and sampling.
//! Weights stay quantized in place (the file's memory map); nothing is dequantized to f32 in
//! bulk.

pub mod arch;
pub mod backend;
pub mod batch;
pub mod batch_session;
pub mod chat;
pub mod collective;
pub mod config;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod error;
pub mod generate;
pub mod model;
mod pass;
pub mod perplexity;
pub mod rendezvous;
pub mod sample;
pub mod session;
pub mod shard;
pub mod tensor_parallel;
pub mod tokenizer;
mod utf8;
pub mod weights;
#[cfg(feature = "wgpu")]
pub mod wgpu;

pub use backend::{Backend, KvType, RowBest};
pub use batch::{BatchForward, SessionPool, SlotWork, StepOut};
pub use batch_session::{BatchOptions, BatchSession};
pub use config::{Config, LongRope, RopeStyle, SlidingWindow};
pub use error::{Error, Result};
pub use generate::{generate, Stats, Stop};
pub use model::Model;
pub use rendezvous::Rendezvous;
pub use session::{Forward, Logits, Session, SessionOptions, DEFAULT_CONTEXT};
pub use shard::Shard;
pub use tensor_parallel::{serve_rank, TensorParallel, TensorParallelBatch};
pub use tokenizer::Tokenizer;
pub use utf8::Utf8Stream;
