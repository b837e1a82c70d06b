//! Hostile model files: SmolLM2's metadata (its tokenizer, chat template and hyperparameter
//! keys) on a tiny model of zero weights, mutated many times with a fixed seed (values of the
//! hyperparameter keys set to huge, zero, negative and wrong-typed values; bit flips, random
//! bytes and huge counts in the header; truncations). Each mutated file must load as `Ok` or be
//! refused with `Err`, never panic (a panic fails the test naming the mutation), and a model
//! that loads must run a session. Also hand-made configurations whose sizes overflow, and a
//! context past the model's. Bounded in time: the mutations stop after [`BUDGET`].

#[path = "llama_ref/mod.rs"]
mod llama_ref;

use rayo::gguf::{GgufFile, GgufValue, GgufWriter};
use rayo::quant::GgmlType;
use rayo_llm::cpu::Cpu;
use rayo_llm::{Config, Logits, Model, Session, SessionOptions, DEFAULT_CONTEXT};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The time the mutation loops may take together (a debug build parses the 49152-token
/// vocabulary in tens of milliseconds, so fewer mutations run there).
const BUDGET: Duration = Duration::from_secs(12);

/// The tiny model: 2 layers, width 64, 4 query heads and 2 key/value heads of 16 values.
const LAYERS: u32 = 2;
const D: u64 = 64;
const FF: u64 = 128;
const HEADS: u32 = 4;
const KV_HEADS: u32 = 2;

/// xorshift64: the mutations are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// SmolLM2's metadata with the tiny shape, and its tensors (zero bytes: Q4_0 matrices, F32
/// norms), written as a GGUF file.
fn tiny_smollm2(path: &std::path::Path) -> Vec<u8> {
    let src = GgufFile::open(path).unwrap();
    let mut w = GgufWriter::new();
    *w.metadata_mut() = src.metadata().clone();
    w.set("llama.block_count", LAYERS);
    w.set("llama.embedding_length", D as u32);
    w.set("llama.feed_forward_length", FF as u32);
    w.set("llama.attention.head_count", HEADS);
    w.set("llama.attention.head_count_kv", KV_HEADS);
    w.set("llama.rope.dimension_count", (D as u32) / HEADS);
    let vocab = src.metadata().get("llama.vocab_size").and_then(GgufValue::to_u64).unwrap_or(49152);
    let kv = D / HEADS as u64 * KV_HEADS as u64;
    let mut matrix = |name: &str, rows: u64, cols: u64| {
        let bytes = (rows * cols / 32 * 18) as usize;
        w.add_tensor(name, GgmlType::Q4_0, &[cols, rows], vec![0u8; bytes]).unwrap();
    };
    matrix("token_embd.weight", vocab, D);
    for l in 0..LAYERS {
        let n = |t: &str| format!("blk.{l}.{t}");
        matrix(&n("attn_q.weight"), D, D);
        matrix(&n("attn_k.weight"), kv, D);
        matrix(&n("attn_v.weight"), kv, D);
        matrix(&n("attn_output.weight"), D, D);
        matrix(&n("ffn_gate.weight"), FF, D);
        matrix(&n("ffn_up.weight"), FF, D);
        matrix(&n("ffn_down.weight"), D, FF);
    }
    let ones: Vec<u8> = (0..D).flat_map(|_| 1f32.to_le_bytes()).collect();
    for l in 0..LAYERS {
        w.add_tensor(&format!("blk.{l}.attn_norm.weight"), GgmlType::F32, &[D], ones.clone()).unwrap();
        w.add_tensor(&format!("blk.{l}.ffn_norm.weight"), GgmlType::F32, &[D], ones.clone()).unwrap();
    }
    w.add_tensor("output_norm.weight", GgmlType::F32, &[D], ones).unwrap();
    w.write_to(Vec::new()).unwrap()
}

/// Loads `bytes` as a model and, when it loads, runs a session of 16 positions for two tokens.
/// `Ok(true)`: loaded; `Ok(false)`: refused with an error; `Err`: a panic's message.
fn load_and_run(bytes: Vec<u8>) -> Result<bool, String> {
    catch_unwind(AssertUnwindSafe(|| {
        let Ok(file) = GgufFile::from_bytes(bytes) else { return false };
        let Ok(model) = Model::from_file(file) else { return false };
        let opts = SessionOptions { context: 16.min(model.config().context_length), ..SessionOptions::default() };
        let Ok(mut s) = Session::new(&model, Cpu::new(Arc::clone(model.file()), 2), opts) else { return true };
        let vocab = model.config().vocab_size as u32;
        let _ = s.forward(&[1 % vocab, 2 % vocab], Logits::All);
        let _ = model.tokenizer().encode("Hello, world!", true, true);
        true
    }))
    .map_err(|p| p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default())
}

/// Values a hostile file may give a hyperparameter key.
fn hostile_values() -> Vec<(&'static str, GgufValue)> {
    vec![
        ("0", GgufValue::U32(0)),
        ("1", GgufValue::U32(1)),
        ("3", GgufValue::U32(3)),
        ("7", GgufValue::U32(7)),
        ("4096", GgufValue::U32(4096)),
        ("u32::MAX", GgufValue::U32(u32::MAX)),
        ("2^31", GgufValue::U32(1 << 31)),
        ("2^32", GgufValue::U64(1 << 32)),
        ("2^40", GgufValue::U64(1 << 40)),
        ("u64::MAX", GgufValue::U64(u64::MAX)),
        ("-1", GgufValue::I32(-1)),
        ("i64::MIN", GgufValue::I64(i64::MIN)),
        ("NaN", GgufValue::F32(f32::NAN)),
        ("-inf", GgufValue::F32(f32::NEG_INFINITY)),
        ("1e30", GgufValue::F64(1e30)),
        ("a string", GgufValue::String("64".into())),
        ("false", GgufValue::Bool(false)),
    ]
}

/// Every hyperparameter and tokenizer scalar key set to every hostile value (and removed), one
/// key at a time, then pairs of keys: each file loads or is refused, none panics.
#[test]
fn hostile_hyperparameters_are_errors_not_panics() {
    let Some(path) = llama_ref::smollm2("hostile_hyperparameters_are_errors_not_panics") else { return };
    let base = tiny_smollm2(&path);
    assert_eq!(load_and_run(base.clone()), Ok(true), "the unmutated tiny model must load and run");
    let src = GgufFile::from_bytes(base).unwrap();
    // The hyperparameters first, then the tokenizer's scalars, then the rest (a debug build may
    // not reach the end within the budget).
    let mut keys: Vec<String> = src.metadata().iter().filter(|(_, v)| v.as_array().is_none()).map(|(k, _)| k.to_string()).collect();
    keys.sort_by_key(|k| (!k.starts_with("llama."), !k.starts_with("tokenizer."), k != "general.architecture"));
    assert!(keys.iter().any(|k| k == "llama.attention.head_count"), "{keys:?}");
    let write = |edits: &[(&str, Option<&GgufValue>)]| {
        let mut w = GgufWriter::new();
        *w.metadata_mut() = src.metadata().clone();
        for (k, v) in edits {
            match v {
                Some(v) => {
                    w.set(*k, (*v).clone());
                }
                None => {
                    w.metadata_mut().remove(k);
                }
            }
        }
        for t in src.tensors() {
            w.add_tensor(&t.name, t.ty, &t.shape, src.tensor_data(t).unwrap()).unwrap();
        }
        w.write_to(Vec::new()).unwrap()
    };
    let values = hostile_values();
    let start = Instant::now();
    let (mut ok, mut refused) = (0, 0);
    let mut tried = |what: String, bytes: Vec<u8>| match load_and_run(bytes) {
        Ok(true) => ok += 1,
        Ok(false) => refused += 1,
        Err(p) => panic!("{what}: panicked: {p}"),
    };
    for k in &keys {
        tried(format!("{k} removed"), write(&[(k, None)]));
        for (name, v) in &values {
            tried(format!("{k} = {name}"), write(&[(k, Some(v))]));
        }
        if start.elapsed() > BUDGET / 2 {
            break;
        }
    }
    // Pairs of the shape keys: products of two huge values.
    let shape = [
        "llama.attention.head_count",
        "llama.attention.head_count_kv",
        "llama.embedding_length",
        "llama.attention.key_length",
        "llama.vocab_size",
        "llama.feed_forward_length",
    ];
    let mut rng = Rng(0x5eed_0001);
    while start.elapsed() < BUDGET / 2 + BUDGET / 4 {
        let (a, b) = (shape[rng.below(shape.len())], shape[rng.below(shape.len())]);
        let (va, vb) = (&values[rng.below(10)], &values[rng.below(10)]);
        tried(format!("{a} = {}, {b} = {}", va.0, vb.0), write(&[(a, Some(&va.1)), (b, Some(&vb.1))]));
    }
    println!("hostile hyperparameters: {ok} loaded, {refused} refused in {:.1} s", start.elapsed().as_secs_f64());
    assert!(refused > 50, "{ok} loaded, {refused} refused");
}

/// Byte-level mutations of the tiny SmolLM2 file with a fixed seed: bit flips, random bytes
/// and huge counts written into the header (most in its first 4 KB, where the hyperparameters
/// are, and in the tensor infos at its end), and truncations.
#[test]
fn mutated_files_are_errors_not_panics() {
    let Some(path) = llama_ref::smollm2("mutated_files_are_errors_not_panics") else { return };
    let bytes = tiny_smollm2(&path);
    let header = GgufFile::from_bytes(bytes.clone()).unwrap().data_offset() as usize;
    let infos = header.saturating_sub(4096);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let huge = [u64::MAX, 1 << 63, 1 << 40, u32::MAX as u64, 1 << 31, bytes.len() as u64, 0, 1, 3];
    let start = Instant::now();
    let (mut ok, mut refused, mut n) = (0, 0, 0);
    while start.elapsed() < BUDGET / 4 || n < 20 {
        let i = n;
        n += 1;
        let mut b = bytes.clone();
        let at = match i % 4 {
            0 => rng.below(4096.min(header)),
            1 => infos + rng.below(header - infos),
            2 => rng.below(header),
            _ => rng.below(b.len()),
        };
        let what = match i % 5 {
            0 => {
                let bit = rng.below(8);
                b[at] ^= 1 << bit;
                format!("bit {bit} of byte {at} flipped")
            }
            1 => {
                let v = rng.next() as u8;
                b[at] = v;
                format!("byte {at} = {v}")
            }
            2 | 3 => {
                let v = if i % 5 == 2 { huge[rng.below(huge.len())] } else { rng.next() };
                let end = (at + 8).min(b.len());
                b[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
                format!("bytes {at}..{end} = {v:#x}")
            }
            _ => {
                let len = rng.below(b.len());
                b.truncate(len);
                format!("truncated to {len} bytes")
            }
        };
        match load_and_run(b) {
            Ok(true) => ok += 1,
            Ok(false) => refused += 1,
            Err(p) => panic!("mutation {i} ({what}): panicked: {p}"),
        }
    }
    println!("mutated files: {ok} loaded, {refused} refused ({n} in {:.1} s)", start.elapsed().as_secs_f64());
    assert!(refused > 0, "{ok} loaded, {refused} refused");
}

fn tiny_config() -> Config {
    Config {
        arch: &rayo_llm::arch::LLAMA,
        n_layer: 2,
        n_embd: 64,
        n_ff: 128,
        n_head: 4,
        n_head_kv: 2,
        head_dim: 16,
        n_rot: 16,
        rope_base: 10000.0,
        eps: 1e-5,
        context_length: 8192,
        vocab_size: 49152,
        rope_scale: 1.0,
        sliding_window: None,
        rope_freqs: None,
        long_rope: None,
        rope_attn_factor: 1.0,
        shard: rayo_llm::shard::Shard::ALONE,
    }
}

/// Hand-made configurations whose sizes overflow are errors naming the keys and numbers;
/// `q_width`/`kv_width` saturate instead of wrapping to 0.
#[test]
fn configurations_whose_sizes_overflow_are_errors() {
    assert!(tiny_config().validate().is_ok());
    let mut c = tiny_config();
    c.n_head = usize::MAX;
    c.n_head_kv = 1;
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("llama.attention.head_count") && e.contains(&usize::MAX.to_string()), "{e}");
    assert_eq!(c.q_width(), usize::MAX);
    let mut c = tiny_config();
    (c.n_head, c.n_head_kv, c.head_dim, c.n_rot) = (1 << 20, 1 << 20, 1 << 20, 2);
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("llama.attention.key_length 1048576") || e.contains("1099511627776"), "{e}");
    let mut c = tiny_config();
    (c.vocab_size, c.n_embd, c.n_head, c.n_head_kv, c.head_dim) = (u32::MAX as usize, u32::MAX as usize, 1, 1, u32::MAX as usize);
    c.n_rot = 2;
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("llama.vocab_size 4294967295") && e.contains("overflows"), "{e}");
    let mut c = tiny_config();
    c.n_head_kv = 3;
    assert!(c.validate().unwrap_err().to_string().contains("4 query heads cannot share 3"));
    let mut c = tiny_config();
    c.n_layer = 0;
    assert!(c.validate().unwrap_err().to_string().contains("llama.block_count is 0"));
}

/// The default context is the model's, at most [`DEFAULT_CONTEXT`]; an explicit one past the
/// model's is an error naming both numbers.
#[test]
fn default_context_is_capped_and_a_larger_one_refused() {
    let Some(path) = llama_ref::smollm2("default_context_is_capped_and_a_larger_one_refused") else { return };
    let model = Model::from_file(GgufFile::from_bytes(tiny_smollm2(&path)).unwrap()).unwrap();
    let ctx = model.config().context_length;
    assert!(ctx > DEFAULT_CONTEXT, "SmolLM2's context_length {ctx}");
    let cpu = || Cpu::new(Arc::clone(model.file()), 1);
    let s = Session::new(&model, cpu(), SessionOptions::default()).unwrap();
    assert_eq!(s.context(), DEFAULT_CONTEXT);
    let s = Session::new(&model, cpu(), SessionOptions { context: ctx, ..SessionOptions::default() }).unwrap();
    assert_eq!(s.context(), ctx);
    let e = Session::new(&model, cpu(), SessionOptions { context: ctx + 1, ..SessionOptions::default() }).err().unwrap().to_string();
    assert!(e.contains(&format!("{}", ctx + 1)) && e.contains(&format!("context_length of {ctx}")), "{e}");
}
