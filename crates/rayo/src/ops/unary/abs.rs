//! abs: `|x|`, clearing the sign bit (|−0| = 0, |NaN| = NaN). Exact.

use crate::cpu::simd::{Simd, SimdExt};
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Abs;

impl UnaryDef for Abs {
    const NAME: &'static str = "abs";
    const CPU_BOUND: Bound = Bound::EXACT;
    const GPU_BOUND: Bound = Bound::EXACT;
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        x.abs()
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        s.abs(x)
    }
    const WGSL: &'static str = "fn op_abs(x: T, a: f32, b: f32) -> T { return abs(x); }";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        k.un(UnOp::Abs, F, x)
    }
}
