//! scale: `k·x`, one IEEE product.

use crate::cpu::simd::Simd;
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Scale;

impl UnaryDef for Scale {
    const NAME: &'static str = "scale";
    const PARAMS: &'static [&'static str] = &["k"];
    const CPU_BOUND: Bound = Bound::ulp(0.5);
    const GPU_BOUND: Bound = Bound::ulp(0.5);
    const SAMPLE: Params = [2.5, 0.0];
    fn reference(x: f64, p: [f64; 2]) -> f64 {
        p[0] * x
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, p: Params) -> S::V {
        s.mul(x, s.splat(p[0]))
    }
    const WGSL: &'static str = "fn op_scale(x: T, a: f32, b: f32) -> T { return x * a; }";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, p: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        k.mul(F, x, p[0])
    }
}
