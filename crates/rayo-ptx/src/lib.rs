//! PTX written from Rust, with no dependencies: a typed builder ([`ptx`]), a checker that
//! rejects ill-typed or undefined-register programs, and a kernel library ([`kernels`]).
//!
//! ```
//! use rayo_ptx::ptx::{PtxModule, PtxKernel, PtxType};
//! use rayo_ptx::kernels::{GemmKernel, Kernel};
//! let module = PtxModule::new().version(8, 0).target("sm_90").address_size(64);
//! assert!(module.emit().contains(".version 8.0"));
//! let kernel = GemmKernel::tiled(1024, 1024, 1024, 32);
//! let ptx: String = kernel.emit_ptx();
//! assert!(ptx.contains(".entry"));
//! ```

pub mod kernels;
pub mod ptx;
