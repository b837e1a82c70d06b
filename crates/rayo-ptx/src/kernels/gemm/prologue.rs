//! What the two 128×128 double-buffered GEMMs (`blocked`, `tensor_core`) share: the kernel
//! prologue and the 16-byte global loads of one BK-deep slice.

use crate::kernels::common::*;
use crate::ptx::*;

/// Threads per block of both kernels.
pub(super) const THREADS: u32 = 256;

/// The shared buffers (two slices each), the pointer parameters and the block/thread ids.
pub(super) struct Prologue {
    pub sa: String,
    pub sb: String,
    pub a: Reg,
    pub b: Reg,
    pub c: Reg,
    pub tid: Reg,
    pub bx: Reg,
    pub by: Reg,
}

/// Emits the prologue: launch bounds (two blocks per SM), shared arrays `{prefix}_as` and
/// `{prefix}_bs` of `2 × words` elements of `ty`, the `a b c` parameters, tid and ctaid.
pub(super) fn prologue(k: &mut PtxKernel, prefix: &str, ty: PtxType, words: u32) -> Prologue {
    k.launch_bounds((THREADS, 1, 1), Some(2));
    let sa = k.shared_array(&format!("{prefix}_as"), ty, 2 * words, 16);
    let sb = k.shared_array(&format!("{prefix}_bs"), ty, 2 * words, 16);
    let a = k.ld_param_ptr("a");
    let b = k.ld_param_ptr("b");
    let c = k.ld_param_ptr("c");
    let tid = k.special(Special::TidX);
    let bx = k.special(Special::CtaidX);
    let by = k.special(Special::CtaidY);
    Prologue { sa, sb, a, b, c, tid, bx, by }
}

/// One 16-byte non-coherent global load per register quad: quad `p` from `base + p·pass_bytes`.
pub(super) fn load_passes(k: &mut PtxKernel, quads: &[Vec<Reg>], base: Reg, pass_bytes: i64) {
    for (p, r) in quads.iter().enumerate() {
        let addr = Addr::at(base, p as i64 * pass_bytes);
        k.push(Op::Ld { space: Space::Global, ty: F, dst: Regs::Many(r.clone()), addr, nc: true });
    }
}
