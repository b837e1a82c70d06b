//! Shared by the CUDA integration tests (`cuda.rs`, `cuda_llm.rs`): the device or a skip line,
//! deterministic inputs, NaN-poisoned outputs and a tolerance check.
#![allow(dead_code)]

use rayo::cuda::{CudaDevice, DeviceBuffer};

pub fn device(test: &str) -> Option<&'static CudaDevice> {
    match CudaDevice::global() {
        Ok(d) => {
            println!("cuda device: {}", d.info());
            Some(d)
        }
        Err(e) => {
            let required = std::env::var("RAYO_REQUIRE_CUDA").map(|v| v == "1").unwrap_or(false);
            assert!(!required, "RAYO_REQUIRE_CUDA=1 but no CUDA device: {e}");
            println!("SKIP cuda: {test} (no device)");
            None
        }
    }
}

/// A second, independent device value (own stream, own kernel cache), or a skip.
pub fn fresh_device(test: &str) -> Option<CudaDevice> {
    device(test)?;
    Some(CudaDevice::new().expect("a second CudaDevice on the same GPU"))
}

/// xorshift: reproducible inputs without a dependency; a fresh seed per call site.
pub struct Rng(pub u64);
impl Rng {
    pub fn f(&mut self, lo: f32, hi: f32) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + (hi - lo) * ((self.0 >> 40) as f32 / (1u64 << 24) as f32)
    }
    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.f(lo, hi)).collect()
    }
}

pub const LENS: &[usize] = &[1, 7, 8, 15, 16, 17, 31, 33, 1000, 4097, 1_000_003];

pub fn poisoned(dev: &CudaDevice, n: usize) -> DeviceBuffer {
    dev.upload(&vec![f32::NAN; n]).unwrap()
}

pub fn close(what: &str, got: &[f32], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let mut worst = 0.0f64;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (g as f64 - w).abs();
        let tol = rel * w.abs() + abs;
        assert!(err <= tol, "{what}: element {i}: got {g}, want {w} (err {err:e} > tol {tol:e})");
        worst = worst.max(err / (w.abs() + abs));
    }
    println!("ok {what}: worst scaled error {worst:.2e}");
}
