//! A real file: SmolLM2-135M-Instruct Q4_1 (`scripts/fetch-smollm2.sh` puts it in
//! `.cache/models/`; `RAYO_SMOLLM2` may name another place), read by rayo and compared with the
//! table PyPI `gguf`'s GGUFReader made of it (`tests/data/smollm2-q4_1.gguf.tsv`, written by
//! `scripts/ref/gguf-table.sh`). Skipped, with a printed reason, when the file is absent, unless
//! `RAYO_REQUIRE_SMOLLM2=1`.
// wasm32 has no files to map (`GgufFile::open` is native only).
#![cfg(not(target_arch = "wasm32"))]

use rayo::gguf::{GgufArray, GgufFile, GgufValue};
use std::path::PathBuf;

const REFERENCE: &str = include_str!("data/smollm2-q4_1.gguf.tsv");

fn model_path() -> PathBuf {
    match std::env::var_os("RAYO_SMOLLM2") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    }
}

/// A string as Python's `json.dumps(s, ensure_ascii=False)` writes it.
fn json_quote(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            '\u{8}' => o.push_str("\\b"),
            '\u{c}' => o.push_str("\\f"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Checks one scalar against the reference's spelling of it.
fn same_scalar(key: &str, v: &GgufValue, want: &str) {
    let ok = match v {
        GgufValue::String(s) => json_quote(s) == want,
        GgufValue::Bool(b) => want == if *b { "true" } else { "false" },
        GgufValue::F32(_) | GgufValue::F64(_) => want.parse::<f64>().ok() == v.to_f64(),
        _ => v.to_int().map(|i| i.to_string()).as_deref() == Some(want),
    };
    assert!(ok, "{key}: rayo read {v:?}, the reference has {want}");
}

#[test]
fn smollm2_q4_1_matches_the_gguf_package() {
    let path = model_path();
    if !path.exists() {
        assert!(std::env::var_os("RAYO_REQUIRE_SMOLLM2").is_none(), "RAYO_REQUIRE_SMOLLM2 is set but {} is absent", path.display());
        println!("SKIP gguf: {} is absent (scripts/fetch-smollm2.sh fetches it)", path.display());
        return;
    }
    let f = GgufFile::open(&path).unwrap();
    let mut tensors = f.tensors().iter();
    let (mut metas, mut checked_tensors) = (0, 0);
    for line in REFERENCE.lines().filter(|l| !l.starts_with('#')) {
        let fields: Vec<&str> = line.split('\t').collect();
        let number = || fields[1].parse::<u64>().unwrap();
        match fields[0] {
            "version" => assert_eq!(f.version() as u64, number()),
            "alignment" => assert_eq!(f.alignment(), number()),
            "data_offset" => assert_eq!(f.data_offset(), number()),
            "tensor_count" => assert_eq!(f.tensors().len() as u64, number()),
            "kv_count" => assert_eq!(f.metadata().len() as u64, number()),
            "meta" => {
                let key = fields[1];
                let v = f.metadata().get(key).unwrap_or_else(|| panic!("{key} missing"));
                assert_eq!(f.metadata().entries()[metas].0, key, "metadata order");
                metas += 1;
                match fields[2].strip_prefix("array[").and_then(|t| t.strip_suffix(']')) {
                    None => {
                        assert_eq!(v.ty().name(), fields[2], "{key}");
                        same_scalar(key, v, fields[3]);
                    }
                    Some(elem) => {
                        let a = v.as_array().unwrap_or_else(|| panic!("{key} is not an array"));
                        assert_eq!((a.elem_type().name(), a.len().to_string().as_str()), (elem, fields[3]), "{key}");
                        same_scalar(key, &a.get(0).unwrap(), fields[4]);
                        same_scalar(key, &a.get(a.len() - 1).unwrap(), fields[5]);
                        let sum = match a {
                            GgufArray::String(v) => Some(v.iter().map(|s| s.len() as i128).sum::<i128>()),
                            a if a.get(0).and_then(|x| x.to_int()).is_some() => Some(a.iter().filter_map(|x| x.to_int()).sum()),
                            _ => None,
                        };
                        assert_eq!(sum.map_or("-".to_string(), |s| s.to_string()), fields[6], "{key}: sum");
                    }
                }
            }
            "tensor" => {
                let t = tensors.next().expect("rayo read fewer tensors");
                let shape = t.shape.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
                let got = (t.name.as_str(), t.ty.name(), shape.as_str(), t.offset.to_string(), t.bytes.to_string());
                assert_eq!(got, (fields[1], fields[2], fields[3], fields[4].to_string(), fields[5].to_string()));
                assert_eq!(f.tensor_data(t).unwrap().len() as u64, t.bytes);
                checked_tensors += 1;
            }
            other => panic!("unknown reference line {other:?}"),
        }
    }
    assert_eq!((metas, checked_tensors), (f.metadata().len(), f.tensors().len()));
    // The tensor data is the map, not a copy: the slice points into the file's bytes.
    let t = &f.tensors()[0];
    let range = f.as_bytes().as_ptr_range();
    assert!(range.contains(&f.tensor_data(t).unwrap().as_ptr()));
    println!("gguf: {} matches the reference ({metas} metadata entries, {checked_tensors} tensors)", path.display());
}
