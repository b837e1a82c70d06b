//! Writing GGUF version 3: metadata and tensor infos first, then each tensor's data in order,
//! each padded to the alignment (ggml's layout: tensors back to back, as llama.cpp requires).
//!
//! Small files: [`GgufWriter::add_tensor`] with the data, then [`GgufWriter::write_to`]. Large
//! ones (a quantizer): [`GgufWriter::declare_tensor`] for every tensor, [`GgufWriter::start`]
//! writes the header, then [`GgufStream::write_tensor`] takes each tensor's data as it is made,
//! so the model is never held twice in memory.

use super::problem::{GgufProblem, MAX_TENSOR_NAME};
use super::reader::{check_alignment, tensor_bytes, DEFAULT_ALIGNMENT, MAGIC};
use super::value::encode_str;
use super::{GgufValue, Metadata, TensorInfo};
use crate::quant::GgmlType;
use crate::{Error, Result};
use std::io::Write;
use std::path::Path;

/// The version the writer writes.
const VERSION: u32 = 3;

fn problem(what: GgufProblem) -> Error {
    Error::GgufWrite { what }
}

fn io_error(path: Option<&Path>) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::Io { path: path.map(Path::to_path_buf), kind: e.kind(), message: e.to_string() }
}

/// A GGUF file being put together: metadata, tensor infos and (optionally) their data.
#[derive(Clone, Debug, Default)]
pub struct GgufWriter {
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    /// The data given with [`GgufWriter::add_tensor`], by tensor index.
    data: Vec<Option<Vec<u8>>>,
}

impl GgufWriter {
    /// No metadata, no tensors.
    pub fn new() -> GgufWriter {
        GgufWriter::default()
    }

    /// The metadata so far.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The metadata, to change (e.g. a copy of another file's, as a quantizer starts from).
    pub fn metadata_mut(&mut self) -> &mut Metadata {
        &mut self.metadata
    }

    /// Sets metadata `key` (replacing its value in place if it is there). `general.alignment`,
    /// if set, must be a u32 power of two; [`GgufWriter::start`] checks it.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<GgufValue>) -> Option<GgufValue> {
        self.metadata.set(key, value)
    }

    /// The tensors declared so far, in the order their data will be written (offsets are final
    /// once [`GgufWriter::start`] has laid them out: see [`GgufStream::tensors`]).
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// Declares a tensor whose data [`GgufStream::write_tensor`] will take. `shape[0]` is the
    /// row length (ggml's `ne[0]`). Returns its size in bytes.
    pub fn declare_tensor(&mut self, name: &str, ty: GgmlType, shape: &[u64]) -> Result<u64> {
        if name.len() >= MAX_TENSOR_NAME {
            return Err(problem(GgufProblem::TensorNameTooLong { name: name.into(), len: name.len() }));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(problem(GgufProblem::DuplicateTensor { name: name.into() }));
        }
        let bytes = tensor_bytes(name, ty, shape).map_err(problem)?;
        self.tensors.push(TensorInfo { name: name.into(), ty, shape: shape.to_vec(), offset: 0, bytes });
        self.data.push(None);
        Ok(bytes)
    }

    /// Adds a tensor with its data, which must be exactly `ty.bytes_for(elements)` bytes.
    pub fn add_tensor(&mut self, name: &str, ty: GgmlType, shape: &[u64], data: impl Into<Vec<u8>>) -> Result<()> {
        let data = data.into();
        let expected = tensor_bytes(name, ty, shape).map_err(problem)?;
        if data.len() as u64 != expected {
            return Err(problem(GgufProblem::DataLength { name: name.into(), expected, found: data.len() as u64 }));
        }
        self.declare_tensor(name, ty, shape)?;
        if let Some(slot) = self.data.last_mut() {
            *slot = Some(data);
        }
        Ok(())
    }

    /// Writes the whole file to `w`: every tensor must have been given its data.
    pub fn write_to<W: Write>(self, w: W) -> Result<W> {
        self.start(w)?.finish()
    }

    /// Writes the whole file to `path` (created or truncated).
    pub fn write_file(self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref();
        let f = std::fs::File::create(path).map_err(io_error(Some(path)))?;
        let mut w = self.start(std::io::BufWriter::new(f))?.finish().map_err(|e| with_path(e, path))?;
        w.flush().map_err(io_error(Some(path)))
    }

    /// Lays the tensors out, writes the header (metadata, tensor infos, padding) to `w`, and the
    /// data of the first tensors that were given theirs; the stream takes the rest in order.
    pub fn start<W: Write>(mut self, w: W) -> Result<GgufStream<W>> {
        let alignment = match self.metadata.get("general.alignment") {
            None => DEFAULT_ALIGNMENT,
            Some(v) => check_alignment(v).map_err(problem)?,
        };
        if self.metadata.iter().any(|(k, _)| k.is_empty()) {
            return Err(problem(GgufProblem::EmptyKey));
        }
        let mut offset = 0u64;
        for t in &mut self.tensors {
            t.offset = offset;
            // Each size is at most i64::MAX bytes and there are few: no overflow in practice,
            // but a sum past u64 is refused rather than wrapped.
            let padded = t.bytes.checked_next_multiple_of(alignment);
            offset = match padded.and_then(|p| offset.checked_add(p)) {
                Some(o) => o,
                None => return Err(problem(GgufProblem::ByteSizeOverflow { name: t.name.clone(), ty: t.ty, elements: t.elements() })),
            };
        }
        let mut h = Vec::new();
        h.extend(MAGIC);
        h.extend(VERSION.to_le_bytes());
        h.extend((self.tensors.len() as u64).to_le_bytes());
        h.extend((self.metadata.len() as u64).to_le_bytes());
        for (k, v) in self.metadata.iter() {
            encode_str(k, &mut h);
            h.extend(v.ty().id().to_le_bytes());
            v.encode(&mut h);
        }
        for t in &self.tensors {
            encode_str(&t.name, &mut h);
            h.extend((t.shape.len() as u32).to_le_bytes());
            t.shape.iter().for_each(|d| h.extend(d.to_le_bytes()));
            h.extend(t.ty.id().to_le_bytes());
            h.extend(t.offset.to_le_bytes());
        }
        let mut s = GgufStream { w, written: 0, alignment, tensors: self.tensors, data: self.data, next: 0 };
        s.put(&h)?;
        s.pad()?;
        s.write_stored()?;
        Ok(s)
    }
}

/// `e` with `path` as its path, for an I/O error from a writer that did not know it.
fn with_path(e: Error, path: &Path) -> Error {
    match e {
        Error::Io { path: None, kind, message } => Error::Io { path: Some(path.to_path_buf()), kind, message },
        e => e,
    }
}

/// A GGUF file whose header is written: it takes each tensor's data in order.
#[derive(Debug)]
pub struct GgufStream<W: Write> {
    w: W,
    written: u64,
    alignment: u64,
    tensors: Vec<TensorInfo>,
    data: Vec<Option<Vec<u8>>>,
    next: usize,
}

impl<W: Write> GgufStream<W> {
    /// The tensors as laid out in the file (final offsets).
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor whose data [`GgufStream::write_tensor`] takes next, if any remains.
    pub fn next_tensor(&self) -> Option<&TensorInfo> {
        self.tensors.get(self.next)
    }

    /// Writes the next tensor's data (exactly its `bytes`), padded to the alignment, then the
    /// data of the tensors after it that were given theirs.
    pub fn write_tensor(&mut self, data: &[u8]) -> Result<()> {
        let Some(t) = self.tensors.get(self.next) else {
            return Err(problem(GgufProblem::TensorCount { declared: self.tensors.len(), written: self.next + 1 }));
        };
        if data.len() as u64 != t.bytes {
            return Err(problem(GgufProblem::DataLength { name: t.name.clone(), expected: t.bytes, found: data.len() as u64 }));
        }
        self.put(data)?;
        self.pad()?;
        self.next += 1;
        self.write_stored()
    }

    /// Checks every tensor was written, flushes, and gives the writer back.
    pub fn finish(mut self) -> Result<W> {
        if self.next != self.tensors.len() {
            return Err(problem(GgufProblem::TensorCount { declared: self.tensors.len(), written: self.next }));
        }
        self.w.flush().map_err(io_error(None))?;
        Ok(self.w)
    }

    fn write_stored(&mut self) -> Result<()> {
        while let Some(d) = self.data.get_mut(self.next).and_then(Option::take) {
            self.put(&d)?;
            self.pad()?;
            self.next += 1;
        }
        Ok(())
    }

    fn put(&mut self, b: &[u8]) -> Result<()> {
        self.w.write_all(b).map_err(io_error(None))?;
        self.written += b.len() as u64;
        Ok(())
    }

    /// Zeros up to the next multiple of the alignment.
    fn pad(&mut self) -> Result<()> {
        const ZEROS: [u8; 256] = [0; 256];
        let mut n = self.written.next_multiple_of(self.alignment) - self.written;
        while n > 0 {
            let k = n.min(ZEROS.len() as u64) as usize;
            self.put(&ZEROS[..k])?;
            n -= k as u64;
        }
        Ok(())
    }
}
