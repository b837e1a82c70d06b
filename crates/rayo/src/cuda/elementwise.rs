//! Fused element-wise kernels: an [`Expr`] over input buffers, the registry's ops and
//! constants becomes one PTX kernel that reads each input once and writes once. Each op's PTX
//! comes from its definition in `crate::ops`; op parameters and constants are kernel arguments
//! (the kernel depends only on the shape of the expression), so a loop over changing constants
//! or lengths loads one module.

use crate::ops::{BinaryDef, BinaryOp, BinaryVisitor, Params, UnaryDef, UnaryOp, UnaryVisitor};
use crate::{Error, Result};
use rayo_ptx::kernels::{Kernel, LaunchConfig};
use rayo_ptx::ptx::{Addr, BinOp, Cmp, PtxKernel, PtxType, Reg, Space, Special};

/// Scalars (op parameters and constants) one fused kernel can take.
pub const MAX_SCALARS: usize = 16;
/// Inputs one fused kernel can read.
pub const MAX_INPUTS: usize = 8;

/// An f32 expression over inputs `x0..x7`, constants and the registry's element-wise ops.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Input(u8),
    Const(f32),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
}

macro_rules! unary_methods {
    ($($name:ident => $op:ident),*) => {$(
        #[doc = concat!("`", stringify!($name), "(self)`.")]
        #[allow(clippy::should_implement_trait)]
        pub fn $name(self) -> Expr {
            self.apply(UnaryOp::$op)
        }
    )*};
}

macro_rules! binary_methods {
    ($($name:ident => $op:ident),*) => {$(
        #[doc = concat!("`", stringify!($name), "(self, other)`.")]
        #[allow(clippy::should_implement_trait)]
        pub fn $name(self, other: Expr) -> Expr {
            self.combine(BinaryOp::$op, other)
        }
    )*};
}

impl Expr {
    pub fn input(i: u8) -> Expr {
        Expr::Input(i)
    }
    pub fn constant(c: f32) -> Expr {
        Expr::Const(c)
    }
    /// Any unary op of the registry applied to this expression.
    pub fn apply(self, op: UnaryOp) -> Expr {
        Expr::Unary(op, Box::new(self))
    }
    /// Any binary op of the registry applied to this expression and `other`.
    pub fn combine(self, op: BinaryOp, other: Expr) -> Expr {
        Expr::Binary(op, Box::new(self), Box::new(other))
    }
    /// `k · self`.
    pub fn scale(self, k: f32) -> Expr {
        self.apply(UnaryOp::Scale(k))
    }
    /// `self` clamped to `[min, max]`.
    pub fn clip(self, min: f32, max: f32) -> Expr {
        self.apply(UnaryOp::Clip(min, max))
    }
    pub fn leaky_relu(self, alpha: f32) -> Expr {
        self.apply(UnaryOp::LeakyRelu(alpha))
    }
    pub fn elu(self, alpha: f32) -> Expr {
        self.apply(UnaryOp::Elu(alpha))
    }
    unary_methods!(relu => Relu, selu => Selu, sigmoid => Sigmoid, tanh => Tanh, swish => Swish, gelu => Gelu,
        mish => Mish, hardswish => Hardswish, abs => Abs, neg => Neg, sqrt => Sqrt, exp => Exp, ln => Ln);
    binary_methods!(add => Add, sub => Sub, mul => Mul, div => Div, max => Max, min => Min);

    /// Number of inputs: one more than the highest input index used.
    pub fn arity(&self) -> usize {
        match self {
            Expr::Input(i) => *i as usize + 1,
            Expr::Const(_) => 0,
            Expr::Unary(_, a) => a.arity(),
            Expr::Binary(_, a, b) => a.arity().max(b.arity()),
        }
    }

    /// The shape of the expression (ops and wiring, no parameter values): what the generated
    /// kernel depends on.
    pub fn key(&self) -> String {
        match self {
            Expr::Input(i) => format!("x{i}"),
            Expr::Const(_) => "c".into(),
            Expr::Unary(op, a) => format!("{}({})", op.name(), a.key()),
            Expr::Binary(op, a, b) => format!("{}({},{})", op.name(), a.key(), b.key()),
        }
    }

    /// The kernel's scalar arguments, in the order the kernel reads them.
    pub fn scalars(&self) -> Vec<f32> {
        let mut v = Vec::new();
        self.collect_scalars(&mut v);
        v
    }

    fn collect_scalars(&self, v: &mut Vec<f32>) {
        match self {
            Expr::Input(_) => {}
            Expr::Const(c) => v.push(*c),
            Expr::Unary(op, a) => {
                a.collect_scalars(v);
                v.extend_from_slice(&op.params()[..op.param_names().len()]);
            }
            Expr::Binary(op, a, b) => {
                a.collect_scalars(v);
                b.collect_scalars(v);
                v.extend_from_slice(&op.params()[..op.param_names().len()]);
            }
        }
    }

    /// Every op's parameters in their domain, at most [`MAX_INPUTS`] inputs and
    /// [`MAX_SCALARS`] scalars.
    pub fn validate(&self) -> Result<()> {
        const OP: &str = "cuda elementwise";
        if self.arity() > MAX_INPUTS {
            return Err(Error::InvalidArgument { op: OP, name: "inputs", value: self.arity().into(), reason: "at most 8 inputs" });
        }
        let n = self.scalars().len();
        if n > MAX_SCALARS {
            return Err(Error::InvalidArgument { op: OP, name: "scalars", value: n.into(), reason: "at most 16 op parameters and constants" });
        }
        self.walk_ops(&mut |u, b| match (u, b) {
            (Some(u), _) => u.validate(),
            (_, Some(b)) => b.validate(),
            _ => Ok(()),
        })
    }

    fn walk_ops(&self, f: &mut dyn FnMut(Option<UnaryOp>, Option<BinaryOp>) -> Result<()>) -> Result<()> {
        match self {
            Expr::Input(_) | Expr::Const(_) => Ok(()),
            Expr::Unary(op, a) => {
                a.walk_ops(f)?;
                f(Some(*op), None)
            }
            Expr::Binary(op, a, b) => {
                a.walk_ops(f)?;
                b.walk_ops(f)?;
                f(None, Some(*op))
            }
        }
    }

    /// Evaluates in f64 with the registry's references (what the GPU tests compare with).
    pub fn eval_f64(&self, inputs: &[f64]) -> f64 {
        match self {
            Expr::Input(i) => inputs.get(*i as usize).copied().unwrap_or(f64::NAN),
            Expr::Const(c) => *c as f64,
            Expr::Unary(op, a) => op.reference(a.eval_f64(inputs)),
            Expr::Binary(op, a, b) => op.reference(a.eval_f64(inputs), b.eval_f64(inputs)),
        }
    }

    /// PTX for one element: `inputs[i]` holds input i, `scalars` the kernel's scalar
    /// arguments, consumed in [`Expr::scalars`] order.
    fn emit(&self, k: &mut PtxKernel, inputs: &[Reg], scalars: &mut std::slice::Iter<'_, Reg>) -> Reg {
        match self {
            Expr::Input(i) => inputs[*i as usize],
            Expr::Const(_) => *scalars.next().expect("one scalar per constant"),
            Expr::Unary(op, a) => {
                let x = a.emit(k, inputs, scalars);
                let p: Vec<Reg> = (0..op.param_names().len()).map(|_| *scalars.next().expect("one scalar per parameter")).collect();
                op.visit(EmitUnary { k, x, p: &p })
            }
            Expr::Binary(op, a, b) => {
                let x = a.emit(k, inputs, scalars);
                let y = b.emit(k, inputs, scalars);
                let p: Vec<Reg> = (0..op.param_names().len()).map(|_| *scalars.next().expect("one scalar per parameter")).collect();
                op.visit(EmitBinary { k, x, y, p: &p })
            }
        }
    }
}

struct EmitUnary<'a> {
    k: &'a mut PtxKernel,
    x: Reg,
    p: &'a [Reg],
}
impl UnaryVisitor for EmitUnary<'_> {
    type Out = Reg;
    fn visit<D: UnaryDef>(self, _: Params) -> Reg {
        D::ptx(self.k, self.x, self.p)
    }
}

struct EmitBinary<'a> {
    k: &'a mut PtxKernel,
    x: Reg,
    y: Reg,
    p: &'a [Reg],
}
impl BinaryVisitor for EmitBinary<'_> {
    type Out = Reg;
    fn visit<D: BinaryDef>(self, _: Params) -> Reg {
        D::ptx(self.k, self.x, self.y, self.p)
    }
}

/// `out[i] = expr(x0[i], x1[i], ...)` for `i < n`. Parameters: `x0..x{a-1}` (u64), `out` (u64),
/// `n` (u32), `s0..s{m-1}` (f32: the expression's op parameters and constants). Grid-stride
/// loop over 16-byte vectors, then a scalar tail (device allocations are 256-byte aligned).
#[derive(Debug, Clone, PartialEq)]
pub struct FusedKernel {
    expr: Expr,
    arity: usize,
    scalars: usize,
}

impl FusedKernel {
    pub const THREADS: u32 = 256;

    /// The kernel for the shape of `expr` (its parameter values are launch arguments).
    pub fn new(expr: &Expr) -> Result<FusedKernel> {
        expr.validate()?;
        Ok(FusedKernel { expr: expr.clone(), arity: expr.arity(), scalars: expr.scalars().len() })
    }

    /// Enough blocks to cover `n` with one vector per thread, capped at `32 * sms`.
    pub fn launch(&self, n: usize, sms: u32) -> LaunchConfig {
        let vecs = n.div_ceil(4).max(1);
        let blocks = vecs.div_ceil(Self::THREADS as usize).min(32 * sms.max(1) as usize) as u32;
        LaunchConfig { grid: (blocks.max(1), 1, 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for FusedKernel {
    fn name(&self) -> String {
        // FNV-1a of the expression's shape: short, stable, and free of parameter values.
        let key = self.expr.key();
        let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
        format!("ew_{}_{h:016x}", self.arity)
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        const F: PtxType = PtxType::F32;
        const U: PtxType = PtxType::U32;
        let mut k = PtxKernel::new(&self.name());
        for i in 0..self.arity {
            k.add_param(&format!("x{i}"), PtxType::U64);
        }
        k.add_param("out", PtxType::U64);
        k.add_param("n", U);
        for i in 0..self.scalars {
            k.add_param(&format!("s{i}"), F);
        }
        k.launch_bounds((Self::THREADS, 1, 1), None);
        let ins: Vec<Reg> = (0..self.arity).map(|i| k.ld_param_ptr(&format!("x{i}"))).collect();
        let out = k.ld_param_ptr("out");
        let n = k.ld_param("n");
        let scalars: Vec<Reg> = (0..self.scalars).map(|i| k.ld_param(&format!("s{i}"))).collect();
        let (ctaid, ntid, tid) = (k.special(Special::CtaidX), k.special(Special::NtidX), k.special(Special::TidX));
        let i = k.fma(U, ctaid, ntid, tid);
        let gtid = k.mov(U, i);
        let nct = k.special(Special::NctaidX);
        let stride = k.mul(U, nct, ntid);
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
                self.expr.emit(&mut k, &lane_in, &mut scalars.iter())
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
        let r = self.expr.emit(&mut k, &lane_in, &mut scalars.iter());
        let oad = k.elem_addr(out, t, 4);
        k.st(Space::Global, F, Addr::reg(oad), r);
        k.label(&end);
        k.ret();
        k
    }
}

/// One fused kernel per registry op (and per binary op), plus a three-input chain: what
/// `rayo ptx` writes and the ptxas test assembles.
pub fn variants() -> Vec<FusedKernel> {
    let x = || Expr::input(0);
    let y = || Expr::input(1);
    let mut v: Vec<Expr> = UnaryOp::all().into_iter().map(|op| x().apply(op)).collect();
    v.extend(BinaryOp::all().into_iter().map(|op| x().combine(op, y())));
    v.push(x().mul(y()).add(x()).sigmoid().mul(Expr::input(2)).add(Expr::constant(0.5)));
    v.iter().map(|e| FusedKernel::new(e).expect("the sample parameters are valid")).collect()
}
