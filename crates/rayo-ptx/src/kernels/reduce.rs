//! Reductions (sum, max, min, dot) over a whole vector: each thread accumulates 16-byte vectors
//! in a grid-stride loop with four independent chains, the block reduces with warp shuffles and
//! one shared-memory step, and each block writes one partial. A second launch of the same op
//! (`Sum` for `Dot`) with one block reduces the partials: deterministic, no atomics.

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
    /// Σ x·y (two inputs)
    Dot,
}

impl ReduceOp {
    fn combine(self) -> BinOp {
        match self {
            ReduceOp::Sum | ReduceOp::Dot => BinOp::Add,
            ReduceOp::Max => BinOp::Max,
            ReduceOp::Min => BinOp::Min,
        }
    }
    pub fn identity(self) -> f32 {
        match self {
            ReduceOp::Sum | ReduceOp::Dot => 0.0,
            ReduceOp::Max => f32::NEG_INFINITY,
            ReduceOp::Min => f32::INFINITY,
        }
    }
    /// The op that reduces the per-block partials.
    pub fn second_pass(self) -> ReduceOp {
        if self == ReduceOp::Dot {
            ReduceOp::Sum
        } else {
            self
        }
    }
}

/// Parameters: `x` (u64), `y` (u64, `Dot` only), `out` (u64: one f32 per block), `n` (u32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReduceKernel {
    pub op: ReduceOp,
}

impl ReduceKernel {
    pub const THREADS: u32 = 512;

    pub fn new(op: ReduceOp) -> ReduceKernel {
        ReduceKernel { op }
    }

    /// First pass: at most `4 * sms` blocks (each writes one partial).
    pub fn launch(&self, n: usize, sms: u32) -> LaunchConfig {
        let per_block = Self::THREADS as usize * 4;
        let blocks = n.div_ceil(per_block).clamp(1, 4 * sms.max(1) as usize) as u32;
        LaunchConfig { grid: (blocks, 1, 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for ReduceKernel {
    fn name(&self) -> String {
        format!("reduce_{:?}", self.op).to_lowercase()
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let op = self.op;
        let comb = op.combine();
        let id = op.identity();
        let mut k = PtxKernel::new(&self.name());
        k.add_param("x", PtxType::U64);
        if op == ReduceOp::Dot {
            k.add_param("y", PtxType::U64);
        }
        k.add_param("out", PtxType::U64);
        k.add_param("n", U);
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let smem = k.shared_array("red_smem", F, 32, 4);
        let x = k.ld_param_ptr("x");
        let y = if op == ReduceOp::Dot { Some(k.ld_param_ptr("y")) } else { None };
        let out = k.ld_param_ptr("out");
        let n = k.ld_param("n");
        let i = global_tid(&mut k);
        let gtid = k.mov(U, i);
        let stride = grid_stride(&mut k);
        let q = k.bin(BinOp::Shr, U, n, 2u32);
        let acc: Vec<Reg> = (0..4).map(|_| k.mov(F, id)).collect();
        let (lp, tail, end) = (k.new_label("vec"), k.new_label("tail"), k.new_label("reduce"));
        k.label(&lp);
        let done = k.setp(Cmp::Ge, U, i, q);
        k.bra_if(done, false, &tail);
        let xa = k.elem_addr(x, i, 16);
        let xv = k.ld_nc_v(F, 4, Addr::reg(xa));
        let yv = y.map(|y| {
            let ya = k.elem_addr(y, i, 16);
            k.ld_nc_v(F, 4, Addr::reg(ya))
        });
        for j in 0..4 {
            match &yv {
                Some(yv) => k.fma_to(acc[j], xv[j], yv[j], acc[j]),
                None => k.bin_to(comb, acc[j], acc[j], xv[j]),
            }
        }
        k.bin_to(BinOp::Add, i, i, stride);
        k.bra(&lp);
        k.label(&tail);
        let q4 = k.bin(BinOp::Shl, PtxType::B32, q, 2u32);
        let t = k.add(U, q4, gtid);
        let out_of_range = k.setp(Cmp::Ge, U, t, n);
        k.bra_if(out_of_range, false, &end);
        let xa = k.elem_addr(x, t, 4);
        let xs = k.ld(Space::Global, F, Addr::reg(xa));
        match y {
            Some(y) => {
                let ya = k.elem_addr(y, t, 4);
                let ys = k.ld(Space::Global, F, Addr::reg(ya));
                k.fma_to(acc[0], xs, ys, acc[0]);
            }
            None => k.bin_to(comb, acc[0], acc[0], xs),
        }
        k.label(&end);
        let a01 = k.bin(comb, F, acc[0], acc[1]);
        let a23 = k.bin(comb, F, acc[2], acc[3]);
        let a = k.bin(comb, F, a01, a23);
        let r = block_reduce(&mut k, comb, a, Self::THREADS, id, &smem);
        let tid = k.special(Special::TidX);
        let first = k.setp(Cmp::Eq, U, tid, 0u32);
        let cta = k.special(Special::CtaidX);
        let oa = k.elem_addr(out, cta, 4);
        k.when(first, false, |k| k.st(Space::Global, F, Addr::reg(oa), r));
        k.ret();
        k
    }
}
