//! Host matrix products that go to the CUDA device on their own: above a crossover measured
//! on the lent H100 (upload A and B, GEMM, download C against rayo's CPU GEMM on that host's
//! 16 cores; docs/perf/cuda-h100.md), when a device is there and `RAYO_FORCE_CPU` is not set.

use super::CudaDevice;
use crate::Result;

/// Smallest m·k·n sent to the device: 512³, where the round trip won (398 µs vs 527 µs);
/// at 256³ the CPU did (58 µs vs 124 µs).
pub const MATMUL_MIN_MKN: u64 = 512 * 512 * 512;

/// Whether a host matmul of this shape goes to the CUDA device.
pub fn matmul_prefers_cuda(m: usize, k: usize, n: usize) -> bool {
    let mkn = (m as u64).saturating_mul(k as u64).saturating_mul(n as u64);
    mkn >= MATMUL_MIN_MKN && !crate::force_cpu() && CudaDevice::global().is_ok()
}

/// `c = a · b` (row-major `m×k` times `k×n`) on the device when [`matmul_prefers_cuda`] says so,
/// returning `Ok(true)`; otherwise nothing is done and `Ok(false)` comes back.
pub fn try_matmul(a: &[f32], b: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) -> Result<bool> {
    crate::error::check_len("cuda matmul (a)", m * k, a.len())?;
    crate::error::check_len("cuda matmul (b)", k * n, b.len())?;
    crate::error::check_len("cuda matmul (c)", m * n, c.len())?;
    if !matmul_prefers_cuda(m, k, n) {
        return Ok(false);
    }
    let dev = CudaDevice::global()?;
    let (da, db) = (dev.upload(a)?, dev.upload(b)?);
    let mut dc = dev.zeros(m * n)?;
    dev.gemm(&da, &db, &mut dc, m, k, n)?;
    dev.download_into(&dc, c)?;
    Ok(true)
}
