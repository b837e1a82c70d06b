//! The register-blocked, vectorized, double-buffered SIMT GEMM (see the module docs in mod.rs).
//!
//! 256 threads, block tile 128×128, slice depth BK. Thread (ty, tx) = (tid/16, tid%16) owns rows
//! {ty*4+i, 64+ty*4+i} and columns {tx*4+j, 64+tx*4+j} (i, j < 4): its A and B fragments are two
//! 16-byte shared loads each, and a warp's B loads cover 64 consecutive floats (no bank
//! conflicts). Shared memory: As[2][BK][128] (A transposed), Bs[2][BK][128].

use crate::kernels::common::*;
use crate::ptx::*;
use super::prologue::{advance, load_passes, pass_pointers, prologue, slice_count, Prologue, THREADS};

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

    // Global → register loads. A: rows of BK floats, BK/4 float4s per row.
    let a_per_row = bk / 4;
    let a_rows_per_pass = THREADS / a_per_row;
    let a_passes = BM / a_rows_per_pass;
    let arow = k.bin(BinOp::Shr, U, tid, a_per_row.trailing_zeros());
    let amod = k.bin(BinOp::And, PtxType::B32, tid, a_per_row - 1);
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
    // B: rows of 128 floats, 32 float4s per row, 8 rows per pass.
    let b_passes = bk / 8;
    let brow = k.bin(BinOp::Shr, U, tid, 5u32);
    let bmod = k.bin(BinOp::And, PtxType::B32, tid, 31u32);
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
    // pass strides and the B step per slice, in bytes (u64: n and k are run-time values)
    let a_pass_bytes = k.bin(BinOp::MulWide, U, kd, a_rows_per_pass * 4);
    let b_pass_bytes = k.bin(BinOp::MulWide, U, n, 8 * 4);
    let b_step = k.bin(BinOp::MulWide, U, n, bk * 4);
    let pa = pass_pointers(k, ga, a_passes as usize, a_pass_bytes);
    let pb = pass_pointers(k, gb, b_passes as usize, b_pass_bytes);
    let load = |k: &mut PtxKernel| {
        load_passes(k, &ra, &pa);
        load_passes(k, &rb, &pb);
        advance(k, &pa, Operand::Int(bk as i64 * 4));
        advance(k, &pb, Operand::Reg(b_step));
    };
    let store = |k: &mut PtxKernel, off: Reg| {
        let pa = k.add(U, sa_st, off);
        for (p, r) in ra.iter().enumerate() {
            for (i, &v) in r.iter().enumerate() {
                let o = (i as u32 * BM * 4 + p as u32 * a_rows_per_pass * 4) as i64;
                k.st(Space::Shared, F, Addr::at(pa, o), v);
            }
        }
        let pb = k.add(U, sb_st, off);
        for (p, r) in rb.iter().enumerate() {
            k.st_v(Space::Shared, F, Addr::at(pb, p as i64 * 8 * BN as i64 * 4), r);
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
