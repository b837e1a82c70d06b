//! TF32 tensor-core GEMM (`mma.sync.m16n8k8`, sm_80+): fp32 in and out, products rounded to
//! TF32 (10-bit mantissa) — relative error near 1e-3 of Σ|a·b|, like cuBLAS with TF32 on.
//!
//! 256 threads (8 warps), block tile 128×128, 8- or 16-deep slices, double-buffered like the SIMT
//! kernel. Warp w owns rows (w/2)·32.. +32 and columns (w%2)·64.. +64: 2×8 mma tiles, 64 f32
//! accumulators per thread. Shared rows are 136 words apart, so the fragment loads (lane =
//! 4·g + t reads row t, column g) fall in 32 different banks. Elements are rounded to TF32 once,
//! on their way into shared memory.

use super::prologue::{advance, load_passes, pass_pointers, prologue, slice_count, Prologue, THREADS};
use crate::kernels::common::*;
use crate::ptx::*;

const BM: u32 = 128;
const BN: u32 = 128;
const STRIDE: u32 = 136;
const B32: PtxType = PtxType::B32;
const U64: PtxType = PtxType::U64;

pub(super) fn build(k: &mut PtxKernel, bk: u32) {
    let buf_words = bk * STRIDE;
    let buf_bytes = buf_words * 4;
    let Prologue { sa, sb, a, b, c, tid, bx, by, kd, n } = prologue(k, "tc", B32, buf_words);
    let sa0 = k.mov(U, Operand::Symbol(sa));
    let sb0 = k.mov(U, Operand::Symbol(sb));

    // global loads: A rows of bk floats (bk/4 float4 per row), B rows of 128 (32 float4 per row)
    let a_per_row = bk / 4;
    let a_rows_per_pass = THREADS / a_per_row;
    let a_passes = BM / a_rows_per_pass;
    let b_passes = bk / 8;
    let arow = k.bin(BinOp::Shr, U, tid, a_per_row.trailing_zeros());
    let amod = k.bin(BinOp::And, B32, tid, a_per_row - 1);
    let acol = k.mul(U, amod, 4u32);
    let grow = k.fma(U, by, BM, arow);
    let ai = k.fma(U, grow, kd, acol);
    let ga = k.elem_addr(a, ai, 4);
    let brow = k.bin(BinOp::Shr, U, tid, 5u32);
    let bmod = k.bin(BinOp::And, B32, tid, 31u32);
    let bcol = k.mul(U, bmod, 4u32);
    let gcol = k.fma(U, bx, BN, bcol);
    let bi = k.fma(U, brow, n, gcol);
    let gb = k.elem_addr(b, bi, 4);
    // shared stores: As[k][m] (A transposed), Bs[k][n], rows STRIDE words apart
    let sa_idx = k.fma(U, acol, STRIDE, arow);
    let sa_st = k.fma(U, sa_idx, 4u32, sa0);
    let sb_idx = k.fma(U, brow, STRIDE, bcol);
    let sb_st = k.fma(U, sb_idx, 4u32, sb0);
    // fragment reads: lane = 4g + t
    let lane = k.bin(BinOp::And, B32, tid, 31u32);
    let warp = k.bin(BinOp::Shr, U, tid, 5u32);
    let g = k.bin(BinOp::Shr, U, lane, 2u32);
    let t = k.bin(BinOp::And, B32, lane, 3u32);
    let wm = k.bin(BinOp::Shr, U, warp, 1u32);
    let wn = k.bin(BinOp::And, B32, warp, 1u32);
    let tstride = k.mul(U, t, STRIDE);
    let am = k.fma(U, wm, 32u32, g);
    let fa_idx = k.add(U, tstride, am);
    let fa = k.fma(U, fa_idx, 4u32, sa0);
    let bn = k.fma(U, wn, 64u32, g);
    let fb_idx = k.add(U, tstride, bn);
    let fb = k.fma(U, fb_idx, 4u32, sb0);

    let ra: Vec<Vec<Reg>> = (0..a_passes).map(|_| (0..4).map(|_| k.reg(F)).collect()).collect();
    let rb: Vec<Vec<Reg>> = (0..b_passes).map(|_| (0..4).map(|_| k.reg(F)).collect()).collect();
    let a_pass_bytes = k.bin(BinOp::MulWide, U, kd, a_rows_per_pass * 4);
    let b_pass_bytes = k.bin(BinOp::MulWide, U, n, 8 * 4);
    let b_step = k.bin(BinOp::MulWide, U, n, bk * 4);
    let pa = pass_pointers(k, ga, a_passes as usize, a_pass_bytes);
    let pb = pass_pointers(k, gb, b_passes as usize, b_pass_bytes);
    let load = |k: &mut PtxKernel| {
        let (a_at, b_at): (Vec<Addr>, Vec<Addr>) = (pa.iter().map(|&r| Addr::reg(r)).collect(), pb.iter().map(|&r| Addr::reg(r)).collect());
        load_passes(k, &ra, &a_at);
        load_passes(k, &rb, &b_at);
        advance(k, &pa, Operand::Int(bk as i64 * 4));
        advance(k, &pb, Operand::Reg(b_step));
    };
    let store = |k: &mut PtxKernel, off: Reg| {
        let pa = k.add(U, sa_st, off);
        for (p, r) in ra.iter().enumerate() {
            for (i, &v) in r.iter().enumerate() {
                let tv = k.cvt_tf32(v);
                let o = (i as u32 * STRIDE * 4 + p as u32 * a_rows_per_pass * 4) as i64;
                k.st(Space::Shared, B32, Addr::at(pa, o), tv);
            }
        }
        let pb = k.add(U, sb_st, off);
        for (p, r) in rb.iter().enumerate() {
            let tb: Vec<Reg> = r.iter().map(|&v| k.cvt_tf32(v)).collect();
            k.st_v(Space::Shared, B32, Addr::at(pb, p as i64 * 8 * STRIDE as i64 * 4), &tb);
        }
    };
    // acc[(mi * 8 + ni) * 4 + r]
    let acc: Vec<Reg> = (0..64).map(|_| k.mov(F, 0.0f32)).collect();
    let compute = |k: &mut PtxKernel, boff: Reg| {
        let pa = k.add(U, fa, boff);
        let pb = k.add(U, fb, boff);
        for ks in 0..(bk / 8) as i64 {
            let k4 = (4 * STRIDE * 4) as i64;
            let kso = ks * 8 * STRIDE as i64 * 4;
            let af: Vec<[Reg; 4]> = (0..2)
                .map(|mi| {
                    let o = kso + mi as i64 * 16 * 4;
                    [0, 8 * 4, k4, k4 + 8 * 4].map(|d| k.ld(Space::Shared, B32, Addr::at(pa, o + d)))
                })
                .collect();
            let bf: Vec<[Reg; 2]> = (0..8)
                .map(|ni| {
                    let o = kso + ni as i64 * 8 * 4;
                    [0, k4].map(|d| k.ld(Space::Shared, B32, Addr::at(pb, o + d)))
                })
                .collect();
            for (mi, a4) in af.iter().enumerate() {
                for (ni, b2) in bf.iter().enumerate() {
                    let base = (mi * 8 + ni) * 4;
                    let d = [acc[base], acc[base + 1], acc[base + 2], acc[base + 3]];
                    k.mma_tf32(d, *a4, *b2, d);
                }
            }
        }
    };

    let boff = k.mov(U, 0u32);
    load(k);
    store(k, boff);
    k.bar_sync();
    let (top, last) = (k.new_label("slice"), k.new_label("last"));
    let cnt = slice_count(k, kd, bk, &last);
    k.label(&top);
    load(k);
    compute(k, boff);
    let woff = k.bin(BinOp::Xor, B32, boff, buf_bytes);
    store(k, woff);
    k.bar_sync();
    k.mov_to(boff, woff);
    k.bin_to(BinOp::Sub, cnt, cnt, 1u32);
    let more = k.setp(Cmp::Ne, U, cnt, 0u32);
    k.bra_if(more, false, &top);
    k.label(&last);
    compute(k, boff);

    // c0,c1 at (row g, cols 2t, 2t+1), c2,c3 at row g+8 of each 16×8 tile
    let r0 = k.fma(U, wm, 32u32, g);
    let crow = k.fma(U, by, BM, r0);
    let t2 = k.mul(U, t, 2u32);
    let c0 = k.fma(U, wn, 64u32, t2);
    let ccol = k.fma(U, bx, BN, c0);
    let ci = k.fma(U, crow, n, ccol);
    let gc = k.elem_addr(c, ci, 4);
    let rows8 = k.bin(BinOp::MulWide, U, n, 8 * 4);
    let rows16 = k.bin(BinOp::MulWide, U, n, 16 * 4);
    for mi in 0..2u64 {
        let pr = if mi == 0 { gc } else { k.add(U64, gc, rows16) };
        let pr8 = k.add(U64, pr, rows8);
        for ni in 0..8usize {
            let base = (mi as usize * 8 + ni) * 4;
            let o = ni as i64 * 8 * 4;
            k.st_v(Space::Global, F, Addr::at(pr, o), &acc[base..base + 2]);
            k.st_v(Space::Global, F, Addr::at(pr8, o), &acc[base + 2..base + 4]);
        }
    }
    k.ret();
}
