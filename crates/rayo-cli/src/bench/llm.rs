//! `rayo bench --model FILE`: llama-bench's two rows for a model — `pp64`, a 64-token prompt in
//! one batch into an empty KV cache, and `tg64`, 64 tokens decoded one at a time from position
//! 0 (on CUDA `pp512` and `tg128`, the rows llama.cpp's CUDA figures use) — as tokens per second, the mean of several repetitions after a warm-up run (as
//! llama-bench does). Token ids are arbitrary (speed does not depend on them).

use crate::json::rounded;
use crate::llm::{open_model, Engine, Ranks};
use crate::out::{errln, outln};
use rayo_llm::SessionOptions;
use std::path::Path;
use std::time::Instant;

/// Tokens of each row: (prompt, generated).
fn rows(backend: &str) -> (usize, usize) {
    if backend == "cuda" {
        (512, 128)
    } else {
        (64, 64)
    }
}
/// Timed repetitions after the warm-up.
const REPS: usize = 5;

/// The rows for each thread count, printed as they are measured.
/// `ranks`: tensor-parallel ranks (each on the threads of a row; a world of processes
/// measures one thread count, as its other ranks make one engine).
pub fn run(model: &Path, backend: &str, threads: &[usize], ranks: &Ranks, json: bool) -> Result<(), String> {
    if matches!(ranks, Ranks::Host(_)) && threads.len() > 1 {
        return Err(format!("a world of processes measures one --threads value, not {}", threads.len()));
    }
    let world = ranks.world();
    let m = open_model(model)?;
    let name = model.file_name().map_or_else(|| model.display().to_string(), |n| n.to_string_lossy().into_owned());
    let size = m.file().as_bytes().len();
    if !json {
        outln!(
            "model {name} ({}): {:.1} MB file, {:.1} MB of matrices read per token",
            m.config().arch.name,
            size as f64 / 1e6,
            m.weights().bytes_per_token() as f64 / 1e6
        );
        outln!("{:<6} {:<8} {:>7} {:>12} {:>10}", "op", "backend", "threads", "tokens/s", "ms");
    }
    let threads = if threads.is_empty() { vec![1] } else { threads.to_vec() };
    let (pp_n, tg_n) = rows(backend);
    let (pp_op, tg_op) = (format!("pp{pp_n}"), format!("tg{tg_n}"));
    for &t in &threads {
        let opts = SessionOptions { context: pp_n.max(tg_n), ..SessionOptions::default() };
        let mut engine = Engine::with_options(&m, backend, t, opts, false, ranks)?;
        let vocab = m.config().vocab_size as u32;
        let tokens: Vec<u32> = (0..pp_n.max(tg_n) as u32).map(|i| (i * 7919 + 13) % vocab).collect();
        let mut pp = || -> Result<f64, String> {
            engine.rewind(0);
            let t0 = Instant::now();
            engine.forward_last(&tokens[..pp_n])?;
            Ok(t0.elapsed().as_secs_f64())
        };
        pp()?;
        let pp_s = (0..REPS).map(|_| pp()).sum::<Result<f64, String>>()? / REPS as f64;
        report(json, &name, &pp_op, (backend, world), t, pp_n, pp_s);
        let mut tg = || -> Result<f64, String> {
            engine.rewind(0);
            let t0 = Instant::now();
            for &tok in tokens.iter().take(tg_n) {
                engine.forward_last(&[tok])?;
            }
            Ok(t0.elapsed().as_secs_f64())
        };
        tg()?;
        let tg_s = (0..REPS).map(|_| tg()).sum::<Result<f64, String>>()? / REPS as f64;
        report(json, &name, &tg_op, (backend, world), t, tg_n, tg_s);
        if engine.forward().step_ops() > 0 {
            errln!("rayo bench: {backend}: each decoded token is one graph replay of {} kernel launches and copies", engine.forward().step_ops());
        }
    }
    Ok(())
}

/// `ranks`: tensor-parallel ranks (1: the whole model on one backend).
fn report(json: bool, model: &str, op: &str, (backend, ranks): (&str, usize), threads: usize, tokens: usize, seconds: f64) {
    let tps = tokens as f64 / seconds;
    if json {
        /// One row of `rayo bench --model FILE --json`.
        #[derive(serde::Serialize)]
        struct Json<'a> {
            op: &'a str,
            /// The file's name.
            model: &'a str,
            backend: &'a str,
            threads: usize,
            /// Tensor-parallel ranks, each on `threads` threads.
            ranks: usize,
            tokens: usize,
            ns: f64,
            tokens_per_s: f64,
        }
        let row = Json { op, model, backend, threads, ranks, tokens, ns: rounded(seconds * 1e9, 1), tokens_per_s: rounded(tps, 3) };
        outln!("{}", crate::json::line(&row));
    } else {
        let backend = if ranks > 1 { format!("{backend}/tp{ranks}") } else { backend.to_string() };
        outln!("{op:<6} {backend:<8} {threads:>7} {tps:>12.1} {:>10.2}", seconds * 1e3);
    }
    log_rss();
}

/// Resident memory after a row, on stderr where /proc says it (Linux).
fn log_rss() {
    if let Some(kb) = crate::llm::resident_kb() {
        errln!("rayo bench: resident memory {:.1} MB", kb as f64 / 1e3);
    }
}
