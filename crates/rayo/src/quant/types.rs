//! The tensor data types of GGML/GGUF that rayo reads, writes and computes with.

use crate::{Error, Result};

/// A GGML tensor type, with its GGUF id (`ggml_type` in llama.cpp's `ggml.h`).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum GgmlType {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    BF16 = 30,
}

/// Values per super-block of the k-quants.
pub const QK_K: usize = 256;

impl GgmlType {
    /// Every type, in id order.
    pub const ALL: [GgmlType; 15] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q8_1,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::Q8_K,
        GgmlType::BF16,
    ];

    /// The type with GGUF id `id`, or `Error::UnsupportedType` (with ggml's name for ids rayo
    /// knows of but does not implement, such as the IQ formats).
    pub fn from_id(id: u32) -> Result<GgmlType> {
        GgmlType::ALL.iter().copied().find(|t| *t as u32 == id).ok_or(Error::UnsupportedType { id, name: foreign_type_name(id) })
    }

    /// The GGUF id.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// ggml's spelling: `F32`, `Q4_K`, `BF16`, ...
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "F32",
            GgmlType::F16 => "F16",
            GgmlType::Q4_0 => "Q4_0",
            GgmlType::Q4_1 => "Q4_1",
            GgmlType::Q5_0 => "Q5_0",
            GgmlType::Q5_1 => "Q5_1",
            GgmlType::Q8_0 => "Q8_0",
            GgmlType::Q8_1 => "Q8_1",
            GgmlType::Q2_K => "Q2_K",
            GgmlType::Q3_K => "Q3_K",
            GgmlType::Q4_K => "Q4_K",
            GgmlType::Q5_K => "Q5_K",
            GgmlType::Q6_K => "Q6_K",
            GgmlType::Q8_K => "Q8_K",
            GgmlType::BF16 => "BF16",
        }
    }

    /// The type spelled `name` (case-insensitive).
    pub fn from_name(name: &str) -> Option<GgmlType> {
        GgmlType::ALL.iter().copied().find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// Values per block (1 for the float types).
    pub fn block_size(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0 | GgmlType::Q8_1 => 32,
            GgmlType::Q2_K | GgmlType::Q3_K | GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K | GgmlType::Q8_K => QK_K,
        }
    }

    /// Bytes per block.
    pub fn type_size(self) -> usize {
        use super::blocks::*;
        use core::mem::size_of;
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => size_of::<BlockQ4_0>(),
            GgmlType::Q4_1 => size_of::<BlockQ4_1>(),
            GgmlType::Q5_0 => size_of::<BlockQ5_0>(),
            GgmlType::Q5_1 => size_of::<BlockQ5_1>(),
            GgmlType::Q8_0 => size_of::<BlockQ8_0>(),
            GgmlType::Q8_1 => size_of::<BlockQ8_1>(),
            GgmlType::Q2_K => size_of::<BlockQ2K>(),
            GgmlType::Q3_K => size_of::<BlockQ3K>(),
            GgmlType::Q4_K => size_of::<BlockQ4K>(),
            GgmlType::Q5_K => size_of::<BlockQ5K>(),
            GgmlType::Q6_K => size_of::<BlockQ6K>(),
            GgmlType::Q8_K => size_of::<BlockQ8K>(),
        }
    }

    /// True for the block-quantized types (not F32/F16/BF16).
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes holding `n` values: `Error::NotBlockMultiple` when `n` is not a whole number of
    /// blocks, `Error::SizeOverflow` when the size does not fit a `usize`.
    pub fn bytes_for(self, n: usize) -> Result<usize> {
        let bs = self.block_size();
        if n % bs != 0 {
            return Err(Error::NotBlockMultiple { format: self.name(), len: n, block: bs });
        }
        (n / bs).checked_mul(self.type_size()).ok_or(Error::SizeOverflow { op: "GgmlType::bytes_for", dims: vec![n, self.type_size()] })
    }
}

impl core::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// ggml's name for a type id rayo does not implement (so errors can say what a file holds).
fn foreign_type_name(id: u32) -> &'static str {
    match id {
        16 => "IQ2_XXS",
        17 => "IQ2_XS",
        18 => "IQ3_XXS",
        19 => "IQ1_S",
        20 => "IQ4_NL",
        21 => "IQ3_S",
        22 => "IQ2_S",
        23 => "IQ4_XS",
        24 => "I8",
        25 => "I16",
        26 => "I32",
        27 => "I64",
        28 => "F64",
        29 => "IQ1_M",
        34 => "TQ1_0",
        35 => "TQ2_0",
        39 => "MXFP4",
        _ => "unknown",
    }
}
