//! CPU kernels, each written once over `Simd`.

pub mod conv;
pub mod elementwise;
pub mod functions;
pub mod reduce;
pub mod softmax;
pub mod transpose;
