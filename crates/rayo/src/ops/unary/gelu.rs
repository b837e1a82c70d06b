//! gelu: the exact GELU `x · Φ(x)` (erf form, not the tanh approximation); −0 at −inf, inf at
//! inf. The CPU uses fitted polynomials (one per interval of |x| where a 32-entry table lookup
//! is one permute, AVX-512) with an exactly split square (4 ULP where |result| ≥ 1e−30); GPUs
//! use erfc from Numerical Recipes' erfcc (fractional error < 1.2e−7), whose e^{−z²} loses a
//! few ULP as |x| grows.

// erfcc coefficients as published; the compiler rounds each to the nearest f32.
#![allow(clippy::excessive_precision)]

use crate::cpu::math;
use crate::cpu::simd::Simd;
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Gelu;

/// erfcc's coefficients, highest power first.
#[cfg(feature = "cuda")]
const ERFC: [f32; 10] =
    [0.170_872_77, -0.822_152_23, 1.488_515_87, -1.135_203_98, 0.278_868_07, -0.186_288_06, 0.096_784_18, 0.374_091_96, 1.000_023_68, -1.265_512_23];

impl UnaryDef for Gelu {
    const NAME: &'static str = "gelu";
    const HEAVY: bool = true;
    const CPU_BOUND: Bound = Bound::ulp_abs(4.0, 1.5e-37);
    const GPU_BOUND: Bound = Bound::ulp_abs(8.0, 1e-35);
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        if x == f64::NEG_INFINITY {
            return -0.0;
        }
        if x == f64::INFINITY {
            return x;
        }
        // Φ(x) = erfc(−x/√2)/2, accurate for large negative x.
        x * 0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        math::gelu(s, x)
    }
    // erfc(|x|/√2) = t·e^(−x²/2 + poly(t)), with x² split into an exact hi (x with 12
    // significant bits, squared) and a small lo, so that the large part enters the exponential's
    // argument reduction unrounded (rounding z = x/√2 or z² first costs 50 ULP at |x| = 8;
    // Vulkan's `fma` may be unfused, so the split is by bits, not by an FMA).
    const WGSL: &'static str = "fn erfc_half_sq(ax: T) -> T {
    let t = 1.0 / (1.0 + 0.35355339 * ax);
    let poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
        t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
        t * (-0.82215223 + t * 0.17087277))))))));
    let xh = bitcast<T>(bitcast<U>(ax) & U(0xfffff000u));
    let hi = xh * xh;
    let lo = (ax - xh) * (ax + xh);
    return t * rexp2(-0.5 * hi, poly - 0.5 * lo);
}
fn op_gelu(x: T, a: f32, b: f32) -> T {
    let c = erfc_half_sq(abs(x));
    let phi = select(1.0 - 0.5 * c, 0.5 * c, x < T(0.0));
    // ±inf explicitly: erfc's terms are inf·0 there (NaN on some GPUs, e.g. SwiftShader)
    let y = select(select(x * phi, T(-0.0), x < T(-3.4028234663852886e38)), x, x > T(3.4028234663852886e38));
    return select(y, x, is_nan(x));
}";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        // As the WGSL: erfc(|x|/√2) = t·e^(−x²/2 + poly(t)), x² = hi + lo exactly. Past
        // |x| = 20 the tail is 0: the clamp keeps x² (and inf − inf) out of the split.
        let abs_x = k.un(UnOp::Abs, F, x);
        let ax = k.bin(BinOp::Min, F, abs_x, 20.0f32);
        let d = k.fma(F, ax, std::f32::consts::FRAC_1_SQRT_2 * 0.5, 1.0f32);
        let t = k.bin(BinOp::Div, F, 1.0f32, d);
        let poly = horner(k, t, &ERFC);
        let hi = k.mul(F, ax, ax);
        let nhi = k.un(UnOp::Neg, F, hi);
        let lo = k.fma(F, ax, ax, nhi);
        let half_hi = k.mul(F, hi, -0.5f32);
        let rest = k.fma(F, lo, -0.5f32, poly);
        let e = exp2_split(k, half_hi, rest);
        let c = k.mul(F, t, e);
        let hc = k.mul(F, c, 0.5f32);
        let one_minus = k.sub(F, 1.0f32, hc);
        let phi = select_cmp(k, Cmp::Lt, x, 0.0, hc, one_minus);
        let y = k.mul(F, x, phi);
        let nz = k.mov(F, -0.0f32);
        select_cmp(k, Cmp::Lt, x, f32::MIN, nz, y)
    }
}
