//! The naive and shared-memory-tiled GEMMs: any shape (the `m k n` parameters), bounds-checked.

use crate::kernels::common::*;
use crate::ptx::*;

const P: PtxType = PtxType::Pred;

pub(super) fn naive(k: &mut PtxKernel) {
    k.launch_bounds((16, 16, 1), None);
    let a = k.ld_param_ptr("a");
    let b = k.ld_param_ptr("b");
    let c = k.ld_param_ptr("c");
    let m = k.ld_param("m");
    let kk = k.ld_param("k");
    let n = k.ld_param("n");
    let (tx, ty) = (k.special(Special::TidX), k.special(Special::TidY));
    let (bx, by) = (k.special(Special::CtaidX), k.special(Special::CtaidY));
    let col = k.fma(U, bx, 16u32, tx);
    let row = k.fma(U, by, 16u32, ty);
    let end = k.new_label("end");
    let p1 = k.setp(Cmp::Ge, U, row, m);
    let p2 = k.setp(Cmp::Ge, U, col, n);
    let out = k.bin(BinOp::Or, P, p1, p2);
    k.bra_if(out, false, &end);
    let arow = k.mul(U, row, kk);
    let pa = k.elem_addr(a, arow, 4);
    let pb = k.elem_addr(b, col, 4);
    let acc = k.mov(F, 0.0f32);
    let brow = k.bin(BinOp::MulWide, U, n, 4u32);
    let cnt = k.mov(U, kk);
    let (top, done) = (k.new_label("k"), k.new_label("k_end"));
    let empty = k.setp(Cmp::Eq, U, cnt, 0u32);
    k.bra_if(empty, false, &done);
    k.label(&top);
    let va = k.ld(Space::Global, F, Addr::reg(pa));
    let vb = k.ld(Space::Global, F, Addr::reg(pb));
    k.fma_to(acc, va, vb, acc);
    k.bin_to(BinOp::Add, pa, pa, Operand::Int(4));
    k.bin_to(BinOp::Add, pb, pb, brow);
    k.bin_to(BinOp::Sub, cnt, cnt, 1u32);
    let more = k.setp(Cmp::Ne, U, cnt, 0u32);
    k.bra_if(more, false, &top);
    k.label(&done);
    let ci = k.fma(U, row, n, col);
    let pc = k.elem_addr(c, ci, 4);
    k.st(Space::Global, F, Addr::reg(pc), acc);
    k.label(&end);
    k.ret();
}

pub(super) fn tiled(k: &mut PtxKernel, t: u32) {
    k.launch_bounds((t, t, 1), None);
    let sa = k.shared_array("tile_a", F, t * t, 16);
    let sb = k.shared_array("tile_b", F, t * t, 16);
    let a = k.ld_param_ptr("a");
    let b = k.ld_param_ptr("b");
    let c = k.ld_param_ptr("c");
    let m = k.ld_param("m");
    let kk = k.ld_param("k");
    let n = k.ld_param("n");
    let (tx, ty) = (k.special(Special::TidX), k.special(Special::TidY));
    let (bx, by) = (k.special(Special::CtaidX), k.special(Special::CtaidY));
    let col = k.fma(U, bx, t, tx);
    let row = k.fma(U, by, t, ty);
    let row_ok = k.setp(Cmp::Lt, U, row, m);
    let col_ok = k.setp(Cmp::Lt, U, col, n);
    let sa0 = k.mov(U, Operand::Symbol(sa));
    let sb0 = k.mov(U, Operand::Symbol(sb));
    let own = k.fma(U, ty, t, tx);
    let own4 = k.mul(U, own, 4u32);
    let sa_st = k.add(U, sa0, own4);
    let sb_st = k.add(U, sb0, own4);
    let ty4t = k.mul(U, ty, t * 4);
    let sa_rd = k.add(U, sa0, ty4t);
    let tx4 = k.mul(U, tx, 4u32);
    let sb_rd = k.add(U, sb0, tx4);
    let acc = k.mov(F, 0.0f32);
    let kt = k.mov(U, 0u32);
    let arow = k.mul(U, row, kk);
    let top = k.new_label("tile");
    k.label(&top);
    // A[row, kt+tx] and B[kt+ty, col], zero outside the matrices
    let acol = k.add(U, kt, tx);
    let a_in = k.setp(Cmp::Lt, U, acol, kk);
    let a_ok = k.bin(BinOp::And, P, a_in, row_ok);
    let ai = k.add(U, arow, acol);
    let pa = k.elem_addr(a, ai, 4);
    let va = k.mov(F, 0.0f32);
    k.when(a_ok, false, |k| k.ld_to(Space::Global, va, Addr::reg(pa)));
    let brow = k.add(U, kt, ty);
    let b_in = k.setp(Cmp::Lt, U, brow, kk);
    let b_ok = k.bin(BinOp::And, P, b_in, col_ok);
    let bi = k.fma(U, brow, n, col);
    let pb = k.elem_addr(b, bi, 4);
    let vb = k.mov(F, 0.0f32);
    k.when(b_ok, false, |k| k.ld_to(Space::Global, vb, Addr::reg(pb)));
    k.st(Space::Shared, F, Addr::reg(sa_st), va);
    k.st(Space::Shared, F, Addr::reg(sb_st), vb);
    k.bar_sync();
    for i in 0..t as i64 {
        let x = k.ld(Space::Shared, F, Addr::at(sa_rd, i * 4));
        let y = k.ld(Space::Shared, F, Addr::at(sb_rd, i * t as i64 * 4));
        k.fma_to(acc, x, y, acc);
    }
    k.bar_sync();
    k.bin_to(BinOp::Add, kt, kt, t);
    let more = k.setp(Cmp::Lt, U, kt, kk);
    k.bra_if(more, false, &top);
    let ok = k.bin(BinOp::And, P, row_ok, col_ok);
    let ci = k.fma(U, row, n, col);
    let pc = k.elem_addr(c, ci, 4);
    k.when(ok, false, |k| k.st(Space::Global, F, Addr::reg(pc), acc));
    k.ret();
}
