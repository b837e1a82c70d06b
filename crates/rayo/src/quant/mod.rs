//! Quantized tensors: ggml's block formats ([`blocks`]), their types ([`GgmlType`]),
//! dequantization ([`dequantize`], SIMD on every ISA), llama.cpp's reference quantizers
//! ([`quantize`]) and the quantized matrix products.
//!
//! Per block, [`BlockCodec`] is the definition (`dequantize`, scalar) and the quantizer;
//! the row functions check lengths, take bytes of any alignment and split long rows over
//! threads.
//!
//! ```
//! use rayo::quant::{self, GgmlType};
//! let x: Vec<f32> = (0..512).map(|i| (i as f32 * 0.1).sin()).collect();
//! let q = quant::quantize_to_vec(GgmlType::Q4_K, &x)?; // llama.cpp's quantize_row_q4_K_ref
//! assert_eq!(q.len(), 2 * 144);
//! let mut y = vec![0.0; 512];
//! quant::dequantize(GgmlType::Q4_K, &q, &mut y)?;
//! assert!(x.iter().zip(&y).all(|(a, b)| (a - b).abs() < 0.1));
//! assert!(quant::quantize_to_vec(GgmlType::Q4_K, &x[..100]).is_err()); // not whole blocks
//! # Ok::<(), rayo::Error>(())
//! ```

mod activation;
pub mod blocks;
mod codec;
mod dot;
mod dot_f32;
mod float;
mod kernel;
mod legacy;
mod matmul;
mod panel16;
mod prepared;
mod q2k;
mod q3k;
mod q4k;
mod q5k;
mod q6k;
mod q8k;
mod repacked;
mod row;
mod search;
mod tile8;
mod types;

pub use activation::{activation_type, quantize_activations_with};
pub use codec::{BlockCodec, MinKind, Unpack};
pub use float::{bf16_bits_to_f32, f16_bits_to_f32, f32_to_bf16_bits};
pub use matmul::{matmul, matmul_f32act, matmul_rows, matmul_with, matvec, matvec_f32act, Activations, QuantMatrix};
pub use prepared::PreparedActs;
/// The table of formats every backend derives its own from ([`GgmlType::format`]).
pub use rayo_formats as formats;
pub use repacked::Repacked;
pub use row::{dequantize, dequantize_scalar, dequantize_with, quantize, quantize_to_vec};
pub use search::get_scale_min_k4;
pub use types::{GgmlType, QK_K};
