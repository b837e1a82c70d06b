//! relu: `max(0, x)`. Exact; −0 → +0; NaN → NaN (a plain `max(0, x)` instruction would give 0).

use crate::cpu::simd::{Simd, SimdExt};
use crate::ops::{Bound, Params, UnaryDef};

#[derive(Clone, Copy, Debug)]
pub struct Relu;

impl UnaryDef for Relu {
    const NAME: &'static str = "relu";
    const CPU_BOUND: Bound = Bound::EXACT;
    const GPU_BOUND: Bound = Bound::EXACT;
    fn reference(x: f64, _: [f64; 2]) -> f64 {
        if x <= 0.0 {
            0.0
        } else {
            x
        }
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, _: Params) -> S::V {
        s.select(s.le(x, s.zero()), s.zero(), x)
    }
    // The NaN test by bits: NVIDIA's Vulkan compiler rewrote `x <= 0` so that relu(NaN) was 0.
    const WGSL: &'static str = "fn op_relu(x: T, a: f32, b: f32) -> T { return select(select(x, T(0.0), x <= T(0.0)), x, is_nan(x)); }";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        let zero = k.mov(F, 0.0f32);
        select_cmp(k, Cmp::Le, x, 0.0, zero, x)
    }
}
