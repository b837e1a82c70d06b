//! The JSON the CLI writes, through serde_json: GGUF metadata values as JSON values (the
//! wrappers here; `rayo gguf --json`), benchmark rows as derived structs (`bench::row`,
//! `bench::llm`). Strings are escaped as RFC 8259 requires; floats are in their shortest
//! round-trip form; NaN and ±inf, which JSON cannot spell, are `null`.

use rayo::gguf::{GgufArray, GgufValue, Metadata};
use serde::ser::{Serialize, SerializeMap, Serializer};

/// One object per line: `value` as compact JSON. Serializing these types cannot fail (every
/// map key is a string); the error branch is kept rather than unwrapped.
pub fn line(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()))
}

/// `x` rounded to `decimals` places, so that its shortest form has at most that many
/// (`ns` to 0.1, rates to 0.001: what the hand-written rows printed with `{:.1}`/`{:.3}`).
pub fn rounded(x: f64, decimals: i32) -> f64 {
    let p = 10f64.powi(decimals);
    (x * p).round() / p
}

/// A metadata value: numbers as numbers, strings, booleans, arrays (nested) in full.
pub struct Value<'a>(pub &'a GgufValue);

impl Serialize for Value<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            GgufValue::U8(x) => s.serialize_u8(*x),
            GgufValue::I8(x) => s.serialize_i8(*x),
            GgufValue::U16(x) => s.serialize_u16(*x),
            GgufValue::I16(x) => s.serialize_i16(*x),
            GgufValue::U32(x) => s.serialize_u32(*x),
            GgufValue::I32(x) => s.serialize_i32(*x),
            GgufValue::U64(x) => s.serialize_u64(*x),
            GgufValue::I64(x) => s.serialize_i64(*x),
            GgufValue::F32(x) => s.serialize_f32(*x),
            GgufValue::F64(x) => s.serialize_f64(*x),
            GgufValue::Bool(b) => s.serialize_bool(*b),
            GgufValue::String(x) => s.serialize_str(x),
            GgufValue::Array(a) => Array(a).serialize(s),
        }
    }
}

/// A metadata array, elements in order.
pub struct Array<'a>(pub &'a GgufArray);

impl Serialize for Array<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            GgufArray::U8(v) => s.collect_seq(v),
            GgufArray::I8(v) => s.collect_seq(v),
            GgufArray::U16(v) => s.collect_seq(v),
            GgufArray::I16(v) => s.collect_seq(v),
            GgufArray::U32(v) => s.collect_seq(v),
            GgufArray::I32(v) => s.collect_seq(v),
            GgufArray::U64(v) => s.collect_seq(v),
            GgufArray::I64(v) => s.collect_seq(v),
            GgufArray::F32(v) => s.collect_seq(v),
            GgufArray::F64(v) => s.collect_seq(v),
            GgufArray::Bool(v) => s.collect_seq(v),
            GgufArray::String(v) => s.collect_seq(v),
            GgufArray::Array(v) => s.collect_seq(v.iter().map(Array)),
        }
    }
}

/// The metadata as one object, keys in file order (not sorted, as a map type would have them).
pub struct MetadataMap<'a>(pub &'a Metadata);

impl Serialize for MetadataMap<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0.iter() {
            map.serialize_entry(k, &Value(v))?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(v: GgufValue) -> String {
        line(&Value(&v))
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(json("a\"b\\c\nd\te\u{1}\u{7f}é世".into()), "\"a\\\"b\\\\c\\nd\\te\\u0001\u{7f}é世\"");
    }

    #[test]
    fn numbers_and_arrays() {
        // serde_json's shortest round-trip spelling (the hand-written JSON had Rust's `1e-5`).
        assert_eq!(json(GgufValue::F32(1e-5)), "0.00001");
        assert_eq!(json(GgufValue::F32(1e-5)).parse::<f32>(), Ok(1e-5));
        assert_eq!(json(GgufValue::F32(100000.0)), "100000.0");
        assert_eq!(json(GgufValue::F32(0.1)), "0.1");
        assert_eq!(json(GgufValue::F64(f64::NAN)), "null");
        assert_eq!(json(GgufValue::F32(f32::NEG_INFINITY)), "null");
        assert_eq!(json(GgufValue::U64(u64::MAX)), "18446744073709551615");
        assert_eq!(json(GgufValue::I8(-3)), "-3");
        assert_eq!(json(GgufValue::Bool(false)), "false");
        let nested = GgufArray::from(vec![GgufArray::from(vec!["x".to_string()]), GgufArray::from(vec![1u8, 2]), GgufArray::U32(vec![])]);
        assert_eq!(json(nested.into()), "[[\"x\"],[1,2],[]]");
        assert_eq!(json(GgufArray::F32(vec![0.5, f32::NAN]).into()), "[0.5,null]");
    }

    #[test]
    fn rounding_keeps_the_decimals_asked_for() {
        assert_eq!(line(&rounded(1234.5678, 1)), "1234.6");
        assert_eq!(line(&rounded(0.1 + 0.2, 3)), "0.3");
        assert_eq!(line(&rounded(2.0, 3)), "2.0");
        assert_eq!(line(&rounded(12.3456789, 3)), "12.346");
    }

    #[test]
    fn metadata_keeps_file_order() {
        let mut m = Metadata::new();
        m.set("z", 1u32);
        m.set("a", "x");
        assert_eq!(line(&MetadataMap(&m)), "{\"z\":1,\"a\":\"x\"}");
    }
}
