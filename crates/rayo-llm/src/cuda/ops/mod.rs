//! The LLM's ops on CUDA device buffers, the backend ([`super::Cuda`]) is built on: a pass's
//! inputs on the device ([`StepInputs`], checked into a [`StepCtx`]), the token embedding,
//! RoPE, a layer's KV store and attention ([`LayerCache`]; a decoding step's RoPE + store +
//! attention in one launch), and sampling's argmax and top-k ([`argmax`], [`top_k`]).
//!
//! Each launches a `rayo-ptx` kernel through rayo's typed launch ([`rayo::cuda::KernelArgs`]):
//! the kernels' parameter lists are the types of `args.rs`, the one file here with `unsafe`
//! (one `unsafe impl` per kernel, each saying why its extents cover what the kernel indexes).
//! Every op acts on the first `m` rows of buffers that may be longer (a session's buffers hold
//! its largest batch) and checks every size before it launches.

mod args;
mod attention;
mod sample;
mod step;

pub use attention::{AttentionShape, DecodeScratch, LayerCache};
pub use rayo::cuda::kernels::RopePairs;
pub use sample::{argmax, top_k, top_k_rows, Argmax, TopK};
pub use step::{OneTokenRows, Rope, Segment, StepCtx, StepInputs};

use rayo::{Error, Result};

/// `v` as a u32, or an error: the kernels index with 32 bits.
fn u32_of(op: &'static str, name: &'static str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::InvalidArgument { op, name, value: v.into(), reason: "past the 32-bit sizes the kernels index with" })
}

/// `a · b · …`, an error naming the op when it overflows.
fn prod(op: &'static str, dims: &[usize]) -> Result<usize> {
    dims.iter().try_fold(1usize, |p, &d| p.checked_mul(d)).ok_or(Error::SizeOverflow { op, dims: dims.to_vec() })
}

/// An error unless `have ≥ need` (a buffer holding at least the rows an op touches).
fn room(op: &'static str, have: usize, need: usize) -> Result<()> {
    if have < need {
        return Err(Error::LengthMismatch { op, expected: need, actual: have });
    }
    Ok(())
}
