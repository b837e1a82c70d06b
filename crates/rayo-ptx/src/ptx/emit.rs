//! PTX text from a module and its kernels.

use super::instr::*;
use super::kernel::PtxKernel;
use super::types::PtxType;
use core::fmt;
use std::fmt::Write;

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}{}", self.ty.reg_prefix(), self.index)
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Reg(r) => r.fmt(f),
            Operand::Int(v) => write!(f, "{v}"),
            Operand::F32(v) => write!(f, "0f{:08X}", v.to_bits()),
            Operand::F64(v) => write!(f, "0d{:016X}", v.to_bits()),
            Operand::Special(s) => f.write_str(s.name()),
            Operand::Symbol(s) => f.write_str(s),
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

/// `{a, b, c, d}` or a single operand.
struct List<'a, T>(&'a [T]);

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

/// One instruction as a line of PTX (without indentation or newline).
pub(crate) fn inst(i: &Inst) -> String {
    let mut s = String::new();
    let _ = write_inst(&mut s, i);
    s
}

/// Appends itself to PTX text without going through `fmt` (emission is the hot path of
/// kernel generation).
pub(crate) trait Put {
    fn put(&self, out: &mut String);
}

impl Put for str {
    fn put(&self, out: &mut String) {
        out.push_str(self);
    }
}
impl<T: Put + ?Sized> Put for &T {
    fn put(&self, out: &mut String) {
        (**self).put(out)
    }
}
impl Put for String {
    fn put(&self, out: &mut String) {
        out.push_str(self);
    }
}
/// A type written with its leading dot (`.f32`).
impl Put for PtxType {
    fn put(&self, out: &mut String) {
        out.push_str(self.dotted());
    }
}
impl Put for u64 {
    #[inline(always)]
    fn put(&self, out: &mut String) {
        let v = *self;
        if v < 10 {
            out.push((b'0' + v as u8) as char);
        } else if v < 100 {
            out.push((b'0' + (v / 10) as u8) as char);
            out.push((b'0' + (v % 10) as u8) as char);
        } else {
            put_long(out, v);
        }
    }
}

#[inline(never)]
fn put_long(out: &mut String, v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut v = v;
    while v > 0 {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    for &b in &buf[i..] {
        out.push(b as char);
    }
}
impl Put for u32 {
    #[inline(always)]
    fn put(&self, out: &mut String) {
        (*self as u64).put(out)
    }
}
impl Put for i64 {
    fn put(&self, out: &mut String) {
        if *self < 0 {
            out.push('-');
        }
        self.unsigned_abs().put(out)
    }
}
fn hex(out: &mut String, v: u64, digits: u32) {
    const H: &[u8; 16] = b"0123456789ABCDEF";
    for k in (0..digits).rev() {
        out.push(H[((v >> (4 * k)) & 15) as usize] as char);
    }
}
impl Put for Reg {
    #[inline(always)]
    fn put(&self, out: &mut String) {
        out.push_str(self.ty.reg_sigil());
        self.index.put(out);
    }
}
impl Put for Operand {
    fn put(&self, out: &mut String) {
        match self {
            Operand::Reg(r) => r.put(out),
            Operand::Int(v) => v.put(out),
            Operand::F32(v) => {
                out.push_str("0f");
                hex(out, v.to_bits() as u64, 8);
            }
            Operand::F64(v) => {
                out.push_str("0d");
                hex(out, v.to_bits(), 16);
            }
            Operand::Special(s) => out.push_str(s.name()),
            Operand::Symbol(s) => out.push_str(s),
        }
    }
}
impl Put for Addr {
    fn put(&self, out: &mut String) {
        out.push('[');
        self.base.put(out);
        if self.offset != 0 {
            out.push('+');
            self.offset.put(out);
        }
        out.push(']');
    }
}
impl<T: Put> Put for List<'_, T> {
    fn put(&self, out: &mut String) {
        if self.0.len() == 1 {
            return self.0[0].put(out);
        }
        out.push('{');
        for (i, x) in self.0.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            x.put(out);
        }
        out.push('}');
    }
}

macro_rules! put {
    ($out:expr; $($x:expr),* $(,)?) => {{ $( Put::put(&$x, $out); )* }};
}

/// Writes one instruction straight into `out` (no intermediate strings, no `fmt`).
pub(crate) fn write_inst(out: &mut String, i: &Inst) -> fmt::Result {
    match i.guard {
        Some((p, false)) => put!(out; "@", p, " "),
        Some((p, true)) => put!(out; "@!", p, " "),
        None => {}
    }
    match &i.op {
        Op::Mov { ty, d, a } => put!(out; "mov", ty, " ", d, ", ", a, ";"),
        Op::Un { op, ty, d, a } => put!(out; op.opcode(*ty), ty, " ", d, ", ", a, ";"),
        Op::Bin { op, ty, d, a, b } => put!(out; op.opcode(*ty), ty, " ", d, ", ", a, ", ", b, ";"),
        Op::Fma { ty, d, a, b, c } => {
            let opc = if ty.is_float() { "fma.rn" } else { "mad.lo" };
            put!(out; opc, ty, " ", d, ", ", a, ", ", b, ", ", c, ";")
        }
        Op::MadWide { ty, d, a, b, c } => put!(out; "mad.wide", ty, " ", d, ", ", a, ", ", b, ", ", c, ";"),
        Op::Setp { cmp, ty, d, a, b } => put!(out; "setp.", cmp.name(), ty, " ", d, ", ", a, ", ", b, ";"),
        Op::Selp { ty, d, a, b, p } => put!(out; "selp", ty, " ", d, ", ", a, ", ", b, ", ", p, ";"),
        Op::Cvt { rnd, dty, sty, d, a } => {
            out.push_str("cvt");
            if let Some(r) = rnd {
                put!(out; ".", r);
            }
            put!(out; dty, sty, " ", d, ", ", a, ";")
        }
        Op::CvtaTo { space, d, a } => put!(out; "cvta.to.", space.name(), ".u64 ", d, ", ", a, ";"),
        Op::Ld { space, ty, dst, addr, nc } => {
            let nc = if *nc { ".nc" } else { "" };
            put!(out; "ld.", space.name(), nc, vec_suffix(dst.len()), ty, " ", List(&dst[..]), ", ", addr, ";")
        }
        Op::LdParam { ty, d, name } => put!(out; "ld.param", ty, " ", d, ", [", name, "];"),
        Op::St { space, ty, src, addr } => {
            put!(out; "st.", space.name(), vec_suffix(src.len()), ty, " ", addr, ", ", List(src), ";")
        }
        Op::Atom { space, op, ty, d, addr, b } => {
            put!(out; "atom.", space.name(), ".", atom_name(*op), ty, " ", d, ", ", addr, ", ", b, ";")
        }
        Op::Red { space, op, ty, addr, b } => {
            put!(out; "red.", space.name(), ".", atom_name(*op), ty, " ", addr, ", ", b, ";")
        }
        Op::Shfl { mode, d, a, b, c, mask } => {
            let m = match mode {
                ShflMode::Up => "up",
                ShflMode::Down => "down",
                ShflMode::Bfly => "bfly",
                ShflMode::Idx => "idx",
            };
            put!(out; "shfl.sync.", m, ".b32 ", d, ", ", a, ", ", b, ", ", c, ", 0x");
            hex(out, *mask as u64, 8);
            out.push(';');
        }
        Op::Vote { mode, d, a, mask } => {
            let m = match mode {
                VoteMode::All => "all.pred",
                VoteMode::Any => "any.pred",
                VoteMode::Ballot => "ballot.b32",
            };
            put!(out; "vote.sync.", m, " ", d, ", ", a, ", 0x");
            hex(out, *mask as u64, 8);
            out.push(';');
        }
        Op::CvtTf32 { d, a } => put!(out; "cvt.rna.tf32.f32 ", d, ", ", a, ";"),
        Op::MmaTf32(m) => put!(out; "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 ",
            List(&m.d[..]), ", ", List(&m.a[..]), ", ", List(&m.b[..]), ", ", List(&m.c[..]), ";"),
        Op::Label(l) => put!(out; l, ":"),
        Op::Bra { target, uni } => put!(out; "bra", if *uni { ".uni " } else { " " }, target, ";"),
        Op::BarSync(n) => put!(out; "bar.sync ", n, ";"),
        Op::MembarGl => out.push_str("membar.gl;"),
        Op::PrefetchL2 { addr } => put!(out; "prefetch.global.L2 ", addr, ";"),
        Op::LdL2 { d, addr } => put!(out; "ld.global.cg.f32 ", d, ", ", addr, ";"),
        Op::GridDepWait => out.push_str("griddepcontrol.wait;"),
        Op::GridDepLaunch => out.push_str("griddepcontrol.launch_dependents;"),
        Op::Ret => out.push_str("ret;"),
    }
    Ok(())
}

/// The `.entry` of one kernel.
pub(crate) fn kernel(k: &PtxKernel, out: &mut String) {
    let _ = write!(out, ".visible .entry {}(", k.name);
    for (i, p) in k.params.iter().enumerate() {
        let sep = if i + 1 < k.params.len() { "," } else { "" };
        let _ = write!(out, "\n\t.param .{} {}{sep}", p.ty, p.name);
    }
    out.push_str("\n)\n");
    if let Some((x, y, z)) = k.max_ntid {
        let _ = writeln!(out, ".maxntid {x}, {y}, {z}");
    }
    if let Some(m) = k.min_ctas {
        let _ = writeln!(out, ".minnctapersm {m}");
    }
    out.push_str("{\n");
    for (slot, ty) in PtxType::ALL.iter().enumerate() {
        let n = k.reg_counts[slot];
        if n > 0 {
            let _ = writeln!(out, "\t.reg .{ty} %{}<{n}>;", ty.reg_prefix());
        }
    }
    for s in &k.shared {
        let _ = writeln!(out, "\t.shared .align {} .{} {}[{}];", s.align, s.ty, s.name, s.count);
    }
    out.push('\n');
    for i in &k.insts {
        if !matches!(i.op, Op::Label(_)) {
            out.push('\t');
        }
        let _ = write_inst(out, i);
        out.push('\n');
    }
    out.push_str("}\n");
}
