//! add, sub, mul, div: one IEEE operation each (x/0 is ±inf or NaN). Correctly rounded on the
//! CPU and in PTX (`div.rn`); Vulkan allows 2.5 ULP for a division.

use crate::cpu::simd::Simd;
use crate::ops::{BinaryDef, Bound, Params};

macro_rules! arith {
    ($name:ident, $str:literal, $sym:tt, $simd:ident, $gpu_ulp:expr, $binop:ident, $wgsl_body:literal) => {
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
            const WGSL: &'static str = concat!("fn op_", $str, "(x: T, y: T, a: f32, b: f32) -> T { ", $wgsl_body, " }");
            #[cfg(feature = "cuda")]
            fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, y: rayo_ptx::ptx::Reg, _: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg {
                k.bin(rayo_ptx::ptx::BinOp::$binop, rayo_ptx::ptx::PtxType::F32, x, y)
            }
        }
    };
}

arith!(Add, "add", +, add, 0.5, Add, "return x + y;");
arith!(Sub, "sub", -, sub, 0.5, Sub, "return x - y;");
arith!(Mul, "mul", *, mul, 0.5, Mul, "return x * y;");
// Vulkan's x / y may be x·(1/y), and 1/y flushes to 0 for |y| > 2¹²⁶ (3e38 / 3e38 was 0 on an
// H100): both scaled by 1/4 there.
arith!(Div, "div", /, div, 2.5, Div, "let s = select(T(1.0), T(0.25), abs(y) > T(8.507059e37)); return (x * s) / (y * s);");
