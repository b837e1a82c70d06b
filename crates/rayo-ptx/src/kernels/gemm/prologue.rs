//! What the two 128×128 double-buffered GEMMs (`blocked`, `tensor_core`) share: the kernel
//! prologue and the 16-byte global loads of one BK-deep slice.

use crate::kernels::common::*;
use crate::ptx::*;

/// Threads per block of both kernels.
pub(super) const THREADS: u32 = 256;

/// The shared buffers (two slices each), the pointer parameters and the block/thread ids.
pub(super) struct Prologue {
    pub sa: Name,
    pub sb: Name,
    pub a: Reg,
    pub b: Reg,
    pub c: Reg,
    pub tid: Reg,
    pub bx: Reg,
    pub by: Reg,
    /// The `k` and `n` parameters (u32); rows come from the grid.
    pub kd: Reg,
    pub n: Reg,
}

/// Emits the prologue: launch bounds (two blocks per SM), shared arrays `{prefix}_as` and
/// `{prefix}_bs` of `2 × words` elements of `ty`, the `a b c k n` parameters, tid and ctaid.
pub(super) fn prologue(k: &mut PtxKernel, prefix: &str, ty: PtxType, words: u32) -> Prologue {
    k.launch_bounds((THREADS, 1, 1), Some(2));
    let sa = k.shared_array(&format!("{prefix}_as"), ty, 2 * words, 16);
    let sb = k.shared_array(&format!("{prefix}_bs"), ty, 2 * words, 16);
    let a = k.ld_param_ptr("a");
    let b = k.ld_param_ptr("b");
    let c = k.ld_param_ptr("c");
    let kd = k.ld_param("k");
    let n = k.ld_param("n");
    let tid = k.special(Special::TidX);
    let bx = k.special(Special::CtaidX);
    let by = k.special(Special::CtaidY);
    Prologue { sa, sb, a, b, c, tid, bx, by, kd, n }
}

/// Global pointers of the load passes of one slice: `base + p·pass_bytes` for `p < passes`
/// (the pass stride is a run-time u64, so each pass keeps its own pointer).
pub(super) fn pass_pointers(k: &mut PtxKernel, base: Reg, passes: usize, pass_bytes: Reg) -> Vec<Reg> {
    let mut ptrs = vec![base];
    for p in 1..passes {
        let prev = ptrs[p - 1];
        ptrs.push(k.add(PtxType::U64, prev, pass_bytes));
    }
    ptrs
}

/// One 16-byte non-coherent global load per register quad: quad `p` from `at[p]`.
pub(super) fn load_passes(k: &mut PtxKernel, quads: &[Vec<Reg>], at: &[Addr]) {
    for (r, addr) in quads.iter().zip(at) {
        k.push(Op::Ld { space: Space::Global, ty: F, dst: Regs::from(&r[..]), addr: *addr, nc: true });
    }
}

/// Advances every pass pointer by `step` bytes (an immediate or a u64 register).
pub(super) fn advance(k: &mut PtxKernel, ptrs: &[Reg], step: Operand) {
    for &p in ptrs {
        k.bin_to(BinOp::Add, p, p, step);
    }
}

/// `cnt = k / depth - 1` slices after the first (`depth` a power of two), and a branch to
/// `skip` when there are none.
pub(super) fn slice_count(k: &mut PtxKernel, kd: Reg, depth: u32, skip: &Name) -> Reg {
    let tiles = k.bin(BinOp::Shr, U, kd, depth.trailing_zeros());
    let cnt = k.sub(U, tiles, 1u32);
    let none = k.setp(Cmp::Eq, U, cnt, 0u32);
    k.bra_if(none, false, skip);
    cnt
}
