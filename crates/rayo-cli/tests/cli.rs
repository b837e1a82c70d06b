//! The `rayo` binary as a user runs it: usage errors, help, and a closed stdout.

use std::process::{Command, Output, Stdio};

fn rayo(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rayo")).args(args).env("RAYO_FORCE_CPU", "1").output().expect("run rayo")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_values_are_usage_errors_not_panics() {
    for (args, needle) in [
        (&["bench", "--threads", "0"][..], "at least 1 thread"),
        (&["bench", "--size", "0"][..], "at least 1"),
        (&["bench", "--size", "1e30"][..], "larger than"),
        (&["bench", "--backend", "metal"][..], "unknown backend"),
        (&["bench", "--bogus"][..], "--bogus"),
        (&["ptx"][..], "--out"),
        (&["frobnicate"][..], "frobnicate"),
    ] {
        let o = rayo(args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(needle) && !e.contains("panicked"), "{args:?}: {e}");
    }
}

#[test]
fn an_unknown_op_lists_the_known_ones() {
    let o = rayo(&["bench", "--backend", "cpu", "--op", "nosuchop"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("nosuchop") && e.contains("cpu: ") && e.contains("softmax"), "{e}");
}

#[test]
fn help_per_subcommand_and_version() {
    for sub in ["info", "bench", "ptx", "gguf", "serve"] {
        let o = rayo(&[sub, "--help"]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && out.contains(&format!("Usage: rayo {sub}")), "{sub}: {out}");
    }
    let o = rayo(&["--version"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), format!("rayo {}", env!("CARGO_PKG_VERSION")));
}

/// `rayo ... | head -0`: the reader is gone before rayo writes; rayo ends quietly with status 0.
fn closed_stdout(args: &[&str]) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rayo"))
        .args(args)
        .env("RAYO_FORCE_CPU", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rayo");
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let e = stderr(&o);
    assert!(o.status.success() && !e.contains("panicked"), "{args:?}: {:?} {e}", o.status);
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    closed_stdout(&["bench", "--backend", "cpu", "--op", "add", "--op", "sum", "--size", "1000", "--quick"]);
    closed_stdout(&["bench", "--backend", "cpu", "--op", "add", "--size", "1000", "--quick", "--json"]);
    closed_stdout(&["info"]);
    closed_stdout(&["bench", "--op", "list"]);
}

#[test]
fn a_quick_cpu_row() {
    let o = rayo(&["bench", "--backend", "scalar", "--op", "add", "--size", "1K", "--quick", "--json"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.starts_with("{\"op\":\"add\",\"n\":1000,\"backend\":\"scalar\""), "{out}");
}

/// A directory of this test process's own, removed when dropped.
struct TempDir(std::path::PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("rayo-cli-{tag}-{}", std::process::id()));
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

/// Every command that reads a GGUF file, given `f` where the file goes.
fn file_commands(f: &str, out: &str) -> Vec<Vec<String>> {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        v(&["generate", "--model", f, "--prompt", "hi"]),
        v(&["chat", "--model", f]),
        v(&["bench", "--model", f]),
        v(&["tokenize", "--model", f, "--text", "hi"]),
        v(&["serve", "--model", f, "--port", "0"]),
        v(&["gguf", f]),
        v(&["gguf", f, "--json"]),
        v(&["quantize", f, out, "Q8_0"]),
        v(&["synth", out, "--shape", "tiny", "--tokenizer", f]),
    ]
}

/// A missing file, a directory and a file that is not GGUF: each command says which, with the
/// path once, in words (no `os error`), what to do, status 1, nothing on stdout, no output file.
#[test]
fn a_missing_a_directory_or_a_non_gguf_file_is_one_clear_error() {
    let dir = TempDir::new("files");
    let missing = dir.path("missing.gguf");
    let folder = dir.path("folder.gguf");
    std::fs::create_dir_all(&folder).unwrap();
    let text = dir.path("README.md");
    std::fs::write(&text, "# a text file\n").unwrap();
    let out = dir.path("out.gguf");
    for (f, want) in [
        (&missing, format!("cannot open model file {missing}: no such file")),
        (&folder, format!("{folder} is a directory, not a GGUF file: give the path of a .gguf file")),
        (&text, format!("{text} is not a GGUF file (it starts with \"# a text file\\n\", a GGUF file with \"GGUF\")")),
    ] {
        for args in file_commands(f, &out) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = rayo(&args);
            let e = stderr(&o);
            let want = if args[0] == "gguf" { want.replace("model file", "GGUF file") } else { want.clone() };
            let want = if args[0] == "synth" { want.replace("model file", "tokenizer file") } else { want };
            assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
            assert!(e.starts_with(&format!("rayo: {want}")), "{args:?}:\n{e}\nwanted: {want}");
            assert_eq!(e.matches(f.as_str()).count(), 1, "{args:?}: the path once: {e}");
            assert_eq!(e.lines().count(), 1, "{args:?}: {e}");
            assert!(!e.contains("os error") && !e.contains("panicked"), "{args:?}: {e}");
            assert!(o.stdout.is_empty() || args[0] == "chat", "{args:?}: {}", String::from_utf8_lossy(&o.stdout));
            assert!(!std::path::Path::new(&out).exists(), "{args:?} wrote {out}");
        }
    }
    // Model commands say where a model comes from.
    let e = stderr(&rayo(&["generate", "--model", &missing, "--prompt", "hi"]));
    assert!(e.contains("scripts/fetch-smollm2.sh"), "{e}");
}

/// `--temperature -1` reaches the sampler's own check (the flag, the value, the range), not
/// clap's "unexpected argument '-1'"; checked before the model is opened.
#[test]
fn negative_numbers_reach_the_value_checks() {
    for (flag, value, needle) in [
        ("--temperature", "-1", "temperature = -1: must be finite and >= 0"),
        ("--top-p", "-0.5", "top_p = -0.5: must be in (0, 1]"),
        ("--min-p", "-1", "min_p = -1: must be in [0, 1]"),
        ("--repeat-penalty", "-2", "repeat_penalty = -2: must be finite and > 0"),
    ] {
        for cmd in ["generate", "chat"] {
            let mut args = vec![cmd, "--model", "/nonexistent/model.gguf", flag, value];
            if cmd == "generate" {
                args.extend(["--prompt", "hi"]);
            }
            let o = rayo(&args);
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
            assert!(e.contains(needle) && !e.contains("unexpected argument"), "{args:?}: {e}");
        }
    }
    // Whole numbers: the value's own message, as a usage error.
    for (args, needle) in [
        (&["bench", "--threads", "-1"][..], "not a whole number"),
        (&["bench", "--size", "-5"][..], "at least 1"),
        (&["generate", "--model", "m.gguf", "--prompt", "hi", "--ctx", "-1"][..], "not a whole number"),
        (&["generate", "--model", "m.gguf", "--prompt", "hi", "--max-tokens", "-3"][..], "'--max-tokens <N>'"),
    ] {
        let o = rayo(args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(needle) && !e.contains("unexpected argument"), "{args:?}: {e}");
    }
}

/// With XDG_RUNTIME_DIR unset (a container, a CI job), probing wgpu loads Mesa, whose Wayland
/// code would print `error: XDG_RUNTIME_DIR is invalid or not set` once per probe; rayo gives
/// it a private directory first. (Where Mesa is not installed there is nothing to print and
/// this passes trivially; scripts/test.sh installs it.)
#[test]
fn no_xdg_runtime_dir_lines_from_the_gpu_loaders() {
    for args in [&["info"][..], &["bench", "--op", "add", "--size", "1K", "--quick"][..]] {
        let o = Command::new(env!("CARGO_BIN_EXE_rayo")).args(args).env_remove("XDG_RUNTIME_DIR").env_remove("RAYO_FORCE_CPU").output().unwrap();
        let e = stderr(&o);
        assert!(o.status.success(), "{args:?}: {e}");
        assert!(!e.contains("XDG_RUNTIME_DIR"), "{args:?}: {e}");
    }
}

/// `rayo bench --json`: one object per line, each one valid JSON with the fields in order.
#[test]
fn bench_json_rows_are_json() {
    let o = rayo(&["bench", "--backend", "scalar", "--op", "add", "--op", "matmul", "--size", "1K", "--size", "64", "--quick", "--json"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.lines().count() >= 2, "{out}");
    for l in out.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
        assert!(v["op"].is_string() && v["n"].is_u64() && v["backend"] == "scalar" && v["ns"].as_f64().is_some_and(|ns| ns > 0.0), "{l}");
        assert!(l.starts_with("{\"op\":") && (l.contains("\"gbps\":") || l.contains("\"gflops\":")), "{l}");
    }
    assert!(out.lines().any(|l| l.contains("\"m\":64,\"k\":64,\"n_cols\":64")), "{out}");
}
