//! Quantized formats against their references: dequantization bit for bit against the `gguf`
//! package's numpy reference (golden files from scripts/ref/quant-golden.py) on every ISA,
//! the vector paths against the scalar definition, quantization against `gguf.quants` and
//! llama.cpp's `quantize_row_*_ref`, round trips, errors, hostile values, unaligned bytes.

mod common;

use common::{backends, Rng};
use rayo::quant::{self, GgmlType};
use rayo::Error;

/// The golden files, compiled in (WASI runs see no file system).
fn golden(ty: GgmlType) -> &'static str {
    macro_rules! files {
        ($($t:ident),*) => {
            match ty { $(GgmlType::$t => include_str!(concat!("data/quant/", stringify!($t), ".txt")),)* }
        };
    }
    files!(F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K)
}

const INPUTS: &str = include_str!("data/quant/inputs.txt");

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex length");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// `(block bytes, values)` of the `dequant` lines.
fn dequant_cases(ty: GgmlType) -> Vec<(Vec<u8>, Vec<f32>)> {
    golden(ty)
        .lines()
        .filter_map(|l| l.strip_prefix("dequant "))
        .map(|l| {
            let (b, v) = l.split_once(' ').expect("two fields");
            (hex(b), f32s(&hex(v)))
        })
        .collect()
}

/// The expected bytes of the `quant` lines (line i: row i of inputs.txt).
fn quant_cases(ty: GgmlType) -> Vec<Vec<u8>> {
    golden(ty).lines().filter_map(|l| l.strip_prefix("quant ")).map(hex).collect()
}

fn inputs() -> Vec<Vec<f32>> {
    INPUTS.lines().filter(|l| !l.starts_with('#')).map(|l| f32s(&hex(l))).collect()
}

/// Bit equality, any NaN matching any NaN (payloads are not portable: wasm's are not even
/// deterministic).
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn assert_same(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(same(g, w), "{what}: value {i}: got {g:e} ({:#010x}), want {w:e} ({:#010x})", g.to_bits(), w.to_bits());
    }
}

#[test]
fn dequantize_matches_gguf_numpy_bit_for_bit_on_every_isa() {
    let bks = backends("quant dequantize goldens");
    let mut checked = 0;
    for ty in GgmlType::ALL {
        let cases = dequant_cases(ty);
        assert!(cases.len() >= 13, "{ty}: {} golden blocks", cases.len());
        for (i, (bytes, want)) in cases.iter().enumerate() {
            let mut out = vec![0f32; want.len()];
            quant::dequantize_scalar(ty, bytes, &mut out).unwrap();
            assert_same(&format!("{ty} block {i} scalar definition"), &out, want);
            for &b in &bks {
                out.fill(0.0);
                quant::dequantize_with(b, ty, bytes, &mut out).unwrap();
                assert_same(&format!("{ty} block {i} on {b}"), &out, want);
                checked += 1;
            }
        }
        // All of a type's blocks as one row.
        let bytes: Vec<u8> = cases.iter().flat_map(|c| c.0.clone()).collect();
        let want: Vec<f32> = cases.iter().flat_map(|c| c.1.clone()).collect();
        for &b in &bks {
            let mut out = vec![0f32; want.len()];
            quant::dequantize_with(b, ty, &bytes, &mut out).unwrap();
            assert_same(&format!("{ty} row on {b}"), &out, &want);
        }
    }
    println!("quant goldens: {checked} block×backend dequantizations bit-exact on {bks:?}");
}

/// Random blocks: random bytes, with the scale fields random f16/f32 bit patterns in a sane
/// range most of the time and anything (NaN, inf, subnormal) the rest.
fn random_blocks(rng: &mut Rng, ty: GgmlType, n: usize) -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..n * ty.type_size()).map(|_| rng.next_u64() as u8).collect();
    let fields: &[usize] = match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 | GgmlType::Q4_K | GgmlType::Q5_K => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q8_1 => &[0, 2],
        GgmlType::Q2_K => &[80, 82],
        GgmlType::Q3_K => &[108],
        GgmlType::Q6_K => &[208],
        _ => &[],
    };
    for b in bytes.chunks_exact_mut(ty.type_size()) {
        if rng.next_u64() % 4 != 0 {
            for &off in fields {
                let h = half_bits(rng.uniform(-0.1, 0.1));
                b[off..off + 2].copy_from_slice(&h.to_le_bytes());
            }
            if ty == GgmlType::Q8_K {
                b[..4].copy_from_slice(&rng.uniform(-0.01, 0.01).to_le_bytes());
            }
        }
    }
    bytes
}

/// f32 → f16 bits (truncating: only a source of sane scale patterns).
fn half_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    if exp <= 0 {
        return sign;
    }
    sign | ((exp.min(30) as u16) << 10) | ((b >> 13) & 0x3ff) as u16
}

#[test]
fn vector_paths_equal_the_scalar_definition_on_random_blocks() {
    let bks = backends("quant simd == scalar");
    let mut rng = Rng::new(7);
    for ty in GgmlType::ALL {
        for n in [1usize, 3, 17, 40] {
            let bytes = random_blocks(&mut rng, ty, n);
            let len = n * ty.block_size();
            let mut want = vec![0f32; len];
            quant::dequantize_scalar(ty, &bytes, &mut want).unwrap();
            for &b in &bks {
                let mut got = vec![f32::NAN; len];
                quant::dequantize_with(b, ty, &bytes, &mut got).unwrap();
                assert_same(&format!("{ty} × {n} blocks on {b}"), &got, &want);
            }
        }
    }
}

/// Σ (dequantize(q) − x)² over a block.
fn sq_error(ty: GgmlType, q: &[u8], x: &[f32]) -> f64 {
    let mut y = vec![0f32; x.len()];
    quant::dequantize(ty, q, &mut y).unwrap();
    x.iter().zip(&y).map(|(&a, &b)| (a as f64 - b as f64).powi(2)).sum()
}

/// Every row byte for byte: the legacy formats against `gguf.quants` (which the script checked
/// against llama.cpp), Q8_1, Q8_K and the k-quants against llama.cpp's `quantize_row_*_ref`.
/// The k-quants' scale searches are long chains of f32 sums; rayo repeats them operation for
/// operation (no fused multiply-adds: the reference library, ggml-base, is built without FMA
/// contraction on x86-64), so 32/32 rows of every k-quant are identical and the test asks for
/// all of them (an ad-hoc run on 4000 more random blocks per k-quant, 32000 per legacy format,
/// also found every block identical). A row that differs is reported with both
/// quantizations' squared errors.
#[test]
fn quantize_matches_the_references() {
    let x = inputs();
    assert_eq!(x.len(), 32);
    let mut report = Vec::new();
    for ty in GgmlType::ALL {
        let want = quant_cases(ty);
        let mut differ = Vec::new();
        for (i, w) in want.iter().enumerate() {
            let got = quant::quantize_to_vec(ty, &x[i]).unwrap();
            assert_eq!(got.len(), w.len());
            if &got != w {
                let (mine, theirs) = (sq_error(ty, &got, &x[i]), sq_error(ty, w, &x[i]));
                differ.push(format!("row {i}: squared error {mine:e} (llama.cpp: {theirs:e})"));
            }
        }
        if !want.is_empty() {
            report.push(format!("{ty} {}/{}", want.len() - differ.len(), want.len()));
        }
        assert!(differ.is_empty(), "{ty}: rows differing from the reference quantizer: {differ:?}");
    }
    println!("quantize, rows byte-identical to the reference: {}", report.join(", "));
}

fn quantized_types() -> impl Iterator<Item = GgmlType> {
    GgmlType::ALL.into_iter().filter(|t| t.is_quantized())
}

/// Largest allowed RMS error relative to the data's RMS, per type (normal data).
fn rel_rms_bound(ty: GgmlType) -> f64 {
    match ty {
        GgmlType::Q2_K => 0.45,
        GgmlType::Q3_K => 0.25,
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q4_K => 0.12,
        GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q5_K => 0.06,
        GgmlType::Q6_K => 0.03,
        GgmlType::Q8_0 | GgmlType::Q8_1 | GgmlType::Q8_K => 0.008,
        GgmlType::F16 => 1e-3,
        GgmlType::BF16 => 8e-3,
        GgmlType::F32 => 0.0,
    }
}

#[test]
fn round_trip_on_awkward_lengths() {
    let mut rng = Rng::new(11);
    for ty in GgmlType::ALL {
        let bs = ty.block_size();
        for blocks in [0usize, 1, 2, 3, 7, 17] {
            let n = blocks * bs.max(32);
            // Sums of uniforms: roughly normal, as weights are.
            let x: Vec<f32> = (0..n).map(|_| (0..4).map(|_| rng.uniform(-1.0, 1.0)).sum::<f32>()).collect();
            let q = quant::quantize_to_vec(ty, &x).unwrap();
            assert_eq!(q.len(), ty.bytes_for(n).unwrap());
            let mut y = vec![0f32; n];
            quant::dequantize(ty, &q, &mut y).unwrap();
            let err: f64 = x.iter().zip(&y).map(|(&a, &b)| (a as f64 - b as f64).powi(2)).sum();
            let rms: f64 = x.iter().map(|&a| (a as f64).powi(2)).sum();
            if n > 0 {
                let rel = (err / rms).sqrt();
                assert!(rel <= rel_rms_bound(ty), "{ty}, {n} values: relative RMS error {rel}");
            }
        }
    }
}

#[test]
fn lengths_that_are_not_whole_blocks_are_errors() {
    for ty in quantized_types() {
        let bs = ty.block_size();
        for n in [1, bs - 1, bs + 1, 3 * bs + 5] {
            let x = vec![1.0f32; n];
            let e = quant::quantize_to_vec(ty, &x).unwrap_err();
            assert_eq!(e, Error::NotBlockMultiple { format: ty.name(), len: n, block: bs });
            let mut out = vec![0f32; n];
            assert!(matches!(quant::dequantize(ty, &[0u8; 4096][..ty.type_size()], &mut out), Err(Error::NotBlockMultiple { .. })));
        }
        // Whole blocks, but the byte or value count disagrees.
        let x = vec![0.5f32; 2 * bs];
        let mut short = vec![0u8; 2 * ty.type_size() - 1];
        let e = quant::quantize(ty, &x, &mut short).unwrap_err();
        assert_eq!(e, Error::LengthMismatch { op: "quant::quantize", expected: 2 * ty.type_size(), actual: short.len() });
        let q = quant::quantize_to_vec(ty, &x).unwrap();
        let mut out = vec![0f32; bs];
        let e = quant::dequantize(ty, &q, &mut out).unwrap_err();
        assert_eq!(e, Error::LengthMismatch { op: "quant::dequantize", expected: ty.type_size(), actual: q.len() });
    }
}

/// NaN and ±inf give some bytes (ggml gives them no meaning) and never a panic — this test
/// runs with overflow checks on, so no arithmetic in the quantizers may overflow either.
#[test]
fn nan_and_inf_inputs_do_not_panic() {
    let mut rng = Rng::new(3);
    for ty in GgmlType::ALL {
        let n = 4 * ty.block_size().max(32);
        for special in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, -f32::MAX, 1e-45] {
            let mut x = rng.data(n, -1.0, 1.0);
            x[5] = special; // one special value in the first block
            x[n / 2..].fill(special); // whole blocks of it later
            let q = quant::quantize_to_vec(ty, &x).unwrap();
            let mut y = vec![0f32; n];
            quant::dequantize(ty, &q, &mut y).unwrap();
        }
        let x = rng.data_with_specials(n, -100.0, 100.0);
        let q = quant::quantize_to_vec(ty, &x).unwrap();
        let mut y = vec![0f32; n];
        quant::dequantize(ty, &q, &mut y).unwrap();
    }
}

#[test]
fn unaligned_bytes_work() {
    let bks = backends("quant unaligned");
    let mut rng = Rng::new(5);
    for ty in GgmlType::ALL {
        let n = 5 * ty.block_size().max(32);
        let x = rng.data(n, -2.0, 2.0);
        let q = quant::quantize_to_vec(ty, &x).unwrap();
        let mut want = vec![0f32; n];
        quant::dequantize_scalar(ty, &q, &mut want).unwrap();
        for offset in 1..4 {
            let mut buf = vec![0u8; q.len() + offset];
            buf[offset..].copy_from_slice(&q);
            let shifted = &buf[offset..];
            for &b in &bks {
                let mut got = vec![0f32; n];
                quant::dequantize_with(b, ty, shifted, &mut got).unwrap();
                assert_same(&format!("{ty} at offset {offset} on {b}"), &got, &want);
            }
            let mut got = vec![0f32; n];
            quant::dequantize_scalar(ty, shifted, &mut got).unwrap();
            assert_same(&format!("{ty} scalar at offset {offset}"), &got, &want);
            // Quantizing into a misaligned buffer writes the same bytes.
            let mut out = vec![0u8; q.len() + offset];
            quant::quantize(ty, &x, &mut out[offset..]).unwrap();
            assert_eq!(&out[offset..], &q[..], "{ty}: quantize at offset {offset}");
        }
    }
}

#[test]
fn q8_k_sums_and_q8_1_sum_field_agree_with_the_values() {
    let mut rng = Rng::new(9);
    let x = rng.data(4 * 256, -3.0, 3.0);
    let q = quant::quantize_to_vec(GgmlType::Q8_K, &x).unwrap();
    for b in q.chunks_exact(292) {
        let qs: Vec<i32> = b[4..260].iter().map(|&v| v as i8 as i32).collect();
        for j in 0..16 {
            let bsum = i16::from_le_bytes([b[260 + 2 * j], b[261 + 2 * j]]) as i32;
            assert_eq!(bsum, qs[16 * j..16 * j + 16].iter().sum::<i32>());
        }
        assert!(qs.iter().all(|&v| v > -128), "Q8_K never uses −128");
    }
    let q = quant::quantize_to_vec(GgmlType::Q8_1, &x).unwrap();
    for b in q.chunks_exact(36) {
        let d = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
        let s = f16_to_f32(u16::from_le_bytes([b[2], b[3]]));
        let sum: i32 = b[4..].iter().map(|&v| v as i8 as i32).sum();
        assert!((s - sum as f32 * d).abs() <= 1e-3 * s.abs().max(1e-3), "s = {s}, d·Σq = {}", sum as f32 * d);
    }
}

fn f16_to_f32(h: u16) -> f32 {
    let mut out = [0f32];
    quant::dequantize(GgmlType::F16, &h.to_le_bytes(), &mut out).unwrap();
    out[0]
}

/// Rows long enough to be split over threads give the bytes and values of block-at-a-time
/// calls (which never split).
#[test]
fn long_rows_split_over_threads_match_block_at_a_time() {
    let mut rng = Rng::new(13);
    let n = 1 << 19;
    let x = rng.data(n, -1.0, 1.0);
    for ty in GgmlType::ALL {
        let q = quant::quantize_to_vec(ty, &x).unwrap();
        let bs = ty.block_size().max(256);
        let per: Vec<u8> = x.chunks(bs).flat_map(|c| quant::quantize_to_vec(ty, c).unwrap()).collect();
        assert!(q == per, "{ty}: threaded quantize differs");
        let mut y = vec![0f32; n];
        quant::dequantize(ty, &q, &mut y).unwrap();
        let bytes_per = ty.bytes_for(bs).unwrap();
        for (i, (c, o)) in q.chunks(bytes_per).zip(y.chunks(bs)).enumerate() {
            let mut want = vec![0f32; bs];
            quant::dequantize(ty, c, &mut want).unwrap();
            assert_same(&format!("{ty} chunk {i}"), o, &want);
        }
    }
}

/// The table of formats is what every part of rayo uses: for each entry, `GgmlType` has it
/// (name, id, blocks), the codecs quantize and dequantize whole blocks of its size, the golden
/// files' blocks (written by the `gguf` package) have its size, the GGUF writer and reader size
/// its tensors by it, and where the CPU column is set the quantized product takes it.
#[test]
fn every_format_of_the_table_agrees_with_codecs_goldens_and_the_gguf_reader() {
    use rayo::gguf::{GgufFile, GgufWriter};
    use rayo::Par;
    let table = quant::formats::FORMATS;
    assert_eq!(GgmlType::ALL.map(|t| t.id()), table.map(|f| f.id), "GgmlType::ALL is the table, in order");
    let mut rng = Rng::new(27);
    for f in table {
        let ty = GgmlType::from_id(f.id).unwrap();
        assert_eq!((ty.name(), ty.format()), (f.name, f));
        assert_eq!(GgmlType::from_name(f.name), Some(ty));
        let (values, bytes) = (f.block_values as usize, f.block_bytes as usize);
        assert_eq!((ty.block_size(), ty.type_size(), ty.is_quantized()), (values, bytes, f.is_quantized()), "{ty}");
        assert_eq!(ty.bytes_for(3 * values).unwrap(), 3 * bytes, "{ty}");
        // the codecs: whole blocks of the table's size
        let x: Vec<f32> = (0..3 * values).map(|_| rng.uniform(-2.0, 2.0)).collect();
        let q = quant::quantize_to_vec(ty, &x).unwrap();
        assert_eq!(q.len(), 3 * bytes, "{ty}: quantize");
        let mut y = vec![0f32; 3 * values];
        quant::dequantize(ty, &q, &mut y).unwrap();
        quant::dequantize_scalar(ty, &q, &mut y).unwrap();
        assert!(quant::dequantize(ty, &q[..bytes], &mut y).is_err(), "{ty}: one block for three");
        // the goldens: blocks as the gguf package lays them out
        let cases = dequant_cases(ty);
        assert!(!cases.is_empty(), "{ty}: golden cases");
        for (b, v) in cases {
            assert!(b.len() % bytes == 0 && b.len() / bytes * values == v.len(), "{ty}: golden block of {} bytes, {} values", b.len(), v.len());
        }
        // the GGUF writer and reader: a 3 × (2 blocks) tensor
        let mut w = GgufWriter::new();
        let data = quant::quantize_to_vec(ty, &(0..6 * values).map(|i| i as f32 / 100.0).collect::<Vec<_>>()).unwrap();
        w.add_tensor("t", ty, &[2 * values as u64, 3], data).unwrap();
        let file = GgufFile::from_bytes(w.write_to(Vec::new()).unwrap()).unwrap();
        let t = file.tensor("t").unwrap();
        assert_eq!((t.ty, t.bytes), (ty, 6 * bytes as u64), "{ty}: GGUF reader");
        assert_eq!(file.tensor_data(t).unwrap().len(), 6 * bytes);
        // the CPU column: the quantized product takes the format as it is stored
        if f.kernels.cpu {
            let m = quant::QuantMatrix::new(ty, 3, 2 * values, file.tensor_data(t).unwrap()).unwrap();
            let mut y = [0f32; 3];
            quant::matvec(&m, &vec![1.0; 2 * values], &mut y, Par::Seq).unwrap();
            assert!(y.iter().all(|v| v.is_finite()), "{ty}: {y:?}");
        }
    }
}
