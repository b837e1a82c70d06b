//! A prompt's products on the tensor cores: `y[m×n] (+)= x[m×k] · wᵀ`, with `x` f32 row-major
//! (rounded to f16 as its fragments are built), `w` f16 row-major `n×k` (a weight matrix as the
//! file holds it, dequantized to f16), f32 accumulators (`mma.sync.m16n8k16`, sm_80+).
//!
//! 128 threads (4 warps), block tile 64×64, 32-deep slices through a 3-stage `cp.async`
//! pipeline: while a slice is multiplied, the next two are on their way into shared memory (at
//! these small shapes a block spends its time waiting for loads, not multiplying). Warp w owns
//! rows (w/2)·32.. +32 and columns (w%2)·32.. +32: 2×4 mma tiles, 32 accumulators per thread.
//! `x`'s fragments are read as f32 pairs and packed to f16 (rows 40 words apart: a half-warp's
//! 8-byte reads fall in different banks); `w` is already the `col` operand the mma wants, read
//! with `ldmatrix` (rows 40 halves apart). Rows of `x` past `m` and of `w` past `n` are clamped
//! to the last one on load (they feed only outputs that are not stored): any `m` and `n`;
//! `k % 32 == 0`.

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

const BM: u32 = 64;
const BN: u32 = 64;
const BK: u32 = 32;
const STAGES: u32 = 3;
/// Bytes between shared rows of `x` (32 f32 and 8 of padding) and of `w` (32 halves and 8).
const X_ROW: u32 = 160;
const W_ROW: u32 = 80;
const X_TILE: u32 = BM * X_ROW;
const STAGE_BYTES: u32 = X_TILE + BN * W_ROW;
const B32: PtxType = PtxType::B32;

/// A row-major operand in global memory: its address and element size (4: f32, 2: f16).
struct GlobalRows(Reg, u32);

/// The 16-byte copies of one thread for a 64-row tile of a `bk`-wide slice of `src` (rows
/// `row0..row0 + 64`, row length `kd` elements, rows past `last` clamped to it): the shared
/// offset of its first copy (rows `row_bytes` apart), and per pass the global address and the
/// offset past the first.
fn tile_copies(
    k: &mut PtxKernel,
    GlobalRows(src, elem): GlobalRows,
    (tid, row0, last, kd): (Reg, Reg, Reg, Reg),
    row_bytes: u32,
) -> (Reg, Vec<(Reg, u32)>) {
    let per_row = BK * elem / 16;
    let rows_per_pass = HalfGemmKernel::THREADS / per_row;
    let r = k.bin(BinOp::Shr, U, tid, per_row.trailing_zeros());
    let c = k.bin(BinOp::And, B32, tid, per_row - 1);
    let c_elems = k.mul(U, c, 16 / elem);
    let soff = k.mul(U, r, row_bytes);
    let soff = k.fma(U, c, 16u32, soff);
    let copies = (0..64 / rows_per_pass)
        .map(|p| {
            let row = k.add(U, row0, r);
            let row = k.add(U, row, rows_per_pass * p);
            let row = k.bin(BinOp::Min, U, row, last);
            let i = k.fma(U, row, kd, c_elems);
            (k.elem_addr(src, i, elem), rows_per_pass * p * row_bytes)
        })
        .collect();
    (soff, copies)
}

/// What the product does with `y`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HalfEpilogue {
    Store,
    /// `y += x·wᵀ` (a residual connection).
    Add,
}

/// Parameters: `x` (m×k f32), `w` (n×k f16), `y` (m×n f32) (u64); `m`, `k`, `n` (u32; `k`
/// a multiple of the slice depth, `m·k`, `n·k` and `m·n` below 2³²: the caller checks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HalfGemmKernel {
    epilogue: HalfEpilogue,
}

impl HalfGemmKernel {
    pub const THREADS: u32 = 128;
    /// The depth of one slice: `k` must be a multiple of it.
    pub const K_STEP: u32 = BK;

    /// The kernel for inner dimension `k` (`None` unless `k` is a positive multiple of 32).
    pub fn new(epilogue: HalfEpilogue, k: u32) -> Option<HalfGemmKernel> {
        (k > 0 && k.is_multiple_of(BK)).then_some(HalfGemmKernel { epilogue })
    }

    pub fn launch(&self, m: u32, n: u32) -> LaunchConfig {
        LaunchConfig { grid: (n.div_ceil(BN).max(1), m.div_ceil(BM).max(1), 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for HalfGemmKernel {
    fn name(&self) -> String {
        let add = if self.epilogue == HalfEpilogue::Add { "_add" } else { "" };
        format!("gemm_f16_64x64x32_cp{STAGES}{add}")
    }

    fn build(&self, sm: u32) -> PtxKernel {
        let mut k = PtxKernel::new(&self.name());
        for p in ["x", "w", "y"] {
            k.add_param(p, PtxType::U64);
        }
        for p in ["m", "k", "n"] {
            k.add_param(p, U);
        }
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let sh = k.shared_array("stages", B32, STAGES * STAGE_BYTES / 4, 16);
        k.grid_dep_sync(sm);
        let x = k.ld_param_ptr("x");
        let w = k.ld_param_ptr("w");
        let y = k.ld_param_ptr("y");
        let m = k.ld_param("m");
        let kd = k.ld_param("k");
        let n = k.ld_param("n");
        let tid = k.special(Special::TidX);
        let bx = k.special(Special::CtaidX);
        let by = k.special(Special::CtaidY);
        let s0 = k.mov(U, Operand::Symbol(sh));
        let m1 = k.sub(U, m, 1u32);
        let n1 = k.sub(U, n, 1u32);
        let row0 = k.mul(U, by, BM);
        let col0 = k.mul(U, bx, BN);

        // the copies of one slice: x rows of 8 × 16 bytes (4 passes of 16 rows), w rows of
        // 4 × 16 bytes (2 passes of 32 rows); rows past the end clamped
        let (xs_off, copies_x) = tile_copies(&mut k, GlobalRows(x, 4), (tid, row0, m1, kd), X_ROW);
        let (ws_off, copies_w) = tile_copies(&mut k, GlobalRows(w, 2), (tid, col0, n1, kd), W_ROW);
        let xs = k.add(U, s0, xs_off);
        let ws = k.add(U, s0, ws_off);
        let ws = k.add(U, ws, X_TILE);
        // issues the copies of the next slice into the stage at `off` and moves on to the slice
        // after it; `live` false (past the last slice) issues none, but the group still closes
        let issue = |k: &mut PtxKernel, off: Reg, live: Reg| {
            let xa = k.add(U, xs, off);
            let wa = k.add(U, ws, off);
            k.when(live, false, |k| {
                for &(src, o) in &copies_x {
                    k.cp_async(Addr::at(xa, o as i64), Addr::reg(src));
                }
                for &(src, o) in &copies_w {
                    k.cp_async(Addr::at(wa, o as i64), Addr::reg(src));
                }
            });
            for &(src, _) in &copies_x {
                k.bin_to(BinOp::Add, src, src, BK as i64 * 4);
            }
            for &(src, _) in &copies_w {
                k.bin_to(BinOp::Add, src, src, BK as i64 * 2);
            }
            k.cp_async_commit();
        };
        let next_stage = |k: &mut PtxKernel, off: Reg| {
            k.bin_to(BinOp::Add, off, off, STAGE_BYTES);
            let wrap = k.setp(Cmp::Eq, U, off, STAGES * STAGE_BYTES);
            let z = k.selp(U, 0u32, off, wrap);
            k.mov_to(off, z);
        };

        // fragment reads: x pairs at (row g, column 2t) of each 16-row tile; w through
        // ldmatrix, lane l giving row l % 8 + (l / 16)·8, column ((l / 8) % 2)·8
        let lane = k.bin(BinOp::And, B32, tid, 31u32);
        let warp = k.bin(BinOp::Shr, U, tid, 5u32);
        let wm = k.bin(BinOp::Shr, U, warp, 1u32);
        let wn = k.bin(BinOp::And, B32, warp, 1u32);
        let g = k.bin(BinOp::Shr, U, lane, 2u32);
        let t = k.bin(BinOp::And, B32, lane, 3u32);
        let ar = k.fma(U, wm, 32u32, g);
        let ao = k.mul(U, ar, X_ROW);
        let ao = k.fma(U, t, 8u32, ao);
        let af = k.add(U, s0, ao);
        let l8 = k.bin(BinOp::And, B32, lane, 7u32);
        let hi = k.bin(BinOp::Shr, U, lane, 4u32);
        let br = k.fma(U, hi, 8u32, l8);
        let br = k.fma(U, wn, 32u32, br);
        let q = k.bin(BinOp::Shr, U, lane, 3u32);
        let q = k.bin(BinOp::And, B32, q, 1u32);
        let bo = k.mul(U, br, W_ROW);
        let bo = k.fma(U, q, 16u32, bo);
        let bf = k.add(U, s0, bo);
        let bf = k.add(U, bf, X_TILE);

        // acc[(mi * 4 + ni) * 4 + r]
        let acc: Vec<Reg> = (0..32).map(|_| k.mov(F, 0.0f32)).collect();
        let compute = |k: &mut PtxKernel, off: Reg| {
            let a = k.add(U, af, off);
            let b = k.add(U, bf, off);
            for ks in 0..(BK / 16) as i64 {
                let afr: Vec<[Reg; 4]> = (0..2i64)
                    .map(|mi| {
                        let base = mi * 16 * X_ROW as i64 + ks * 64;
                        // a0 (row g, k 2t), a1 (row g + 8), a2 (k 2t + 8), a3 (both)
                        [0, 8 * X_ROW as i64, 32, 8 * X_ROW as i64 + 32].map(|d| {
                            let v = k.ld_v(Space::Shared, F, 2, Addr::at(a, base + d));
                            k.cvt_f16x2(v[1], v[0])
                        })
                    })
                    .collect();
                let mut bfr: Vec<[Reg; 2]> = vec![];
                for nj in 0..2 {
                    let r = k.ldmatrix_x4(Addr::at(b, nj * 16 * W_ROW as i64 + ks * 32), false);
                    bfr.push([r[0], r[1]]);
                    bfr.push([r[2], r[3]]);
                }
                for (mi, a4) in afr.iter().enumerate() {
                    for (ni, b2) in bfr.iter().enumerate() {
                        let base = (mi * 4 + ni) * 4;
                        let d = [acc[base], acc[base + 1], acc[base + 2], acc[base + 3]];
                        k.mma_f16(d, *a4, *b2, d);
                    }
                }
            }
        };

        // the pipeline: slices 0 and 1 on their way; then per slice s: wait for it, a barrier
        // (it is everyone's, and slice s − 1's stage is free), issue slice s + 2 there, multiply
        let slices = k.bin(BinOp::Shr, U, kd, BK.trailing_zeros());
        let load_off = k.mov(U, 0u32);
        let issued = k.mov(U, 0u32);
        for _ in 0..STAGES - 1 {
            let live = k.setp(Cmp::Lt, U, issued, slices);
            issue(&mut k, load_off, live);
            next_stage(&mut k, load_off);
            k.bin_to(BinOp::Add, issued, issued, 1u32);
        }
        let off = k.mov(U, 0u32);
        let s = k.mov(U, 0u32);
        let top = k.new_label("slice");
        k.label(&top);
        k.cp_async_wait(STAGES - 2);
        k.bar_sync();
        let live = k.setp(Cmp::Lt, U, issued, slices);
        issue(&mut k, load_off, live);
        next_stage(&mut k, load_off);
        k.bin_to(BinOp::Add, issued, issued, 1u32);
        compute(&mut k, off);
        next_stage(&mut k, off);
        k.bin_to(BinOp::Add, s, s, 1u32);
        let more = k.setp(Cmp::Lt, U, s, slices);
        k.bra_if(more, false, &top);
        k.cp_async_wait(0);

        // c0, c1 at (row g, columns 2t, 2t+1) of each 16×8 tile; c2, c3 at row g + 8
        let r = k.fma(U, wm, 32u32, g);
        let r = k.add(U, row0, r);
        let c = k.fma(U, wn, 32u32, col0);
        let c = k.fma(U, t, 2u32, c);
        for mi in 0..2u32 {
            for half in 0..2u32 {
                let row = k.add(U, r, 16 * mi + 8 * half);
                let row_in = k.setp(Cmp::Lt, U, row, m);
                let rowi = k.mul(U, row, n);
                for ni in 0..4u32 {
                    let col = k.add(U, c, 8 * ni);
                    // n is even (the caller checks), so column col + 1 is in when col is
                    let col_in = k.setp(Cmp::Lt, U, col, n);
                    let ok = k.bin(BinOp::And, PtxType::Pred, row_in, col_in);
                    let i = k.add(U, rowi, col);
                    let ya = k.elem_addr(y, i, 4);
                    let base = ((mi * 4 + ni) * 4 + 2 * half) as usize;
                    let v = [acc[base], acc[base + 1]];
                    let epilogue = self.epilogue;
                    k.when(ok, false, |k| match epilogue {
                        HalfEpilogue::Store => k.st_v(Space::Global, F, Addr::reg(ya), &v),
                        HalfEpilogue::Add => {
                            let old = k.ld_v(Space::Global, F, 2, Addr::reg(ya));
                            let s0 = k.add(F, old[0], v[0]);
                            let s1 = k.add(F, old[1], v[1]);
                            k.st_v(Space::Global, F, Addr::reg(ya), &[s0, s1]);
                        }
                    });
                }
            }
        }
        k.ret();
        k
    }
}
