//! sqrt: correctly rounded where the hardware is (CPU instructions, PTX `sqrt.rn`); NaN for
//! x < 0, −0 for −0, inf for inf.

use crate::cpu::simd::Simd;
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Sqrt;

impl UnaryDef for Sqrt {
    const NAME: &'static str = "sqrt";
    const CPU_BOUND: Bound = Bound::ulp(0.5);
    // Vulkan lets `sqrt` be 1/inversesqrt (≈ 3 ULP).
    const GPU_BOUND: Bound = Bound::ulp(3.0);
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        x.sqrt()
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        s.sqrt(x)
    }
    const WGSL: &'static str = "fn op_sqrt(x: T, a: f32, b: f32) -> T {
    let zero = bitcast<T>(bitcast<U>(x) & U(0x80000000u)); // ±0 (a flushed denormal too)
    return select(select(sqrt(x), zero, x == T(0.0)), nan_of(x), x < T(0.0));
}";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        k.un(UnOp::Sqrt, F, x)
    }
}
