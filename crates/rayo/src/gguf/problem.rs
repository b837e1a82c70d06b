//! What is wrong with a GGUF file (or with what a writer was asked to write), with the numbers
//! that show it. [`crate::Error::Gguf`] adds the byte offset where the reader found it.

use super::GgufValueType;
use crate::quant::GgmlType;
use core::fmt;

/// The largest `general.alignment` rayo reads or writes (ggml takes any power of two that fits
/// a u32; files use 32, sometimes a page).
pub const MAX_ALIGNMENT: u64 = 1 << 24;
/// The most dimensions a tensor has (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// The deepest nesting of arrays inside arrays the reader follows (ggml reads none, PyPI `gguf`
/// any; a bound keeps a hostile file from exhausting the stack).
pub const MAX_NESTING: usize = 16;
/// ggml's `GGML_MAX_NAME`: llama.cpp refuses a tensor name of this many bytes or more, so the
/// writer does too (the reader accepts longer ones).
pub const MAX_TENSOR_NAME: usize = 64;

/// One problem in a GGUF file. Names (`key`, `name`) come from the file; everything else is a
/// number.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum GgufProblem {
    /// The file does not start with `GGUF`.
    BadMagic { found: [u8; 4] },
    /// A version other than 2 and 3 (1 is the old format with 32-bit lengths).
    UnsupportedVersion { version: u32 },
    /// The file ends inside `reading` (which needs `needed` bytes, `left` remain).
    Truncated { reading: &'static str, needed: u64, left: u64 },
    /// A string claims more bytes than the file has left.
    StringTooLong { len: u64, left: u64 },
    /// An array claims more elements than the bytes left could hold, at `min_size` bytes each.
    ArrayTooLong { len: u64, elem: GgufValueType, min_size: u64, left: u64 },
    /// A count of tensors or metadata entries (`what`) that the bytes left cannot hold, at
    /// `min_size` bytes each.
    CountTooLarge { what: &'static str, count: u64, min_size: u64, left: u64 },
    /// A value type id outside 0..=12.
    UnknownValueType { id: u32 },
    /// Arrays nested deeper than [`MAX_NESTING`].
    NestingTooDeep { max: usize },
    /// A string (`len` bytes) that is not UTF-8.
    InvalidUtf8 { len: u64 },
    /// A metadata key of zero bytes.
    EmptyKey,
    /// A key given twice.
    DuplicateKey { key: String },
    /// A tensor name given twice.
    DuplicateTensor { name: String },
    /// `general.alignment` is not a u32.
    AlignmentType { found: GgufValueType },
    /// `general.alignment` is not a power of two in 1..=[`MAX_ALIGNMENT`].
    BadAlignment { alignment: u64 },
    /// More than [`MAX_DIMS`] dimensions.
    TooManyDims { name: String, n_dims: u64 },
    /// A dimension past `i64::MAX` (ggml's `ne` are `int64_t`).
    DimTooLarge { name: String, index: usize, dim: u64 },
    /// The element count of `shape` overflows ggml's `int64_t`.
    ElementCountOverflow { name: String, shape: Vec<u64> },
    /// A ggml type id rayo does not implement (`type_name` is ggml's name for it, or `unknown`).
    UnsupportedTensorType { name: String, id: u32, type_name: &'static str },
    /// The row length `row` (`dims[0]`) is not a multiple of the type's block size.
    NotBlockMultiple { name: String, ty: GgmlType, row: u64, block: u64 },
    /// The byte size of `elements` values of `ty` overflows a u64.
    ByteSizeOverflow { name: String, ty: GgmlType, elements: u64 },
    /// A tensor's data offset is not a multiple of the alignment.
    MisalignedOffset { name: String, offset: u64, alignment: u64 },
    /// A tensor's bytes (`start` from the file's start, `bytes` long) do not lie inside the file.
    TensorOutOfFile { name: String, start: u64, bytes: u64, file_len: u64 },
    /// A tensor name of [`MAX_TENSOR_NAME`] bytes or more (writer only).
    TensorNameTooLong { name: String, len: usize },
    /// Tensor data of the wrong length for the tensor's shape and type (writer only).
    DataLength { name: String, expected: u64, found: u64 },
    /// More or fewer tensors' data written than tensors declared (writer only).
    TensorCount { declared: usize, written: usize },
}

impl fmt::Display for GgufProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GgufProblem::*;
        match self {
            BadMagic { found } => write!(f, "not a GGUF file: the first 4 bytes are {found:02x?}, expected \"GGUF\" (47 47 55 46)"),
            UnsupportedVersion { version: 1 } => write!(f, "GGUF version 1 is not supported (rayo reads versions 2 and 3)"),
            UnsupportedVersion { version } if version & 0xffff == 0 => {
                write!(f, "GGUF version {version} is not supported (rayo reads 2 and 3; a big-endian file?)")
            }
            UnsupportedVersion { version } => write!(f, "GGUF version {version} is not supported (rayo reads versions 2 and 3)"),
            Truncated { reading, needed, left } => {
                write!(f, "the file ends inside {reading}: it needs {needed} bytes, {left} are left")
            }
            StringTooLong { len, left } => write!(f, "string length {len} exceeds the {left} bytes left in the file"),
            ArrayTooLong { len, elem, min_size, left } => {
                write!(f, "an array of {len} {elem} values (at least {min_size} bytes each) exceeds the {left} bytes left in the file")
            }
            CountTooLarge { what, count, min_size, left } => {
                write!(f, "{count} {what} (at least {min_size} bytes each) cannot fit in the {left} bytes left in the file")
            }
            UnknownValueType { id } => write!(f, "unknown metadata value type {id} (known: 0..=12)"),
            NestingTooDeep { max } => write!(f, "arrays nested more than {max} deep"),
            InvalidUtf8 { len } => write!(f, "a string of {len} bytes is not UTF-8"),
            EmptyKey => write!(f, "a metadata key is empty"),
            DuplicateKey { key } => write!(f, "metadata key {key:?} appears twice"),
            DuplicateTensor { name } => write!(f, "tensor name {name:?} appears twice"),
            AlignmentType { found } => write!(f, "general.alignment must be a u32, found a {found}"),
            BadAlignment { alignment } => {
                write!(f, "general.alignment = {alignment} is not a power of two between 1 and {MAX_ALIGNMENT}")
            }
            TooManyDims { name, n_dims } => write!(f, "tensor {name:?} has {n_dims} dimensions, at most {MAX_DIMS} are allowed"),
            DimTooLarge { name, index, dim } => write!(f, "tensor {name:?}: dimension {index} = {dim} exceeds i64::MAX"),
            ElementCountOverflow { name, shape } => write!(f, "tensor {name:?}: the element count of shape {shape:?} overflows i64"),
            UnsupportedTensorType { name, id, type_name } => {
                write!(f, "tensor {name:?} has type {id} ({type_name}), which rayo does not support")
            }
            NotBlockMultiple { name, ty, row, block } => {
                write!(f, "tensor {name:?}: row length {row} is not a multiple of {ty}'s block of {block} values")
            }
            ByteSizeOverflow { name, ty, elements } => {
                write!(f, "tensor {name:?}: the byte size of {elements} {ty} values overflows u64")
            }
            MisalignedOffset { name, offset, alignment } => {
                write!(f, "tensor {name:?}: data offset {offset} is not a multiple of the alignment {alignment}")
            }
            TensorOutOfFile { name, start, bytes, file_len } => {
                write!(f, "tensor {name:?}: its {bytes} bytes at byte {start} reach past the end of the {file_len}-byte file")
            }
            TensorNameTooLong { name, len } => {
                write!(f, "tensor name {name:?} is {len} bytes; llama.cpp takes at most {}", MAX_TENSOR_NAME - 1)
            }
            DataLength { name, expected, found } => write!(f, "tensor {name:?}: expected {expected} bytes of data, got {found}"),
            TensorCount { declared, written } => write!(f, "{declared} tensors declared, {written} written"),
        }
    }
}
