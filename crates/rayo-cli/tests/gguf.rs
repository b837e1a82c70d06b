//! `rayo gguf FILE [--json]` on a small file written by rayo's `GgufWriter`, on broken files,
//! with a closed stdout, and (when `scripts/fetch-smollm2.sh` has fetched it) on SmolLM2-135M
//! Q4_1 against the table PyPI `gguf` made of it.

mod common;

use rayo::gguf::{GgufArray, GgufValue, GgufWriter};
use rayo::quant::GgmlType;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn rayo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rayo")).args(args).env("RAYO_FORCE_CPU", "1").output().expect("run rayo")
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).expect("UTF-8 output")
}

/// A temporary directory for this test process, removed when dropped.
struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("rayo-cli-gguf-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A small file: strings that need escaping, a long array, a nested array, a float; a Q4_0
/// and an F32 tensor.
fn small_file(path: &str) {
    let mut w = GgufWriter::new();
    w.set("general.architecture", "llama");
    w.set("general.alignment", 64u32);
    w.set("t.text", "say \"hi\"\n\tthen\\go é");
    w.set("t.eps", 1e-5f32);
    w.set("t.neg", -3i64);
    w.set("t.flag", true);
    w.set("t.long", GgufArray::from((0..100u32).collect::<Vec<_>>()));
    w.set("t.nested", GgufValue::Array(GgufArray::from(vec![GgufArray::from(vec!["a".to_string()]), GgufArray::from(vec![1u8, 2])])));
    w.add_tensor("blk.0.w", GgmlType::Q4_0, &[64, 2], vec![0u8; 72]).unwrap();
    w.add_tensor("norm", GgmlType::F32, &[3], vec![0u8; 12]).unwrap();
    w.write_file(path).unwrap();
}

#[test]
fn json_of_a_small_file() {
    let dir = TempDir::new("json");
    let f = dir.path("small.gguf");
    small_file(&f);
    let o = rayo(&["gguf", &f, "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Floats in serde_json's shortest round-trip spelling (1e-5 is `0.00001`).
    let longs: Vec<String> = (0..100).map(|i: u32| i.to_string()).collect();
    let want = format!(
        concat!(
            "{{\"version\":3,\"alignment\":64,\"data_offset\":{},\"metadata\":{{",
            "\"general.architecture\":\"llama\",\"general.alignment\":64,",
            "\"t.text\":\"say \\\"hi\\\"\\n\\tthen\\\\go é\",\"t.eps\":0.00001,\"t.neg\":-3,\"t.flag\":true,",
            "\"t.long\":[{}],\"t.nested\":[[\"a\"],[1,2]]}},",
            "\"tensors\":[{{\"name\":\"blk.0.w\",\"type\":\"Q4_0\",\"shape\":[64,2],\"offset\":0,\"bytes\":72}},",
            "{{\"name\":\"norm\",\"type\":\"F32\",\"shape\":[3],\"offset\":128,\"bytes\":12}}]}}\n"
        ),
        rayo::gguf::GgufFile::open(&f).unwrap().data_offset(),
        longs.join(",")
    );
    assert_eq!(text(&o.stdout), want);
}

#[test]
fn text_of_a_small_file() {
    let dir = TempDir::new("text");
    let f = dir.path("small.gguf");
    small_file(&f);
    let o = rayo(&["gguf", &f]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for needle in [
        "GGUF version 3, ",
        "alignment 64",
        "metadata (8 entries):",
        "t.text",
        r#""say \"hi\"\n\tthen\\go é""#,
        "[u32; 100]",
        "[0, 1, 2, 3, 4, 5, ... 94 more]",
        "[[string]; 2]",
        "1e-5",
        "tensors (2):",
        "by type:",
    ] {
        assert!(out.contains(needle), "{needle:?} not in:\n{out}");
    }
    let row = out.lines().find(|l| l.trim_start().starts_with("blk.0.w")).unwrap();
    assert_eq!(row.split_whitespace().collect::<Vec<_>>(), ["blk.0.w", "Q4_0", "64", "x", "2", "0", "72"]);
    let count = |ty: &str| out.lines().find(|l| l.split_whitespace().next() == Some(ty) && l.contains("tensors")).unwrap().to_string();
    assert_eq!(count("Q4_0").split_whitespace().collect::<Vec<_>>(), ["Q4_0", "1", "tensors", "72", "bytes"]);
    assert_eq!(count("total").split_whitespace().collect::<Vec<_>>(), ["total", "2", "tensors", "84", "bytes"]);
}

#[test]
fn broken_files_are_errors_not_panics() {
    let dir = TempDir::new("broken");
    let good = dir.path("good.gguf");
    small_file(&good);
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.path("cut.gguf");
    std::fs::write(&cut, &bytes[..100]).unwrap();
    let mut huge = bytes.clone();
    huge[24..32].copy_from_slice(&10_000_000_000u64.to_le_bytes()); // the first key's length
    let huge_path = dir.path("huge.gguf");
    std::fs::write(&huge_path, huge).unwrap();
    let missing = dir.path("missing.gguf");
    for (f, needle) in [
        (&cut, "GGUF: at byte "),
        (&huge_path, "GGUF: at byte 24: string length 10000000000 exceeds the"),
        (&missing, "missing.gguf"),
        (&dir.path(""), "rayo: "),
    ] {
        for json in [false, true] {
            let args: &[&str] = if json { &["gguf", f, "--json"] } else { &["gguf", f] };
            let o = rayo(args);
            let e = text(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{f}: {e}");
            assert!(e.contains(needle) && !e.contains("panicked") && o.stdout.is_empty(), "{f}: {e}");
        }
    }
}

/// `rayo gguf F | head -0`: the reader is gone before rayo writes; rayo ends quietly with status 0.
fn closed_stdout(args: &[&str]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rayo")).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run rayo");
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let e = text(&o.stderr);
    assert!(o.status.success() && !e.contains("panicked"), "{args:?}: {:?} {e}", o.status);
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    let dir = TempDir::new("closed");
    let f = dir.path("small.gguf");
    small_file(&f);
    closed_stdout(&["gguf", &f]);
    closed_stdout(&["gguf", &f, "--json"]);
}

#[test]
fn smollm2_json_lists_every_tensor_as_the_gguf_package_reads_it() {
    let Some(model) = common::smollm2("rayo gguf on SmolLM2") else { return };
    let model = model.to_str().unwrap();
    let o = rayo(&["gguf", model, "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert_eq!(out.lines().count(), 1, "one JSON object on one line");
    let reference = include_str!("../../rayo/tests/data/smollm2-q4_1.gguf.tsv");
    let mut tensors = 0;
    for l in reference.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        match f[0] {
            "tensor" => {
                let t = format!("{{\"name\":\"{}\",\"type\":\"{}\",\"shape\":[{}],\"offset\":{},\"bytes\":{}}}", f[1], f[2], f[3], f[4], f[5]);
                assert!(out.contains(&t), "{t} not in the JSON");
                tensors += 1;
            }
            "version" | "alignment" | "data_offset" => assert!(out.contains(&format!("\"{}\":{}", f[0], f[1])), "{l}"),
            // Scalars the reference spells as JSON does (strings quoted, integers).
            "meta" if matches!(f[2], "string" | "u32" | "bool") => {
                assert!(out.contains(&format!("\"{}\":{}", f[1], f[3])), "{l}");
            }
            _ => {}
        }
    }
    assert_eq!(tensors, 272);
    assert_eq!(out.matches("\"name\":").count(), 272);
    // The tokens in full, not summarized: 49152 strings.
    let tokens = out.split("\"tokenizer.ggml.tokens\":[").nth(1).unwrap().split("],\"tokenizer.ggml.token_type\"").next().unwrap();
    assert!(tokens.starts_with("\"<|endoftext|>\",\"<|im_start|>\"") && tokens.ends_with("\"ectable\""), "{}", &tokens[..80]);
    let o = rayo(&["gguf", model]);
    let out = text(&o.stdout);
    assert!(o.status.success() && out.contains("[string; 49152]") && out.contains("... 49146 more"), "{out}");
    let q4_1 = out.lines().find(|l| l.trim_start().starts_with("Q4_1 ")).unwrap();
    assert_eq!(q4_1.split_whitespace().collect::<Vec<_>>(), ["Q4_1", "210", "tensors", "66355200", "bytes"]);
    closed_stdout(&["gguf", model]);
    closed_stdout(&["gguf", model, "--json"]);
}
