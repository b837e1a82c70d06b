//! Everything that runs on the CPU: the `Simd` trait and its instruction sets, the kernels
//! written once over it, the math polynomials, threading and buffer reuse.

#[cfg(test)]
mod byte_lanes_test;
pub mod caches;
pub mod gemm;
// The `Simd` vocabulary is complete by design (every instruction set implements every
// operation and constructor), so an operation no kernel calls yet is not dead code.
#[allow(dead_code)]
pub mod isa;
pub mod kernels;
pub mod math;
mod math_tables;
pub mod parallel;
pub mod pool;
#[allow(dead_code)]
pub mod simd;
