//! The little JSON the CLI writes by hand (no serde): strings quoted and escaped as RFC 8259
//! requires, floats in Rust's shortest round-trip form, GGUF metadata values as JSON values.

use rayo::gguf::{GgufArray, GgufValue};
use std::fmt::Write as _;

/// Appends `s` as a JSON string: `"` and `\` escaped, control characters as `\n`, `\t`, ... or
/// `\u00XX`; everything else (non-ASCII included) as is, in UTF-8.
pub fn quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends a float: its shortest round-trip form (`1e-5`, `100000.0`), `null` for NaN and ±inf,
/// which JSON cannot spell.
fn float(v: f64, shortest: impl std::fmt::Debug, out: &mut String) {
    if v.is_finite() {
        let _ = write!(out, "{shortest:?}");
    } else {
        out.push_str("null");
    }
}

/// Appends a metadata value: numbers as numbers, strings, booleans, arrays (nested) in full.
pub fn value(v: &GgufValue, out: &mut String) {
    match v {
        GgufValue::String(s) => quote(s, out),
        GgufValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        GgufValue::F32(x) => float(*x as f64, x, out),
        GgufValue::F64(x) => float(*x, x, out),
        GgufValue::Array(a) => array(a, out),
        _ => {
            let _ = write!(out, "{}", v.to_int().unwrap_or_default());
        }
    }
}

fn array(a: &GgufArray, out: &mut String) {
    out.push('[');
    match a {
        GgufArray::String(v) => v.iter().enumerate().for_each(|(i, s)| {
            comma(i, out);
            quote(s, out)
        }),
        GgufArray::Array(v) => v.iter().enumerate().for_each(|(i, x)| {
            comma(i, out);
            array(x, out)
        }),
        _ => a.iter().enumerate().for_each(|(i, x)| {
            comma(i, out);
            value(&x, out)
        }),
    }
    out.push(']');
}

/// A `,` before every element but the first.
pub fn comma(i: usize, out: &mut String) {
    if i > 0 {
        out.push(',');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(v: GgufValue) -> String {
        let mut s = String::new();
        value(&v, &mut s);
        s
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(json("a\"b\\c\nd\te\u{1}\u{7f}é世".into()), "\"a\\\"b\\\\c\\nd\\te\\u0001\u{7f}é世\"");
    }

    #[test]
    fn numbers_and_arrays() {
        assert_eq!(json(GgufValue::F32(1e-5)), "1e-5");
        assert_eq!(json(GgufValue::F32(100000.0)), "100000.0");
        assert_eq!(json(GgufValue::F64(f64::NAN)), "null");
        assert_eq!(json(GgufValue::F32(f32::NEG_INFINITY)), "null");
        assert_eq!(json(GgufValue::U64(u64::MAX)), "18446744073709551615");
        assert_eq!(json(GgufValue::I8(-3)), "-3");
        assert_eq!(json(GgufValue::Bool(false)), "false");
        let nested = GgufArray::from(vec![GgufArray::from(vec!["x".to_string()]), GgufArray::from(vec![1u8, 2]), GgufArray::U32(vec![])]);
        assert_eq!(json(nested.into()), "[[\"x\"],[1,2],[]]");
    }
}
