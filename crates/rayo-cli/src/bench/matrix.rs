//! Matrix rows of `rayo bench`: matmul (GFLOP/s = 2n³/t), matvec, transpose (GB/s), conv2d.

use super::row::Row;
use super::timer::{median_ns, Plan};
use crate::out::errln;
use rayo::{Backend, Matrix};
use std::hint::black_box;

pub const OPS: &[&str] = &["matmul", "matvec", "transpose", "conv2d", "conv2d_c64"];

/// Sizes when none are given (n: n×n matrices, or an n×n image for conv2d).
pub fn default_sizes(quick: bool) -> Vec<usize> {
    if quick {
        vec![256, 1024]
    } else {
        vec![64, 256, 1024, 2048]
    }
}

fn filled(rows: usize, cols: usize, seed: usize, backend: Backend) -> Option<Matrix> {
    let data = (0..rows * cols).map(|i| ((i * 7919 + seed) % 1000) as f32 / 500.0 - 1.0).collect();
    Matrix::from_vec(rows, cols, data).ok()?.with_backend(backend).ok()
}

/// Largest n (n×n matrices) a matrix row is run for: `--size` applies to every op, and a
/// vector size such as 100000 would otherwise ask for a 100000² product (120 GB, hours).
pub const MAX_N: usize = 16384;

pub fn run(op: &str, n: usize, backend: Backend, threads: usize, plan: Plan) -> Vec<Row> {
    if n > MAX_N {
        errln!("rayo bench: skip {op} n={n}: matrix ops take n×n, n at most {MAX_N}");
        return Vec::new();
    }
    let prev = rayo::set_max_threads(threads);
    let row = |op: &str, mkn: Option<(usize, usize, usize)>, ns: f64, gbps: Option<f64>, gflops: Option<f64>| Row {
        op: op.to_string(),
        n,
        mkn,
        backend: backend.name().to_string(),
        threads,
        ns,
        gbps,
        gflops,
        note: None,
    };
    let mut rows = Vec::new();
    match op {
        "matmul" => {
            if let (Some(a), Some(b), Ok(mut c)) = (filled(n, n, 1, backend), filled(n, n, 2, backend), Matrix::zeros(n, n)) {
                // The CPU GEMM itself (Matrix::matmul may hand large products to a GPU).
                let ns = median_ns(plan, || {
                    let _ = black_box(rayo::gemm_with(backend, 1.0, a.view(), b.view(), 0.0, c.view_mut()));
                });
                let f = 2.0 * (n as f64).powi(3);
                rows.push(row(op, Some((n, n, n)), ns, None, Some(f / ns)));
            }
        }
        "matvec" => {
            if let Some(a) = filled(n, n, 1, backend) {
                let x: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
                let mut y = vec![0.0; n];
                let ns = median_ns(plan, || {
                    let _ = black_box(a.matvec_into(&x, &mut y));
                });
                rows.push(row(op, Some((n, n, 1)), ns, Some((4 * n * n) as f64 / ns), Some((2 * n * n) as f64 / ns)));
            }
        }
        "transpose" => {
            if let (Some(a), Ok(mut t)) = (filled(n, n, 1, backend), Matrix::zeros(n, n)) {
                let ns = median_ns(plan, || {
                    let _ = black_box(a.transpose_into(&mut t));
                });
                rows.push(row(op, Some((n, n, 0)), ns, Some((8 * n * n) as f64 / ns), None));
            }
        }
        "conv2d" => {
            for k in [3usize, 7] {
                if let (Some(img), Some(ker)) = (filled(n, n, 1, backend), filled(k, k, 3, backend)) {
                    let ns = median_ns(plan, || {
                        let _ = black_box(img.convolve2d(&ker));
                    });
                    let o = (n - k + 1) as f64;
                    rows.push(row(&format!("conv2d_k{k}"), Some((n, n, k)), ns, None, Some(2.0 * (k * k) as f64 * o * o / ns)));
                }
            }
        }
        "conv2d_c64" => {
            // A CNN layer: [64, n, n] ⋆ [64, 64, 3, 3].
            let (c, k) = (64, 3);
            let img = rayo::Tensor::from_vec(vec![c, n, n], (0..c * n * n).map(|i| (i % 97) as f32 / 97.0 - 0.5).collect());
            let ker = rayo::Tensor::from_vec(vec![c, c, k, k], (0..c * c * k * k).map(|i| (i % 89) as f32 / 89.0 - 0.5).collect());
            if let (Ok(img), Ok(ker), true) = (img, ker, n >= k) {
                let ns = median_ns(plan, || {
                    let _ = black_box(img.conv2d(&ker));
                });
                let o = (n - k + 1) as f64;
                rows.push(row(op, Some((n, n, k)), ns, None, Some(2.0 * (c * c * k * k) as f64 * o * o / ns)));
            }
        }
        _ => {}
    }
    rayo::set_max_threads(prev);
    rows
}
