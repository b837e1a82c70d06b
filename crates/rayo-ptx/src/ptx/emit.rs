//! PTX text from a module and its kernels: each instruction's spelling and the `.entry` with its
//! declarations. Emission is the hot path of kernel generation, so text goes through the byte
//! writer of `writer.rs` (short pieces copied from padded tables, no `fmt`); Hopper's
//! asynchronous instructions are spelled in `hopper.rs`.

use super::instr::*;
use super::kernel::PtxKernel;
use super::types::PtxType;
use core::fmt;

mod hopper;
mod writer;

use writer::*;
pub(crate) use writer::{into_string, put_u64};

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
            // (a phase of a persistent kernel reads what earlier phases of the same launch
            // wrote: never through the read-only path)
            if *nc && w.func.is_none() {
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
            match w.func {
                // the sub-block's own (barrier 0 is the persistent kernel's; a device function
                // has one barrier, whatever number the kernel gave it)
                Some(threads) => {
                    w.s("%vbar, ");
                    w.u(threads as u64);
                }
                None => w.u(*n as u64),
            }
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
/// `k` as a `.func` a persistent kernel calls once per virtual block of a phase
/// ([`crate::kernels::PersistentKernel`]), run by a *sub-block* of `threads` threads of the
/// calling block, one of `subs` side by side. The same body, with:
/// - the block index, the grid, the block's size and the thread's index in it (`%ctaid`,
///   `%nctaid`, `%ntid`, `%tid.x`) read from leading `.u32` parameters (`__vsp0..7`, in the
///   order of `VIRTUAL_SPECIALS`), then the sub-block's index (`__vsub`) and its barrier
///   (`__vbar`);
/// - `griddepcontrol` as it is: a no-op in a launch without programmatic dependencies (the
///   persistent kernel's grid barriers order the phases);
/// - each shared array declared at module scope as `{function}__{array}`, `subs` times its
///   size, the sub-block's copy at `sub ·` its bytes (the function is `{kernel}__t{threads}`);
/// - every block barrier the sub-block's named barrier of `threads` threads (the threads of
///   the sub-block past them do not call);
/// - no load through the read-only path.
///
/// Launch bounds and clusters are the calling kernel's.
pub(crate) fn device_function(k: &PtxKernel, threads: u32, subs: u32, out: &mut Vec<u8>) {
    let fname = device_function_name(&k.name, threads);
    let mut w = W::new(out, k);
    w.func = Some(threads);
    for s in &k.shared {
        if s.count == 0 {
            w.s(".extern .shared .align ");
            w.u(s.align as u64);
            w.s(" .b8 ");
        } else {
            w.s(".shared .align ");
            w.u(s.align as u64);
            w.c(b' ');
            w.ty(s.ty);
            w.c(b' ');
        }
        w.s(&fname);
        w.s("__");
        w.name(s.name);
        if s.count == 0 {
            w.s("[];\n");
        } else {
            w.c(b'[');
            w.u(s.count as u64 * subs as u64);
            w.s("];\n");
        }
    }
    w.s(".func ");
    w.s(&fname);
    w.c(b'(');
    for i in 0..writer::VIRTUAL_SPECIALS.len() {
        w.s("\n\t.param .u32 __vsp");
        w.u(i as u64);
        w.c(b',');
    }
    w.s("\n\t.param .u32 __vsub,\n\t.param .u32 __vbar");
    for p in &k.params {
        w.s(",\n\t.param ");
        w.ty(p.ty);
        w.c(b' ');
        w.name(p.name);
    }
    w.s("\n)\n{\n");
    registers(&mut w, k);
    w.s("\t.reg .u32 %vsp<");
    w.u(writer::VIRTUAL_SPECIALS.len() as u64);
    w.s(">;\n\t.reg .u32 %vsub;\n\t.reg .u32 %vbar;\n");
    if !k.shared.is_empty() {
        w.s("\t.reg .u32 %vsh<");
        w.u(k.shared.len() as u64);
        w.s(">;\n");
    }
    for i in 0..writer::VIRTUAL_SPECIALS.len() {
        w.s("\tld.param.u32 %vsp");
        w.u(i as u64);
        w.s(", [__vsp");
        w.u(i as u64);
        w.s("];\n");
    }
    w.s("\tld.param.u32 %vsub, [__vsub];\n\tld.param.u32 %vbar, [__vbar];\n");
    // the sub-block's copy of each shared array (dynamic shared memory is not split)
    for (i, s) in k.shared.iter().enumerate() {
        w.s("\tmov.u32 %vsh");
        w.u(i as u64);
        w.s(", ");
        w.s(&fname);
        w.s("__");
        w.name(s.name);
        w.s(";\n");
        if s.count > 0 {
            w.s("\tmad.lo.u32 %vsh");
            w.u(i as u64);
            w.s(", %vsub, ");
            w.u(s.count as u64 * s.ty.bytes() as u64);
            w.s(", %vsh");
            w.u(i as u64);
            w.s(";\n");
        }
    }
    w.c(b'\n');
    instructions(&mut w, k);
    w.finish();
}

/// The `.reg` declarations of `k`'s registers, by type.
fn registers(w: &mut W, k: &PtxKernel) {
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
}

/// `k`'s instructions, a line each, and the body's closing brace.
fn instructions(w: &mut W, k: &PtxKernel) {
    for i in &k.insts {
        if !matches!(i.op, Op::Label(_)) {
            w.c(b'\t');
        }
        write_inst(w, i);
        w.c(b'\n');
    }
    w.s("}\n");
}

/// The name of `kernel`'s device function for blocks of `threads`.
pub(crate) fn device_function_name(kernel: &str, threads: u32) -> String {
    format!("{kernel}__t{threads}")
}

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
    registers(&mut w, k);
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
    instructions(&mut w, k);
    w.finish();
}
