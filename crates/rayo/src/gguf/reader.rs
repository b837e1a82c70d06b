//! Parsing a GGUF file's header, metadata and tensor infos from its bytes (ggml `docs/gguf.md`;
//! the checks follow ggml's `gguf_init_from_file_impl`, except that tensors may lie anywhere
//! aligned inside the data section, as the format allows, not only back to back).
//!
//! Every read is bounds-checked, and every length or count read from the file is checked
//! against the bytes left before anything is allocated for it: a hostile file costs at most a
//! small multiple of its own size in memory, and fails as soon as a claim cannot hold.

use super::problem::{GgufProblem, MAX_ALIGNMENT, MAX_DIMS, MAX_NESTING};
use super::{GgufArray, GgufValue, GgufValueType, Metadata, TensorInfo};
use crate::quant::GgmlType;
use crate::{Error, Result};
use std::collections::HashSet;

/// `GGUF` as it starts every file.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// The alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The fewest bytes a metadata entry takes: key length, value type, a one-byte value (a key
/// must not be empty, but an empty one is refused when it is read, with its own error).
const MIN_KV: u64 = 8 + 4 + 1;
/// The fewest bytes a tensor info takes: name length, n_dims, type, offset.
const MIN_TENSOR_INFO: u64 = 8 + 4 + 4 + 8;
/// The most items reserved up front for a list read from the file (then it grows as items are
/// read): a count is checked against the bytes left, but an item in memory (a `String`, a
/// `TensorInfo`) is larger than its fewest bytes in the file.
const RESERVE_CAP: u64 = 1024;

fn capped(n: u64) -> usize {
    n.min(RESERVE_CAP) as usize
}

/// What [`parse`] found.
pub(crate) struct Parsed {
    pub version: u32,
    pub metadata: Metadata,
    pub tensors: Vec<TensorInfo>,
    pub alignment: u64,
    pub data_offset: u64,
}

fn err(offset: usize, what: GgufProblem) -> Error {
    Error::Gguf { offset: offset as u64, what }
}

/// A read position in the file's bytes.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn left(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    /// The next `n` bytes, or `Truncated` naming what was being read.
    fn take(&mut self, n: u64, reading: &'static str) -> Result<&'a [u8]> {
        let left = self.left();
        if n > left {
            return Err(err(self.pos, GgufProblem::Truncated { reading, needed: n, left }));
        }
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, reading: &'static str) -> Result<[u8; N]> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N as u64, reading)?);
        Ok(a)
    }

    fn u32(&mut self, reading: &'static str) -> Result<u32> {
        self.array(reading).map(u32::from_le_bytes)
    }

    fn u64(&mut self, reading: &'static str) -> Result<u64> {
        self.array(reading).map(u64::from_le_bytes)
    }

    /// A GGUF string: u64 length, then that many UTF-8 bytes.
    fn string(&mut self, reading: &'static str) -> Result<String> {
        let at = self.pos;
        let len = self.u64(reading)?;
        if len > self.left() {
            return Err(err(at, GgufProblem::StringTooLong { len, left: self.left() }));
        }
        let bytes = self.take(len, reading)?;
        match core::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(err(at + 8, GgufProblem::InvalidUtf8 { len })),
        }
    }

    fn value_type(&mut self, reading: &'static str) -> Result<GgufValueType> {
        let at = self.pos;
        let id = self.u32(reading)?;
        GgufValueType::from_id(id).ok_or_else(|| err(at, GgufProblem::UnknownValueType { id }))
    }

    /// One value of type `ty`; `depth` arrays enclose it.
    fn value(&mut self, ty: GgufValueType, depth: usize) -> Result<GgufValue> {
        use GgufValueType as T;
        const R: &str = "a metadata value";
        Ok(match ty {
            T::U8 => GgufValue::U8(self.array::<1>(R)?[0]),
            T::I8 => GgufValue::I8(i8::from_le_bytes(self.array(R)?)),
            T::U16 => GgufValue::U16(u16::from_le_bytes(self.array(R)?)),
            T::I16 => GgufValue::I16(i16::from_le_bytes(self.array(R)?)),
            T::U32 => GgufValue::U32(u32::from_le_bytes(self.array(R)?)),
            T::I32 => GgufValue::I32(i32::from_le_bytes(self.array(R)?)),
            T::F32 => GgufValue::F32(f32::from_le_bytes(self.array(R)?)),
            // Any nonzero byte is true, as in ggml.
            T::Bool => GgufValue::Bool(self.array::<1>(R)?[0] != 0),
            T::String => GgufValue::String(self.string("a string value")?),
            T::Array => GgufValue::Array(self.gguf_array(depth + 1)?),
            T::U64 => GgufValue::U64(u64::from_le_bytes(self.array(R)?)),
            T::I64 => GgufValue::I64(i64::from_le_bytes(self.array(R)?)),
            T::F64 => GgufValue::F64(f64::from_le_bytes(self.array(R)?)),
        })
    }

    /// An array (element type, u64 count, elements) at nesting level `depth` (1 = outermost).
    fn gguf_array(&mut self, depth: usize) -> Result<GgufArray> {
        let at = self.pos;
        if depth > MAX_NESTING {
            return Err(err(at, GgufProblem::NestingTooDeep { max: MAX_NESTING }));
        }
        let elem = self.value_type("an array's element type")?;
        let len = self.u64("an array's length")?;
        let min_size = elem.min_size() as u64;
        if len > self.left() / min_size {
            return Err(err(at, GgufProblem::ArrayTooLong { len, elem, min_size, left: self.left() }));
        }
        // `len` elements of `min_size` bytes are in the file: sizes below cannot overflow.
        macro_rules! fixed {
            ($variant:ident, $t:ty) => {{
                let bytes = self.take(len * min_size, "an array")?;
                GgufArray::$variant(bytes.chunks_exact(core::mem::size_of::<$t>()).map(|c| <$t>::from_le_bytes(c.try_into().unwrap())).collect())
            }};
        }
        use GgufValueType as T;
        Ok(match elem {
            T::U8 => GgufArray::U8(self.take(len, "an array")?.to_vec()),
            T::I8 => fixed!(I8, i8),
            T::U16 => fixed!(U16, u16),
            T::I16 => fixed!(I16, i16),
            T::U32 => fixed!(U32, u32),
            T::I32 => fixed!(I32, i32),
            T::F32 => fixed!(F32, f32),
            T::Bool => GgufArray::Bool(self.take(len, "an array")?.iter().map(|&b| b != 0).collect()),
            T::U64 => fixed!(U64, u64),
            T::I64 => fixed!(I64, i64),
            T::F64 => fixed!(F64, f64),
            T::String => {
                let mut v = Vec::with_capacity(capped(len));
                for _ in 0..len {
                    v.push(self.string("a string in an array")?);
                }
                GgufArray::String(v)
            }
            T::Array => {
                let mut v = Vec::with_capacity(capped(len));
                for _ in 0..len {
                    v.push(self.gguf_array(depth + 1)?);
                }
                GgufArray::Array(v)
            }
        })
    }
}

/// Checks a count read at `at` against the bytes left, at `min_size` bytes per item.
fn check_count(c: &Cursor, at: usize, what: &'static str, count: u64, min_size: u64) -> Result<()> {
    if count > c.left() / min_size {
        return Err(err(at, GgufProblem::CountTooLarge { what, count, min_size, left: c.left() }));
    }
    Ok(())
}

/// Parses the header, metadata and tensor infos of a GGUF file held in `buf`.
pub(crate) fn parse(buf: &[u8]) -> Result<Parsed> {
    let mut c = Cursor { buf, pos: 0 };
    let magic = c.array::<4>("the magic \"GGUF\"")?;
    if magic != MAGIC {
        return Err(err(0, GgufProblem::BadMagic { found: magic }));
    }
    let version = c.u32("the version")?;
    if version != 2 && version != 3 {
        return Err(err(4, GgufProblem::UnsupportedVersion { version }));
    }
    let n_tensors = c.u64("the tensor count")?;
    let n_kv = c.u64("the metadata count")?;
    check_count(&c, 8, "tensors", n_tensors, MIN_TENSOR_INFO)?;
    check_count(&c, 16, "metadata entries", n_kv, MIN_KV)?;

    let mut metadata = Metadata::new();
    metadata.reserve(capped(n_kv));
    let mut keys = HashSet::with_capacity(capped(n_kv));
    let mut alignment_at = 0;
    for _ in 0..n_kv {
        let at = c.pos;
        let key = c.string("a metadata key")?;
        if key.is_empty() {
            return Err(err(at, GgufProblem::EmptyKey));
        }
        if !keys.insert(key.clone()) {
            return Err(err(at, GgufProblem::DuplicateKey { key }));
        }
        if key == "general.alignment" {
            alignment_at = at;
        }
        let ty = c.value_type("a metadata value type")?;
        let value = c.value(ty, 0)?;
        metadata.push_new(key, value);
    }
    let alignment = match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(v) => check_alignment(v).map_err(|p| err(alignment_at, p))?,
    };

    let mut tensors = Vec::with_capacity(capped(n_tensors));
    let mut names = HashSet::with_capacity(capped(n_tensors));
    // Where each tensor's offset field is, for errors found once the data section is known.
    let mut offset_fields = Vec::with_capacity(capped(n_tensors));
    for _ in 0..n_tensors {
        let at = c.pos;
        let name = c.string("a tensor name")?;
        if !names.insert(name.clone()) {
            return Err(err(at, GgufProblem::DuplicateTensor { name }));
        }
        let dims_at = c.pos;
        let n_dims = c.u32("a tensor's dimension count")?;
        if n_dims as usize > MAX_DIMS {
            return Err(err(dims_at, GgufProblem::TooManyDims { name, n_dims: n_dims.into() }));
        }
        let mut shape = Vec::with_capacity(n_dims as usize);
        for index in 0..n_dims as usize {
            let dim_at = c.pos;
            let dim = c.u64("a tensor dimension")?;
            if dim > i64::MAX as u64 {
                return Err(err(dim_at, GgufProblem::DimTooLarge { name, index, dim }));
            }
            shape.push(dim);
        }
        let type_at = c.pos;
        let id = c.u32("a tensor type")?;
        let ty = match GgmlType::from_id(id) {
            Ok(t) => t,
            Err(Error::UnsupportedType { name: type_name, .. }) => {
                return Err(err(type_at, GgufProblem::UnsupportedTensorType { name, id, type_name }))
            }
            Err(e) => return Err(e),
        };
        let offset_at = c.pos;
        let offset = c.u64("a tensor offset")?;
        let bytes = tensor_bytes(&name, ty, &shape).map_err(|p| err(dims_at, p))?;
        if offset % alignment != 0 {
            return Err(err(offset_at, GgufProblem::MisalignedOffset { name, offset, alignment }));
        }
        tensors.push(TensorInfo { name, ty, shape, offset, bytes });
        offset_fields.push(offset_at);
    }

    // The data section starts at the next multiple of the alignment (`pos` ≤ the file's length,
    // so this cannot overflow).
    let data_offset = (c.pos as u64).div_ceil(alignment) * alignment;
    let file_len = buf.len() as u64;
    for (t, &at) in tensors.iter().zip(&offset_fields) {
        let start = data_offset.checked_add(t.offset);
        match start.and_then(|s| s.checked_add(t.bytes)) {
            Some(end) if end <= file_len => {}
            _ => {
                let start = start.unwrap_or(u64::MAX);
                return Err(err(at, GgufProblem::TensorOutOfFile { name: t.name.clone(), start, bytes: t.bytes, file_len }));
            }
        }
    }
    Ok(Parsed { version, metadata, tensors, alignment, data_offset })
}

/// `general.alignment`: a u32 power of two in 1..=`MAX_ALIGNMENT`.
pub(crate) fn check_alignment(v: &GgufValue) -> core::result::Result<u64, GgufProblem> {
    let a = v.as_u32().ok_or(GgufProblem::AlignmentType { found: v.ty() })? as u64;
    if a.is_power_of_two() && a <= MAX_ALIGNMENT {
        Ok(a)
    } else {
        Err(GgufProblem::BadAlignment { alignment: a })
    }
}

/// The bytes of a tensor of `shape` and `ty`, after ggml's checks: the element count fits an
/// `i64`, the row (dims[0], 1 when there are no dims) is whole blocks, the bytes fit a `u64`.
pub(crate) fn tensor_bytes(name: &str, ty: GgmlType, shape: &[u64]) -> core::result::Result<u64, GgufProblem> {
    if shape.len() > MAX_DIMS {
        return Err(GgufProblem::TooManyDims { name: name.into(), n_dims: shape.len() as u64 });
    }
    let elements = if shape.contains(&0) { Some(0) } else { shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)) };
    let elements = match elements {
        Some(n) if n <= i64::MAX as u64 => n,
        _ => return Err(GgufProblem::ElementCountOverflow { name: name.into(), shape: shape.to_vec() }),
    };
    let block = ty.block_size() as u64;
    let row = shape.first().copied().unwrap_or(1);
    if row % block != 0 {
        return Err(GgufProblem::NotBlockMultiple { name: name.into(), ty, row, block });
    }
    (elements / block).checked_mul(ty.type_size() as u64).ok_or(GgufProblem::ByteSizeOverflow { name: name.into(), ty, elements })
}
