//! A loop over one row's elements, shared by softmax and the norms: one block per row, each
//! thread takes 16-byte chunks (4 floats) when the row length allows, single floats otherwise.
//! The row length is a run-time u32 (a kernel parameter); only the chunk width is built in.

use super::common::*;
use crate::ptx::*;

/// Combines two per-thread tuples into a new one.
pub(crate) type Merge = dyn Fn(&mut PtxKernel, &[Reg], &[Reg]) -> Vec<Reg>;

/// Where one row lives and how it is walked.
pub(crate) struct Row {
    /// The row length (u32 register).
    pub cols: Reg,
    /// Floats per chunk: 4 (the launch guarantees `cols % 4 == 0`) or 1.
    pub width: u32,
    pub threads: u32,
    /// Row index (`ctaid.x`).
    pub row: Reg,
    pub tid: Reg,
}

impl Row {
    pub fn new(k: &mut PtxKernel, cols: Reg, width: u32, threads: u32) -> Row {
        let row = k.special(Special::CtaidX);
        let tid = k.special(Special::TidX);
        Row { cols, width, threads, row, tid }
    }

    /// Base address of this row in a row-major `[rows, cols]` f32 buffer at `base`.
    pub fn base(&self, k: &mut PtxKernel, base: Reg) -> Reg {
        let row_bytes = k.mul(U, self.cols, 4u32);
        k.mad_wide(U, self.row, row_bytes, base)
    }

    /// Emits `for (j = tid*w; j < cols; j += threads*w) body(k, j, addr_offset_bytes)`, where the
    /// body gets the element index `j` (u32) and its byte offset (u64).
    pub fn for_each(&self, k: &mut PtxKernel, mut body: impl FnMut(&mut PtxKernel, Reg, Reg)) {
        let j = k.mul(U, self.tid, self.width);
        let (top, done) = (k.new_label("row"), k.new_label("row_end"));
        k.label(&top);
        let out = k.setp(Cmp::Ge, U, j, self.cols);
        k.bra_if(out, false, &done);
        let off = k.bin(BinOp::MulWide, U, j, 4u32);
        body(k, j, off);
        k.bin_to(BinOp::Add, j, j, self.threads * self.width);
        k.bra(&top);
        k.label(&done);
    }

    /// Loads `width` floats at `base + off`.
    pub fn load(&self, k: &mut PtxKernel, base: Reg, off: Reg) -> Vec<Reg> {
        let a = k.add(PtxType::U64, base, off);
        if self.width == 4 {
            k.ld_v(Space::Global, F, 4, Addr::reg(a))
        } else {
            vec![k.ld(Space::Global, F, Addr::reg(a))]
        }
    }

    pub fn store(&self, k: &mut PtxKernel, base: Reg, off: Reg, v: &[Reg]) {
        let a = k.add(PtxType::U64, base, off);
        if v.len() == 4 {
            k.st_v(Space::Global, F, Addr::reg(a), v);
        } else {
            k.st(Space::Global, F, Addr::reg(a), v[0]);
        }
    }

    /// Combines per-thread tuples across the block: butterfly shuffles within each warp, then
    /// every thread folds the per-warp results from shared memory (arrays `smem[i]`, one per
    /// tuple field, each ≥ threads/32 floats). `merge` combines two tuples into a new one.
    pub fn block_merge(&self, k: &mut PtxKernel, vals: Vec<Reg>, smem: &[Name], merge: &Merge) -> Vec<Reg> {
        let mut v = vals;
        for off in [16u32, 8, 4, 2, 1] {
            let o: Vec<Reg> = v.iter().map(|&r| k.shfl(ShflMode::Bfly, r, off, 0x1f)).collect();
            v = merge(k, &v, &o);
        }
        let warps = self.threads / 32;
        if warps == 1 {
            return v;
        }
        let lane = k.bin(BinOp::And, PtxType::B32, self.tid, 31u32);
        let warp = k.bin(BinOp::Shr, U, self.tid, 5u32);
        let is0 = k.setp(Cmp::Eq, U, lane, 0u32);
        for (f, name) in smem.iter().enumerate() {
            let base = k.mov(U, Operand::Symbol(*name));
            let a = k.fma(U, warp, 4u32, base);
            k.when(is0, false, |k| k.st(Space::Shared, F, Addr::reg(a), v[f]));
        }
        k.bar_sync();
        let mut acc: Vec<Reg> = smem.iter().map(|s| k.ld(Space::Shared, F, Addr::sym(*s, 0))).collect();
        for w in 1..warps {
            let o: Vec<Reg> = smem.iter().map(|s| k.ld(Space::Shared, F, Addr::sym(*s, 4 * w as i64))).collect();
            acc = merge(k, &acc, &o);
        }
        acc
    }
}
