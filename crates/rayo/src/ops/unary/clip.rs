//! clip: clamps to `[min, max]`; NaN stays NaN. An error if min > max or a bound is NaN.

use crate::cpu::simd::Simd;
use crate::ops::{Bound, Params, UnaryDef};
use crate::{Error, Result};

#[derive(Clone, Copy, Debug)]
pub struct Clip;

impl UnaryDef for Clip {
    const NAME: &'static str = "clip";
    const PARAMS: &'static [&'static str] = &["min", "max"];
    const CPU_BOUND: Bound = Bound::EXACT;
    const GPU_BOUND: Bound = Bound::EXACT;
    const SAMPLE: Params = [-2.0, 2.0];
    fn validate(p: Params) -> Result<()> {
        let [min, max] = p;
        if min.is_nan() || max.is_nan() || min > max {
            let (name, value) = if min.is_nan() { ("min", min) } else { ("max", max) };
            return Err(Error::InvalidParameter { op: Self::NAME, name, value: value as f64, reason: "need min <= max, neither NaN" });
        }
        Ok(())
    }
    fn reference(x: f64, p: [f64; 2]) -> f64 {
        if x < p[0] {
            p[0]
        } else if x > p[1] {
            p[1]
        } else {
            x
        }
    }
    #[inline(always)]
    fn cpu<S: Simd>(s: S, x: S::V, p: Params) -> S::V {
        let (lo, hi) = (s.splat(p[0]), s.splat(p[1]));
        let y = s.select(s.lt(x, lo), lo, x);
        s.select(s.lt(hi, y), hi, y)
    }
    const WGSL: &'static str = "fn op_clip(x: T, a: f32, b: f32) -> T {
    let y = select(x, T(a), x < T(a));
    return select(select(y, T(b), y > T(b)), x, is_nan(x));
}";
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, p: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
        use crate::ops::ptx::*;
        let lt = k.setp(Cmp::Lt, F, x, p[0]);
        let y = k.selp(F, p[0], x, lt);
        let gt = k.setp(Cmp::Gt, F, y, p[1]);
        k.selp(F, p[1], y, gt)
    }
}
