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

/// Combines two f32 values with `op` (Add, Max or Min).
pub(crate) fn combine(k: &mut PtxKernel, op: BinOp, a: Reg, b: Reg) -> Reg {
    k.bin(op, F, a, b)
}

/// Butterfly reduction over the 32 lanes of a warp; every lane ends with the result.
pub(crate) fn warp_reduce(k: &mut PtxKernel, op: BinOp, v: Reg) -> Reg {
    let mut v = v;
    for off in [16u32, 8, 4, 2, 1] {
        let o = k.shfl(ShflMode::Bfly, v, off, 0x1f);
        v = combine(k, op, v, o);
    }
    v
}

/// Reduction over a block of `threads` (a multiple of 32, ≤ 1024): warp butterflies, then one
/// shared-memory step. Every thread ends with the result. Uses the shared array `smem`
/// (at least threads/32 floats).
pub(crate) fn block_reduce(k: &mut PtxKernel, op: BinOp, v: Reg, threads: u32, identity: f32, smem: &str) -> Reg {
    let v = warp_reduce(k, op, v);
    let warps = threads / 32;
    if warps == 1 {
        return v;
    }
    let tid = k.special(Special::TidX);
    let lane = k.bin(BinOp::And, PtxType::B32, tid, 31u32);
    let warp = k.bin(BinOp::Shr, U, tid, 5u32);
    let base = k.mov(U, Operand::Symbol(smem.to_string()));
    let waddr = k.fma(U, warp, 4u32, base);
    let is_lane0 = k.setp(Cmp::Eq, U, lane, 0u32);
    k.when(is_lane0, false, |k| k.st(Space::Shared, F, Addr::reg(waddr), v));
    k.bar_sync();
    // Every warp reads all partials and reduces them (no second barrier needed for a broadcast).
    let acc = k.mov(F, identity);
    let has = k.setp(Cmp::Lt, U, lane, warps);
    let laddr = k.fma(U, lane, 4u32, base);
    let part = k.mov(F, identity);
    k.when(has, false, |k| k.ld_to(Space::Shared, part, Addr::reg(laddr)));
    let r = warp_reduce(k, op, part);
    let out = combine(k, op, acc, r);
    k.bar_sync(); // smem may be reused after this
    out
}
