//! hardswish: 0 for x ≤ −3, x for x ≥ 3, `x·(x + 3)/6` between.

use crate::cpu::simd::{Simd, SimdExt};
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Hardswish;

impl UnaryDef for Hardswish {
    const NAME: &'static str = "hardswish";
    const CPU_BOUND: Bound = Bound::ulp(2.0);
    const GPU_BOUND: Bound = Bound::ulp(2.0);
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        if x <= -3.0 {
            0.0
        } else if x >= 3.0 {
            x
        } else {
            x * (x + 3.0) / 6.0
        }
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        let mid = s.mul(s.mul(x, s.add(x, s.splat(3.0))), s.splat(1.0 / 6.0));
        let hi = s.select(s.le(s.splat(3.0), x), x, mid);
        s.select(s.le(x, s.splat(-3.0)), s.zero(), hi)
    }
    const WGSL: &'static str = "fn op_hardswish(x: T, a: f32, b: f32) -> T {
    let mid = x * (x + 3.0) * 0.16666667;
    return select(select(select(mid, x, x >= T(3.0)), T(0.0), x <= T(-3.0)), x, is_nan(x));
}";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        let x3 = k.add(F, x, 3.0f32);
        let m = k.mul(F, x, x3);
        let mid = k.mul(F, m, 1.0f32 / 6.0);
        let hi = select_cmp(k, Cmp::Ge, x, 3.0, x, mid);
        let zero = k.mov(F, 0.0f32);
        select_cmp(k, Cmp::Le, x, -3.0, zero, hi)
    }
}
