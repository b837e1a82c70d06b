//! tanh: odd, keeps −0, ±1 at ±inf. Below |x| = 0.625 the odd polynomial of Cephes, above it
//! `1 − 2/(e^{2|x|} + 1)` (|x| clamped at 9.5, where the result is 1 in f32); on the CPU where a
//! 32-entry table lookup is one permute (AVX-512), a polynomial per interval of |x| instead
//! (`cpu::math::tanh`).

// Cephes coefficients as published; the compiler rounds each to the nearest f32.
#![allow(clippy::excessive_precision)]

use crate::cpu::math;
use crate::cpu::simd::Simd;
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Tanh;

/// Cephes' tanhf coefficients for |x| < 0.625 (x + x³·P(x²)), highest power first.
#[cfg(feature = "cuda")]
const SMALL: [f32; 5] = [-5.704_988_7e-3, 2.063_908_9e-2, -5.373_971_6e-2, 1.333_144_2e-1, -3.333_328_2e-1];

impl UnaryDef for Tanh {
    const NAME: &'static str = "tanh";
    const HEAVY: bool = true;
    // Three vectors a step, their steps interleaved (`math::tanh_n`): 6% at 100 K floats on
    // Zen 4 against four vectors one after the other (AVX-512 table form).
    const CPU_WIDE: bool = true;
    const CPU_BOUND: Bound = Bound::ulp(2.0);
    const GPU_BOUND: Bound = Bound::ulp(6.0);
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        x.tanh()
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        math::tanh(s, x)
    }
    #[inline(always)]
    fn cpu3<S: Simd>(s: S, x: [S::V; 3], _: Params) -> [S::V; 3] {
        math::tanh_n(s, x)
    }
    const WGSL: &'static str = "fn op_tanh(x: T, a: f32, b: f32) -> T {
    let ax = abs(x);
    let z = ax * ax;
    let p = ((((-5.7049887e-3 * z + 2.0639089e-2) * z - 5.3739716e-2) * z + 1.3331442e-1) * z - 3.3333282e-1);
    let small = fma(p * z, x, x);
    let e = rexp(2.0 * min(ax, T(9.5)));
    let big = 1.0 - 2.0 / (e + 1.0);
    let large = select(big, -big, x < T(0.0));
    return select(select(large, small, ax < T(0.625)), x, is_nan(x));
}";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        tanh_ptx(k, x)
    }
}

/// The PTX of [`Tanh`] (mish uses it too).
#[cfg(feature = "cuda")]
pub(crate) fn tanh_ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg) -> rayo_ptx::ptx::Reg {
    use crate::ops::ptx::*;
    let ax = k.un(UnOp::Abs, F, x);
    let z = k.mul(F, ax, ax);
    let p = horner(k, z, &SMALL);
    let pz = k.mul(F, p, z);
    let small = k.fma(F, pz, x, x);
    let ac = k.bin(BinOp::Min, F, ax, 9.5f32);
    let two = k.add(F, ac, ac);
    let e = exp(k, two);
    let d = k.add(F, e, 1.0f32);
    let q = k.bin(BinOp::Div, F, 2.0f32, d);
    let big = k.sub(F, 1.0f32, q);
    let nbig = k.un(UnOp::Neg, F, big);
    let large = select_cmp(k, Cmp::Lt, x, 0.0, nbig, big);
    let is_small = k.setp(Cmp::Lt, F, ax, 0.625f32);
    let y = k.selp(F, small, large, is_small);
    keep_nan(k, x, y)
}
