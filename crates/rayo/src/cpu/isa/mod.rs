//! One file per instruction set; each is a zero-sized token implementing `Simd`.

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "x86_64")]
mod bytes256;
#[cfg(target_arch = "aarch64")]
pub mod neon;
pub mod scalar;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub mod simd128;
#[cfg(target_arch = "x86_64")]
pub mod sse2;
