//! The only door to the CUDA driver's unsafe surface: library presence, the driver version,
//! event tracking, and kernel launches. Everything else in `rayo::cuda` is safe code.

use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice, PushKernelArg};
use std::sync::Arc;

pub(crate) fn drv(e: cudarc::driver::DriverError) -> Error {
    Error::Device { api: "cuda", message: e.to_string() }
}

/// Whether `libcuda.so` (the driver library) can be loaded. Never panics.
pub(crate) fn driver_library_present() -> bool {
    // SAFETY: `is_culib_present` only tries to dlopen the driver library by its usual names and
    // drops the handle; it touches no CUDA state.
    unsafe { sys::is_culib_present() }
}

/// The driver's CUDA version as (major, minor), e.g. (13, 0).
pub(crate) fn driver_version() -> Result<(i32, i32)> {
    let mut v: i32 = 0;
    // SAFETY: called only after the driver library was found and `cuInit` succeeded (a context
    // exists); `v` is a valid out-pointer for the duration of the call.
    let r = unsafe { sys::cuDriverGetVersion(&mut v) };
    r.result().map_err(drv)?;
    Ok((v / 1000, (v % 1000) / 10))
}

/// Turns off cudarc's per-buffer event tracking.
pub(crate) fn single_stream_mode(ctx: &Arc<CudaContext>) {
    // SAFETY: rayo issues all work of a device on one stream, so stream order already gives
    // every read-after-write and write-after-read dependency that event tracking would add.
    unsafe { ctx.disable_event_tracking() };
}

/// Launches `f` with arguments in the order: `ins`, then `outs`, then `scalars` (u32), which is
/// the parameter order of every rayo-ptx kernel.
pub(crate) fn launch(
    stream: &Arc<CudaStream>,
    f: &CudaFunction,
    cfg: rayo_ptx::kernels::LaunchConfig,
    ins: &[&CudaSlice<f32>],
    outs: &mut [&mut CudaSlice<f32>],
    scalars: &[u32],
) -> Result<()> {
    let cfg = LaunchConfig { grid_dim: cfg.grid, block_dim: cfg.block, shared_mem_bytes: cfg.shared_bytes };
    let mut b = stream.launch_builder(f);
    for x in ins {
        b.arg(*x);
    }
    for o in outs.iter_mut() {
        b.arg(&mut **o);
    }
    for s in scalars {
        b.arg(s);
    }
    // SAFETY: the kernel's parameter list (checked by rayo-ptx's checker when it was built) is
    // exactly ins (u64 pointers), outs (u64 pointers), scalars (u32), pushed here in that order;
    // the callers in ops.rs check every buffer's length against the sizes the kernel indexes.
    unsafe { b.launch(cfg) }.map_err(drv)?;
    Ok(())
}

/// A page-locked host allocation of `len` floats, zero-filled before anyone can read it.
pub(crate) fn alloc_pinned_zeroed(ctx: &Arc<CudaContext>, len: usize) -> Result<PinnedHostSlice<f32>> {
    // SAFETY: flags 0 = plain page-locked memory (not write-combined, so host reads stay fast);
    // the memory is uninitialised only until the write_bytes below, and no reference to it exists
    // before then.
    let mut host = unsafe { ctx.alloc_pinned_with_flags::<f32>(len, 0) }.map_err(drv)?;
    let p = host.as_mut_ptr().map_err(drv)?;
    // SAFETY: `p` points to `len` f32s just allocated above (cudarc checked the size and
    // alignment); all-zero bytes are a valid f32.
    unsafe { std::ptr::write_bytes(p, 0, len) };
    Ok(host)
}

/// [`launch`] followed by f32 scalars: the parameter order of the fused element-wise kernels
/// (`ins`, `outs`, the u32 length, then the f32 op parameters and constants).
pub(crate) fn launch_scalars(
    stream: &Arc<CudaStream>,
    f: &CudaFunction,
    cfg: rayo_ptx::kernels::LaunchConfig,
    ins: &[&CudaSlice<f32>],
    outs: &mut [&mut CudaSlice<f32>],
    scalars: &[u32],
    floats: &[f32],
) -> Result<()> {
    let cfg = LaunchConfig { grid_dim: cfg.grid, block_dim: cfg.block, shared_mem_bytes: cfg.shared_bytes };
    let mut b = stream.launch_builder(f);
    for x in ins {
        b.arg(*x);
    }
    for o in outs.iter_mut() {
        b.arg(&mut **o);
    }
    for s in scalars {
        b.arg(s);
    }
    for v in floats {
        b.arg(v);
    }
    // SAFETY: the fused kernel's parameter list is exactly ins (u64), outs (u64), scalars (u32),
    // floats (f32), in that order (FusedKernel::build declares them from the same expression
    // whose scalars are passed here); the caller checked every buffer against the length `n`.
    unsafe { b.launch(cfg) }.map_err(drv)?;
    Ok(())
}
