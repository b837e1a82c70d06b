//! selu: `λ·x` for x > 0, `λ·α·(eˣ − 1)` otherwise (Klambauer et al. 2017); keeps −0.

// λ and α with the paper's digits; the compiler rounds them to the nearest f32.
#![allow(clippy::excessive_precision)]

use super::elu::Elu;
use crate::cpu::simd::Simd;
use crate::ops::{Bound, Params, UnaryDef};

/// SELU's λ and α.
pub const SELU_LAMBDA: f32 = 1.050_700_987_355_480_5;
pub const SELU_ALPHA: f32 = 1.673_263_242_354_377_3;

#[derive(Clone, Copy, Debug)]
pub struct Selu;

impl UnaryDef for Selu {
    const NAME: &'static str = "selu";
    const HEAVY: bool = true;
    const CPU_BOUND: Bound = Bound::ulp(3.0);
    const GPU_BOUND: Bound = Bound::ulp(8.0);
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        SELU_LAMBDA as f64 * Elu::reference(x, [SELU_ALPHA as f64, 0.0])
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        s.mul(s.splat(SELU_LAMBDA), Elu::cpu(s, x, [SELU_ALPHA, 0.0]))
    }
    const WGSL: &'static str = "fn op_selu(x: T, a: f32, b: f32) -> T { return 1.0507010 * op_elu(x, 1.6732632, 0.0); }";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        let alpha = k.mov(F, SELU_ALPHA);
        let e = Elu::ptx(k, x, &[alpha]);
        k.mul(F, e, SELU_LAMBDA)
    }
}
