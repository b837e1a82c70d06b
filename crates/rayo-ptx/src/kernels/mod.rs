//! The kernel library: each kernel is a Rust value of its parameters (shape, tile, options) that
//! builds a checked [`PtxKernel`] for a target SM.

mod common;
mod gemm;
mod norm;
mod reduce;
mod rowloop;
mod softmax;

pub use gemm::{GemmKernel, GemmVariant};
pub use norm::{NormKernel, NormKind};
pub use reduce::{ReduceKernel, ReduceOp};
pub use softmax::SoftmaxKernel;

use crate::ptx::{CheckError, PtxKernel, PtxModule};

/// Grid and block sizes (x, y, z) and dynamic shared memory of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_bytes: u32,
}

/// A kernel of the library: a name unique to its parameters, and its PTX for a target SM.
pub trait Kernel {
    /// The entry name; different parameters give different names (a cache key).
    fn name(&self) -> String;

    /// Builds the entry function for `sm` (e.g. 80, 90).
    fn build(&self, sm: u32) -> PtxKernel;

    /// A module holding only this kernel, PTX ISA 8.0, for `sm_{sm}`.
    fn module(&self, sm: u32) -> PtxModule {
        PtxModule::new().version(8, 0).target(&format!("sm_{sm}")).address_size(64).kernel(self.build(sm))
    }

    /// PTX text for `sm_{sm}`.
    fn emit_ptx_for(&self, sm: u32) -> String {
        self.module(sm).emit()
    }

    /// PTX text for sm_90 (Hopper).
    fn emit_ptx(&self) -> String {
        self.emit_ptx_for(90)
    }

    /// Runs the checker on the kernel built for `sm`.
    fn check(&self, sm: u32) -> Result<(), CheckError> {
        self.module(sm).check()
    }
}

/// One representative of every kernel variant of this crate (used by `rayo ptx` and the ptxas
/// tests; the fused element-wise kernels are built from rayo's op registry, in `rayo::cuda`).
pub fn all_variants() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = vec![];
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Dot] {
        v.push(Box::new(ReduceKernel::new(op)));
    }
    for cols in [4096, 1000, 7] {
        v.push(Box::new(SoftmaxKernel::new(cols, false)));
        v.push(Box::new(SoftmaxKernel::new(cols, true)));
        v.push(Box::new(NormKernel::new(NormKind::LayerNorm, cols, 1e-5)));
        v.push(Box::new(NormKernel::new(NormKind::RmsNorm, cols, 1e-5)));
    }
    v.push(Box::new(GemmKernel::naive(1024, 1024, 1024)));
    v.push(Box::new(GemmKernel::naive(33, 17, 9)));
    v.push(Box::new(GemmKernel::tiled(1024, 1024, 1024, 32)));
    v.push(Box::new(GemmKernel::tiled(100, 70, 33, 16)));
    v.push(Box::new(GemmKernel::tensor_core(4096, 4096, 4096)));
    if let Some(g) = GemmKernel::tensor_core_bk(4096, 4096, 4096, 8) {
        v.push(Box::new(g));
    }
    v.push(Box::new(GemmKernel::tensor_core(256, 384, 136)));
    for bk in [8, 16] {
        if let Some(g) = GemmKernel::blocked_bk(4096, 4096, 4096, bk) {
            v.push(Box::new(g));
        }
        if let Some(g) = GemmKernel::blocked_bk(256, 384, 136, bk) {
            v.push(Box::new(g));
        }
        if let Some(g) = GemmKernel::blocked_split(1024, 1024, 1024, bk, 2) {
            v.push(Box::new(g));
        }
    }
    v
}
