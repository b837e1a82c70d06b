//! The wgpu backend (feature `gpu` natively, `gpu-wasm` for wasm32): Vulkan, Metal, DX12 and
//! WebGPU through one API.
//!
//! ```no_run
//! # fn main() -> rayo::Result<()> {
//! use rayo::gpu::{GpuCommandBatch, GpuDevice, ReduceOp};
//! if GpuDevice::is_available() {
//!     let device = GpuDevice::new()?; // the process's one device, created on first use
//!     let x = [1.0f32, -2.0, 3.0];
//!     let mut y = [0.0f32; 3];
//!     device.relu(&x, &mut y)?;
//!     assert_eq!(y, [1.0, 0.0, 3.0]);
//!     assert_eq!(device.sum(&x)?, 2.0);
//!     assert_eq!(device.reduce(ReduceOp::NormInf, &x, None)?, 3.0); // the CPU's ReduceOp, all seven
//!     let mut p = [0.0f32; 4];
//!     device.softmax_rows(&[0.0, 0.0, 1.0, f32::NAN], 2, 2, &mut p)?; // each row alone
//!     assert!(p[0] == 0.5 && p[1] == 0.5 && p[2].is_nan()); // a row with a NaN is all NaN
//!
//!     let mut batch = GpuCommandBatch::new(device);
//!     let input = batch.upload(&[1.0, 2.0, -3.0, 4.0]);
//!     let a = batch.relu(input);
//!     let b = batch.scale(a, 2.0);
//!     let c = batch.add(b, input); // relu, scale, add: one fused kernel, one submit
//!     batch.execute_blocking()?;                  // or batch.execute().await
//!     assert_eq!(batch.read_blocking(c)?, vec![3.0, 6.0, -3.0, 12.0]);
//!     // Ids belong to their batch: another batch refuses them (Error::ForeignBuffer).
//!     let other = GpuCommandBatch::new(GpuDevice::new()?);
//!     assert!(other.len_of(c).is_err());
//! }
//! # Ok(()) }
//! ```
//!
//! Recording into a batch never fails on the spot: the first recording error (a length
//! mismatch, an id from another batch) is returned by `execute` and by `read`.
//!
//! Costs: pipelines are compiled once per kernel and cached; storage, uniform and staging
//! buffers come from a pool; every op is one submit and, for host slices, one readback through
//! the reused staging buffer. Ops on [`GpuBuffer`]s stay on the device.

mod batch;
mod buffer;
mod device;
#[cfg(not(target_arch = "wasm32"))]
pub mod dispatch;
mod elementwise;
mod encoder;
mod kernels;
mod oneshot;
mod ops;
mod pipelines;
mod pool;
mod raw;
mod readback;

pub use batch::{BatchStats, BufferId, GpuCommandBatch};

/// Numbers batches and devices (the owners of ids and buffers) uniquely in the process.
pub(crate) fn next_owner_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
/// The one reduction vocabulary of every backend (the same type as [`crate::ops::ReduceOp`]).
pub use crate::ops::ReduceOp;
pub use buffer::GpuBuffer;
pub use device::{AdapterInfo, GpuDevice, GpuLimits};
pub use elementwise::{BinaryOp, UnaryOp};
/// wgpu itself, for crates that use [`GpuDevice::raw_device`] with their own kernels.
pub use wgpu;
