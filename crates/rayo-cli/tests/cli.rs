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
    for sub in ["info", "bench", "ptx", "gguf"] {
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
