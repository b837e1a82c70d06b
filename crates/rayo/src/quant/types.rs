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
pub const QK_K: usize = rayo_formats::QK_K as usize;

impl GgmlType {
    /// Every type, in id order (the order of [`rayo_formats::FORMATS`], checked at compile time).
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
        GgmlType::ALL.iter().copied().find(|t| *t as u32 == id).ok_or(Error::UnsupportedType { id, name: rayo_formats::foreign_name(id) })
    }

    /// The GGUF id.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// The type's entry of the table of formats: its blocks and which backends read it.
    pub const fn format(self) -> rayo_formats::Format {
        rayo_formats::Format::of_id(self.id())
    }

    /// ggml's spelling: `F32`, `Q4_K`, `BF16`, ...
    pub const fn name(self) -> &'static str {
        self.format().name
    }

    /// The type spelled `name` (case-insensitive).
    pub fn from_name(name: &str) -> Option<GgmlType> {
        GgmlType::ALL.iter().copied().find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// Values per block (1 for the float types).
    pub const fn block_size(self) -> usize {
        self.format().block_values as usize
    }

    /// Bytes per block.
    pub const fn type_size(self) -> usize {
        self.format().block_bytes as usize
    }

    /// True for the block-quantized types (not F32/F16/BF16).
    pub const fn is_quantized(self) -> bool {
        self.format().is_quantized()
    }

    /// Bytes holding `n` values: `Error::NotBlockMultiple` when `n` is not a whole number of
    /// blocks, `Error::SizeOverflow` when the size does not fit a `usize`.
    pub fn bytes_for(self, n: usize) -> Result<usize> {
        let bs = self.block_size();
        if n % bs != 0 {
            return Err(Error::NotBlockMultiple { format: self.name(), len: n, block: bs });
        }
        (n / bs).checked_mul(self.type_size()).ok_or_else(|| Error::SizeOverflow { op: "GgmlType::bytes_for", dims: vec![n, self.type_size()] })
    }
}

// `GgmlType` is the table: its variants are the table's formats, in its order, with its ids
// (so `format()` never panics and the names are the variants').
const _: () = {
    assert!(GgmlType::ALL.len() == rayo_formats::FORMATS.len());
    let mut i = 0;
    while i < GgmlType::ALL.len() {
        assert!(GgmlType::ALL[i] as u32 == rayo_formats::FORMATS[i].id);
        i += 1;
    }
};

impl core::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}
