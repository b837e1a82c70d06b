//! mish: `x · tanh(ln(1 + eˣ))`, computed as x·n/(n + 2) with n = eˣ(eˣ + 2); x itself past 20;
//! mish(−inf) = −0.

use crate::cpu::math;
use crate::cpu::simd::Simd;
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Mish;

impl UnaryDef for Mish {
    const NAME: &'static str = "mish";
    const HEAVY: bool = true;
    const CPU_BOUND: Bound = Bound::ulp_abs(4.0, 1e-37);
    const GPU_BOUND: Bound = Bound::ulp_abs(8.0, 1e-35);
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        if x == f64::NEG_INFINITY {
            return -0.0;
        }
        x * x.exp().ln_1p().tanh()
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        math::mish(s, x)
    }
    const WGSL: &'static str = "fn op_mish(x: T, a: f32, b: f32) -> T {
    let e = rexp(min(x, T(20.0)));
    let n = e * (e + 2.0);
    let y = select(x, T(-3.4028234663852886e38), x < T(-3.4028234663852886e38)) * (n / (n + 2.0));
    return select(select(y, x, x > T(20.0)), x, is_nan(x));
}";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        let xc = k.bin(BinOp::Min, F, x, 20.0f32);
        let e = exp(k, xc);
        let e2 = k.add(F, e, 2.0f32);
        let n = k.mul(F, e, e2);
        let d = k.add(F, n, 2.0f32);
        let t = k.bin(BinOp::Div, F, n, d);
        let big = k.mov(F, f32::MIN);
        let xl = select_cmp(k, Cmp::Lt, x, f32::MIN, big, x);
        let y = k.mul(F, xl, t);
        let y = select_cmp(k, Cmp::Gt, x, 20.0, x, y);
        keep_nan(k, x, y)
    }
}
