//! axpy: `alpha·x + y`, one fused multiply-add where the hardware has FMA (two roundings on
//! SSE2, SIMD128 and scalar). The bound is relative to |alpha·x| + |y|, since the sum may cancel.
//! Where alpha·x overflows f32 the two forms differ (fused: the exact sum, unfused: the IEEE sum
//! of ±inf and y, NaN for inf − inf); [`BinaryDef::magnitude`] is then infinite.

use crate::cpu::simd::Simd;
use crate::ops::{BinaryDef, Bound, Params};

#[derive(Clone, Copy, Debug)]
pub struct Axpy;

impl BinaryDef for Axpy {
    const NAME: &'static str = "axpy";
    const PARAMS: &'static [&'static str] = &["alpha"];
    const CPU_BOUND: Bound = Bound::ulp(1.0);
    const GPU_BOUND: Bound = Bound::ulp(1.0);
    const SAMPLE: Params = [2.5, 0.0];
    fn reference(x: f64, y: f64, p: [f64; 2]) -> f64 {
        p[0] * x + y
    }
    fn magnitude(x: f64, y: f64, p: [f64; 2]) -> f64 {
        let ax = (p[0] * x).abs();
        if ax > f32::MAX as f64 && x.is_finite() {
            return f64::INFINITY;
        }
        ax + if y.is_finite() { y.abs() } else { 0.0 }
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, y: S::V, p: Params) -> S::V {
        s.mul_add(s.splat(p[0]), x, y)
    }
    const WGSL: &'static str = "fn op_axpy(x: T, y: T, a: f32, b: f32) -> T { return fma(T(a), x, y); }";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, y: rayo_ptx::ptx::Reg, p: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        k.fma(rayo_ptx::ptx::PtxType::F32, p[0], x, y)
    }
}
