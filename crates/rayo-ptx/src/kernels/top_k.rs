//! Top-k sampling's candidates on the device: the `k` largest of a row of logits (ties to the
//! smaller index), so that a sampled decoding step sends the host `k` (id, logit) pairs instead
//! of the vocabulary's logits. One block of 1024 threads, a radix select on the logits' order
//! keys (the f32 bits made to sort as unsigned integers, the order of `f32::total_cmp`):
//!
//! 1. four rounds over 8-bit digits, most significant first: a histogram (one per warp, in
//!    shared memory) of the digit of the values whose higher digits match the prefix found so
//!    far, a suffix sum over the 256 bins, and the bin where the count reaches the k still
//!    wanted — after the fourth, the k-th largest key `T` and how many values equal to it to take;
//! 2. the values above `T` (any order) and the first of those equal to it by index (each thread
//!    takes a contiguous range, ranked by an exclusive scan of the counts) are written out.
//!
//! The first round also finds the first NaN or +inf, which sampling rejects. The host sorts the
//! `k` candidates.

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

const THREADS: u32 = 1024;
const WARPS: u32 = THREADS / 32;
const B32: PtxType = PtxType::B32;

/// Parameters: `x` (n f32), `out` (2k + 1 words: k ids, k values, the index of the first NaN
/// or +inf — `u32::MAX` when none) (u64); `n`, `k` (u32; `1 ≤ k ≤ 128`, `k < n`: the caller
/// checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TopKKernel;

impl TopKKernel {
    pub const THREADS: u32 = THREADS;
    /// The largest `k` it takes.
    pub const MAX_K: u32 = 128;

    pub fn launch(&self) -> LaunchConfig {
        LaunchConfig { grid: (1, 1, 1), block: (THREADS, 1, 1), shared_bytes: 0 }
    }
}

/// The u32 address of element `idx` of a shared u32 array.
fn at(k: &mut PtxKernel, name: &Name, idx: impl Into<Operand>) -> Reg {
    let base = k.mov(U, Operand::Symbol(*name));
    k.fma(U, idx, 4u32, base)
}

/// The order key of an f32: its bits with the sign bit flipped for positive values and every
/// bit flipped for negative ones (larger key ⇔ larger value in `total_cmp`'s order).
fn order_key(k: &mut PtxKernel, v: Reg) -> Reg {
    let u = k.mov(B32, v);
    let s = k.bin(BinOp::Shr, PtxType::S32, u, 31u32);
    let mask = k.bin(BinOp::Or, B32, s, 0x8000_0000u32);
    k.bin(BinOp::Xor, B32, u, mask)
}

/// Exclusive prefix sum of `c` over the block's threads in thread order (`wsum`: 32 words).
fn block_exclusive_scan(k: &mut PtxKernel, c: Reg, (lane, warp): (Reg, Reg), wsum: &Name) -> Reg {
    let incl = k.mov(U, c);
    for d in [1u32, 2, 4, 8, 16] {
        let o = k.shfl(ShflMode::Up, incl, d, 0);
        let has = k.setp(Cmp::Ge, U, lane, d);
        k.when(has, false, |k| k.bin_to(BinOp::Add, incl, incl, o));
    }
    let last = k.setp(Cmp::Eq, U, lane, 31u32);
    let wa = at(k, wsum, warp);
    k.when(last, false, |k| k.st(Space::Shared, U, Addr::reg(wa), incl));
    k.bar_sync();
    // warp 0 scans the warps' totals (every warp does the arithmetic; warp 0 stores)
    let first_warp = k.setp(Cmp::Eq, U, warp, 0u32);
    let la = at(k, wsum, lane);
    let w = k.ld(Space::Shared, U, Addr::reg(la));
    for d in [1u32, 2, 4, 8, 16] {
        let o = k.shfl(ShflMode::Up, w, d, 0);
        let has = k.setp(Cmp::Ge, U, lane, d);
        k.when(has, false, |k| k.bin_to(BinOp::Add, w, w, o));
    }
    k.bar_sync();
    k.when(first_warp, false, |k| k.st(Space::Shared, U, Addr::reg(la), w));
    k.bar_sync();
    // the warps before this one, then the lanes before this one
    let before = k.mov(U, 0u32);
    let later = k.setp(Cmp::Gt, U, warp, 0u32);
    let pw = k.sub(U, warp, 1u32);
    let pa = at(k, wsum, pw);
    k.when(later, false, |k| k.ld_to(Space::Shared, before, Addr::reg(pa)));
    let excl = k.sub(U, incl, c);
    k.add(U, excl, before)
}

/// [`TopKKernel`] for many rows at once, a block per row (grid x = the rows): block `r` takes
/// the `n` values from `x + r·n` and writes its `2k + 1` words from `out + r·(2k + 1)`. The
/// caller checks `rows · n` and `rows · (2k + 1)` fit 32 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TopKRowsKernel;

impl TopKRowsKernel {
    pub fn launch(&self, rows: u32) -> LaunchConfig {
        LaunchConfig { grid: (rows.max(1), 1, 1), block: (THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for TopKKernel {
    fn name(&self) -> String {
        "top_k".into()
    }

    fn build(&self, sm: u32) -> PtxKernel {
        build(&self.name(), sm, false)
    }
}

impl Kernel for TopKRowsKernel {
    fn name(&self) -> String {
        "top_k_rows".into()
    }

    fn build(&self, sm: u32) -> PtxKernel {
        build(&self.name(), sm, true)
    }
}

/// The kernel of one row (`rows`: of the row `ctaid.x`).
fn build(name: &str, sm: u32, rows: bool) -> PtxKernel {
    let mut k = PtxKernel::new(name);
    for p in ["x", "out"] {
        k.add_param(p, PtxType::U64);
    }
    for p in ["n", "k"] {
        k.add_param(p, U);
    }
    k.launch_bounds((THREADS, 1, 1), None);
    let hist = k.shared_array("hist", U, WARPS * 256, 4);
    let sums = k.shared_array("sums", U, 257, 4);
    // prefix, k still wanted, first bad index, the count of values above T
    let state = k.shared_array("state", U, 4, 4);
    let wsum = k.shared_array("wsum", U, WARPS, 4);
    k.grid_dep_sync(sm);
    let x = k.ld_param_ptr("x");
    let out = k.ld_param_ptr("out");
    let n = k.ld_param("n");
    let kk = k.ld_param("k");
    let (x, out) = if rows {
        let r = k.special(Special::CtaidX);
        let xi = k.mul(U, r, n);
        let w = k.fma(U, kk, 2u32, 1u32);
        let oi = k.mul(U, r, w);
        (k.elem_addr(x, xi, 4), k.elem_addr(out, oi, 4))
    } else {
        (x, out)
    };
    let tid = k.special(Special::TidX);
    let lane = k.bin(BinOp::And, B32, tid, 31u32);
    let warp = k.bin(BinOp::Shr, U, tid, 5u32);
    let first = k.setp(Cmp::Eq, U, tid, 0u32);
    let s0 = at(&mut k, &state, 0u32);
    k.when(first, false, |k| {
        k.st(Space::Shared, U, Addr::at(s0, 0), 0u32);
        k.st(Space::Shared, U, Addr::at(s0, 4), kk);
        k.st(Space::Shared, U, Addr::at(s0, 8), u32::MAX);
        k.st(Space::Shared, U, Addr::at(s0, 12), 0u32);
    });
    let bins = k.setp(Cmp::Lt, U, tid, 256u32);
    let sa = at(&mut k, &sums, tid);
    let s256 = at(&mut k, &sums, 256u32);
    k.when(first, false, |k| k.st(Space::Shared, U, Addr::reg(s256), 0u32));
    let my_hist = k.mul(U, warp, 256u32);
    let hrow = at(&mut k, &hist, my_hist);

    for round in 0..4u32 {
        let shift = 24 - 8 * round;
        // zero the histograms
        for i in 0..WARPS * 256 / THREADS {
            let idx = k.add(U, tid, i * THREADS);
            let a = at(&mut k, &hist, idx);
            k.st(Space::Shared, U, Addr::reg(a), 0u32);
        }
        k.bar_sync();
        let prefix = k.ld(Space::Shared, U, Addr::at(s0, 0));
        let krem = k.ld(Space::Shared, U, Addr::at(s0, 4));
        super::attention::count(&mut k, tid, n, THREADS, |k, j| {
            let a = k.elem_addr(x, j, 4);
            let v = k.ld(Space::Global, F, Addr::reg(a));
            let key = order_key(k, v);
            if round == 0 {
                let bad = nan_or_pinf(k, v);
                k.when(bad, false, |k| {
                    k.red(Space::Shared, AtomOp::Min, U, Addr::at(s0, 8), j);
                });
            }
            let digit = k.bin(BinOp::Shr, U, key, shift);
            let digit = k.bin(BinOp::And, B32, digit, 255u32);
            let ha = k.fma(U, digit, 4u32, hrow);
            if round == 0 {
                k.red(Space::Shared, AtomOp::Add, U, Addr::reg(ha), 1u32);
            } else {
                let high = k.bin(BinOp::Shr, U, key, shift + 8);
                let hit = k.setp(Cmp::Eq, U, high, prefix);
                k.when(hit, false, |k| k.red(Space::Shared, AtomOp::Add, U, Addr::reg(ha), 1u32));
            }
        });
        k.bar_sync();
        // bin t's count over the warps, then the suffix sums (Hillis–Steele over 256)
        let total = k.mov(U, 0u32);
        k.when(bins, false, |k| {
            for w in 0..WARPS {
                let idx = k.add(U, tid, w * 256);
                let a = at(k, &hist, idx);
                let c = k.ld(Space::Shared, U, Addr::reg(a));
                k.bin_to(BinOp::Add, total, total, c);
            }
            k.st(Space::Shared, U, Addr::reg(sa), total);
        });
        k.bar_sync();
        for d in [1u32, 2, 4, 8, 16, 32, 64, 128] {
            let v = k.mov(U, total);
            let up = k.add(U, tid, d);
            let inside = k.setp(Cmp::Lt, U, up, 256u32);
            let take = k.bin(BinOp::And, PtxType::Pred, inside, bins);
            let ua = at(&mut k, &sums, up);
            k.when(take, false, |k| {
                let o = k.ld(Space::Shared, U, Addr::reg(ua));
                k.bin_to(BinOp::Add, v, v, o);
            });
            k.bar_sync();
            k.when(bins, false, |k| k.st(Space::Shared, U, Addr::reg(sa), v));
            k.mov_to(total, v);
            k.bar_sync();
        }
        // the bin where the count from the top reaches krem (`when` does not nest: the
        // loads and the test are guarded apart)
        let (here, above) = (k.mov(U, 0u32), k.mov(U, 0u32));
        k.when(bins, false, |k| {
            k.ld_to(Space::Shared, here, Addr::reg(sa));
            k.ld_to(Space::Shared, above, Addr::at(sa, 4));
        });
        let reach = k.setp(Cmp::Ge, U, here, krem);
        let short = k.setp(Cmp::Lt, U, above, krem);
        let this = k.bin(BinOp::And, PtxType::Pred, reach, short);
        let this = k.bin(BinOp::And, PtxType::Pred, this, bins);
        k.when(this, false, |k| {
            let p = k.bin(BinOp::Shl, B32, prefix, 8u32);
            let p = k.bin(BinOp::Or, B32, p, tid);
            let r = k.sub(U, krem, above);
            k.st(Space::Shared, U, Addr::at(s0, 0), p);
            k.st(Space::Shared, U, Addr::at(s0, 4), r);
        });
        k.bar_sync();
    }

    // the values above T, and the first `krem` equal to it by index
    let t_key = k.ld(Space::Shared, U, Addr::at(s0, 0));
    let krem = k.ld(Space::Shared, U, Addr::at(s0, 4));
    let kk4 = k.mul(U, kk, 4u32);
    let vals = k.mad_wide(U, kk4, 1u32, out);
    let chunk = k.add(U, n, THREADS - 1);
    let chunk = k.bin(BinOp::Shr, U, chunk, THREADS.trailing_zeros());
    let start = k.mul(U, tid, chunk);
    let start = k.bin(BinOp::Min, U, start, n);
    let end = k.add(U, start, chunk);
    let end = k.bin(BinOp::Min, U, end, n);
    let eq_count = k.mov(U, 0u32);
    let emit = |k: &mut PtxKernel, slot: Reg, j: Reg, v: Reg| {
        let ia = k.elem_addr(out, slot, 4);
        k.st(Space::Global, U, Addr::reg(ia), j);
        let va = k.elem_addr(vals, slot, 4);
        k.st(Space::Global, F, Addr::reg(va), v);
    };
    super::attention::count(&mut k, start, end, 1, |k, j| {
        let a = k.elem_addr(x, j, 4);
        let v = k.ld(Space::Global, F, Addr::reg(a));
        let key = order_key(k, v);
        let gt = k.setp(Cmp::Gt, U, key, t_key);
        k.when(gt, false, |k| {
            let slot = k.atom(Space::Shared, AtomOp::Add, U, Addr::at(s0, 12), 1u32);
            emit(k, slot, j, v);
        });
        let eq = k.setp(Cmp::Eq, U, key, t_key);
        k.when(eq, false, |k| k.bin_to(BinOp::Add, eq_count, eq_count, 1u32));
    });
    let rank = block_exclusive_scan(&mut k, eq_count, (lane, warp), &wsum);
    let base = k.sub(U, kk, krem);
    super::attention::count(&mut k, start, end, 1, |k, j| {
        let a = k.elem_addr(x, j, 4);
        let v = k.ld(Space::Global, F, Addr::reg(a));
        let key = order_key(k, v);
        let eq = k.setp(Cmp::Eq, U, key, t_key);
        let wanted = k.setp(Cmp::Lt, U, rank, krem);
        let take = k.bin(BinOp::And, PtxType::Pred, eq, wanted);
        k.when(take, false, |k| {
            let slot = k.add(U, base, rank);
            emit(k, slot, j, v);
        });
        k.when(eq, false, |k| k.bin_to(BinOp::Add, rank, rank, 1u32));
    });
    let kk2 = k.mul(U, kk, 2u32);
    let ba = k.elem_addr(out, kk2, 4);
    k.when(first, false, |k| {
        let bad = k.ld(Space::Shared, U, Addr::at(s0, 8));
        k.st(Space::Global, U, Addr::reg(ba), bad);
    });
    k.ret();
    k
}
