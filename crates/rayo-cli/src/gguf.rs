//! `rayo gguf FILE [--json]`: what a GGUF file holds. As text: the header, the metadata (long
//! strings cut, long arrays summarized), a tensor table and a count per type. With `--json`:
//! one JSON object, `version`, `alignment`, `data_offset`, `metadata` (every value in full) and
//! `tensors` (`name`, `type` as ggml spells it, `shape` with ne[0] first, `offset`, `bytes`).

use crate::args::GgufArgs;
use crate::json;
use crate::out::outln;
use rayo::gguf::{GgufArray, GgufFile, GgufValue};
use rayo::quant::GgmlType;
use serde::Serialize;
use std::collections::BTreeMap;

/// Characters of a string value shown before it is cut.
const STRING_CHARS: usize = 64;
/// Elements of an array value shown before the rest is summarized.
const ARRAY_ITEMS: usize = 6;

pub fn run(args: &GgufArgs) -> Result<(), String> {
    let f = crate::input::open_gguf(&args.file, "GGUF file", "")?;
    if args.json {
        outln!("{}", to_json(&f));
    } else {
        print_text(&f);
    }
    Ok(())
}

/// The whole file as one JSON object.
pub fn to_json(f: &GgufFile) -> String {
    #[derive(Serialize)]
    struct File<'a> {
        version: u32,
        alignment: u64,
        data_offset: u64,
        metadata: json::MetadataMap<'a>,
        tensors: Vec<Tensor<'a>>,
    }
    #[derive(Serialize)]
    struct Tensor<'a> {
        name: &'a str,
        /// As ggml spells it: `Q4_K`, `F32`.
        #[serde(rename = "type")]
        ty: &'static str,
        /// ne[0] first.
        shape: &'a [u64],
        offset: u64,
        bytes: u64,
    }
    let tensors = f.tensors().iter().map(|t| Tensor { name: &t.name, ty: t.ty.name(), shape: &t.shape, offset: t.offset, bytes: t.bytes }).collect();
    json::line(&File {
        version: f.version(),
        alignment: f.alignment(),
        data_offset: f.data_offset(),
        metadata: json::MetadataMap(f.metadata()),
        tensors,
    })
}

fn print_text(f: &GgufFile) {
    let len = f.as_bytes().len();
    outln!("GGUF version {}, {} bytes, alignment {}, data section at byte {}", f.version(), len, f.alignment(), f.data_offset());
    outln!();
    outln!("metadata ({} entries):", f.metadata().len());
    let width = f.metadata().iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
    for (k, v) in f.metadata().iter() {
        outln!("  {k:width$}  {:<15} {}", type_name(v), summary(v));
    }
    outln!();
    let tensors = f.tensors();
    outln!("tensors ({}):", tensors.len());
    let shapes: Vec<String> = tensors.iter().map(|t| t.shape.iter().map(u64::to_string).collect::<Vec<_>>().join(" x ")).collect();
    let nw = tensors.iter().map(|t| t.name.chars().count()).max().unwrap_or(0).max(4);
    let sw = shapes.iter().map(String::len).max().unwrap_or(0).max(5);
    outln!("  {:nw$}  {:5}  {:sw$}  {:>12}  {:>12}", "name", "type", "shape", "offset", "bytes");
    for (t, shape) in tensors.iter().zip(&shapes) {
        outln!("  {:nw$}  {:5}  {:sw$}  {:>12}  {:>12}", t.name, t.ty.name(), shape, t.offset, t.bytes);
    }
    let mut per_type: BTreeMap<GgmlType, (usize, u64)> = BTreeMap::new();
    for t in tensors {
        let e = per_type.entry(t.ty).or_default();
        e.0 += 1;
        e.1 += t.bytes;
    }
    outln!();
    outln!("by type:");
    for (ty, (n, bytes)) in &per_type {
        outln!("  {:5}  {n:>6} tensors  {bytes:>12} bytes", ty.name());
    }
    let total: u64 = tensors.iter().map(|t| t.bytes).sum();
    outln!("  {:5}  {:>6} tensors  {total:>12} bytes", "total", tensors.len());
}

/// `u32`, `string`, `[string; 49152]`, `[[u8]; 3]`.
fn type_name(v: &GgufValue) -> String {
    match v {
        GgufValue::Array(a) => array_type(a),
        v => v.ty().name().to_string(),
    }
}

fn array_type(a: &GgufArray) -> String {
    format!("[{}; {}]", elem_name(a), a.len())
}

/// `u8`, or `[u8]` for an array of arrays of u8 (as its first element has them).
fn elem_name(a: &GgufArray) -> String {
    match a.as_arrays().and_then(|v| v.first()) {
        Some(inner) => format!("[{}]", elem_name(inner)),
        None => a.elem_type().name().to_string(),
    }
}

/// A value on one line: strings quoted and escaped, cut after [`STRING_CHARS`] characters;
/// arrays to their first [`ARRAY_ITEMS`] elements.
fn summary(v: &GgufValue) -> String {
    match v {
        GgufValue::String(s) => short_string(s),
        GgufValue::Array(a) => {
            let mut items: Vec<String> = a.iter().take(ARRAY_ITEMS).map(|x| summary(&x)).collect();
            if a.len() > ARRAY_ITEMS {
                items.push(format!("... {} more", a.len() - ARRAY_ITEMS));
            }
            format!("[{}]", items.join(", "))
        }
        GgufValue::F32(x) => format!("{x:?}"),
        GgufValue::F64(x) => format!("{x:?}"),
        GgufValue::Bool(b) => b.to_string(),
        v => v.to_int().unwrap_or_default().to_string(),
    }
}

fn short_string(s: &str) -> String {
    let n = s.chars().count();
    if n <= STRING_CHARS {
        format!("{s:?}")
    } else {
        let cut: String = s.chars().take(STRING_CHARS).collect();
        format!("{cut:?}... ({n} characters, {} bytes)", s.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries() {
        assert_eq!(summary(&"a\nb".into()), "\"a\\nb\"");
        let long = "é".repeat(100);
        let s = summary(&long.as_str().into());
        assert!(s.starts_with(&format!("\"{}\"...", "é".repeat(64))) && s.ends_with("(100 characters, 200 bytes)"), "{s}");
        let a: GgufValue = GgufArray::from((0..10u32).collect::<Vec<_>>()).into();
        assert_eq!((type_name(&a), summary(&a)), ("[u32; 10]".into(), "[0, 1, 2, 3, 4, 5, ... 4 more]".into()));
        let nested: GgufValue = GgufArray::from(vec![GgufArray::from(vec!["x".to_string()])]).into();
        assert_eq!((type_name(&nested), summary(&nested)), ("[[string]; 1]".into(), "[[\"x\"]]".into()));
        assert_eq!(summary(&GgufValue::F32(1e-5)), "1e-5");
    }
}
