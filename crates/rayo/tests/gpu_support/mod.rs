//! Shared by the wgpu integration tests (`gpu.rs`, `gpu_batch.rs`): the device or a skip line,
//! a minimal executor, deterministic inputs, and a tolerance check.
#![allow(dead_code)]

use rayo::gpu::GpuDevice;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

pub const SIZES: &[usize] = &[1, 7, 255, 256, 257, 65537];

/// The shared device, or `None` after printing one skip line naming `test`.
pub fn device(test: &str) -> Option<GpuDevice> {
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
pub fn block_on<F: Future>(f: F) -> F::Output {
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
pub fn data(n: usize, seed: u64, range: f32) -> Vec<f32> {
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

pub fn close(op: &str, got: &[f32], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{op}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        assert!(err <= abs + rel * w.abs(), "{op} n={} [{i}]: got {g}, want {w} (err {err:e})", got.len());
    }
}

pub fn matmul_ref(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
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
