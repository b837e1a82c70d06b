//! rayo: one API for vectors, matrices and tensors that runs on the CPU's SIMD units
//! (AVX-512, AVX2, SSE2, NEON, WASM SIMD128, chosen at run time), on GPUs through wgpu
//! (feature `gpu`), and on NVIDIA GPUs through PTX written by `rayo-ptx` (feature `cuda`).
//!
//! ```
//! use rayo::Vector;
//! let a = Vector::from_slice(&[1.0, 2.0, 3.0, 4.0]);
//! let b = Vector::from_slice(&[5.0, 6.0, 7.0, 8.0]);
//! assert_eq!(a.add(&b)?.as_slice(), &[6.0, 8.0, 10.0, 12.0]);
//! assert_eq!(a.dot(&b)?, 70.0);
//! assert_eq!(a.sum(), 10.0);
//! assert!((a.norm_l2() - 5.477_226).abs() < 1e-6);
//! let p = a.softmax()?;
//! assert!((p.sum() - 1.0).abs() < 1e-6);
//! assert!(a.clip(1.0, 0.0).is_err()); // min > max is an error, not a panic
//! # Ok::<(), rayo::Error>(())
//! ```
//!
//! Every op runs on the instruction set chosen once per process ([`Backend::detect`], or
//! `RAYO_BACKEND=scalar|sse2|avx2|avx512|neon|simd128`), uses the cores above a measured
//! size, and has an `_into` twin that writes into a caller's buffer without allocating.
//!
//! State that reaches across calls is explicit, and there are three pieces of it:
//! - threads: [`set_max_threads`] is the process-wide limit (default: all of rayon's pool);
//!   [`gemm_par`] takes a [`Par`] for one call instead;
//! - buffer reuse: off unless [`set_buffer_reuse`] gives it a byte budget;
//! - the environment (`RAYO_*`): read once, in one place, and shown by [`Config::get`]; a
//!   value rayo does not understand is logged (the `log` crate, warn level) and ignored.

mod backend;
mod config;
pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod error;
pub mod gguf;
#[cfg(any(feature = "gpu", feature = "gpu-wasm"))]
pub mod gpu;
mod matrix;
pub mod ops;
pub mod quant;
pub mod slice;
mod tensor;
mod vector;

pub use backend::{force_cpu, Backend};
pub use config::{Config, CudaDecode, CudaPrefill, EnvVar};
pub use cpu::parallel::{max_threads, set_max_threads, Par};
pub use cpu::pool::{buffer_reuse, set_buffer_reuse};
pub use error::{ArgValue, Error, ErrorSource, Result};
pub use matrix::{gemm, gemm_par, gemm_with, MatMut, MatRef, Matrix};
pub use tensor::Tensor;
pub use vector::Vector;

/// The README's Rust examples, compiled (and the CPU one run) as doctests:
/// `cargo test -p rayo --doc --features gpu,cuda` (scripts/test.sh, section `readme`).
#[cfg(all(doctest, feature = "gpu", feature = "cuda"))]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
