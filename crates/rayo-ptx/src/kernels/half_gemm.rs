//! A prompt's products on the tensor cores: `y[m×n] (+)= x[m×k] · wᵀ`, with `x` f32 row-major
//! (rounded to f16 on its way into shared memory), `w` f16 row-major `n×k` (a weight matrix as
//! the file holds it, dequantized to f16), f32 accumulators (`mma.sync.m16n8k16`, sm_80+).
//!
//! 128 threads (4 warps), block tile 64×64, 64-deep slices (32 where `k` is not a multiple
//! of 64) double-buffered through registers (one barrier per slice: at these small shapes a
//! slice's global-load latency is what a block waits on, so fewer, deeper slices). Warp w owns rows (w/2)·32.. +32 and columns (w%2)·32.. +32: 2×4
//! mma tiles, 32 accumulators per thread. Shared rows are `bk + 8` halves apart, so the
//! eight row addresses of one `ldmatrix` phase fall in different banks. `w` is already the
//! `col` operand the mma wants (its rows are the output columns), so both operands load with
//! plain `ldmatrix`. Rows of `x` past `m` and of `w` past `n` are clamped to the last one on
//! load (they feed only outputs that are not stored): any `m` and `n`; `k % bk == 0`.

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

const BM: u32 = 64;
const BN: u32 = 64;
const B32: PtxType = PtxType::B32;

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
    bk: u32,
}

impl HalfGemmKernel {
    pub const THREADS: u32 = 128;
    /// The slice depth of the shallowest variant: `k` must be a multiple of it.
    pub const K_STEP: u32 = 32;

    /// The kernel for inner dimension `k`: 64-deep slices where `k` allows, else 32 (`None`
    /// unless `k` is a positive multiple of 32).
    pub fn new(epilogue: HalfEpilogue, k: u32) -> Option<HalfGemmKernel> {
        let bk = if k.is_multiple_of(64) { 64 } else { 32 };
        (k > 0 && k.is_multiple_of(32)).then_some(HalfGemmKernel { epilogue, bk })
    }

    pub fn launch(&self, m: u32, n: u32) -> LaunchConfig {
        LaunchConfig { grid: (n.div_ceil(BN).max(1), m.div_ceil(BM).max(1), 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for HalfGemmKernel {
    fn name(&self) -> String {
        let add = if self.epilogue == HalfEpilogue::Add { "_add" } else { "" };
        format!("gemm_f16_64x64x{}{add}", self.bk)
    }

    fn build(&self, sm: u32) -> PtxKernel {
        let bk = self.bk;
        // bytes between shared rows: bk halves and 8 of padding
        let row_b = (bk + 8) * 2;
        let tile_bytes = 64 * row_b;
        let buf_bytes = 2 * tile_bytes;
        let mut k = PtxKernel::new(&self.name());
        for p in ["x", "w", "y"] {
            k.add_param(p, PtxType::U64);
        }
        for p in ["m", "k", "n"] {
            k.add_param(p, U);
        }
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let sh = k.shared_array("tiles", B32, 2 * buf_bytes / 4, 16);
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

        // global loads: x rows of bk/4 float4, w rows of bk/8 16-byte chunks, in passes over
        // the tile's 64 rows; rows past the end clamped
        let (x_per_row, w_per_row) = (bk / 4, bk / 8);
        let (x_rows, w_rows) = (Self::THREADS / x_per_row, Self::THREADS / w_per_row);
        let (x_passes, w_passes) = (BM / x_rows, BN / w_rows);
        let xr = k.bin(BinOp::Shr, U, tid, x_per_row.trailing_zeros());
        let xc = k.bin(BinOp::And, B32, tid, x_per_row - 1);
        let xc4 = k.mul(U, xc, 4u32);
        let row0 = k.mul(U, by, BM);
        let xp: Vec<Reg> = (0..x_passes)
            .map(|p| {
                let r = k.add(U, row0, xr);
                let r = k.add(U, r, x_rows * p);
                let r = k.bin(BinOp::Min, U, r, m1);
                let i = k.fma(U, r, kd, xc4);
                k.elem_addr(x, i, 4)
            })
            .collect();
        let wr = k.bin(BinOp::Shr, U, tid, w_per_row.trailing_zeros());
        let wc = k.bin(BinOp::And, B32, tid, w_per_row - 1);
        let wc8 = k.mul(U, wc, 8u32);
        let col0 = k.mul(U, bx, BN);
        let wp: Vec<Reg> = (0..w_passes)
            .map(|p| {
                let r = k.add(U, col0, wr);
                let r = k.add(U, r, w_rows * p);
                let r = k.bin(BinOp::Min, U, r, n1);
                let i = k.fma(U, r, kd, wc8);
                k.elem_addr(w, i, 2)
            })
            .collect();
        // shared stores
        let xs_off = k.mul(U, xr, row_b);
        let xs_off = k.fma(U, xc, 8u32, xs_off);
        let xs = k.add(U, s0, xs_off);
        let ws_off = k.mul(U, wr, row_b);
        let ws_off = k.fma(U, wc, 16u32, ws_off);
        let ws = k.add(U, s0, ws_off);
        let ws = k.add(U, ws, tile_bytes);
        // fragment reads: lane l gives row l % 16 (x: column (l / 16)·8) or row
        // l % 8 + (l / 16)·8 (w: column ((l / 8) % 2)·8) of the warp's tile
        let lane = k.bin(BinOp::And, B32, tid, 31u32);
        let warp = k.bin(BinOp::Shr, U, tid, 5u32);
        let wm = k.bin(BinOp::Shr, U, warp, 1u32);
        let wn = k.bin(BinOp::And, B32, warp, 1u32);
        let l16 = k.bin(BinOp::And, B32, lane, 15u32);
        let hi = k.bin(BinOp::Shr, U, lane, 4u32);
        let ar = k.fma(U, wm, 32u32, l16);
        let ao = k.mul(U, ar, row_b);
        let ao = k.fma(U, hi, 16u32, ao);
        let af = k.add(U, s0, ao);
        let l8 = k.bin(BinOp::And, B32, lane, 7u32);
        let br = k.fma(U, hi, 8u32, l8);
        let br = k.fma(U, wn, 32u32, br);
        let q = k.bin(BinOp::Shr, U, lane, 3u32);
        let q = k.bin(BinOp::And, B32, q, 1u32);
        let bo = k.mul(U, br, row_b);
        let bo = k.fma(U, q, 16u32, bo);
        let bf = k.add(U, s0, bo);
        let bf = k.add(U, bf, tile_bytes);

        let rx: Vec<Vec<Reg>> = (0..x_passes).map(|_| (0..4).map(|_| k.reg(F)).collect()).collect();
        let rw: Vec<Vec<Reg>> = (0..w_passes).map(|_| (0..4).map(|_| k.reg(B32)).collect()).collect();
        let load = |k: &mut PtxKernel| {
            for (p, r) in xp.iter().zip(&rx) {
                k.ld_v_to(Space::Global, r, Addr::reg(*p));
                k.bin_to(BinOp::Add, *p, *p, bk as i64 * 4);
            }
            for (p, r) in wp.iter().zip(&rw) {
                k.ld_v_to(Space::Global, r, Addr::reg(*p));
                k.bin_to(BinOp::Add, *p, *p, bk as i64 * 2);
            }
        };
        let store = |k: &mut PtxKernel, off: Reg| {
            let a = k.add(U, xs, off);
            for (p, r) in rx.iter().enumerate() {
                let lo = k.cvt_f16x2(r[1], r[0]);
                let hi = k.cvt_f16x2(r[3], r[2]);
                k.st_v(Space::Shared, B32, Addr::at(a, (p as u32 * x_rows * row_b) as i64), &[lo, hi]);
            }
            let b = k.add(U, ws, off);
            for (p, r) in rw.iter().enumerate() {
                k.st_v(Space::Shared, B32, Addr::at(b, (p as u32 * w_rows * row_b) as i64), r);
            }
        };
        // acc[(mi * 4 + ni) * 4 + r]
        let acc: Vec<Reg> = (0..32).map(|_| k.mov(F, 0.0f32)).collect();
        let compute = |k: &mut PtxKernel, off: Reg| {
            let a = k.add(U, af, off);
            let b = k.add(U, bf, off);
            for ks in 0..(bk / 16) as i64 {
                let afr: Vec<[Reg; 4]> = (0..2).map(|mi| k.ldmatrix_x4(Addr::at(a, mi * 16 * row_b as i64 + ks * 32), false)).collect();
                let mut bfr: Vec<[Reg; 2]> = vec![];
                for nj in 0..2 {
                    let r = k.ldmatrix_x4(Addr::at(b, nj * 16 * row_b as i64 + ks * 32), false);
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

        let off = k.mov(U, 0u32);
        load(&mut k);
        store(&mut k, off);
        k.bar_sync();
        let (top, last) = (k.new_label("slice"), k.new_label("last"));
        let cnt = k.bin(BinOp::Shr, U, kd, bk.trailing_zeros());
        k.bin_to(BinOp::Sub, cnt, cnt, 1u32);
        let none = k.setp(Cmp::Eq, U, cnt, 0u32);
        k.bra_if(none, false, &last);
        k.label(&top);
        load(&mut k);
        compute(&mut k, off);
        let other = k.bin(BinOp::Xor, B32, off, buf_bytes);
        store(&mut k, other);
        k.bar_sync();
        k.mov_to(off, other);
        k.bin_to(BinOp::Sub, cnt, cnt, 1u32);
        let more = k.setp(Cmp::Ne, U, cnt, 0u32);
        k.bra_if(more, false, &top);
        k.label(&last);
        compute(&mut k, off);

        // c0, c1 at (row g, columns 2t, 2t+1) of each 16×8 tile; c2, c3 at row g + 8
        let g = k.bin(BinOp::Shr, U, lane, 2u32);
        let t = k.bin(BinOp::And, B32, lane, 3u32);
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
