//! The CUDA runtime. Without a driver: every entry point is an error value (never a panic).
//! With a device: every kernel against an f64 CPU reference on awkward shapes, outputs poisoned
//! with NaN before each launch (the row ops an engine builds on are tested in `cuda_llm.rs`, the
//! LLM's own ops in rayo-llm's `cuda_ops.rs`).
//! `RAYO_REQUIRE_CUDA=1` turns "no device" into a failure; without it each GPU test prints one
//! `SKIP cuda: <test> (no device)` line (count them with grep).
#![cfg(feature = "cuda")]

use rayo::cuda::{CudaDevice, DeviceBuffer, Expr, GemmKernel, GemmVariant, Kernel, ReduceOp};
use rayo::Error;

mod cuda_support;
use cuda_support::*;

#[test]
fn no_driver_is_an_error_not_a_panic() {
    match CudaDevice::new() {
        Ok(d) => println!("device present: {}", d.info()),
        Err(Error::NoDevice { api, reason }) => {
            assert_eq!(api, "cuda");
            assert!(!reason.is_empty());
            assert!(!rayo::cuda::is_available());
            println!("no device, as an error: {reason}");
        }
        Err(other) => panic!("expected NoDevice, got {other}"),
    }
}

#[test]
fn elementwise_matches_f64() {
    let Some(dev) = device("elementwise_matches_f64") else { return };
    let x = || Expr::input(0);
    let y = || Expr::input(1);
    let cases: Vec<(&str, Expr, (f32, f32))> = vec![
        ("add", x().add(y()), (-4.0, 4.0)),
        ("sub", x().sub(y()), (-4.0, 4.0)),
        ("mul", x().mul(y()), (-4.0, 4.0)),
        ("div", x().div(y()), (0.5, 4.0)),
        ("scale", x().scale(2.5), (-4.0, 4.0)),
        ("relu", x().relu(), (-4.0, 4.0)),
        ("sigmoid", x().sigmoid(), (-8.0, 8.0)),
        ("tanh", x().tanh(), (-5.0, 5.0)),
        ("tanh_small", x().tanh(), (-0.1, 0.1)),
        ("exp", x().exp(), (-10.0, 10.0)),
        ("ln", x().ln(), (0.01, 100.0)),
        ("sqrt", x().sqrt(), (0.0, 100.0)),
        ("abs", x().abs(), (-4.0, 4.0)),
        ("fused3", x().mul(y()).add(x()).sigmoid().mul(Expr::input(2)), (-2.0, 2.0)),
    ];
    let mut rng = Rng(0x9E3779B97F4A7C15);
    for (name, e, (lo, hi)) in &cases {
        for &n in LENS {
            let ins: Vec<Vec<f32>> = (0..e.arity()).map(|_| rng.vec(n, *lo, *hi)).collect();
            let bufs: Vec<DeviceBuffer> = ins.iter().map(|v| dev.upload(v).unwrap()).collect();
            let refs: Vec<&DeviceBuffer> = bufs.iter().collect();
            let mut out = poisoned(dev, n);
            dev.elementwise(e, &refs, &mut out).unwrap();
            let got = dev.download(&out).unwrap();
            let want: Vec<f64> = (0..n).map(|i| e.eval_f64(&ins.iter().map(|v| v[i] as f64).collect::<Vec<_>>())).collect();
            close(&format!("{name} n={n}"), &got, &want, 2e-6, 2e-6);
        }
    }
}

#[test]
fn reductions_match_f64() {
    let Some(dev) = device("reductions_match_f64") else { return };
    let mut rng = Rng(0xD1B54A32D192ED03);
    for &n in LENS.iter().chain(&[10_000_000usize]) {
        let xs = rng.vec(n, -1.0, 1.0);
        let ys = rng.vec(n, -1.0, 1.0);
        let (x, y) = (dev.upload(&xs).unwrap(), dev.upload(&ys).unwrap());
        let x64: Vec<f64> = xs.iter().map(|&v| v as f64).collect();
        let y64: Vec<f64> = ys.iter().map(|&v| v as f64).collect();
        for op in ReduceOp::ALL {
            let yb = (op.arity() == 2).then_some(&y);
            let got = dev.reduce(op, &x, yb).unwrap() as f64;
            let want = op.reference(&x64, Some(&y64)).unwrap();
            match op {
                // exact: max, min and |max| pick an element
                ReduceOp::Max | ReduceOp::Min | ReduceOp::NormInf => assert_eq!(got, want as f32 as f64, "{} n={n}", op.name()),
                _ => {
                    // sums of n terms in f32 (tree + four chains): within 1e-6 of Σ|term|
                    let mag = match op {
                        ReduceOp::Dot => x64.iter().zip(&y64).map(|(a, b)| (a * b).abs()).sum::<f64>(),
                        ReduceOp::NormL2 => want,
                        _ => x64.iter().map(|v| v.abs()).sum::<f64>(),
                    };
                    assert!((got - want).abs() <= 1e-6 * mag + 1e-6, "{} n={n}: {got} vs {want}", op.name());
                }
            }
        }
        println!("ok all seven reductions n={n}");
    }
    // NaN propagates through every reduction (max/min as PyTorch: any NaN gives NaN); ±inf
    for n in [1usize, 7, 4097, 1_000_003] {
        for pos in [0, n / 2, n - 1] {
            let mut xs = rng.vec(n, -1.0, 1.0);
            xs[pos] = f32::NAN;
            let x = dev.upload(&xs).unwrap();
            for op in ReduceOp::ALL {
                let yb = (op.arity() == 2).then_some(&x);
                let got = dev.reduce(op, &x, yb).unwrap();
                assert!(got.is_nan(), "{} n={n} NaN at {pos}: got {got}", op.name());
            }
            xs[pos] = f32::NEG_INFINITY;
            let x = dev.upload(&xs).unwrap();
            assert_eq!(dev.reduce(ReduceOp::Min, &x, None).unwrap(), f32::NEG_INFINITY);
            assert_eq!(dev.reduce(ReduceOp::NormInf, &x, None).unwrap(), f32::INFINITY);
            assert_eq!(dev.reduce(ReduceOp::Sum, &x, None).unwrap(), f32::NEG_INFINITY);
        }
    }
    let empty = dev.zeros(0).unwrap();
    for op in ReduceOp::ALL {
        let yb = (op.arity() == 2).then_some(&empty);
        match op.empty_value() {
            Some(v) => assert_eq!(dev.reduce(op, &empty, yb).unwrap(), v, "{}", op.name()),
            None => assert!(matches!(dev.reduce(op, &empty, yb), Err(Error::EmptyInput { .. })), "{}", op.name()),
        }
    }
    // the wrong number of inputs is a length error with both counts
    let x = dev.upload(&[1.0; 4]).unwrap();
    assert!(matches!(dev.reduce(ReduceOp::Dot, &x, None), Err(Error::InvalidArgument { name: "y", .. })));
    assert!(matches!(dev.reduce(ReduceOp::Sum, &x, Some(&x)), Err(Error::InvalidArgument { name: "y", .. })));
}

const ROWS_COLS: &[(usize, usize)] = &[(1, 1), (3, 7), (5, 33), (2, 1000), (4, 4096), (7, 4097), (64, 1024), (3, 20000)];

#[test]
fn softmax_and_log_softmax_match_f64() {
    let Some(dev) = device("softmax_and_log_softmax_match_f64") else { return };
    let mut rng = Rng(0x2545F4914F6CDD1D);
    for &(rows, cols) in ROWS_COLS {
        let xs = rng.vec(rows * cols, -10.0, 10.0);
        let x = dev.upload(&xs).unwrap();
        for log in [false, true] {
            let mut out = poisoned(dev, rows * cols);
            if log {
                dev.log_softmax_rows(&x, rows, cols, &mut out).unwrap();
            } else {
                dev.softmax_rows(&x, rows, cols, &mut out).unwrap();
            }
            let got = dev.download(&out).unwrap();
            let mut want = Vec::with_capacity(rows * cols);
            for r in xs.chunks(cols) {
                let m = r.iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
                let s: f64 = r.iter().map(|&v| (v as f64 - m).exp()).sum();
                want.extend(r.iter().map(|&v| if log { v as f64 - m - s.ln() } else { (v as f64 - m).exp() / s }));
            }
            let (rel, abs) = if log { (2e-6, 1e-5) } else { (2e-5, 1e-9) };
            close(&format!("{} {rows}x{cols}", if log { "log_softmax" } else { "softmax" }), &got, &want, rel, abs);
            if rows == 1 {
                // the 1-D form: the whole buffer is one row
                let mut out1 = poisoned(dev, cols);
                if log {
                    dev.log_softmax(&x, &mut out1).unwrap();
                } else {
                    dev.softmax(&x, &mut out1).unwrap();
                }
                assert_eq!(dev.download(&out1).unwrap(), got);
            }
        }
    }
    let empty = dev.zeros(0).unwrap();
    let mut out = dev.zeros(0).unwrap();
    assert!(matches!(dev.softmax(&empty, &mut out), Err(Error::EmptyInput { .. })));
    assert!(matches!(dev.log_softmax(&empty, &mut out), Err(Error::EmptyInput { .. })));
}

#[test]
fn layernorm_and_rmsnorm_match_f64() {
    let Some(dev) = device("layernorm_and_rmsnorm_match_f64") else { return };
    let mut rng = Rng(0x7F4A7C159E3779B9);
    let eps = 1e-5f32;
    for &(rows, cols) in ROWS_COLS {
        let xs = rng.vec(rows * cols, -3.0, 5.0);
        let g = rng.vec(cols, 0.5, 1.5);
        let b = rng.vec(cols, -1.0, 1.0);
        let (x, gb, bb) = (dev.upload(&xs).unwrap(), dev.upload(&g).unwrap(), dev.upload(&b).unwrap());
        let mut out = poisoned(dev, rows * cols);
        dev.layernorm(&x, &gb, &bb, rows, cols, eps, &mut out).unwrap();
        let got = dev.download(&out).unwrap();
        let mut want = vec![];
        for r in xs.chunks(cols) {
            let mean = r.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
            let var = r.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
            let rstd = 1.0 / (var + eps as f64).sqrt();
            want.extend(r.iter().enumerate().map(|(j, &v)| (v as f64 - mean) * rstd * g[j] as f64 + b[j] as f64));
        }
        close(&format!("layernorm {rows}x{cols}"), &got, &want, 1e-5, 2e-5);
        let mut out = poisoned(dev, rows * cols);
        dev.rmsnorm(&x, &gb, rows, cols, eps, &mut out).unwrap();
        let got = dev.download(&out).unwrap();
        let mut want = vec![];
        for r in xs.chunks(cols) {
            let ms = r.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / cols as f64;
            let rstd = 1.0 / (ms + eps as f64).sqrt();
            want.extend(r.iter().enumerate().map(|(j, &v)| v as f64 * rstd * g[j] as f64));
        }
        close(&format!("rmsnorm {rows}x{cols}"), &got, &want, 1e-5, 2e-5);
    }
}

fn gemm_check(dev: &CudaDevice, g: GemmKernel, rng: &mut Rng, samples: Option<usize>) {
    let (m, k, n) = (g.m() as usize, g.k() as usize, g.n() as usize);
    let a = rng.vec(m * k, -1.0, 1.0);
    let b = rng.vec(k * n, -1.0, 1.0);
    let (ab, bb) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
    let mut c = poisoned(dev, m * n);
    dev.gemm_with(g, &ab, &bb, &mut c).unwrap();
    let got = dev.download(&c).unwrap();
    let cells: Vec<(usize, usize)> = match samples {
        None => (0..m).flat_map(|i| (0..n).map(move |j| (i, j))).collect(),
        Some(s) => (0..s).map(|t| ((t * 7919 + 13) % m, (t * 104729 + 7) % n)).chain([(0, 0), (m - 1, n - 1)]).collect(),
    };
    let mut worst = 0.0f64;
    for (i, j) in cells {
        let (mut s, mut sa) = (0.0f64, 0.0f64);
        for p in 0..k {
            let t = a[i * k + p] as f64 * b[p * n + j] as f64;
            s += t;
            sa += t.abs();
        }
        let err = (got[i * n + j] as f64 - s).abs();
        // fp32: (k+2)·ε·Σ|a·b| (the classical bound of a k-term dot product); TF32 rounds each
        // operand to a 10-bit mantissa first, adding 2^-10 of Σ|a·b|
        let eps = f32::EPSILON as f64;
        let tf32 = if matches!(g.variant(), GemmVariant::TensorCore { .. }) { 2f64.powi(-10) } else { 0.0 };
        let tol = ((k as f64 + 2.0) * eps + tf32) * sa + 1e-30;
        assert!(err <= tol, "gemm {g:?} at ({i},{j}): got {}, want {s} (err {err:e} > tol {tol:e})", got[i * n + j]);
        worst = worst.max(err / (sa + 1e-6));
    }
    assert!(got.iter().all(|v| v.is_finite()), "gemm {g:?}: unwritten (NaN) outputs");
    println!("ok gemm {:?} {m}x{k}x{n}: worst error / sum|ab| {worst:.2e}", g.variant());
}

#[test]
fn gemm_small_matches_f64() {
    let Some(dev) = device("gemm_small_matches_f64") else { return };
    let mut rng = Rng(0x94D049BB133111EB);
    for (m, k, n) in [(1, 1, 1), (33, 9, 17), (100, 33, 70), (129, 257, 65), (64, 0, 64), (7, 300, 1)] {
        gemm_check(dev, GemmKernel::naive(m, k, n), &mut rng, None);
        gemm_check(dev, GemmKernel::tiled(m, k, n, 8), &mut rng, None);
        gemm_check(dev, GemmKernel::tiled(m, k, n, 16), &mut rng, None);
        gemm_check(dev, GemmKernel::tiled(m, k, n, 32), &mut rng, None);
    }
    for (m, k, n) in [(128, 16, 128), (256, 144, 384), (384, 16, 128), (128, 32, 640), (512, 512, 512)] {
        gemm_check(dev, GemmKernel::blocked_bk(m, k, n, 8).unwrap(), &mut rng, None);
        gemm_check(dev, GemmKernel::blocked_bk(m, k, n, 16).unwrap(), &mut rng, None);
    }
    for (m, k, n) in [(128, 32, 128), (256, 160, 384), (128, 64, 256), (512, 512, 512)] {
        for bk in [8, 16] {
            let g = GemmKernel::blocked_split(m, k, n, bk, 2).unwrap();
            gemm_check(dev, g, &mut rng, None);
            // split-K adds two halves onto zero: the same bits on every run
            let a = dev.upload(&rng.vec(m as usize * k as usize, -1.0, 1.0)).unwrap();
            let b = dev.upload(&rng.vec(k as usize * n as usize, -1.0, 1.0)).unwrap();
            let mut c1 = poisoned(dev, (m * n) as usize);
            let mut c2 = poisoned(dev, (m * n) as usize);
            dev.gemm_with(g, &a, &b, &mut c1).unwrap();
            dev.gemm_with(g, &a, &b, &mut c2).unwrap();
            let (v1, v2) = (dev.download(&c1).unwrap(), dev.download(&c2).unwrap());
            assert!(v1.iter().zip(&v2).all(|(x, y)| x.to_bits() == y.to_bits()), "split-K not deterministic");
        }
    }
}

#[test]
fn gemm_large_sampled_matches_f64() {
    let Some(dev) = device("gemm_large_sampled_matches_f64") else { return };
    let mut rng = Rng(0x5851F42D4C957F2D);
    for (m, k, n) in [(128, 8, 128), (256, 136, 384), (128, 48, 256), (384, 16, 128), (512, 512, 512)] {
        for bk in [8, 16] {
            if let Some(g) = GemmKernel::tensor_core_bk(m, k, n, bk) {
                gemm_check(dev, g, &mut rng, None);
            }
        }
    }
    gemm_check(dev, GemmKernel::tensor_core(4096, 4096, 4096), &mut rng, Some(2000));
    gemm_check(dev, GemmKernel::auto(1000, 1000, 1000), &mut rng, Some(2000));
    let sms = dev.info().multiprocessors;
    gemm_check(dev, GemmKernel::for_device(1024, 1024, 1024, sms), &mut rng, Some(2000));
    gemm_check(dev, GemmKernel::blocked_bk(4096, 4096, 4096, 8).unwrap(), &mut rng, Some(2000));
    gemm_check(dev, GemmKernel::blocked_bk(4096, 4096, 4096, 16).unwrap(), &mut rng, Some(2000));
}

#[test]
fn bad_sizes_are_errors_with_numbers() {
    let Some(dev) = device("bad_sizes_are_errors_with_numbers") else { return };
    let x = dev.upload(&[1.0; 10]).unwrap();
    let y = dev.upload(&[1.0; 11]).unwrap();
    let mut out = dev.zeros(10).unwrap();
    let e = Expr::input(0).add(Expr::input(1));
    assert_eq!(dev.elementwise(&e, &[&x, &y], &mut out), Err(Error::LengthMismatch { op: "cuda elementwise", expected: 10, actual: 11 }));
    assert!(matches!(dev.elementwise(&e, &[&x], &mut out), Err(Error::LengthMismatch { expected: 2, actual: 1, .. })));
    assert!(matches!(dev.reduce(ReduceOp::Dot, &x, Some(&y)), Err(Error::LengthMismatch { .. })));
    assert!(matches!(dev.softmax_rows(&x, 3, 4, &mut out), Err(Error::SizeMismatch { .. })));
    let mut c = dev.zeros(4).unwrap();
    // (m, k, n) = (2, 4, 2): a must hold 2×4 = 8 floats, it holds 10
    assert_eq!(dev.gemm(&x, &x, &mut c, 2, 4, 2), Err(Error::SizeMismatch { op: "cuda gemm", shape: vec![2, 4], len: 10 }));
    assert!(dev.gemm(&x, &x, &mut c, 2, 5, 2).is_ok());
    // a kernel made for one shape is re-checked against the buffers it is given
    let g = GemmKernel::naive(2, 5, 2);
    let mut c9 = dev.zeros(9).unwrap();
    assert_eq!(dev.gemm_with(g, &x, &x, &mut c9), Err(Error::SizeMismatch { op: "cuda gemm", shape: vec![2, 2], len: 9 }));
    assert!(matches!(dev.gemm(&x, &x, &mut c, 1 << 33, 1, 2), Err(Error::BufferTooLarge { .. })));
    // 2^21 rows of one column: more thread-block rows than a grid has (65535) is an error
    let tall = dev.zeros(1 << 21).unwrap();
    let one = dev.upload(&[1.0]).unwrap();
    let mut tall_c = dev.zeros(1 << 21).unwrap();
    assert!(matches!(dev.gemm_with(GemmKernel::naive(1 << 21, 1, 1), &tall, &one, &mut tall_c), Err(Error::InvalidArgument { name: "m", .. })));
    assert!(matches!(dev.layernorm(&x, &x, &x, 2, 5, f32::NAN, &mut out), Err(Error::LengthMismatch { .. }) | Err(Error::InvalidParameter { .. })));
}

#[test]
fn graph_replays_a_chain_of_small_launches() {
    // A device of its own: while the builder captures its stream, other threads' work on that
    // stream would be refused by the driver (tests run in parallel).
    let Some(dev) = fresh_device("graph_replays_a_chain_of_small_launches") else { return };
    let dev = &dev;
    let n = 4097;
    let mut rng = Rng(0xA0761D6478BD642F);
    let half = Expr::input(0).scale(0.5).add(Expr::input(0));
    let sig = Expr::input(0).sigmoid();
    let mut g = dev.graph();
    let x = g.buffer(dev.upload(&rng.vec(n, -1.0, 1.0)).unwrap()).unwrap();
    let y = g.buffer(poisoned(dev, n)).unwrap();
    for _ in 0..10 {
        g.elementwise(&half, &[x], y).unwrap();
        g.elementwise(&sig, &[y], x).unwrap();
    }
    assert!(matches!(g.elementwise(&sig, &[x], x), Err(Error::InvalidArgument { .. })));
    let mut other = dev.graph();
    let foreign = other.buffer(dev.zeros(n).unwrap()).unwrap();
    assert!(matches!(g.elementwise(&sig, &[foreign], y), Err(Error::ForeignBuffer { .. })));
    let mut graph = g.build().unwrap();
    assert_eq!(graph.len(), 20);
    for round in 0..3 {
        let input = rng.vec(n, -2.0, 2.0);
        graph.write(x, &input).unwrap();
        graph.replay().unwrap();
        let got = graph.download(x).unwrap();
        let want: Vec<f64> = input
            .iter()
            .map(|&v| {
                let mut v = v as f64;
                for _ in 0..10 {
                    v = half.eval_f64(&[v]);
                    v = sig.eval_f64(&[v]);
                }
                v
            })
            .collect();
        close(&format!("graph of 20 launches, replay {round}"), &got, &want, 1e-5, 1e-6);
    }
}

#[test]
fn pinned_buffers_round_trip() {
    let Some(dev) = device("pinned_buffers_round_trip") else { return };
    let mut rng = Rng(0xE7037ED1A0B428DB);
    for n in [0usize, 1, 4097, 1 << 20] {
        let data = rng.vec(n, -1.0, 1.0);
        let mut p = dev.alloc_pinned(n).unwrap();
        assert!(p.as_slice().unwrap().iter().all(|&v| v == 0.0));
        p.as_mut_slice().unwrap().copy_from_slice(&data);
        let d = dev.upload_pinned(&p).unwrap();
        p.as_mut_slice().unwrap().fill(f32::NAN); // waits for the upload first
        let mut back = dev.alloc_pinned(n).unwrap();
        dev.download_pinned(&d, &mut back).unwrap();
        assert_eq!(back.as_slice().unwrap(), &data[..], "n={n}");
        assert!(matches!(dev.download_pinned(&d, &mut dev.alloc_pinned(n + 1).unwrap()), Err(Error::LengthMismatch { .. })));
    }
    println!("ok pinned round trips");
}

#[test]
fn matrix_matmul_offloads_above_the_crossover_and_agrees_with_the_cpu() {
    let Some(_dev) = device("matrix_matmul_offloads_above_the_crossover_and_agrees_with_the_cpu") else { return };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (m, k, n) = (600, 513, 517); // above MATMUL_MIN_MKN, not multiples of any tile
    assert!(rayo::cuda::dispatch::matmul_prefers_cuda(m, k, n));
    assert!(!rayo::cuda::dispatch::matmul_prefers_cuda(256, 256, 256));
    let a = rayo::Matrix::from_vec(m, k, rng.vec(m * k, -1.0, 1.0)).unwrap();
    let b = rayo::Matrix::from_vec(k, n, rng.vec(k * n, -1.0, 1.0)).unwrap();
    let gpu = a.matmul(&b).unwrap();
    // against f64, within the fp32 bound of a k-term dot product: (k+2)·ε·Σ|a·b|
    let eps = f32::EPSILON as f64;
    let (av, bv) = (a.as_slice(), b.as_slice());
    let mut worst = 0.0f64;
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut sa) = (0.0f64, 0.0f64);
            for p in 0..k {
                let t = av[i * k + p] as f64 * bv[p * n + j] as f64;
                s += t;
                sa += t.abs();
            }
            let g = gpu.as_slice()[i * n + j] as f64;
            let tol = (k as f64 + 2.0) * eps * sa;
            assert!((g - s).abs() <= tol, "C[{i}][{j}]: device {g}, f64 {s} (tol {tol:e})");
            worst = worst.max((g - s).abs() / sa);
        }
    }
    println!("ok offloaded matmul {m}x{k}x{n}: worst error / sum|ab| {worst:.2e} (bound {:.2e})", (k as f64 + 2.0) * eps);
}

/// 1,000 calls with different lengths, row sizes, epsilons and GEMM shapes compile a handful of
/// kernels: shapes and scalars are kernel arguments, not part of the generated code.
#[test]
fn kernel_cache_stays_small_when_shapes_vary() {
    let Some(dev) = fresh_device("kernel_cache_stays_small_when_shapes_vary") else { return };
    assert_eq!(dev.cached_kernels(), 0);
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    for i in 0..1000usize {
        let len = 1 + i * 37 % 3000;
        let x = dev.upload(&rng.vec(len, -1.0, 1.0)).unwrap();
        let mut out = dev.zeros(len).unwrap();
        dev.reduce(ReduceOp::Sum, &x, None).unwrap();
        if i % 2 == 0 {
            dev.softmax(&x, &mut out).unwrap();
        } else {
            dev.log_softmax(&x, &mut out).unwrap();
        }
        let g = dev.upload(&vec![1.0; len]).unwrap();
        dev.rmsnorm(&x, &g, 1, len, 1e-6 * (1 + i) as f32, &mut out).unwrap();
        let (m, k, n) = (1 + i % 13, 1 + i % 29, 1 + i % 11);
        let (a, b) = (dev.upload(&rng.vec(m * k, -1.0, 1.0)).unwrap(), dev.upload(&rng.vec(k * n, -1.0, 1.0)).unwrap());
        let mut c = dev.zeros(m * n).unwrap();
        dev.gemm(&a, &b, &mut c, m, k, n).unwrap();
    }
    dev.synchronize().unwrap();
    let cached = dev.cached_kernels();
    println!("1000 calls x 4 ops with varying shapes and eps: {cached} kernels compiled");
    // reduce sum + its second pass, softmax and log_softmax x 2 widths, rmsnorm x 2 widths,
    // the tiled GEMM
    assert!(cached <= 9, "{cached} kernels for 1000 shapes");
}

/// A buffer belongs to the device value that made it: a second `CudaDevice` (its own stream)
/// refuses it in every op, with both ids.
#[test]
fn a_buffer_of_another_device_is_an_error() {
    let Some(d1) = fresh_device("a_buffer_of_another_device_is_an_error") else { return };
    let d2 = CudaDevice::new().unwrap();
    assert_ne!(d1.id(), d2.id());
    let foreign = |r: rayo::Result<()>| {
        assert!(matches!(r, Err(Error::ForeignBuffer { owner, user, .. }) if owner == d1.id() && user == d2.id()), "{r:?}");
    };
    let mut x = d1.upload(&[1.0; 256]).unwrap();
    assert_eq!(x.device_id(), d1.id());
    let mine = d2.upload(&[1.0; 256]).unwrap();
    let mut out = d2.zeros(256).unwrap();
    foreign(d2.download(&x).map(drop));
    foreign(d2.download_into(&x, &mut [0.0; 256]));
    foreign(d2.write(&mut x, &[2.0; 256]));
    foreign(d2.reduce(ReduceOp::Sum, &x, None).map(drop));
    foreign(d2.reduce(ReduceOp::Dot, &mine, Some(&x)).map(drop));
    foreign(d2.softmax(&x, &mut out));
    foreign(d2.log_softmax_rows(&x, 16, 16, &mut out));
    foreign(d2.rmsnorm(&mine, &x, 1, 256, 1e-5, &mut out));
    foreign(d2.layernorm(&mine, &mine, &x, 1, 256, 1e-5, &mut out));
    foreign(d2.gemm(&x, &mine, &mut out, 16, 16, 16));
    foreign(d2.elementwise(&Expr::input(0).add(Expr::input(1)), &[&mine, &x], &mut out));
    let mut x_out = d1.zeros(256).unwrap();
    foreign(d2.softmax(&mine, &mut x_out));
    let mut p = d1.alloc_pinned(256).unwrap();
    foreign(d2.write_pinned(&mut out, &p));
    foreign(d2.download_pinned(&mine, &mut p));
    let mut g = d2.graph();
    foreign(g.buffer(x).map(drop));
    // its own device still takes it
    d1.download(&x_out).unwrap();
}

/// A user kernel named like a built-in one does not replace it in the cache (the cache is keyed
/// by kernel type and name).
#[test]
fn a_user_kernel_cannot_poison_the_cache() {
    let Some(dev) = fresh_device("a_user_kernel_cannot_poison_the_cache") else { return };
    struct Impostor;
    impl Kernel for Impostor {
        fn name(&self) -> String {
            GemmKernel::naive(1, 1, 1).name()
        }
        fn build(&self, _sm: u32) -> rayo_ptx::ptx::PtxKernel {
            // same entry name, different parameters, does nothing
            let mut k = rayo_ptx::ptx::PtxKernel::new(&self.name());
            k.add_param("x", rayo_ptx::ptx::PtxType::U64);
            k.ret();
            k
        }
    }
    dev.function(&Impostor).unwrap();
    assert_eq!(dev.cached_kernels(), 1);
    let mut rng = Rng(0x5EED);
    gemm_check(&dev, GemmKernel::naive(33, 9, 17), &mut rng, None);
    assert_eq!(dev.cached_kernels(), 2, "the built-in kernel is a separate entry");
}

/// f16 or bf16 values as the Hopper kernels read and write them (2 bytes, little-endian).
#[derive(Clone, Copy)]
struct Half(rayo::cuda::WgmmaType);

impl Half {
    fn bf16(self) -> bool {
        self.0 == rayo::cuda::WgmmaType::BF16
    }
    /// `v` rounded to the type.
    fn round(self, v: f32) -> f32 {
        if self.bf16() {
            half::bf16::from_f32(v).to_f32()
        } else {
            half::f16::from_f32(v).to_f32()
        }
    }
    fn bits(self, v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|&x| if self.bf16() { half::bf16::from_f32(x).to_bits() } else { half::f16::from_f32(x).to_bits() }.to_le_bytes()).collect()
    }
    /// The value in the first two bytes of `b`.
    fn value(self, b: &[u8]) -> f32 {
        let h = u16::from_le_bytes([b[0], b[1]]);
        if self.bf16() {
            half::bf16::from_bits(h).to_f32()
        } else {
            half::f16::from_bits(h).to_f32()
        }
    }
    /// The unit roundoff: 2⁻⁸ for bf16, 2⁻¹¹ for f16.
    fn roundoff(self) -> f64 {
        if self.bf16() {
            2f64.powi(-8)
        } else {
            2f64.powi(-11)
        }
    }
}

/// Hopper's wgmma GEMM (`C = A·Bᵀ`, f16 and bf16, both tile widths) against f64 of the
/// rounded operands on shapes that are not tile multiples (the copies' zero fill and the
/// bounds-checked stores), every output checked; wrong shapes are errors. A device other than
/// compute capability 9.0 must refuse it with an error (and the test says so).
#[test]
fn wgmma_gemm_matches_f64() {
    use rayo::cuda::WgmmaType;
    let Some(dev) = device("wgmma_gemm_matches_f64") else { return };
    let mut rng = Rng(0x3090_a0a0);
    if !dev.has_wgmma() {
        let a = dev.upload_bytes(&[0u8; 2 * 64]).unwrap();
        let mut c = dev.zeros(64).unwrap();
        assert!(dev.gemm_wgmma(WgmmaType::BF16, 128, &a, &a, (8, 8, 8), &mut c).is_err());
        println!("SKIP cuda: wgmma_gemm_matches_f64 on compute capability {:?} (sm_90 only; refused with an error)", dev.info().compute_capability);
        return;
    }
    for ty in [WgmmaType::BF16, WgmmaType::F16] {
        let h = Half(ty);
        let (round, bits) = (|v: f32| h.round(v), |v: &[f32]| h.bits(v));
        // both tile widths and the 256-row tiles, alone and in clusters of two blocks sharing B
        // by TMA multicast
        let kernels = [128u32, 256].map(|bn| rayo::cuda::WgmmaGemmKernel::new(ty, bn).unwrap());
        let tall = rayo::cuda::WgmmaGemmKernel::tall(ty);
        for kern in kernels.into_iter().chain([tall]).flat_map(|k| [k, k.clustered()]) {
            let (bm, bn, cl) = (kern.bm(), kern.bn(), kern.cluster());
            for (m, n, k) in [(128usize, 256usize, 64usize), (300, 520, 136), (1, 7, 8), (257, 129, 1000), (512, 768, 1024)] {
                let a: Vec<f32> = rng.vec(m * k, -1.0, 1.0).into_iter().map(round).collect();
                let b: Vec<f32> = rng.vec(n * k, -1.0, 1.0).into_iter().map(round).collect();
                let (ab, bb) = (dev.upload_bytes(&bits(&a)).unwrap(), dev.upload_bytes(&bits(&b)).unwrap());
                let mut c = poisoned(dev, m * n + 1);
                dev.gemm_wgmma_with(kern, &ab, &bb, (m, n, k), &mut c).unwrap();
                let got = dev.download(&c).unwrap();
                for i in 0..m {
                    for j in 0..n {
                        let (ar, br) = (&a[i * k..][..k], &b[j * k..][..k]);
                        let want: f64 = ar.iter().zip(br).map(|(&x, &y)| x as f64 * y as f64).sum();
                        let mag: f64 = ar.iter().zip(br).map(|(&x, &y)| (x as f64 * y as f64).abs()).sum();
                        let g = got[i * n + j] as f64;
                        assert!((g - want).abs() <= 1e-5 * mag + 1e-6, "{ty:?} {bm}x{bn} cluster {cl} {m}x{n}x{k}: C[{i}][{j}] = {g}, want {want}");
                    }
                }
                assert!(got[m * n].is_nan(), "{ty:?} {m}x{n}x{k}: wrote past C");
            }
        }
        // C in the operands' type: the f32 sum rounded once more (unit roundoff u), even rows
        // (vector stores) and odd ones (the checked scalar path)
        let u = h.roundoff();
        for kern in kernels.into_iter().filter_map(|k| k.narrow_c()) {
            for (m, n, k) in [(300usize, 520usize, 136usize), (1, 7, 8), (257, 129, 1000), (512, 768, 1024)] {
                let a: Vec<f32> = rng.vec(m * k, -1.0, 1.0).into_iter().map(round).collect();
                let b: Vec<f32> = rng.vec(n * k, -1.0, 1.0).into_iter().map(round).collect();
                let (ab, bb) = (dev.upload_bytes(&bits(&a)).unwrap(), dev.upload_bytes(&bits(&b)).unwrap());
                let mut c = dev.upload_bytes(&vec![0xffu8; 2 * m * n + 2]).unwrap();
                dev.gemm_wgmma_narrow(kern, &ab, &bb, (m, n, k), &mut c).unwrap();
                let got = dev.download_bytes(&c).unwrap();
                let value = |i: usize| h.value(&got[2 * i..]);
                for i in 0..m {
                    for j in 0..n {
                        let (ar, br) = (&a[i * k..][..k], &b[j * k..][..k]);
                        let want: f64 = ar.iter().zip(br).map(|(&x, &y)| x as f64 * y as f64).sum();
                        let mag: f64 = ar.iter().zip(br).map(|(&x, &y)| (x as f64 * y as f64).abs()).sum();
                        let g = value(i * n + j) as f64;
                        assert!(
                            (g - want).abs() <= 1e-5 * mag + u * want.abs() + 1e-6,
                            "{} {m}x{n}x{k}: C[{i}][{j}] = {g}, want {want}",
                            kern.name()
                        );
                    }
                }
                assert!(value(m * n).is_nan(), "{} {m}x{n}x{k}: wrote past C", kern.name());
            }
        }
        // a narrow kernel with an f32 C, or the reverse, is an error
        let (ab, mut cf) = (dev.upload_bytes(&[0u8; 2 * 64]).unwrap(), dev.zeros(64).unwrap());
        let mut cb = dev.zero_bytes(2 * 64).unwrap();
        assert!(dev.gemm_wgmma_with(kernels[0].narrow_c().unwrap(), &ab, &ab, (8, 8, 8), &mut cf).is_err());
        assert!(dev.gemm_wgmma_narrow(kernels[0], &ab, &ab, (8, 8, 8), &mut cb).is_err());
    }
    // TF32 through the f32 API: operands rounded toward zero to 10 mantissa bits by the tensor
    // cores, so the bound is 2⁻⁹ of Σ|a·b| (both operands' truncation) over f64 of the f32 values
    for (m, n, k) in [(300usize, 520usize, 132usize), (1, 7, 4), (257, 129, 1000)] {
        let a = rng.vec(m * k, -1.0, 1.0);
        let b = rng.vec(n * k, -1.0, 1.0);
        let (ab, bb) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
        let mut c = poisoned(dev, m * n + 1);
        dev.gemm_tf32(&ab, &bb, (m, n, k), &mut c).unwrap();
        let got = dev.download(&c).unwrap();
        let mut worst = 0f64;
        for i in 0..m {
            for j in 0..n {
                let (ar, br) = (&a[i * k..][..k], &b[j * k..][..k]);
                let want: f64 = ar.iter().zip(br).map(|(&x, &y)| x as f64 * y as f64).sum();
                let mag: f64 = ar.iter().zip(br).map(|(&x, &y)| (x as f64 * y as f64).abs()).sum();
                let err = (got[i * n + j] as f64 - want).abs();
                assert!(err <= mag / 512.0 + 1e-6, "TF32 {m}x{n}x{k}: C[{i}][{j}] = {}, want {want}", got[i * n + j]);
                worst = worst.max(err / mag.max(1e-30));
            }
        }
        assert!(got[m * n].is_nan(), "TF32 {m}x{n}x{k}: wrote past C");
        println!("ok TF32 {m}x{n}x{k}: worst error {worst:.2e} of Σ|a·b|");
    }
    let a = dev.upload_bytes(&[0u8; 2 * 64]).unwrap();
    let mut c = dev.zeros(64).unwrap();
    assert!(dev.gemm_wgmma(WgmmaType::BF16, 128, &a, &a, (8, 8, 4), &mut c).is_err(), "k not a multiple of 8");
    let x = dev.upload(&[0.0; 64]).unwrap();
    assert!(dev.gemm_tf32(&x, &x, (8, 8, 6), &mut c).is_err(), "TF32 k not a multiple of 4");
    assert!(dev.gemm_wgmma(WgmmaType::BF16, 128, &a, &a, (16, 8, 8), &mut c).is_err(), "a too short");
    assert!(dev.gemm_wgmma(WgmmaType::BF16, 64, &a, &a, (8, 8, 8), &mut c).is_err(), "tile width");
}

/// Hopper's flash attention (f16 and bf16, head dim 64 and 128, causal and not, grouped-query)
/// against f64 softmax attention of the rounded inputs, every output checked, on lengths that
/// are not tile multiples (the K/V tiles past `n` are zeros from the 3-D tensor maps and
/// masked). The bound: P is rounded to the input type before its product with V and the output
/// is rounded too, so `2u·(Σ p·|v| + |o|)` with `u` the type's unit roundoff. Bad shapes are
/// errors; a device other than compute capability 9.0 refuses it.
#[test]
fn wgmma_attention_matches_f64() {
    use rayo::cuda::{FlashShape, WgmmaType};
    let Some(dev) = device("wgmma_attention_matches_f64") else { return };
    let mut rng = Rng(0xf1a5_4a77);
    let tiny = FlashShape { batch: 1, heads: 1, kv_heads: 1, n: 8, head_dim: 64 };
    if !dev.has_wgmma() {
        let x = dev.upload_bytes(&[0u8; 2 * 512]).unwrap();
        let mut o = dev.zero_bytes(2 * 512).unwrap();
        assert!(dev.attention_wgmma(WgmmaType::BF16, &x, &x, &x, tiny, false, 0.125, &mut o).is_err());
        println!(
            "SKIP cuda: wgmma_attention_matches_f64 on compute capability {:?} (sm_90 only; refused with an error)",
            dev.info().compute_capability
        );
        return;
    }
    for ty in [WgmmaType::BF16, WgmmaType::F16] {
        let h = Half(ty);
        let (round, bits) = (|v: f32| h.round(v), |v: &[f32]| h.bits(v));
        let (value, u) = (|b: &[u8]| h.value(b), h.roundoff());
        for head_dim in [64usize, 128] {
            for causal in [false, true] {
                for (batch, heads, kv_heads, n) in [(2usize, 4usize, 2usize, 200usize), (1, 3, 1, 333), (1, 2, 2, 1), (1, 1, 1, 256)] {
                    let shape = FlashShape { batch, heads, kv_heads, n, head_dim };
                    let (ql, kvl) = (shape.q_len().unwrap(), shape.kv_len().unwrap());
                    let q: Vec<f32> = rng.vec(ql, -2.0, 2.0).into_iter().map(round).collect();
                    let k: Vec<f32> = rng.vec(kvl, -1.0, 1.0).into_iter().map(round).collect();
                    let v: Vec<f32> = rng.vec(kvl, -1.0, 1.0).into_iter().map(round).collect();
                    let (qb, kb, vb) =
                        (dev.upload_bytes(&bits(&q)).unwrap(), dev.upload_bytes(&bits(&k)).unwrap(), dev.upload_bytes(&bits(&v)).unwrap());
                    // one value past the end, poisoned (0xffff is NaN in both types)
                    let mut ob = dev.upload_bytes(&vec![0xffu8; 2 * ql + 2]).unwrap();
                    let scale = 1.0 / (head_dim as f32).sqrt();
                    dev.attention_wgmma(ty, &qb, &kb, &vb, shape, causal, scale, &mut ob).unwrap();
                    let got = dev.download_bytes(&ob).unwrap();
                    let what = format!("{ty:?} hd{head_dim} causal {causal} {batch}x{heads}/{kv_heads}x{n}");
                    let mut worst = 0f64;
                    for b in 0..batch {
                        for h in 0..heads {
                            let hk = h / (heads / kv_heads);
                            let qp = &q[(b * heads + h) * n * head_dim..][..n * head_dim];
                            let kp = &k[(b * kv_heads + hk) * n * head_dim..][..n * head_dim];
                            let vp = &v[(b * kv_heads + hk) * n * head_dim..][..n * head_dim];
                            for i in 0..n {
                                let keys = if causal { i + 1 } else { n };
                                let s: Vec<f64> = (0..keys)
                                    .map(|j| {
                                        scale as f64 * (0..head_dim).map(|d| qp[i * head_dim + d] as f64 * kp[j * head_dim + d] as f64).sum::<f64>()
                                    })
                                    .collect();
                                let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                                let p: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
                                let l: f64 = p.iter().sum();
                                for d in 0..head_dim {
                                    let want: f64 = (0..keys).map(|j| p[j] * vp[j * head_dim + d] as f64).sum::<f64>() / l;
                                    let mag: f64 = (0..keys).map(|j| p[j] * (vp[j * head_dim + d] as f64).abs()).sum::<f64>() / l;
                                    let at = ((b * heads + h) * n + i) * head_dim + d;
                                    let g = value(&got[2 * at..]) as f64;
                                    let err = (g - want).abs();
                                    assert!(err <= 2.0 * u * (mag + want.abs()) + 1e-6, "{what}: O[{b}][{h}][{i}][{d}] = {g}, want {want}");
                                    worst = worst.max(err / (mag + want.abs()));
                                }
                            }
                        }
                    }
                    assert!(value(&got[2 * ql..]).is_nan(), "{what}: wrote past the output");
                    println!("ok {what}: worst error {:.2} u of (Σp|v| + |o|)", worst / u);
                }
            }
        }
    }
    let x = dev.upload_bytes(&[0u8; 2 * 512]).unwrap();
    let mut o = dev.zero_bytes(2 * 512).unwrap();
    assert!(dev.attention_wgmma(WgmmaType::BF16, &x, &x, &x, FlashShape { head_dim: 32, n: 16, ..tiny }, false, 0.1, &mut o).is_err(), "head_dim 32");
    assert!(dev.attention_wgmma(WgmmaType::TF32, &x, &x, &x, tiny, false, 0.1, &mut o).is_err(), "TF32");
    assert!(
        dev.attention_wgmma(WgmmaType::BF16, &x, &x, &x, FlashShape { heads: 3, kv_heads: 2, n: 2, ..tiny }, false, 0.1, &mut o).is_err(),
        "kv_heads must divide heads"
    );
    assert!(dev.attention_wgmma(WgmmaType::BF16, &x, &x, &x, FlashShape { n: 9, ..tiny }, false, 0.1, &mut o).is_err(), "inputs too short");
    assert!(dev.attention_wgmma(WgmmaType::BF16, &x, &x, &x, tiny, false, f32::NAN, &mut o).is_err(), "scale NaN");
}

/// A kernel's parameter list as a type outside the crate's ops: [`AddRowsKernel`]'s, for the
/// typed launch's tests. `claim` rows are claimed for `x`; `drop_last` leaves the last
/// parameter out.
struct AddRows<'a> {
    x: &'a mut DeviceBuffer,
    b: &'a DeviceBuffer,
    claim: usize,
    drop_last: bool,
}

// SAFETY: AddRowsKernel (a thread per i < total, the grid `launch(total)`) reads `b[i % cols]`
// and adds it to `x[i]`: extents `total` and `cols`, with `total = claim · cols`, the values
// the kernel is given.
unsafe impl rayo::cuda::KernelArgs for AddRows<'_> {
    type Kernel = rayo::cuda::kernels::AddRowsKernel;

    fn bind(&mut self, k: &Self::Kernel) -> rayo::Result<Option<rayo::cuda::Bound<'_>>> {
        use rayo::cuda::Param;
        let cols = self.b.len();
        let total = self.claim * cols;
        let mut params = vec![Param::Out(self.x, total), Param::In(self.b, cols), Param::U32(cols as u32), Param::U32(total as u32)];
        if self.drop_last {
            params.pop();
        }
        Ok(Some(rayo::cuda::Bound { config: k.launch(total as u32), params }))
    }
}

/// The typed launch (`CudaDevice::launch`, what code outside rayo launches a kernel with):
/// the kernel runs when the arguments fit; a buffer shorter than its stated extent, a
/// parameter list that is not the PTX's and a buffer of another device are errors before
/// anything reaches the driver.
#[test]
fn typed_launch_checks_extents_devices_and_the_parameter_list() {
    use rayo::cuda::kernels::AddRowsKernel;
    let Some(dev) = fresh_device("typed_launch_checks_extents_devices_and_the_parameter_list") else { return };
    let b = dev.upload(&[1.0, 2.0, 3.0]).unwrap();
    let mut x = dev.upload(&[10.0; 7]).unwrap();
    dev.launch(&AddRowsKernel, &mut AddRows { x: &mut x, b: &b, claim: 2, drop_last: false }).unwrap();
    assert_eq!(dev.download(&x).unwrap(), vec![11.0, 12.0, 13.0, 11.0, 12.0, 13.0, 10.0]);
    // three rows claimed of a buffer that holds two (and a bit)
    let e = dev.launch(&AddRowsKernel, &mut AddRows { x: &mut x, b: &b, claim: 3, drop_last: false }).unwrap_err();
    assert_eq!(e, Error::LengthMismatch { op: "cuda launch", expected: 9, actual: 7 });
    // one parameter short of what the PTX declares
    let e = dev.launch(&AddRowsKernel, &mut AddRows { x: &mut x, b: &b, claim: 1, drop_last: true }).unwrap_err();
    assert_eq!(e, Error::LengthMismatch { op: "cuda launch (kernel parameters)", expected: 4, actual: 3 });
    // a bias on another device value
    let other = CudaDevice::new().unwrap();
    let foreign = other.upload(&[1.0, 2.0, 3.0]).unwrap();
    let e = dev.launch(&AddRowsKernel, &mut AddRows { x: &mut x, b: &foreign, claim: 1, drop_last: false }).unwrap_err();
    assert!(matches!(e, Error::ForeignBuffer { .. }), "{e}");
    // nothing of the refused launches ran
    assert_eq!(dev.download(&x).unwrap(), vec![11.0, 12.0, 13.0, 11.0, 12.0, 13.0, 10.0]);
}
