//! Quantized tensors: ggml's block formats ([`blocks`]), their types ([`GgmlType`]),
//! dequantization, the reference quantizers and the quantized matrix products.

pub mod blocks;
mod types;

pub use types::{GgmlType, QK_K};
