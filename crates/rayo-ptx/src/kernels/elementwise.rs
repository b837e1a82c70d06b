//! Element-wise kernels generated from an expression over up to 8 input vectors, so a chain of
//! ops (`(x*y + x).sigmoid() * z`) becomes one kernel: one read of each input, one write.

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

/// An f32 expression over inputs `x0..x7` and constants.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Input(u8),
    Const(f32),
    Unary(Unary, Box<Expr>),
    Binary(Binary, Box<Expr>, Box<Expr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unary {
    Neg,
    Abs,
    Sqrt,
    Exp,
    Ln,
    Relu,
    Sigmoid,
    Tanh,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
}

impl Expr {
    pub fn input(i: u8) -> Expr {
        Expr::Input(i)
    }
    pub fn constant(c: f32) -> Expr {
        Expr::Const(c)
    }
    fn un(self, u: Unary) -> Expr {
        Expr::Unary(u, Box::new(self))
    }
    fn bin(self, b: Binary, o: Expr) -> Expr {
        Expr::Binary(b, Box::new(self), Box::new(o))
    }
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, o: Expr) -> Expr {
        self.bin(Binary::Add, o)
    }
    #[allow(clippy::should_implement_trait)]
    pub fn sub(self, o: Expr) -> Expr {
        self.bin(Binary::Sub, o)
    }
    #[allow(clippy::should_implement_trait)]
    pub fn mul(self, o: Expr) -> Expr {
        self.bin(Binary::Mul, o)
    }
    #[allow(clippy::should_implement_trait)]
    pub fn div(self, o: Expr) -> Expr {
        self.bin(Binary::Div, o)
    }
    pub fn max(self, o: Expr) -> Expr {
        self.bin(Binary::Max, o)
    }
    pub fn min(self, o: Expr) -> Expr {
        self.bin(Binary::Min, o)
    }
    pub fn scale(self, c: f32) -> Expr {
        self.mul(Expr::Const(c))
    }
    #[allow(clippy::should_implement_trait)]
    pub fn neg(self) -> Expr {
        self.un(Unary::Neg)
    }
    pub fn abs(self) -> Expr {
        self.un(Unary::Abs)
    }
    pub fn sqrt(self) -> Expr {
        self.un(Unary::Sqrt)
    }
    pub fn exp(self) -> Expr {
        self.un(Unary::Exp)
    }
    pub fn ln(self) -> Expr {
        self.un(Unary::Ln)
    }
    pub fn relu(self) -> Expr {
        self.un(Unary::Relu)
    }
    pub fn sigmoid(self) -> Expr {
        self.un(Unary::Sigmoid)
    }
    pub fn tanh(self) -> Expr {
        self.un(Unary::Tanh)
    }

    /// Number of inputs: one more than the highest input index used.
    pub fn arity(&self) -> usize {
        match self {
            Expr::Input(i) => *i as usize + 1,
            Expr::Const(_) => 0,
            Expr::Unary(_, a) => a.arity(),
            Expr::Binary(_, a, b) => a.arity().max(b.arity()),
        }
    }

    /// A short stable name, part of the kernel's entry name (a cache key).
    pub fn key(&self) -> String {
        match self {
            Expr::Input(i) => format!("x{i}"),
            Expr::Const(c) => format!("c{:08x}", c.to_bits()),
            Expr::Unary(u, a) => format!("{}_{}", format!("{u:?}").to_lowercase(), a.key()),
            Expr::Binary(b, x, y) => format!("{}_{}_{}", format!("{b:?}").to_lowercase(), x.key(), y.key()),
        }
    }

    /// Evaluates in f64 on the CPU (the reference the GPU tests compare with).
    pub fn eval_f64(&self, inputs: &[f64]) -> f64 {
        match self {
            Expr::Input(i) => inputs.get(*i as usize).copied().unwrap_or(f64::NAN),
            Expr::Const(c) => *c as f64,
            Expr::Unary(u, a) => {
                let x = a.eval_f64(inputs);
                match u {
                    Unary::Neg => -x,
                    Unary::Abs => x.abs(),
                    Unary::Sqrt => x.sqrt(),
                    Unary::Exp => x.exp(),
                    Unary::Ln => x.ln(),
                    Unary::Relu => x.max(0.0),
                    Unary::Sigmoid => 1.0 / (1.0 + (-x).exp()),
                    Unary::Tanh => x.tanh(),
                }
            }
            Expr::Binary(b, x, y) => {
                let (x, y) = (x.eval_f64(inputs), y.eval_f64(inputs));
                match b {
                    Binary::Add => x + y,
                    Binary::Sub => x - y,
                    Binary::Mul => x * y,
                    Binary::Div => x / y,
                    Binary::Max => x.max(y),
                    Binary::Min => x.min(y),
                }
            }
        }
    }

    /// Emits the expression for one element; `inputs[i]` holds input i's value.
    fn emit(&self, k: &mut PtxKernel, inputs: &[Reg]) -> Reg {
        match self {
            Expr::Input(i) => inputs[*i as usize],
            Expr::Const(c) => k.mov(F, *c),
            Expr::Unary(u, a) => {
                let x = a.emit(k, inputs);
                match u {
                    Unary::Neg => k.un(UnOp::Neg, F, x),
                    Unary::Abs => k.un(UnOp::Abs, F, x),
                    Unary::Sqrt => k.un(UnOp::Sqrt, F, x),
                    Unary::Exp => exp(k, x),
                    Unary::Ln => ln(k, x),
                    Unary::Relu => k.bin(BinOp::Max, F, x, 0.0f32),
                    Unary::Sigmoid => {
                        // 1 / (1 + e^-x)
                        let nx = k.un(UnOp::Neg, F, x);
                        let e = exp(k, nx);
                        let d = k.add(F, e, 1.0f32);
                        k.un(UnOp::Rcp, F, d)
                    }
                    Unary::Tanh => {
                        // sign(x) * (1 - 2 / (e^{2|x|} + 1)); small |x| by its odd series.
                        let ax = k.un(UnOp::Abs, F, x);
                        let t = k.mul(F, ax, 2.0f32);
                        let e = exp(k, t);
                        let d = k.add(F, e, 1.0f32);
                        let r = k.un(UnOp::Rcp, F, d);
                        let big = k.fma(F, r, -2.0f32, 1.0f32);
                        // x - x^3/3 + 2x^5/15 for |x| < 0.0625 (error < 2e-9 relative)
                        let x2 = k.mul(F, x, x);
                        let p = k.fma(F, x2, 2.0f32 / 15.0, -1.0f32 / 3.0);
                        let p = k.mul(F, p, x2);
                        let small = k.fma(F, p, x, x);
                        let neg = k.setp(Cmp::Lt, F, x, 0.0f32);
                        let nbig = k.un(UnOp::Neg, F, big);
                        let signed = k.selp(F, nbig, big, neg);
                        let is_small = k.setp(Cmp::Lt, F, ax, 0.0625f32);
                        k.selp(F, small, signed, is_small)
                    }
                }
            }
            Expr::Binary(b, x, y) => {
                let (x, y) = (x.emit(k, inputs), y.emit(k, inputs));
                let op = match b {
                    Binary::Add => BinOp::Add,
                    Binary::Sub => BinOp::Sub,
                    Binary::Mul => BinOp::Mul,
                    Binary::Div => BinOp::Div,
                    Binary::Max => BinOp::Max,
                    Binary::Min => BinOp::Min,
                };
                k.bin(op, F, x, y)
            }
        }
    }
}

/// `out[i] = expr(x0[i], x1[i], ...)` for `i < n`. Parameters: `x0..x{a-1}` (u64), `out` (u64),
/// `n` (u32). Grid-stride loop over 16-byte vectors, then a scalar tail. Buffers must be 16-byte
/// aligned (device allocations are).
#[derive(Debug, Clone, PartialEq)]
pub struct ElementwiseKernel {
    pub expr: Expr,
}

impl ElementwiseKernel {
    pub const THREADS: u32 = 256;

    pub fn new(expr: Expr) -> ElementwiseKernel {
        ElementwiseKernel { expr }
    }

    pub fn arity(&self) -> usize {
        self.expr.arity()
    }

    /// Enough blocks to cover `n` with one vector per thread, capped at `32 * sms`.
    pub fn launch(&self, n: usize, sms: u32) -> LaunchConfig {
        let vecs = n.div_ceil(4).max(1);
        let blocks = vecs.div_ceil(Self::THREADS as usize).min(32 * sms.max(1) as usize) as u32;
        LaunchConfig { grid: (blocks.max(1), 1, 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for ElementwiseKernel {
    fn name(&self) -> String {
        let key = self.expr.key();
        if key.len() <= 48 {
            format!("ew_{key}")
        } else {
            // Long chains: a stable hash keeps the name short (FNV-1a).
            let h = key.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
            format!("ew_chain_{h:016x}")
        }
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let a = self.arity();
        let mut k = PtxKernel::new(&self.name());
        for i in 0..a {
            k.add_param(&format!("x{i}"), PtxType::U64);
        }
        k.add_param("out", PtxType::U64);
        k.add_param("n", U);
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let ins: Vec<Reg> = (0..a).map(|i| k.ld_param_ptr(&format!("x{i}"))).collect();
        let out = k.ld_param_ptr("out");
        let n = k.ld_param("n");
        let i = global_tid(&mut k);
        let gtid = k.mov(U, i);
        let stride = grid_stride(&mut k);
        let q = k.bin(BinOp::Shr, U, n, 2u32);
        let (lp, tail, end) = (k.new_label("vec"), k.new_label("tail"), k.new_label("end"));
        k.label(&lp);
        let done = k.setp(Cmp::Ge, U, i, q);
        k.bra_if(done, false, &tail);
        let vals: Vec<Vec<Reg>> = ins
            .iter()
            .map(|&base| {
                let ad = k.elem_addr(base, i, 16);
                k.ld_nc_v(F, 4, Addr::reg(ad))
            })
            .collect();
        let res: Vec<Reg> = (0..4)
            .map(|lane| {
                let lane_in: Vec<Reg> = vals.iter().map(|v| v[lane]).collect();
                self.expr.emit(&mut k, &lane_in)
            })
            .collect();
        let oad = k.elem_addr(out, i, 16);
        k.st_v(Space::Global, F, Addr::reg(oad), &res);
        k.bin_to(BinOp::Add, i, i, stride);
        k.bra(&lp);
        k.label(&tail);
        let q4 = k.bin(BinOp::Shl, PtxType::B32, q, 2u32);
        let t = k.add(U, q4, gtid);
        let out_of_range = k.setp(Cmp::Ge, U, t, n);
        k.bra_if(out_of_range, false, &end);
        let lane_in: Vec<Reg> = ins
            .iter()
            .map(|&base| {
                let ad = k.elem_addr(base, t, 4);
                k.ld(Space::Global, F, Addr::reg(ad))
            })
            .collect();
        let r = self.expr.emit(&mut k, &lane_in);
        let oad = k.elem_addr(out, t, 4);
        k.st(Space::Global, F, Addr::reg(oad), r);
        k.label(&end);
        k.ret();
        k
    }
}
