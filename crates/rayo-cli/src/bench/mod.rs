//! `rayo bench`: a table (or JSON lines) of op × size × backend × threads, median times.

mod cpu;
#[cfg(feature = "gpu")]
mod gpu;
#[cfg(feature = "cuda")]
mod cuda;
mod matrix;
pub mod row;
mod timer;

use crate::args::BenchArgs;
use rayo::Backend;
use row::Row;
use timer::Plan;

/// What a bare `rayo bench` measures: the headline rows.
const DEFAULT_OPS: &[&str] =
    &["stream_copy", "stream_triad", "add", "add_alloc", "dot", "sum", "max", "sigmoid", "tanh", "gelu", "exp", "softmax", "matmul"];

pub fn run(args: &BenchArgs) -> Result<(), String> {
    let plan = if args.quick { Plan::QUICK } else { Plan::FULL };
    // `--backend wgpu`: the GPU rows (bench/gpu.rs); CPU backends named beside it run as usual.
    let cpu_backends: Vec<String> = args.backends.iter().filter(|b| b.as_str() != "wgpu").cloned().collect();
    if cpu_backends.len() != args.backends.len() {
        wgpu_rows(args, plan)?;
        if cpu_backends.is_empty() {
            return Ok(());
        }
    }
    if args.backends.iter().any(|b| b == "cuda") {
        #[cfg(feature = "cuda")]
        return cuda::run(args, plan, &|r: &Row| emit(r, args.json)).map(|()| ());
        #[cfg(not(feature = "cuda"))]
        return Err("backend cuda: this rayo was built without it (feature cuda of rayo-cli)".into());
    }
    let ops: Vec<String> = if args.ops.is_empty() { DEFAULT_OPS.iter().map(|s| s.to_string()).collect() } else { args.ops.clone() };
    for op in &ops {
        if !cpu::ops().contains(&op.as_str()) && !matrix::OPS.contains(&op.as_str()) {
            return Err(format!("unknown op {op:?}; known: {} {}", cpu::ops().join(" "), matrix::OPS.join(" ")));
        }
    }
    let sizes = if !args.sizes.is_empty() {
        args.sizes.clone()
    } else if args.quick {
        vec![100_000, 10_000_000]
    } else {
        vec![1_000, 100_000, 10_000_000]
    };
    let backends: Vec<Backend> = if args.backends.is_empty() {
        vec![Backend::selected()]
    } else {
        let mut v = Vec::new();
        for name in &cpu_backends {
            let b = Backend::from_name(name).ok_or_else(|| format!("unknown backend {name:?}"))?;
            if b.is_supported() {
                v.push(b);
            } else {
                eprintln!("rayo bench: skipping backend {b}: not supported by this CPU");
            }
        }
        v
    };
    let threads = if args.threads.is_empty() { vec![1] } else { args.threads.clone() };
    if !args.json {
        println!("{:<16} {:>16} {:>8} {:>7} {:>12} {:>14}", "op", "n", "backend", "threads", "median", "rate");
    }
    for op in &ops {
        let is_matrix = matrix::OPS.contains(&op.as_str());
        let op_sizes = if is_matrix && args.sizes.is_empty() { matrix::default_sizes(args.quick) } else { sizes.clone() };
        for &n in &op_sizes {
            for &b in &backends {
                for &t in &threads {
                    let rows = if is_matrix { matrix::run(op, n, b, t, plan) } else { cpu::run(op, n, b, t, plan).into_iter().collect() };
                    for row in rows {
                        emit(&row, args.json);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(feature = "gpu")]
fn wgpu_rows(args: &BenchArgs, plan: Plan) -> Result<(), String> {
    if !args.json {
        println!("{:<16} {:>16} {:>8} {:>7} {:>12} {:>14}", "op", "n", "backend", "threads", "median", "rate");
    }
    gpu::run(&args.ops, &args.sizes, plan, args.json, &|r| emit(r, args.json))
}

#[cfg(not(feature = "gpu"))]
fn wgpu_rows(_: &BenchArgs, _: Plan) -> Result<(), String> {
    eprintln!("rayo bench: this rayo was built without the wgpu backend (feature gpu)");
    Ok(())
}

fn emit(row: &Row, json: bool) {
    if json {
        println!("{}", row.to_json());
        return;
    }
    let rate = match (row.gbps, row.gflops) {
        (_, Some(g)) => format!("{g:.1} GFLOP/s"),
        (Some(g), _) => format!("{g:.1} GB/s"),
        _ => String::new(),
    };
    let n = match row.mkn {
        Some((m, k, n)) => format!("{m}x{k}x{n}"),
        None => row.n.to_string(),
    };
    let op = match &row.note {
        Some(note) => format!("{} ({note})", row.op),
        None => row.op.clone(),
    };
    println!("{:<16} {:>16} {:>8} {:>7} {:>12} {:>14}", op, n, row.backend, row.threads, fmt_ns(row.ns), rate);
}

fn fmt_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}
