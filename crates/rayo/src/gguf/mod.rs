//! GGUF, llama.cpp's model file: a header, typed metadata, tensor infos, then the tensors' data,
//! aligned. [`GgufFile`] reads versions 2 and 3 (from a memory map on native targets, from bytes
//! anywhere) without copying tensor data; [`GgufWriter`] writes version 3, streaming the data.
//!
//! ```
//! use rayo::gguf::{GgufFile, GgufValue, GgufWriter};
//! use rayo::quant::GgmlType;
//!
//! let mut w = GgufWriter::new();
//! w.set("general.architecture", "llama");
//! w.set("llama.context_length", 2048u32);
//! w.set("tokenizer.ggml.tokens", vec!["<s>".to_string(), "a".into()]); // an array of strings
//! let data: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0].iter().flat_map(|x| x.to_le_bytes()).collect();
//! w.add_tensor("w", GgmlType::F32, &[3, 2], data)?; // 2 rows of 3 (dims[0] is the row length)
//! let mut bytes = Vec::new();
//! w.write_to(&mut bytes)?;
//!
//! let f = GgufFile::from_bytes(bytes)?;
//! assert_eq!(f.metadata().get("llama.context_length").and_then(GgufValue::to_u64), Some(2048));
//! let tokens = f.metadata().get("tokenizer.ggml.tokens").and_then(GgufValue::as_array);
//! assert_eq!(tokens.and_then(|a| a.as_strs()).map(|t| t.len()), Some(2));
//! let t = f.tensor("w").unwrap();
//! assert_eq!((t.ty, t.shape.as_slice(), t.bytes), (GgmlType::F32, &[3u64, 2][..], 24));
//! assert_eq!(&f.tensor_data(t)?[..4], &1.0f32.to_le_bytes());
//! assert!(GgufFile::from_bytes(b"GGUF\x01\0\0\0".to_vec()).is_err()); // version 1
//! # Ok::<(), rayo::Error>(())
//! ```

#[cfg(not(target_arch = "wasm32"))]
mod mmap;
mod problem;
mod reader;
mod value;
mod writer;

pub use problem::{GgufProblem, MAX_ALIGNMENT, MAX_DIMS, MAX_NESTING, MAX_TENSOR_NAME};
pub use reader::{DEFAULT_ALIGNMENT, MAGIC};
pub use value::{GgufArray, GgufValue, GgufValueType, Metadata};
pub use writer::{GgufStream, GgufWriter};

use crate::quant::GgmlType;
use crate::{Error, Result};
use core::fmt;

/// One tensor's description in a GGUF file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Its name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Its element type.
    pub ty: GgmlType,
    /// Its dimensions as ggml orders them: `shape[0]` is the row length (ggml's `ne[0]`, the
    /// contiguous one), `shape[1]` the number of rows, ... (at most [`MAX_DIMS`]).
    pub shape: Vec<u64>,
    /// Where its data starts, in bytes from the start of the data section
    /// ([`GgufFile::data_offset`]).
    pub offset: u64,
    /// The size of its data in bytes.
    pub bytes: u64,
}

impl TensorInfo {
    /// The number of values (1 for a tensor with no dimensions, as in ggml).
    pub fn elements(&self) -> u64 {
        // The reader and the writer checked that this product fits an i64.
        self.shape.iter().product()
    }
}

/// A GGUF file, parsed: its metadata and tensor infos, and its bytes (mapped or owned), which
/// [`GgufFile::tensor_data`] hands out as slices without copying.
pub struct GgufFile {
    bytes: Box<dyn AsRef<[u8]> + Send + Sync>,
    version: u32,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    alignment: u64,
    data_offset: u64,
}

impl GgufFile {
    /// Maps the file at `path` into memory (read-only) and parses it; tensor data stays in the
    /// map until used. An error names the byte where the file went wrong.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<GgufFile> {
        GgufFile::from_bytes(mmap::map(path.as_ref())?)
    }

    /// Parses a GGUF file held in `bytes` (a `Vec<u8>`, an `Arc<[u8]>`, a `&'static [u8]`, ...):
    /// for wasm32, where there is no file to map, and for tests.
    pub fn from_bytes(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> Result<GgufFile> {
        let p = reader::parse(bytes.as_ref())?;
        Ok(GgufFile {
            bytes: Box::new(bytes),
            version: p.version,
            metadata: p.metadata,
            tensors: p.tensors,
            alignment: p.alignment,
            data_offset: p.data_offset,
        })
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The metadata, in file order.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The tensor infos, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The alignment of tensor data (`general.alignment`, else 32).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Where the data section starts, in bytes from the start of the file.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// The whole file.
    pub fn as_bytes(&self) -> &[u8] {
        (*self.bytes).as_ref()
    }

    /// The bytes of tensor `t` (an info from [`GgufFile::tensors`]), a slice of the file. For an
    /// info from elsewhere whose bytes do not lie inside this file, an error.
    pub fn tensor_data(&self, t: &TensorInfo) -> Result<&[u8]> {
        let buf = self.as_bytes();
        let start = self.data_offset.checked_add(t.offset);
        let range = start.and_then(|s| Some(usize::try_from(s).ok()?..usize::try_from(s.checked_add(t.bytes)?).ok()?));
        match range.and_then(|r| buf.get(r)) {
            Some(s) => Ok(s),
            None => Err(Error::Gguf {
                offset: self.data_offset,
                what: GgufProblem::TensorOutOfFile {
                    name: t.name.clone(),
                    start: start.unwrap_or(u64::MAX),
                    bytes: t.bytes,
                    file_len: buf.len() as u64,
                },
            }),
        }
    }
}

impl fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GgufFile")
            .field("len", &self.as_bytes().len())
            .field("version", &self.version)
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .field("alignment", &self.alignment)
            .field("data_offset", &self.data_offset)
            .finish()
    }
}
