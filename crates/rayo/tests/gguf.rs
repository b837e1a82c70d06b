//! The GGUF container: round trips through the writer and reader (every value type, nested
//! arrays, alignments, tensor types), a version-2 file built by hand, hostile files (claims far
//! larger than the file, measured by the largest allocation the reader makes), and a mutation
//! test: every truncation and thousands of random corruptions of a valid file give `Ok` or an
//! `Err` naming a byte, never a panic.

use rayo::gguf::{GgufArray, GgufFile, GgufProblem, GgufValue, GgufValueType, GgufWriter, TensorInfo};
use rayo::quant::GgmlType;
use rayo::Error;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, recording the largest single allocation of each thread, so a test can
/// show that a file's claims did not size an allocation.
struct Tracking;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; the bookkeeping allocates nothing.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = LARGEST.try_with(|m| m.set(m.get().max(l.size())));
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let _ = LARGEST.try_with(|m| m.set(m.get().max(new)));
        // SAFETY: as above.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Tracking = Tracking;

/// `f()`, and the largest allocation this thread made during it.
fn largest_allocation<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|m| m.set(0));
    let r = f();
    (r, LARGEST.with(|m| m.get()))
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// One value of every type, arrays of every element type, arrays of arrays (of strings, of
/// arrays of u8, of mixed element types), empty arrays and strings, non-ASCII text.
fn every_value() -> Vec<(&'static str, GgufValue)> {
    use GgufValue as V;
    vec![
        ("t.u8", V::U8(0xfe)),
        ("t.i8", V::I8(-128)),
        ("t.u16", V::U16(65535)),
        ("t.i16", V::I16(-12345)),
        ("t.u32", V::U32(0xdead_beef)),
        ("t.i32", V::I32(i32::MIN)),
        ("t.f32", V::F32(-1.5e-7)),
        ("t.bool.true", V::Bool(true)),
        ("t.bool.false", V::Bool(false)),
        ("t.string", V::from("héllo, 世界\n\t\"quoted\"")),
        ("t.string.empty", V::from("")),
        ("t.u64", V::U64(u64::MAX)),
        ("t.i64", V::I64(i64::MIN + 1)),
        ("t.f64", V::F64(core::f64::consts::PI)),
        ("a.u8", GgufArray::from(vec![0u8, 1, 255]).into()),
        ("a.i8", GgufArray::from(vec![-1i8, 0, 127]).into()),
        ("a.u16", GgufArray::from(vec![1u16, 65535]).into()),
        ("a.i16", GgufArray::from(vec![-32768i16]).into()),
        ("a.u32", GgufArray::from(vec![7u32; 5]).into()),
        ("a.i32", GgufArray::from(vec![3i32, -1, 1]).into()),
        ("a.f32", GgufArray::from(vec![0.5f32, -0.0, f32::INFINITY, f32::MIN_POSITIVE]).into()),
        ("a.bool", GgufArray::from(vec![true, false, true]).into()),
        ("a.string", GgufArray::from(vec!["a".to_string(), String::new(), "Ġthe".into()]).into()),
        ("a.u64", GgufArray::from(vec![u64::MAX, 0]).into()),
        ("a.i64", GgufArray::from(vec![i64::MIN, i64::MAX]).into()),
        ("a.f64", GgufArray::from(vec![1e300f64, -2.5]).into()),
        ("a.empty", GgufArray::U32(vec![]).into()),
        (
            "a.strings.nested",
            GgufArray::from(vec![
                GgufArray::from(vec!["x".to_string(), "yz".into()]),
                GgufArray::from(Vec::<String>::new()),
                GgufArray::from(vec!["w".to_string()]),
            ])
            .into(),
        ),
        (
            "a.deep",
            GgufArray::from(vec![GgufArray::from(vec![GgufArray::from(vec![1u8, 2]), GgufArray::from(vec![3u8])]), GgufArray::Array(vec![])]).into(),
        ),
        ("a.mixed", GgufArray::from(vec![GgufArray::from(vec![1.0f32]), GgufArray::from(vec![true]), GgufArray::from(vec![-9i64])]).into()),
    ]
}

/// Tensors: (name, type, shape, data).
type Tensors = Vec<(String, GgmlType, Vec<u64>, Vec<u8>)>;

/// Tensors of several types: (name, type, shape) with random bytes of the right length.
fn some_tensors(rng: &mut Rng) -> Tensors {
    let specs: &[(&str, GgmlType, &[u64])] = &[
        ("token_embd.weight", GgmlType::Q8_0, &[64, 3]),
        ("norm", GgmlType::F32, &[5]),
        ("f16", GgmlType::F16, &[3, 1, 2]),
        ("bf16", GgmlType::BF16, &[7]),
        ("q4_0", GgmlType::Q4_0, &[32, 2]),
        ("q4_k", GgmlType::Q4_K, &[256, 2]),
        ("q6_k", GgmlType::Q6_K, &[256, 1, 1, 1]),
        ("scalar", GgmlType::F32, &[]),
        ("empty", GgmlType::Q4_1, &[0, 4]),
        ("q5_1", GgmlType::Q5_1, &[96]),
    ];
    specs
        .iter()
        .map(|&(name, ty, shape)| {
            let n = shape.iter().product::<u64>() as usize;
            (name.to_string(), ty, shape.to_vec(), rng.bytes(ty.bytes_for(n).unwrap()))
        })
        .collect()
}

/// A file with every value type and several tensors, aligned to `alignment` (None: default).
fn sample_file(alignment: Option<u32>, seed: u64) -> (Vec<u8>, Tensors) {
    let mut rng = Rng(seed);
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    if let Some(a) = alignment {
        w.set("general.alignment", a);
    }
    for (k, v) in every_value() {
        w.set(k, v);
    }
    let tensors = some_tensors(&mut rng);
    for (name, ty, shape, data) in &tensors {
        w.add_tensor(name, *ty, shape, data.clone()).unwrap();
    }
    (w.write_to(Vec::new()).unwrap(), tensors)
}

#[test]
fn round_trip_of_every_value_type_and_tensor_type() {
    for alignment in [None, Some(1), Some(8), Some(64), Some(4096)] {
        let (bytes, tensors) = sample_file(alignment, 7);
        let f = GgufFile::from_bytes(bytes.clone()).unwrap();
        let a = alignment.unwrap_or(32) as u64;
        assert_eq!((f.version(), f.alignment()), (3, a));
        assert_eq!(f.data_offset() % a, 0);
        // Metadata: in order, every value equal.
        let mut want: Vec<(&str, GgufValue)> = vec![("general.architecture", "llama".into())];
        if let Some(a) = alignment {
            want.push(("general.alignment", GgufValue::U32(a)));
        }
        want.extend(every_value());
        let got: Vec<(&str, &GgufValue)> = f.metadata().iter().collect();
        assert_eq!(got.len(), want.len());
        for ((gk, gv), (wk, wv)) in got.iter().zip(&want) {
            assert_eq!((*gk, *gv), (*wk, wv));
        }
        // Tensors: back to back, each aligned, data equal.
        assert_eq!(f.tensors().len(), tensors.len());
        let mut next = 0;
        for (t, (name, ty, shape, data)) in f.tensors().iter().zip(&tensors) {
            assert_eq!((&t.name, t.ty, &t.shape, t.bytes), (name, *ty, shape, data.len() as u64));
            assert_eq!(t.offset, next, "{name}");
            next += t.bytes.next_multiple_of(a);
            assert_eq!(f.tensor_data(t).unwrap(), &data[..], "{name}");
            assert_eq!(f.tensor(name), Some(t));
        }
        assert_eq!(bytes.len() as u64, f.data_offset() + next);
        // Writing what was read gives the same bytes.
        let mut w = GgufWriter::new();
        *w.metadata_mut() = f.metadata().clone();
        for t in f.tensors() {
            w.add_tensor(&t.name, t.ty, &t.shape, f.tensor_data(t).unwrap()).unwrap();
        }
        assert_eq!(w.write_to(Vec::new()).unwrap(), bytes);
    }
}

#[test]
fn accessors() {
    let (bytes, _) = sample_file(None, 1);
    let f = GgufFile::from_bytes(bytes).unwrap();
    let m = f.metadata();
    let get = |k: &str| m.get(k).unwrap_or_else(|| panic!("{k}"));
    assert_eq!(get("t.u32").as_u32(), Some(0xdead_beef));
    assert_eq!(get("t.u32").as_u64(), None, "exact accessors take only their type");
    assert_eq!(get("t.u32").to_u64(), Some(0xdead_beef));
    assert_eq!(get("t.u8").to_i64(), Some(0xfe));
    assert_eq!(get("t.i8").to_u64(), None, "negative");
    assert_eq!(get("t.i64").to_i64(), Some(i64::MIN + 1));
    assert_eq!(get("t.u64").to_i64(), None, "out of range");
    assert_eq!(get("t.u64").to_int(), Some(u64::MAX as i128));
    assert_eq!(get("t.string").to_u64(), None);
    assert_eq!(get("t.f32").to_f64(), Some(-1.5e-7f32 as f64));
    assert_eq!(get("t.i16").to_f64(), Some(-12345.0));
    assert_eq!(get("t.bool.true").as_bool(), Some(true));
    assert_eq!(get("t.string").as_str(), Some("héllo, 世界\n\t\"quoted\""));
    assert_eq!(get("t.string").ty(), GgufValueType::String);
    let a = get("a.string").as_array().unwrap();
    assert_eq!((a.elem_type(), a.len()), (GgufValueType::String, 3));
    assert_eq!(a.as_strs().unwrap()[2], "Ġthe");
    assert_eq!(a.get(0), Some(GgufValue::from("a")));
    assert_eq!(a.get(3), None);
    assert_eq!(get("a.i32").as_array().unwrap().as_i32s(), Some(&[3, -1, 1][..]));
    assert_eq!(get("a.i32").as_array().unwrap().as_u32s(), None);
    let nested = get("a.strings.nested").as_array().unwrap().as_arrays().unwrap();
    assert_eq!(nested[0].as_strs().unwrap(), &["x".to_string(), "yz".into()]);
    assert!(nested[1].is_empty());
    assert_eq!(get("a.deep").as_array().unwrap().as_arrays().unwrap()[0].as_arrays().unwrap()[1].as_u8s(), Some(&[3u8][..]));
    assert_eq!(
        get("a.mixed").as_array().unwrap().iter().map(|v| v.as_array().unwrap().elem_type()).collect::<Vec<_>>(),
        [GgufValueType::F32, GgufValueType::Bool, GgufValueType::I64]
    );
    assert!(m.get("nope").is_none());
    for id in 0..13 {
        assert_eq!(GgufValueType::from_id(id).unwrap().id(), id);
    }
    assert_eq!(GgufValueType::from_id(13), None);
    fn send_sync<T: Send + Sync>() {}
    send_sync::<GgufFile>();
}

/// Little-endian bytes of a file built by hand.
#[derive(Default)]
struct Bytes(Vec<u8>);
impl Bytes {
    fn u32(mut self, v: u32) -> Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn str(self, s: &str) -> Self {
        let mut b = self.u64(s.len() as u64);
        b.0.extend(s.as_bytes());
        b
    }
    fn raw(mut self, v: &[u8]) -> Self {
        self.0.extend(v);
        self
    }
    fn header(version: u32, tensors: u64, kvs: u64) -> Self {
        Bytes::default().raw(b"GGUF").u32(version).u64(tensors).u64(kvs)
    }
    /// Zeros up to `n` bytes.
    fn pad_to(mut self, n: usize) -> Vec<u8> {
        self.0.resize(n.max(self.0.len()), 0);
        self.0
    }
}

#[test]
fn a_version_2_file_built_by_hand() {
    // One u32 and one string array, one 2×32 Q8_0 tensor at offset 0.
    let b = Bytes::header(2, 1, 2)
        .str("general.architecture")
        .u32(8)
        .str("llama")
        .str("x.list")
        .u32(9)
        .u32(8)
        .u64(2)
        .str("ab")
        .str("")
        .str("w")
        .u32(2)
        .u64(32)
        .u64(2)
        .u32(GgmlType::Q8_0.id())
        .u64(0);
    let header = b.0.len();
    let data_offset = header.next_multiple_of(32);
    let mut bytes = b.pad_to(data_offset);
    bytes.extend((0..68).map(|i| i as u8));
    let f = GgufFile::from_bytes(bytes).unwrap();
    assert_eq!((f.version(), f.alignment(), f.data_offset()), (2, 32, data_offset as u64));
    assert_eq!(f.metadata().get("general.architecture").and_then(GgufValue::as_str), Some("llama"));
    let list = f.metadata().get("x.list").and_then(GgufValue::as_array).and_then(GgufArray::as_strs).unwrap();
    assert_eq!(list, &["ab".to_string(), String::new()]);
    let t = &f.tensors()[0];
    assert_eq!(t, &TensorInfo { name: "w".into(), ty: GgmlType::Q8_0, shape: vec![32, 2], offset: 0, bytes: 68 });
    assert_eq!(t.elements(), 64);
    assert_eq!(f.tensor_data(t).unwrap()[67], 67);
}

/// The problem and byte offset of a parse that must fail.
fn problem(bytes: Vec<u8>) -> (u64, GgufProblem) {
    match GgufFile::from_bytes(bytes) {
        Err(Error::Gguf { offset, what }) => (offset, what),
        r => panic!("expected a GGUF error, got {r:?}"),
    }
}

#[test]
fn hostile_claims_fail_without_allocating() {
    const KB: usize = 1024;
    // The tracking sees allocations (so a pass below means something).
    assert!(largest_allocation(|| vec![1u8; 1 << 20]).1 >= 1 << 20);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a 10 GB key", Bytes::header(3, 0, 1).u64(10_000_000_000).pad_to(KB)),
        ("a 10 GB string value", Bytes::header(3, 0, 1).str("k").u32(8).u64(10_000_000_000).pad_to(KB)),
        ("2^62 tensors", Bytes::header(3, 1 << 62, 0).pad_to(KB)),
        ("2^62 metadata entries", Bytes::header(3, 0, 1 << 62).pad_to(KB)),
        ("a 2^40-element u32 array", Bytes::header(3, 0, 1).str("k").u32(9).u32(4).u64(1 << 40).pad_to(KB)),
        ("a 2^60-element string array", Bytes::header(3, 0, 1).str("k").u32(9).u32(8).u64(1 << 60).pad_to(KB)),
        ("a 2^40-element array of arrays", Bytes::header(3, 0, 1).str("k").u32(9).u32(9).u64(1 << 40).pad_to(KB)),
        ("a u64::MAX-element u8 array", Bytes::header(3, 0, 1).str("k").u32(9).u32(0).u64(u64::MAX).pad_to(KB)),
        ("a 2^40-byte tensor name", Bytes::header(3, 1, 0).u64(1 << 40).pad_to(KB)),
    ];
    for (what, bytes) in cases {
        let (r, largest) = largest_allocation(|| GgufFile::from_bytes(bytes));
        let e = r.expect_err(what);
        assert!(largest <= 64 * KB, "{what}: the reader allocated {largest} bytes at once");
        let msg = e.to_string();
        assert!(msg.starts_with("GGUF: at byte ") && msg.contains("left in the file"), "{what}: {msg}");
    }
    // The message of the brief's example reads as a sentence with its numbers.
    let (offset, p) = problem(Bytes::header(3, 0, 1).str("k").u32(8).u64(10_000_000_000).pad_to(KB));
    assert_eq!(p, GgufProblem::StringTooLong { len: 10_000_000_000, left: (KB - 24 - 9 - 4 - 8) as u64 });
    let e = Error::Gguf { offset, what: p };
    assert_eq!(e.to_string(), "GGUF: at byte 37: string length 10000000000 exceeds the 979 bytes left in the file");
    let (offset, p) = problem(Bytes::header(3, 1 << 62, 0).pad_to(KB));
    assert_eq!((offset, p), (8, GgufProblem::CountTooLarge { what: "tensors", count: 1 << 62, min_size: 24, left: 1000 }));
}

#[test]
fn malformed_headers_name_what_is_wrong() {
    let bad = |b: Vec<u8>| problem(b);
    assert_eq!(bad(b"GGML\x03\0\0\0".to_vec()), (0, GgufProblem::BadMagic { found: *b"GGML" }));
    assert_eq!(bad(b"GG".to_vec()).1, GgufProblem::Truncated { reading: "the magic \"GGUF\"", needed: 4, left: 2 });
    assert_eq!(bad(vec![]).1, GgufProblem::Truncated { reading: "the magic \"GGUF\"", needed: 4, left: 0 });
    for v in [0, 1, 4, 0x0300_0000] {
        assert_eq!(bad(Bytes::header(v, 0, 0).0), (4, GgufProblem::UnsupportedVersion { version: v }));
    }
    let e = GgufFile::from_bytes(Bytes::header(1, 0, 0).0).unwrap_err().to_string();
    assert!(e.contains("version 1 is not supported"), "{e}");
    let e = GgufFile::from_bytes(Bytes::header(0x0300_0000, 0, 0).0).unwrap_err().to_string();
    assert!(e.contains("big-endian"), "{e}");
    // An empty file of version 3 with nothing in it is valid.
    let f = GgufFile::from_bytes(Bytes::header(3, 0, 0).0).unwrap();
    assert!(f.metadata().is_empty() && f.tensors().is_empty());
    let kv = |ty: u32, value: &[u8]| Bytes::header(3, 0, 1).str("k").u32(ty).raw(value).0;
    assert_eq!(bad(kv(13, &[0; 8])), (33, GgufProblem::UnknownValueType { id: 13 }));
    assert_eq!(bad(kv(9, &[77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])), (37, GgufProblem::UnknownValueType { id: 77 }));
    assert_eq!(bad(kv(8, &Bytes::default().u64(2).raw(&[0xff, 0xfe]).0)), (45, GgufProblem::InvalidUtf8 { len: 2 }));
    assert_eq!(bad(Bytes::header(3, 0, 1).str("").u32(0).raw(&[0]).0), (24, GgufProblem::EmptyKey));
    let dup = Bytes::header(3, 0, 2).str("k").u32(0).raw(&[1]).str("k").u32(0).raw(&[2]).0;
    assert_eq!(bad(dup), (38, GgufProblem::DuplicateKey { key: "k".into() }));
    // Arrays nested 16 deep are read; 17 deep are refused.
    let nested = |depth: usize| {
        let mut b = Bytes::header(3, 0, 1).str("k").u32(9);
        for _ in 1..depth {
            b = b.u32(9).u64(1);
        }
        b.u32(0).u64(1).raw(&[5]).0
    };
    assert!(GgufFile::from_bytes(nested(16)).is_ok());
    assert_eq!(bad(nested(17)).1, GgufProblem::NestingTooDeep { max: 16 });
    // Any nonzero byte is a true bool, as in ggml.
    let f = GgufFile::from_bytes(kv(7, &[2])).unwrap();
    assert_eq!(f.metadata().get("k"), Some(&GgufValue::Bool(true)));
}

#[test]
fn alignment_and_tensor_infos_are_checked() {
    let align = |ty: GgufValueType, value: &[u8]| Bytes::header(3, 0, 1).str("general.alignment").u32(ty.id()).raw(value).0;
    let u32 = |v: u32| align(GgufValueType::U32, &v.to_le_bytes());
    assert_eq!(problem(u32(0)), (24, GgufProblem::BadAlignment { alignment: 0 }));
    assert_eq!(problem(u32(48)).1, GgufProblem::BadAlignment { alignment: 48 });
    assert_eq!(problem(u32(1 << 31)).1, GgufProblem::BadAlignment { alignment: 1 << 31 });
    assert_eq!(problem(align(GgufValueType::U64, &32u64.to_le_bytes())).1, GgufProblem::AlignmentType { found: GgufValueType::U64 });
    assert_eq!(GgufFile::from_bytes(u32(16)).unwrap().alignment(), 16);
    assert_eq!(GgufFile::from_bytes(u32(1)).unwrap().alignment(), 1);

    // One tensor info: name "t", dims, type, offset; the data section after it.
    let info = |dims: &[u64], ty: u32, offset: u64, data: usize| {
        let mut b = Bytes::header(3, 1, 0).str("t").u32(dims.len() as u32);
        for &d in dims {
            b = b.u64(d);
        }
        let b = b.u32(ty).u64(offset);
        let n = b.0.len().next_multiple_of(32) + data;
        b.pad_to(n)
    };
    let name = || "t".to_string();
    assert!(GgufFile::from_bytes(info(&[32, 2], 8, 0, 68)).is_ok());
    assert_eq!(problem(info(&[32, 2], 8, 0, 67)).1, GgufProblem::TensorOutOfFile { name: name(), start: 96, bytes: 68, file_len: 163 });
    assert_eq!(problem(info(&[32, 2], 8, 16, 200)).1, GgufProblem::MisalignedOffset { name: name(), offset: 16, alignment: 32 });
    assert_eq!(
        problem(info(&[32, 2], 8, u64::MAX - 31, 68)).1,
        GgufProblem::TensorOutOfFile { name: name(), start: u64::MAX, bytes: 68, file_len: 164 }
    );
    assert_eq!(problem(info(&[1, 1, 1, 1, 1], 0, 0, 4)), (33, GgufProblem::TooManyDims { name: name(), n_dims: 5 }));
    assert_eq!(problem(info(&[1 << 63], 0, 0, 4)).1, GgufProblem::DimTooLarge { name: name(), index: 0, dim: 1 << 63 });
    assert_eq!(problem(info(&[1 << 32, 1 << 31], 0, 0, 4)).1, GgufProblem::ElementCountOverflow { name: name(), shape: vec![1 << 32, 1 << 31] });
    // 2^62 f32 values fit ggml's i64 count, but not their bytes a u64; 2^61 values do, not the file.
    assert_eq!(problem(info(&[1 << 31, 1 << 31], 0, 0, 4)).1, GgufProblem::ByteSizeOverflow { name: name(), ty: GgmlType::F32, elements: 1 << 62 });
    assert!(matches!(problem(info(&[1 << 30, 1 << 31], 0, 0, 4)).1, GgufProblem::TensorOutOfFile { bytes, .. } if bytes == 1 << 63));
    assert_eq!(
        problem(info(&[48, 2], GgmlType::Q4_0.id(), 0, 200)).1,
        GgufProblem::NotBlockMultiple { name: name(), ty: GgmlType::Q4_0, row: 48, block: 32 }
    );
    assert_eq!(
        problem(info(&[], GgmlType::Q4_K.id(), 0, 200)).1,
        GgufProblem::NotBlockMultiple { name: name(), ty: GgmlType::Q4_K, row: 1, block: 256 }
    );
    assert_eq!(problem(info(&[32], 16, 0, 200)).1, GgufProblem::UnsupportedTensorType { name: name(), id: 16, type_name: "IQ2_XXS" });
    assert_eq!(problem(info(&[32], 999, 0, 200)).1, GgufProblem::UnsupportedTensorType { name: name(), id: 999, type_name: "unknown" });
    // Zero-size tensors are fine (ggml allows ne = 0).
    assert_eq!(GgufFile::from_bytes(info(&[0, 5], 8, 0, 0)).unwrap().tensors()[0].bytes, 0);
    // Two tensors with one name.
    let two = Bytes::header(3, 2, 0).str("t").u32(1).u64(1).u32(0).u64(0).str("t").u32(1).u64(1).u32(0).u64(32).pad_to(128);
    assert_eq!(problem(two), (57, GgufProblem::DuplicateTensor { name: name() }));
    // Overlapping tensors are allowed (the format does not forbid it; ggml's loader would refuse).
    let overlap = Bytes::header(3, 2, 0).str("a").u32(1).u64(8).u32(0).u64(0).str("b").u32(1).u64(8).u32(0).u64(0).pad_to(128);
    let f = GgufFile::from_bytes(overlap).unwrap();
    assert_eq!(f.tensor_data(&f.tensors()[0]).unwrap(), f.tensor_data(&f.tensors()[1]).unwrap());
}

#[test]
fn tensor_data_checks_a_foreign_info() {
    let (bytes, _) = sample_file(None, 3);
    let f = GgufFile::from_bytes(bytes).unwrap();
    let mut t = f.tensors()[0].clone();
    t.offset = u64::MAX - 3;
    assert!(matches!(f.tensor_data(&t), Err(Error::Gguf { what: GgufProblem::TensorOutOfFile { .. }, .. })));
    t.offset = 0;
    t.bytes = f.as_bytes().len() as u64;
    assert!(f.tensor_data(&t).is_err());
}

#[test]
fn every_truncation_is_an_error_until_the_last_tensor_is_whole() {
    let (bytes, _) = sample_file(Some(16), 11);
    let f = GgufFile::from_bytes(bytes.clone()).unwrap();
    // The file is valid from the end of its last tensor on (the padding after it is not needed).
    let needed = f.tensors().iter().map(|t| f.data_offset() + t.offset + t.bytes).max().unwrap() as usize;
    assert!(needed < bytes.len(), "the test wants padding after the last tensor");
    for len in 0..=bytes.len() {
        let r = GgufFile::from_bytes(bytes[..len].to_vec());
        match r {
            Ok(_) => assert!(len >= needed, "a file cut to {len} of {} bytes parsed", bytes.len()),
            Err(e) => {
                assert!(len < needed, "{len}: {e}");
                let Error::Gguf { offset, .. } = e else { panic!("{len}: {e:?}") };
                assert!(offset <= len as u64, "{len}: error at byte {offset}, past the end");
            }
        }
    }
}

#[test]
fn random_mutations_never_panic() {
    let (bytes, _) = sample_file(None, 5);
    let header = GgufFile::from_bytes(bytes.clone()).unwrap().data_offset() as usize;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let huge = [u64::MAX, 1 << 63, 1 << 62, 1 << 40, 10_000_000_000, u32::MAX as u64, bytes.len() as u64, 0, 1, 17];
    let (mut ok, mut err) = (0, 0);
    for i in 0..4000 {
        let mut b = bytes.clone();
        // Most mutations land in the header (metadata and tensor infos), where lengths are.
        let at = if i % 8 == 0 { rng.below(b.len()) } else { rng.below(header) };
        match i % 5 {
            0 => b[at] ^= 1 << rng.below(8),
            1 => b[at] = rng.next() as u8,
            2 | 3 => {
                let v = if i % 5 == 2 { huge[rng.below(huge.len())] } else { rng.next() };
                let end = (at + 8).min(b.len());
                b[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
            }
            _ => {
                for _ in 0..1 + rng.below(8) {
                    let j = rng.below(b.len());
                    b[j] = rng.next() as u8;
                }
            }
        }
        if i % 16 == 15 {
            b.truncate(rng.below(b.len()));
        }
        match GgufFile::from_bytes(b) {
            Ok(f) => {
                ok += 1;
                for t in f.tensors() {
                    let d = f.tensor_data(t).expect("a parsed file's tensors lie inside it");
                    assert_eq!(d.len() as u64, t.bytes);
                }
            }
            Err(Error::Gguf { .. }) => err += 1,
            Err(e) => panic!("mutation {i}: not a GGUF error: {e:?}"),
        }
    }
    println!("gguf mutations: {ok} parsed, {err} refused");
    // Both outcomes happen: the mutations reach the checks and the values.
    assert!(ok > 100 && err > 1000, "{ok} parsed, {err} refused");
}

#[test]
fn the_writer_refuses_what_it_cannot_write() {
    let mut w = GgufWriter::new();
    let e = w.add_tensor("a", GgmlType::Q4_0, &[32], vec![0u8; 17]).unwrap_err();
    assert_eq!(e, Error::GgufWrite { what: GgufProblem::DataLength { name: "a".into(), expected: 18, found: 17 } });
    assert_eq!(e.to_string(), "GGUF writer: tensor \"a\": expected 18 bytes of data, got 17");
    assert!(matches!(w.add_tensor("a", GgmlType::Q4_K, &[32], vec![]), Err(Error::GgufWrite { what: GgufProblem::NotBlockMultiple { .. } })));
    assert!(matches!(w.declare_tensor("a", GgmlType::F32, &[1; 5]), Err(Error::GgufWrite { what: GgufProblem::TooManyDims { .. } })));
    let long = "x".repeat(64);
    assert!(matches!(w.declare_tensor(&long, GgmlType::F32, &[1]), Err(Error::GgufWrite { what: GgufProblem::TensorNameTooLong { len: 64, .. } })));
    assert!(w.declare_tensor(&long[..63], GgmlType::F32, &[1]).is_ok());
    w.add_tensor("a", GgmlType::F32, &[2], vec![0u8; 8]).unwrap();
    assert_eq!(w.declare_tensor("a", GgmlType::F32, &[1]).unwrap_err(), Error::GgufWrite { what: GgufProblem::DuplicateTensor { name: "a".into() } });
    // The 63-byte tensor was declared without data: writing everything at once is an error.
    assert_eq!(w.clone().write_to(Vec::new()).unwrap_err(), Error::GgufWrite { what: GgufProblem::TensorCount { declared: 2, written: 0 } });
    for (v, p) in [
        (GgufValue::U32(3), GgufProblem::BadAlignment { alignment: 3 }),
        (GgufValue::from("32"), GgufProblem::AlignmentType { found: GgufValueType::String }),
    ] {
        let mut w = GgufWriter::new();
        w.set("general.alignment", v);
        assert_eq!(w.write_to(Vec::new()).unwrap_err(), Error::GgufWrite { what: p });
    }
    let mut w = GgufWriter::new();
    w.set("", 1u8);
    assert_eq!(w.write_to(Vec::new()).unwrap_err(), Error::GgufWrite { what: GgufProblem::EmptyKey });
}

#[test]
fn streaming_writes_the_header_then_each_tensor() {
    let mut rng = Rng(99);
    let mut w = GgufWriter::new();
    w.set("general.alignment", 64u32);
    let a = rng.bytes(GgmlType::Q8_0.bytes_for(64).unwrap());
    let b = rng.bytes(4 * 3);
    let c = rng.bytes(GgmlType::Q6_K.bytes_for(512).unwrap());
    w.declare_tensor("a", GgmlType::Q8_0, &[64]).unwrap();
    w.add_tensor("b", GgmlType::F32, &[3], b.clone()).unwrap(); // given up front: written in its turn
    w.declare_tensor("c", GgmlType::Q6_K, &[256, 2]).unwrap();
    let mut s = w.start(Vec::new()).unwrap();
    assert_eq!(s.tensors().iter().map(|t| t.offset).collect::<Vec<_>>(), [0, 128, 192]);
    assert_eq!(s.next_tensor().unwrap().name, "a");
    assert!(matches!(s.write_tensor(&a[1..]), Err(Error::GgufWrite { what: GgufProblem::DataLength { .. } })));
    s.write_tensor(&a).unwrap();
    assert_eq!(s.next_tensor().unwrap().name, "c", "b's data was written after a's");
    s.write_tensor(&c).unwrap();
    assert!(s.next_tensor().is_none());
    assert!(matches!(s.write_tensor(&c), Err(Error::GgufWrite { what: GgufProblem::TensorCount { declared: 3, written: 4 } })));
    let bytes = s.finish().unwrap();
    let f = GgufFile::from_bytes(bytes).unwrap();
    let data: Vec<&[u8]> = f.tensors().iter().map(|t| f.tensor_data(t).unwrap()).collect();
    assert_eq!(data, [&a[..], &b[..], &c[..]]);
}

// wasm32 has no files to map (`GgufFile::open` is native only).
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn files_on_disk() {
    let dir = std::env::temp_dir().join(format!("rayo-gguf-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("x.gguf");
    let (bytes, tensors) = sample_file(Some(128), 21);
    let mut w = GgufWriter::new();
    *w.metadata_mut() = GgufFile::from_bytes(bytes.clone()).unwrap().metadata().clone();
    for (name, ty, shape, data) in &tensors {
        w.add_tensor(name, *ty, shape, data.clone()).unwrap();
    }
    w.write_file(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.as_bytes(), &bytes[..]);
    let t = f.tensor("q4_k").unwrap();
    assert_eq!(f.tensor_data(t).unwrap(), &tensors[5].3[..]);
    // A file that is not there, an empty file, a directory.
    let missing = dir.join("missing.gguf");
    match GgufFile::open(&missing) {
        Err(Error::Io { path: Some(p), kind: std::io::ErrorKind::NotFound, .. }) => assert_eq!(p, missing),
        r => panic!("{r:?}"),
    }
    let e = GgufFile::open(&missing).unwrap_err().to_string();
    assert!(e.starts_with(&missing.display().to_string()), "{e}");
    std::fs::write(dir.join("empty.gguf"), b"").unwrap();
    assert!(matches!(GgufFile::open(dir.join("empty.gguf")), Err(Error::Gguf { offset: 0, .. })));
    assert!(GgufFile::open(&dir).is_err());
    assert!(matches!(GgufWriter::new().write_file(dir.join("no/such/dir.gguf")), Err(Error::Io { .. })));
    std::fs::remove_dir_all(&dir).unwrap();
}
