//! maximum, minimum of two inputs, NaN winning (as PyTorch's `maximum`/`minimum`); for equal
//! inputs (±0) the first. (`max`/`min` are the reductions.)

use crate::cpu::simd::Simd;
use crate::ops::{BinaryDef, Bound, Params};

macro_rules! minmax {
    ($name:ident, $str:literal, $lt_other_first:literal, $wgsl_cmp:literal) => {
        #[doc = concat!("`", $str, "(x, y)`, NaN if either is NaN.")]
        #[derive(Clone, Copy, Debug)]
        pub struct $name;

        impl BinaryDef for $name {
            const NAME: &'static str = $str;
            const CPU_BOUND: Bound = Bound::EXACT;
            const GPU_BOUND: Bound = Bound::EXACT;
            fn reference(x: f64, y: f64, _: [f64; 2]) -> f64 {
                if x.is_nan() || y.is_nan() {
                    f64::NAN
                } else if (if $lt_other_first { x < y } else { y < x }) {
                    y
                } else {
                    x
                }
            }
            #[inline(always)]
            fn cpu<S: Simd>(s: S, x: S::V, y: S::V, _: Params) -> S::V {
                let take_y = if $lt_other_first { s.lt(x, y) } else { s.lt(y, x) };
                let r = s.select(take_y, y, x);
                s.select(s.is_nan(y), y, r)
            }
            const WGSL: &'static str = concat!(
                "fn op_",
                $str,
                "(x: T, y: T, a: f32, b: f32) -> T {\n    let r = select(x, y, ",
                $wgsl_cmp,
                ");\n    return select(select(r, y, is_nan(y)), x, is_nan(x));\n}"
            );
            #[cfg(feature = "cuda")]
            fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, y: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
                use crate::ops::ptx::*;
                let take_y = if $lt_other_first { k.setp(Cmp::Lt, F, x, y) } else { k.setp(Cmp::Lt, F, y, x) };
                let r = k.selp(F, y, x, take_y);
                keep_nan(k, y, r)
            }
        }
    };
}

minmax!(Max, "maximum", true, "x < y");
minmax!(Min, "minimum", false, "y < x");
