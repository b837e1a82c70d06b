//! wgpu rows of `rayo bench --backend wgpu`. Each op gets two rows: `roundtrip` (host slices in,
//! host slice out: upload, op, download, as a caller of the slice API pays) and `resident`
//! (data already on the GPU: back-to-back submits, then one wait, per op).

use super::row::Row;
use super::timer::{median_ns, Plan};
use crate::out::errln;
use rayo::gpu::{BinaryOp, GpuBuffer, GpuDevice, ReduceOp, UnaryOp};
use std::hint::black_box;
use std::time::Instant;

/// Rows that are not ops of the registry.
const EXTRA: &[&str] = &["softmax", "log_softmax", "matmul", "fused3", "unfused3"];

/// Every op `rayo bench --backend wgpu` knows: the registry's element-wise ops and reductions
/// (`rayo::ops`), and the extra rows.
pub fn ops() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = BinaryOp::all().into_iter().map(BinaryOp::name).collect();
    v.extend(UnaryOp::all().into_iter().map(UnaryOp::name));
    v.extend(ReduceOp::ALL.into_iter().map(ReduceOp::name));
    v.extend(EXTRA);
    v
}

/// Ops `rayo bench --backend wgpu` measures when none are named.
pub const DEFAULT_OPS: &[&str] = &["add", "relu", "gelu", "sum", "dot", "softmax", "fused3", "unfused3", "matmul"];

/// The three ops of the `fused3` / `unfused3` rows: tanh(relu(2x)).
const CHAIN: [UnaryOp; 3] = [UnaryOp::Scale(2.0), UnaryOp::Relu, UnaryOp::Tanh];

fn unary(op: &str) -> Option<UnaryOp> {
    UnaryOp::from_name(op)
}

fn binary(op: &str) -> Option<BinaryOp> {
    BinaryOp::from_name(op)
}

/// Bytes one call must move (inputs read once, outputs written once).
fn bytes(op: &str, n: usize) -> f64 {
    let per = if let Some(r) = ReduceOp::from_name(op) {
        4 * r.arity()
    } else if binary(op).is_some() {
        12
    } else {
        8
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
    for _ in 0..plan.samples_after(std::time::Duration::from_secs_f64(one)) {
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

/// The wgpu device of a benchmark run, and whether its adapter is a software one.
pub struct Wgpu {
    dev: GpuDevice,
    software: bool,
}

impl Wgpu {
    /// The shared device, or why there is none.
    pub fn open() -> Result<Wgpu, String> {
        let dev = GpuDevice::new().map_err(|e| e.to_string())?;
        // wgpu's DeviceType::Cpu: lavapipe, llvmpipe, SwiftShader, WARP.
        let software = dev.adapter_info().device_type == "cpu";
        Ok(Wgpu { dev, software })
    }

    /// The label of its rows: `wgpu`, or `wgpu-sw` on a software adapter.
    pub fn label(&self) -> &'static str {
        if self.software {
            "wgpu-sw"
        } else {
            "wgpu"
        }
    }

    /// One line naming the adapter (and saying so when it is software).
    pub fn heading(&self) -> String {
        let info = self.dev.adapter_info();
        let mut line = format!("{}: {} ({}, {}, driver {})", self.label(), info.name, info.backend, info.device_type, info.driver_info);
        if self.software {
            line += " -- a software adapter: it runs on this CPU, its times say nothing about a GPU";
        }
        line
    }

    pub fn has(&self, op: &str) -> bool {
        ops().contains(&op)
    }

    /// Sizes when none are given; `--quick` keeps a software adapter to seconds.
    pub fn default_sizes(&self, op: &str, quick: bool) -> Vec<usize> {
        match (op, quick) {
            ("matmul", false) => vec![256, 1024, 4096],
            ("matmul", true) => vec![256, 1024],
            (_, false) => vec![1_000, 1_000_000, 100_000_000],
            (_, true) => vec![1_000, 1_000_000],
        }
    }

    /// Two rows (roundtrip, resident) for one op and size; none, with a printed line, when the
    /// data exceed the adapter's storage-binding limit.
    pub fn rows(&self, op: &str, n: usize, plan: Plan) -> Result<Vec<Row>, String> {
        let dev = &self.dev;
        let matmul = op == "matmul";
        let len = if matmul { n.checked_mul(n) } else { Some(n) };
        let bytes_needed = len.and_then(|l| l.checked_mul(4)).map_or(u64::MAX, |b| b as u64);
        if bytes_needed > dev.max_binding_bytes() {
            errln!(
                "rayo bench: skip {} {op} n={n}: {bytes_needed} bytes exceed this adapter's storage-binding limit of {} bytes",
                self.label(),
                dev.max_binding_bytes()
            );
            return Ok(vec![]);
        }
        Ok(measure(dev, op, n, plan)?
            .into_iter()
            .map(|(note, ns)| Row {
                op: op.to_string(),
                n,
                mkn: matmul.then_some((n, n, n)),
                backend: self.label().into(),
                threads: 1,
                ns,
                gbps: (!matmul).then(|| bytes(op, n) / ns),
                gflops: matmul.then(|| 2.0 * (n as f64).powi(3) / ns),
                note: Some(note.into()),
            })
            .collect())
    }
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
    } else if let Some(r) = ReduceOp::from_name(op) {
        let y = (r.arity() == 2).then_some(&b[..]);
        Some(rt(&mut || {
            dev.reduce(r, &a, y).map(|v| {
                black_box(v);
            })
        }))
    } else {
        match op {
            "softmax" => Some(rt(&mut || dev.softmax(&a, &mut out))),
            "log_softmax" => Some(rt(&mut || dev.log_softmax(&a, &mut out))),
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
    } else if let Some(r) = ReduceOp::from_name(op) {
        let y = (r.arity() == 2).then_some(&gb);
        resident_ns(plan, dev, || dev.reduce_resident(r, &ga, y).map(drop))?
    } else {
        match op {
            "softmax" => resident_ns(plan, dev, || dev.softmax_resident(&ga, &mut gout))?,
            "log_softmax" => resident_ns(plan, dev, || dev.log_softmax_resident(&ga, &mut gout))?,
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
