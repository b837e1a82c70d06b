//! The checker: rejects ill-typed instructions, registers read before any write, registers from
//! another kernel, unknown parameters, shared arrays and labels — before an assembler sees them.

use super::emit;
use super::instr::*;
use super::kernel::{type_slot, PtxKernel};
use super::names::Name;
use super::types::{PtxType, Space, TypeClass};
use core::fmt;
use std::collections::HashSet;

/// Why a program was rejected: the kernel, the instruction index and its text, and the reason.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckError {
    pub kernel: String,
    /// Index into the kernel's instruction list (`None` for module/kernel-level problems).
    pub index: Option<usize>,
    pub instruction: String,
    pub message: String,
}

impl CheckError {
    pub(crate) fn module(message: String) -> CheckError {
        CheckError { kernel: String::new(), index: None, instruction: String::new(), message }
    }
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "kernel {}, instruction {i} `{}`: {}", self.kernel, self.instruction, self.message),
            None if self.kernel.is_empty() => write!(f, "module: {}", self.message),
            None => write!(f, "kernel {}: {}", self.kernel, self.message),
        }
    }
}

impl std::error::Error for CheckError {}

struct Ctx<'a> {
    k: &'a PtxKernel,
    /// Whether each register has been written, by type slot and register index.
    defined: [Vec<bool>; 13],
}

type R = Result<(), String>;

impl Ctx<'_> {
    fn own(&self, r: Reg) -> R {
        if r.kernel != self.k.id || r.index >= self.k.reg_counts[type_slot(r.ty)] {
            return Err(format!("register {} was not declared by this kernel", r.name()));
        }
        Ok(())
    }
    fn read(&self, r: Reg) -> R {
        self.own(r)?;
        if !self.defined[type_slot(r.ty)][r.index as usize] {
            return Err(format!("register {} is read before any instruction writes it", r.name()));
        }
        Ok(())
    }
    /// A read operand of instruction type `ty`.
    fn src(&self, o: &Operand, ty: PtxType) -> R {
        match o {
            Operand::Reg(r) => {
                self.read(*r)?;
                if !ty.accepts(r.ty) {
                    return Err(format!("operand {} has type .{} where .{ty} is needed", r.name(), r.ty));
                }
            }
            Operand::Int(_) => {
                if !(ty.is_int() || ty.class() == TypeClass::Bits) {
                    return Err(format!("integer immediate where .{ty} is needed"));
                }
            }
            Operand::F32(_) => {
                if ty != PtxType::F32 && ty != PtxType::B32 {
                    return Err(format!("f32 immediate where .{ty} is needed"));
                }
            }
            Operand::F64(_) => {
                if ty != PtxType::F64 && ty != PtxType::B64 {
                    return Err(format!("f64 immediate where .{ty} is needed"));
                }
            }
            Operand::Special(s) => {
                if !ty.accepts(s.ty()) {
                    return Err(format!("{} is .{} where .{ty} is needed", s.name(), s.ty()));
                }
            }
            Operand::Symbol(name) => {
                if !self.k.shared.iter().any(|s| s.name == *name) {
                    return Err(format!("unknown symbol {}", self.text(*name)));
                }
                if !(ty.is_int() || ty.class() == TypeClass::Bits) || ty.bits() < 32 {
                    return Err(format!("address of {} needs a 32/64-bit integer type, not .{ty}", self.text(*name)));
                }
            }
        }
        Ok(())
    }
    fn dst(&self, d: Reg, ty: PtxType) -> R {
        self.own(d)?;
        if !ty.accepts(d.ty) {
            return Err(format!("destination {} has type .{} where .{ty} is needed", d.name(), d.ty));
        }
        Ok(())
    }
    fn addr(&self, a: &Addr, space: Space) -> R {
        match &a.base {
            Operand::Reg(r) => {
                self.read(*r)?;
                let ok =
                    r.ty.class() != TypeClass::Float && r.ty != PtxType::Pred && (r.ty.bits() == 64 || (r.ty.bits() == 32 && space == Space::Shared));
                if !ok {
                    return Err(format!("address register {} is .{}: needs a 64-bit integer (32-bit for shared)", r.name(), r.ty));
                }
            }
            Operand::Symbol(name) => {
                if space != Space::Shared || !self.k.shared.iter().any(|s| s.name == *name) {
                    return Err(format!("unknown {} symbol {}", space.name(), self.text(*name)));
                }
            }
            _ => return Err("an address must be a register or a symbol".into()),
        }
        Ok(())
    }
    fn mem_width(&self, ty: PtxType, n: usize) -> R {
        if !matches!(n, 1 | 2 | 4) || ty.bits() as usize * n > 128 || ty == PtxType::Pred {
            return Err(format!("a .v{n}.{ty} access is not allowed"));
        }
        Ok(())
    }

    /// A name's text, or its index when it is not this kernel's.
    fn text(&self, n: Name) -> String {
        match self.k.resolve(n) {
            "" => format!("$sym{} of another kernel", n.index),
            s => s.to_string(),
        }
    }

    fn op(&self, op: &Op, labels: &HashSet<Name>) -> R {
        match op {
            Op::Mov { ty, d, a } => {
                self.dst(*d, *ty)?;
                self.src(a, *ty)
            }
            Op::Un { op, ty, d, a } => {
                if !op.allows(*ty) {
                    return Err(format!("{:?} is not defined for .{ty}", op));
                }
                self.dst(*d, *ty)?;
                self.src(a, *ty)
            }
            Op::Bin { op, ty, d, a, b } => {
                if !op.allows(*ty) {
                    return Err(format!("{:?} is not defined for .{ty}", op));
                }
                match op {
                    BinOp::MulWide => {
                        let w = ty.widened().ok_or_else(|| format!("mul.wide needs a 16/32-bit type, not .{ty}"))?;
                        self.dst(*d, w)?;
                        self.src(a, *ty)?;
                        self.src(b, *ty)
                    }
                    BinOp::Shl | BinOp::Shr => {
                        self.dst(*d, *ty)?;
                        self.src(a, *ty)?;
                        self.src(b, PtxType::U32)
                    }
                    _ => {
                        self.dst(*d, *ty)?;
                        self.src(a, *ty)?;
                        self.src(b, *ty)
                    }
                }
            }
            Op::Fma { ty, d, a, b, c } => {
                if !(ty.is_float() || ty.is_int()) {
                    return Err(format!("fma/mad is not defined for .{ty}"));
                }
                self.dst(*d, *ty)?;
                self.src(a, *ty)?;
                self.src(b, *ty)?;
                self.src(c, *ty)
            }
            Op::MadWide { ty, d, a, b, c } => {
                let w = ty.widened().filter(|_| ty.is_int()).ok_or_else(|| format!("mad.wide needs a 16/32-bit integer, not .{ty}"))?;
                self.dst(*d, w)?;
                self.src(a, *ty)?;
                self.src(b, *ty)?;
                self.src(c, w)
            }
            Op::Setp { ty, d, a, b, .. } => {
                if *ty == PtxType::Pred {
                    return Err("setp cannot compare predicates".into());
                }
                self.dst(*d, PtxType::Pred)?;
                self.src(a, *ty)?;
                self.src(b, *ty)
            }
            Op::Selp { ty, d, a, b, p } => {
                self.dst(*d, *ty)?;
                self.src(a, *ty)?;
                self.src(b, *ty)?;
                self.src(&Operand::Reg(*p), PtxType::Pred)
            }
            Op::Cvt { dty, sty, d, a, .. } => {
                if *dty == PtxType::Pred || *sty == PtxType::Pred {
                    return Err("cvt does not convert predicates".into());
                }
                self.dst(*d, *dty)?;
                self.src(a, *sty)
            }
            Op::CvtaTo { d, a, .. } => {
                self.dst(*d, PtxType::U64)?;
                self.src(&Operand::Reg(*a), PtxType::U64)
            }
            Op::Ld { space, ty, dst, addr, .. } => {
                self.mem_width(*ty, dst.len())?;
                self.addr(addr, *space)?;
                dst.iter().try_for_each(|d| self.dst(*d, *ty))
            }
            Op::ParamAddr { d, name } => {
                let p = self.k.params.iter().find(|p| p.name == *name).ok_or_else(|| format!("unknown parameter {}", self.text(*name)))?;
                if p.bytes == 0 {
                    return Err(format!("parameter {} is a scalar: load it, its address is for by-value bytes", self.text(*name)));
                }
                self.dst(*d, PtxType::U64)
            }
            Op::LdParam { ty, d, name } => {
                let p = self.k.params.iter().find(|p| p.name == *name).ok_or_else(|| format!("unknown parameter {}", self.text(*name)))?;
                if p.bytes > 0 {
                    return Err(format!("parameter {} is {} bytes by value: take its address", self.text(*name), p.bytes));
                }
                if p.ty != *ty {
                    return Err(format!("parameter {} is .{} but is loaded as .{ty}", self.text(*name), p.ty));
                }
                self.dst(*d, *ty)
            }
            Op::St { space, ty, src, addr } => {
                if *space == Space::Param || *space == Space::Const {
                    return Err(format!("cannot store to .{}", space.name()));
                }
                self.mem_width(*ty, src.len())?;
                self.addr(addr, *space)?;
                src.iter().try_for_each(|s| self.src(s, *ty))
            }
            Op::Atom { space, op, ty, d, addr, b } => {
                self.atom_type(*op, *ty, *space)?;
                self.dst(*d, *ty)?;
                self.addr(addr, *space)?;
                self.src(b, *ty)
            }
            Op::Red { space, op, ty, addr, b } => {
                self.atom_type(*op, *ty, *space)?;
                self.addr(addr, *space)?;
                self.src(b, *ty)
            }
            Op::Shfl { d, a, b, c, .. } => {
                if *c > 0x1f1f {
                    return Err(format!("shfl clamp/mask operand {c:#x} out of range"));
                }
                self.dst(*d, PtxType::B32)?;
                self.src(a, PtxType::B32)?;
                self.src(b, PtxType::U32)
            }
            Op::Vote { mode, d, a, .. } => {
                let dty = if *mode == VoteMode::Ballot { PtxType::B32 } else { PtxType::Pred };
                self.dst(*d, dty)?;
                self.src(&Operand::Reg(*a), PtxType::Pred)
            }
            Op::Bra { target, .. } => {
                if !labels.contains(target) {
                    return Err(format!("branch to undefined label {}", self.text(*target)));
                }
                Ok(())
            }
            Op::CvtTf32 { d, a } => {
                self.dst(*d, PtxType::B32)?;
                self.src(&Operand::Reg(*a), PtxType::F32)
            }
            Op::Dp4a { d, a, b, c, a_signed, b_signed } => {
                self.dst(*d, PtxType::S32)?;
                let ty = |signed: bool| if signed { PtxType::S32 } else { PtxType::U32 };
                self.src(a, ty(*a_signed))?;
                self.src(b, ty(*b_signed))?;
                self.src(c, PtxType::S32)
            }
            Op::Unpack16 { lo, hi, a } => {
                self.dst(*lo, PtxType::B16)?;
                self.dst(*hi, PtxType::B16)?;
                self.src(&Operand::Reg(*a), PtxType::B32)
            }
            Op::CvtF16x2 { d, hi, lo, .. } => {
                self.dst(*d, PtxType::B32)?;
                self.src(&Operand::Reg(*hi), PtxType::F32)?;
                self.src(&Operand::Reg(*lo), PtxType::F32)
            }
            Op::Ldmatrix { d, addr, .. } => {
                self.addr(addr, Space::Shared)?;
                d.iter().try_for_each(|r| self.dst(*r, PtxType::B32))
            }
            Op::CpAsync { dst, src } => {
                self.addr(dst, Space::Shared)?;
                self.addr(src, Space::Global)
            }
            Op::Mma(i) => {
                let m = self.k.mma(*i).ok_or_else(|| format!("mma {i} was not recorded by this kernel"))?;
                let (d, a, b, c) = (&m.d, &m.a, &m.b, &m.c);
                d.iter().try_for_each(|r| self.dst(*r, PtxType::F32))?;
                a.iter().chain(b).try_for_each(|r| self.src(&Operand::Reg(*r), PtxType::B32))?;
                c.iter().try_for_each(|r| self.src(&Operand::Reg(*r), PtxType::F32))
            }
            Op::PrefetchL2 { addr } => self.addr(addr, Space::Global),
            Op::LdL2 { d, addr } => {
                self.addr(addr, Space::Global)?;
                self.dst(*d, PtxType::F32)
            }
            Op::Wgmma(i) => {
                let m = self.k.wgmma(*i).ok_or_else(|| format!("wgmma {i} was not recorded by this kernel"))?;
                if m.n % 8 != 0 || !(8..=256).contains(&m.n) || m.d.len() != m.n as usize / 2 || (m.trans_b && m.ty == super::WgmmaType::TF32) {
                    return Err(format!("wgmma m64n{}k16 with {} accumulators (N a multiple of 8 up to 256, N/2 registers)", m.n, m.d.len()));
                }
                m.d.iter().try_for_each(|r| self.dst(*r, PtxType::F32))?;
                match m.a {
                    super::hopper::WgmmaA::Desc(a) => self.src(&Operand::Reg(a), PtxType::B64)?,
                    super::hopper::WgmmaA::Regs(a) => {
                        if m.ty == super::WgmmaType::TF32 {
                            return Err("wgmma with A in registers takes f16 or bf16".into());
                        }
                        a.iter().try_for_each(|r| self.src(&Operand::Reg(*r), PtxType::B32))?
                    }
                }
                self.src(&Operand::Reg(m.b), PtxType::B64)?;
                self.src(&Operand::Reg(m.scale_d), PtxType::Pred)
            }
            Op::MbarInit { addr, .. } | Op::MbarArrive { addr, .. } | Op::MbarArriveRemote { addr } => self.addr(addr, Space::Shared),
            Op::Mapa { d, a, rank } => {
                self.dst(*d, PtxType::U32)?;
                self.src(&Operand::Reg(*a), PtxType::U32)?;
                self.src(rank, PtxType::U32)
            }
            Op::MbarTryWait { p, addr, parity } => {
                self.dst(*p, PtxType::Pred)?;
                self.addr(addr, Space::Shared)?;
                self.src(parity, PtxType::U32)
            }
            Op::TmaLoad { dst, map, x, y, z, bar, multicast } => {
                self.addr(dst, Space::Shared)?;
                self.addr(bar, Space::Shared)?;
                self.src(&Operand::Reg(*map), PtxType::B64)?;
                multicast.iter().try_for_each(|m| self.src(&Operand::Reg(*m), PtxType::B16))?;
                z.iter().chain([x, y]).try_for_each(|c| self.src(c, PtxType::S32))
            }
            Op::SetMaxNReg { n, .. } => {
                if *n % 8 != 0 || !(24..=256).contains(n) {
                    return Err(format!("setmaxnreg {n}: a multiple of 8 in 24..=256"));
                }
                Ok(())
            }
            Op::WgmmaFence | Op::WgmmaCommit | Op::WgmmaWait(_) | Op::FenceProxyAsync | Op::FenceMbarrierInit | Op::ClusterSync => Ok(()),
            Op::Label(_) | Op::BarSync(_) | Op::MembarGl | Op::GridDepWait | Op::GridDepLaunch | Op::CpAsyncCommit | Op::CpAsyncWait(_) | Op::Ret => {
                Ok(())
            }
        }
    }

    fn atom_type(&self, op: AtomOp, ty: PtxType, space: Space) -> R {
        if space != Space::Global && space != Space::Shared {
            return Err(format!("atomics need .global or .shared, not .{}", space.name()));
        }
        let ok = match op {
            AtomOp::Add => ty.is_int() || ty == PtxType::F32 || ty == PtxType::F64,
            AtomOp::Min | AtomOp::Max => ty.is_int(),
            AtomOp::And | AtomOp::Or => ty.class() == TypeClass::Bits,
            AtomOp::Exch => ty.bits() >= 32 && ty != PtxType::F64 || ty == PtxType::B64,
        };
        if !ok || ty.bits() < 32 {
            return Err(format!("atom {op:?} is not defined for .{ty}"));
        }
        Ok(())
    }
}

/// Checks one kernel; the first problem found is returned.
pub fn check_kernel(k: &PtxKernel) -> Result<(), CheckError> {
    let fail = |index: Option<usize>, message: String| CheckError {
        kernel: k.name.clone(),
        index,
        instruction: index.map(|i| emit::inst(k, &k.insts[i])).unwrap_or_default(),
        message,
    };
    if k.name.is_empty() || !k.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(fail(None, format!("kernel name {:?} is not an identifier", k.name)));
    }
    let mut seen = HashSet::new();
    for p in &k.params {
        let name = k.resolve(p.name);
        if !seen.insert(p.name) {
            return Err(fail(None, format!("parameter {name} declared twice")));
        }
        if p.ty == PtxType::Pred {
            return Err(fail(None, format!("parameter {name} cannot be a predicate")));
        }
    }
    for s in &k.shared {
        let name = k.resolve(s.name);
        if !seen.insert(s.name) {
            return Err(fail(None, format!("name {name} declared twice")));
        }
        // count 0: the dynamic shared memory (`PtxKernel::dynamic_shared`), one at most
        if (s.count == 0 && k.shared.iter().filter(|d| d.count == 0).count() > 1) || !s.align.is_power_of_two() {
            return Err(fail(None, format!("shared array {name} has count {} and align {}", s.count, s.align)));
        }
    }
    if k.shared_bytes() > 48 * 1024 {
        return Err(fail(None, format!("static shared memory {} bytes exceeds 49152", k.shared_bytes())));
    }
    let mut labels = HashSet::new();
    for (i, inst) in k.insts.iter().enumerate() {
        if let Op::Label(l) = &inst.op {
            if !labels.insert(*l) {
                return Err(fail(Some(i), format!("label {} defined twice", k.resolve(*l))));
            }
        }
    }
    let mut cx = Ctx { k, defined: core::array::from_fn(|slot| vec![false; k.reg_counts[slot] as usize]) };
    for (i, inst) in k.insts.iter().enumerate() {
        if let Some((p, _)) = inst.guard {
            cx.src(&Operand::Reg(p), PtxType::Pred).map_err(|m| fail(Some(i), format!("guard: {m}")))?;
        }
        cx.op(&inst.op, &labels).map_err(|m| fail(Some(i), m))?;
        for d in inst.op.defs(k).iter() {
            cx.defined[type_slot(d.ty)][d.index as usize] = true;
        }
    }
    Ok(())
}
