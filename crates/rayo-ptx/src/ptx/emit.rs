//! PTX text from a module and its kernels. Emission is the hot path of kernel generation: text is
//! written as bytes, each short piece (opcode, type, register sigil) copied from a padded table as
//! one fixed-size store and cut to its length, with no `fmt` and no intermediate strings.

use super::instr::*;
use super::kernel::PtxKernel;
use super::types::{PtxType, Special};
use core::fmt;

mod hopper;

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}{}", self.ty.reg_prefix(), self.index)
    }
}

/// An operand outside its kernel: a symbol shows as its interned index (`$sym3`); the PTX text
/// names it.
impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Reg(r) => r.fmt(f),
            Operand::Int(v) => write!(f, "{v}"),
            Operand::F32(v) => write!(f, "0f{:08X}", v.to_bits()),
            Operand::F64(v) => write!(f, "0d{:016X}", v.to_bits()),
            Operand::Special(s) => f.write_str(s.name()),
            Operand::Symbol(s) => write!(f, "$sym{}", s.index),
        }
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.offset == 0 {
            write!(f, "[{}]", self.base)
        } else {
            write!(f, "[{}+{}]", self.base, self.offset)
        }
    }
}

/// A short string padded with zeros to `N` bytes, and its length.
#[derive(Clone, Copy)]
struct Pad<const N: usize> {
    b: [u8; N],
    n: usize,
}

const fn pad<const N: usize>(s: &str) -> Pad<N> {
    let s = s.as_bytes();
    assert!(s.len() <= N);
    let mut b = [0u8; N];
    let mut i = 0;
    while i < s.len() {
        b[i] = s[i];
        i += 1;
    }
    Pad { b, n: s.len() }
}

const fn table<const N: usize, const M: usize>(f: [&str; M]) -> [Pad<N>; M] {
    let mut t = [Pad { b: [0; N], n: 0 }; M];
    let mut i = 0;
    while i < M {
        t[i] = pad(f[i]);
        i += 1;
    }
    t
}

macro_rules! each_type {
    ($f:expr) => {{
        use PtxType::*;
        [$f(Pred), $f(B16), $f(B32), $f(B64), $f(U16), $f(U32), $f(U64), $f(S16), $f(S32), $f(S64), $f(F16), $f(F32), $f(F64)]
    }};
}

/// `.f32`, by `PtxType as usize`.
const DOTTED: [Pad<8>; 13] = table(each_type!(PtxType::dotted));
/// `%f`, by `PtxType as usize`.
const SIGIL: [Pad<4>; 13] = table(each_type!(PtxType::reg_sigil));
/// Every binary op, in declaration order (`BinOp as usize`).
const BIN_OPS: [BinOp; 14] = {
    use BinOp::*;
    [Add, Sub, Mul, MulHi, MulWide, Div, Rem, Min, Max, And, Or, Xor, Shl, Shr]
};
/// `BinOp::opcode`: `[op][float]`.
const BIN_OPC: [[Pad<16>; 2]; 14] = {
    let mut t = [[Pad { b: [0; 16], n: 0 }; 2]; 14];
    let mut i = 0;
    while i < 14 {
        t[i] = [pad(BIN_OPS[i].opcode(PtxType::U32)), pad(BIN_OPS[i].opcode(PtxType::F32))];
        i += 1;
    }
    t
};
/// Every unary op, in declaration order (`UnOp as usize`).
const UN_OPS: [UnOp; 9] = {
    use UnOp::*;
    [Neg, Abs, Not, Sqrt, Rcp, Rsqrt, Ex2, Lg2, Tanh]
};
/// `UnOp::opcode`: `[op][ty == f32]`.
const UN_OPC: [[Pad<16>; 2]; 9] = {
    let mut t = [[Pad { b: [0; 16], n: 0 }; 2]; 9];
    let mut i = 0;
    while i < 9 {
        t[i] = [pad(UN_OPS[i].opcode(PtxType::F64)), pad(UN_OPS[i].opcode(PtxType::F32))];
        i += 1;
    }
    t
};
/// `ld.global`, `st.shared`, ... by `Space as usize`.
const LD: [Pad<16>; 5] = table(["ld.global", "ld.shared", "ld.param", "ld.local", "ld.const"]);
const ST: [Pad<16>; 5] = table(["st.global", "st.shared", "st.param", "st.local", "st.const"]);
/// `Special::name`, by `Special as usize`.
const SPECIAL: [Pad<16>; 17] = {
    use Special::*;
    table([
        TidX.name(),
        TidY.name(),
        TidZ.name(),
        NtidX.name(),
        NtidY.name(),
        CtaidX.name(),
        CtaidY.name(),
        CtaidZ.name(),
        NctaidX.name(),
        NctaidY.name(),
        LaneId.name(),
        WarpId.name(),
        SmId.name(),
        Clock64.name(),
        ClusterCtaRank.name(),
        ClusterIdX.name(),
        NclusterIdX.name(),
    ])
};
/// `00` .. `99`.
const DIGITS2: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// Bytes gathered on the stack before they go to the output in one copy.
const CAP: usize = 1024;

/// The PTX text being written: a stack buffer in front of `out`, and the kernel whose names it
/// refers to. Every method is inlined into the emitting loop, so the fill level stays in a
/// register instead of a `Vec`'s length in memory.
struct W<'a> {
    b: [u8; CAP],
    n: usize,
    out: &'a mut Vec<u8>,
    k: &'a PtxKernel,
}

/// Moves the gathered bytes to the output.
#[cold]
#[inline(never)]
fn spill(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(b);
}

impl<'a> W<'a> {
    fn new(out: &'a mut Vec<u8>, k: &'a PtxKernel) -> W<'a> {
        W { b: [0; CAP], n: 0, out, k }
    }
    /// Makes room for `m` more bytes (`m <= CAP`).
    #[inline(always)]
    fn room(&mut self, m: usize) {
        if self.n + m > CAP {
            spill(self.out, &self.b[..self.n]);
            self.n = 0;
        }
    }
    fn finish(self) {
        self.out.extend_from_slice(&self.b[..self.n]);
    }
    #[inline(always)]
    fn s(&mut self, s: &str) {
        let s = s.as_bytes();
        if s.len() > CAP {
            self.room(CAP);
            self.out.extend_from_slice(s);
            return;
        }
        self.room(s.len());
        self.b[self.n..self.n + s.len()].copy_from_slice(s);
        self.n += s.len();
    }
    #[inline(always)]
    fn c(&mut self, c: u8) {
        self.room(1);
        self.b[self.n] = c;
        self.n += 1;
    }
    /// One `N`-byte store, then only the piece's length counted (no copy loop, no `memcpy`).
    #[inline(always)]
    fn pad<const N: usize>(&mut self, p: &Pad<N>) {
        self.room(N);
        self.b[self.n..self.n + N].copy_from_slice(&p.b);
        self.n += p.n;
    }
    #[inline(always)]
    fn ty(&mut self, t: PtxType) {
        self.pad(&DOTTED[t as usize]);
    }
    #[inline(always)]
    fn u(&mut self, v: u64) {
        self.room(20);
        let (b, n) = (&mut self.b, self.n);
        self.n += if v < 10 {
            b[n] = b'0' + v as u8;
            1
        } else if v < 100 {
            b[n..n + 2].copy_from_slice(&DIGITS2[v as usize]);
            2
        } else if v < 1000 {
            b[n] = b'0' + (v / 100) as u8;
            b[n + 1..n + 3].copy_from_slice(&DIGITS2[(v % 100) as usize]);
            3
        } else if v < 10000 {
            b[n..n + 2].copy_from_slice(&DIGITS2[(v / 100) as usize]);
            b[n + 2..n + 4].copy_from_slice(&DIGITS2[(v % 100) as usize]);
            4
        } else {
            digits(&mut b[n..n + 20], v)
        };
    }
    #[inline(always)]
    fn i(&mut self, v: i64) {
        if v < 0 {
            self.c(b'-');
        }
        self.u(v.unsigned_abs());
    }
    fn hex(&mut self, v: u64, digits: u32) {
        const H: &[u8; 16] = b"0123456789ABCDEF";
        self.room(16);
        for k in (0..digits).rev() {
            self.b[self.n] = H[((v >> (4 * k)) & 15) as usize];
            self.n += 1;
        }
    }
    #[inline(always)]
    fn reg(&mut self, r: Reg) {
        self.pad(&SIGIL[r.ty as usize]);
        self.u(r.index as u64);
    }
    fn name(&mut self, n: super::Name) {
        let s = self.k.resolve(n);
        self.s(s);
    }
    #[inline(always)]
    fn op(&mut self, o: &Operand) {
        match *o {
            Operand::Reg(r) => self.reg(r),
            Operand::Int(v) => self.i(v),
            Operand::F32(v) => {
                self.s("0f");
                self.hex(v.to_bits() as u64, 8);
            }
            Operand::F64(v) => {
                self.s("0d");
                self.hex(v.to_bits(), 16);
            }
            Operand::Special(s) => self.pad(&SPECIAL[s as usize]),
            Operand::Symbol(n) => self.name(n),
        }
    }
    /// `, a`
    #[inline(always)]
    fn then(&mut self, o: &Operand) {
        self.s(", ");
        self.op(o);
    }
    #[inline(always)]
    fn addr(&mut self, a: &Addr) {
        self.c(b'[');
        self.op(&a.base);
        if a.offset != 0 {
            self.c(b'+');
            self.i(a.offset);
        }
        self.c(b']');
    }
    /// `{a, b, c, d}` or a single item.
    #[inline(always)]
    fn list<T>(&mut self, xs: &[T], mut f: impl FnMut(&mut Self, &T)) {
        if let [x] = xs {
            return f(self, x);
        }
        self.c(b'{');
        for (i, x) in xs.iter().enumerate() {
            if i > 0 {
                self.s(", ");
            }
            f(self, x);
        }
        self.c(b'}');
    }
    #[inline(always)]
    /// `x, y, z` and the line's end (a directive's three dimensions).
    fn dims(&mut self, (x, y, z): (u32, u32, u32)) {
        self.u(x as u64);
        self.s(", ");
        self.u(y as u64);
        self.s(", ");
        self.u(z as u64);
        self.c(b'\n');
    }
    fn regs(&mut self, rs: &[Reg]) {
        self.list(rs, |w, r| w.reg(*r));
    }
    /// `opcode.ty d`
    #[inline(always)]
    fn head(&mut self, opc: &Pad<16>, ty: PtxType, d: Reg) {
        self.pad(opc);
        self.ty(ty);
        self.c(b' ');
        self.reg(d);
    }
}

/// Writes the decimal digits of `v` at the start of `out` (20 bytes hold any u64); returns how
/// many.
#[inline(never)]
fn digits(out: &mut [u8], v: u64) -> usize {
    let n = v.checked_ilog10().unwrap_or(0) as usize + 1;
    let mut v = v;
    for d in out[..n].iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
    n
}

/// Appends the decimal digits of `v`.
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    let mut b = [0u8; 20];
    let n = digits(&mut b, v);
    out.extend_from_slice(&b[..n]);
}

fn vec_suffix(n: usize) -> &'static str {
    match n {
        2 => ".v2",
        4 => ".v4",
        _ => "",
    }
}

fn atom_name(op: AtomOp) -> &'static str {
    match op {
        AtomOp::Add => "add",
        AtomOp::Min => "min",
        AtomOp::Max => "max",
        AtomOp::Exch => "exch",
        AtomOp::And => "and",
        AtomOp::Or => "or",
    }
}

/// Bytes written by this module are ASCII and the names' UTF-8, so this never loses anything.
pub(crate) fn into_string(v: Vec<u8>) -> String {
    String::from_utf8(v).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// One instruction of `k` as a line of PTX (without indentation or newline).
pub(crate) fn inst(k: &PtxKernel, i: &Inst) -> String {
    let mut out = Vec::new();
    let mut w = W::new(&mut out, k);
    write_inst(&mut w, i);
    w.finish();
    into_string(out)
}

/// Writes one instruction.
#[inline(always)]
fn write_inst(w: &mut W, i: &Inst) {
    match i.guard {
        Some((p, false)) => {
            w.c(b'@');
            w.reg(p);
            w.c(b' ');
        }
        Some((p, true)) => {
            w.s("@!");
            w.reg(p);
            w.c(b' ');
        }
        None => {}
    }
    match &i.op {
        Op::Mov { ty, d, a } => {
            w.s("mov");
            w.ty(*ty);
            w.c(b' ');
            w.reg(*d);
            w.then(a);
        }
        Op::Un { op, ty, d, a } => {
            w.head(&UN_OPC[*op as usize][(*ty == PtxType::F32) as usize], *ty, *d);
            w.then(a);
        }
        Op::Bin { op, ty, d, a, b } => {
            w.head(&BIN_OPC[*op as usize][ty.is_float() as usize], *ty, *d);
            w.then(a);
            w.then(b);
        }
        Op::Fma { ty, d, a, b, c } => {
            const FMA: [Pad<16>; 2] = [pad("mad.lo"), pad("fma.rn")];
            w.head(&FMA[ty.is_float() as usize], *ty, *d);
            w.then(a);
            w.then(b);
            w.then(c);
        }
        Op::MadWide { ty, d, a, b, c } => {
            w.s("mad.wide");
            w.ty(*ty);
            w.c(b' ');
            w.reg(*d);
            w.then(a);
            w.then(b);
            w.then(c);
        }
        Op::Setp { cmp, ty, d, a, b } => {
            w.s("setp.");
            w.s(cmp.name());
            w.ty(*ty);
            w.c(b' ');
            w.reg(*d);
            w.then(a);
            w.then(b);
        }
        Op::Selp { ty, d, a, b, p } => {
            w.s("selp");
            w.ty(*ty);
            w.c(b' ');
            w.reg(*d);
            w.then(a);
            w.then(b);
            w.s(", ");
            w.reg(*p);
        }
        Op::Cvt { rnd, dty, sty, d, a } => {
            w.s("cvt");
            if let Some(r) = rnd {
                w.c(b'.');
                w.s(r);
            }
            w.ty(*dty);
            w.ty(*sty);
            w.c(b' ');
            w.reg(*d);
            w.then(a);
        }
        Op::CvtaTo { space, d, a } => {
            w.s("cvta.to.");
            w.s(space.name());
            w.s(".u64 ");
            w.reg(*d);
            w.s(", ");
            w.reg(*a);
        }
        Op::Ld { space, ty, dst, addr, nc } => {
            w.pad(&LD[*space as usize]);
            if *nc {
                w.s(".nc");
            }
            w.s(vec_suffix(dst.len()));
            w.ty(*ty);
            w.c(b' ');
            w.regs(dst);
            w.s(", ");
            w.addr(addr);
        }
        Op::ParamAddr { d, name } => {
            w.s("mov.b64 ");
            w.reg(*d);
            w.s(", ");
            w.name(*name);
            w.s(";\n\tcvta.param.u64 ");
            w.reg(*d);
            w.s(", ");
            w.reg(*d);
        }
        Op::LdParam { ty, d, name } => {
            w.s("ld.param");
            w.ty(*ty);
            w.c(b' ');
            w.reg(*d);
            w.s(", [");
            w.name(*name);
            w.c(b']');
        }
        Op::St { space, ty, src, addr } => {
            w.pad(&ST[*space as usize]);
            w.s(vec_suffix(src.len()));
            w.ty(*ty);
            w.c(b' ');
            w.addr(addr);
            w.s(", ");
            w.list(src, |w, o| w.op(o));
        }
        Op::Atom { space, op, ty, d, addr, b } => {
            w.s("atom.");
            w.s(space.name());
            w.c(b'.');
            w.s(atom_name(*op));
            w.ty(*ty);
            w.c(b' ');
            w.reg(*d);
            w.s(", ");
            w.addr(addr);
            w.then(b);
        }
        Op::Red { space, op, ty, addr, b } => {
            w.s("red.");
            w.s(space.name());
            w.c(b'.');
            w.s(atom_name(*op));
            w.ty(*ty);
            w.c(b' ');
            w.addr(addr);
            w.then(b);
        }
        Op::Shfl { mode, d, a, b, c, mask } => {
            let m = match mode {
                ShflMode::Up => "up",
                ShflMode::Down => "down",
                ShflMode::Bfly => "bfly",
                ShflMode::Idx => "idx",
            };
            w.s("shfl.sync.");
            w.s(m);
            w.s(".b32 ");
            w.reg(*d);
            w.then(a);
            w.then(b);
            w.s(", ");
            w.u(*c as u64);
            w.s(", 0x");
            w.hex(*mask as u64, 8);
        }
        Op::Vote { mode, d, a, mask } => {
            let m = match mode {
                VoteMode::All => "all.pred",
                VoteMode::Any => "any.pred",
                VoteMode::Ballot => "ballot.b32",
            };
            w.s("vote.sync.");
            w.s(m);
            w.c(b' ');
            w.reg(*d);
            w.s(", ");
            w.reg(*a);
            w.s(", 0x");
            w.hex(*mask as u64, 8);
        }
        Op::CvtTf32 { d, a } => {
            w.s("cvt.rna.tf32.f32 ");
            w.reg(*d);
            w.s(", ");
            w.reg(*a);
        }
        Op::Dp4a { d, a, b, c, a_signed, b_signed } => {
            w.s(if *a_signed { "dp4a.s32" } else { "dp4a.u32" });
            w.s(if *b_signed { ".s32 " } else { ".u32 " });
            w.reg(*d);
            w.then(a);
            w.then(b);
            w.then(c);
        }
        Op::Unpack16 { lo, hi, a } => {
            w.s("mov.b32 {");
            w.reg(*lo);
            w.s(", ");
            w.reg(*hi);
            w.s("}, ");
            w.reg(*a);
        }
        Op::CvtF16x2 { d, hi, lo, bf16 } => {
            w.s(if *bf16 { "cvt.rn.bf16x2.f32 " } else { "cvt.rn.f16x2.f32 " });
            w.reg(*d);
            w.s(", ");
            w.reg(*hi);
            w.s(", ");
            w.reg(*lo);
        }
        Op::Ldmatrix { d, addr, trans } => {
            w.s(if *trans { "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 " } else { "ldmatrix.sync.aligned.m8n8.x4.shared.b16 " });
            w.regs(d);
            w.s(", ");
            w.addr(addr);
        }
        Op::CpAsync { dst, src } => {
            w.s("cp.async.cg.shared.global ");
            w.addr(dst);
            w.s(", ");
            w.addr(src);
            w.s(", 16");
        }
        Op::CpAsyncCommit => w.s("cp.async.commit_group"),
        Op::Wgmma(_)
        | Op::WgmmaFence
        | Op::WgmmaCommit
        | Op::WgmmaWait(_)
        | Op::MbarInit { .. }
        | Op::MbarArrive { .. }
        | Op::MbarArriveRemote { .. }
        | Op::Mapa { .. }
        | Op::FenceMbarrierInit
        | Op::ClusterSync
        | Op::MbarTryWait { .. }
        | Op::TmaLoad { .. }
        | Op::FenceProxyAsync
        | Op::SetMaxNReg { .. } => hopper::write(w, &i.op),
        Op::CpAsyncWait(n) => {
            w.s("cp.async.wait_group ");
            w.u(*n as u64);
        }
        Op::Mma(m) => {
            if let Some(m) = w.k.mma(*m) {
                w.s(m.kind.opcode());
                w.regs(&m.d);
                w.s(", ");
                w.regs(&m.a);
                w.s(", ");
                w.regs(&m.b);
                w.s(", ");
                w.regs(&m.c);
            }
        }
        Op::Label(l) => {
            w.name(*l);
            w.c(b':');
            return;
        }
        Op::Bra { target, uni } => {
            w.s(if *uni { "bra.uni " } else { "bra " });
            w.name(*target);
        }
        Op::BarSync(n) => {
            w.s("bar.sync ");
            w.u(*n as u64);
        }
        Op::MembarGl => w.s("membar.gl"),
        Op::PrefetchL2 { addr } => {
            w.s("prefetch.global.L2 ");
            w.addr(addr);
        }
        Op::LdL2 { d, addr } => {
            w.s("ld.global.cg.f32 ");
            w.reg(*d);
            w.s(", ");
            w.addr(addr);
        }
        Op::GridDepWait => w.s("griddepcontrol.wait"),
        Op::GridDepLaunch => w.s("griddepcontrol.launch_dependents"),
        Op::Ret => w.s("ret"),
    }
    w.c(b';');
}

/// The `.entry` of one kernel.
pub(crate) fn kernel(k: &PtxKernel, out: &mut Vec<u8>) {
    let mut w = W::new(out, k);
    // dynamic shared memory: declared at module scope, sized at launch
    for s in k.shared.iter().filter(|s| s.count == 0) {
        w.s(".extern .shared .align ");
        w.u(s.align as u64);
        w.s(" .b8 ");
        w.name(s.name);
        w.s("[];\n");
    }
    w.s(".visible .entry ");
    w.s(&k.name);
    w.c(b'(');
    for (i, p) in k.params.iter().enumerate() {
        w.s("\n\t.param ");
        if p.bytes > 0 {
            w.s(".align 64 .b8 ");
            w.name(p.name);
            w.c(b'[');
            w.u(p.bytes as u64);
            w.c(b']');
        } else {
            w.ty(p.ty);
            w.c(b' ');
            w.name(p.name);
        }
        if i + 1 < k.params.len() {
            w.c(b',');
        }
    }
    w.s("\n)\n");
    if let Some(dims) = k.max_ntid {
        w.s(".maxntid ");
        w.dims(dims);
    }
    if let Some(m) = k.min_ctas {
        w.s(".minnctapersm ");
        w.u(m as u64);
        w.c(b'\n');
    }
    if let Some(dims) = k.cluster {
        w.s(".reqnctapercluster ");
        w.dims(dims);
    }
    w.s("{\n");
    for (slot, ty) in PtxType::ALL.iter().enumerate() {
        let n = k.reg_counts[slot];
        if n > 0 {
            w.s("\t.reg ");
            w.ty(*ty);
            w.c(b' ');
            w.pad(&SIGIL[*ty as usize]);
            w.c(b'<');
            w.u(n as u64);
            w.s(">;\n");
        }
    }
    for s in k.shared.iter().filter(|s| s.count > 0) {
        w.s("\t.shared .align ");
        w.u(s.align as u64);
        w.c(b' ');
        w.ty(s.ty);
        w.c(b' ');
        w.name(s.name);
        w.c(b'[');
        w.u(s.count as u64);
        w.s("];\n");
    }
    w.c(b'\n');
    for i in &k.insts {
        if !matches!(i.op, Op::Label(_)) {
            w.c(b'\t');
        }
        write_inst(&mut w, i);
        w.c(b'\n');
    }
    w.s("}\n");
    w.finish();
}

#[cfg(test)]
mod tests {
    use super::super::types::Space;
    use super::*;

    /// The padded tables spell what the named functions spell, entry by entry.
    #[test]
    fn tables_match_their_functions() {
        const SPACES: [Space; 5] = [Space::Global, Space::Shared, Space::Param, Space::Local, Space::Const];
        let text = |p: &[u8], n: usize| String::from_utf8(p[..n].to_vec()).unwrap();
        for t in PtxType::ALL {
            assert_eq!(text(&DOTTED[t as usize].b, DOTTED[t as usize].n), t.dotted());
            assert_eq!(text(&SIGIL[t as usize].b, SIGIL[t as usize].n), t.reg_sigil());
            for (i, op) in BIN_OPS.iter().enumerate() {
                assert_eq!(*op as usize, i);
                let p = &BIN_OPC[i][t.is_float() as usize];
                assert_eq!(text(&p.b, p.n), op.opcode(t));
            }
            for (i, op) in UN_OPS.iter().enumerate() {
                assert_eq!(*op as usize, i);
                let p = &UN_OPC[i][(t == PtxType::F32) as usize];
                assert_eq!(text(&p.b, p.n), op.opcode(t));
            }
        }
        for (i, s) in SPACES.iter().enumerate() {
            assert_eq!(*s as usize, i);
            assert_eq!(text(&LD[i].b, LD[i].n), format!("ld.{}", s.name()));
            assert_eq!(text(&ST[i].b, ST[i].n), format!("st.{}", s.name()));
        }
        use Special::*;
        for s in [
            TidX, TidY, TidZ, NtidX, NtidY, CtaidX, CtaidY, CtaidZ, NctaidX, NctaidY, LaneId, WarpId, SmId, Clock64, ClusterCtaRank, ClusterIdX,
            NclusterIdX,
        ] {
            assert_eq!(text(&SPECIAL[s as usize].b, SPECIAL[s as usize].n), s.name());
        }
        let k = PtxKernel::new("t");
        for v in [0u64, 7, 10, 99, 100, 101, 999, 1000, 3968, 9999, 10000, 65535, 1 << 40, u64::MAX] {
            let mut out = vec![];
            put_u64(&mut out, v);
            assert_eq!(String::from_utf8(out).unwrap(), v.to_string());
            let mut out = vec![];
            let mut w = W::new(&mut out, &k);
            w.u(v);
            w.finish();
            assert_eq!(String::from_utf8(out).unwrap(), v.to_string());
        }
    }
}
