//! elu: `x` for x > 0, `alpha·(eˣ − 1)` otherwise, with an expm1 accurate near 0; keeps −0.
//! Any alpha: a NaN or infinite one gives the IEEE product (as PyTorch).

use crate::cpu::math;
use crate::cpu::simd::{Simd, SimdExt};
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Elu;

/// WGSL: eˣ − 1 for x ≤ 0 as the CPU computes it (`cpu::math::expm1_nonpositive`):
/// expm1(x) = 2ⁿ·expm1(r) + (2ⁿ − 1) after a Cody–Waite reduction, accurate near 0.
#[cfg(any(feature = "gpu", feature = "gpu-wasm"))]
pub(crate) const WGSL_EXPM1: &str = "
fn expm1_nonpositive(x: T) -> T {
    let xc = max(x, T(-87.0));
    let n = round(xc * 1.442695);
    var r = fma(n, T(-0.6933594), xc);
    r = fma(n, T(2.1219444e-4), r);
    let q = ((((2.4818123e-5 * r + 1.989095e-4) * r + 1.3888916e-3) * r + 8.333311e-3) * r + 4.1666665e-2) * r + 0.16666667;
    let em1r = fma(r * r, fma(r, q, T(0.5)), r);
    let p2 = pow2i(n);
    let y = fma(p2, em1r, p2 - 1.0);
    return select(select(y, x, x == T(0.0)), x, is_nan(x));
}";

impl UnaryDef for Elu {
    const NAME: &'static str = "elu";
    const PARAMS: &'static [&'static str] = &["alpha"];
    const HEAVY: bool = true;
    const CPU_BOUND: Bound = Bound::ulp(3.0);
    const GPU_BOUND: Bound = Bound::ulp(8.0);
    const SAMPLE: Params = [1.0, 0.0];
    fn reference(x: f64, p: [f64; 2]) -> f64 {
        if x > 0.0 {
            x
        } else {
            p[0] * x.exp_m1()
        }
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, p: Params) -> S::V {
        let neg = s.mul(s.splat(p[0]), math::expm1_nonpositive(s, x));
        s.select(s.lt(s.zero(), x), x, neg)
    }
    const WGSL: &'static str = "fn op_elu(x: T, a: f32, b: f32) -> T { return select(a * expm1_nonpositive(x), x, x > T(0.0)); }";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, p: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        let em1 = expm1_nonpositive(k, x);
        let neg = k.mul(F, em1, p[0]);
        select_cmp(k, Cmp::Gt, x, 0.0, x, neg)
    }
}

/// eˣ − 1 for x ≤ 0 (as [`WGSL_EXPM1`]); NaN in NaN out.
#[cfg(feature = "cuda")]
pub(crate) fn expm1_nonpositive(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg) -> rayo_ptx::ptx::Reg {
    use crate::ops::ptx::*;
    let xc = k.bin(BinOp::Max, F, x, -87.0f32);
    let t = k.mul(F, xc, std::f32::consts::LOG2_E);
    let n = round(k, t);
    let r = k.fma(F, n, -0.693_359_4f32, xc);
    let r = k.fma(F, n, 2.121_944_4e-4f32, r);
    let q = horner(k, r, &[2.481_812_3e-5, 1.989_095e-4, 1.388_891_6e-3, 8.333_311e-3, 4.166_666_5e-2, 0.166_666_67]);
    let h = k.fma(F, r, q, 0.5f32);
    let r2 = k.mul(F, r, r);
    let em1r = k.fma(F, r2, h, r);
    let p2 = k.un(UnOp::Ex2, F, n);
    let p2m1 = k.sub(F, p2, 1.0f32);
    let y = k.fma(F, p2, em1r, p2m1);
    let y = select_cmp(k, Cmp::Eq, x, 0.0, x, y);
    keep_nan(k, x, y)
}
