//! Pieces shared by the kernels: thread indices, warp and block reductions, exp/ln.

use crate::ptx::*;

pub(crate) const F: PtxType = PtxType::F32;
pub(crate) const U: PtxType = PtxType::U32;
pub(crate) const LOG2E: f32 = std::f32::consts::LOG2_E;
pub(crate) const LN2: f32 = std::f32::consts::LN_2;

/// `ctaid.x * ntid.x + tid.x`.
pub(crate) fn global_tid(k: &mut PtxKernel) -> Reg {
    let ctaid = k.special(Special::CtaidX);
    let ntid = k.special(Special::NtidX);
    let tid = k.special(Special::TidX);
    k.fma(U, ctaid, ntid, tid)
}

/// `nctaid.x * ntid.x`.
pub(crate) fn grid_stride(k: &mut PtxKernel) -> Reg {
    let n = k.special(Special::NctaidX);
    let ntid = k.special(Special::NtidX);
    k.mul(U, n, ntid)
}

/// e^x via `ex2.approx` of x·log2(e).
pub(crate) fn exp(k: &mut PtxKernel, x: impl Into<Operand>) -> Reg {
    let t = k.mul(F, x, LOG2E);
    k.un(UnOp::Ex2, F, t)
}

/// ln x via `lg2.approx` · ln 2.
pub(crate) fn ln(k: &mut PtxKernel, x: impl Into<Operand>) -> Reg {
    let t = k.un(UnOp::Lg2, F, x);
    k.mul(F, t, LN2)
}

/// Whether `v` is NaN or +inf (the logits sampling rejects).
pub(crate) fn nan_or_pinf(k: &mut PtxKernel, v: Reg) -> Reg {
    let num = k.setp(Cmp::Eq, F, v, v);
    let nan = k.un(UnOp::Not, PtxType::Pred, num);
    let pinf = k.setp(Cmp::Eq, F, v, f32::INFINITY);
    k.bin(BinOp::Or, PtxType::Pred, nan, pinf)
}

/// How two f32 values combine in a reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceCombine {
    Sum,
    /// The larger; a NaN on either side gives NaN (as PyTorch's `max`).
    Max,
    /// The smaller; a NaN on either side gives NaN.
    Min,
}

impl ReduceCombine {
    /// The value that changes nothing (0, -inf, +inf).
    pub fn identity(self) -> f32 {
        match self {
            ReduceCombine::Sum => 0.0,
            ReduceCombine::Max => f32::NEG_INFINITY,
            ReduceCombine::Min => f32::INFINITY,
        }
    }

    /// The instruction that combines two non-NaN values.
    pub(crate) fn op(self) -> BinOp {
        match self {
            ReduceCombine::Sum => BinOp::Add,
            ReduceCombine::Max => BinOp::Max,
            ReduceCombine::Min => BinOp::Min,
        }
    }
}

/// `a ⊕ b` with the NaN rule of [`ReduceCombine`]: `max.f32`/`min.f32` return the non-NaN
/// operand, so a NaN operand is selected explicitly (`setp.eq x, x` is false only for NaN).
pub(crate) fn combine(k: &mut PtxKernel, c: ReduceCombine, a: Reg, b: Reg) -> Reg {
    let r = k.bin(c.op(), F, a, b);
    if c == ReduceCombine::Sum {
        return r;
    }
    let a_num = k.setp(Cmp::Eq, F, a, a);
    let r = k.selp(F, r, a, a_num);
    let b_num = k.setp(Cmp::Eq, F, b, b);
    k.selp(F, r, b, b_num)
}

/// Butterfly reduction over the 32 lanes of a warp; every lane ends with the result.
pub(crate) fn warp_reduce(k: &mut PtxKernel, c: ReduceCombine, v: Reg) -> Reg {
    let mut v = v;
    for off in [16u32, 8, 4, 2, 1] {
        let o = k.shfl(ShflMode::Bfly, v, off, 0x1f);
        v = combine(k, c, v, o);
    }
    v
}

/// Reduction over a block of `threads` (a multiple of 32, ≤ 1024): warp butterflies, then one
/// shared-memory step. Every thread ends with the result. Uses the shared array `smem`
/// (at least threads/32 floats).
pub(crate) fn block_reduce(k: &mut PtxKernel, c: ReduceCombine, v: Reg, threads: u32, smem: &Name) -> Reg {
    let identity = c.identity();
    let v = warp_reduce(k, c, v);
    let warps = threads / 32;
    if warps == 1 {
        return v;
    }
    let tid = k.special(Special::TidX);
    let lane = k.bin(BinOp::And, PtxType::B32, tid, 31u32);
    let warp = k.bin(BinOp::Shr, U, tid, 5u32);
    let base = k.mov(U, Operand::Symbol(*smem));
    let waddr = k.fma(U, warp, 4u32, base);
    let is_lane0 = k.setp(Cmp::Eq, U, lane, 0u32);
    k.when(is_lane0, false, |k| k.st(Space::Shared, F, Addr::reg(waddr), v));
    k.bar_sync();
    // Every warp reads all partials and reduces them (no second barrier needed for a broadcast).
    let has = k.setp(Cmp::Lt, U, lane, warps);
    let laddr = k.fma(U, lane, 4u32, base);
    let part = k.mov(F, identity);
    k.when(has, false, |k| k.ld_to(Space::Shared, part, Addr::reg(laddr)));
    let out = warp_reduce(k, c, part);
    k.bar_sync(); // smem may be reused after this
    out
}
