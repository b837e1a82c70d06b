//! Quantized-product rows of `rayo bench`: `read` (a STREAM-like sum of a 256 MiB array, the
//! memory's read bandwidth), `qmatvec_<FMT>` (an n×n weight matrix times a vector, GB/s of
//! weight bytes read from DRAM — the calls cycle through 256 MiB of copies — with the ratio to
//! `read` of the same backend and threads when both ran),
//! `qmatvecr_<FMT>` (the same with the weights repacked as the CPU engine decodes with them,
//! where rayo has a kernel for the format and ISA: [`quant::Repacked`]),
//! `qmatmul_<FMT>` (64 activation rows against n×n weights, GFLOP/s) and `matmul_m64` (the
//! same shape as an f32 GEMM). n defaults to 4096.

use super::row::Row;
use super::timer::{median_ns, Plan};
use rayo::quant::{self, GgmlType, QuantMatrix};
use rayo::{Backend, Par};
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Mutex;

/// Activation rows of the `qmatmul_*` and `matmul_m64` rows (a prompt's tile).
const M: usize = 64;
/// f32 values summed by `read`: 256 MiB, far beyond any L3.
const READ_N: usize = 64 << 20;

/// `read`'s GB/s per (backend, threads), for the ratio on the `qmatvec_*` rows.
static READ: Mutex<Option<HashMap<(Backend, usize), f64>>> = Mutex::new(None);

/// Every op of this file.
pub fn ops() -> Vec<String> {
    let mut v = vec!["read".to_string(), "matmul_m64".to_string()];
    for kind in ["qmatvec", "qmatvecr", "qmatmul"] {
        v.extend(GgmlType::ALL.iter().map(|t| format!("{kind}_{}", t.name())));
    }
    v
}

pub fn has(op: &str) -> bool {
    op == "read" || op == "matmul_m64" || parse(op).is_some()
}

/// `n` when none is given: 64 Mi values for `read`, n×n = 4096² weights otherwise.
pub fn default_size(op: &str) -> usize {
    if op == "read" {
        READ_N
    } else {
        4096
    }
}

/// (a matrix–matrix row, repacked weights, the format) of a quantized-product op.
fn parse(op: &str) -> Option<(bool, bool, GgmlType)> {
    let (kind, fmt) = op.split_once('_')?;
    let ty = GgmlType::from_name(fmt)?;
    match kind {
        "qmatvec" => Some((false, false, ty)),
        "qmatvecr" => Some((false, true, ty)),
        "qmatmul" => Some((true, false, ty)),
        _ => None,
    }
}

fn data(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919 + seed) % 1000) as f32 / 500.0 - 1.0).collect()
}

/// An n×n weight matrix of `ty`: 64 distinct quantized rows, repeated (the reference k-quant
/// quantizers are too slow to quantize 16M values for a benchmark; the bytes read are the same).
fn weights(ty: GgmlType, n: usize) -> Option<Vec<u8>> {
    let distinct = 64.min(n);
    let rows: Vec<Vec<u8>> = (0..distinct).map(|r| quant::quantize_to_vec(ty, &data(n, r * 31))).collect::<Result<_, _>>().ok()?;
    let mut bytes = Vec::with_capacity(rows[0].len() * n);
    for r in 0..n {
        bytes.extend_from_slice(&rows[r % distinct]);
    }
    Some(bytes)
}

pub fn run(op: &str, n: usize, backend: Backend, threads: usize, plan: Plan) -> Option<Row> {
    let prev = rayo::set_max_threads(threads);
    let par = Par::threads(threads);
    let row =
        |mkn, ns: f64, gbps, gflops, note| Row { op: op.to_string(), n, mkn, backend: backend.name().to_string(), threads, ns, gbps, gflops, note };
    let out = match op {
        "read" => {
            let a = data(n, 0);
            let ns = median_ns(plan, || {
                let _ = black_box(rayo::slice::reduce(backend, rayo::ops::ReduceOp::Sum, black_box(&a), None));
            });
            let gbps = (4 * n) as f64 / ns;
            READ.lock().unwrap().get_or_insert_with(HashMap::new).insert((backend, threads), gbps);
            Some(row(None, ns, Some(gbps), None, None))
        }
        "matmul_m64" => {
            let a = rayo::Matrix::from_vec(M, n, data(M * n, 1)).ok()?;
            let b = rayo::Matrix::from_vec(n, n, data(n * n, 2)).ok()?;
            let mut c = rayo::Matrix::zeros(M, n).ok()?;
            let ns = median_ns(plan, || {
                let _ = black_box(rayo::gemm_par(backend, par, 1.0, a.view(), b.view(), 0.0, c.view_mut()));
            });
            Some(row(Some((M, n, n)), ns, None, Some(2.0 * (M * n * n) as f64 / ns), None))
        }
        _ => {
            let (is_mm, repack, ty) = parse(op)?;
            let bytes = weights(ty, n)?;
            // A decode step reads weights no cache holds (a model is larger than any L3): the
            // matrix-vector rows cycle through copies of the weights that add up to `read`'s
            // 256 MiB, so each call reads its matrix from DRAM, as `read` does.
            let copies = if is_mm { 1 } else { (4 * READ_N).div_ceil(bytes.len()).max(1) };
            let stored: Vec<Vec<u8>> = (0..copies).map(|_| bytes.clone()).collect();
            let ws: Vec<QuantMatrix> = stored.iter().map(|b| QuantMatrix::new(ty, n, n, b)).collect::<Result<_, _>>().ok()?;
            // (None where rayo has no repacked kernel for this format and ISA: no row.)
            let repacked: Vec<quant::Repacked> =
                if repack { ws.iter().map(|w| quant::Repacked::new(backend, w)).collect::<Option<_>>()? } else { Vec::new() };
            let ws: Vec<QuantMatrix> =
                if repack { ws.iter().zip(&repacked).map(|(w, r)| w.with_repacked(r)).collect::<Result<_, _>>().ok()? } else { ws };
            let m = if is_mm { M } else { 1 };
            let x = data(m * n, 3);
            let mut y = vec![0f32; m * n];
            let act = quant::Activations::Quantized;
            let mut k = 0;
            let ns = median_ns(plan, || {
                let _ = black_box(quant::matmul_with(backend, act, &ws[k % copies], &x, &mut y, par));
                k += 1;
            });
            let gbps = bytes.len() as f64 / ns;
            let flops = 2.0 * (m * n * n) as f64 / ns;
            if is_mm {
                Some(row(Some((m, n, n)), ns, None, Some(flops), None))
            } else {
                let read = READ.lock().unwrap().as_ref().and_then(|r| r.get(&(backend, threads)).copied());
                let note = read.map(|r| format!("{:.2}x read", gbps / r));
                Some(row(Some((1, n, n)), ns, Some(gbps), None, note))
            }
        }
    };
    rayo::set_max_threads(prev);
    out
}
