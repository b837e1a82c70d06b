//! Reductions over a whole vector, as a load (what each element contributes: x, |x|, x², x·y)
//! and a combine (sum, NaN-propagating max or min): each thread accumulates 16-byte vectors in a
//! grid-stride loop with four independent chains, the block reduces with warp shuffles and one
//! shared-memory step, and each block writes one partial. A second launch (plain load, same
//! combine, one block) reduces the partials: deterministic, no atomics. Its `sqrt` flag finishes
//! an L2 norm on the device. The length `n` is a parameter: one kernel per (load, combine, sqrt).

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

pub use super::common::ReduceCombine;

/// What one element contributes to a reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceLoad {
    /// x
    Plain,
    /// |x|
    Abs,
    /// x²
    Square,
    /// x·y (a second input `y`)
    Product,
}

/// Parameters: `x` (u64), `y` (u64, `Product` only), `out` (u64: one f32 per block), `n` (u32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReduceKernel {
    load: ReduceLoad,
    combine: ReduceCombine,
    sqrt: bool,
}

impl ReduceKernel {
    pub const THREADS: u32 = 512;

    /// The first pass of a reduction: each block writes the combined loads of its elements.
    pub fn new(load: ReduceLoad, combine: ReduceCombine) -> ReduceKernel {
        ReduceKernel { load, combine, sqrt: false }
    }

    /// The second pass over the partials of [`ReduceKernel::new`]: a plain load, the same
    /// combine, and the square root of the result when `sqrt` (an L2 norm).
    pub fn second_pass(&self, sqrt: bool) -> ReduceKernel {
        ReduceKernel { load: ReduceLoad::Plain, combine: self.combine, sqrt }
    }

    pub fn load(&self) -> ReduceLoad {
        self.load
    }
    pub fn combine(&self) -> ReduceCombine {
        self.combine
    }
    pub fn sqrt(&self) -> bool {
        self.sqrt
    }
    /// Input vectors: 2 for `Product`, 1 otherwise.
    pub fn arity(&self) -> usize {
        if self.load == ReduceLoad::Product {
            2
        } else {
            1
        }
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
        format!("reduce_{:?}_{:?}{}", self.load, self.combine, if self.sqrt { "_sqrt" } else { "" }).to_lowercase()
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let comb = self.combine;
        let two = self.load == ReduceLoad::Product;
        let nan_rule = comb != ReduceCombine::Sum;
        let id = comb.identity();
        let mut k = PtxKernel::new(&self.name());
        k.add_param("x", PtxType::U64);
        if two {
            k.add_param("y", PtxType::U64);
        }
        k.add_param("out", PtxType::U64);
        k.add_param("n", U);
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let smem = k.shared_array("red_smem", F, 32, 4);
        let x = k.ld_param_ptr("x");
        let y = if two { Some(k.ld_param_ptr("y")) } else { None };
        let out = k.ld_param_ptr("out");
        let n = k.ld_param("n");
        let i = global_tid(&mut k);
        let gtid = k.mov(U, i);
        let stride = grid_stride(&mut k);
        let q = k.bin(BinOp::Shr, U, n, 2u32);
        let acc: Vec<Reg> = (0..4).map(|_| k.mov(F, id)).collect();
        // Max/Min: the chains use the plain instruction and a sticky "no NaN seen" predicate
        // (`setp.eq v, v` is false only for NaN), applied once after the loop.
        let ok = if nan_rule { Some(k.setp(Cmp::Eq, F, acc[0], acc[0])) } else { None };
        let load = self.load;
        let accumulate = |k: &mut PtxKernel, acc: Reg, v: Reg, w: Option<Reg>| match (load, w) {
            (ReduceLoad::Product, Some(w)) => k.fma_to(acc, v, w, acc),
            (ReduceLoad::Square, _) => k.fma_to(acc, v, v, acc),
            _ => {
                let v = if load == ReduceLoad::Abs { k.un(UnOp::Abs, F, v) } else { v };
                if let Some(ok) = ok {
                    let num = k.setp(Cmp::Eq, F, v, v);
                    k.bin_to(BinOp::And, ok, ok, num);
                }
                k.bin_to(comb.op(), acc, acc, v);
            }
        };
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
            accumulate(&mut k, acc[j], xv[j], yv.as_ref().map(|v| v[j]));
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
        let ys = y.map(|y| {
            let ya = k.elem_addr(y, t, 4);
            k.ld(Space::Global, F, Addr::reg(ya))
        });
        accumulate(&mut k, acc[0], xs, ys);
        k.label(&end);
        let a01 = k.bin(comb.op(), F, acc[0], acc[1]);
        let a23 = k.bin(comb.op(), F, acc[2], acc[3]);
        let mut a = k.bin(comb.op(), F, a01, a23);
        if let Some(ok) = ok {
            a = k.selp(F, a, f32::NAN, ok);
        }
        let mut r = block_reduce(&mut k, comb, a, Self::THREADS, &smem);
        if self.sqrt {
            r = k.un(UnOp::Sqrt, F, r);
        }
        let tid = k.special(Special::TidX);
        let first = k.setp(Cmp::Eq, U, tid, 0u32);
        let cta = k.special(Special::CtaidX);
        let oa = k.elem_addr(out, cta, 4);
        k.when(first, false, |k| k.st(Space::Global, F, Addr::reg(oa), r));
        k.ret();
        k
    }
}
