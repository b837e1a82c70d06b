//! swish (SiLU): `x · sigmoid(x)`; swish(−inf) = −0 (the limit). 4 ULP where the result is a
//! normal float; below that (x < −87) absolute error ≤ 1e−40.

use crate::cpu::math;
use crate::cpu::simd::Simd;
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Swish;

impl UnaryDef for Swish {
    const NAME: &'static str = "swish";
    const HEAVY: bool = true;
    const CPU_BOUND: Bound = Bound::ulp_abs(4.0, 1e-40);
    const GPU_BOUND: Bound = Bound::ulp_abs(8.0, 1e-35);
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        if x == f64::NEG_INFINITY {
            -0.0
        } else {
            x / (1.0 + (-x).exp())
        }
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        math::swish(s, x)
    }
    // −inf·0 would be NaN: the factor x is clamped to the finite range first (NaN passes).
    const WGSL: &'static str = "fn op_swish(x: T, a: f32, b: f32) -> T {
    return select(x, T(-3.4028234663852886e38), x < T(-3.4028234663852886e38)) * op_sigmoid(x, 0.0, 0.0);
}";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        let s = sigmoid(k, x);
        let big = k.mov(F, f32::MIN);
        let xc = select_cmp(k, Cmp::Lt, x, f32::MIN, big, x);
        k.mul(F, xc, s)
    }
}
