//! The wgpu backend against f64 references, run for real (CI: Mesa's lavapipe).
//! Without an adapter every test prints one `SKIP wgpu: <test> (no adapter)` line; with
//! RAYO_REQUIRE_GPU=1 it fails instead.
#![cfg(feature = "gpu")]

use rayo::gpu::{BinaryOp, GpuCommandBatch, GpuDevice, ReduceOp, UnaryOp};
use rayo::ops::{ReduceCombine, ReduceLoad};
use rayo::{Error, Vector};
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

const SIZES: &[usize] = &[1, 7, 255, 256, 257, 65537];

/// The shared device, or `None` after printing one skip line naming `test`.
fn device(test: &str) -> Option<GpuDevice> {
    match GpuDevice::new() {
        Ok(d) => Some(d),
        Err(e) => {
            if std::env::var("RAYO_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("RAYO_REQUIRE_GPU=1 but no wgpu device: {e}");
            }
            eprintln!("SKIP wgpu: {test} (no adapter)");
            None
        }
    }
}

/// A minimal executor for the `_async` forms.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark()
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Deterministic inputs in [-lo, hi) with a few awkward values (0, ±tiny, large).
fn data(n: usize, seed: u64, range: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut v: Vec<f32> = (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * range
        })
        .collect();
    for (i, x) in [0.0, 1e-30, -1e-7, 30.0, -30.0, 0.5, -0.5].into_iter().enumerate() {
        if i < n && n > 7 {
            v[i * (n / 7)] = x;
        }
    }
    v
}

fn close(op: &str, got: &[f32], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{op}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(err <= abs + rel * w.abs(), "{op} n={} [{i}]: got {g}, want {w} (err {err:e})", got.len());
    }
}

/// The registry's f64 reference (every op's own; `tests/parity.rs` checks every op on every
/// backend against it, this test the named wgpu methods).
fn unary_ref(op: UnaryOp, x: f64) -> f64 {
    op.reference(x)
}

const UNARY: &[UnaryOp] = &[
    UnaryOp::Relu,
    UnaryOp::LeakyRelu(0.01),
    UnaryOp::Elu(1.5),
    UnaryOp::Sigmoid,
    UnaryOp::Tanh,
    UnaryOp::Swish,
    UnaryOp::Gelu,
    UnaryOp::Clip(-1.5, 2.0),
    UnaryOp::Scale(-3.25),
];

#[test]
fn adapter_is_listed_with_limits() {
    let Some(d) = device("adapter_is_listed_with_limits") else { return };
    let info = d.adapter_info();
    assert!(!info.name.is_empty());
    assert!(GpuDevice::is_available());
    let list = GpuDevice::list_adapters();
    assert!(list.iter().any(|a| a.name == info.name), "{list:?} lacks {info:?}");
    let l = d.limits();
    assert!(l.max_storage_binding_bytes >= 1 << 20 && l.max_workgroups_per_dimension >= 65535, "{l:?}");
    // One device per process.
    let d2 = GpuDevice::new().unwrap();
    assert_eq!(format!("{d:?}"), format!("{d2:?}"));
}

#[test]
fn unary_ops_match_f64_reference() {
    let Some(d) = device("unary_ops_match_f64_reference") else { return };
    for &n in SIZES {
        let x = data(n, n as u64, 8.0);
        for &op in UNARY {
            let mut out = vec![f32::NAN; n];
            // The named methods and the generic one agree; check each named form once.
            match op {
                UnaryOp::Relu => d.relu(&x, &mut out),
                UnaryOp::LeakyRelu(a) => d.leaky_relu(&x, a, &mut out),
                UnaryOp::Elu(a) => d.elu(&x, a, &mut out),
                UnaryOp::Sigmoid => d.sigmoid(&x, &mut out),
                UnaryOp::Tanh => d.tanh(&x, &mut out),
                UnaryOp::Swish => d.swish(&x, &mut out),
                UnaryOp::Gelu => d.gelu(&x, &mut out),
                UnaryOp::Clip(lo, hi) => d.clip(&x, lo, hi, &mut out),
                UnaryOp::Scale(s) => d.scale(&x, s, &mut out),
                other => d.unary(other, &x, &mut out),
            }
            .unwrap();
            let want: Vec<f64> = x.iter().map(|&v| unary_ref(op, v as f64)).collect();
            close(op.name(), &out, &want, 2e-5, 2e-6);
        }
    }
}

/// The `_async` forms driven by this file's own executor (not pollster, which the blocking
/// forms use), each checked against the f64 reference rather than against another GPU path.
#[test]
fn async_forms_match_f64_reference() {
    let Some(_) = device("async_forms_match_f64_reference") else { return };
    let d = block_on(GpuDevice::new_async()).unwrap();
    let n = 1001;
    let x = data(n, 3, 4.0);
    let y = data(n, 4, 4.0);
    let mut a = vec![f32::NAN; n];
    block_on(d.gelu_async(&x, &mut a)).unwrap();
    close("gelu_async", &a, &x.iter().map(|&v| unary_ref(UnaryOp::Gelu, v as f64)).collect::<Vec<_>>(), 2e-5, 2e-6);
    block_on(d.vec_mul_async(&x, &y, &mut a)).unwrap();
    close("vec_mul_async", &a, &x.iter().zip(&y).map(|(&p, &q)| p as f64 * q as f64).collect::<Vec<_>>(), 1e-7, 1e-6);
    for op in ReduceOp::ALL {
        let yy = (op == ReduceOp::Dot).then_some(&y[..]);
        check_reduce("reduce_async", op, block_on(d.reduce_async(op, &x, yy)).unwrap(), &x, yy);
    }
    check_reduce("sum_async", ReduceOp::Sum, block_on(d.sum_async(&x)).unwrap(), &x, None);
    check_reduce("norm_l2_async", ReduceOp::NormL2, block_on(d.norm_l2_async(&x)).unwrap(), &x, None);
    let (m, k, nn) = (10, 30, 7);
    let mut c = vec![f32::NAN; m * nn];
    block_on(d.matmul_async(&x[..m * k], &y[..k * nn], &mut c, m, k, nn)).unwrap();
    let (want, mag) = matmul_ref(&x[..m * k], &y[..k * nn], m, k, nn);
    for i in 0..m * nn {
        assert!((c[i] as f64 - want[i]).abs() <= 1e-6 * mag[i] + 1e-6, "matmul_async [{i}]: {} vs {}", c[i], want[i]);
    }
    let mut sm = vec![f32::NAN; 1000];
    block_on(d.softmax_rows_async(&x[..1000], 20, 50, &mut sm)).unwrap();
    close("softmax_rows_async", &sm, &softmax_rows_ref(&x[..1000], 50, false), 2e-5, 1e-9);
    let mut batch = GpuCommandBatch::new(d.clone());
    let bx = batch.upload(&x);
    let t = batch.tanh(bx);
    let s = batch.norm_l1(t);
    block_on(batch.execute()).unwrap();
    let tx: Vec<f32> = x.iter().map(|v| v.tanh()).collect();
    check_reduce("batch norm_l1 (async)", ReduceOp::NormL1, block_on(batch.read(s)).unwrap()[0], &tx, None);
}

#[test]
fn binary_ops_match_f64_reference() {
    let Some(d) = device("binary_ops_match_f64_reference") else { return };
    for &n in SIZES {
        let (a, b) = (data(n, 1, 10.0), data(n, 2, 10.0));
        let mut out = vec![f32::NAN; n];
        d.vec_add(&a, &b, &mut out).unwrap();
        close("add", &out, &a.iter().zip(&b).map(|(&x, &y)| x as f64 + y as f64).collect::<Vec<_>>(), 1e-7, 1e-6);
        d.vec_sub(&a, &b, &mut out).unwrap();
        close("sub", &out, &a.iter().zip(&b).map(|(&x, &y)| x as f64 - y as f64).collect::<Vec<_>>(), 1e-7, 1e-6);
        d.vec_mul(&a, &b, &mut out).unwrap();
        close("mul", &out, &a.iter().zip(&b).map(|(&x, &y)| x as f64 * y as f64).collect::<Vec<_>>(), 1e-7, 1e-6);
    }
}

/// What one element contributes to `op`, in f64.
fn reduce_load(op: ReduceOp, x: &[f32], y: Option<&[f32]>, i: usize) -> f64 {
    let v = x[i] as f64;
    match op.load() {
        ReduceLoad::Plain => v,
        ReduceLoad::Abs => v.abs(),
        ReduceLoad::Square => v * v,
        ReduceLoad::Product => v * y.expect("dot has y")[i] as f64,
    }
}

/// `got` against `op.reference`: max/min/norm_inf exact, sums within 2e-6 of Σ|contribution|,
/// NaN and ±inf exactly where the reference has them.
fn check_reduce(what: &str, op: ReduceOp, got: f32, x: &[f32], y: Option<&[f32]>) {
    let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let yd: Option<Vec<f64>> = y.map(|y| y.iter().map(|&v| v as f64).collect());
    let want = op.reference(&xd, yd.as_deref()).expect("non-empty");
    let n = x.len();
    if want.is_nan() || got.is_nan() {
        assert!(want.is_nan() && got.is_nan(), "{what} {op:?} n={n}: got {got}, want {want}");
        return;
    }
    if want.is_infinite() || got.is_infinite() {
        assert_eq!(got as f64, want, "{what} {op:?} n={n}");
        return;
    }
    let got = got as f64;
    match op.combine() {
        ReduceCombine::Max | ReduceCombine::Min => assert_eq!(got, want, "{what} {op:?} n={n}"),
        ReduceCombine::Sum => {
            let mag: f64 = (0..n).map(|i| reduce_load(op, x, y, i).abs()).sum();
            // norm_l2 relative only: an absolute term would hide a norm of 1e-29 computed as 0.
            let tol = if op == ReduceOp::NormL2 { 4e-6 * want } else { 2e-6 * mag + 1e-6 };
            assert!((got - want).abs() <= tol, "{what} {op:?} n={n}: got {got}, want {want}");
        }
    }
}

/// The named host method of each reduction.
fn named_reduce(d: &GpuDevice, op: ReduceOp, x: &[f32], y: &[f32]) -> rayo::Result<f32> {
    match op {
        ReduceOp::Sum => d.sum(x),
        ReduceOp::Max => d.max(x),
        ReduceOp::Min => d.min(x),
        ReduceOp::Dot => d.dot(x, y),
        ReduceOp::NormL1 => d.norm_l1(x),
        ReduceOp::NormL2 => d.norm_l2(x),
        ReduceOp::NormInf => d.norm_inf(x),
    }
}

/// Every form of one reduction (host named, host generic, resident, batch generic and named)
/// against the f64 reference.
fn check_reduce_all_forms(d: &GpuDevice, op: ReduceOp, x: &[f32], y: &[f32]) {
    let yy = (op == ReduceOp::Dot).then_some(y);
    check_reduce("named", op, named_reduce(d, op, x, y).unwrap(), x, yy);
    check_reduce("reduce", op, d.reduce(op, x, yy).unwrap(), x, yy);
    let (bx, by) = (d.upload(x).unwrap(), d.upload(y).unwrap());
    let r = d.reduce_resident(op, &bx, yy.map(|_| &by)).unwrap();
    check_reduce("resident", op, r.read().unwrap()[0], x, yy);
    let mut batch = GpuCommandBatch::new(d.clone());
    let (ix, iy) = (batch.upload(x), batch.upload(y));
    let g = batch.reduce(op, ix, yy.map(|_| iy));
    let named = match op {
        ReduceOp::Sum => batch.sum(ix),
        ReduceOp::Max => batch.max(ix),
        ReduceOp::Min => batch.min(ix),
        ReduceOp::Dot => batch.dot(ix, iy),
        ReduceOp::NormL1 => batch.norm_l1(ix),
        ReduceOp::NormL2 => batch.norm_l2(ix),
        ReduceOp::NormInf => batch.norm_inf(ix),
    };
    batch.execute_blocking().unwrap();
    check_reduce("batch", op, batch.read_blocking(g).unwrap()[0], x, yy);
    check_reduce("batch named", op, batch.read_blocking(named).unwrap()[0], x, yy);
}

#[test]
fn every_reduction_in_every_form_matches_f64_reference() {
    let Some(d) = device("every_reduction_in_every_form_matches_f64_reference") else { return };
    // The one ReduceOp of every backend.
    let _same_type: rayo::ops::ReduceOp = ReduceOp::NormL2;
    for &n in SIZES.iter().chain(&[1024]) {
        let (x, y) = (data(n, 5 + n as u64, 3.0), data(n, 6, 3.0));
        for op in ReduceOp::ALL {
            check_reduce_all_forms(&d, op, &x, &y);
        }
    }
    // Long inputs: several stages (and the vec4 and scalar first stages).
    for &n in &[1024 * 256 + 1, 1024 * 256 * 3 + 16, 1 << 20] {
        let (x, y) = (data(n, 5 + n as u64, 3.0), data(n, 6, 3.0));
        for op in ReduceOp::ALL {
            let yy = (op == ReduceOp::Dot).then_some(&y[..]);
            check_reduce("reduce", op, d.reduce(op, &x, yy).unwrap(), &x, yy);
        }
    }
    // All-negative input: max must not be a 0 from padding.
    assert_eq!(d.max(&[-5.0; 300]).unwrap(), -5.0);
    assert_eq!(d.min(&[5.0; 300]).unwrap(), 5.0);
    assert_eq!(d.norm_inf(&[-5.0; 300]).unwrap(), 5.0);
}

#[test]
fn reductions_propagate_nan_and_inf_as_the_reference() {
    let Some(d) = device("reductions_propagate_nan_and_inf_as_the_reference") else { return };
    // 1024: vec4 first stage (a NaN in one lane); 1027: scalar; 7: one workgroup.
    for &n in &[7usize, 1024, 1027] {
        let y = data(n, 8, 2.0);
        for at in [0, n / 2 + 1, n - 1] {
            for special in [&[f32::NAN][..], &[f32::INFINITY], &[f32::NEG_INFINITY], &[f32::INFINITY, f32::NEG_INFINITY]] {
                let mut x = data(n, 7, 2.0);
                for (k, &v) in special.iter().enumerate() {
                    x[(at + k * 3) % n] = v;
                }
                for op in ReduceOp::ALL {
                    check_reduce_all_forms(&d, op, &x, &y);
                }
            }
        }
    }
    // A NaN in a later chunk of a chunked host reduction.
    let small = d.with_binding_limit(4096);
    let mut x = data(5000, 9, 1.0);
    x[4500] = f32::NAN;
    for op in [ReduceOp::Max, ReduceOp::Min, ReduceOp::NormInf, ReduceOp::Sum] {
        assert!(small.reduce(op, &x, None).unwrap().is_nan(), "{op:?}");
    }
    x[4500] = 1.0;
    check_reduce("chunked", ReduceOp::NormL2, small.norm_l2(&x).unwrap(), &x, None);
}

/// Squares of 1e30 overflow f32 and squares of 1e-30 vanish; the CPU's norm_l2 avoids both,
/// and so must every wgpu form (host, chunked host, resident, batch).
#[test]
fn norm_l2_neither_overflows_nor_underflows() {
    let Some(d) = device("norm_l2_neither_overflows_nor_underflows") else { return };
    let small = d.with_binding_limit(4096);
    for scale in [1e30f32, 1e-30, 1.0] {
        for n in [2usize, 1027, 5000] {
            let x: Vec<f32> = data(n, 17, 1.0).iter().map(|v| v * scale).collect();
            let want = ReduceOp::NormL2.reference(&x.iter().map(|&v| v as f64).collect::<Vec<_>>(), None).unwrap();
            let cpu = Vector::from_slice(&x).norm_l2() as f64;
            assert!((cpu - want).abs() <= 1e-5 * want, "CPU {scale} n={n}: {cpu} vs {want}");
            check_reduce_all_forms(&d, ReduceOp::NormL2, &x, &x);
            check_reduce("chunked", ReduceOp::NormL2, small.norm_l2(&x).unwrap(), &x, None);
        }
    }
    assert_eq!(d.norm_l2(&[3e30, -4e30]).unwrap(), 5e30);
    assert_eq!(d.norm_l2(&[0.0; 9]).unwrap(), 0.0);
    assert_eq!(small.norm_l2(&vec![0.0; 3000]).unwrap(), 0.0);
    assert_eq!(small.norm_l2(&[vec![1.0; 2000], vec![f32::NEG_INFINITY], vec![1.0; 2000]].concat()).unwrap(), f32::INFINITY);
    assert!(small.norm_l2(&[vec![1.0; 2000], vec![f32::INFINITY, f32::NAN], vec![1.0; 2000]].concat()).unwrap().is_nan());
}

#[test]
fn empty_reductions_and_errors_are_the_cpus() {
    let Some(d) = device("empty_reductions_and_errors_are_the_cpus") else { return };
    let empty = Vector::from_slice(&[]);
    for op in ReduceOp::ALL {
        let e = empty.as_slice();
        let want = match op {
            ReduceOp::Max => empty.max(),
            ReduceOp::Min => empty.min(),
            ReduceOp::Dot => empty.dot(&empty),
            ReduceOp::Sum => Ok(empty.sum()),
            ReduceOp::NormL1 => Ok(empty.norm_l1()),
            ReduceOp::NormL2 => Ok(empty.norm_l2()),
            ReduceOp::NormInf => Ok(empty.norm_inf()),
        };
        assert_eq!(op.empty_value().ok_or(Error::EmptyInput { op: op.name() }), want, "{op:?}");
        let yy = (op == ReduceOp::Dot).then_some(e);
        assert_eq!(d.reduce(op, e, yy), want, "{op:?}");
        assert_eq!(named_reduce(&d, op, e, e), want, "{op:?}");
        let b = d.zeros(0).unwrap();
        assert_eq!(d.reduce_resident(op, &b, yy.map(|_| &b)).and_then(|r| r.read()).map(|v| v[0]), want, "{op:?}");
        let mut batch = GpuCommandBatch::new(d.clone());
        let i = batch.upload(e);
        let r = batch.reduce(op, i, yy.map(|_| i));
        match want {
            Ok(v) => {
                batch.execute_blocking().unwrap();
                assert_eq!(batch.read_blocking(r).unwrap(), vec![v], "{op:?}");
            }
            Err(e) => assert_eq!(batch.execute_blocking(), Err(e), "{op:?}"),
        }
    }
    let (a, b) = (Vector::from_slice(&[1.0; 3]), Vector::from_slice(&[1.0; 2]));
    assert_eq!(d.dot(a.as_slice(), b.as_slice()), a.dot(&b));
    // y exactly for dot.
    assert!(matches!(d.reduce(ReduceOp::Dot, &[1.0], None), Err(Error::InvalidArgument { op: "dot", name: "y", .. })));
    assert!(matches!(d.reduce(ReduceOp::Sum, &[1.0], Some(&[1.0])), Err(Error::InvalidArgument { op: "sum", name: "y", .. })));
    // softmax: the CPU's variant for each condition.
    let (x3, mut out2, mut out3) = (Vector::from_slice(&[1.0; 3]), vec![0.0; 2], vec![0.0; 3]);
    assert_eq!(d.softmax(x3.as_slice(), &mut out2), x3.softmax_into(&mut out2));
    assert_eq!(d.log_softmax(x3.as_slice(), &mut out2), x3.log_softmax_into(&mut out2));
    assert_eq!(d.softmax(&[], &mut []), empty.softmax_into(&mut []));
    assert_eq!(d.log_softmax(&[], &mut []), empty.log_softmax_into(&mut []));
    assert_eq!(d.softmax(&[], &mut out3), empty.softmax_into(&mut out3));
}

fn softmax_ref(x: &[f32], log: bool) -> Vec<f64> {
    let m = x.iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = x.iter().map(|&v| (v as f64 - m).exp()).sum();
    x.iter().map(|&v| if log { v as f64 - m - s.ln() } else { (v as f64 - m).exp() / s }).collect()
}

#[test]
fn softmax_and_log_softmax_match_f64_reference() {
    let Some(d) = device("softmax_and_log_softmax_match_f64_reference") else { return };
    for &n in SIZES.iter().chain(&[5000]) {
        let x = data(n, 9, 20.0);
        let mut out = vec![f32::NAN; n];
        d.softmax(&x, &mut out).unwrap();
        close("softmax", &out, &softmax_ref(&x, false), 2e-5, 1e-9);
        d.log_softmax(&x, &mut out).unwrap();
        close("log_softmax", &out, &softmax_ref(&x, true), 2e-6, 2e-5);
    }
    // Large values do not overflow.
    let mut out = vec![0.0; 2];
    d.softmax(&[1000.0, 1000.0], &mut out).unwrap();
    assert_eq!(out, vec![0.5, 0.5]);
}

fn softmax_rows_ref(x: &[f32], cols: usize, log: bool) -> Vec<f64> {
    x.chunks(cols).flat_map(|r| softmax_ref(r, log)).collect()
}

#[test]
fn softmax_rows_match_f64_reference_in_every_form() {
    let Some(d) = device("softmax_rows_match_f64_reference_in_every_form") else { return };
    // (1, 5000) takes the multi-stage path; the others one workgroup per row; 70000 rows need
    // a second grid dimension.
    for &(rows, cols) in &[(1, 1), (3, 7), (5, 257), (64, 1000), (2, 5000), (1, 5000), (70000, 1), (300, 3)] {
        let x = data(rows * cols, 13 + rows as u64, 20.0);
        for log in [false, true] {
            let want = softmax_rows_ref(&x, cols, log);
            let (rel, abs) = if log { (2e-6, 2e-5) } else { (2e-5, 1e-9) };
            let what = format!("{}softmax_rows {rows}x{cols}", if log { "log_" } else { "" });
            let mut out = vec![f32::NAN; x.len()];
            if log { d.log_softmax_rows(&x, rows, cols, &mut out) } else { d.softmax_rows(&x, rows, cols, &mut out) }.unwrap();
            close(&what, &out, &want, rel, abs);
            let bx = d.upload(&x).unwrap();
            let mut bo = d.zeros(x.len()).unwrap();
            if log { d.log_softmax_rows_resident(&bx, rows, cols, &mut bo) } else { d.softmax_rows_resident(&bx, rows, cols, &mut bo) }.unwrap();
            close(&format!("{what} resident"), &bo.read().unwrap(), &want, rel, abs);
            let mut batch = GpuCommandBatch::new(d.clone());
            let ix = batch.upload(&x);
            let r = if log { batch.log_softmax_rows(ix, rows, cols) } else { batch.softmax_rows(ix, rows, cols) };
            batch.execute_blocking().unwrap();
            close(&format!("{what} batch"), &batch.read_blocking(r).unwrap(), &want, rel, abs);
        }
    }
    // The 1-D resident forms.
    let x = data(300, 14, 5.0);
    let bx = d.upload(&x).unwrap();
    let mut bo = d.zeros(300).unwrap();
    d.log_softmax_resident(&bx, &mut bo).unwrap();
    close("log_softmax resident", &bo.read().unwrap(), &softmax_ref(&x, true), 2e-6, 2e-5);
}

#[test]
fn softmax_rows_with_nan_or_infinite_max_are_all_nan_as_on_the_cpu() {
    let Some(d) = device("softmax_rows_with_nan_or_infinite_max_are_all_nan_as_on_the_cpu") else { return };
    for cols in [5usize, 300, 5000] {
        let rows = 4;
        let mut x = data(rows * cols, 15, 3.0);
        x[cols + cols / 2] = f32::NAN; // row 1
        x[2 * cols + 1] = f32::INFINITY; // row 2
        for v in &mut x[3 * cols..] {
            *v = f32::NEG_INFINITY; // row 3
        }
        for log in [false, true] {
            let mut out = vec![0.0; x.len()];
            if log { d.log_softmax_rows(&x, rows, cols, &mut out) } else { d.softmax_rows(&x, rows, cols, &mut out) }.unwrap();
            close("row 0", &out[..cols], &softmax_ref(&x[..cols], log), 2e-5, 2e-5);
            assert!(out[cols..].iter().all(|v| v.is_nan()), "rows 1..4 of {cols} cols (log={log}): {:?}", &out[cols..cols + 3]);
            // Each row alone through the 1-D form (the multi-stage path for 5000) and the CPU.
            for r in 1..rows {
                let row = &x[r * cols..(r + 1) * cols];
                let mut o = vec![0.0; cols];
                if log { d.log_softmax(row, &mut o) } else { d.softmax(row, &mut o) }.unwrap();
                assert!(o.iter().all(|v| v.is_nan()), "1-D row {r} of {cols} (log={log})");
                let mut c = vec![0.0; cols];
                let v = Vector::from_slice(row);
                if log { v.log_softmax_into(&mut c) } else { v.softmax_into(&mut c) }.unwrap();
                assert!(c.iter().all(|v| v.is_nan()), "CPU row {r}");
            }
        }
    }
}

#[test]
fn softmax_rows_shape_errors() {
    let Some(d) = device("softmax_rows_shape_errors") else { return };
    let mut out = vec![0.0; 6];
    assert_eq!(d.softmax_rows(&[1.0; 6], 2, 4, &mut out), Err(Error::SizeMismatch { op: "softmax", shape: vec![2, 4], len: 6 }));
    assert_eq!(d.log_softmax_rows(&[1.0; 6], 4, 2, &mut out[..5]), Err(Error::LengthMismatch { op: "log_softmax", expected: 6, actual: 5 }));
    assert_eq!(d.softmax_rows(&[1.0; 6], usize::MAX, 2, &mut out), Err(Error::SizeMismatch { op: "softmax", shape: vec![usize::MAX, 2], len: 6 }));
    assert_eq!(d.softmax_rows(&[], 0, 5, &mut []), Err(Error::EmptyInput { op: "softmax" }));
    let (bx, mut bo) = (d.upload(&[1.0; 6]).unwrap(), d.zeros(6).unwrap());
    assert_eq!(d.softmax_rows_resident(&bx, 3, 3, &mut bo), Err(Error::SizeMismatch { op: "softmax", shape: vec![3, 3], len: 6 }));
    let mut batch = GpuCommandBatch::new(d.clone());
    let i = batch.upload(&[1.0; 6]);
    let _ = batch.log_softmax_rows(i, 5, 1);
    assert_eq!(batch.execute_blocking(), Err(Error::SizeMismatch { op: "log_softmax", shape: vec![5, 1], len: 6 }));
}

fn matmul_ref(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut c = vec![0.0; m * n];
    let mut mag = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let av = a[i * k + p] as f64;
            for j in 0..n {
                c[i * n + j] += av * b[p * n + j] as f64;
                mag[i * n + j] += (av * b[p * n + j] as f64).abs();
            }
        }
    }
    (c, mag)
}

#[test]
fn matmul_matches_f64_reference_on_awkward_shapes() {
    let Some(d) = device("matmul_matches_f64_reference_on_awkward_shapes") else { return };
    for &(m, k, n) in &[(1, 1, 1), (7, 5, 3), (1, 300, 1), (129, 33, 257), (128, 128, 128), (200, 300, 150), (3, 1, 260), (256, 17, 1)] {
        let a = data(m * k, 11, 2.0);
        let b = data(k * n, 12, 2.0);
        let mut c = vec![f32::NAN; m * n];
        d.matmul(&a, &b, &mut c, m, k, n).unwrap();
        let (want, mag) = matmul_ref(&a, &b, m, k, n);
        for i in 0..m * n {
            let err = (c[i] as f64 - want[i]).abs();
            assert!(err <= 1e-6 * mag[i] + 1e-6, "matmul {m}x{k}x{n} [{i}]: {} vs {}", c[i], want[i]);
        }
    }
    // k = 0: an empty sum is zero.
    let mut c = vec![f32::NAN; 6];
    d.matmul(&[], &[], &mut c, 2, 0, 3).unwrap();
    assert_eq!(c, vec![0.0; 6]);
}

#[test]
fn convolve2d_matches_f64_reference() {
    let Some(d) = device("convolve2d_matches_f64_reference") else { return };
    for &(h, w, kh, kw) in &[(1, 1, 1, 1), (7, 9, 3, 2), (33, 40, 5, 5), (20, 17, 20, 1)] {
        let img = data(h * w, 21, 3.0);
        let ker = data(kh * kw, 22, 1.0);
        let (oh, ow) = (h - kh + 1, w - kw + 1);
        let mut out = vec![f32::NAN; oh * ow];
        d.convolve2d(&img, &ker, &mut out, h, w, kh, kw).unwrap();
        let mut want = vec![0.0f64; oh * ow];
        for y in 0..oh {
            for x in 0..ow {
                for i in 0..kh {
                    for j in 0..kw {
                        want[y * ow + x] += img[(y + i) * w + x + j] as f64 * ker[i * kw + j] as f64;
                    }
                }
            }
        }
        close("convolve2d", &out, &want, 1e-5, 1e-5);
    }
}

#[test]
fn chunked_inputs_match_cpu() {
    let Some(d) = device("chunked_inputs_match_cpu") else { return };
    // A 4 KiB binding limit: 1024 floats per chunk, so 65537 elements take 65 chunks.
    let small = d.with_binding_limit(4096);
    assert_eq!(small.max_binding_bytes(), 4096);
    let n = 65537;
    let (x, y) = (data(n, 31, 5.0), data(n, 32, 5.0));
    let mut out = vec![f32::NAN; n];
    let mut full = vec![f32::NAN; n];
    small.gelu(&x, &mut out).unwrap();
    d.gelu(&x, &mut full).unwrap();
    assert_eq!(out, full);
    small.vec_add(&x, &y, &mut out).unwrap();
    assert!(out.iter().zip(x.iter().zip(&y)).all(|(o, (a, b))| *o == a + b));
    let cpu_sum: f64 = x.iter().map(|&v| v as f64).sum();
    let abs_sum: f64 = x.iter().map(|v| v.abs() as f64).sum();
    assert!((small.sum(&x).unwrap() as f64 - cpu_sum).abs() <= 1e-6 * abs_sum);
    let cpu_dot: f64 = x.iter().zip(&y).map(|(&a, &b)| a as f64 * b as f64).sum();
    let dot_mag: f64 = x.iter().zip(&y).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum();
    assert!((small.dot(&x, &y).unwrap() as f64 - cpu_dot).abs() <= 1e-6 * dot_mag);
    assert_eq!(small.max(&x).unwrap(), x.iter().cloned().fold(f32::MIN, f32::max));
    assert_eq!(small.min(&x).unwrap(), x.iter().cloned().fold(f32::MAX, f32::min));
    // What cannot be chunked is refused with the limit in the error.
    let e = small.softmax(&x, &mut out).unwrap_err();
    assert_eq!(e, Error::BufferTooLarge { op: "softmax", bytes: n as u64 * 4, limit: 4096 });
    assert!(e.to_string().contains("4096"), "{e}");
    let mut c = vec![0.0; 64 * 64];
    let e = small.matmul(&vec![1.0; 64 * 32], &vec![1.0; 32 * 64], &mut c, 64, 32, 64).unwrap_err();
    assert!(matches!(e, Error::BufferTooLarge { op: "matmul", limit: 4096, .. }), "{e:?}");
    assert!(matches!(small.upload(&x), Err(Error::BufferTooLarge { limit: 4096, .. })));
    let mut batch = GpuCommandBatch::new(small);
    let id = batch.upload(&x);
    let _ = batch.relu(id);
    assert!(matches!(block_on(batch.execute()), Err(Error::BufferTooLarge { limit: 4096, .. })));
}

#[test]
fn resident_buffers_chain_without_host_copies() {
    let Some(d) = device("resident_buffers_chain_without_host_copies") else { return };
    let n = 4099;
    let (x, y) = (data(n, 41, 3.0), data(n, 42, 3.0));
    let (bx, by) = (d.upload(&x).unwrap(), d.upload(&y).unwrap());
    let mut t = d.zeros(n).unwrap();
    let mut u = d.zeros(n).unwrap();
    d.apply(UnaryOp::Tanh, &bx, &mut t).unwrap();
    d.apply_binary(BinaryOp::Mul, &t, &by, &mut u).unwrap();
    let got = u.read().unwrap();
    let want: Vec<f64> = x.iter().zip(&y).map(|(&a, &b)| (a as f64).tanh() * b as f64).collect();
    close("tanh*y", &got, &want, 1e-5, 1e-6);
    let s = d.reduce_resident(ReduceOp::Sum, &u, None).unwrap();
    let host: f64 = got.iter().map(|&v| v as f64).sum();
    assert!((s.read().unwrap()[0] as f64 - host).abs() < 1e-3);
    let dt = d.dot_resident(&bx, &by).unwrap().read().unwrap()[0];
    check_reduce("dot_resident", ReduceOp::Dot, dt, &x, Some(&y));
    let mut sm = d.zeros(n).unwrap();
    d.softmax_resident(&bx, &mut sm).unwrap();
    close("softmax resident", &sm.read().unwrap(), &softmax_ref(&x, false), 2e-5, 1e-9);
    let (a, b) = (d.upload(&x[..30 * 40]).unwrap(), d.upload(&y[..40 * 20]).unwrap());
    let mut c = d.zeros(30 * 20).unwrap();
    d.matmul_resident(&a, &b, &mut c, 30, 40, 20).unwrap(); // (a, b, c, m, k, n) as the host form
    let (want, mag) = matmul_ref(&x[..1200], &y[..800], 30, 40, 20);
    let got = c.read().unwrap();
    for i in 0..600 {
        assert!((got[i] as f64 - want[i]).abs() <= 1e-6 * mag[i] + 1e-6, "matmul_resident [{i}]: {} vs {}", got[i], want[i]);
    }
    assert_eq!(d.zeros(5).unwrap().read().unwrap(), vec![0.0; 5]);
    d.synchronize().unwrap();
}

#[test]
fn pipelines_are_compiled_once_and_buffers_pooled() {
    let Some(_) = device("pipelines_are_compiled_once_and_buffers_pooled") else { return };
    // A device of its own: tests on the shared one compile pipelines concurrently.
    let d = block_on(GpuDevice::new_dedicated_async()).unwrap();
    let x = data(1000, 51, 2.0);
    let mut out = vec![0.0; 1000];
    d.elu(&x, 0.5, &mut out).unwrap();
    let compiled = d.pipelines_compiled();
    for alpha in [0.1, 0.2, 0.3] {
        d.elu(&x, alpha, &mut out).unwrap(); // parameters travel in the uniform: same pipeline
    }
    d.sum(&x).unwrap();
    let after_sum = d.pipelines_compiled();
    d.elu(&x, 0.7, &mut out).unwrap();
    d.sum(&x).unwrap();
    assert_eq!(d.pipelines_compiled(), after_sum);
    assert!(after_sum <= compiled + 2);
    assert!(d.pooled_bytes() > 0, "buffers go back to the pool");
}

fn chain_by_op(d: &GpuDevice, x: &[f32], y: &[f32]) -> Vec<f32> {
    let n = x.len();
    let (mut a, mut b, mut c, mut e) = (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    d.relu(x, &mut a).unwrap();
    d.scale(&a, 2.0, &mut b).unwrap();
    d.vec_add(&b, x, &mut c).unwrap();
    d.vec_mul(&c, y, &mut e).unwrap();
    e
}

#[test]
fn batch_equals_op_by_op_and_fused_equals_unfused() {
    let Some(d) = device("batch_equals_op_by_op_and_fused_equals_unfused") else { return };
    for &n in &[1usize, 257, 4096, 65537] {
        let (x, y) = (data(n, 61, 4.0), data(n, 62, 4.0));
        let want = chain_by_op(&d, &x, &y);
        let mut results = Vec::new();
        for fuse in [true, false] {
            let mut batch = GpuCommandBatch::new(d.clone());
            batch.set_fusion(fuse);
            let input = batch.upload(&x);
            let yy = batch.upload(&y);
            let a = batch.relu(input);
            let b = batch.scale(a, 2.0);
            let c = batch.add(b, input);
            let e = batch.mul(c, yy);
            let s = batch.sum(e);
            let g = batch.gelu(e);
            let mx = batch.max(g);
            block_on(batch.execute()).unwrap();
            let st = batch.stats();
            assert_eq!(st.submits, 1);
            assert_eq!(st.elementwise_ops, 5);
            // relu·scale·add·mul fuse into one kernel; the sum ends the run; gelu is a second.
            assert_eq!(st.elementwise_kernels, if fuse { 2 } else { 5 }, "fuse={fuse}");
            let got = block_on(batch.read(e)).unwrap();
            assert_eq!(got, want, "batch (fuse={fuse}) vs op by op, n={n}");
            // A value fused away inside the kernel is still readable.
            let mid = block_on(batch.read(b)).unwrap();
            let mut b_ref = vec![0.0; n];
            d.relu(&x, &mut b_ref).unwrap();
            let b_ref2: Vec<f32> = b_ref.iter().map(|v| v * 2.0).collect();
            assert_eq!(mid, b_ref2);
            let sum = block_on(batch.read(s)).unwrap();
            let mut gl = vec![0.0; n];
            d.gelu(&want, &mut gl).unwrap();
            assert_eq!(block_on(batch.read(g)).unwrap(), gl);
            assert_eq!(block_on(batch.read(mx)).unwrap()[0], d.max(&gl).unwrap());
            results.push((got, sum));
        }
        assert_eq!(results[0], results[1], "fused == unfused, n={n}");
    }
}

#[test]
fn batch_runs_softmax_matmul_dot() {
    let Some(d) = device("batch_runs_softmax_matmul_dot") else { return };
    let x = data(6 * 4, 71, 2.0);
    let w = data(4 * 5, 72, 2.0);
    let mut batch = GpuCommandBatch::new(d.clone());
    let bx = batch.upload(&x);
    let bw = batch.upload(&w);
    let h = batch.matmul(bx, bw, 6, 4, 5);
    let r = batch.relu(h);
    let p = batch.softmax(r);
    let lp = batch.log_softmax(r);
    let dt = batch.dot(p, r);
    let mn = batch.min(r);
    batch.execute_blocking().unwrap();
    let mut hh = vec![0.0; 30];
    d.matmul(&x, &w, &mut hh, 6, 4, 5).unwrap();
    // (a, b, m, k, n): the host and resident forms' order, checked against f64.
    let (want, mag) = matmul_ref(&x, &w, 6, 4, 5);
    let got = batch.read_blocking(h).unwrap();
    for i in 0..30 {
        assert!((got[i] as f64 - want[i]).abs() <= 1e-6 * mag[i] + 1e-6, "batch matmul [{i}]: {} vs {}", got[i], want[i]);
    }
    let mut rr = vec![0.0; 30];
    d.relu(&hh, &mut rr).unwrap();
    let mut pp = vec![0.0; 30];
    d.softmax(&rr, &mut pp).unwrap();
    assert_eq!(batch.read_blocking(p).unwrap(), pp);
    d.log_softmax(&rr, &mut pp).unwrap();
    assert_eq!(batch.read_blocking(lp).unwrap(), pp);
    d.softmax(&rr, &mut pp).unwrap();
    assert!((batch.read_blocking(dt).unwrap()[0] - d.dot(&pp, &rr).unwrap()).abs() < 1e-5);
    assert_eq!(batch.read_blocking(mn).unwrap()[0], d.min(&rr).unwrap());
}

#[test]
fn bad_input_is_an_error_never_a_panic() {
    let Some(d) = device("bad_input_is_an_error_never_a_panic") else { return };
    let mut out = vec![0.0; 3];
    assert_eq!(d.relu(&[1.0; 4], &mut out), Err(Error::LengthMismatch { op: "relu", expected: 4, actual: 3 }));
    assert_eq!(d.vec_add(&[1.0; 3], &[1.0; 2], &mut out), Err(Error::LengthMismatch { op: "add", expected: 3, actual: 2 }));
    assert!(matches!(d.clip(&[1.0; 3], 2.0, 1.0, &mut out), Err(Error::InvalidParameter { op: "clip", .. })));
    // A NaN alpha is not an error (IEEE products, as on the CPU and in PyTorch): NaN for x ≤ 0.
    d.elu(&[1.0, -1.0, 0.5], f32::NAN, &mut out).unwrap();
    assert!(out[0] == 1.0 && out[1].is_nan() && out[2] == 0.5, "{out:?}");
    assert_eq!(d.dot(&[1.0; 3], &[1.0; 2]), Err(Error::LengthMismatch { op: "dot", expected: 3, actual: 2 }));
    assert_eq!(d.max(&[]), Err(Error::EmptyInput { op: "max" }));
    assert_eq!(d.min(&[]), Err(Error::EmptyInput { op: "min" }));
    assert_eq!(d.softmax(&[], &mut []), Err(Error::EmptyInput { op: "softmax" }));
    assert_eq!(d.log_softmax(&[], &mut []), Err(Error::EmptyInput { op: "log_softmax" }));
    assert_eq!(d.softmax(&[1.0; 2], &mut out), Err(Error::LengthMismatch { op: "softmax", expected: 2, actual: 3 }));
    let mut c = vec![0.0; 6];
    assert_eq!(d.matmul(&[1.0; 5], &[1.0; 6], &mut c, 2, 3, 2), Err(Error::SizeMismatch { op: "matmul", shape: vec![2, 3], len: 5 }));
    assert_eq!(d.matmul(&[1.0; 6], &[1.0; 6], &mut c, 2, 3, 2), Err(Error::SizeMismatch { op: "matmul", shape: vec![2, 2], len: 6 }));
    assert!(matches!(d.matmul(&[], &[], &mut c, usize::MAX, 2, 2), Err(Error::SizeOverflow { op: "matmul", .. })));
    let mut o = vec![0.0; 4];
    assert_eq!(
        d.convolve2d(&[1.0; 4], &[1.0; 9], &mut o, 2, 2, 3, 3),
        Err(Error::ShapeMismatch { op: "convolve2d", left: vec![2, 2], right: vec![3, 3] })
    );
    assert_eq!(d.convolve2d(&[1.0; 4], &[], &mut o, 2, 2, 0, 1), Err(Error::ShapeMismatch { op: "convolve2d", left: vec![2, 2], right: vec![0, 1] }));
    assert_eq!(d.convolve2d(&[1.0; 9], &[1.0; 4], &mut o, 3, 3, 2, 2), Ok(()));
    assert_eq!(o, vec![4.0; 4]);
    assert_eq!(d.convolve2d(&[1.0; 9], &[1.0; 4], &mut out, 3, 3, 2, 2), Err(Error::SizeMismatch { op: "convolve2d", shape: vec![2, 2], len: 3 }));
    // Device-resident shapes.
    let a = d.upload(&[1.0; 4]).unwrap();
    let mut b = d.zeros(3).unwrap();
    assert_eq!(d.apply(UnaryOp::Relu, &a, &mut b), Err(Error::LengthMismatch { op: "relu", expected: 4, actual: 3 }));
    assert!(matches!(d.reduce_resident(ReduceOp::Max, &d.zeros(0).unwrap(), None), Err(Error::EmptyInput { op: "max" })));
    let mut buf = vec![0.0; 2];
    assert!(block_on(a.read_into_async(&mut buf)).is_err());
    // Batches report recording errors at execute, and reads before execute.
    let mut batch = GpuCommandBatch::new(d.clone());
    let p = batch.upload(&[1.0; 3]);
    let q = batch.upload(&[1.0; 4]);
    let r = batch.add(p, q);
    // A read in a batch that failed to record reports that failure.
    assert_eq!(block_on(batch.read(r)), Err(Error::LengthMismatch { op: "add", expected: 3, actual: 4 }));
    assert_eq!(block_on(batch.execute()), Err(Error::LengthMismatch { op: "add", expected: 3, actual: 4 }));
    let mut fine = GpuCommandBatch::new(d.clone());
    let f = fine.upload(&[1.0]);
    assert!(matches!(block_on(fine.read(f)), Err(Error::InvalidArgument { op: "GpuCommandBatch::read", .. })));
    let mut batch = GpuCommandBatch::new(d.clone());
    let e = batch.upload(&[]);
    let _ = batch.max(e);
    assert_eq!(block_on(batch.execute()), Err(Error::EmptyInput { op: "max" }));
    let mut other = GpuCommandBatch::new(d);
    let _ = other.relu(r); // an id this batch never issued
    assert!(matches!(block_on(other.execute()), Err(Error::ForeignBuffer { op: "relu", .. })));
}

/// An id from another batch names a node there too (both batches number their nodes from 0):
/// before ids carried their batch, batch B silently computed on its own node 0.
#[test]
fn a_buffer_id_from_another_batch_is_an_error() {
    let Some(d) = device("a_buffer_id_from_another_batch_is_an_error") else { return };
    let mut a = GpuCommandBatch::new(d.clone());
    let mut b = GpuCommandBatch::new(d.clone());
    assert_ne!(a.id(), b.id());
    let xa = a.upload(&[1.0, -2.0, 3.0]);
    let xb = b.upload(&[10.0, -20.0, 30.0]);
    assert_eq!((xa.batch(), xb.batch()), (a.id(), b.id()));
    let (a_id, b_id) = (a.id(), b.id());
    let foreign = |op| Error::ForeignBuffer { op, user: b_id, owner: a_id };
    assert_eq!(b.len_of(xa), Err(foreign("GpuCommandBatch::len_of")));
    assert_eq!(b.len_of(xb), Ok(3));
    let _ = b.relu(xb);
    b.execute_blocking().unwrap();
    // A read of a foreign id after a good execute.
    assert_eq!(b.read_blocking(xa), Err(foreign("GpuCommandBatch::read")));
    // Every kind of op records the foreign id as the batch's error.
    type Rec = fn(&mut GpuCommandBatch, rayo::gpu::BufferId, rayo::gpu::BufferId) -> rayo::gpu::BufferId;
    let cases: [(&str, Rec); 7] = [
        ("relu", |b, x, _| b.relu(x)),
        ("add", |b, x, y| b.add(y, x)),
        ("sum", |b, x, _| b.sum(x)),
        ("dot", |b, x, y| b.dot(y, x)),
        ("norm_l2", |b, x, _| b.norm_l2(x)),
        ("softmax", |b, x, _| b.softmax_rows(x, 1, 3)),
        ("matmul", |b, x, y| b.matmul(y, x, 1, 3, 1)),
    ];
    for (op, rec) in cases {
        let mut b2 = GpuCommandBatch::new(d.clone());
        let own = b2.upload(&[1.0, 2.0, 3.0]);
        let r = rec(&mut b2, xa, own);
        let want = Error::ForeignBuffer { op, user: b2.id(), owner: a.id() };
        assert_eq!(b2.execute_blocking(), Err(want.clone()), "{op}");
        assert_eq!(b2.read_blocking(r), Err(want), "{op}");
    }
    assert!(foreign("relu").to_string().contains(&a.id().to_string()));
}

/// A device-resident buffer of one device used with another: an error naming both.
#[test]
fn a_buffer_of_another_device_is_an_error() {
    let Some(d) = device("a_buffer_of_another_device_is_an_error") else { return };
    let d2 = block_on(GpuDevice::new_dedicated_async()).unwrap();
    assert_ne!(d.id(), d2.id());
    let x = d2.upload(&[1.0, -1.0]).unwrap();
    let mut out = d.zeros(2).unwrap();
    let foreign = |op| Err(Error::ForeignBuffer { op, user: d.id(), owner: d2.id() });
    assert_eq!(d.apply(UnaryOp::Relu, &x, &mut out), foreign("relu"));
    assert_eq!(d.apply_binary(BinaryOp::Add, &out, &x, &mut d.zeros(2).unwrap()), foreign("add"));
    assert_eq!(d.reduce_resident(ReduceOp::NormL1, &x, None).map(drop), foreign("norm_l1"));
    assert_eq!(d.dot_resident(&out, &x).map(drop), foreign("dot"));
    assert_eq!(d.softmax_rows_resident(&x, 1, 2, &mut out), foreign("softmax"));
    assert_eq!(d.matmul_resident(&x, &d.zeros(2).unwrap(), &mut d.zeros(1).unwrap(), 1, 2, 1), foreign("matmul"));
    // Its own device still takes it.
    let mut o2 = d2.zeros(2).unwrap();
    d2.apply(UnaryOp::Relu, &x, &mut o2).unwrap();
    assert_eq!(o2.read().unwrap(), vec![1.0, 0.0]);
}

/// Sizes near usize::MAX: errors with their numbers, never a panic or a wrapped size (run it in
/// a debug build too, where overflow checks are live).
#[test]
fn hostile_sizes_are_errors_never_panics() {
    let Some(d) = device("hostile_sizes_are_errors_never_panics") else { return };
    let limit = d.max_binding_bytes();
    assert_eq!(d.zeros(1 << 40).unwrap_err(), Error::BufferTooLarge { op: "gpu buffer", bytes: 1 << 42, limit });
    assert!(matches!(d.zeros(usize::MAX), Err(Error::BufferTooLarge { op: "gpu buffer", limit: l, .. }) if l == limit));
    assert!(matches!(d.matmul(&[], &[], &mut [], usize::MAX, 0, usize::MAX), Err(Error::SizeOverflow { op: "matmul", .. })));
    assert_eq!(
        d.softmax_rows(&[], usize::MAX, usize::MAX, &mut []),
        Err(Error::SizeMismatch { op: "softmax", shape: vec![usize::MAX, usize::MAX], len: 0 })
    );
    assert_eq!(
        d.convolve2d(&[], &[1.0], &mut [], usize::MAX, usize::MAX, 1, 1),
        Err(Error::SizeMismatch { op: "convolve2d", shape: vec![usize::MAX, usize::MAX], len: 0 })
    );
    let mut batch = GpuCommandBatch::new(d.clone());
    let e = batch.upload(&[]);
    let _ = batch.matmul(e, e, usize::MAX, 0, usize::MAX);
    assert!(matches!(batch.execute_blocking(), Err(Error::SizeOverflow { op: "matmul", .. })));
    let mut batch = GpuCommandBatch::new(d.clone());
    let e = batch.upload(&[1.0; 4]);
    let _ = batch.softmax_rows(e, usize::MAX, 3);
    assert_eq!(batch.execute_blocking(), Err(Error::SizeMismatch { op: "softmax", shape: vec![usize::MAX, 3], len: 4 }));
    assert!(!rayo::gpu::dispatch::matmul_prefers_gpu(usize::MAX, usize::MAX, usize::MAX));
    assert!(rayo::gpu::dispatch::try_matmul(&[], &[], &mut [], usize::MAX, 2, usize::MAX).is_err());
}

#[test]
fn auto_dispatch_keeps_small_and_software_work_on_the_cpu() {
    use rayo::gpu::dispatch::{matmul_prefers_gpu, try_matmul, MATMUL_CROSSOVER_N};
    let mut c = vec![0.0; 4];
    // Below the crossover: never the GPU.
    assert!(!matmul_prefers_gpu(2, 2, 2));
    assert_eq!(try_matmul(&[1.0; 4], &[1.0; 4], &mut c, 2, 2, 2), Ok(false));
    // Shape errors are errors whatever the size.
    assert!(try_matmul(&[1.0; 3], &[1.0; 4], &mut c, 2, 2, 2).is_err());
    let n = MATMUL_CROSSOVER_N as usize;
    let software = GpuDevice::new().map(|d| d.adapter_info().device_type == "cpu").unwrap_or(true);
    if software {
        // lavapipe (or no adapter): rayo's CPU code is faster, so nothing is offloaded.
        assert!(!matmul_prefers_gpu(n, n, n));
    } else {
        let (a, b) = (data(n * n, 81, 1.0), data(n * n, 82, 1.0));
        let mut c = vec![f32::NAN; n * n];
        assert_eq!(try_matmul(&a, &b, &mut c, n, n, n), Ok(true));
        let mut c2 = vec![0.0; n * n];
        GpuDevice::new().unwrap().matmul(&a, &b, &mut c2, n, n, n).unwrap();
        assert_eq!(c, c2);
    }
}

#[test]
fn a_lost_device_is_an_error_and_the_shared_one_survives() {
    let Some(_) = device("a_lost_device_is_an_error_and_the_shared_one_survives") else { return };
    let d = block_on(GpuDevice::new_dedicated_async()).unwrap();
    let x = d.upload(&[1.0, -1.0]).unwrap();
    d.destroy();
    assert!(d.is_lost());
    let mut out = vec![0.0; 2];
    assert!(matches!(d.relu(&[1.0, -1.0], &mut out), Err(Error::Device { api: "wgpu", .. })));
    assert!(matches!(d.sum(&[1.0]), Err(Error::Device { .. })));
    assert!(matches!(x.read(), Err(Error::Device { .. })));
    assert!(matches!(d.upload(&[1.0]), Err(Error::Device { .. })));
    let mut batch = GpuCommandBatch::new(d.clone());
    let i = batch.upload(&[1.0]);
    let _ = batch.relu(i);
    assert!(matches!(block_on(batch.execute()), Err(Error::Device { .. })));
    // The process's shared device is another device and still works.
    let shared = GpuDevice::new().unwrap();
    assert!(!shared.is_lost());
    assert_eq!(shared.sum(&[1.0, 2.0]).unwrap(), 3.0);
}
