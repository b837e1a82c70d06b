//! Hopper's tensor-core GEMM (sm_90a): `C[m×n] = A[m×k] · B[n×k]ᵀ`, A and B f16, bf16 or f32
//! read as TF32, row-major (both K-major, as a layer's `x·Wᵀ`), C f32 row-major, f32
//! accumulation (or C in the operands' f16/bf16, [`WgmmaGemmKernel::narrow_c`], as cuBLAS
//! writes it). A slice along K is 128 bytes of each row (64 values; 32 for TF32).
//!
//! - A persistent grid (a block per multiprocessor) of 384 threads takes `128 × BN` tiles of C
//!   (BN 128 or 256), eight tile rows at a time sweeping the columns (they share A's rows and
//!   B's slices in L2): warpgroup 0 is the producer, warpgroups 1 and 2 the consumers, each of
//!   64 rows of the tile (`setmaxnreg` moves registers from the producer to them).
//! - The producer's one thread copies slices of A (128 rows) and B (BN rows) into a
//!   ring of `STAGES` shared-memory stages with the tensor-memory accelerator (TMA, tensor maps
//!   with 128-byte swizzle made on the host), each stage completing on its `full` mbarrier;
//!   a consumer releases a stage on its `empty` mbarrier when its products over it are done.
//! - A consumer multiplies with `wgmma.mma_async.m64nBNk16` (k8 for TF32) from shared-memory descriptors,
//!   four per slice, one slice's group kept in flight while the next is issued, its
//!   accumulators in registers, then stores them to C (bounds-checked: the
//!   copies fill past the matrix's edges with zeros, so any `m`, `n` and any `k` whose rows are
//!   a multiple of 16 bytes work).
//!
//! With [`WgmmaGemmKernel::accumulating`] the epilogue adds onto C instead (`C += A·Bᵀ`).
//! [`WgmmaGemmKernel::tall`] takes tiles of 256 × 128 (each consumer 128 rows), cuBLAS's shape:
//! measured no faster than 128 × 256 on an H100 (docs/perf/issue14-hopper.md).
//!
//! Parameters: `a_map`, `b_map` (the 128-byte tensor maps of A, box 128 bytes × 128 rows, and
//! B, box 128 bytes × BN rows, by value), `c` (u64), `m`, `n`, `k` (u32).

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

/// A shape the kernel is specialised on: operand type and tile width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WgmmaGemmKernel {
    ty: WgmmaType,
    bn: u32,
    /// Blocks a cluster (1 or 2): a pair takes two tiles of the same columns, each copying half
    /// of B's slice into both by TMA multicast (a third less traffic from L2).
    cluster: u32,
    /// C in the operands' type (f16/bf16, rounded to nearest), else f32.
    narrow: bool,
    /// `C += A·Bᵀ` (f32 C only): a layer's product added onto the residual stream.
    accumulate: bool,
    /// Rows of a tile: 128 (each consumer 64), or 256 (each consumer 128, as two 64-row
    /// instructions a step; [`WgmmaGemmKernel::tall`]).
    bm: u32,
}

impl WgmmaGemmKernel {
    pub const THREADS: u32 = 384;
    pub const BM: u32 = 128;
    pub const STAGES: u32 = 4;

    /// `bn`: 128 or 256.
    pub fn new(ty: WgmmaType, bn: u32) -> Option<WgmmaGemmKernel> {
        matches!(bn, 128 | 256).then_some(WgmmaGemmKernel { ty, bn, cluster: 1, narrow: false, accumulate: false, bm: Self::BM })
    }
    /// This kernel writing C in the operands' type (f16 or bf16; `None` for TF32): half the
    /// bytes of f32, as a model's next layer reads them.
    pub fn narrow_c(self) -> Option<WgmmaGemmKernel> {
        (self.ty != WgmmaType::TF32 && !self.accumulate).then_some(WgmmaGemmKernel { narrow: true, ..self })
    }
    /// This kernel adding its product onto C (`C += A·Bᵀ`). `None` with C in the operands'
    /// type, and for tiles 256 wide: C's values loaded beside 128 accumulators a thread
    /// spill past the 168 registers ptxas allocates.
    pub fn accumulating(self) -> Option<WgmmaGemmKernel> {
        (!self.narrow && self.bn == 128).then_some(WgmmaGemmKernel { accumulate: true, ..self })
    }
    pub fn accumulates(&self) -> bool {
        self.accumulate
    }
    /// Tiles of 256 × 128 (each consumer warpgroup 128 rows as two `m64n128` instructions a step),
    /// cuBLAS's shape on Hopper, for operands of `ty`.
    pub fn tall(ty: WgmmaType) -> WgmmaGemmKernel {
        WgmmaGemmKernel { ty, bn: 128, cluster: 1, narrow: false, accumulate: false, bm: 256 }
    }
    /// Rows of a tile (128, or 256 for [`WgmmaGemmKernel::tall`]).
    pub fn bm(&self) -> u32 {
        self.bm
    }
    /// Bytes of one value of C.
    pub fn c_bytes(&self) -> u32 {
        if self.narrow {
            2
        } else {
            4
        }
    }
    /// This kernel in clusters of two blocks sharing B's slices (see [`WgmmaGemmKernel`]'s
    /// `cluster`).
    pub fn clustered(self) -> WgmmaGemmKernel {
        WgmmaGemmKernel { cluster: 2, ..self }
    }
    pub fn cluster(&self) -> u32 {
        self.cluster
    }
    /// Rows of B's tensor-map box: the tile's columns, half of them in a cluster of two.
    pub fn b_box_rows(&self) -> u32 {
        self.bn / self.cluster
    }
    pub fn ty(&self) -> WgmmaType {
        self.ty
    }
    pub fn bn(&self) -> u32 {
        self.bn
    }
    /// Values of a slice along K: 128 bytes of each row (the swizzle's span), 64 values or 32
    /// for TF32.
    pub fn bk(&self) -> u32 {
        128 / self.ty.bytes()
    }
    /// Bytes of one ring stage (a slice of A and one of B, 128 bytes a row).
    pub fn stage_bytes(&self) -> u32 {
        (self.bm + self.bn) * 128
    }
    /// Dynamic shared memory: the ring, and 1 KB to align it to the swizzle's 1024 bytes.
    pub fn shared_bytes(&self) -> u32 {
        Self::STAGES * self.stage_bytes() + 1024
    }
    /// Tiles of C for `m × n`.
    pub fn tiles(&self, m: u32, n: u32) -> u32 {
        m.div_ceil(self.bm) * n.div_ceil(self.bn)
    }
    /// The persistent grid for `m × n` on a device of `sms` multiprocessors: one block per
    /// multiprocessor (fewer for fewer tiles), each taking tiles `i, i + grid, ...`.
    pub fn launch(&self, m: u32, n: u32, sms: u32) -> LaunchConfig {
        let c = self.cluster;
        // a cluster takes `c` tile rows of one tile column at a time
        let units = m.div_ceil(self.bm).div_ceil(c) * n.div_ceil(self.bn);
        let grid = units.min(sms / c).max(1) * c;
        LaunchConfig { grid: (grid, 1, 1), block: (Self::THREADS, 1, 1), shared_bytes: self.shared_bytes() }
    }
    /// `2·m·n·k`.
    pub fn flops(m: u32, n: u32, k: u32) -> f64 {
        2.0 * m as f64 * n as f64 * k as f64
    }
}

/// The ring's next stage: `s + 1`, back to 0 (and the phase flipped) after the last.
pub(super) fn next_stage(k: &mut PtxKernel, s: Reg, phase: Reg, stages: u32) {
    k.bin_to(BinOp::Add, s, s, 1u32);
    let wrap = k.setp(Cmp::Eq, U, s, stages);
    k.when(wrap, false, |k| {
        k.mov_to(s, 0u32);
        k.bin_to(BinOp::Xor, phase, phase, 1u32);
    });
}

/// A consumer's release of the ring stage whose `empty` mbarrier is at `empty`, by the
/// signalling thread(s): alone, thread 0 on this block's; in a cluster, thread `r` on that
/// mbarrier of the block of rank `r` (each block's producer refills the stage of all), the
/// arrivals side by side rather than one after another on one thread.
fn release_stage(k: &mut PtxKernel, empty: Reg, cluster: u32, tl: Reg) {
    if cluster > 1 {
        k.mbarrier_arrive_remote(empty, tl);
    } else {
        k.mbarrier_arrive(Addr::reg(empty), None);
    }
}

/// Tile rows of C taken together in the persistent order.
const GROUP: u32 = 8;

/// The target of a kernel that uses wgmma or setmaxnreg: they exist only on the
/// architecture-specific `sm_90a`.
pub(super) fn arch_target(sm: u32) -> String {
    if sm == 90 {
        "sm_90a".into()
    } else {
        format!("sm_{sm}")
    }
}

/// The address of the dynamic shared memory `smem` rounded up to 1024 bytes (the 128-byte
/// swizzle's period: TMA tiles and wgmma descriptors assume it).
pub(super) fn swizzle_aligned(k: &mut PtxKernel, smem: Name) -> Reg {
    let base = k.mov(U, Operand::Symbol(smem));
    let base = k.add(U, base, 1023u32);
    k.bin(BinOp::And, PtxType::B32, base, !1023u32)
}

/// A consumer thread's place in its warpgroup's accumulators: accumulator `j` is in row
/// `16·warp + l4` (+ 8 for `j % 4 ≥ 2`), column `8·(j / 4) + 2·lc + j % 2`.
pub(super) struct Lanes {
    /// The thread's index in its warpgroup.
    pub tl: Reg,
    pub warp: Reg,
    pub l4: Reg,
    pub lc: Reg,
}

pub(super) fn lanes(k: &mut PtxKernel, tid: Reg) -> Lanes {
    let tl = k.bin(BinOp::And, PtxType::B32, tid, 127u32);
    let warp = k.bin(BinOp::Shr, U, tl, 5u32);
    let lane = k.bin(BinOp::And, PtxType::B32, tl, 31u32);
    let l4 = k.bin(BinOp::Shr, U, lane, 2u32);
    let lc = k.bin(BinOp::And, PtxType::B32, lane, 3u32);
    Lanes { tl, warp, l4, lc }
}

/// A wgmma shared-memory descriptor of a K-major tile with 128-byte swizzle (rows of 64
/// two-byte values, 8-row groups 1024 bytes apart) at the 32-bit shared address `addr`.
pub(super) fn descriptor(k: &mut PtxKernel, addr: Reg) -> Reg {
    // leading byte offset 16 (unused with this swizzle)
    swizzled_descriptor(k, addr, 16)
}

/// A wgmma shared-memory descriptor with 128-byte swizzle at the 32-bit shared address `addr`:
/// 8-row groups of 128-byte rows 1024 bytes apart (the stride byte offset), and `lbo` bytes
/// between 64-value column blocks of an MN-major operand (unused for K-major).
pub(super) fn swizzled_descriptor(k: &mut PtxKernel, addr: Reg, lbo: u32) -> Reg {
    let a = k.bin(BinOp::And, PtxType::B32, addr, 0x3FFFFu32);
    let a = k.bin(BinOp::Shr, U, a, 4u32);
    let a = k.cvt(PtxType::U64, U, a);
    let fields: u64 = (((lbo >> 4) as u64) << 16) | ((1024 >> 4) << 32) | (1 << 62);
    k.bin(BinOp::Or, PtxType::B64, a, fields as i64)
}

impl Kernel for WgmmaGemmKernel {
    fn name(&self) -> String {
        let c = if self.cluster > 1 { format!("_c{}", self.cluster) } else { String::new() };
        let out = if self.narrow { format!("_to_{}", self.ty.tag()) } else { String::new() };
        let acc = if self.accumulate { "_acc" } else { "" };
        format!("wgmma_gemm_{}_{}x{}{c}{out}{acc}", self.ty.tag(), self.bm, self.bn)
    }

    fn target(&self, sm: u32) -> String {
        arch_target(sm)
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let (bn, stages, cl) = (self.bn, Self::STAGES, self.cluster);
        let mut k = PtxKernel::new(&self.name());
        if cl > 1 {
            k.cluster_dims((cl, 1, 1));
        }
        for p in ["a_map", "b_map"] {
            k.add_tensor_map_param(p);
        }
        k.add_param("c", PtxType::U64);
        for p in ["m", "n", "k"] {
            k.add_param(p, U);
        }
        k.launch_bounds((Self::THREADS, 1, 1), Some(1));
        let smem = k.dynamic_shared("smem", 1024);
        let bars = k.shared_array("bars", PtxType::B64, 2 * stages, 8);
        let a_map = k.param_address("a_map");
        let b_map = k.param_address("b_map");
        let c = k.ld_param_ptr("c");
        let (m, n, kk) = (k.ld_param("m"), k.ld_param("n"), k.ld_param("k"));
        let tid = k.special(Special::TidX);
        let wg = k.bin(BinOp::Shr, U, tid, 7u32);
        // the ring
        let base = swizzle_aligned(&mut k, smem);
        let bar0 = k.mov(U, Operand::Symbol(bars));
        let bm = self.bm;
        // 64-row halves a consumer takes (one wgmma each per step)
        let halves = bm / 128;
        let a_bytes = bm * 128;
        let is0 = k.setp(Cmp::Eq, U, tid, 0u32);
        k.when(is0, false, |k| {
            for s in 0..stages {
                k.mbarrier_init(Addr::at(bar0, 8 * s as i64), 1);
                // released by both consumers of every block of the cluster
                k.mbarrier_init(Addr::at(bar0, 8 * (stages + s) as i64), 2 * cl);
            }
            k.fence_proxy_async();
            if cl > 1 {
                k.fence_mbarrier_init();
            }
        });
        if cl > 1 {
            // the peer's mbarriers exist before anything reaches them
            k.cluster_sync();
        } else {
            k.bar_sync();
        }
        // this block's rank in its cluster, the peer's B half it does not copy
        let rank = (cl > 1).then(|| k.special(Special::ClusterCtaRank));
        let kb_n = k.add(U, kk, self.bk() - 1);
        let kb_n = k.bin(BinOp::Shr, U, kb_n, self.bk().trailing_zeros());
        // persistent blocks: tiles t = ctaid.x, + nctaid.x, ... in groups of GROUP tile rows
        // (a group's tiles share A's rows and sweep B's together, which stays in L2)
        let tiles_m = k.add(U, m, bm - 1);
        let tiles_m = k.bin(BinOp::Div, U, tiles_m, bm);
        let tiles_n = k.add(U, n, bn - 1);
        let tiles_n = k.bin(BinOp::Div, U, tiles_n, bn);
        // a cluster takes cl tile rows of one tile column: units of cl rows
        let units_m = if cl > 1 {
            let u = k.add(U, tiles_m, cl - 1);
            k.bin(BinOp::Div, U, u, cl)
        } else {
            tiles_m
        };
        let tiles = k.mul(U, units_m, tiles_n);
        let (first_unit, stride) = if cl > 1 {
            (k.special(Special::ClusterIdX), k.special(Special::NclusterIdX))
        } else {
            (k.special(Special::CtaidX), k.special(Special::NctaidX))
        };
        let group = k.mul(U, tiles_n, GROUP);
        // tile t's (row, column) of tiles
        let tile_at = |k: &mut PtxKernel, t: Reg| -> (Reg, Reg) {
            let g = k.bin(BinOp::Div, U, t, group);
            let first = k.mul(U, g, GROUP);
            let left = k.sub(U, units_m, first);
            let gm = k.bin(BinOp::Min, U, left, GROUP);
            let r = k.bin(BinOp::Rem, U, t, group);
            let tm = k.bin(BinOp::Rem, U, r, gm);
            let tm = k.add(U, tm, first);
            let tn = k.bin(BinOp::Div, U, r, gm);
            match rank {
                Some(rank) => (k.fma(U, tm, cl, rank), tn),
                None => (tm, tn),
            }
        };
        let producer = k.setp(Cmp::Eq, U, wg, 0u32);
        let (consumer, done) = (k.new_label("consumer"), k.new_label("done"));
        k.bra_if(producer, true, &consumer);

        // ---- producer: one thread feeds the ring, tile after tile ----
        k.setmaxnreg(false, 40);
        let lead = k.setp(Cmp::Eq, U, tid, 0u32);
        k.bra_if(lead, true, &done);
        {
            // slices issued so far (over all tiles), the stage and its phase
            let (kb_all, s, phase) = (k.mov(U, 0u32), k.mov(U, 0u32), k.mov(PtxType::B32, 0u32));
            let mask = rank.map(|_| k.mov(PtxType::B16, ((1u32 << cl) - 1) as i64));
            let t = k.mov(U, first_unit);
            let (tiles_top, tiles_end) = (k.new_label("p_tile"), k.new_label("p_tiles_end"));
            k.label(&tiles_top);
            let past = k.setp(Cmp::Ge, U, t, tiles);
            k.bra_if(past, false, &tiles_end);
            let (tm, tn) = tile_at(&mut k, t);
            let m0 = k.mul(U, tm, bm);
            let n0 = k.mul(U, tn, bn);
            let kb = k.mov(U, 0u32);
            let (top, end) = (k.new_label("load"), k.new_label("load_end"));
            k.label(&top);
            let out = k.setp(Cmp::Ge, U, kb, kb_n);
            k.bra_if(out, false, &end);
            // wait until both consumers released this stage's previous use
            let reuse = k.setp(Cmp::Ge, U, kb_all, stages);
            let empty = k.fma(U, s, 8u32, bar0);
            let empty = k.add(U, empty, 8 * stages);
            let prev = k.bin(BinOp::Xor, PtxType::B32, phase, 1u32);
            let fresh = k.new_label("fresh");
            k.bra_if(reuse, true, &fresh);
            k.mbarrier_wait(Addr::reg(empty), prev);
            k.label(&fresh);
            let full = k.fma(U, s, 8u32, bar0);
            k.mbarrier_arrive(Addr::reg(full), Some(self.stage_bytes()));
            let sa = k.fma(U, s, self.stage_bytes(), base);
            let sb = k.add(U, sa, a_bytes);
            let k0 = k.mul(U, kb, self.bk());
            k.tma_load_2d(Addr::reg(sa), a_map, (k0, m0), Addr::reg(full));
            if let (Some(rank), Some(mask)) = (rank, mask) {
                // this block's share of B's rows, into the same place of every block
                let half = bn / cl;
                let sbh = k.fma(U, rank, half * 128, sb);
                let n0h = k.fma(U, rank, half, n0);
                k.tma_load_2d_multicast(Addr::reg(sbh), b_map, (k0, n0h), Addr::reg(full), mask);
            } else {
                k.tma_load_2d(Addr::reg(sb), b_map, (k0, n0), Addr::reg(full));
            }
            k.bin_to(BinOp::Add, kb, kb, 1u32);
            k.bin_to(BinOp::Add, kb_all, kb_all, 1u32);
            next_stage(&mut k, s, phase, stages);
            k.bra(&top);
            k.label(&end);
            k.bin_to(BinOp::Add, t, t, stride);
            k.bra(&tiles_top);
            k.label(&tiles_end);
        }
        k.bra(&done);

        // ---- consumers: 64 rows of each tile ----
        k.label(&consumer);
        k.setmaxnreg(true, 232);
        let cw = k.sub(U, wg, 1u32);
        let on = k.setp(Cmp::Eq, U, tid, tid);
        let Lanes { tl, warp, l4, lc } = lanes(&mut k, tid);
        // the thread(s) that release stages: 0, or one per block of the cluster
        let first = if cl > 1 { k.setp(Cmp::Lt, U, tl, cl) } else { k.setp(Cmp::Eq, U, tl, 0u32) };
        // a 64-row half's accumulators each
        let accs: Vec<Vec<Reg>> = (0..halves).map(|_| (0..bn / 2).map(|_| k.reg(F)).collect()).collect();
        let (s, phase) = (k.mov(U, 0u32), k.mov(PtxType::B32, 0u32));
        let t = k.mov(U, first_unit);
        let (tiles_top, tiles_end) = (k.new_label("c_tile"), k.new_label("c_tiles_end"));
        k.label(&tiles_top);
        let past = k.setp(Cmp::Ge, U, t, tiles);
        k.bra_if(past, false, &tiles_end);
        let (tm, tn) = tile_at(&mut k, t);
        for &a in accs.iter().flatten() {
            k.mov_to(a, 0.0f32);
        }
        {
            let kb = k.mov(U, 0u32);
            // the stage of the slice before, released once its products are done
            let held = k.mov(U, 0u32);
            let (top, end) = (k.new_label("mma"), k.new_label("mma_end"));
            k.label(&top);
            let out = k.setp(Cmp::Ge, U, kb, kb_n);
            k.bra_if(out, false, &end);
            let full = k.fma(U, s, 8u32, bar0);
            k.mbarrier_wait(Addr::reg(full), phase);
            let sa = k.fma(U, s, self.stage_bytes(), base);
            let sb = k.add(U, sa, a_bytes);
            // this warpgroup's rows of A (bm / 2 of them, 128 bytes each)
            let sa = k.fma(U, cw, bm / 2 * 128, sa);
            let da = descriptor(&mut k, sa);
            let db = descriptor(&mut k, sb);
            k.wgmma_fence();
            for step in 0..4 {
                // one instruction's K = 32 bytes further along K: +2 in the descriptor's address;
                // the next 64 rows 8192 bytes further: +512
                let b = k.add(PtxType::U64, db, 2 * step as i64);
                for (h, acc) in accs.iter().enumerate() {
                    let a = k.add(PtxType::U64, da, (2 * step + 512 * h) as i64);
                    k.wgmma_mma(Wgmma { ty: self.ty, n: bn, d: acc.clone(), a: WgmmaA::Desc(a), b, scale_d: on, trans_b: false });
                }
            }
            k.wgmma_commit();
            // one group stays in flight: the slice before this one is done, its stage free
            k.wgmma_wait(1);
            let release = k.setp(Cmp::Ne, U, kb, 0u32);
            let release = k.bin(BinOp::And, PtxType::Pred, release, first);
            let prev_empty = k.add(U, held, 8 * stages);
            k.when(release, false, |k| release_stage(k, prev_empty, cl, tl));
            k.mov_to(held, full);
            k.bin_to(BinOp::Add, kb, kb, 1u32);
            next_stage(&mut k, s, phase, stages);
            k.bra(&top);
            k.label(&end);
            k.wgmma_wait(0);
            let any = k.setp(Cmp::Ne, U, kb_n, 0u32);
            let release = k.bin(BinOp::And, PtxType::Pred, any, first);
            let last_empty = k.add(U, held, 8 * stages);
            k.when(release, false, |k| release_stage(k, last_empty, cl, tl));
        }
        // accumulator j of thread t: column group j / 4, rows +8 for j % 4 ≥ 2, column +1 for odd j
        let r0 = k.mul(U, tm, bm);
        let r0 = k.fma(U, cw, bm / 2, r0);
        let r0 = k.fma(U, warp, 16u32, r0);
        let row0 = k.add(U, r0, l4);
        let c0 = k.mul(U, tn, bn);
        let col = k.fma(U, lc, 2u32, c0);
        // a tile wholly inside C with an even row length: pairs of columns (8 bytes) a store at
        // fixed offsets from two row addresses, no checks
        let (slow, stored) = (k.new_label("edge_tile"), k.new_label("stored"));
        let tile_end = k.fma(U, tm, bm, bm);
        let fast = k.setp(Cmp::Le, U, tile_end, m);
        let col_end = k.fma(U, tn, bn, bn);
        let inside_c = k.setp(Cmp::Le, U, col_end, n);
        k.bin_to(BinOp::And, fast, fast, inside_c);
        let odd = k.bin(BinOp::And, PtxType::B32, n, 1u32);
        let even = k.setp(Cmp::Eq, U, odd, 0u32);
        k.bin_to(BinOp::And, fast, fast, even);
        k.bra_if(fast, true, &slow);
        let cb = self.c_bytes();
        let bf16 = self.ty == WgmmaType::BF16;
        // two values rounded to the operands' type, packed (the lower column in the low half)
        let pack = |k: &mut PtxKernel, hi: Reg, lo: Reg| if bf16 { k.cvt_bf16x2(hi, lo) } else { k.cvt_f16x2(hi, lo) };
        for (h, acc) in accs.iter().enumerate() {
            let row = k.add(U, row0, 64 * h as u32);
            let off = k.mul(U, row, n);
            let off = k.add(U, off, col);
            let lo = k.elem_addr(c, off, cb);
            let off8 = k.fma(U, n, 8u32, off);
            let hi = k.elem_addr(c, off8, cb);
            for j in (0..acc.len()).step_by(2) {
                let base = if j % 4 >= 2 { hi } else { lo };
                let at = Addr::at(base, (8 * cb * (j as u32 / 4)) as i64);
                if self.narrow {
                    let v = pack(&mut k, acc[j + 1], acc[j]);
                    k.st(Space::Global, PtxType::B32, at, v);
                } else if self.accumulate {
                    let old = k.ld_v(Space::Global, F, 2, at);
                    let (a0, a1) = (k.add(F, old[0], acc[j]), k.add(F, old[1], acc[j + 1]));
                    k.st_v(Space::Global, F, at, &[a0, a1]);
                } else {
                    k.st_v(Space::Global, F, at, &[acc[j], acc[j + 1]]);
                }
            }
        }
        k.bra(&stored);
        k.label(&slow);
        for (h, &v, j) in accs.iter().enumerate().flat_map(|(h, acc)| acc.iter().enumerate().map(move |(j, v)| (h as u32, v, j as u32))) {
            let row = k.add(U, row0, 64 * h);
            let r = if j % 4 >= 2 { k.add(U, row, 8u32) } else { row };
            let cc = k.add(U, col, 8 * (j / 4) + j % 2);
            let in_r = k.setp(Cmp::Lt, U, r, m);
            let in_c = k.setp(Cmp::Lt, U, cc, n);
            let ok = k.bin(BinOp::And, PtxType::Pred, in_r, in_c);
            let off = k.mul(U, r, n);
            let off = k.add(U, off, cc);
            let a = k.elem_addr(c, off, cb);
            if self.narrow {
                let packed = pack(&mut k, v, v);
                let (v16, _) = k.unpack16(packed);
                k.when(ok, false, |k| k.st(Space::Global, PtxType::B16, Addr::reg(a), v16));
            } else if self.accumulate {
                k.when(ok, false, |k| {
                    let old = k.ld(Space::Global, F, Addr::reg(a));
                    let sum = k.add(F, old, v);
                    k.st(Space::Global, F, Addr::reg(a), sum)
                });
            } else {
                k.when(ok, false, |k| k.st(Space::Global, F, Addr::reg(a), v));
            }
        }
        k.label(&stored);
        k.bin_to(BinOp::Add, t, t, stride);
        k.bra(&tiles_top);
        k.label(&tiles_end);
        k.label(&done);
        if cl > 1 {
            // no block leaves while its peer may still arrive on its mbarriers
            k.cluster_sync();
        }
        k.ret();
        k
    }
}
