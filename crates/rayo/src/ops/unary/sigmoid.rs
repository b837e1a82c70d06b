//! sigmoid: `1 / (1 + e⁻ˣ)`, as eˣ/(1 + eˣ) for x < 0 so tiny results keep their precision;
//! 0 and 1 at ∓inf.

use crate::cpu::math;
use crate::cpu::simd::Simd;
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Sigmoid;

impl UnaryDef for Sigmoid {
    const NAME: &'static str = "sigmoid";
    const HEAVY: bool = true;
    const CPU_BOUND: Bound = Bound::ulp(3.0);
    const GPU_BOUND: Bound = Bound::ulp_abs(6.0, 1e-35);
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        math::sigmoid(s, x)
    }
    const WGSL: &'static str = "fn op_sigmoid(x: T, a: f32, b: f32) -> T {
    let e = rexp(-abs(x));
    let s = 1.0 / (1.0 + e);
    return select(select(e * s, s, x >= T(0.0)), x, is_nan(x));
}";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        crate::ops::ptx::sigmoid(k, x)
    }
}
