//! A decoding step's product inputs in a narrower type than f32 ([`ActFormat`]), written once
//! per input by [`NarrowKernel`] (optionally after an RMSNorm, so the norm and the narrowing
//! are one launch) and read by every product over it ([`super::QMatvecKernel::with_activations`]):
//! - 8 bits: each 32 values become 32 signed bytes `q` and an f32 scale `d = max|x| / 127`,
//!   `x ≈ d·q` (llama.cpp's `quantize_q8_1` without its sum); the products use `dp4a`.
//! - f16: each value rounded to f16 (half the bytes; the products convert back to f32).
//!
//! A block of threads per row; each thread takes whole 32-value blocks, so the 8-bit scale's
//! maximum needs no shuffles.

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

/// The activations a product reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActFormat {
    F32,
    F16,
    /// Signed bytes with an f32 scale per 32 values.
    Q8,
}

impl ActFormat {
    /// Bytes of one value (the 8-bit scales are apart).
    pub fn value_bytes(self) -> u32 {
        match self {
            ActFormat::F32 => 4,
            ActFormat::F16 => 2,
            ActFormat::Q8 => 1,
        }
    }
    pub(crate) fn tag(self) -> &'static str {
        match self {
            ActFormat::F32 => "",
            ActFormat::F16 => "_xh",
            ActFormat::Q8 => "_q8",
        }
    }
}

/// Parameters, in order: `x` (m × cols f32); with `norm`, `gamma` (cols f32) and `eps` (f32);
/// `cols` (u32, a multiple of 32); `xn` (m × cols values of the format); for 8 bits `xd`
/// (m × cols/32 f32 scales) (pointers u64). With `norm` the values are `x / rms(x) · gamma`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NarrowKernel {
    norm: bool,
    to: ActFormat,
}

impl NarrowKernel {
    pub const THREADS: u32 = 128;

    /// `None` for [`ActFormat::F32`] (nothing to narrow).
    pub fn new(norm: bool, to: ActFormat) -> Option<NarrowKernel> {
        (to != ActFormat::F32).then_some(NarrowKernel { norm, to })
    }
    pub fn norm(&self) -> bool {
        self.norm
    }
    pub fn format(&self) -> ActFormat {
        self.to
    }
    /// One block of threads per activation row.
    pub fn launch(&self, m: u32) -> LaunchConfig {
        LaunchConfig { grid: (1, m.max(1), 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for NarrowKernel {
    fn name(&self) -> String {
        format!("narrow{}{}", self.to.tag(), if self.norm { "_norm" } else { "" })
    }

    fn build(&self, sm: u32) -> PtxKernel {
        let mut k = PtxKernel::new(&self.name());
        k.add_param("x", PtxType::U64);
        if self.norm {
            k.add_param("gamma", PtxType::U64);
            k.add_param("eps", F);
        }
        k.add_param("cols", U);
        k.add_param("xn", PtxType::U64);
        let q8 = self.to == ActFormat::Q8;
        if q8 {
            k.add_param("xd", PtxType::U64);
        }
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let red = k.shared_array("red", F, Self::THREADS / 32, 4);
        let x = k.ld_param_ptr("x");
        let cols = k.ld_param("cols");
        let xn = k.ld_param_ptr("xn");
        let tid = k.special(Special::TidX);
        let row = k.special(Special::CtaidY);
        k.grid_dep_sync(sm);
        let cols4 = k.mul(U, cols, 4u32);
        let xrow = k.mad_wide(U, row, cols4, x);
        let row_bytes = k.mul(U, cols, self.to.value_bytes());
        let nrow = k.mad_wide(U, row, row_bytes, xn);
        let nb = k.bin(BinOp::Shr, U, cols, 5u32);
        let drow = q8.then(|| {
            let xd = k.ld_param_ptr("xd");
            let o = k.mul(U, row, nb);
            k.elem_addr(xd, o, 4)
        });
        // RMSNorm: the mean of squares over the whole row first (16-byte steps, all threads)
        let norm = self.norm.then(|| {
            let ss = k.mov(F, 0.0f32);
            let c = k.mul(U, tid, 4u32);
            let (top, end) = (k.new_label("ss"), k.new_label("ss_end"));
            k.label(&top);
            let out = k.setp(Cmp::Ge, U, c, cols);
            k.bra_if(out, false, &end);
            let a = k.mad_wide(U, c, 4u32, xrow);
            for v in k.ld_v(Space::Global, F, 4, Addr::reg(a)) {
                k.fma_to(ss, v, v, ss);
            }
            k.bin_to(BinOp::Add, c, c, Self::THREADS * 4);
            k.bra(&top);
            k.label(&end);
            let ss = block_reduce(&mut k, ReduceCombine::Sum, ss, Self::THREADS, &red);
            let colsf = k.cvt(F, U, cols);
            let mean = k.bin(BinOp::Div, F, ss, colsf);
            let eps = k.ld_param("eps");
            let me = k.add(F, mean, eps);
            let sd = k.un(UnOp::Sqrt, F, me);
            (k.ld_param_ptr("gamma"), k.un(UnOp::Rcp, F, sd))
        });
        let b = k.mov(U, tid);
        let (top, end) = (k.new_label("blocks"), k.new_label("blocks_end"));
        k.label(&top);
        let out = k.setp(Cmp::Ge, U, b, nb);
        k.bra_if(out, false, &end);
        let a = k.mad_wide(U, b, 128u32, xrow);
        let mut v: Vec<Reg> = (0..8).flat_map(|i| k.ld_v(Space::Global, F, 4, Addr::at(a, 16 * i))).collect();
        if let Some((gamma, scale)) = norm {
            let ga = k.mad_wide(U, b, 128u32, gamma);
            let g: Vec<Reg> = (0..8).flat_map(|i| k.ld_v(Space::Global, F, 4, Addr::at(ga, 16 * i))).collect();
            v = v
                .iter()
                .zip(&g)
                .map(|(&xv, &gv)| {
                    let xs = k.mul(F, xv, scale);
                    k.mul(F, xs, gv)
                })
                .collect();
        }
        let words: Vec<Reg> = match drow {
            None => v.chunks(2).map(|two| k.cvt_f16x2(two[1], two[0])).collect(),
            Some(drow) => {
                // d = max|v| / 127; q = round(v / d) (0 where d is 0; a NaN or inf makes d NaN
                // or inf, and so every product with the block)
                let mut amax = k.un(UnOp::Abs, F, v[0]);
                for &vi in &v[1..] {
                    let av = k.un(UnOp::Abs, F, vi);
                    amax = k.bin(BinOp::Max, F, amax, av);
                }
                let d = k.mul(F, amax, 1.0f32 / 127.0);
                let pos = k.setp(Cmp::Gt, F, amax, 0.0f32);
                let inv = k.bin(BinOp::Div, F, 127.0f32, amax);
                let inv = k.selp(F, inv, 0.0f32, pos);
                let da = k.elem_addr(drow, b, 4);
                k.st(Space::Global, F, Addr::reg(da), d);
                v.chunks(4)
                    .map(|four| {
                        let mut w = k.mov(PtxType::B32, 0u32);
                        for (i, &vi) in four.iter().enumerate() {
                            let s = k.mul(F, vi, inv);
                            let q = k.cvt_rni(PtxType::S32, F, s);
                            let q = k.bin(BinOp::And, PtxType::B32, q, 0xffu32);
                            let q = if i == 0 { q } else { k.bin(BinOp::Shl, PtxType::B32, q, 8 * i as u32) };
                            w = k.bin(BinOp::Or, PtxType::B32, w, q);
                        }
                        w
                    })
                    .collect()
            }
        };
        // the block's 32 values: 32 bytes, or 64 of f16
        let block_bytes = 32 * self.to.value_bytes();
        let na = k.mad_wide(U, b, block_bytes, nrow);
        for (i, four) in words.chunks(4).enumerate() {
            k.st_v(Space::Global, PtxType::B32, Addr::at(na, 16 * i as i64), four);
        }
        k.bin_to(BinOp::Add, b, b, Self::THREADS);
        k.bra(&top);
        k.label(&end);
        k.ret();
        k
    }
}
