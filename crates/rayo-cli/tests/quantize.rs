//! `rayo quantize` as a user runs it: a small model written here, and SmolLM2-135M when
//! scripts/fetch-smollm2.sh has fetched it (else a `SKIP` line).

mod common;

use rayo::gguf::{GgufFile, GgufWriter};
use rayo::quant::GgmlType;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn rayo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rayo")).args(args).output().expect("run rayo")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rayo-quantize-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// A deterministic pseudo-random f32 in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// A llama-shaped model of f32 tensors: width 512 (two k-quant blocks per row), 2 layers.
fn small_model(path: &Path) -> Vec<(String, Vec<u64>, Vec<f32>)> {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    w.set("general.name", "tiny");
    w.set("llama.block_count", 2u32);
    w.set("llama.attention.head_count", 8u32);
    w.set("llama.attention.head_count_kv", 2u32);
    let mut tensors = vec![("token_embd.weight".to_string(), vec![512u64, 16])];
    for l in 0..2 {
        for (t, shape) in [
            ("attn_norm", vec![512u64]),
            ("attn_q", vec![512, 64]),
            ("attn_k", vec![512, 16]),
            ("attn_v", vec![512, 16]),
            ("attn_output", vec![512, 64]),
            ("ffn_down", vec![768, 32]),
            ("ffn_up", vec![512, 48]),
            ("ffn_norm", vec![512]),
        ] {
            tensors.push((format!("blk.{l}.{t}.weight"), shape));
        }
    }
    let mut out = Vec::new();
    for (i, (name, shape)) in tensors.into_iter().enumerate() {
        let n = shape.iter().product::<u64>() as usize;
        let v = values(n, i as u64 + 1);
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        w.add_tensor(&name, GgmlType::F32, &shape, bytes).unwrap();
        out.push((name, shape, v));
    }
    w.write_file(path).unwrap();
    out
}

fn dequantized(f: &GgufFile, name: &str) -> Vec<f32> {
    let t = f.tensor(name).unwrap();
    let mut v = vec![0f32; t.elements() as usize];
    rayo::quant::dequantize(t.ty, f.tensor_data(t).unwrap(), &mut v).unwrap();
    v
}

/// Root-mean-square error relative to the values' RMS.
fn rel_rms(got: &[f32], want: &[f32]) -> f64 {
    let e: f64 = got.iter().zip(want).map(|(&a, &b)| (a as f64 - b as f64).powi(2)).sum();
    let s: f64 = want.iter().map(|&b| (b as f64).powi(2)).sum();
    (e / s).sqrt()
}

#[test]
fn a_small_model_in_every_type_reads_back_within_its_format_error() {
    let src = tmp("small-f32.gguf");
    let model = small_model(&src);
    // Relative RMS error of uniform values per format (a 2-bit format is coarse).
    for (ty, max_err) in [
        ("Q4_0", 0.12),
        ("Q4_1", 0.1),
        ("Q5_0", 0.06),
        ("Q5_1", 0.05),
        ("Q8_0", 0.01),
        ("Q2_K", 0.4),
        ("Q3_K", 0.2),
        ("Q4_K_M", 0.12),
        ("Q5_K_M", 0.06),
        ("Q6_K", 0.03),
    ] {
        let out = tmp(&format!("small-{ty}.gguf"));
        let o = rayo(&["quantize", src.to_str().unwrap(), out.to_str().unwrap(), ty, "--threads", "2"]);
        assert!(o.status.success(), "{ty}: {}", String::from_utf8_lossy(&o.stderr));
        let f = GgufFile::open(&out).unwrap();
        assert_eq!(f.metadata().get("general.name").and_then(|v| v.as_str()), Some("tiny"));
        assert_eq!(f.metadata().get("general.quantization_version").and_then(|v| v.to_u64()), Some(2));
        assert!(f.metadata().get("general.file_type").and_then(|v| v.to_u64()).is_some());
        assert_eq!(f.tensors().len(), model.len());
        for (name, shape, v) in &model {
            let t = f.tensor(name).unwrap();
            assert_eq!(&t.shape, shape, "{ty}: {name}");
            if name.contains("norm") {
                assert_eq!(t.ty, GgmlType::F32, "{ty}: {name} stays f32");
                assert_eq!(&dequantized(&f, name), v);
            } else {
                assert!(t.ty.is_quantized(), "{ty}: {name} is {}", t.ty);
                let e = rel_rms(&dequantized(&f, name), v);
                assert!(e < max_err, "{ty}: {name} ({}) relative RMS error {e}", t.ty);
            }
        }
        std::fs::remove_file(&out).unwrap();
        assert!(!out.with_extension("gguf.part").exists());
    }
}

#[test]
fn bad_input_is_an_error_and_leaves_no_file() {
    let o = rayo(&["quantize", "a.gguf", "b.gguf", "Q9_9"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("Q4_K_M"));
    let out = tmp("never.gguf");
    let o = rayo(&["quantize", "/nonexistent/x.gguf", out.to_str().unwrap(), "Q4_0"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("/nonexistent/x.gguf") && !e.contains("panicked"), "{e}");
    // A file that is not GGUF.
    let junk = tmp("junk.gguf");
    std::fs::write(&junk, b"not a gguf file at all").unwrap();
    let o = rayo(&["quantize", junk.to_str().unwrap(), out.to_str().unwrap(), "Q4_0"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(!out.exists() && !out.with_extension("gguf.part").exists());
}

/// SmolLM2-135M-Instruct (Q4_1) to Q4_K_M: every tensor gets the type llama-quantize gives it
/// (tests/data/smollm2-mix.txt) and reads back close to the input.
#[test]
fn smollm2_q4_k_m_has_llama_cpp_types() {
    let Some(path) = common::smollm2("rayo quantize on SmolLM2") else { return };
    let out = tmp("smollm2-q4_k_m.gguf");
    let o = rayo(&["quantize", path.to_str().unwrap(), out.to_str().unwrap(), "Q4_K_M"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = GgufFile::open(&out).unwrap();
    let src = GgufFile::open(&path).unwrap();
    let want = include_str!("data/smollm2-mix.txt");
    let mut n = 0;
    for line in want.lines().filter(|l| l.starts_with("Q4_K_M ")) {
        let mut it = line.split(' ').skip(1);
        let (name, ty) = (it.next().unwrap(), it.next().unwrap());
        assert_eq!(f.tensor(name).map(|t| t.ty.name()), Some(ty), "{name}");
        n += 1;
    }
    assert_eq!(n, f.tensors().len());
    assert_eq!(f.metadata().get("general.file_type").and_then(|v| v.to_u64()), Some(15));
    for name in ["blk.0.attn_q.weight", "blk.0.ffn_down.weight", "blk.0.attn_v.weight"] {
        let e = rel_rms(&dequantized(&f, name), &dequantized(&src, name));
        assert!(e < 0.1, "{name}: relative RMS error {e} against the Q4_1 input");
    }
    std::fs::remove_file(&out).unwrap();
}

/// Every file type: the whole file `rayo quantize` writes is byte for byte the one
/// `llama-quantize --allow-requantize` wrote (its sha256 in tests/data/smollm2-mix.txt, from
/// scripts/ref/quantize-mix.sh): same types, same order, same metadata, same quantized bits.
#[test]
fn smollm2_in_every_type_is_llama_quantize_s_file() {
    use sha2::{Digest, Sha256};
    let Some(path) = common::smollm2("rayo quantize on SmolLM2") else { return };
    let want = include_str!("data/smollm2-mix.txt");
    let mut n = 0;
    for line in want.lines().filter(|l| l.starts_with("sha256 ")) {
        let mut it = line.split(' ').skip(1);
        let (ty, hash) = (it.next().unwrap(), it.next().unwrap());
        let out = tmp(&format!("smollm2-{ty}.gguf"));
        let o = rayo(&["quantize", path.to_str().unwrap(), out.to_str().unwrap(), ty]);
        assert!(o.status.success(), "{ty}: {}", String::from_utf8_lossy(&o.stderr));
        let got: String = Sha256::digest(std::fs::read(&out).unwrap()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got, hash, "{ty}: rayo's file differs from llama-quantize's");
        std::fs::remove_file(&out).unwrap();
        n += 1;
    }
    assert_eq!(n, 16);
}
