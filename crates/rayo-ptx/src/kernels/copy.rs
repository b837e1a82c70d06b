//! A strided copy of a row-major block: `out[i·n + j] = src[i·ld + j]` for `i < m`, `j < n`
//! (the first `n` columns of rows of `ld` values, packed): a GEMM computed on padded columns
//! back into the caller's layout.

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

/// Parameters: `src`, `out` (u64); `n`, `ld`, `total` (= m·n) (u32). A thread per element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CopyColsKernel;

impl CopyColsKernel {
    pub const THREADS: u32 = 256;

    pub fn launch(&self, total: u32) -> LaunchConfig {
        LaunchConfig { grid: (total.div_ceil(Self::THREADS).max(1), 1, 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for CopyColsKernel {
    fn name(&self) -> String {
        "copy_cols".into()
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let mut k = PtxKernel::new(&self.name());
        for p in ["src", "out"] {
            k.add_param(p, PtxType::U64);
        }
        for p in ["n", "ld", "total"] {
            k.add_param(p, U);
        }
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let src = k.ld_param_ptr("src");
        let out = k.ld_param_ptr("out");
        let n = k.ld_param("n");
        let ld = k.ld_param("ld");
        let total = k.ld_param("total");
        let idx = global_tid(&mut k);
        let done = k.new_label("done");
        let past = k.setp(Cmp::Ge, U, idx, total);
        k.bra_if(past, false, &done);
        let i = k.bin(BinOp::Div, U, idx, n);
        let ni = k.mul(U, i, n);
        let j = k.sub(U, idx, ni);
        let si = k.fma(U, i, ld, j);
        let sa = k.elem_addr(src, si, 4);
        let v = k.ld(Space::Global, F, Addr::reg(sa));
        let oa = k.elem_addr(out, idx, 4);
        k.st(Space::Global, F, Addr::reg(oa), v);
        k.label(&done);
        k.ret();
        k
    }
}
