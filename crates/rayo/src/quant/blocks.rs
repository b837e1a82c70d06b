//! The block layouts of ggml's quantized formats, byte for byte as `ggml-common.h` declares
//! them (little-endian; `d`, `m`, `dmin` are IEEE half floats unless noted). Each is `Pod`, so
//! a file's bytes are viewed as blocks without a copy (`bytemuck::try_cast_slice`, which checks
//! length and alignment). Values and bytes per block are the table's ([`rayo_formats::FORMATS`],
//! through [`GgmlType`]): each struct's size is asserted against it at compile time.

use bytemuck::{Pod, Zeroable};
use half::f16;

use super::types::GgmlType;

/// Values per block of the 32-wide formats.
pub const QK32: usize = GgmlType::Q8_0.block_size();

/// A quantized block: its type and how many values it holds.
pub trait Block: Pod {
    const TYPE: GgmlType;
    const VALUES: usize;
}

macro_rules! block {
    ($(#[$doc:meta])* $name:ident, $ty:ident, { $($field:ident : $fty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
        #[repr(C)]
        pub struct $name { $(pub $field: $fty),* }
        const _: () = assert!(core::mem::size_of::<$name>() == GgmlType::$ty.type_size());
        impl Block for $name {
            const TYPE: GgmlType = GgmlType::$ty;
            const VALUES: usize = GgmlType::$ty.block_size();
        }
    };
}

block!(
    /// `(q − 8)·d`; low nibbles are values 0–15, high nibbles 16–31.
    BlockQ4_0, Q4_0, { d: f16, qs: [u8; 16] });
block!(
    /// `q·d + m`.
    BlockQ4_1, Q4_1, { d: f16, m: f16, qs: [u8; 16] });
block!(
    /// `(q − 16)·d`, the fifth bit of value j in bit j of `qh`.
    BlockQ5_0, Q5_0, { d: f16, qh: [u8; 4], qs: [u8; 16] });
block!(
    /// `q·d + m`, the fifth bit of value j in bit j of `qh`.
    BlockQ5_1, Q5_1, { d: f16, m: f16, qh: [u8; 4], qs: [u8; 16] });
block!(
    /// `q·d`.
    BlockQ8_0, Q8_0, { d: f16, qs: [i8; 32] });
block!(
    /// `q·d`; `s = d·Σq` (for the products of formats with a minimum).
    BlockQ8_1, Q8_1, { d: f16, s: f16, qs: [i8; 32] });
block!(
    /// 16 sub-blocks of 16: 4-bit scale (low) and min (high) per sub-block, 2-bit values.
    BlockQ2K, Q2_K, { scales: [u8; 16], qs: [u8; 64], d: f16, dmin: f16 });
block!(
    /// 16 sub-blocks of 16: 6-bit scales packed in 12 bytes, 2 low bits in `qs`, the high bit
    /// in `hmask` (set means no −4 offset).
    BlockQ3K, Q3_K, { hmask: [u8; 32], qs: [u8; 64], scales: [u8; 12], d: f16 });
block!(
    /// 8 sub-blocks of 32: `d·sc·q − dmin·m` with 6-bit `sc`, `m` packed in 12 bytes.
    BlockQ4K, Q4_K, { d: f16, dmin: f16, scales: [u8; 12], qs: [u8; 128] });
block!(
    /// As Q4_K with a fifth bit per value in `qh`.
    BlockQ5K, Q5_K, { d: f16, dmin: f16, scales: [u8; 12], qh: [u8; 32], qs: [u8; 128] });
block!(
    /// 16 sub-blocks of 16: `d·sc·(q − 32)`, 4 low bits in `ql`, 2 high in `qh`, i8 scales.
    BlockQ6K, Q6_K, { ql: [u8; 128], qh: [u8; 64], scales: [i8; 16], d: f16 });
block!(
    /// The activations' side of k-quant products: `d` is f32, `bsums` the sums of each 16.
    BlockQ8K, Q8_K, { d: f32, qs: [i8; 256], bsums: [i16; 16] });
