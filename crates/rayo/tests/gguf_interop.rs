//! A file written by PyPI `gguf`'s GGUFWriter (every value type, arrays of arrays, alignment 64,
//! F32/F16/Q8_0 tensors; `scripts/ref/gguf-interop.py` made the committed hex): rayo reads what
//! Python wrote, and rayo's writer, given the same content, writes the same bytes.

use rayo::gguf::{GgufArray, GgufFile, GgufValue, GgufWriter};
use rayo::quant::GgmlType;

const HEX: &str = include_str!("data/pygguf-every-type.gguf.hex");

fn python_file() -> Vec<u8> {
    let hex: Vec<u8> = HEX.bytes().filter(u8::is_ascii_hexdigit).collect();
    hex.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap()).collect()
}

#[test]
fn rayo_reads_what_pypi_gguf_wrote() {
    let bytes = python_file();
    assert_eq!(bytes.len(), 1280);
    let f = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!((f.version(), f.alignment(), f.data_offset()), (3, 64, 1024));
    let m = f.metadata();
    let get = |k: &str| m.get(k).unwrap_or_else(|| panic!("{k}")).clone();
    use GgufValue as V;
    let scalars = [
        ("general.architecture", V::from("llama")),
        ("general.alignment", V::U32(64)),
        ("t.u8", V::U8(254)),
        ("t.i8", V::I8(-128)),
        ("t.u16", V::U16(65535)),
        ("t.i16", V::I16(-12345)),
        ("t.u32", V::U32(0xdead_beef)),
        ("t.i32", V::I32(i32::MIN)),
        ("t.f32", V::F32(-1.5e-7)),
        ("t.bool", V::Bool(true)),
        ("t.string", V::from("héllo, 世界\n\t\"quoted\"")),
        ("t.u64", V::U64(u64::MAX)),
        ("t.i64", V::I64(i64::MIN + 1)),
        ("t.f64", V::F64(core::f64::consts::PI)),
    ];
    let arrays: [(&str, GgufArray); 10] = [
        ("a.u8", vec![0u8, 1, 255].into()),
        ("a.i16", vec![-32768i16, 7].into()),
        ("a.i32", vec![3i32, -1, 1].into()),
        ("a.f32", vec![0.5f32, -0.0, 2.25].into()),
        ("a.bool", vec![true, false, true].into()),
        ("a.string", vec!["a".to_string(), String::new(), "Ġthe".into()].into()),
        ("a.u64", vec![u64::MAX, 0].into()),
        ("a.f64", vec![1e300f64, -2.5].into()),
        ("a.strings.nested", vec![GgufArray::from(vec!["x".to_string(), "yz".into()]), vec!["w".to_string()].into()].into()),
        ("a.ints.nested", vec![GgufArray::from(vec![1i32, 2]), vec![3i32].into()].into()),
    ];
    let want: Vec<(&str, GgufValue)> = scalars.into_iter().chain(arrays.into_iter().map(|(k, a)| (k, a.into()))).collect();
    assert_eq!(m.len(), want.len());
    for ((k, v), (wk, wv)) in m.iter().zip(&want) {
        assert_eq!((k, v), (*wk, wv));
        assert_eq!(&get(k), wv);
    }
    let t: Vec<_> = f.tensors().iter().map(|t| (t.name.as_str(), t.ty, t.shape.clone(), t.offset, t.bytes)).collect();
    assert_eq!(
        t,
        [("norm", GgmlType::F32, vec![5], 0, 20), ("f16", GgmlType::F16, vec![3, 2], 64, 12), ("q8", GgmlType::Q8_0, vec![32, 2], 128, 68)]
    );
    let norm: Vec<f32> = f.tensor_data(&f.tensors()[0]).unwrap().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(norm, [0.0, 1.0, 2.0, 3.0, 4.0]);
    let f16: Vec<f32> = f.tensor_data(&f.tensors()[1]).unwrap().chunks(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect();
    assert_eq!(f16, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(f.tensor_data(&f.tensors()[2]).unwrap(), (0..68).collect::<Vec<u8>>());
}

#[test]
fn rayo_writes_the_bytes_pypi_gguf_wrote() {
    let bytes = python_file();
    let f = GgufFile::from_bytes(bytes.clone()).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in f.metadata().iter() {
        w.set(k, v.clone());
    }
    for t in f.tensors() {
        w.add_tensor(&t.name, t.ty, &t.shape, f.tensor_data(t).unwrap()).unwrap();
    }
    assert_eq!(w.write_to(Vec::new()).unwrap(), bytes);
}
