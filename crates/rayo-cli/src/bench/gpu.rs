//! wgpu rows of `rayo bench --backend wgpu`. Each op gets two rows: `roundtrip` (host slices in,
//! host slice out: upload, op, download, as a caller of the slice API pays) and `resident`
//! (data already on the GPU: back-to-back submits, then one wait, per op).

use super::row::Row;
use super::timer::{median_ns, Plan};
use rayo::gpu::{BinaryOp, GpuBuffer, GpuDevice, ReduceOp, UnaryOp};
use std::hint::black_box;
use std::time::Instant;

pub const OPS: &[&str] = &[
    "add", "sub", "mul", "scale", "relu", "leaky_relu", "elu", "sigmoid", "tanh", "swish", "gelu", "clip", "softmax",
    "log_softmax", "dot", "sum", "max", "min", "matmul", "fused3", "unfused3",
];

/// Ops `rayo bench --backend wgpu` measures when none are named.
pub const DEFAULT_OPS: &[&str] = &["add", "relu", "gelu", "sum", "dot", "softmax", "fused3", "unfused3", "matmul"];

/// The three ops of the `fused3` / `unfused3` rows: tanh(relu(2x)).
const CHAIN: [UnaryOp; 3] = [UnaryOp::Scale(2.0), UnaryOp::Relu, UnaryOp::Tanh];

fn unary(op: &str) -> Option<UnaryOp> {
    Some(match op {
        "scale" => UnaryOp::Scale(1.5),
        "relu" => UnaryOp::Relu,
        "leaky_relu" => UnaryOp::LeakyRelu(0.01),
        "elu" => UnaryOp::Elu(1.0),
        "sigmoid" => UnaryOp::Sigmoid,
        "tanh" => UnaryOp::Tanh,
        "swish" => UnaryOp::Swish,
        "gelu" => UnaryOp::Gelu,
        "clip" => UnaryOp::Clip(-1.0, 1.0),
        _ => return None,
    })
}

fn binary(op: &str) -> Option<BinaryOp> {
    Some(match op {
        "add" => BinaryOp::Add,
        "sub" => BinaryOp::Sub,
        "mul" => BinaryOp::Mul,
        _ => return None,
    })
}

/// Bytes one call must move (inputs read once, outputs written once).
fn bytes(op: &str, n: usize) -> f64 {
    let per = match op {
        "sum" | "max" | "min" => 4,
        "dot" => 8,
        "add" | "sub" | "mul" => 12,
        _ => 8,
    };
    (per * n) as f64
}

/// Median time per call of `f` with the data on the device: `reps` calls, then one wait.
fn resident_ns(plan: Plan, dev: &GpuDevice, mut f: impl FnMut() -> rayo::Result<()>) -> Result<f64, String> {
    let e = |e: rayo::Error| e.to_string();
    f().map_err(e)?;
    dev.synchronize().map_err(e)?;
    let t = Instant::now();
    f().map_err(e)?;
    dev.synchronize().map_err(e)?;
    let one = t.elapsed().as_secs_f64().max(1e-6);
    let reps = ((plan.sample.as_secs_f64() / one) as usize).clamp(1, 2000);
    let mut samples = Vec::with_capacity(plan.samples);
    for _ in 0..plan.samples {
        let t = Instant::now();
        for _ in 0..reps {
            f().map_err(e)?;
        }
        dev.synchronize().map_err(e)?;
        samples.push(t.elapsed().as_nanos() as f64 / reps as f64);
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    Ok(samples[samples.len() / 2])
}

fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919 + seed) % 1000) as f32 / 250.0 - 2.0).collect()
}

/// Runs every (op, size): two rows each. No adapter: one printed line, no rows.
pub fn run(ops: &[String], sizes: &[usize], plan: Plan, json: bool, emit: &dyn Fn(&Row)) -> Result<(), String> {
    let dev = match GpuDevice::new() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("rayo bench: wgpu: no adapter ({e}); skipping wgpu rows");
            return Ok(());
        }
    };
    let info = dev.adapter_info();
    let line = format!("wgpu adapter: {} ({}, {}, driver {})", info.name, info.backend, info.device_type, info.driver_info);
    if json {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
    let ops: Vec<String> = if ops.is_empty() { DEFAULT_OPS.iter().map(|s| s.to_string()).collect() } else { ops.to_vec() };
    for op in &ops {
        if !OPS.contains(&op.as_str()) {
            eprintln!("rayo bench: wgpu has no op {op:?}; known: {}", OPS.join(" "));
            continue;
        }
        let op_sizes: Vec<usize> = match (op.as_str(), sizes.is_empty()) {
            ("matmul", true) => vec![256, 1024, 4096],
            (_, true) => vec![1_000, 1_000_000, 100_000_000],
            _ => sizes.to_vec(),
        };
        for &n in &op_sizes {
            let len = if op == "matmul" { n * n } else { n };
            if len as u64 * 4 > dev.max_binding_bytes() {
                eprintln!(
                    "rayo bench: wgpu {op} n={n}: {} bytes exceed this adapter's storage-binding limit of {} bytes; skipped",
                    len as u64 * 4,
                    dev.max_binding_bytes()
                );
                continue;
            }
            for (note, ns) in measure(&dev, op, n, plan)? {
                let matmul = op == "matmul";
                emit(&Row {
                    op: op.clone(),
                    n,
                    mkn: matmul.then_some((n, n, n)),
                    backend: "wgpu".into(),
                    threads: 1,
                    ns,
                    gbps: (!matmul).then(|| bytes(op, n) / ns),
                    gflops: matmul.then(|| 2.0 * (n as f64).powi(3) / ns),
                    note: Some(note.into()),
                });
            }
        }
    }
    Ok(())
}

/// (note, median ns) rows for one op and size.
fn measure(dev: &GpuDevice, op: &str, n: usize, plan: Plan) -> Result<Vec<(&'static str, f64)>, String> {
    let e = |e: rayo::Error| format!("wgpu {op} n={n}: {e}");
    let len = if op == "matmul" { n * n } else { n };
    let (a, b) = (data(len, 1), data(len, 2));
    let mut out = vec![0.0f32; len];
    let up = |v: &[f32]| dev.upload(v).map_err(e);
    let (ga, gb): (GpuBuffer, GpuBuffer) = (up(&a)?, up(&b)?);
    let mut gout = dev.zeros(len).map_err(e)?;
    let mut gtmp = dev.zeros(len).map_err(e)?;
    let mut rows = Vec::new();
    // Round trip: one synchronous host call per iteration.
    let mut err = None;
    let mut rt = |f: &mut dyn FnMut() -> rayo::Result<()>| {
        median_ns(plan, || {
            if let Err(x) = f() {
                err.get_or_insert(x);
            }
        })
    };
    let roundtrip = if let Some(u) = unary(op) {
        Some(rt(&mut || dev.unary(u, &a, &mut out)))
    } else if let Some(bo) = binary(op) {
        Some(rt(&mut || dev.binary(bo, &a, &b, &mut out)))
    } else {
        match op {
            "softmax" => Some(rt(&mut || dev.softmax(&a, &mut out))),
            "log_softmax" => Some(rt(&mut || dev.log_softmax(&a, &mut out))),
            "dot" => Some(rt(&mut || dev.dot(&a, &b).map(|v| {
                black_box(v);
            }))),
            "sum" => Some(rt(&mut || dev.sum(&a).map(|v| {
                black_box(v);
            }))),
            "max" => Some(rt(&mut || dev.max(&a).map(|v| {
                black_box(v);
            }))),
            "min" => Some(rt(&mut || dev.min(&a).map(|v| {
                black_box(v);
            }))),
            "matmul" => Some(rt(&mut || dev.matmul(&a, &b, &mut out, n, n, n))),
            _ => None,
        }
    };
    if let Some(x) = err {
        return Err(e(x));
    }
    if let Some(ns) = roundtrip {
        rows.push(("roundtrip", ns));
    }
    let res = if let Some(u) = unary(op) {
        resident_ns(plan, dev, || dev.apply(u, &ga, &mut gout))?
    } else if let Some(bo) = binary(op) {
        resident_ns(plan, dev, || dev.apply_binary(bo, &ga, &gb, &mut gout))?
    } else {
        match op {
            "softmax" => resident_ns(plan, dev, || dev.softmax_resident(&ga, &mut gout))?,
            "log_softmax" => resident_ns(plan, dev, || dev.log_softmax_resident(&ga, &mut gout))?,
            "dot" => resident_ns(plan, dev, || dev.dot_resident(&ga, &gb).map(drop))?,
            "sum" => resident_ns(plan, dev, || dev.reduce_resident(ReduceOp::Sum, &ga, None).map(drop))?,
            "max" => resident_ns(plan, dev, || dev.reduce_resident(ReduceOp::Max, &ga, None).map(drop))?,
            "min" => resident_ns(plan, dev, || dev.reduce_resident(ReduceOp::Min, &ga, None).map(drop))?,
            "matmul" => resident_ns(plan, dev, || dev.matmul_resident(&ga, &gb, &mut gout, n, n, n))?,
            "fused3" => resident_ns(plan, dev, || dev.apply_fused(&CHAIN, &ga, &mut gout))?,
            "unfused3" => resident_ns(plan, dev, || {
                dev.apply(CHAIN[0], &ga, &mut gout)?;
                dev.apply(CHAIN[1], &gout, &mut gtmp)?;
                dev.apply(CHAIN[2], &gtmp, &mut gout)
            })?,
            _ => return Err(format!("wgpu: op {op} has no resident form")),
        }
    };
    rows.push(("resident", res));
    Ok(rows)
}
