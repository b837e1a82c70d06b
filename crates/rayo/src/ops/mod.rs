//! The op registry: every element-wise op and reduction defined once, and iterated by every
//! backend, test and bench.
//!
//! An element-wise op is one file in `unary/` or `binary/`: a unit struct implementing
//! [`UnaryDef`] or [`BinaryDef`], which holds everything about the op — its name, its scalar
//! parameters and their domain, the f64 reference, the error bounds, the CPU kernel (written
//! once over `Simd`), the WGSL function and the PTX emitter. The
//! [`UnaryOp`] / [`BinaryOp`] enums below are generated from the list of those structs; the CPU
//! (`rayo::slice`), wgpu (`rayo::gpu`) and CUDA (`rayo::cuda`) all take these enums, so an op
//! cannot exist on one backend and not another, or mean something different on it.
//!
//! Semantics shared by every backend (and checked by `tests/parity.rs` against the f64
//! reference on awkward lengths, NaN, ±inf, −0 and denormals): NaN in gives NaN out (as in
//! PyTorch; `relu(NaN)` and `max(NaN, 1)` are NaN), ±inf follow the f64 limits, the sign of a
//! zero result follows the reference. GPU backends may flush denormal inputs and results to
//! zero (the hardware's default), and meet their own, stated, error bounds.

mod binary;
#[cfg(feature = "cuda")]
pub(crate) mod ptx;
mod reduce;
mod registry;
mod unary;

pub use binary::*;
pub use reduce::{combine_f64, ReduceCombine, ReduceLoad, ReduceOp};
pub use registry::{BinaryOp, UnaryOp};
pub(crate) use registry::{BinaryVisitor, UnaryVisitor};

use crate::cpu::simd::Simd;
use crate::Result;
pub use unary::*;

/// Parameters an op receives: up to two scalars (unused slots are 0).
pub type Params = [f32; 2];

/// Error bounds of an op against its f64 reference: `|got − want| ≤ ulp·ulp(want) + abs`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    pub ulp: f64,
    pub abs: f64,
}

impl Bound {
    pub const EXACT: Bound = Bound { ulp: 0.0, abs: 0.0 };
    pub const fn ulp(ulp: f64) -> Bound {
        Bound { ulp, abs: 0.0 }
    }
    pub const fn ulp_abs(ulp: f64, abs: f64) -> Bound {
        Bound { ulp, abs }
    }
}

/// An element-wise function of one input and up to two scalar parameters.
pub trait UnaryDef {
    /// The name used by the API, `rayo bench` and errors.
    const NAME: &'static str;
    /// Names of the scalar parameters, in order (at most two).
    const PARAMS: &'static [&'static str] = &[];
    /// Error bound on the CPU (every instruction set).
    const CPU_BOUND: Bound;
    /// Error bound on GPUs (wgpu and CUDA), whose exp/log instructions are looser.
    const GPU_BOUND: Bound;
    /// Parameters used by tests and benches.
    const SAMPLE: Params = [0.0, 0.0];
    /// A polynomial per element (the CPU splits it over threads at smaller sizes).
    const HEAVY: bool = false;
    /// The CPU loop takes three vectors per step, through [`UnaryDef::cpu3`], instead of two
    /// (`UnaryFn::WIDE` in `cpu::kernels::elementwise`).
    const CPU_WIDE: bool = false;
    /// Rejects parameters the op is undefined for.
    fn validate(_p: Params) -> Result<()> {
        Ok(())
    }
    /// The exact value, in f64.
    fn reference(x: f64, p: [f64; 2]) -> f64;
    /// One vector of lanes on the CPU (called inside the instruction set's target-feature
    /// context: implementations are `#[inline(always)]`).
    fn cpu<S: Simd>(s: S, x: S::V, p: Params) -> S::V;
    /// [`UnaryDef::cpu`] of three vectors, the same bits; an op may interleave their steps
    /// (what the `CPU_WIDE` loop calls).
    #[inline(always)]
    fn cpu3<S: Simd>(s: S, x: [S::V; 3], p: Params) -> [S::V; 3] {
        [Self::cpu(s, x[0], p), Self::cpu(s, x[1], p), Self::cpu(s, x[2], p)]
    }
    /// WGSL source of `fn op_<NAME>(x: T, a: f32, b: f32) -> T`, `T` being `f32` or
    /// `vec4<f32>` (the generator sets the alias); `a`, `b` are the parameters.
    const WGSL: &'static str;
    /// PTX for one element: `x` and the parameters are f32 registers.
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, p: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg;
}

/// An element-wise function of two inputs of equal length and up to two scalar parameters.
pub trait BinaryDef {
    const NAME: &'static str;
    const PARAMS: &'static [&'static str] = &[];
    const CPU_BOUND: Bound;
    const GPU_BOUND: Bound;
    const SAMPLE: Params = [0.0, 0.0];
    const HEAVY: bool = false;
    fn validate(_p: Params) -> Result<()> {
        Ok(())
    }
    fn reference(x: f64, y: f64, p: [f64; 2]) -> f64;
    /// The size the error bound is relative to: |reference| unless the op can cancel.
    fn magnitude(x: f64, y: f64, p: [f64; 2]) -> f64 {
        Self::reference(x, y, p).abs()
    }
    fn cpu<S: Simd>(s: S, x: S::V, y: S::V, p: Params) -> S::V;
    /// WGSL source of `fn op_<NAME>(x: T, y: T, a: f32, b: f32) -> T`.
    const WGSL: &'static str;
    #[cfg(feature = "cuda")]
    fn ptx(k: &mut rayo_ptx::ptx::PtxKernel, x: rayo_ptx::ptx::Reg, y: rayo_ptx::ptx::Reg, p: &[rayo_ptx::ptx::Reg]) -> rayo_ptx::ptx::Reg;
}

/// The WGSL every generated element-wise kernel includes: shared helpers, then the function
/// `op_<name>` of every op (the generator sets the aliases `T` and `U` first).
#[cfg(any(feature = "gpu", feature = "gpu-wasm"))]
pub(crate) fn wgsl_library() -> String {
    let mut s = String::from(unary::WGSL_PRELUDE);
    s.push_str(unary::WGSL_EXPM1);
    s.push('\n');
    s.push_str(&UnaryOp::wgsl_library());
    s.push_str(&BinaryOp::wgsl_library());
    s
}
