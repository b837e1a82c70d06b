//! CPU rows of `rayo bench`: every vector op, plus STREAM copy and triad as the ceiling.

use super::row::Row;
use super::timer::{median_ns, Plan};
use rayo::{slice, Backend, Vector};
use std::hint::black_box;

/// Every CPU op `rayo bench` knows.
pub const OPS: &[&str] = &[
    "stream_copy", "stream_triad", "add", "sub", "mul", "div", "scale", "axpy", "add_alloc", "dot", "sum", "max", "min",
    "argmax", "norm_l1", "norm_l2", "relu", "leaky_relu", "elu", "selu", "sigmoid", "tanh", "swish", "gelu", "mish",
    "hardswish", "clip", "abs", "sqrt", "exp", "ln", "softmax", "log_softmax",
];

/// Bytes one call moves through memory (for GB/s): inputs read + outputs written.
fn bytes(op: &str, n: usize) -> f64 {
    let per = match op {
        "sum" | "max" | "min" | "argmax" | "norm_l1" | "norm_l2" => 4,
        "dot" => 8,
        "add" | "sub" | "mul" | "div" | "axpy" | "add_alloc" | "stream_triad" => 12,
        _ => 8,
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
            "add" => t!(slice::add(bk, a, b, o)),
            "sub" => t!(slice::sub(bk, a, b, o)),
            "mul" => t!(slice::mul(bk, a, b, o)),
            "div" => t!(slice::div(bk, a, b, o)),
            "scale" => t!(slice::scale(bk, a, 1.5, o)),
            "axpy" => t!(slice::axpy(bk, 1.5, a, b, o)),
            "add_alloc" => t!(va.add(&vb)),
            "dot" => t!(slice::dot(bk, a, b)),
            "sum" => t!(slice::sum(bk, a)),
            "max" => t!(slice::max(bk, a)),
            "min" => t!(slice::min(bk, a)),
            "argmax" => t!(slice::argmax(bk, a)),
            "norm_l1" => t!(slice::norm_l1(bk, a)),
            "norm_l2" => t!(slice::norm_l2(bk, a)),
            "relu" => t!(slice::relu(bk, a, o)),
            "leaky_relu" => t!(slice::leaky_relu(bk, a, 0.01, o)),
            "elu" => t!(slice::elu(bk, a, 1.0, o)),
            "selu" => t!(slice::selu(bk, a, o)),
            "sigmoid" => t!(slice::sigmoid(bk, a, o)),
            "tanh" => t!(slice::tanh(bk, a, o)),
            "swish" => t!(slice::swish(bk, a, o)),
            "gelu" => t!(slice::gelu(bk, a, o)),
            "mish" => t!(slice::mish(bk, a, o)),
            "hardswish" => t!(slice::hardswish(bk, a, o)),
            "clip" => t!(slice::clip(bk, a, -1.0, 1.0, o)),
            "abs" => t!(slice::abs(bk, a, o)),
            "sqrt" => t!(slice::sqrt(bk, b, o)),
            "exp" => t!(slice::exp(bk, a, o)),
            "ln" => t!(slice::ln(bk, b, o)),
            "softmax" => t!(slice::softmax(bk, a, o)),
            "log_softmax" => t!(slice::log_softmax(bk, a, o)),
            _ => {
                rayo::set_max_threads(prev);
                return None;
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
