//! CPU rows of `rayo bench`: every vector op, plus STREAM copy and triad as the ceiling.

use super::row::Row;
use super::timer::{median_ns, Plan};
use rayo::ops::{BinaryOp, ReduceOp, UnaryOp};
use rayo::{slice, Backend, Vector};
use std::hint::black_box;

/// Rows that are not ops of the registry: the STREAM ceiling, the allocating form, argmax and
/// the softmaxes.
const EXTRA: &[&str] = &["stream_copy", "stream_triad", "add_alloc", "argmax", "softmax", "log_softmax"];

/// Every CPU op `rayo bench` knows: the registry's element-wise ops and reductions, and the
/// extra rows.
pub fn ops() -> Vec<&'static str> {
    let mut v = EXTRA[..3].to_vec();
    v.extend(BinaryOp::all().into_iter().map(BinaryOp::name));
    v.extend(ReduceOp::ALL.into_iter().map(ReduceOp::name));
    v.extend(UnaryOp::all().into_iter().map(UnaryOp::name));
    v.extend(&EXTRA[3..]);
    v
}

/// Bytes one call moves through memory (for GB/s): inputs read + outputs written.
fn bytes(op: &str, n: usize) -> f64 {
    let per = if let Some(r) = ReduceOp::from_name(op) {
        4 * r.arity()
    } else if BinaryOp::from_name(op).is_some() || matches!(op, "add_alloc" | "stream_triad") {
        12
    } else if op == "argmax" {
        4
    } else {
        8
    };
    (per * n) as f64
}

pub fn run(op: &str, n: usize, backend: Backend, threads: usize, plan: Plan) -> Option<Row> {
    let a: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0).collect();
    let b: Vec<f32> = (0..n).map(|i| ((i * 104_729) % 1000) as f32 / 250.0 + 0.5).collect();
    let mut out = vec![0.0f32; n];
    let va = Vector::with_backend(&a, backend).ok()?;
    let vb = Vector::with_backend(&b, backend).ok()?;
    let prev = rayo::set_max_threads(threads);
    let bk = backend;
    let ns = {
        let (a, b, o) = (&a[..], &b[..], &mut out[..]);
        macro_rules! t {
            ($e:expr) => {
                median_ns(plan, || {
                    let _ = black_box($e);
                })
            };
        }
        match op {
            "stream_copy" => t!(o.copy_from_slice(a)),
            "stream_triad" => t!(slice::axpy(bk, 3.0, b, a, o)),
            "add_alloc" => t!(va.add(&vb)),
            "argmax" => t!(slice::argmax(bk, a)),
            "softmax" => t!(slice::softmax(bk, a, o)),
            "log_softmax" => t!(slice::log_softmax(bk, a, o)),
            name => {
                if let Some(u) = UnaryOp::from_name(name) {
                    // sqrt and ln of positive inputs (b), the rest over [-5, 5) (a).
                    let x = if matches!(u, UnaryOp::Sqrt | UnaryOp::Ln) { b } else { a };
                    t!(slice::unary(bk, u, x, o))
                } else if let Some(op) = BinaryOp::from_name(name) {
                    t!(slice::binary(bk, op, a, b, o))
                } else if let Some(r) = ReduceOp::from_name(name) {
                    t!(slice::reduce(bk, r, a, (r.arity() == 2).then_some(b)))
                } else {
                    rayo::set_max_threads(prev);
                    return None;
                }
            }
        }
    };
    rayo::set_max_threads(prev);
    Some(Row {
        op: op.to_string(),
        n,
        mkn: None,
        backend: backend.name().to_string(),
        threads,
        ns,
        gbps: Some(bytes(op, n) / ns),
        gflops: None,
        note: None,
    })
}
