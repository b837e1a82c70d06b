//! add, sub, mul, div: one IEEE operation each (x/0 is ±inf or NaN). Correctly rounded on the
//! CPU and in PTX (`div.rn`); Vulkan allows 2.5 ULP for a division.

use crate::cpu::simd::Simd;
use crate::ops::{BinaryDef, Bound, Params};

macro_rules! arith {
    ($name:ident, $str:literal, $sym:tt, $simd:ident, $gpu_ulp:expr, $binop:ident) => {
        #[doc = concat!("`x ", stringify!($sym), " y`.")]
        #[derive(Clone, Copy, Debug)]
        pub struct $name;

        impl BinaryDef for $name {
            const NAME: &'static str = $str;
            const CPU_BOUND: Bound = Bound::ulp(0.5);
            const GPU_BOUND: Bound = Bound::ulp($gpu_ulp);
            fn reference(x: f64, y: f64, _: [f64; 2]) -> f64 {
                x $sym y
            }
            #[inline(always)]
            fn cpu<S: Simd>(s: S, x: S::V, y: S::V, _: Params) -> S::V {
                s.$simd(x, y)
            }
            const WGSL: &'static str = concat!("fn op_", $str, "(x: T, y: T, a: f32, b: f32) -> T { return x ", stringify!($sym), " y; }");
            #[cfg(feature = "cuda")]
            fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, y: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
                k.bin(rayo_ptx::ptx::BinOp::$binop, rayo_ptx::ptx::PtxType::F32, x, y)
            }
        }
    };
}

arith!(Add, "add", +, add, 0.5, Add);
arith!(Sub, "sub", -, sub, 0.5, Sub);
arith!(Mul, "mul", *, mul, 0.5, Mul);
arith!(Div, "div", /, div, 2.5, Div);
