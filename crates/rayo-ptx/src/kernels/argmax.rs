//! Greedy sampling on the device: the first maximum of a row of logits, so that a decoding
//! step sends the host one token id instead of the vocabulary's logits. One block of 1024
//! threads: each takes every 1024th run of 8 values (two 16-byte loads in flight, where one
//! value at a time left each thread waiting on ~150 dependent loads: 28-44 µs for a 152K-262K
//! vocabulary), then warp butterflies and one shared-memory step combine (value, index) pairs,
//! the smaller index winning ties. It also finds the first NaN or +inf (which greedy sampling
//! rejects), so the host can raise the sampler's error.

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

const THREADS: u32 = 1024;
const B32: PtxType = PtxType::B32;

/// Parameters: `x` (n f32), `out` (3 words: the index of the first maximum — `u32::MAX` when
/// every value is −inf or NaN —, the index of the first NaN or +inf — `u32::MAX` when none —,
/// and the maximum, f32) (u64); `n` (u32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ArgmaxKernel;

impl ArgmaxKernel {
    pub const THREADS: u32 = THREADS;

    pub fn launch(&self) -> LaunchConfig {
        LaunchConfig { grid: (1, 1, 1), block: (THREADS, 1, 1), shared_bytes: 0 }
    }
}

/// `(v, i, bad)` combined with another lane's / warp's `(ov, oi, obad)` in place.
fn merge(k: &mut PtxKernel, (v, i, bad): (Reg, Reg, Reg), (ov, oi, obad): (Reg, Reg, Reg)) {
    let gt = k.setp(Cmp::Gt, F, ov, v);
    let eq = k.setp(Cmp::Eq, F, ov, v);
    let lt = k.setp(Cmp::Lt, U, oi, i);
    let tie = k.bin(BinOp::And, PtxType::Pred, eq, lt);
    let take = k.bin(BinOp::Or, PtxType::Pred, gt, tie);
    let nv = k.selp(F, ov, v, take);
    let ni = k.selp(U, oi, i, take);
    k.mov_to(v, nv);
    k.mov_to(i, ni);
    k.bin_to(BinOp::Min, bad, bad, obad);
}

fn warp_merge(k: &mut PtxKernel, s: (Reg, Reg, Reg)) {
    for off in [16u32, 8, 4, 2, 1] {
        let o = (k.shfl(ShflMode::Bfly, s.0, off, 31), k.shfl(ShflMode::Bfly, s.1, off, 31), k.shfl(ShflMode::Bfly, s.2, off, 31));
        merge(k, s, o);
    }
}

impl Kernel for ArgmaxKernel {
    fn name(&self) -> String {
        "argmax".into()
    }

    fn build(&self, sm: u32) -> PtxKernel {
        let mut k = PtxKernel::new(&self.name());
        for p in ["x", "out"] {
            k.add_param(p, PtxType::U64);
        }
        k.add_param("n", U);
        k.launch_bounds((THREADS, 1, 1), None);
        let sv = k.shared_array("sv", F, 32, 4);
        let si = k.shared_array("si", U, 32, 4);
        let sb = k.shared_array("sb", U, 32, 4);
        k.grid_dep_sync(sm);
        let x = k.ld_param_ptr("x");
        let out = k.ld_param_ptr("out");
        let n = k.ld_param("n");
        let tid = k.special(Special::TidX);
        let s = (k.mov(F, f32::NEG_INFINITY), k.mov(U, u32::MAX), k.mov(U, u32::MAX));
        // value `v` at index `j`: each thread visits its indices in increasing order, so only a
        // larger value replaces (the first maximum)
        let visit = |k: &mut PtxKernel, v: Reg, j: Reg| {
            let gt = k.setp(Cmp::Gt, F, v, s.0);
            let nv = k.selp(F, v, s.0, gt);
            let ni = k.selp(U, j, s.1, gt);
            k.mov_to(s.0, nv);
            k.mov_to(s.1, ni);
            let is_bad = nan_or_pinf(k, v);
            let bi = k.selp(U, j, u32::MAX, is_bad);
            k.bin_to(BinOp::Min, s.2, s.2, bi);
        };
        let one = |k: &mut PtxKernel, j: Reg| {
            let a = k.elem_addr(x, j, 4);
            let v = k.ld(Space::Global, F, Addr::reg(a));
            visit(k, v, j);
        };
        // the `h` values before the first 32-byte boundary (x is 4-byte aligned), one per thread
        let x32 = k.cvt(U, PtxType::U64, x);
        let lo = k.bin(BinOp::And, B32, x32, 31u32);
        let to = k.sub(U, 32u32, lo);
        let to = k.bin(BinOp::And, B32, to, 31u32);
        let h = k.bin(BinOp::Shr, U, to, 2u32);
        let h = k.bin(BinOp::Min, U, h, n);
        let head = k.setp(Cmp::Lt, U, tid, h);
        k.when(head, false, |k| one(k, tid));
        // then runs of 8 from `h`: run `g` is values h + 8g .. h + 8g + 8
        let runs = k.sub(U, n, h);
        let runs = k.bin(BinOp::Shr, U, runs, 3u32);
        super::attention::count(&mut k, tid, runs, THREADS, |k, g| {
            let j = k.fma(U, g, 8u32, h);
            let a = k.elem_addr(x, j, 4);
            let mut v = k.ld_v(Space::Global, F, 4, Addr::reg(a));
            v.extend(k.ld_v(Space::Global, F, 4, Addr::at(a, 16)));
            for (e, &v) in v.iter().enumerate() {
                let je = k.add(U, j, e as u32);
                visit(k, v, je);
            }
        });
        // the last n − h − 8·runs (< 8) values, one per thread
        let tail = k.fma(U, runs, 8u32, h);
        let j = k.add(U, tail, tid);
        let in_tail = k.setp(Cmp::Lt, U, j, n);
        let small = k.setp(Cmp::Lt, U, tid, 8u32);
        let in_tail = k.bin(BinOp::And, PtxType::Pred, in_tail, small);
        k.when(in_tail, false, |k| one(k, j));
        warp_merge(&mut k, s);
        let lane = k.bin(BinOp::And, B32, tid, 31u32);
        let warp = k.bin(BinOp::Shr, U, tid, 5u32);
        let lane0 = k.setp(Cmp::Eq, U, lane, 0u32);
        let addr = |k: &mut PtxKernel, name: &Name, idx: Reg| {
            let base = k.mov(U, Operand::Symbol(*name));
            k.fma(U, idx, 4u32, base)
        };
        let (av, ai, ab) = (addr(&mut k, &sv, warp), addr(&mut k, &si, warp), addr(&mut k, &sb, warp));
        k.when(lane0, false, |k| {
            k.st(Space::Shared, F, Addr::reg(av), s.0);
            k.st(Space::Shared, U, Addr::reg(ai), s.1);
            k.st(Space::Shared, U, Addr::reg(ab), s.2);
        });
        k.bar_sync();
        let done = k.new_label("done");
        let not_first = k.setp(Cmp::Ne, U, warp, 0u32);
        k.bra_if(not_first, false, &done);
        let (lv, li, lb) = (addr(&mut k, &sv, lane), addr(&mut k, &si, lane), addr(&mut k, &sb, lane));
        let w = (k.ld(Space::Shared, F, Addr::reg(lv)), k.ld(Space::Shared, U, Addr::reg(li)), k.ld(Space::Shared, U, Addr::reg(lb)));
        warp_merge(&mut k, w);
        k.when(lane0, false, |k| {
            k.st(Space::Global, U, Addr::reg(out), w.1);
            k.st(Space::Global, U, Addr::at(out, 4), w.2);
            k.st(Space::Global, F, Addr::at(out, 8), w.0);
        });
        k.label(&done);
        k.ret();
        k
    }
}
