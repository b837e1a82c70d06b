//! Virtual registers, operands and the instruction set the builder records.

use super::kernel::PtxKernel;
use super::names::Name;
use super::types::{PtxType, Space, Special};

/// A typed virtual register of one kernel. Created only by [`super::PtxKernel::reg`] and the
/// builder methods; `kernel` ties it to the kernel that declared it, so the checker can reject a
/// register that wandered in from another kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reg {
    pub(crate) kernel: u32,
    /// The register's number among the kernel's registers of its type (`%f<index>`).
    pub(crate) index: u32,
    pub(crate) ty: PtxType,
}

impl Reg {
    pub fn ty(self) -> PtxType {
        self.ty
    }
    /// The register's PTX name, e.g. `%f12`.
    pub fn name(self) -> String {
        self.to_string()
    }
}

/// An instruction operand (`Copy`: names are interned, see [`Name`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Operand {
    Reg(Reg),
    /// An integer immediate (also usable with bit types).
    Int(i64),
    /// A 32-bit float immediate, written exactly as `0fXXXXXXXX`.
    F32(f32),
    /// A 64-bit float immediate, written exactly as `0dXXXXXXXXXXXXXXXX`.
    F64(f64),
    Special(Special),
    /// The address of a module- or kernel-level variable (a shared-memory array).
    Symbol(Name),
}

impl From<Reg> for Operand {
    fn from(r: Reg) -> Self {
        Operand::Reg(r)
    }
}
impl From<&Reg> for Operand {
    fn from(r: &Reg) -> Self {
        Operand::Reg(*r)
    }
}
impl From<i64> for Operand {
    fn from(v: i64) -> Self {
        Operand::Int(v)
    }
}
impl From<i32> for Operand {
    fn from(v: i32) -> Self {
        Operand::Int(v as i64)
    }
}
impl From<u32> for Operand {
    fn from(v: u32) -> Self {
        Operand::Int(v as i64)
    }
}
impl From<f32> for Operand {
    fn from(v: f32) -> Self {
        Operand::F32(v)
    }
}
impl From<Special> for Operand {
    fn from(s: Special) -> Self {
        Operand::Special(s)
    }
}

/// A memory address `[base+offset]`: base is a register or a symbol.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Addr {
    pub base: Operand,
    pub offset: i64,
}

impl Addr {
    pub fn reg(r: Reg) -> Addr {
        Addr { base: Operand::Reg(r), offset: 0 }
    }
    pub fn at(r: Reg, offset: i64) -> Addr {
        Addr { base: Operand::Reg(r), offset }
    }
    pub fn sym(name: Name, offset: i64) -> Addr {
        Addr { base: Operand::Symbol(name), offset }
    }
}

/// Arithmetic with one source. The string is the opcode with its modifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Neg,
    Abs,
    Not,
    /// `sqrt.rn` (floats)
    Sqrt,
    /// `rcp.rn` (floats)
    Rcp,
    /// `rsqrt.approx` (f32)
    Rsqrt,
    /// `ex2.approx.ftz` (f32): 2^x
    Ex2,
    /// `lg2.approx.ftz` (f32): log2 x
    Lg2,
    /// `tanh.approx` (f32, sm_75+)
    Tanh,
}

impl UnOp {
    pub const fn opcode(self, ty: PtxType) -> &'static str {
        let f32 = matches!(ty, PtxType::F32);
        match self {
            UnOp::Neg => "neg",
            UnOp::Abs => "abs",
            UnOp::Not => "not",
            UnOp::Sqrt => "sqrt.rn",
            UnOp::Rcp => "rcp.rn",
            UnOp::Rsqrt => "rsqrt.approx",
            UnOp::Ex2 if f32 => "ex2.approx.ftz",
            UnOp::Ex2 => "ex2.approx",
            UnOp::Lg2 if f32 => "lg2.approx.ftz",
            UnOp::Lg2 => "lg2.approx",
            UnOp::Tanh => "tanh.approx",
        }
    }
    /// Whether the op exists for this type.
    pub fn allows(self, ty: PtxType) -> bool {
        match self {
            UnOp::Neg | UnOp::Abs => ty.is_float() || ty.class() == super::types::TypeClass::Signed,
            UnOp::Not => matches!(ty.class(), super::types::TypeClass::Bits | super::types::TypeClass::Pred),
            UnOp::Sqrt | UnOp::Rcp => ty == PtxType::F32 || ty == PtxType::F64,
            UnOp::Rsqrt | UnOp::Ex2 | UnOp::Lg2 | UnOp::Tanh => ty == PtxType::F32,
        }
    }
}

/// Arithmetic with two sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    /// `mul` for floats, `mul.lo` for integers
    Mul,
    /// `mul.hi` (integers)
    MulHi,
    /// `mul.wide`: the destination is twice as wide as the sources
    MulWide,
    /// `div.rn` for floats, `div` for integers
    Div,
    Rem,
    Min,
    Max,
    And,
    Or,
    Xor,
    /// shifts: the amount is a u32
    Shl,
    Shr,
}

impl BinOp {
    pub const fn opcode(self, ty: PtxType) -> &'static str {
        let float = ty.is_float();
        match self {
            BinOp::Add if float => "add.rn",
            BinOp::Add => "add",
            BinOp::Sub if float => "sub.rn",
            BinOp::Sub => "sub",
            BinOp::Mul if float => "mul.rn",
            BinOp::Mul => "mul.lo",
            BinOp::MulHi => "mul.hi",
            BinOp::MulWide => "mul.wide",
            BinOp::Div if float => "div.rn",
            BinOp::Div => "div",
            BinOp::Rem => "rem",
            BinOp::Min => "min",
            BinOp::Max => "max",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Xor => "xor",
            BinOp::Shl => "shl",
            BinOp::Shr => "shr",
        }
    }
    pub fn allows(self, ty: PtxType) -> bool {
        use super::types::TypeClass::*;
        match self {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Min | BinOp::Max => ty.is_float() || ty.is_int(),
            BinOp::MulHi | BinOp::Rem => ty.is_int(),
            BinOp::MulWide => ty.is_int() && ty.bits() <= 32,
            BinOp::And | BinOp::Or | BinOp::Xor => matches!(ty.class(), Bits | Pred),
            BinOp::Shl => ty.class() == Bits,
            BinOp::Shr => ty.class() != Float && ty.class() != Pred,
        }
    }
}

/// Comparison for `setp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    pub fn name(self) -> &'static str {
        match self {
            Cmp::Eq => "eq",
            Cmp::Ne => "ne",
            Cmp::Lt => "lt",
            Cmp::Le => "le",
            Cmp::Gt => "gt",
            Cmp::Ge => "ge",
        }
    }
}

/// `shfl.sync` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShflMode {
    Up,
    Down,
    Bfly,
    Idx,
}

/// `vote.sync` modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoteMode {
    All,
    Any,
    Ballot,
}

/// Atomic operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomOp {
    Add,
    Min,
    Max,
    Exch,
    And,
    Or,
}

/// A short list (a vector access's registers or values) held inline up to four; `Many` holds a
/// longer one, which the checker rejects as a memory access.
#[derive(Debug, Clone, PartialEq)]
pub enum Few<T> {
    One(T),
    Two([T; 2]),
    Four([T; 4]),
    Many(Vec<T>),
}

/// The destination registers of a load.
pub type Regs = Few<Reg>;

impl<T> core::ops::Deref for Few<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match self {
            Few::One(r) => core::slice::from_ref(r),
            Few::Two(r) => r,
            Few::Four(r) => r,
            Few::Many(v) => v,
        }
    }
}

impl<T: Copy> From<&[T]> for Few<T> {
    fn from(v: &[T]) -> Few<T> {
        match *v {
            [a] => Few::One(a),
            [a, b] => Few::Two([a, b]),
            [a, b, c, d] => Few::Four([a, b, c, d]),
            _ => Few::Many(v.to_vec()),
        }
    }
}

impl<T: Copy> From<Vec<T>> for Few<T> {
    fn from(v: Vec<T>) -> Few<T> {
        Few::from(&v[..])
    }
}

/// The operand types and shape of an `mma.sync` (f32 accumulators in both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MmaKind {
    /// `m16n8k8`, TF32 operands (a: 4 × .b32, one value each; b: 2).
    Tf32,
    /// `m16n8k16`, f16 operands (a: 4 × .b32, two halves each; b: 2).
    F16,
}

impl MmaKind {
    pub const fn opcode(self) -> &'static str {
        match self {
            MmaKind::Tf32 => "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 ",
            MmaKind::F16 => "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 ",
        }
    }
}

/// The register fragments of one `mma.sync` (see [`MmaKind`]): `d = a·b + c`.
#[derive(Debug, Clone, PartialEq)]
pub struct Mma {
    pub kind: MmaKind,
    pub d: [Reg; 4],
    pub a: [Reg; 4],
    pub b: [Reg; 2],
    pub c: [Reg; 4],
}

/// One instruction, optionally guarded by a predicate (`@%p` or `@!%p`).
#[derive(Debug, Clone, PartialEq)]
pub struct Inst {
    pub guard: Option<(Reg, bool)>,
    pub op: Op,
}

/// The instructions the builder can record.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Mov {
        ty: PtxType,
        d: Reg,
        a: Operand,
    },
    Un {
        op: UnOp,
        ty: PtxType,
        d: Reg,
        a: Operand,
    },
    Bin {
        op: BinOp,
        ty: PtxType,
        d: Reg,
        a: Operand,
        b: Operand,
    },
    /// `fma.rn` (floats) or `mad.lo` (integers): d = a*b + c
    Fma {
        ty: PtxType,
        d: Reg,
        a: Operand,
        b: Operand,
        c: Operand,
    },
    /// `mad.wide`: d (2x wide) = a*b + c
    MadWide {
        ty: PtxType,
        d: Reg,
        a: Operand,
        b: Operand,
        c: Operand,
    },
    Setp {
        cmp: Cmp,
        ty: PtxType,
        d: Reg,
        a: Operand,
        b: Operand,
    },
    Selp {
        ty: PtxType,
        d: Reg,
        a: Operand,
        b: Operand,
        p: Reg,
    },
    /// `cvt[.rnd].dty.sty`
    Cvt {
        rnd: Option<&'static str>,
        dty: PtxType,
        sty: PtxType,
        d: Reg,
        a: Operand,
    },
    /// `cvta.to.global.u64` and friends: generic address to a state space
    CvtaTo {
        space: Space,
        d: Reg,
        a: Reg,
    },
    /// `ld.space[.vN].ty`; `dst.len()` is the vector width (1, 2 or 4)
    Ld {
        space: Space,
        ty: PtxType,
        dst: Regs,
        addr: Addr,
        nc: bool,
    },
    /// `ld.param.ty d, [name]`
    LdParam {
        ty: PtxType,
        d: Reg,
        name: Name,
    },
    /// The generic address of the byte-array parameter `name` (`mov.b64` of its `.param`
    /// address, then `cvta.param.u64`): how a kernel hands a tensor map passed by value to TMA.
    ParamAddr {
        d: Reg,
        name: Name,
    },
    St {
        space: Space,
        ty: PtxType,
        src: Few<Operand>,
        addr: Addr,
    },
    Atom {
        space: Space,
        op: AtomOp,
        ty: PtxType,
        d: Reg,
        addr: Addr,
        b: Operand,
    },
    Red {
        space: Space,
        op: AtomOp,
        ty: PtxType,
        addr: Addr,
        b: Operand,
    },
    Shfl {
        mode: ShflMode,
        d: Reg,
        a: Operand,
        b: Operand,
        c: u32,
        mask: u32,
    },
    Vote {
        mode: VoteMode,
        d: Reg,
        a: Reg,
        mask: u32,
    },
    /// `cvt.rna.tf32.f32 d, a`: round an f32 to TF32 (the result is a .b32 bit pattern).
    CvtTf32 {
        d: Reg,
        a: Reg,
    },
    /// `mma.sync.aligned.m16n8kK.row.col.f32.T.T.f32 {d0..d3}, {a0..a3}, {b0, b1}, {c0..c3}`:
    /// one warp multiplies a 16×K tile by a K×8 one and adds a 16×8 f32 tile (K and T from
    /// the fragments' [`MmaKind`]). The fragments are the kernel's `mma(i)` (held aside:
    /// inline, they would make every instruction three times larger).
    Mma(u32),
    /// `dp4a.atype.btype d, a, b, c` (sm_61): `d = c + Σᵢ a.byteᵢ·b.byteᵢ`, each operand's bytes
    /// signed where its flag says so; `d` and `c` are .s32.
    Dp4a {
        d: Reg,
        a: Operand,
        b: Operand,
        c: Operand,
        a_signed: bool,
        b_signed: bool,
    },
    /// `mov.b32 {lo, hi}, a`: the two 16-bit halves of a 32-bit register.
    Unpack16 {
        lo: Reg,
        hi: Reg,
        a: Reg,
    },
    /// `cvt.rn.{f16x2,bf16x2}.f32 d, hi, lo`: two f32 rounded to f16 (bf16 with `bf16`) and
    /// packed (`lo` in the low half).
    CvtF16x2 {
        d: Reg,
        hi: Reg,
        lo: Reg,
        bf16: bool,
    },
    /// `ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 {d0..d3}, [addr]`: four 8×8 f16
    /// matrices from shared memory into one warp's mma fragments, lane `l` giving the address
    /// of row `l % 8` of matrix `l / 8`.
    Ldmatrix {
        d: [Reg; 4],
        addr: Addr,
        trans: bool,
    },
    /// `cp.async.cg.shared.global [dst], [src], 16` (sm_80): a 16-byte copy from global to
    /// shared memory that does not hold up the thread; [`Op::CpAsyncCommit`] closes a group,
    /// [`Op::CpAsyncWait`] waits until at most `n` groups are in flight.
    CpAsync {
        dst: Addr,
        src: Addr,
    },
    CpAsyncCommit,
    CpAsyncWait(u32),
    /// `wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T` on one warpgroup (held aside: the
    /// kernel's `wgmma(i)`, see [`super::hopper::Wgmma`]).
    Wgmma(u32),
    /// `wgmma.fence.sync.aligned`: orders register writes before the next wgmma.
    WgmmaFence,
    /// `wgmma.commit_group.sync.aligned`.
    WgmmaCommit,
    /// `wgmma.wait_group.sync.aligned n`: at most `n` groups still in flight.
    WgmmaWait(u32),
    /// `mbarrier.init.shared::cta.b64 [addr], count`.
    MbarInit {
        addr: Addr,
        count: u32,
    },
    /// `mbarrier.arrive[.expect_tx].shared::cta.b64 _, [addr][, tx]`: one arrival, and with
    /// `tx` the bytes the phase's asynchronous copies will complete.
    MbarArrive {
        addr: Addr,
        tx: Option<u32>,
    },
    /// `mbarrier.arrive.shared::cluster.b64 _, [addr]`: one arrival on an
    /// mbarrier of another block of the cluster (`addr` from [`Op::Mapa`]).
    MbarArriveRemote {
        addr: Addr,
    },
    /// `mapa.shared::cluster.u32 d, a, rank`: the address of shared location `a` in the block
    /// of rank `rank` of this cluster.
    Mapa {
        d: Reg,
        a: Reg,
        rank: Operand,
    },
    /// `fence.mbarrier_init.release.cluster`: mbarrier inits visible to the cluster.
    FenceMbarrierInit,
    /// `barrier.cluster.arrive` then `barrier.cluster.wait`: every thread of the cluster.
    ClusterSync,
    /// `mbarrier.try_wait.parity.shared::cta.b64 p, [addr], parity`: whether the phase of
    /// parity `parity` has completed (a bounded wait; loop on it).
    MbarTryWait {
        p: Reg,
        addr: Addr,
        parity: Operand,
    },
    /// `cp.async.bulk.tensor.{2d,3d}.shared::cluster.global.mbarrier::complete_tx::bytes
    /// [dst], [map, {x, y[, z]}], [bar]`: a tile of the tensor map `map` (a generic address)
    /// at coordinates (x innermost) into shared memory, completing on the mbarrier `bar`.
    TmaLoad {
        dst: Addr,
        map: Reg,
        x: Operand,
        y: Operand,
        z: Option<Operand>,
        bar: Addr,
        /// The `.multicast::cluster` mask (a .b16 register): the tile lands at `dst` in every
        /// block of the mask, completing on each one's mbarrier at `bar`.
        multicast: Option<Reg>,
    },
    /// `fence.proxy.async.shared::cta`: orders generic-proxy shared-memory accesses with the
    /// async proxy (TMA, wgmma).
    FenceProxyAsync,
    /// `setmaxnreg.{inc,dec}.sync.aligned.u32 n` (sm_90a): the warpgroup's register budget.
    SetMaxNReg {
        inc: bool,
        n: u32,
    },
    Label(Name),
    Bra {
        target: Name,
        uni: bool,
    },
    BarSync(u32),
    MembarGl,
    /// `ld.global.cg.f32 d, [addr]`: a load that bypasses L1 (sees what other blocks wrote
    /// before a fence, where L1 could hold an older line).
    LdL2 {
        d: Reg,
        addr: Addr,
    },
    /// `prefetch.global.L2 [addr]`: brings the line into L2 (a hint; no register written).
    PrefetchL2 {
        addr: Addr,
    },
    /// `griddepcontrol.wait` (sm_90): waits until the grids this one depends on (a launch with
    /// programmatic stream serialization) have completed and their writes are visible.
    GridDepWait,
    /// `griddepcontrol.launch_dependents` (sm_90): lets the next grid on the stream start.
    GridDepLaunch,
    Ret,
}

impl Op {
    /// Registers this instruction writes (the mma fragments are `k`'s).
    pub fn defs(&self, k: &PtxKernel) -> Few<Reg> {
        match self {
            Op::Mov { d, .. }
            | Op::Un { d, .. }
            | Op::Bin { d, .. }
            | Op::Fma { d, .. }
            | Op::MadWide { d, .. }
            | Op::Setp { d, .. }
            | Op::Selp { d, .. }
            | Op::Cvt { d, .. }
            | Op::CvtaTo { d, .. }
            | Op::LdParam { d, .. }
            | Op::ParamAddr { d, .. }
            | Op::Atom { d, .. }
            | Op::Shfl { d, .. }
            | Op::Vote { d, .. }
            | Op::CvtTf32 { d, .. }
            | Op::Dp4a { d, .. }
            | Op::LdL2 { d, .. } => Few::One(*d),
            Op::Mma(m) => k.mma(*m).map_or(Few::Many(vec![]), |m| Few::Four(m.d)),
            Op::Wgmma(m) => k.wgmma(*m).map_or(Few::Many(vec![]), |m| Few::Many(m.d.clone())),
            Op::MbarTryWait { p, .. } => Few::One(*p),
            Op::CvtF16x2 { d, .. } | Op::Mapa { d, .. } => Few::One(*d),
            Op::Unpack16 { lo, hi, .. } => Few::Many(vec![*lo, *hi]),
            Op::Ldmatrix { d, .. } => Few::Four(*d),
            Op::Ld { dst, .. } => dst.clone(),
            _ => Few::Many(vec![]),
        }
    }

    /// Operands this instruction reads (addresses included).
    pub fn uses(&self) -> Vec<&Operand> {
        fn addr(a: &Addr) -> &Operand {
            &a.base
        }
        match self {
            Op::Mov { a, .. } | Op::Un { a, .. } | Op::Cvt { a, .. } => vec![a],
            Op::Bin { a, b, .. } | Op::Setp { a, b, .. } => vec![a, b],
            Op::Fma { a, b, c, .. } | Op::MadWide { a, b, c, .. } | Op::Dp4a { a, b, c, .. } => vec![a, b, c],
            Op::Selp { a, b, .. } => vec![a, b],
            Op::Ld { addr: ad, .. } | Op::PrefetchL2 { addr: ad } | Op::LdL2 { addr: ad, .. } | Op::Ldmatrix { addr: ad, .. } => vec![addr(ad)],
            Op::CpAsync { dst, src } => vec![addr(dst), addr(src)],
            Op::MbarInit { addr: ad, .. } | Op::MbarArrive { addr: ad, .. } | Op::MbarArriveRemote { addr: ad } => vec![addr(ad)],
            Op::Mapa { rank, .. } => vec![rank],
            Op::MbarTryWait { addr: ad, parity, .. } => vec![addr(ad), parity],
            Op::TmaLoad { dst, x, y, z, bar, .. } => [addr(dst), x, y, addr(bar)].into_iter().chain(z.as_ref()).collect(),
            Op::St { src, addr: ad, .. } => {
                let mut v: Vec<&Operand> = src.iter().collect();
                v.push(addr(ad));
                v
            }
            Op::Atom { addr: ad, b, .. } | Op::Red { addr: ad, b, .. } => vec![addr(ad), b],
            Op::Shfl { a, b, .. } => vec![a, b],
            _ => vec![],
        }
    }

    /// Register reads that are not operands (selp's predicate, vote's source, cvta's source, the
    /// mma fragments, which are `k`'s).
    pub fn extra_uses(&self, k: &PtxKernel) -> Vec<Reg> {
        match self {
            Op::Selp { p, .. } => vec![*p],
            Op::Vote { a, .. } => vec![*a],
            Op::CvtaTo { a, .. } => vec![*a],
            Op::CvtTf32 { a, .. } => vec![*a],
            Op::CvtF16x2 { hi, lo, .. } => vec![*hi, *lo],
            Op::Unpack16 { a, .. } => vec![*a],
            Op::TmaLoad { map, multicast, .. } => [*map].into_iter().chain(*multicast).collect(),
            Op::Mapa { a, .. } => vec![*a],
            Op::Wgmma(m) => k
                .wgmma(*m)
                .map(|m| {
                    let a = match m.a {
                        super::hopper::WgmmaA::Desc(r) => vec![r],
                        super::hopper::WgmmaA::Regs(r) => r.to_vec(),
                    };
                    m.d.iter().copied().chain(a).chain([m.b, m.scale_d]).collect()
                })
                .unwrap_or_default(),
            Op::Mma(m) => k.mma(*m).map(|m| m.a.iter().chain(&m.b).chain(&m.c).copied().collect()).unwrap_or_default(),
            _ => vec![],
        }
    }
}
