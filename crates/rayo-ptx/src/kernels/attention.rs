//! Causal grouped-query attention over a KV cache, and the store of new K/V rows into it.
//!
//! [`AttentionKernel`]: one block per (query head, query row); row `i` is at position
//! `pos0 + i` and attends to positions `0..=pos0 + i` of its KV head (the last `window` of them
//! on a sliding-window layer). Three passes through the
//! block's shared memory: scores (scaled dots with the keys), their exponentials after the
//! block's maximum, then the weighted sum of the values divided by the sum. In the first and
//! the last pass each warp takes every 4th position and its lanes the head's dimensions, so a
//! key or value row is one coalesced read. The cache is f16
//! (as llama.cpp keeps it) or f32, `positions × n_head_kv × head_dim` per layer.

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

/// Parameters: `q` (m × n_head × head_dim f32), `k_cache`, `v_cache` (one layer), `out`
/// (m × n_head × head_dim f32), `pos` (one u32 in device memory: row 0's position) (u64);
/// `n_head`, `n_head_kv` (u32), `scale` (f32),
/// `round_q` (u32: nonzero rounds the query to f16 first, as llama.cpp's one-row kernel),
/// `window` (u32: a row at position `p` sees `p + 1 − window ..= p`; 0 for every position).
/// Built for a head size and a largest position count (the scores live in shared memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionKernel {
    head_dim: u32,
    max_positions: u32,
    f16: bool,
}

impl AttentionKernel {
    pub const THREADS: u32 = 128;
    /// The most positions one kernel holds scores for (48 KB of shared memory in all).
    pub const MAX_POSITIONS: u32 = 10240;
    /// The largest head size (Gemma 3's): eight values per lane.
    pub const MAX_HEAD_DIM: u32 = 256;

    /// `None` unless `head_dim` is a multiple of 32 up to [`Self::MAX_HEAD_DIM`] and
    /// `positions` fits.
    pub fn new(head_dim: u32, positions: u32, f16: bool) -> Option<AttentionKernel> {
        if head_dim == 0 || !head_dim.is_multiple_of(32) || head_dim > Self::MAX_HEAD_DIM || positions == 0 || positions > Self::MAX_POSITIONS {
            return None;
        }
        // kernels for 1024, 2048, ... positions: a context of any length shares one
        let max_positions = positions.next_power_of_two().clamp(1024, Self::MAX_POSITIONS);
        Some(AttentionKernel { head_dim, max_positions, f16 })
    }

    pub fn max_positions(&self) -> u32 {
        self.max_positions
    }

    pub fn launch(&self, n_head: u32, m: u32) -> LaunchConfig {
        LaunchConfig { grid: (n_head.max(1), m.max(1), 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

/// Element `idx` of a cache (f16 or f32) at `base`, as f32.
pub(super) fn ld_cache(k: &mut PtxKernel, f16: bool, base: Reg, idx: Reg) -> Reg {
    if f16 {
        let a = k.elem_addr(base, idx, 2);
        let h = k.ld(Space::Global, PtxType::B16, Addr::reg(a));
        k.cvt(F, PtxType::F16, h)
    } else {
        let a = k.elem_addr(base, idx, 4);
        k.ld(Space::Global, F, Addr::reg(a))
    }
}

/// A shared f32 array's element address (u32).
pub(super) fn smem_at(k: &mut PtxKernel, name: &Name, idx: Reg) -> Reg {
    let base = k.mov(U, Operand::Symbol(*name));
    k.fma(U, idx, 4u32, base)
}

/// `for (t = start; t < n; t += step) body(t)`.
pub(super) fn count(k: &mut PtxKernel, start: Reg, n: Reg, step: u32, body: impl FnOnce(&mut PtxKernel, Reg)) {
    let t = k.mov(U, start);
    let (top, end) = (k.new_label("t"), k.new_label("t_end"));
    k.label(&top);
    let out = k.setp(Cmp::Ge, U, t, n);
    k.bra_if(out, false, &end);
    body(k, t);
    k.bin_to(BinOp::Add, t, t, step);
    k.bra(&top);
    k.label(&end);
}

/// Scores `ss[lo..n]` (shared) replaced by `e^{score − mx}`, thread `tid` taking every
/// `threads`-th from `first = lo + tid`; their sum over the block (which ends with a barrier:
/// every exponential is in shared memory).
pub(super) fn exponentials(k: &mut PtxKernel, ss: &Name, (first, threads): (Reg, u32), n: Reg, mx: Reg, swarp: &Name) -> Reg {
    let sum = k.mov(F, 0.0f32);
    count(k, first, n, threads, |k, t| {
        let a = smem_at(k, ss, t);
        let s = k.ld(Space::Shared, F, Addr::reg(a));
        let d = k.sub(F, s, mx);
        let e = exp(k, d);
        k.st(Space::Shared, F, Addr::reg(a), e);
        k.bin_to(BinOp::Add, sum, sum, e);
    });
    block_reduce(k, ReduceCombine::Sum, sum, threads, swarp)
}

/// Each lane's partial sums `accs` (dimensions `d0..` of a head of `hd`) into row `warp` of the
/// shared `sred`, then a barrier.
pub(super) fn stash_warp_sums(k: &mut PtxKernel, sred: &Name, accs: &[Reg], (warp, d0): (Reg, Reg), hd: u32) {
    let wrow = k.mul(U, warp, hd);
    let wd = k.add(U, wrow, d0);
    let ra = smem_at(k, sred, wd);
    for (j, &acc) in accs.iter().enumerate() {
        k.st(Space::Shared, F, Addr::at(ra, 4 * j as i64), acc);
    }
    k.bar_sync();
}

/// The first position a row at `n − 1` sees: `n − window` where the window is shorter than
/// `n` positions, else 0 (a `window` of 0 is the whole context).
pub(super) fn window_start(k: &mut PtxKernel, n: Reg, window: Reg) -> Reg {
    let whole = k.setp(Cmp::Eq, U, window, 0u32);
    let w = k.selp(U, n, window, whole);
    let w = k.bin(BinOp::Min, U, w, n);
    k.sub(U, n, w)
}

/// `body(d)` for each dimension `d = tid, tid + threads, …` below `hd` (a head may be wider
/// than the block).
pub(super) fn each_dim(k: &mut PtxKernel, tid: Reg, threads: u32, hd: u32, mut body: impl FnMut(&mut PtxKernel, Reg)) {
    for c in 0..hd.div_ceil(threads) {
        let d = k.add(U, tid, c * threads);
        let has_d = k.setp(Cmp::Lt, U, d, hd);
        k.when(has_d, false, |k| body(k, d));
    }
}

/// Dimension `tid` (< `hd`) summed over the `warps` rows [`stash_warp_sums`] wrote.
pub(super) fn add_warp_sums(k: &mut PtxKernel, sred: &Name, tid: Reg, warps: u32, hd: u32) -> Reg {
    let a0 = smem_at(k, sred, tid);
    let mut o = k.ld(Space::Shared, F, Addr::reg(a0));
    for w in 1..warps {
        let v = k.ld(Space::Shared, F, Addr::at(a0, 4 * (w * hd) as i64));
        o = k.add(F, o, v);
    }
    o
}

impl Kernel for AttentionKernel {
    fn name(&self) -> String {
        format!("attention_{}_hd{}_p{}", if self.f16 { "f16" } else { "f32" }, self.head_dim, self.max_positions)
    }

    fn build(&self, sm: u32) -> PtxKernel {
        let (hd, threads, f16) = (self.head_dim, Self::THREADS, self.f16);
        let mut k = PtxKernel::new(&self.name());
        for p in ["q", "k_cache", "v_cache", "out", "pos"] {
            k.add_param(p, PtxType::U64);
        }
        for p in ["n_head", "n_head_kv"] {
            k.add_param(p, U);
        }
        k.add_param("scale", F);
        k.add_param("round_q", U);
        k.add_param("window", U);
        k.launch_bounds((threads, 1, 1), None);
        // Hopper: may start while the previous kernel finishes; waits for its writes here.
        k.grid_dep_sync(sm);
        let warps = threads / 32;
        let dpl = hd / 32;
        let ss = k.shared_array("ss", F, self.max_positions, 16);
        let sred = k.shared_array("sred", F, warps * hd, 16);
        let swarp = k.shared_array("swarp", F, warps, 4);
        let q = k.ld_param_ptr("q");
        let kc = k.ld_param_ptr("k_cache");
        let vc = k.ld_param_ptr("v_cache");
        let out = k.ld_param_ptr("out");
        let n_head = k.ld_param("n_head");
        let n_head_kv = k.ld_param("n_head_kv");
        let pos_ptr = k.ld_param_ptr("pos");
        let pos0 = k.ld(Space::Global, U, Addr::reg(pos_ptr));
        let scale = k.ld_param("scale");
        let round_q = k.ld_param("round_q");
        let window = k.ld_param("window");
        let h = k.special(Special::CtaidX);
        let i = k.special(Special::CtaidY);
        let tid = k.special(Special::TidX);
        let lane = k.bin(BinOp::And, PtxType::B32, tid, 31u32);
        let warp = k.bin(BinOp::Shr, U, tid, 5u32);
        let p = k.add(U, pos0, i);
        let n = k.add(U, p, 1u32);
        // positions lo..n (the scores indexed by position)
        let lo = window_start(&mut k, n, window);
        let warp_start = k.add(U, lo, warp);
        let group = k.bin(BinOp::Div, U, n_head, n_head_kv);
        let g = k.bin(BinOp::Div, U, h, group);
        // element offsets: position t of KV head g is at t·stride + g·hd; this lane's dims
        // are d0 .. d0 + dpl
        let stride = k.mul(U, n_head_kv, hd);
        let g_off = k.mul(U, g, hd);
        let d0 = k.mul(U, lane, dpl);
        let lane_off = k.add(U, g_off, d0);
        let qrow = k.fma(U, i, n_head, h);
        let qoff = k.mul(U, qrow, hd);

        // 1. this lane's query values (rounded to f16 if asked)
        let rq = k.setp(Cmp::Ne, U, round_q, 0u32);
        let qi = k.add(U, qoff, d0);
        let qa = k.elem_addr(q, qi, 4);
        let qv: Vec<Reg> = (0..dpl)
            .map(|j| {
                let v = k.ld(Space::Global, F, Addr::at(qa, 4 * j as i64));
                let hv = k.cvt(PtxType::F16, F, v);
                let r = k.cvt(F, PtxType::F16, hv);
                k.selp(F, r, v, rq)
            })
            .collect();

        // 2. scores (a warp per position, lanes over the dims) and their maximum
        let mx = k.mov(F, f32::NEG_INFINITY);
        count(&mut k, warp_start, n, warps, |k, t| {
            let base = k.fma(U, t, stride, lane_off);
            let mut s = k.mov(F, 0.0f32);
            for (j, &qd) in qv.iter().enumerate() {
                let idx = k.add(U, base, j as u32);
                let kv = ld_cache(k, f16, kc, idx);
                s = k.fma(F, qd, kv, s);
            }
            let s = warp_reduce(k, ReduceCombine::Sum, s);
            let s = k.mul(F, s, scale);
            let is0 = k.setp(Cmp::Eq, U, lane, 0u32);
            let a = smem_at(k, &ss, t);
            k.when(is0, false, |k| k.st(Space::Shared, F, Addr::reg(a), s));
            k.bin_to(BinOp::Max, mx, mx, s);
        });
        let mx = block_reduce(&mut k, ReduceCombine::Max, mx, threads, &swarp);

        // 3. exponentials and their sum
        let first = k.add(U, lo, tid);
        let sum = exponentials(&mut k, &ss, (first, threads), n, mx, &swarp);
        // (block_reduce ends with a barrier: every exponential is in shared memory)

        // 4. Σ_t e_t·v_t: a warp per position, lanes over the dims; the warps' sums added
        let accs: Vec<Reg> = (0..dpl).map(|_| k.mov(F, 0.0f32)).collect();
        count(&mut k, warp_start, n, warps, |k, t| {
            let a = smem_at(k, &ss, t);
            let e = k.ld(Space::Shared, F, Addr::reg(a));
            let base = k.fma(U, t, stride, lane_off);
            for (j, &acc) in accs.iter().enumerate() {
                let idx = k.add(U, base, j as u32);
                let v = ld_cache(k, f16, vc, idx);
                k.fma_to(acc, e, v, acc);
            }
        });
        stash_warp_sums(&mut k, &sred, &accs, (warp, d0), hd);
        let inv = k.un(UnOp::Rcp, F, sum);
        each_dim(&mut k, tid, threads, hd, |k, d| {
            let o = add_warp_sums(k, &sred, d, warps, hd);
            let o = k.mul(F, o, inv);
            let oi = k.add(U, qoff, d);
            let oa = k.elem_addr(out, oi, 4);
            k.st(Space::Global, F, Addr::reg(oa), o);
        });
        k.ret();
        k
    }
}

/// Parameters: `k`, `v` (m × width f32), `k_cache`, `v_cache` (one layer: positions × width,
/// f16 or f32), `pos` (one u32 in device memory) (u64); `width`, `n` (= m·width) (u32). Row `r`
/// goes to position `pos + r`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KvStoreKernel {
    f16: bool,
}

impl KvStoreKernel {
    pub const THREADS: u32 = 256;

    pub fn new(f16: bool) -> KvStoreKernel {
        KvStoreKernel { f16 }
    }

    pub fn launch(&self, n: u32) -> LaunchConfig {
        LaunchConfig { grid: (n.div_ceil(Self::THREADS).max(1), 1, 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for KvStoreKernel {
    fn name(&self) -> String {
        format!("kv_store_{}", if self.f16 { "f16" } else { "f32" })
    }

    fn build(&self, sm: u32) -> PtxKernel {
        let mut k = PtxKernel::new(&self.name());
        for p in ["k", "v", "k_cache", "v_cache", "pos"] {
            k.add_param(p, PtxType::U64);
        }
        for p in ["width", "n"] {
            k.add_param(p, U);
        }
        k.launch_bounds((Self::THREADS, 1, 1), None);
        // Hopper: may start while the previous kernel finishes; waits for its writes here.
        k.grid_dep_sync(sm);
        let src = [k.ld_param_ptr("k"), k.ld_param_ptr("v")];
        let dst = [k.ld_param_ptr("k_cache"), k.ld_param_ptr("v_cache")];
        let pos_ptr = k.ld_param_ptr("pos");
        let width = k.ld_param("width");
        let n = k.ld_param("n");
        let idx = global_tid(&mut k);
        let done = k.new_label("done");
        let out = k.setp(Cmp::Ge, U, idx, n);
        k.bra_if(out, false, &done);
        // rows are contiguous on both sides: element idx of the batch lands at pos·width + idx
        let pos0 = k.ld(Space::Global, U, Addr::reg(pos_ptr));
        let off = k.fma(U, pos0, width, idx);
        for (s, d) in src.into_iter().zip(dst) {
            let sa = k.elem_addr(s, idx, 4);
            let v = k.ld(Space::Global, F, Addr::reg(sa));
            if self.f16 {
                let h = k.cvt(PtxType::F16, F, v);
                let da = k.elem_addr(d, off, 2);
                k.st(Space::Global, PtxType::B16, Addr::reg(da), h);
            } else {
                let da = k.elem_addr(d, off, 4);
                k.st(Space::Global, F, Addr::reg(da), v);
            }
        }
        k.label(&done);
        k.ret();
        k
    }
}
