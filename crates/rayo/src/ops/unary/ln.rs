//! ln: natural logarithm; ln(±0) = −inf, ln(x < 0) = NaN, ln(inf) = inf. CPU: 1 ULP with FMA
//! (2 without) for positive normal and denormal inputs. GPUs: the hardware log2, absolute error
//! ≤ 2⁻²¹ near 1 (Vulkan's bound) and a few ULP elsewhere.

use crate::cpu::math;
use crate::cpu::simd::Simd;
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Ln;

impl UnaryDef for Ln {
    const NAME: &'static str = "ln";
    const HEAVY: bool = true;
    const CPU_BOUND: Bound = Bound::ulp(2.0);
    const GPU_BOUND: Bound = Bound::ulp_abs(4.0, 4.8e-7);
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        x.ln()
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        math::ln(s, x)
    }
    // Denormals are scaled by 2²³ first (a GPU that flushes them gets ln 0 = −inf).
    const WGSL: &'static str = "fn op_ln(x: T, a: f32, b: f32) -> T {
    let den = x < T(1.17549435e-38);
    let l = select(log(x), log(x * 8388608.0) - 15.942385, den);
    let y = select(l, -inf_of(x), x == T(0.0));
    return select(select(y, x, x > T(3.4028234663852886e38)), nan_of(x), x < T(0.0));
}";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        crate::ops::ptx::ln(k, x)
    }
}
