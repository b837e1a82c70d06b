//! rayo: one API for vectors, matrices and tensors on CPU SIMD, wgpu and CUDA.

#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

mod error;

pub use error::{Error, Result};
