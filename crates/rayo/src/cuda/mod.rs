//! NVIDIA GPUs through the CUDA driver (feature `cuda`): kernels written by `rayo-ptx`, loaded as
//! PTX (the driver JIT-compiles them for the chip), run on device-resident buffers.
//!
//! The driver library is loaded at run time (cudarc's dynamic loading): rayo builds with no CUDA
//! toolkit, and on a machine with no driver every entry point returns
//! [`Error::NoDevice`](crate::Error::NoDevice) instead of panicking.
//!
//! Code outside this crate launches a `rayo-ptx` kernel through [`CudaDevice::launch`]: the
//! kernel's parameter list is a type implementing [`KernelArgs`] (tied to the kernel type),
//! and the launch checks every buffer's device and length and the list against the PTX.
//!
//! ```no_run
//! use rayo::cuda::{CudaDevice, Expr};
//! let dev = CudaDevice::new()?;                     // Err(NoDevice) without a driver
//! let x = dev.upload(&[1.0, 2.0, 3.0, 4.0])?;
//! let y = dev.upload(&[5.0, 6.0, 7.0, 8.0])?;
//! let mut out = dev.zeros(4)?;
//! let e = Expr::input(0).mul(Expr::input(1)).add(Expr::input(0)).sigmoid(); // one fused kernel
//! dev.elementwise(&e, &[&x, &y], &mut out)?;
//! println!("{:?}", dev.download(&out)?);
//! # Ok::<(), rayo::Error>(())
//! ```

mod buffer;
mod capture;
mod device;
pub mod dispatch;
mod elementwise;
mod ffi;
mod flash;
mod graph;
mod launch;
mod narrow;
pub mod nccl;
mod ops;
mod persistent;
mod pinned;
mod prompt;
mod rows;
mod wgmma;

pub use crate::ops::ReduceOp;
pub use buffer::{DeviceBuffer, DeviceBytes};
pub use capture::Replay;
pub use device::{device_count, is_available, CudaDevice, DeviceInfo};
pub use elementwise::{variants as elementwise_variants, Expr, FusedKernel, MAX_INPUTS, MAX_SCALARS};
pub use flash::FlashShape;
pub use graph::{BufId, CudaGraph, GraphBuilder};
pub use launch::{Bound, KernelArgs, Param};
pub use narrow::NarrowActivations;
pub use ops::check_eps;
pub use persistent::PersistentStep;
pub use pinned::PinnedBuffer;
pub use rayo_ptx::kernels;
pub use rayo_ptx::kernels::{GemmKernel, GemmVariant, Kernel, WgmmaAttentionKernel, WgmmaGemmKernel};
pub use rayo_ptx::ptx::WgmmaType;
pub use rows::{ActFormat, Epilogue, QFormat, QMatvecKernel};
