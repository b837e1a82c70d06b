//! CPU kernels, each written once over `Simd`.

pub mod elementwise;
pub mod reduce;
pub mod softmax;
