//! GGUF metadata values: the thirteen value types (`gguf_type` in ggml's `gguf.h`), arrays of
//! them (arrays of arrays too, as PyPI `gguf` writes them), and the ordered key → value list.

use core::fmt;

/// A GGUF metadata value type, with its id in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum GgufValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl GgufValueType {
    /// The type with id `id`, if there is one.
    pub fn from_id(id: u32) -> Option<GgufValueType> {
        use GgufValueType::*;
        [U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64].get(id as usize).copied()
    }

    /// The id written in the file.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// `u8`, `i32`, `f32`, `bool`, `string`, `array`, ...
    pub fn name(self) -> &'static str {
        use GgufValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }

    /// Bytes of one value of a fixed-size type; `None` for strings and arrays.
    pub fn fixed_size(self) -> Option<usize> {
        use GgufValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// The fewest bytes one value of this type takes in a file (a string's length, an array's
    /// element type and count): what bounds a count read from the file.
    pub(crate) fn min_size(self) -> usize {
        match self {
            GgufValueType::String => 8,
            GgufValueType::Array => 12,
            t => t.fixed_size().unwrap_or(1),
        }
    }
}

impl fmt::Display for GgufValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum GgufValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(GgufArray),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// An array value: a vector of one element type (an array of arrays holds arrays that may each
/// have their own element type and length, as in the file).
#[derive(Clone, Debug, PartialEq)]
pub enum GgufArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    Array(Vec<GgufArray>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

/// `$e` with `$v` bound to the vector of whichever variant `$a` is.
macro_rules! each_array {
    ($a:expr, $v:ident => $e:expr) => {
        match $a {
            GgufArray::U8($v) => $e,
            GgufArray::I8($v) => $e,
            GgufArray::U16($v) => $e,
            GgufArray::I16($v) => $e,
            GgufArray::U32($v) => $e,
            GgufArray::I32($v) => $e,
            GgufArray::F32($v) => $e,
            GgufArray::Bool($v) => $e,
            GgufArray::String($v) => $e,
            GgufArray::Array($v) => $e,
            GgufArray::U64($v) => $e,
            GgufArray::I64($v) => $e,
            GgufArray::F64($v) => $e,
        }
    };
}

/// `as_u8`-style accessors: the value when it has exactly this type.
macro_rules! exact {
    ($($name:ident: $variant:ident -> $t:ty),* $(,)?) => {
        $(
            #[doc = concat!("The value if it is a `", stringify!($variant), "`.")]
            pub fn $name(&self) -> Option<$t> {
                match self {
                    GgufValue::$variant(v) => Some(*v),
                    _ => None,
                }
            }
        )*
    };
}

/// `as_u32s`-style accessors: the elements when the array has exactly this element type.
macro_rules! exact_slice {
    ($($name:ident: $variant:ident -> $t:ty),* $(,)?) => {
        $(
            #[doc = concat!("The elements if they are `", stringify!($variant), "`s.")]
            pub fn $name(&self) -> Option<&[$t]> {
                match self {
                    GgufArray::$variant(v) => Some(v),
                    _ => None,
                }
            }
        )*
    };
}

impl GgufValue {
    /// The value's type.
    pub fn ty(&self) -> GgufValueType {
        use GgufValueType as T;
        match self {
            GgufValue::U8(_) => T::U8,
            GgufValue::I8(_) => T::I8,
            GgufValue::U16(_) => T::U16,
            GgufValue::I16(_) => T::I16,
            GgufValue::U32(_) => T::U32,
            GgufValue::I32(_) => T::I32,
            GgufValue::F32(_) => T::F32,
            GgufValue::Bool(_) => T::Bool,
            GgufValue::String(_) => T::String,
            GgufValue::Array(_) => T::Array,
            GgufValue::U64(_) => T::U64,
            GgufValue::I64(_) => T::I64,
            GgufValue::F64(_) => T::F64,
        }
    }

    exact!(as_u8: U8 -> u8, as_i8: I8 -> i8, as_u16: U16 -> u16, as_i16: I16 -> i16, as_u32: U32 -> u32, as_i32: I32 -> i32,
        as_f32: F32 -> f32, as_bool: Bool -> bool, as_u64: U64 -> u64, as_i64: I64 -> i64, as_f64: F64 -> f64);

    /// The string, if the value is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array, if the value is one.
    pub fn as_array(&self) -> Option<&GgufArray> {
        match self {
            GgufValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The value as an `i128` if it has any integer type (what files disagree on: a context
    /// length may be written as u32 by one converter and u64 or i32 by another).
    pub fn to_int(&self) -> Option<i128> {
        Some(match *self {
            GgufValue::U8(v) => v.into(),
            GgufValue::I8(v) => v.into(),
            GgufValue::U16(v) => v.into(),
            GgufValue::I16(v) => v.into(),
            GgufValue::U32(v) => v.into(),
            GgufValue::I32(v) => v.into(),
            GgufValue::U64(v) => v.into(),
            GgufValue::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// The value as a `u64` if it has any integer type and is in range.
    pub fn to_u64(&self) -> Option<u64> {
        self.to_int().and_then(|v| u64::try_from(v).ok())
    }

    /// The value as an `i64` if it has any integer type and is in range.
    pub fn to_i64(&self) -> Option<i64> {
        self.to_int().and_then(|v| i64::try_from(v).ok())
    }

    /// The value as an `f64` if it has any numeric type (integers above 2^53 round).
    pub fn to_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(v) => Some(v.into()),
            GgufValue::F64(v) => Some(v),
            _ => self.to_int().map(|v| v as f64),
        }
    }

    /// Appends the value's encoding (without its type id) to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        match self {
            GgufValue::U8(v) => out.push(*v),
            GgufValue::I8(v) => out.extend(v.to_le_bytes()),
            GgufValue::U16(v) => out.extend(v.to_le_bytes()),
            GgufValue::I16(v) => out.extend(v.to_le_bytes()),
            GgufValue::U32(v) => out.extend(v.to_le_bytes()),
            GgufValue::I32(v) => out.extend(v.to_le_bytes()),
            GgufValue::F32(v) => out.extend(v.to_le_bytes()),
            GgufValue::Bool(v) => out.push(*v as u8),
            GgufValue::String(s) => encode_str(s, out),
            GgufValue::Array(a) => a.encode(out),
            GgufValue::U64(v) => out.extend(v.to_le_bytes()),
            GgufValue::I64(v) => out.extend(v.to_le_bytes()),
            GgufValue::F64(v) => out.extend(v.to_le_bytes()),
        }
    }
}

/// Appends a GGUF string (u64 length, then the UTF-8 bytes).
pub(crate) fn encode_str(s: &str, out: &mut Vec<u8>) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

impl GgufArray {
    /// The element type.
    pub fn elem_type(&self) -> GgufValueType {
        use GgufValueType as T;
        match self {
            GgufArray::U8(_) => T::U8,
            GgufArray::I8(_) => T::I8,
            GgufArray::U16(_) => T::U16,
            GgufArray::I16(_) => T::I16,
            GgufArray::U32(_) => T::U32,
            GgufArray::I32(_) => T::I32,
            GgufArray::F32(_) => T::F32,
            GgufArray::Bool(_) => T::Bool,
            GgufArray::String(_) => T::String,
            GgufArray::Array(_) => T::Array,
            GgufArray::U64(_) => T::U64,
            GgufArray::I64(_) => T::I64,
            GgufArray::F64(_) => T::F64,
        }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        each_array!(self, v => v.len())
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as a value (a copy), or `None` past the end.
    pub fn get(&self, i: usize) -> Option<GgufValue> {
        Some(match self {
            GgufArray::U8(v) => GgufValue::U8(*v.get(i)?),
            GgufArray::I8(v) => GgufValue::I8(*v.get(i)?),
            GgufArray::U16(v) => GgufValue::U16(*v.get(i)?),
            GgufArray::I16(v) => GgufValue::I16(*v.get(i)?),
            GgufArray::U32(v) => GgufValue::U32(*v.get(i)?),
            GgufArray::I32(v) => GgufValue::I32(*v.get(i)?),
            GgufArray::F32(v) => GgufValue::F32(*v.get(i)?),
            GgufArray::Bool(v) => GgufValue::Bool(*v.get(i)?),
            GgufArray::String(v) => GgufValue::String(v.get(i)?.clone()),
            GgufArray::Array(v) => GgufValue::Array(v.get(i)?.clone()),
            GgufArray::U64(v) => GgufValue::U64(*v.get(i)?),
            GgufArray::I64(v) => GgufValue::I64(*v.get(i)?),
            GgufArray::F64(v) => GgufValue::F64(*v.get(i)?),
        })
    }

    /// The elements one by one, as values (copies).
    pub fn iter(&self) -> impl Iterator<Item = GgufValue> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    exact_slice!(as_u8s: U8 -> u8, as_i8s: I8 -> i8, as_u16s: U16 -> u16, as_i16s: I16 -> i16, as_u32s: U32 -> u32,
        as_i32s: I32 -> i32, as_f32s: F32 -> f32, as_bools: Bool -> bool, as_strs: String -> String, as_arrays: Array -> GgufArray,
        as_u64s: U64 -> u64, as_i64s: I64 -> i64, as_f64s: F64 -> f64);

    /// Appends the array's encoding (element type, count, elements) to `out`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend(self.elem_type().id().to_le_bytes());
        out.extend((self.len() as u64).to_le_bytes());
        match self {
            GgufArray::U8(v) => out.extend_from_slice(v),
            GgufArray::Bool(v) => out.extend(v.iter().map(|&b| b as u8)),
            GgufArray::String(v) => v.iter().for_each(|s| encode_str(s, out)),
            GgufArray::Array(v) => v.iter().for_each(|a| a.encode(out)),
            _ => self.iter().for_each(|x| x.encode(out)),
        }
    }
}

impl From<&str> for GgufValue {
    fn from(s: &str) -> GgufValue {
        GgufValue::String(s.to_string())
    }
}

macro_rules! from_scalar {
    ($($t:ty => $variant:ident),*) => {
        $(
            impl From<$t> for GgufValue {
                fn from(v: $t) -> GgufValue {
                    GgufValue::$variant(v)
                }
            }
            impl From<Vec<$t>> for GgufArray {
                fn from(v: Vec<$t>) -> GgufArray {
                    GgufArray::$variant(v)
                }
            }
            impl From<Vec<$t>> for GgufValue {
                fn from(v: Vec<$t>) -> GgufValue {
                    GgufValue::Array(GgufArray::$variant(v))
                }
            }
        )*
    };
}

from_scalar!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32, bool => Bool, u64 => U64, i64 => I64,
    f64 => F64, String => String, GgufArray => Array);

/// The metadata of a GGUF file: keys and values in file order, each key once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    entries: Vec<(String, GgufValue)>,
}

impl Metadata {
    /// No entries.
    pub fn new() -> Metadata {
        Metadata::default()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Sets `key` to `value`: in place if the key is there, else at the end. Returns the value
    /// it replaced.
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<GgufValue>) -> Option<GgufValue> {
        let (key, value) = (key.into(), value.into());
        match self.entries.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => Some(core::mem::replace(v, value)),
            None => {
                self.entries.push((key, value));
                None
            }
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<GgufValue> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(i).1)
    }

    /// The entries in order.
    pub fn entries(&self) -> &[(String, GgufValue)] {
        &self.entries
    }

    /// The entries in order, as `(key, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &GgufValue)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Appends an entry whose key the caller has checked is new (the reader).
    pub(crate) fn push_new(&mut self, key: String, value: GgufValue) {
        self.entries.push((key, value));
    }

    pub(crate) fn reserve(&mut self, n: usize) {
        self.entries.reserve(n);
    }
}
