//! A row vector added to every row of a row-major block, in place: `x[i·n + j] += b[j]` for
//! `i·n + j < total` (a projection's bias, broadcast over a batch's rows).

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

/// Parameters: `x`, `b` (u64); `n`, `total` (= m·n) (u32). A thread per element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AddRowsKernel;

impl AddRowsKernel {
    pub const THREADS: u32 = 256;

    pub fn launch(&self, total: u32) -> LaunchConfig {
        LaunchConfig { grid: (total.div_ceil(Self::THREADS).max(1), 1, 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for AddRowsKernel {
    fn name(&self) -> String {
        "add_rows".into()
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let mut k = PtxKernel::new(&self.name());
        for p in ["x", "b"] {
            k.add_param(p, PtxType::U64);
        }
        for p in ["n", "total"] {
            k.add_param(p, U);
        }
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let x = k.ld_param_ptr("x");
        let b = k.ld_param_ptr("b");
        let n = k.ld_param("n");
        let total = k.ld_param("total");
        let idx = global_tid(&mut k);
        let done = k.new_label("done");
        let past = k.setp(Cmp::Ge, U, idx, total);
        k.bra_if(past, false, &done);
        let j = k.bin(BinOp::Rem, U, idx, n);
        let ba = k.elem_addr(b, j, 4);
        let bv = k.ld(Space::Global, F, Addr::reg(ba));
        let xa = k.elem_addr(x, idx, 4);
        let xv = k.ld(Space::Global, F, Addr::reg(xa));
        let sum = k.add(F, xv, bv);
        k.st(Space::Global, F, Addr::reg(xa), sum);
        k.label(&done);
        k.ret();
        k
    }
}
