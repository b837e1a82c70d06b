//! Token embedding on the device: row `tokens[r]` of a table in a GGUF block format,
//! dequantized into row `r` of `out`. The ids are read from device memory, so a captured
//! decoding graph replays for any token. One block per row; a thread per value.

use super::common::*;
use super::kquant;
use super::qmatvec::QFormat;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

/// Parameters: `table` (rows × cols/block_values blocks), `tokens` (m u32 ids, each below the
/// table's rows: the caller checks), `out` (m × cols f32) (u64); `cols` (u32, a multiple of the
/// format's block values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EmbedKernel {
    fmt: QFormat,
}

impl EmbedKernel {
    pub const THREADS: u32 = 128;

    pub fn new(fmt: QFormat) -> EmbedKernel {
        EmbedKernel { fmt }
    }

    pub fn launch(&self, m: u32) -> LaunchConfig {
        LaunchConfig { grid: (m.max(1), 1, 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

/// The byte at `a + off` (`off` a u32 register; `a` 2-byte aligned blocks), as a u32.
pub(crate) fn byte_at(k: &mut PtxKernel, a: Reg, off: Reg) -> Reg {
    let even = k.bin(BinOp::And, PtxType::B32, off, !1u32);
    let p = k.mad_wide(U, even, 1u32, a);
    let h = k.ld(Space::Global, PtxType::U16, Addr::reg(p));
    let h = k.cvt(U, PtxType::U16, h);
    let odd = k.bin(BinOp::And, PtxType::B32, off, 1u32);
    let sh = k.bin(BinOp::Shl, PtxType::B32, odd, 3u32);
    let v = k.bin(BinOp::Shr, U, h, sh);
    k.bin(BinOp::And, PtxType::B32, v, 0xffu32)
}

fn f16_at(k: &mut PtxKernel, a: Reg, off: i64) -> Reg {
    let h = k.ld(Space::Global, PtxType::B16, Addr::at(a, off));
    k.cvt(F, PtxType::F16, h)
}

/// Value `j` (a u32 register, below the format's block values) of the block of `fmt` at `a`,
/// as f32.
pub(crate) fn value_at(k: &mut PtxKernel, fmt: QFormat, a: Reg, j: Reg) -> Reg {
    match fmt {
        QFormat::Q2_K | QFormat::Q3_K | QFormat::Q4_K | QFormat::Q5_K | QFormat::Q6_K => kquant::value_at(k, fmt, a, j),
        QFormat::F16 => {
            let p = k.elem_addr(a, j, 2);
            let h = k.ld(Space::Global, PtxType::B16, Addr::reg(p));
            k.cvt(F, PtxType::F16, h)
        }
        QFormat::BF16 => {
            let p = k.elem_addr(a, j, 2);
            super::qmatvec::ld_bf16(k, p, 0)
        }
        QFormat::F32 => {
            let p = k.elem_addr(a, j, 4);
            k.ld(Space::Global, F, Addr::reg(p))
        }
        QFormat::Q8_0 => {
            let d = f16_at(k, a, 0);
            let off = k.add(U, j, 2u32);
            let q = byte_at(k, a, off);
            // sign-extend the byte
            let q = k.bin(BinOp::Shl, PtxType::B32, q, 24u32);
            let q = k.bin(BinOp::Shr, PtxType::S32, q, 24u32);
            let qf = k.cvt(F, PtxType::S32, q);
            k.mul(F, d, qf)
        }
        QFormat::Q4_0 | QFormat::Q4_1 | QFormat::Q5_0 | QFormat::Q5_1 => {
            let d = f16_at(k, a, 0);
            let (m, qh_off, qs_off) = match fmt {
                QFormat::Q4_0 => (k.mul(F, d, -8.0f32), None, 2u32),
                QFormat::Q4_1 => (f16_at(k, a, 2), None, 4),
                QFormat::Q5_0 => (k.mul(F, d, -16.0f32), Some(2), 6),
                _ => (f16_at(k, a, 2), Some(4), 8),
            };
            // value j: the low nibble of byte j % 16 for j < 16, else its high nibble
            let jj = k.bin(BinOp::And, PtxType::B32, j, 15u32);
            let off = k.add(U, jj, qs_off);
            let byte = byte_at(k, a, off);
            let hi = k.bin(BinOp::Shr, U, j, 4u32);
            let sh = k.bin(BinOp::Shl, PtxType::B32, hi, 2u32);
            let nib = k.bin(BinOp::Shr, U, byte, sh);
            let mut q = k.bin(BinOp::And, PtxType::B32, nib, 15u32);
            if let Some(o) = qh_off {
                let lo = k.ld(Space::Global, PtxType::U16, Addr::at(a, o));
                let hi16 = k.ld(Space::Global, PtxType::U16, Addr::at(a, o + 2));
                let lo = k.cvt(U, PtxType::U16, lo);
                let hi16 = k.cvt(U, PtxType::U16, hi16);
                let hi16 = k.bin(BinOp::Shl, PtxType::B32, hi16, 16u32);
                let qh = k.bin(BinOp::Or, PtxType::B32, lo, hi16);
                let bit = k.bin(BinOp::Shr, U, qh, j);
                let bit = k.bin(BinOp::And, PtxType::B32, bit, 1u32);
                let bit = k.bin(BinOp::Shl, PtxType::B32, bit, 4u32);
                q = k.bin(BinOp::Or, PtxType::B32, q, bit);
            }
            let qf = k.cvt(F, U, q);
            k.fma(F, d, qf, m)
        }
    }
}

impl Kernel for EmbedKernel {
    fn name(&self) -> String {
        format!("embed_{}", self.fmt.tag())
    }

    fn build(&self, sm: u32) -> PtxKernel {
        let (fmt, bs) = (self.fmt, self.fmt.block_bytes());
        let mut k = PtxKernel::new(&self.name());
        for p in ["table", "tokens", "out"] {
            k.add_param(p, PtxType::U64);
        }
        k.add_param("cols", U);
        k.launch_bounds((Self::THREADS, 1, 1), None);
        // Hopper: may start while the previous kernel finishes; waits for its writes here.
        k.grid_dep_sync(sm);
        let table = k.ld_param_ptr("table");
        let tokens = k.ld_param_ptr("tokens");
        let out = k.ld_param_ptr("out");
        let cols = k.ld_param("cols");
        let row = k.special(Special::CtaidX);
        let tid = k.special(Special::TidX);
        let ta = k.elem_addr(tokens, row, 4);
        let tok = k.ld(Space::Global, U, Addr::reg(ta));
        let nb = k.bin(BinOp::Shr, U, cols, fmt.block_shift());
        let row_bytes = k.mul(U, nb, bs);
        let src = k.mad_wide(U, tok, row_bytes, table);
        let dst_row = k.mul(U, row, cols);
        let c = k.mov(U, tid);
        let (top, end) = (k.new_label("vals"), k.new_label("vals_end"));
        k.label(&top);
        let past = k.setp(Cmp::Ge, U, c, cols);
        k.bra_if(past, false, &end);
        let b = k.bin(BinOp::Shr, U, c, fmt.block_shift());
        let j = k.bin(BinOp::And, PtxType::B32, c, fmt.block_values() - 1);
        let a = k.mad_wide(U, b, bs, src);
        let v = value_at(&mut k, fmt, a, j);
        let oi = k.add(U, dst_row, c);
        let oa = k.elem_addr(out, oi, 4);
        k.st(Space::Global, F, Addr::reg(oa), v);
        k.bin_to(BinOp::Add, c, c, Self::THREADS);
        k.bra(&top);
        k.label(&end);
        k.ret();
        k
    }
}

/// The whole matrix dequantized and transposed, for a prompt's products through the GEMM:
/// `out[c·ld + r] = W[r][c]` (`W`: rows × cols values of the format). Parameters: `w`, `out`
/// (u64); `rows`, `cols`, `ld` (u32; `ld ≥ rows`, `cols·ld` below 2³²). Grid: `cols` blocks
/// in x by `rows / 128` in y; consecutive threads take consecutive rows (the writes coalesce).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DequantTKernel {
    fmt: QFormat,
}

impl DequantTKernel {
    pub const THREADS: u32 = 128;

    pub fn new(fmt: QFormat) -> DequantTKernel {
        DequantTKernel { fmt }
    }

    pub fn launch(&self, rows: u32, cols: u32) -> LaunchConfig {
        LaunchConfig { grid: (cols.max(1), rows.div_ceil(Self::THREADS).max(1), 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for DequantTKernel {
    fn name(&self) -> String {
        format!("dequant_t_{}", self.fmt.tag())
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let (fmt, bs) = (self.fmt, self.fmt.block_bytes());
        let mut k = PtxKernel::new(&self.name());
        for p in ["w", "out"] {
            k.add_param(p, PtxType::U64);
        }
        for p in ["rows", "cols", "ld"] {
            k.add_param(p, U);
        }
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let w = k.ld_param_ptr("w");
        let out = k.ld_param_ptr("out");
        let rows = k.ld_param("rows");
        let cols = k.ld_param("cols");
        let ld = k.ld_param("ld");
        let c = k.special(Special::CtaidX);
        let by = k.special(Special::CtaidY);
        let tid = k.special(Special::TidX);
        let r = k.fma(U, by, Self::THREADS, tid);
        let done = k.new_label("done");
        let past = k.setp(Cmp::Ge, U, r, rows);
        k.bra_if(past, false, &done);
        let nb = k.bin(BinOp::Shr, U, cols, fmt.block_shift());
        let row_bytes = k.mul(U, nb, bs);
        let src = k.mad_wide(U, r, row_bytes, w);
        let b = k.bin(BinOp::Shr, U, c, fmt.block_shift());
        let j = k.bin(BinOp::And, PtxType::B32, c, fmt.block_values() - 1);
        let a = k.mad_wide(U, b, bs, src);
        let v = value_at(&mut k, fmt, a, j);
        let oi = k.fma(U, c, ld, r);
        let oa = k.elem_addr(out, oi, 4);
        k.st(Space::Global, F, Addr::reg(oa), v);
        k.label(&done);
        k.ret();
        k
    }
}

/// The whole matrix dequantized to f16 in its own layout, for a prompt's products on the
/// tensor cores ([`super::HalfGemmKernel`]): `out[r·cols + c] = f16(W[r][c])`. Parameters: `w`,
/// `out` (u64); `rows`, `cols` (u32; `rows·cols` below 2³²). A thread per pair of values:
/// grid `rows` blocks in x (a grid's y stops at 65,535: Llama 3's output head has 128,256
/// rows, Gemma 3's 262,144) by `cols / 256` (rounded up) in y.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DequantF16Kernel {
    fmt: QFormat,
}

impl DequantF16Kernel {
    pub const THREADS: u32 = 128;

    pub fn new(fmt: QFormat) -> DequantF16Kernel {
        DequantF16Kernel { fmt }
    }

    pub fn launch(&self, rows: u32, cols: u32) -> LaunchConfig {
        LaunchConfig { grid: (rows.max(1), cols.div_ceil(2 * Self::THREADS).max(1), 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for DequantF16Kernel {
    fn name(&self) -> String {
        format!("dequant_f16_{}", self.fmt.tag())
    }

    fn build(&self, sm: u32) -> PtxKernel {
        let (fmt, bs) = (self.fmt, self.fmt.block_bytes());
        let mut k = PtxKernel::new(&self.name());
        for p in ["w", "out"] {
            k.add_param(p, PtxType::U64);
        }
        for p in ["rows", "cols"] {
            k.add_param(p, U);
        }
        k.launch_bounds((Self::THREADS, 1, 1), None);
        // the weights are never written by a kernel: nothing to wait for before reading them,
        // but `out` may still be read by the previous product
        k.grid_dep_sync(sm);
        let w = k.ld_param_ptr("w");
        let out = k.ld_param_ptr("out");
        let cols = k.ld_param("cols");
        let r = k.special(Special::CtaidX);
        let by = k.special(Special::CtaidY);
        let tid = k.special(Special::TidX);
        let pair = k.fma(U, by, Self::THREADS, tid);
        let c = k.mul(U, pair, 2u32);
        let done = k.new_label("done");
        let past = k.setp(Cmp::Ge, U, c, cols);
        k.bra_if(past, false, &done);
        let nb = k.bin(BinOp::Shr, U, cols, fmt.block_shift());
        let row_bytes = k.mul(U, nb, bs);
        let src = k.mad_wide(U, r, row_bytes, w);
        let b = k.bin(BinOp::Shr, U, c, fmt.block_shift());
        let j = k.bin(BinOp::And, PtxType::B32, c, fmt.block_values() - 1);
        let a = k.mad_wide(U, b, bs, src);
        let v0 = value_at(&mut k, fmt, a, j);
        let j1 = k.add(U, j, 1u32);
        let v1 = value_at(&mut k, fmt, a, j1);
        let h = k.cvt_f16x2(v1, v0);
        let oi = k.fma(U, r, cols, c);
        let oa = k.elem_addr(out, oi, 2);
        k.st(Space::Global, PtxType::B32, Addr::reg(oa), h);
        k.label(&done);
        k.ret();
        k
    }
}
