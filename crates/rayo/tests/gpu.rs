//! The wgpu backend against f64 references, run for real (CI: Mesa's lavapipe).
//! Without an adapter every test prints one `SKIP wgpu: <test> (no adapter)` line; with
//! RAYO_REQUIRE_GPU=1 it fails instead.
#![cfg(feature = "gpu")]

use rayo::gpu::{BinaryOp, GpuCommandBatch, GpuDevice, ReduceOp, UnaryOp};
use rayo::ops::{ReduceCombine, ReduceLoad};
use rayo::{Error, Vector};
mod gpu_support;
use gpu_support::*;

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
