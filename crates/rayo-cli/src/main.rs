//! `rayo`: what this machine has (`rayo info`), how fast each backend is (`rayo bench`), the
//! PTX rayo generates (`rayo ptx`), what a GGUF model file holds (`rayo gguf`), and a model
//! rewritten in another format (`rayo quantize`), and a language model run on rayo's kernels
//! (`rayo generate`, `rayo chat`, `rayo tokenize`, `rayo perplexity`, `rayo bench --model`), served over HTTP
//! (`rayo serve`). `rayo --help`, `rayo <command> --help` for the flags.

mod args;
mod bench;
mod gguf;
mod info;
mod input;
mod json;
mod llm;
mod local_ranks;
mod out;
mod perplexity;
mod ptx;
mod quantize;
mod serve;
mod synth;

use args::{Cli, Command};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // The library's `log::warn!`/`log::info!` (a fallback taken, a setting ignored) on stderr;
    // RUST_LOG picks the level (`RUST_LOG=info`, `RUST_LOG=rayo_llm=debug`), warn by default
    // (and info for the server's one line per request).
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn,rayo_serve=info")).init();
    // Before any thread starts (setting the environment is only sound while there is one).
    private_runtime_dir();
    no_multicast();
    // Usage errors (a bad flag or value) print clap's message and exit with status 2;
    // `--help` and `--version` exit with 0.
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info => info::run(),
        Command::Bench(a) => bench::run(&a),
        Command::Ptx(a) => ptx::run(&a),
        Command::Gguf(a) => gguf::run(&a),
        Command::Quantize(a) => quantize::run(&a),
        Command::Generate(a) => llm::generate(&a),
        Command::Chat(a) => llm::chat(&a),
        Command::Tokenize(a) => llm::tokenize(&a),
        Command::Perplexity(a) => perplexity::run(&a),
        Command::Serve(a) => serve::run(&a),
        Command::Synth(a) => synth::run(&a),
    };
    // the tensor-parallel ranks this process started, if any
    local_ranks::reap(result.is_ok());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            out::errln!("rayo: {e}");
            ExitCode::FAILURE
        }
    }
}

/// NVLink multicast stays off in this process and in every process it starts (the ranks of
/// `--tensor-parallel`, NCCL's): on a shared host it can take GPUs out of service for a long
/// time. NCCL, PyTorch's symmetric memory and NVSHMEM each read their own switch; a value
/// that would turn it on is replaced, with a warning.
fn no_multicast() {
    for (var, off) in MULTICAST_OFF {
        match std::env::var(var) {
            Ok(v) if v == off => {}
            Ok(v) => {
                log::warn!("{var}={v} would let NVLink multicast on; rayo sets {var}={off}");
                std::env::set_var(var, off);
            }
            Err(_) => std::env::set_var(var, off),
        }
    }
}

/// The variables that keep NVLink multicast off, and their values.
const MULTICAST_OFF: [(&str, &str); 3] = [("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")];

/// Sets XDG_RUNTIME_DIR to a private directory when it is unset (a container, a CI job, `su`).
///
/// Probing for wgpu adapters loads Mesa (lavapipe, EGL), whose Wayland code calls
/// `wl_display_connect`; with XDG_RUNTIME_DIR unset libwayland-client prints
/// `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` on stderr, once per probe
/// (four lines for `rayo info`), though nothing is wrong and the Vulkan adapter is found. A
/// directory of ours (mode 0700, `$TMPDIR/rayo-runtime-<uid>`, kept for the next run) gives it
/// a value and no Wayland display to find. Where that directory cannot be made safely (it
/// exists and is not ours), the variable is left unset and the harmless lines stay.
#[cfg(unix)]
fn private_runtime_dir() {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    if std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|v| !v.is_empty()) {
        return;
    }
    let Ok(uid) = std::fs::metadata("/proc/self").map(|m| m.uid()) else { return };
    let dir = std::env::temp_dir().join(format!("rayo-runtime-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    // Not a symlink, a directory, ours, and closed to others.
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0 => std::env::set_var("XDG_RUNTIME_DIR", &dir),
        _ => log::debug!("XDG_RUNTIME_DIR is unset and {} is not a private directory of ours: left unset", dir.display()),
    }
}

#[cfg(not(unix))]
fn private_runtime_dir() {}
