//! Quantized matrix × activation rows for decoding: `y[r][j] = Σ_c W[j][c]·x[r][c]` with the
//! weights in a GGUF block format, read in place (never dequantized to memory), the
//! activations f32. A warp (or a block of 128 threads) per weight row; each thread takes every
//! 32nd (128th) quarter block (8 values) of its row, then the warp (block) sums. `rows` and `cols` are
//! parameters and `m` (activation rows) is the grid's y: one kernel per format.

use super::common::*;
use super::kquant;
use super::narrow::ActFormat;
use super::qmatvec_q8::{q8_acts, q8_dot, q8_groups, q8_reads};
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

/// A weight format the kernels read, as GGUF stores it: blocks of 32 values, or the k-quants'
/// super-blocks of 256. (Names as ggml spells them; each discriminant is the GGUF type id, the
/// key into [`rayo_formats::FORMATS`], whose entries with a PTX kernel are exactly
/// [`QFormat::ALL`].)
#[allow(non_camel_case_types)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum QFormat {
    F32 = 0,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    F16 = 1,
    BF16 = 30,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
}

/// Values per block of the kernels' view of a float format (they read 32 values at a time).
const MIN_BLOCK: u32 = 32;

impl QFormat {
    /// Every format, for tests and the ptxas sweep.
    pub const ALL: [QFormat; 13] = [
        QFormat::F32,
        QFormat::Q4_0,
        QFormat::Q4_1,
        QFormat::Q5_0,
        QFormat::Q5_1,
        QFormat::Q8_0,
        QFormat::F16,
        QFormat::BF16,
        QFormat::Q2_K,
        QFormat::Q3_K,
        QFormat::Q4_K,
        QFormat::Q5_K,
        QFormat::Q6_K,
    ];

    /// The kernel format of the GGUF type `id`: `None` where the table has no PTX kernel for
    /// it (or no such format), so the weights are dequantized to f32 at load.
    pub fn of_id(id: u32) -> Option<QFormat> {
        rayo_formats::Format::by_id(id).filter(|f| f.kernels.ptx).and_then(|f| QFormat::ALL.into_iter().find(|q| q.id() == f.id))
    }

    /// The GGUF type id.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// The format's entry of the table.
    pub const fn format(self) -> rayo_formats::Format {
        rayo_formats::Format::of_id(self.id())
    }

    /// Bytes of one block ([`QFormat::block_values`] values): the table's, or for the float
    /// formats 32 values' worth.
    pub const fn block_bytes(self) -> u32 {
        self.format().block_of_at_least(MIN_BLOCK).1
    }

    /// Values per block: 32, or 256 for the k-quants.
    pub const fn block_values(self) -> u32 {
        self.format().block_of_at_least(MIN_BLOCK).0
    }

    /// log2 of [`QFormat::block_values`].
    pub(crate) const fn block_shift(self) -> u32 {
        self.block_values().trailing_zeros()
    }

    /// ggml's name in lower case (`q4_k`), as kernel names spell it.
    pub(crate) fn tag(self) -> String {
        self.format().name.to_ascii_lowercase()
    }
}

// Every variant is a format of the table with a PTX kernel, with a power-of-two block.
const _: () = {
    let mut i = 0;
    while i < QFormat::ALL.len() {
        let f = rayo_formats::Format::of_id(QFormat::ALL[i].id());
        assert!(f.kernels.ptx && QFormat::ALL[i].block_values().is_power_of_two());
        i += 1;
    }
};

/// What a [`QMatvecKernel`] does with each row's sum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// `y[j] = s`.
    Store,
    /// `y[j] += s` (a residual connection).
    Add,
    /// Two matrices of equal rows, `gate` and `up`: `y[j] = silu(s_gate)·s_up`.
    Swiglu,
    /// As [`Epilogue::Swiglu`] with GELU's tanh form: `y[j] = gelu(s_gate)·s_up`, computed as
    /// `g / (1 + e^{−2a})` with `a = √(2/π)·g·(1 + 0.044715·g²)` (`(1 + tanh a)/2` is
    /// `sigmoid(2a)`).
    Geglu,
}

impl Epilogue {
    /// Whether it takes two matrices, `gate` and `up`, into one output.
    pub fn gated(self) -> bool {
        matches!(self, Epilogue::Swiglu | Epilogue::Geglu)
    }
}

/// Parameters, in order: `x` (m × cols f32), or with narrower activations
/// ([`QMatvecKernel::with_activations`]) `xn` (m × cols f16 or bytes) and for 8 bits `xd`
/// (m × cols/32 f32), as [`super::NarrowKernel`] writes them; with `norm`, `gamma` (cols f32) and `eps` (f32);
/// `cols` (u32, a multiple of the format's block values, `cols·4 < 2³²`); per matrix `w{i}`
/// (rows_i × cols/block_values blocks); per output `y{i}` (m × rows_i f32; [`Epilogue::Swiglu`] has one); per matrix
/// `rows{i}` (u32; Swiglu has one, both matrices' rows); with a bias
/// ([`QMatvecKernel::with_bias`]) per matrix `b{i}` (rows_i f32, added to its sums) (pointers
/// u64). With `norm` the
/// activations are `x / rms(x) · gamma` (RMSNorm, computed by each warp for its row), so a norm
/// and the products after it are one launch; with several matrices their rows are one range
/// (Q, K and V from one input in one launch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct QMatvecKernel {
    fmt: QFormat,
    norm: bool,
    mats: u32,
    epi: Epilogue,
    /// A block per row (else a warp per row, four rows per block).
    wide: bool,
    /// Each matrix's bias added to its sums ([`Epilogue::Store`] only).
    bias: bool,
    /// The activations' format: f32, f16, or 8 bits (with `dp4a`).
    act: ActFormat,
    /// The launch picks a block or a warp per row without looking at the activation rows
    /// ([`QMatvecKernel::rows_alike`]); not part of the code.
    alike: bool,
}

impl QMatvecKernel {
    pub const THREADS: u32 = 128;

    /// `y = W·x`.
    pub fn new(fmt: QFormat) -> QMatvecKernel {
        QMatvecKernel { fmt, norm: false, mats: 1, epi: Epilogue::Store, wide: false, act: ActFormat::F32, alike: false, bias: false }
    }

    /// A fused variant: `mats` matrices (1–3; exactly 2 for Swiglu and Geglu), an RMSNorm
    /// first or not.
    pub fn fused(fmt: QFormat, norm: bool, mats: u32, epi: Epilogue) -> Option<QMatvecKernel> {
        let ok = match epi.gated() {
            true => mats == 2,
            false => (1..=3).contains(&mats),
        };
        ok.then_some(QMatvecKernel { fmt, norm, mats, epi, wide: false, act: ActFormat::F32, alike: false, bias: false })
    }

    /// The same kernel adding each matrix's bias to its sums (`y = W·x + b`, rounded as the
    /// product and then an add): a projection with a bias in one launch. `None` unless the
    /// epilogue is [`Epilogue::Store`].
    pub fn with_bias(mut self) -> Option<QMatvecKernel> {
        self.bias = true;
        (self.epi == Epilogue::Store).then_some(self)
    }
    /// Whether it adds biases ([`QMatvecKernel::with_bias`]).
    pub fn bias(&self) -> bool {
        self.bias
    }

    /// The same kernel with a block of 128 threads per weight row (`true`) or a warp per row
    /// and four rows per block (`false`, the default). A block per row is faster for one
    /// activation row and up to a few thousand weight rows (a decoding step's products, 4 µs
    /// instead of 5: more threads wait on fewer loads each); a warp per row for large products
    /// (an LM head, a prompt's rows), where the block reductions cost more than they save.
    pub fn per_block(mut self, wide: bool) -> QMatvecKernel {
        self.wide = wide;
        self
    }

    /// Whether a launch must give each activation row the bits it gets alone (`true`): a
    /// block per row and a warp per row sum a row in different orders, so the launch then
    /// picks one by the matrices only, never by how many rows run (batch invariance).
    pub fn rows_alike(mut self, on: bool) -> QMatvecKernel {
        self.alike = on;
        self
    }
    pub fn alike(&self) -> bool {
        self.alike
    }

    /// The same kernel on activations of `act` (narrower than f32: [`super::NarrowKernel`]'s,
    /// which also does the norm): `None` for a norm variant, or 8 bits for a format without a
    /// `dp4a` path (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K and Q6_K have one).
    pub fn with_activations(mut self, act: ActFormat) -> Option<QMatvecKernel> {
        self.act = act;
        let ok = act == ActFormat::F32 || (!self.norm && (act == ActFormat::F16 || q8_reads(self.fmt)));
        ok.then_some(self)
    }
    pub fn activations(&self) -> ActFormat {
        self.act
    }

    /// Weight rows per block of threads.
    pub fn rows_per_block(&self) -> u32 {
        if self.wide {
            1
        } else {
            Self::THREADS / 32
        }
    }

    pub fn format(&self) -> QFormat {
        self.fmt
    }
    pub fn norm(&self) -> bool {
        self.norm
    }
    pub fn mats(&self) -> u32 {
        self.mats
    }
    pub fn epilogue(&self) -> Epilogue {
        self.epi
    }
    /// Outputs: one per matrix, one for Swiglu and Geglu.
    pub fn outputs(&self) -> u32 {
        if self.epi.gated() {
            1
        } else {
            self.mats
        }
    }

    /// `rows`: all matrices' rows together (Swiglu: one matrix's).
    pub fn launch(&self, rows: u32, m: u32) -> LaunchConfig {
        LaunchConfig { grid: (rows.div_ceil(self.rows_per_block()).max(1), m.max(1), 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

/// The 16-bit little-endian word at `a + off`, as a u32.
pub(crate) fn ld_u16(k: &mut PtxKernel, a: Reg, off: i64) -> Reg {
    let h = k.ld(Space::Global, PtxType::U16, Addr::at(a, off));
    k.cvt(U, PtxType::U16, h)
}

/// The IEEE half at `a + off`, as f32.
pub(crate) fn ld_f16(k: &mut PtxKernel, a: Reg, off: i64) -> Reg {
    let h = k.ld(Space::Global, PtxType::B16, Addr::at(a, off));
    k.cvt(F, PtxType::F16, h)
}

/// The bfloat16 at `a + off`, as f32 (its bits are an f32's top half).
pub(crate) fn ld_bf16(k: &mut PtxKernel, a: Reg, off: i64) -> Reg {
    let h = ld_u16(k, a, off);
    k.bin(BinOp::Shl, PtxType::B32, h, 16u32)
}

/// `Σ q[j]·x[j]` with the integer values `q` (u32 or s32 registers of type `qty`).
pub(crate) fn dot(k: &mut PtxKernel, qty: PtxType, q: &[Reg], x: &[Reg]) -> Reg {
    let mut s = k.mov(F, 0.0f32);
    for (&q, &x) in q.iter().zip(x) {
        let qf = k.cvt(F, qty, q);
        s = k.fma(F, qf, x, s);
    }
    s
}

/// `Σ` over values `8p .. 8p + 8` of the block at `a` of `fmt` (`p` a u32 register: 0..3 for
/// 32-value blocks, four lanes sharing a block; 0..31 for the k-quants) times the lane's 8
/// activations `xs`.
fn quarter_dot(k: &mut PtxKernel, fmt: QFormat, a: Reg, p: Reg, xs: &[Reg]) -> Reg {
    match fmt {
        QFormat::F16 | QFormat::BF16 => {
            let off = k.mul(U, p, 16u32);
            let ha = k.mad_wide(U, off, 1u32, a);
            let mut s = k.mov(F, 0.0f32);
            for (i, &xv) in xs.iter().enumerate() {
                let wv = if fmt == QFormat::BF16 { ld_bf16(k, ha, 2 * i as i64) } else { ld_f16(k, ha, 2 * i as i64) };
                s = k.fma(F, wv, xv, s);
            }
            s
        }
        QFormat::Q2_K | QFormat::Q3_K | QFormat::Q4_K | QFormat::Q5_K | QFormat::Q6_K => kquant::group_dot(k, fmt, a, p, xs),
        QFormat::F32 => {
            let off = k.mul(U, p, 32u32);
            let wa = k.mad_wide(U, off, 1u32, a);
            let ws: Vec<Reg> = (0..2).flat_map(|i| k.ld_v(Space::Global, F, 4, Addr::at(wa, 16 * i))).collect();
            let mut s = k.mov(F, 0.0f32);
            for (&wv, &xv) in ws.iter().zip(xs) {
                s = k.fma(F, wv, xv, s);
            }
            s
        }
        QFormat::Q8_0 => {
            let d = ld_f16(k, a, 0);
            let off = k.mul(U, p, 8u32);
            let qa = k.mad_wide(U, off, 1u32, a);
            let mut q = Vec::with_capacity(8);
            for t in 0..4 {
                let h = ld_u16(k, qa, 2 + 2 * t);
                // the two signed bytes of the half: shift each to the top, then arithmetic right
                for up in [24u32, 16] {
                    let s = k.bin(BinOp::Shl, PtxType::B32, h, up);
                    q.push(k.bin(BinOp::Shr, PtxType::S32, s, 24u32));
                }
            }
            let s = dot(k, PtxType::S32, &q, xs);
            k.mul(F, d, s)
        }
        QFormat::Q4_0 | QFormat::Q4_1 | QFormat::Q5_0 | QFormat::Q5_1 => {
            let d = ld_f16(k, a, 0);
            // value = d·q + m; Q4_0/Q5_0 take their offset as m = −8d / −16d
            let (m, qh_off, qs_off) = match fmt {
                QFormat::Q4_0 => (k.mul(F, d, -8.0f32), None, 2),
                QFormat::Q4_1 => (ld_f16(k, a, 2), None, 4),
                QFormat::Q5_0 => (k.mul(F, d, -16.0f32), Some(2), 6),
                _ => (ld_f16(k, a, 2), Some(4), 8),
            };
            // values 8p..8p+8: the low nibbles of bytes 8(p&1).. for p < 2, the high ones after
            let half = k.bin(BinOp::And, PtxType::B32, p, 1u32);
            let boff = k.mul(U, half, 8u32);
            let qa = k.mad_wide(U, boff, 1u32, a);
            let hi = k.bin(BinOp::Shr, U, p, 1u32);
            let nib = k.mul(U, hi, 4u32);
            // the fifth bits of values 8p..8p+8, at bits 0..8
            let qh = qh_off.map(|o| {
                let lo = ld_u16(k, a, o);
                let hi16 = ld_u16(k, a, o + 2);
                let hi16 = k.bin(BinOp::Shl, PtxType::B32, hi16, 16u32);
                let qh = k.bin(BinOp::Or, PtxType::B32, lo, hi16);
                let sh = k.mul(U, p, 8u32);
                k.bin(BinOp::Shr, U, qh, sh)
            });
            let mut q = Vec::with_capacity(8);
            for t in 0..4 {
                let h = ld_u16(k, qa, qs_off + 2 * t);
                let h = k.bin(BinOp::Shr, U, h, nib);
                for (j, byte) in [(2 * t, 0u32), (2 * t + 1, 8)] {
                    let v = k.bin(BinOp::Shr, U, h, byte);
                    let mut v = k.bin(BinOp::And, PtxType::B32, v, 0xFu32);
                    if let Some(qh) = qh {
                        let j = j as u32;
                        // bit j of qh moved to bit 4
                        let b = if j >= 4 { k.bin(BinOp::Shr, U, qh, j - 4) } else { k.bin(BinOp::Shl, PtxType::B32, qh, 4 - j) };
                        let b = k.bin(BinOp::And, PtxType::B32, b, 0x10u32);
                        v = k.bin(BinOp::Or, PtxType::B32, v, b);
                    }
                    q.push(v);
                }
            }
            let s = dot(k, U, &q, xs);
            let mut sx = xs[0];
            for &v in &xs[1..] {
                sx = k.add(F, sx, v);
            }
            let ms = k.mul(F, m, sx);
            k.fma(F, d, s, ms)
        }
    }
}

impl Kernel for QMatvecKernel {
    fn name(&self) -> String {
        let norm = if self.norm { "_norm" } else { "" };
        let mats = if self.mats > 1 && !self.epi.gated() { format!("_x{}", self.mats) } else { String::new() };
        let epi = match self.epi {
            Epilogue::Store => "",
            Epilogue::Add => "_add",
            Epilogue::Swiglu => "_swiglu",
            Epilogue::Geglu => "_geglu",
        };
        let wide = if self.wide { "_b" } else { "" };
        let bias = if self.bias { "_bias" } else { "" };
        format!("qmatvec_{}{}{norm}{mats}{epi}{bias}{wide}", self.fmt.tag(), self.act.tag())
    }

    fn build(&self, sm: u32) -> PtxKernel {
        let (fmt, epi, mats) = (self.fmt, self.epi, self.mats as usize);
        let bs = fmt.block_bytes();
        let mut k = PtxKernel::new(&self.name());
        let act = self.act;
        if act == ActFormat::F32 {
            k.add_param("x", PtxType::U64);
        } else {
            k.add_param("xn", PtxType::U64);
        }
        if act == ActFormat::Q8 {
            k.add_param("xd", PtxType::U64);
        }
        if self.norm {
            k.add_param("gamma", PtxType::U64);
            k.add_param("eps", F);
        }
        k.add_param("cols", U);
        for i in 0..mats {
            k.add_param(&format!("w{i}"), PtxType::U64);
        }
        for i in 0..self.outputs() {
            k.add_param(&format!("y{i}"), PtxType::U64);
        }
        let nrows = if epi.gated() { 1 } else { mats };
        for i in 0..nrows {
            k.add_param(&format!("rows{i}"), U);
        }
        let nbias = if self.bias { mats } else { 0 };
        for i in 0..nbias {
            k.add_param(&format!("b{i}"), PtxType::U64);
        }
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let red = k.shared_array("red", F, Self::THREADS / 32, 4);
        let x = k.ld_param_ptr(if act == ActFormat::F32 { "x" } else { "xn" });
        let cols = k.ld_param("cols");
        let ws: Vec<Reg> = (0..mats).map(|i| k.ld_param_ptr(&format!("w{i}"))).collect();
        let ys: Vec<Reg> = (0..self.outputs()).map(|i| k.ld_param_ptr(&format!("y{i}"))).collect();
        let rows: Vec<Reg> = (0..nrows).map(|i| k.ld_param(&format!("rows{i}"))).collect();
        let bias_ptrs: Vec<Reg> = (0..nbias).map(|i| k.ld_param_ptr(&format!("b{i}"))).collect();
        let tid = k.special(Special::TidX);
        let bx = k.special(Special::CtaidX);
        let by = k.special(Special::CtaidY);
        // the threads of one row (a block or a warp), this thread's index among them, the row
        let (unit, t, row) = if self.wide {
            (Self::THREADS, tid, k.mov(U, bx))
        } else {
            let lane = k.bin(BinOp::And, PtxType::B32, tid, 31u32);
            let warp = k.bin(BinOp::Shr, U, tid, 5u32);
            (32, lane, k.fma(U, bx, Self::THREADS / 32, warp))
        };
        let wide = self.wide;
        let reduce = move |k: &mut PtxKernel, v: Reg| {
            if wide {
                block_reduce(k, ReduceCombine::Sum, v, Self::THREADS, &red)
            } else {
                warp_reduce(k, ReduceCombine::Sum, v)
            }
        };
        let mut total = rows[0];
        for &r in &rows[1..] {
            total = k.add(U, total, r);
        }
        let done = k.new_label("done");
        // the row is the same for all its threads: they leave together (shuffles and barriers
        // stay full)
        let past = k.setp(Cmp::Ge, U, row, total);
        k.bra_if(past, false, &done);
        // which matrix this row is in, and its row there
        let (mut w, mut y, mut r, mut yrows) = (ws[0], ys[0], row, rows[0]);
        let mut bias_at = bias_ptrs.first().copied();
        let mut base = rows[0];
        for i in 1..nrows {
            let inside = k.setp(Cmp::Ge, U, row, base);
            let local = k.sub(U, row, base);
            w = k.selp(PtxType::U64, ws[i], w, inside);
            y = k.selp(PtxType::U64, ys[i], y, inside);
            bias_at = bias_at.map(|b| k.selp(PtxType::U64, bias_ptrs[i], b, inside));
            r = k.selp(U, local, r, inside);
            yrows = k.selp(U, rows[i], yrows, inside);
            base = k.add(U, base, rows[i]);
        }
        let nb = k.bin(BinOp::Shr, U, cols, fmt.block_shift());
        let row_bytes = k.mul(U, nb, bs);
        let mut wrows = vec![k.mad_wide(U, r, row_bytes, w)];
        if epi.gated() {
            wrows.push(k.mad_wide(U, r, row_bytes, ws[1]));
        }
        // Hopper: the kernel may start while the previous one finishes (programmatic dependent
        // launch). Its weights, which no kernel writes, are fetched into L2 meanwhile (a 128-byte
        // line per thread, the first `unit` lines of each row); then it waits for the activations.
        if sm >= 90 {
            let line = k.mul(U, t, 128u32);
            let inside = k.setp(Cmp::Lt, U, line, row_bytes);
            for &wr in &wrows {
                let a = k.mad_wide(U, t, 128u32, wr);
                k.when(inside, false, |k| k.prefetch_l2(Addr::reg(a)));
            }
        }
        k.grid_dep_sync(sm);
        // a row's activations: f32, f16, or bytes and a scale per 32
        let cols4 = k.mul(U, cols, act.value_bytes());
        let xrow = k.mad_wide(U, by, cols4, x);
        let xdrow = (act == ActFormat::Q8).then(|| {
            let xd = k.ld_param_ptr("xd");
            let nb32 = k.bin(BinOp::Shr, U, cols, 5u32);
            let o = k.mul(U, by, nb32);
            k.elem_addr(xd, o, 4)
        });
        // RMSNorm: its sum of squares is taken in the products' loop (a row's threads read each
        // activation exactly once there), the scale applied to the sums at the end.
        let norm = if self.norm { Some((k.ld_param_ptr("gamma"), k.ld_param("eps"), k.mov(F, 0.0f32))) } else { None };
        // work items: 8 values of a block (a quarter of a 32-value one, four threads per block),
        // so that every thread is busy on rows of 18 blocks and each one's chain of loads is short
        let groups = if act == ActFormat::Q8 { q8_groups(fmt) } else { fmt.block_values() / 8 };
        let accs: Vec<Reg> = wrows.iter().map(|_| k.mov(F, 0.0f32)).collect();
        let items = k.mul(U, nb, groups);
        let it = k.mov(U, t);
        let (top, end) = (k.new_label("blocks"), k.new_label("blocks_end"));
        k.label(&top);
        let out = k.setp(Cmp::Ge, U, it, items);
        k.bra_if(out, false, &end);
        let b = k.bin(BinOp::Shr, U, it, groups.trailing_zeros());
        let p = k.bin(BinOp::And, PtxType::B32, it, groups - 1);
        if let Some(xdrow) = xdrow {
            // the item's activation bytes and their 32-value blocks' scales
            let xqb = k.mad_wide(U, b, fmt.block_values(), xrow);
            let xdb = k.mad_wide(U, b, fmt.block_values() / 32 * 4, xdrow);
            let acts = q8_acts(&mut k, fmt, p, xqb, xdb);
            for (&wr, &acc) in wrows.iter().zip(&accs) {
                let a = k.mad_wide(U, b, bs, wr);
                let part = q8_dot(&mut k, fmt, a, p, &acts);
                k.bin_to(BinOp::Add, acc, acc, part);
            }
        } else {
            // activations it * 8 .. + 8 (block b, group p): 32 bytes of f32, or 16 of f16
            let xa = k.mad_wide(U, it, 8 * act.value_bytes(), xrow);
            let mut xs: Vec<Reg> = if act == ActFormat::F16 {
                let ws = k.ld_v(Space::Global, PtxType::B32, 4, Addr::reg(xa));
                ws.iter()
                    .flat_map(|&w| {
                        let (lo, hi) = k.unpack16(w);
                        [k.cvt(F, PtxType::F16, lo), k.cvt(F, PtxType::F16, hi)]
                    })
                    .collect()
            } else {
                (0..2).flat_map(|i| k.ld_v(Space::Global, F, 4, Addr::at(xa, 16 * i))).collect()
            };
            if let Some((gamma, _, ss)) = norm {
                for &v in &xs {
                    k.fma_to(ss, v, v, ss);
                }
                let ga = k.mad_wide(U, it, 32u32, gamma);
                let gs: Vec<Reg> = (0..2).flat_map(|i| k.ld_v(Space::Global, F, 4, Addr::at(ga, 16 * i))).collect();
                xs = xs.iter().zip(&gs).map(|(&xv, &g)| k.mul(F, xv, g)).collect();
            }
            for (&wr, &acc) in wrows.iter().zip(&accs) {
                let a = k.mad_wide(U, b, bs, wr);
                let part = quarter_dot(&mut k, fmt, a, p, &xs);
                k.bin_to(BinOp::Add, acc, acc, part);
            }
        }
        k.bin_to(BinOp::Add, it, it, unit);
        k.bra(&top);
        k.label(&end);
        let mut sums: Vec<Reg> = accs.iter().map(|&a| reduce(&mut k, a)).collect();
        if let Some((_, eps, ss)) = norm {
            let ss = reduce(&mut k, ss);
            let colsf = k.cvt(F, U, cols);
            let mean = k.bin(BinOp::Div, F, ss, colsf);
            let me = k.add(F, mean, eps);
            let sd = k.un(UnOp::Sqrt, F, me);
            let scale = k.un(UnOp::Rcp, F, sd);
            sums = sums.iter().map(|&v| k.mul(F, v, scale)).collect();
        }
        let yrow = k.mul(U, by, yrows);
        let yi = k.add(U, yrow, r);
        let ya = k.elem_addr(y, yi, 4);
        let is0 = k.setp(Cmp::Eq, U, t, 0u32);
        k.when(is0, false, |k| {
            let v = match epi {
                Epilogue::Store => match bias_at {
                    Some(b) => {
                        let ba = k.elem_addr(b, r, 4);
                        let bv = k.ld(Space::Global, F, Addr::reg(ba));
                        k.add(F, sums[0], bv)
                    }
                    None => sums[0],
                },
                Epilogue::Add => {
                    // One adder per element: the same rounding as a load, an add and a store,
                    // without waiting for the load.
                    k.red(Space::Global, AtomOp::Add, F, Addr::reg(ya), sums[0]);
                    return;
                }
                Epilogue::Swiglu => {
                    // silu(g)·u = g / (1 + e^−g) · u
                    let ng = k.un(UnOp::Neg, F, sums[0]);
                    let e = exp(k, ng);
                    let d = k.add(F, e, 1.0f32);
                    let sg = k.bin(BinOp::Div, F, sums[0], d);
                    k.mul(F, sg, sums[1])
                }
                Epilogue::Geglu => {
                    let g = sums[0];
                    let g2 = k.mul(F, g, g);
                    let c = k.fma(F, g2, 0.044_715f32, 1.0f32);
                    let a = k.mul(F, g, c);
                    // −2a = −2·√(2/π)·g·(1 + 0.044715·g²)
                    let na2 = k.mul(F, a, -2.0 * 0.797_884_6f32);
                    let e = exp(k, na2);
                    let d = k.add(F, e, 1.0f32);
                    let gg = k.bin(BinOp::Div, F, g, d);
                    k.mul(F, gg, sums[1])
                }
            };
            k.st(Space::Global, F, Addr::reg(ya), v);
        });
        k.label(&done);
        k.ret();
        k
    }
}
