//! Automatic CPU/GPU choice for host-slice work, from measured crossovers (README, "GPU").
//! A caller such as `Matrix::matmul` asks [`try_matmul`]; `Ok(false)` means "do it on the CPU".

use super::device::GpuDevice;
use crate::{Error, Result};
use std::sync::OnceLock;

/// Smallest m·k·n sent to the GPU by [`try_matmul`] (host slices in and out, so the upload and
/// download are counted). Measured on an H100 through NVIDIA's Vulkan driver against rayo's
/// CPU GEMM on the same machine's 16 threads: see docs/perf/crossover-h100.md.
pub const MATMUL_MIN_MKN: u64 = MATMUL_CROSSOVER_N * MATMUL_CROSSOVER_N * MATMUL_CROSSOVER_N;

/// The square size at which the GPU round trip overtook the CPU in that measurement
/// (512³: 430 µs vs 527 µs; at 256³ the CPU's 58 µs beat the GPU's 162 µs).
pub const MATMUL_CROSSOVER_N: u64 = 512;

/// The shared device, if there is a real GPU (a software adapter such as lavapipe is never
/// faster than rayo's own CPU code). Probed once per process.
fn offload_device() -> Option<&'static GpuDevice> {
    static DEV: OnceLock<Option<GpuDevice>> = OnceLock::new();
    DEV.get_or_init(|| {
        let d = GpuDevice::new().ok()?;
        (d.adapter_info().device_type != "cpu").then_some(d)
    })
    .as_ref()
}

/// Whether a matmul of this shape would go to the GPU: above the crossover, a real GPU
/// present, `RAYO_FORCE_CPU` not set, and the operands within the device's binding limit.
pub fn matmul_prefers_gpu(m: usize, k: usize, n: usize) -> bool {
    let mkn = (m as u64).saturating_mul(k as u64).saturating_mul(n as u64);
    if mkn < MATMUL_MIN_MKN || crate::force_cpu() {
        return false;
    }
    let Some(dev) = offload_device() else { return false };
    let limit = dev.max_binding_bytes();
    [(m, k), (k, n), (m, n)].iter().all(|&(r, c)| r.checked_mul(c).is_some_and(|len| (len as u64).saturating_mul(4) <= limit))
}

/// Runs `c = a · b` on the GPU when [`matmul_prefers_gpu`] says so and returns `Ok(true)`;
/// otherwise does nothing and returns `Ok(false)`. Shape errors are errors either way; a device
/// failure (lost device, out of memory) returns `Ok(false)` so that the caller computes on the
/// CPU instead of failing a product it can do.
pub fn try_matmul(a: &[f32], b: &[f32], c: &mut [f32], m: usize, k: usize, n: usize) -> Result<bool> {
    super::buffer::check_matmul(a.len(), b.len(), c.len(), m, k, n)?;
    if !matmul_prefers_gpu(m, k, n) {
        return Ok(false);
    }
    let Some(dev) = offload_device().filter(|d| !d.is_lost()) else { return Ok(false) };
    match dev.matmul(a, b, c, m, k, n) {
        Ok(()) => Ok(true),
        Err(Error::Device { .. } | Error::BufferTooLarge { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}
