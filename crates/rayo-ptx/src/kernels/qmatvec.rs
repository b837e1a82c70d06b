//! Quantized matrix × activation rows for decoding: `y[r][j] = Σ_c W[j][c]·x[r][c]` with the
//! weights in a GGUF block format, read in place (never dequantized to memory), the
//! activations f32. One warp per weight row, four rows per block of 128 threads; each lane
//! takes every 32nd block of 32 values of its row, then the warp sums. `rows` and `cols` are
//! parameters and `m` (activation rows) is the grid's y: one kernel per format.

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

/// A weight format the kernel reads: 32 values per block, as GGUF stores them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QFormat {
    F32,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
}

impl QFormat {
    /// Every format, for tests and the ptxas sweep.
    pub const ALL: [QFormat; 6] = [QFormat::F32, QFormat::Q4_0, QFormat::Q4_1, QFormat::Q5_0, QFormat::Q5_1, QFormat::Q8_0];

    /// Bytes of one block of 32 values.
    pub fn block_bytes(self) -> u32 {
        match self {
            QFormat::F32 => 128,
            QFormat::Q4_0 => 18,
            QFormat::Q4_1 => 20,
            QFormat::Q5_0 => 22,
            QFormat::Q5_1 => 24,
            QFormat::Q8_0 => 34,
        }
    }

    fn tag(self) -> &'static str {
        match self {
            QFormat::F32 => "f32",
            QFormat::Q4_0 => "q4_0",
            QFormat::Q4_1 => "q4_1",
            QFormat::Q5_0 => "q5_0",
            QFormat::Q5_1 => "q5_1",
            QFormat::Q8_0 => "q8_0",
        }
    }
}

/// Parameters: `w` (rows × cols/32 blocks), `x` (m × cols f32), `y` (m × rows f32) (all u64),
/// `rows`, `cols` (u32; `cols` a multiple of 32, `cols·4` and `rows·4` below 2³²).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QMatvecKernel {
    fmt: QFormat,
}

impl QMatvecKernel {
    pub const THREADS: u32 = 128;
    /// Weight rows per block (one per warp).
    pub const ROWS_PER_BLOCK: u32 = Self::THREADS / 32;

    pub fn new(fmt: QFormat) -> QMatvecKernel {
        QMatvecKernel { fmt }
    }

    pub fn format(&self) -> QFormat {
        self.fmt
    }

    pub fn launch(&self, rows: u32, m: u32) -> LaunchConfig {
        LaunchConfig { grid: (rows.div_ceil(Self::ROWS_PER_BLOCK).max(1), m.max(1), 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

/// The 16-bit little-endian word at `a + off`, as a u32.
fn ld_u16(k: &mut PtxKernel, a: Reg, off: i64) -> Reg {
    let h = k.ld(Space::Global, PtxType::U16, Addr::at(a, off));
    k.cvt(U, PtxType::U16, h)
}

/// The IEEE half at `a + off`, as f32.
fn ld_f16(k: &mut PtxKernel, a: Reg, off: i64) -> Reg {
    let h = k.ld(Space::Global, PtxType::B16, Addr::at(a, off));
    k.cvt(F, PtxType::F16, h)
}

/// `Σ q[j]·x[j]` with the integer values `q` (u32 or s32 registers of type `qty`).
fn dot(k: &mut PtxKernel, qty: PtxType, q: &[Reg], x: &[Reg]) -> Reg {
    let mut s = k.mov(F, 0.0f32);
    for (&q, &x) in q.iter().zip(x) {
        let qf = k.cvt(F, qty, q);
        s = k.fma(F, qf, x, s);
    }
    s
}

/// The 32 nibble-plus-high-bit values of a Q4/Q5 block: value j < 16 from the low nibble of
/// byte j of `qs`, value 16 + j from its high nibble; with `qh`, bit j of it is the fifth bit
/// of value j.
fn nibbles(k: &mut PtxKernel, a: Reg, qs_off: i64, qh: Option<Reg>) -> Vec<Reg> {
    let halves: Vec<Reg> = (0..8).map(|t| ld_u16(k, a, qs_off + 2 * t)).collect();
    let mut q = vec![None; 32];
    for j in 0..16u32 {
        let h = halves[(j / 2) as usize];
        let sh = 8 * (j % 2);
        for (v, nib) in [(j, sh), (j + 16, sh + 4)] {
            let t = k.bin(BinOp::Shr, U, h, nib);
            let mut val = k.bin(BinOp::And, PtxType::B32, t, 0xFu32);
            if let Some(qh) = qh {
                // bit v of qh, moved to bit 4
                let b = if v >= 4 { k.bin(BinOp::Shr, U, qh, v - 4) } else { k.bin(BinOp::Shl, PtxType::B32, qh, 4 - v) };
                let b = k.bin(BinOp::And, PtxType::B32, b, 0x10u32);
                val = k.bin(BinOp::Or, PtxType::B32, val, b);
            }
            q[v as usize] = Some(val);
        }
    }
    q.into_iter().map(|r| r.expect("all 32 values set")).collect()
}

impl Kernel for QMatvecKernel {
    fn name(&self) -> String {
        format!("qmatvec_{}", self.fmt.tag())
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let fmt = self.fmt;
        let bs = fmt.block_bytes();
        let mut k = PtxKernel::new(&self.name());
        for p in ["w", "x", "y"] {
            k.add_param(p, PtxType::U64);
        }
        k.add_param("rows", U);
        k.add_param("cols", U);
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let w = k.ld_param_ptr("w");
        let x = k.ld_param_ptr("x");
        let y = k.ld_param_ptr("y");
        let rows = k.ld_param("rows");
        let cols = k.ld_param("cols");
        let tid = k.special(Special::TidX);
        let lane = k.bin(BinOp::And, PtxType::B32, tid, 31u32);
        let warp = k.bin(BinOp::Shr, U, tid, 5u32);
        let bx = k.special(Special::CtaidX);
        let by = k.special(Special::CtaidY);
        let row = k.fma(U, bx, Self::ROWS_PER_BLOCK, warp);
        let done = k.new_label("done");
        // the row is the same for the whole warp: it leaves together (the shuffles stay full)
        let past = k.setp(Cmp::Ge, U, row, rows);
        k.bra_if(past, false, &done);
        let nb = k.bin(BinOp::Shr, U, cols, 5u32);
        let row_bytes = k.mul(U, nb, bs);
        let wrow = k.mad_wide(U, row, row_bytes, w);
        let cols4 = k.mul(U, cols, 4u32);
        let xrow = k.mad_wide(U, by, cols4, x);
        let acc = k.mov(F, 0.0f32);
        let b = k.mov(U, lane);
        let (top, end) = (k.new_label("blocks"), k.new_label("blocks_end"));
        k.label(&top);
        let out = k.setp(Cmp::Ge, U, b, nb);
        k.bra_if(out, false, &end);
        let a = k.mad_wide(U, b, bs, wrow);
        let xa = k.mad_wide(U, b, 128u32, xrow);
        let xs: Vec<Reg> = (0..8).flat_map(|i| k.ld_v(Space::Global, F, 4, Addr::at(xa, 16 * i))).collect();
        let part = match fmt {
            QFormat::F32 => {
                let ws: Vec<Reg> = (0..8).flat_map(|i| k.ld_v(Space::Global, F, 4, Addr::at(a, 16 * i))).collect();
                let mut s = k.mov(F, 0.0f32);
                for (&wv, &xv) in ws.iter().zip(&xs) {
                    s = k.fma(F, wv, xv, s);
                }
                s
            }
            QFormat::Q8_0 => {
                let d = ld_f16(&mut k, a, 0);
                let mut q = Vec::with_capacity(32);
                for t in 0..16 {
                    let h = ld_u16(&mut k, a, 2 + 2 * t);
                    // the two signed bytes of the half: shift each to the top, then arithmetic right
                    for up in [24u32, 16] {
                        let s = k.bin(BinOp::Shl, PtxType::B32, h, up);
                        q.push(k.bin(BinOp::Shr, PtxType::S32, s, 24u32));
                    }
                }
                let s = dot(&mut k, PtxType::S32, &q, &xs);
                k.mul(F, d, s)
            }
            QFormat::Q4_0 | QFormat::Q4_1 | QFormat::Q5_0 | QFormat::Q5_1 => {
                let d = ld_f16(&mut k, a, 0);
                // value = d·q + m; Q4_0/Q5_0 take their offset as m = −8d / −16d
                let (m, qh_off, qs_off) = match fmt {
                    QFormat::Q4_0 => (k.mul(F, d, -8.0f32), None, 2),
                    QFormat::Q4_1 => (ld_f16(&mut k, a, 2), None, 4),
                    QFormat::Q5_0 => (k.mul(F, d, -16.0f32), Some(2), 6),
                    _ => (ld_f16(&mut k, a, 2), Some(4), 8),
                };
                let qh = qh_off.map(|o| {
                    let lo = ld_u16(&mut k, a, o);
                    let hi = ld_u16(&mut k, a, o + 2);
                    let hi = k.bin(BinOp::Shl, PtxType::B32, hi, 16u32);
                    k.bin(BinOp::Or, PtxType::B32, lo, hi)
                });
                let q = nibbles(&mut k, a, qs_off, qh);
                let s = dot(&mut k, U, &q, &xs);
                let mut sx = xs[0];
                for &v in &xs[1..] {
                    sx = k.add(F, sx, v);
                }
                let ms = k.mul(F, m, sx);
                k.fma(F, d, s, ms)
            }
        };
        k.bin_to(BinOp::Add, acc, acc, part);
        k.bin_to(BinOp::Add, b, b, 32u32);
        k.bra(&top);
        k.label(&end);
        let sum = warp_reduce(&mut k, ReduceCombine::Sum, acc);
        let rows4 = k.mul(U, rows, 4u32);
        let yrow = k.mad_wide(U, by, rows4, y);
        let ya = k.elem_addr(yrow, row, 4);
        let is0 = k.setp(Cmp::Eq, U, lane, 0u32);
        k.when(is0, false, |k| k.st(Space::Global, F, Addr::reg(ya), sum));
        k.label(&done);
        k.ret();
        k
    }
}
