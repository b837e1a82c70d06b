//! PTX text from a module and its kernels.

use super::instr::*;
use super::kernel::PtxKernel;
use super::types::PtxType;
use std::fmt::Write;

pub(crate) fn operand(o: &Operand) -> String {
    match o {
        Operand::Reg(r) => r.name(),
        Operand::Int(v) => v.to_string(),
        Operand::F32(v) => format!("0f{:08X}", v.to_bits()),
        Operand::F64(v) => format!("0d{:016X}", v.to_bits()),
        Operand::Special(s) => s.name().to_string(),
        Operand::Symbol(s) => s.clone(),
    }
}

fn addr(a: &Addr) -> String {
    if a.offset == 0 {
        format!("[{}]", operand(&a.base))
    } else {
        format!("[{}+{}]", operand(&a.base), a.offset)
    }
}

fn vec_suffix(n: usize) -> String {
    if n > 1 {
        format!(".v{n}")
    } else {
        String::new()
    }
}

fn reg_list(rs: &[Reg]) -> String {
    if rs.len() == 1 {
        rs[0].name()
    } else {
        format!("{{{}}}", rs.iter().map(|r| r.name()).collect::<Vec<_>>().join(", "))
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
    let guard = match i.guard {
        Some((p, false)) => format!("@{} ", p.name()),
        Some((p, true)) => format!("@!{} ", p.name()),
        None => String::new(),
    };
    let body = match &i.op {
        Op::Mov { ty, d, a } => format!("mov.{ty} {}, {};", d.name(), operand(a)),
        Op::Un { op, ty, d, a } => format!("{}.{ty} {}, {};", op.opcode(*ty), d.name(), operand(a)),
        Op::Bin { op, ty, d, a, b } => {
            format!("{}.{ty} {}, {}, {};", op.opcode(*ty), d.name(), operand(a), operand(b))
        }
        Op::Fma { ty, d, a, b, c } => {
            let opc = if ty.is_float() { "fma.rn" } else { "mad.lo" };
            format!("{opc}.{ty} {}, {}, {}, {};", d.name(), operand(a), operand(b), operand(c))
        }
        Op::MadWide { ty, d, a, b, c } => {
            format!("mad.wide.{ty} {}, {}, {}, {};", d.name(), operand(a), operand(b), operand(c))
        }
        Op::Setp { cmp, ty, d, a, b } => {
            format!("setp.{}.{ty} {}, {}, {};", cmp.name(), d.name(), operand(a), operand(b))
        }
        Op::Selp { ty, d, a, b, p } => {
            format!("selp.{ty} {}, {}, {}, {};", d.name(), operand(a), operand(b), p.name())
        }
        Op::Cvt { rnd, dty, sty, d, a } => {
            let r = rnd.map(|r| format!(".{r}")).unwrap_or_default();
            format!("cvt{r}.{dty}.{sty} {}, {};", d.name(), operand(a))
        }
        Op::CvtaTo { space, d, a } => format!("cvta.to.{}.u64 {}, {};", space.name(), d.name(), a.name()),
        Op::Ld { space, ty, dst, addr: ad, nc } => {
            let nc = if *nc { ".nc" } else { "" };
            format!("ld.{}{nc}{}.{ty} {}, {};", space.name(), vec_suffix(dst.len()), reg_list(dst), addr(ad))
        }
        Op::LdParam { ty, d, name } => format!("ld.param.{ty} {}, [{name}];", d.name()),
        Op::St { space, ty, src, addr: ad } => {
            let vals = if src.len() == 1 {
                operand(&src[0])
            } else {
                format!("{{{}}}", src.iter().map(operand).collect::<Vec<_>>().join(", "))
            };
            format!("st.{}{}.{ty} {}, {vals};", space.name(), vec_suffix(src.len()), addr(ad))
        }
        Op::Atom { space, op, ty, d, addr: ad, b } => {
            format!("atom.{}.{}.{ty} {}, {}, {};", space.name(), atom_name(*op), d.name(), addr(ad), operand(b))
        }
        Op::Red { space, op, ty, addr: ad, b } => {
            format!("red.{}.{}.{ty} {}, {};", space.name(), atom_name(*op), addr(ad), operand(b))
        }
        Op::Shfl { mode, d, a, b, c, mask } => {
            let m = match mode {
                ShflMode::Up => "up",
                ShflMode::Down => "down",
                ShflMode::Bfly => "bfly",
                ShflMode::Idx => "idx",
            };
            format!("shfl.sync.{m}.b32 {}, {}, {}, {c}, {mask:#x};", d.name(), operand(a), operand(b))
        }
        Op::Vote { mode, d, a, mask } => {
            let m = match mode {
                VoteMode::All => "all.pred",
                VoteMode::Any => "any.pred",
                VoteMode::Ballot => "ballot.b32",
            };
            format!("vote.sync.{m} {}, {}, {mask:#x};", d.name(), a.name())
        }
        Op::Label(l) => return format!("{l}:"),
        Op::Bra { target, uni } => format!("bra{} {target};", if *uni { ".uni" } else { "" }),
        Op::BarSync(n) => format!("bar.sync {n};"),
        Op::MembarGl => "membar.gl;".to_string(),
        Op::Ret => "ret;".to_string(),
    };
    guard + &body
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
        if matches!(i.op, Op::Label(_)) {
            let _ = writeln!(out, "{}", inst(i));
        } else {
            let _ = writeln!(out, "\t{}", inst(i));
        }
    }
    out.push_str("}\n");
}
