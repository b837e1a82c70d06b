//! exp: eˣ. CPU: Cephes' polynomial after a Cody–Waite reduction, 1 ULP with FMA, 2 without;
//! 0 below −104, inf above 88.73; denormal results rounded once.

use crate::cpu::math;
use crate::cpu::simd::Simd;
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Exp;

impl UnaryDef for Exp {
    const NAME: &'static str = "exp";
    const HEAVY: bool = true;
    const CPU_BOUND: Bound = Bound::ulp(2.0);
    const GPU_BOUND: Bound = Bound::ulp(4.0);
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        x.exp()
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        math::exp(s, x)
    }
    const WGSL: &'static str = "fn op_exp(x: T, a: f32, b: f32) -> T { return rexp(x); }";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        crate::ops::ptx::exp(k, x)
    }
}
