//! leaky_relu: `x` for x > 0, `alpha·x` otherwise (one rounding). Any alpha: a NaN or infinite
//! one gives the IEEE product (as PyTorch).

use crate::cpu::simd::{Simd, SimdExt};
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct LeakyRelu;

impl UnaryDef for LeakyRelu {
    const NAME: &'static str = "leaky_relu";
    const PARAMS: &'static [&'static str] = &["alpha"];
    const CPU_BOUND: Bound = Bound::ulp(0.5);
    const GPU_BOUND: Bound = Bound::ulp(0.5);
    const SAMPLE: Params = [0.01, 0.0];
    fn reference(x: f64, p: [f64; 2]) -> f64 {
        if x > 0.0 {
            x
        } else {
            p[0] * x
        }
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, p: Params) -> S::V {
        s.select(s.lt(s.zero(), x), x, s.mul(s.splat(p[0]), x))
    }
    const WGSL: &'static str = "fn op_leaky_relu(x: T, a: f32, b: f32) -> T { return select(a * x, x, x > T(0.0)); }";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, p: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        let ax = k.mul(F, x, p[0]);
        select_cmp(k, Cmp::Gt, x, 0.0, x, ax)
    }
}
