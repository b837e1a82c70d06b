//! Quantized tensors: ggml's block formats ([`blocks`]), their types ([`GgmlType`]),
//! dequantization ([`dequantize`], SIMD on every ISA), llama.cpp's reference quantizers
//! ([`quantize`]) and the quantized matrix products.
//!
//! Per block, [`BlockCodec`] is the definition (`dequantize`, scalar) and the quantizer;
//! the row functions check lengths and take bytes of any alignment.

mod activation;
pub mod blocks;
mod codec;
mod dot;
mod dot_f32;
mod float;
mod kernel;
mod legacy;
mod matmul;
mod q2k;
mod q3k;
mod q4k;
mod q5k;
mod q6k;
mod q8k;
mod row;
mod search;
mod types;

pub use activation::{activation_type, quantize_activations_with};
pub use codec::{BlockCodec, MinKind, Unpack};
pub use float::{bf16_bits_to_f32, f32_to_bf16_bits};
pub use matmul::{matmul, matmul_f32act, matmul_with, matvec, matvec_f32act, Activations, QuantMatrix};
pub use row::{dequantize, dequantize_with, quantize, quantize_to_vec};
pub use search::get_scale_min_k4;
pub use types::{GgmlType, QK_K};
