//! The register-blocked, vectorized, double-buffered SIMT GEMM (see the module docs in mod.rs).
//!
//! 256 threads, block tile 128×128, slice depth BK. Thread (ty, tx) = (tid/16, tid%16) owns rows
//! {ty*4+i, 64+ty*4+i} and columns {tx*4+j, 64+tx*4+j} (i, j < 4): its A and B fragments are two
//! 16-byte shared loads each, and a warp's B loads cover 64 consecutive floats (no bank
//! conflicts). Shared memory: As[2][BK][128] (A transposed), Bs[2][BK][128].

use super::prologue::{load_passes, prologue, slice_count, Prologue};
use crate::kernels::common::*;
use crate::ptx::*;

const BM: u32 = 128;
const BN: u32 = 128;
const U64: PtxType = PtxType::U64;

struct Frag {
    /// shared read bases (u32), before the buffer offset
    sa_rd: Reg,
    sb_rd: Reg,
}

fn compute(k: &mut PtxKernel, f: &Frag, boff: Reg, bk: u32, acc: &[Reg]) {
    let ra = k.add(U, f.sa_rd, boff);
    let rb = k.add(U, f.sb_rd, boff);
    for kk in 0..bk as i64 {
        let row = kk * BM as i64 * 4;
        let mut a = k.ld_v(Space::Shared, F, 4, Addr::at(ra, row));
        a.extend(k.ld_v(Space::Shared, F, 4, Addr::at(ra, row + 64 * 4)));
        let mut b = k.ld_v(Space::Shared, F, 4, Addr::at(rb, row));
        b.extend(k.ld_v(Space::Shared, F, 4, Addr::at(rb, row + 64 * 4)));
        for i in 0..8 {
            for j in 0..8 {
                let c = acc[i * 8 + j];
                k.fma_to(c, a[i], b[j], c);
            }
        }
    }
}

pub(super) fn build(k: &mut PtxKernel, bk: u32, split: u32) {
    let buf_floats = bk * BM;
    let buf_bytes = buf_floats * 4;
    let Prologue { sa, sb, a, b, c, tid, bx, by, kd, n } = prologue(k, "gemm", F, buf_floats);
    let ty = k.bin(BinOp::Shr, U, tid, 4u32);
    let tx = k.bin(BinOp::And, PtxType::B32, tid, 15u32);
    let sa0 = k.mov(U, Operand::Symbol(sa));
    let sb0 = k.mov(U, Operand::Symbol(sb));

    // Global → register loads, BK/8 passes of one float4 per thread for each of A and B. A: 128
    // rows of BK floats, two threads per row; pass p takes float4 (tid & 1) + 2p of the row, so
    // the passes are 32 bytes apart (an immediate offset, whatever k is).
    let a_passes = bk / 8;
    let arow = k.bin(BinOp::Shr, U, tid, 1u32);
    let amod = k.bin(BinOp::And, PtxType::B32, tid, 1u32);
    let acol = k.mul(U, amod, 4u32);
    let grow = k.fma(U, by, BM, arow);
    let ai = k.fma(U, grow, kd, acol);
    let ga = k.elem_addr(a, ai, 4);
    // block z of a split takes k in [z*part, (z+1)*part): A moves right, B moves down
    let zpart = if split > 1 {
        let part = k.bin(BinOp::Shr, U, kd, split.trailing_zeros());
        let z = k.special(Special::CtaidZ);
        let zp = k.mul(U, z, part);
        let za = k.bin(BinOp::MulWide, U, zp, 4u32);
        k.bin_to(BinOp::Add, ga, ga, za);
        Some(zp)
    } else {
        None
    };
    // B: BK rows of 128 floats (32 float4s), 32 / passes threads per row; pass p takes float4
    // (tid % tpr) + p·tpr of the row (16·tpr bytes apart: an immediate offset, whatever n is).
    let b_passes = bk / 8;
    let tpr = 32 / b_passes;
    let brow = k.bin(BinOp::Shr, U, tid, tpr.trailing_zeros());
    let bmod = k.bin(BinOp::And, PtxType::B32, tid, tpr - 1);
    let bcol = k.mul(U, bmod, 4u32);
    let gcol = k.fma(U, bx, BN, bcol);
    let bi = k.fma(U, brow, n, gcol);
    let gb = k.elem_addr(b, bi, 4);
    if let Some(zp) = zpart {
        let zrow = k.mul(U, zp, n);
        let zoff = k.bin(BinOp::MulWide, U, zrow, 4u32);
        k.bin_to(BinOp::Add, gb, gb, zoff);
    }
    // Register → shared stores: A transposed (As[acol+i][arow]), B as is (Bs[brow][bcol..]).
    let sa_idx = k.fma(U, acol, BM, arow);
    let sa_st = k.fma(U, sa_idx, 4u32, sa0);
    let sb_idx = k.fma(U, brow, BN, bcol);
    let sb_st = k.fma(U, sb_idx, 4u32, sb0);
    // Fragment reads.
    let ty16 = k.mul(U, ty, 16u32);
    let tx16 = k.mul(U, tx, 16u32);
    let frag = Frag { sa_rd: k.add(U, sa0, ty16), sb_rd: k.add(U, sb0, tx16) };

    let ra: Vec<Vec<Reg>> = (0..a_passes).map(|_| (0..4).map(|_| k.reg(F)).collect()).collect();
    let rb: Vec<Vec<Reg>> = (0..b_passes).map(|_| (0..4).map(|_| k.reg(F)).collect()).collect();
    // B moves down BK rows per slice: a run-time step (n is a parameter), one u64 register
    let b_step = k.bin(BinOp::MulWide, U, n, bk * 4);
    let load = |k: &mut PtxKernel| {
        let a_at: Vec<Addr> = (0..a_passes as i64).map(|p| Addr::at(ga, 32 * p)).collect();
        let b_at: Vec<Addr> = (0..b_passes as i64).map(|p| Addr::at(gb, 16 * tpr as i64 * p)).collect();
        load_passes(k, &ra, &a_at);
        load_passes(k, &rb, &b_at);
        k.bin_to(BinOp::Add, ga, ga, Operand::Int(bk as i64 * 4));
        k.bin_to(BinOp::Add, gb, gb, b_step);
    };
    let store = |k: &mut PtxKernel, off: Reg| {
        let pa = k.add(U, sa_st, off);
        for (p, r) in ra.iter().enumerate() {
            for (i, &v) in r.iter().enumerate() {
                let o = ((8 * p as u32 + i as u32) * BM * 4) as i64;
                k.st(Space::Shared, F, Addr::at(pa, o), v);
            }
        }
        let pb = k.add(U, sb_st, off);
        for (p, r) in rb.iter().enumerate() {
            k.st_v(Space::Shared, F, Addr::at(pb, p as i64 * 16 * tpr as i64), r);
        }
    };

    let acc: Vec<Reg> = (0..64).map(|_| k.mov(F, 0.0f32)).collect();
    let boff = k.mov(U, 0u32);
    load(k);
    store(k, boff);
    k.bar_sync();
    let (top, last) = (k.new_label("slice"), k.new_label("last"));
    let cnt = slice_count(k, kd, bk * split, &last);
    k.label(&top);
    load(k);
    compute(k, &frag, boff, bk, &acc);
    let woff = k.bin(BinOp::Xor, PtxType::B32, boff, buf_bytes);
    store(k, woff);
    k.bar_sync();
    k.mov_to(boff, woff);
    k.bin_to(BinOp::Sub, cnt, cnt, 1u32);
    let more = k.setp(Cmp::Ne, U, cnt, 0u32);
    k.bra_if(more, false, &top);
    k.label(&last);
    compute(k, &frag, boff, bk, &acc);

    // C rows by*128 + {ty*4+i, 64+ty*4+i}, columns bx*128 + {tx*4, 64+tx*4} (+0..4).
    let r0 = k.mul(U, ty, 4u32);
    let crow = k.fma(U, by, BM, r0);
    let c0 = k.mul(U, tx, 4u32);
    let ccol = k.fma(U, bx, BN, c0);
    let ci = k.fma(U, crow, n, ccol);
    let gc = k.elem_addr(c, ci, 4);
    let row_bytes = k.bin(BinOp::MulWide, U, n, 4u32);
    let half_bytes = k.bin(BinOp::MulWide, U, n, 64 * 4);
    let gc64 = k.add(U64, gc, half_bytes);
    for i in 0..8u32 {
        // row i (i < 4) or 64 + i - 4: one pointer per half, stepped one row at a time
        let pr = if i < 4 { gc } else { gc64 };
        if i % 4 != 0 {
            k.bin_to(BinOp::Add, pr, pr, row_bytes);
        }
        let base = (i * 8) as usize;
        if split > 1 {
            for j in 0..8 {
                let off = if j < 4 { j as i64 * 4 } else { 64 * 4 + (j as i64 - 4) * 4 };
                k.red(Space::Global, AtomOp::Add, F, Addr::at(pr, off), acc[base + j]);
            }
        } else {
            k.st_v(Space::Global, F, Addr::reg(pr), &acc[base..base + 4]);
            k.st_v(Space::Global, F, Addr::at(pr, 64 * 4), &acc[base + 4..base + 8]);
        }
    }
    k.ret();
}
