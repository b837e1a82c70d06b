//! The blocked GEMM loops (Goto / BLIS order): for each NC-wide column block and KC-deep
//! slice, pack B once; split the rows over the threads; each thread packs MC-row blocks of A
//! into its own buffer and runs the micro-kernel over every (MR × NR) tile. The B strip in
//! use stays in L1, the A block in L2, the B block in L3; sizes come from `Caches`.

use super::kernel::{store, tile};
use super::pack::{pack_a, pack_b};
use crate::cpu::caches::Caches;
use crate::cpu::parallel::both;
use crate::cpu::simd::Simd;
use crate::matrix::{MatMut, MatRef};
use std::cell::RefCell;

/// Block sizes for one call.
#[derive(Clone, Copy, Debug)]
pub struct Blocks {
    pub kc: usize,
    pub mc: usize,
    pub nc: usize,
}

/// `n` split into the fewest blocks of at most `max`, evenly, each a multiple of `unit`.
fn even(n: usize, max: usize, unit: usize) -> usize {
    let parts = n.div_ceil(max.max(unit));
    n.div_ceil(parts).div_ceil(unit) * unit
}

impl Blocks {
    /// KC: the B strip (KC × NR, reused by every A strip of a block) within an eighth of L2
    /// (deep KC means fewer passes over C; measured best at 512 on a 1 MB L2). MC: the A
    /// block (MC × KC) within half of L2. NC: the B block (KC × NC) within a quarter of L3
    /// (shared with the other cores).
    pub fn for_shape(m: usize, n: usize, k: usize, mr: usize, nr: usize) -> Blocks {
        let c = Caches::get();
        let (kc_env, mc_env) = tuning();
        let kc_max = kc_env.unwrap_or((c.l2 / 8 / (nr * 4)).clamp(128, 512));
        let kc = even(k, kc_max, 8).min(k.div_ceil(8) * 8);
        let mc_max = mc_env.unwrap_or((c.l2 / 2 / (kc * 4)).max(mr)).max(mr);
        let mc = even(m, mc_max, mr);
        let nc_max = (c.l3 / 4 / (kc * 4)).clamp(nr, 8192);
        let nc = even(n, nc_max, nr);
        Blocks { kc, mc, nc }
    }
}

/// `RAYO_GEMM_KC` / `RAYO_GEMM_MC`: block-size overrides for tuning on a new CPU (parsed once,
/// with the other knobs, by [`crate::Config`]).
fn tuning() -> (Option<usize>, Option<usize>) {
    let c = crate::Config::get();
    (c.gemm_kc, c.gemm_mc)
}

thread_local! {
    static PACK_A: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    static PACK_B: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on a 64-byte-aligned scratch slice of `len` floats from `cell` (reused across
/// calls; a fresh one if this thread is already using it, e.g. a nested call).
fn with_scratch<R>(cell: &'static std::thread::LocalKey<RefCell<Vec<f32>>>, len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    fn aligned(v: &mut Vec<f32>, len: usize) -> &mut [f32] {
        if v.len() < len + 16 {
            v.resize(len + 16, 0.0);
        }
        let off = (16 - (v.as_ptr() as usize / 4) % 16) % 16;
        &mut v[off..off + len]
    }
    cell.with(|c| match c.try_borrow_mut() {
        Ok(mut v) => f(aligned(&mut v, len)),
        Err(_) => f(aligned(&mut Vec::new(), len)),
    })
}

/// A or B with at most this many elements, row-major, is read in place by the kernel (when
/// the ISA's tile has the registers for it, `IN_PLACE`): packing would cost more than the
/// strided rows do. Larger operands are packed, since rows a power-of-two stride apart fall
/// into the same cache sets.
const IN_PLACE_MAX: usize = 64 * 1024;

/// `C = alpha·A·B + beta·C` with C row-major-like (`rs > (n-1)·cs`), `k > 0`, shapes checked.
#[allow(clippy::too_many_arguments)]
pub fn run<S: Simd, const MR: usize, const NV: usize, const IN_PLACE: bool>(
    s: S,
    alpha: f32,
    a: MatRef,
    b: MatRef,
    beta: f32,
    c: MatMut,
    threads: usize,
) {
    let nr = NV * S::LANES;
    let (m, n, k) = (a.rows, b.cols, a.cols);
    let bl = Blocks::for_shape(m.div_ceil(threads), n, k, MR, nr);
    let (rs, cs) = (c.rs, c.cs);
    let cdata = c.data;
    // Small products read row-major operands in place and keep A strips row-major; large
    // ones pack both, A k-major (constant offsets for the broadcasts).
    let small = IN_PLACE && m * k <= IN_PLACE_MAX && k * n <= IN_PLACE_MAX;
    let b_in_place = small && b.cs == 1;
    with_scratch(&PACK_B, bl.kc * bl.nc.div_ceil(nr) * nr, |bpack| {
        for jc in (0..n).step_by(bl.nc) {
            let ncb = bl.nc.min(n - jc);
            for pc in (0..k).step_by(bl.kc) {
                let kcb = bl.kc.min(k - pc);
                s.vectorize(
                    #[inline(always)]
                    || {
                        if b_in_place {
                            // Only a partial last strip needs a (zero-padded) copy.
                            let full = ncb / nr * nr;
                            if full < ncb {
                                pack_b(&b, pc, kcb, jc + full, ncb - full, nr, &mut bpack[full / nr * kcb * nr..]);
                            }
                        }
                    },
                );
                if !b_in_place {
                    pack_b_parallel(s, &b, pc, kcb, jc, ncb, nr, bpack, threads);
                }
                let bsrc = BSource { b: &b, pack: &*bpack, in_place: b_in_place, pc, jc };
                let beta = if pc == 0 { beta } else { 1.0 };
                let job = |r0: usize, r1: usize, cpart: &mut [f32]| {
                    with_scratch(&PACK_A, kcb * bl.mc.div_ceil(MR) * MR, |apack| {
                        for ic in (r0..r1).step_by(bl.mc) {
                            let mcb = bl.mc.min(r1 - ic);
                            let cblock = &mut cpart[(ic - r0) * rs + jc * cs..];
                            s.vectorize(
                                #[inline(always)]
                                || {
                                    if small {
                                        let a_in_place = a.cs == 1;
                                        block::<S, MR, NV, false>(s, &a, a_in_place, ic, pc, apack, &bsrc, cblock, rs, cs, mcb, ncb, kcb, alpha, beta)
                                    } else {
                                        block::<S, MR, NV, true>(s, &a, false, ic, pc, apack, &bsrc, cblock, rs, cs, mcb, ncb, kcb, alpha, beta)
                                    }
                                },
                            );
                        }
                    })
                };
                split_rows(cdata, 0, m, rs, threads, MR, &job);
            }
        }
    })
}

/// Where the kernel reads B from: the packed block, or B itself (small row-major B).
struct BSource<'a> {
    b: &'a MatRef<'a>,
    pack: &'a [f32],
    in_place: bool,
    pc: usize,
    jc: usize,
}

/// [`pack_b`] with the strips split over `parts` threads (packing is a serial step between
/// the parallel row blocks otherwise).
#[allow(clippy::too_many_arguments)]
fn pack_b_parallel<S: Simd>(s: S, b: &MatRef, pc: usize, kc: usize, j0: usize, nc: usize, nr: usize, dst: &mut [f32], parts: usize) {
    let strips = nc.div_ceil(nr);
    if parts <= 1 || strips < 2 {
        return s.vectorize(
            #[inline(always)]
            || pack_b(b, pc, kc, j0, nc, nr, dst),
        );
    }
    let left = strips / 2;
    let (d0, d1) = dst.split_at_mut(left * kc * nr);
    both(
        || pack_b_parallel(s, b, pc, kc, j0, left * nr, nr, d0, parts / 2),
        || pack_b_parallel(s, b, pc, kc, j0 + left * nr, nc - left * nr, nr, d1, parts - parts / 2),
    );
}

/// Splits rows `r0..r1` (whose C data starts at `data[0]`) into `parts` ranges, multiples
/// of `unit` rows, and runs `job` on each, in parallel.
fn split_rows(data: &mut [f32], r0: usize, r1: usize, rs: usize, parts: usize, unit: usize, job: &(impl Fn(usize, usize, &mut [f32]) + Sync)) {
    let rows = r1 - r0;
    if parts <= 1 || rows <= unit {
        return job(r0, r1, data);
    }
    let left = parts / 2;
    let mid = r0 + (rows * left / parts).div_ceil(unit) * unit;
    if mid >= r1 {
        return job(r0, r1, data);
    }
    let (d0, d1) = data.split_at_mut((mid - r0) * rs);
    both(|| split_rows(d0, r0, mid, rs, left, unit, job), || split_rows(d1, mid, r1, rs, parts - left, unit, job));
}

/// Every tile of one block of A (rows `ic..ic+mc`, depth `pc..pc+kc`) times one block of B:
/// B strips outer, so each stays in cache while the A strips stream past it. A strips are
/// packed k-major (`KMAJOR`, large products) or read row-major: in place when `a_in_place`
/// (small products), else (and the edge strip) from a row-major copy.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn block<S: Simd, const MR: usize, const NV: usize, const KMAJOR: bool>(
    s: S,
    a: &MatRef,
    a_in_place: bool,
    ic: usize,
    pc: usize,
    apack: &mut [f32],
    bsrc: &BSource,
    c: &mut [f32],
    rs: usize,
    cs: usize,
    mc: usize,
    nc: usize,
    kc: usize,
    alpha: f32,
    beta: f32,
) {
    let nr = NV * S::LANES;
    let strips = mc.div_ceil(MR);
    let in_place = |t: usize| a_in_place && (t + 1) * MR <= mc;
    for t in 0..strips {
        if !in_place(t) {
            pack_a::<MR, KMAJOR>(a, ic + t * MR, MR.min(mc - t * MR), pc, kc, &mut apack[t * MR * kc..]);
        }
    }
    let apack = &*apack;
    for jr in 0..nc.div_ceil(nr) {
        let cols = nr.min(nc - jr * nr);
        let (bs, brs) = if bsrc.in_place && cols == nr {
            (&bsrc.b.data[bsrc.pc * bsrc.b.rs + bsrc.jc + jr * nr..], bsrc.b.rs)
        } else {
            (&bsrc.pack[jr * kc * nr..(jr + 1) * kc * nr], nr)
        };
        for t in 0..strips {
            let rows = MR.min(mc - t * MR);
            let (as_, ars) = if in_place(t) { (&a.data[(ic + t * MR) * a.rs + pc..], a.rs) } else { (&apack[t * MR * kc..], kc) };
            let acc = tile::<S, MR, NV, KMAJOR>(s, kc, as_, ars, bs, brs);
            store::<S, MR, NV>(s, &acc, &mut c[t * MR * rs + jr * nr * cs..], rs, cs, rows, cols, alpha, beta);
        }
    }
}
