//! Everything that runs on the CPU: the `Simd` trait and its instruction sets, the kernels
//! written once over it, the math polynomials, threading and buffer reuse.

pub mod caches;
pub mod gemm;
pub mod isa;
pub mod kernels;
pub mod math;
pub mod parallel;
pub mod pool;
pub mod simd;
