//! neg: `−x`, flipping the sign bit. Exact.

use crate::cpu::simd::{Simd, SimdExt};
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Neg;

impl UnaryDef for Neg {
    const NAME: &'static str = "neg";
    const CPU_BOUND: Bound = Bound::EXACT;
    const GPU_BOUND: Bound = Bound::EXACT;
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        -x
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        s.neg(x)
    }
    const WGSL: &'static str = "fn op_neg(x: T, a: f32, b: f32) -> T { return -x; }";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        k.un(UnOp::Neg, F, x)
    }
}
