//! The wgpu backend against f64 references, run for real (CI: Mesa's lavapipe).
//! Without an adapter every test prints why it skips; with RAYO_REQUIRE_GPU=1 it fails instead.
#![cfg(feature = "gpu")]

use rayo::gpu::{BinaryOp, GpuCommandBatch, GpuDevice, ReduceOp, UnaryOp};
use rayo::Error;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

const SIZES: &[usize] = &[1, 7, 255, 256, 257, 65537];

fn device() -> Option<GpuDevice> {
    match GpuDevice::new() {
        Ok(d) => Some(d),
        Err(e) => {
            if std::env::var("RAYO_REQUIRE_GPU").as_deref() == Ok("1") {
                panic!("RAYO_REQUIRE_GPU=1 but no wgpu device: {e}");
            }
            eprintln!("skipping GPU test: {e}");
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

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn unary_ref(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::LeakyRelu(a) => {
            if x > 0.0 {
                x
            } else {
                a as f64 * x
            }
        }
        UnaryOp::Elu(a) => {
            if x > 0.0 {
                x
            } else {
                a as f64 * x.exp_m1()
            }
        }
        UnaryOp::Sigmoid => sigmoid(x),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Swish => x * sigmoid(x),
        UnaryOp::Gelu => x * 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2),
        UnaryOp::Clip(lo, hi) => x.clamp(lo as f64, hi as f64),
        UnaryOp::Scale(s) => x * s as f64,
    }
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
    let Some(d) = device() else { return };
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
    let Some(d) = device() else { return };
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
            }
            .unwrap();
            let want: Vec<f64> = x.iter().map(|&v| unary_ref(op, v as f64)).collect();
            close(op.name(), &out, &want, 2e-5, 2e-6);
        }
    }
}

#[test]
fn async_forms_match_sync_forms() {
    let Some(d) = device() else { return };
    let d = block_on(GpuDevice::new_async()).unwrap().with_binding_limit(d.max_binding_bytes());
    let x = data(1000, 3, 4.0);
    let y = data(1000, 4, 4.0);
    let (mut a, mut b) = (vec![0.0; 1000], vec![0.0; 1000]);
    block_on(d.gelu_async(&x, &mut a)).unwrap();
    d.gelu(&x, &mut b).unwrap();
    assert_eq!(a, b);
    block_on(d.vec_mul_async(&x, &y, &mut a)).unwrap();
    d.vec_mul(&x, &y, &mut b).unwrap();
    assert_eq!(a, b);
    assert_eq!(block_on(d.sum_async(&x)).unwrap(), d.sum(&x).unwrap());
    let mut c = vec![0.0; 100];
    block_on(d.matmul_async(&x[..100], &y[..100], &mut c, 10, 10, 10)).unwrap();
    let mut c2 = vec![0.0; 100];
    d.matmul(&x[..100], &y[..100], &mut c2, 10, 10, 10).unwrap();
    assert_eq!(c, c2);
}

#[test]
fn binary_ops_match_f64_reference() {
    let Some(d) = device() else { return };
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

#[test]
fn reductions_match_f64_reference() {
    let Some(d) = device() else { return };
    for &n in SIZES.iter().chain(&[1024 * 256 + 1, 1024 * 256 * 3 + 17, 1 << 20]) {
        let (x, y) = (data(n, 5 + n as u64, 3.0), data(n, 6, 3.0));
        let abs_sum: f64 = x.iter().map(|v| v.abs() as f64).sum();
        let s: f64 = x.iter().map(|&v| v as f64).sum();
        let got = d.sum(&x).unwrap() as f64;
        assert!((got - s).abs() <= 1e-6 * abs_sum + 1e-6, "sum n={n}: {got} vs {s}");
        let dot: f64 = x.iter().zip(&y).map(|(&a, &b)| a as f64 * b as f64).sum();
        let scale: f64 = x.iter().zip(&y).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum();
        let got = d.dot(&x, &y).unwrap() as f64;
        assert!((got - dot).abs() <= 1e-6 * scale + 1e-6, "dot n={n}: {got} vs {dot}");
        let mx = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let mn = x.iter().cloned().fold(f32::INFINITY, f32::min);
        assert_eq!(d.max(&x).unwrap(), mx, "max n={n}");
        assert_eq!(d.min(&x).unwrap(), mn, "min n={n}");
    }
    assert_eq!(d.sum(&[]).unwrap(), 0.0);
    assert_eq!(d.dot(&[], &[]).unwrap(), 0.0);
    // All-negative input: max must not be a 0 from padding.
    assert_eq!(d.max(&[-5.0; 300]).unwrap(), -5.0);
    assert_eq!(d.min(&[5.0; 300]).unwrap(), 5.0);
}

fn softmax_ref(x: &[f32], log: bool) -> Vec<f64> {
    let m = x.iter().map(|&v| v as f64).fold(f64::NEG_INFINITY, f64::max);
    let s: f64 = x.iter().map(|&v| (v as f64 - m).exp()).sum();
    x.iter().map(|&v| if log { v as f64 - m - s.ln() } else { (v as f64 - m).exp() / s }).collect()
}

#[test]
fn softmax_and_log_softmax_match_f64_reference() {
    let Some(d) = device() else { return };
    for &n in SIZES {
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
    let Some(d) = device() else { return };
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
    let Some(d) = device() else { return };
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
    let Some(d) = device() else { return };
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
    let Some(d) = device() else { return };
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
    let s = d.reduce_resident(ReduceOp::Sum, &u).unwrap();
    let host: f64 = got.iter().map(|&v| v as f64).sum();
    assert!((s.read().unwrap()[0] as f64 - host).abs() < 1e-3);
    let dt = d.dot_resident(&bx, &by).unwrap().read().unwrap()[0];
    assert!((dt - d.dot(&x, &y).unwrap()).abs() < 1e-3);
    let mut sm = d.zeros(n).unwrap();
    d.softmax_resident(&bx, &mut sm, false).unwrap();
    close("softmax resident", &sm.read().unwrap(), &softmax_ref(&x, false), 2e-5, 1e-9);
    let (a, b) = (d.upload(&x[..30 * 40]).unwrap(), d.upload(&y[..40 * 20]).unwrap());
    let mut c = d.zeros(30 * 20).unwrap();
    d.matmul_resident(&a, &b, &mut c, 30, 40, 20).unwrap();
    let mut host_c = vec![0.0; 600];
    d.matmul(&x[..1200], &y[..800], &mut host_c, 30, 40, 20).unwrap();
    assert_eq!(c.read().unwrap(), host_c);
    assert_eq!(d.zeros(5).unwrap().read().unwrap(), vec![0.0; 5]);
    d.synchronize().unwrap();
}

#[test]
fn pipelines_are_compiled_once_and_buffers_pooled() {
    let Some(_) = device() else { return };
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
    let Some(d) = device() else { return };
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
    let Some(d) = device() else { return };
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
    let Some(d) = device() else { return };
    let mut out = vec![0.0; 3];
    assert_eq!(d.relu(&[1.0; 4], &mut out), Err(Error::LengthMismatch { op: "relu", expected: 4, actual: 3 }));
    assert_eq!(d.vec_add(&[1.0; 3], &[1.0; 2], &mut out), Err(Error::LengthMismatch { op: "vec_add", expected: 3, actual: 2 }));
    assert!(matches!(d.clip(&[1.0; 3], 2.0, 1.0, &mut out), Err(Error::InvalidParameter { op: "clip", .. })));
    assert!(matches!(d.elu(&[1.0; 3], f32::NAN, &mut out), Err(Error::InvalidParameter { op: "elu", .. })));
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
    assert_eq!(d.convolve2d(&[1.0; 4], &[1.0; 9], &mut o, 2, 2, 3, 3), Err(Error::ShapeMismatch { op: "convolve2d", left: vec![2, 2], right: vec![3, 3] }));
    assert!(matches!(d.convolve2d(&[1.0; 4], &[], &mut o, 2, 2, 0, 1), Err(Error::InvalidArgument { op: "convolve2d", .. })));
    assert_eq!(d.convolve2d(&[1.0; 9], &[1.0; 4], &mut o, 3, 3, 2, 2), Ok(()));
    assert_eq!(o, vec![4.0; 4]);
    assert_eq!(d.convolve2d(&[1.0; 9], &[1.0; 4], &mut out, 3, 3, 2, 2), Err(Error::SizeMismatch { op: "convolve2d", shape: vec![2, 2], len: 3 }));
    // Device-resident shapes.
    let a = d.upload(&[1.0; 4]).unwrap();
    let mut b = d.zeros(3).unwrap();
    assert_eq!(d.apply(UnaryOp::Relu, &a, &mut b), Err(Error::LengthMismatch { op: "relu", expected: 4, actual: 3 }));
    assert!(matches!(d.reduce_resident(ReduceOp::Max, &d.zeros(0).unwrap()), Err(Error::EmptyInput { op: "max" })));
    let mut buf = vec![0.0; 2];
    assert!(block_on(a.read_into_async(&mut buf)).is_err());
    // Batches report recording errors at execute, and reads before execute.
    let mut batch = GpuCommandBatch::new(d.clone());
    let p = batch.upload(&[1.0; 3]);
    let q = batch.upload(&[1.0; 4]);
    let r = batch.add(p, q);
    assert!(matches!(block_on(batch.read(r)), Err(Error::InvalidArgument { .. })));
    assert_eq!(block_on(batch.execute()), Err(Error::LengthMismatch { op: "vec_add", expected: 3, actual: 4 }));
    let mut batch = GpuCommandBatch::new(d.clone());
    let e = batch.upload(&[]);
    let _ = batch.max(e);
    assert_eq!(block_on(batch.execute()), Err(Error::EmptyInput { op: "max" }));
    let mut other = GpuCommandBatch::new(d);
    let _ = other.relu(r); // an id this batch never issued
    assert!(matches!(block_on(other.execute()), Err(Error::IndexOutOfBounds { .. })));
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
    let Some(_) = device() else { return };
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
