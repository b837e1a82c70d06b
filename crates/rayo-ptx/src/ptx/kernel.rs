//! `PtxKernel`: an entry function being built: parameters, shared memory, launch bounds, typed
//! virtual registers and the instruction list. Builder methods return fresh registers (`add`),
//! or write into an existing one (`*_to`) for loop-carried values.

use super::instr::*;
use super::names::{Name, Names};
use super::types::{PtxType, Space, Special};
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT_KERNEL: AtomicU32 = AtomicU32::new(1);

/// A kernel parameter: a scalar (`.param .u64 name`), or `bytes` bytes passed by value
/// (`.param .align 64 .b8 name[bytes]`: a tensor map; `ty` is then `B64`, unused).
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: Name,
    pub ty: PtxType,
    /// 0 for a scalar.
    pub bytes: u32,
}

impl Param {
    /// Bytes of a tensor map (`CUtensorMap`), the by-value parameter TMA reads.
    pub const TENSOR_MAP_BYTES: u32 = 128;
}

/// A shared-memory array declared inside the kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedDecl {
    pub name: Name,
    pub ty: PtxType,
    pub count: u32,
    pub align: u32,
}

/// An entry function under construction.
#[derive(Debug, Clone)]
pub struct PtxKernel {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) params: Vec<Param>,
    pub(crate) shared: Vec<SharedDecl>,
    pub(crate) max_ntid: Option<(u32, u32, u32)>,
    pub(crate) min_ctas: Option<u32>,
    /// Registers declared so far, per type (index = position in `PtxType::ALL`).
    pub(crate) reg_counts: [u32; 13],
    pub(crate) insts: Vec<Inst>,
    pub(crate) names: Names,
    /// The fragments of the `mma` instructions, by `Op::Mma`'s index.
    mmas: Vec<Mma>,
    /// The operands of the `wgmma` instructions, by `Op::Wgmma`'s index.
    pub(crate) wgmmas: Vec<super::hopper::Wgmma>,
    /// `.reqnctapercluster` (sm_90 clusters).
    pub(crate) cluster: Option<(u32, u32, u32)>,
    guard: Option<(Reg, bool)>,
    labels: u32,
}

/// A type's position in `PtxType::ALL` (the declaration order).
pub(crate) fn type_slot(ty: PtxType) -> usize {
    ty as usize
}

impl PtxKernel {
    pub fn new(name: &str) -> PtxKernel {
        PtxKernel {
            id: NEXT_KERNEL.fetch_add(1, Ordering::Relaxed),
            name: name.to_string(),
            params: Vec::with_capacity(8),
            shared: vec![],
            max_ntid: None,
            min_ctas: None,
            reg_counts: [0; 13],
            insts: Vec::with_capacity(256),
            names: Names::new(),
            mmas: vec![],
            wgmmas: vec![],
            cluster: None,
            guard: None,
            labels: 0,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn params(&self) -> &[Param] {
        &self.params
    }

    pub fn instructions(&self) -> &[Inst] {
        &self.insts
    }

    /// The name interned for `s` in this kernel (the same `Name` for the same text).
    pub fn intern(&mut self, s: &str) -> Name {
        Name { kernel: self.id, index: self.names.intern(s) }
    }

    /// The text of a name (empty for a name of another kernel).
    pub fn resolve(&self, n: Name) -> &str {
        if n.kernel == self.id {
            self.names.get(n.index)
        } else {
            ""
        }
    }

    /// The fragments of `mma` instruction `i` (`Op::Mma(i)`).
    pub fn mma(&self, i: u32) -> Option<&Mma> {
        self.mmas.get(i as usize)
    }

    /// Declares a parameter (builder style).
    pub fn param(mut self, name: &str, ty: PtxType) -> Self {
        self.add_param(name, ty);
        self
    }

    pub fn add_param(&mut self, name: &str, ty: PtxType) {
        let name = self.intern(name);
        self.params.push(Param { name, ty, bytes: 0 });
    }

    /// Declares a tensor map passed by value (`.param .align 64 .b8 name[128]`, CUDA's
    /// `__grid_constant__ CUtensorMap`): no copy of it in device memory per launch. Its address
    /// for TMA is [`PtxKernel::param_address`].
    pub fn add_tensor_map_param(&mut self, name: &str) {
        let name = self.intern(name);
        self.params.push(Param { name, ty: PtxType::B64, bytes: Param::TENSOR_MAP_BYTES });
    }

    /// `.maxntid x, y, z` and optionally `.minnctapersm`.
    pub fn launch_bounds(&mut self, threads: (u32, u32, u32), min_blocks_per_sm: Option<u32>) {
        self.max_ntid = Some(threads);
        self.min_ctas = min_blocks_per_sm;
    }

    /// Declares `.shared .align A .ty name[count]` and returns its name.
    pub fn shared_array(&mut self, name: &str, ty: PtxType, count: u32, align: u32) -> Name {
        let name = self.intern(name);
        self.shared.push(SharedDecl { name, ty, count, align });
        name
    }

    /// The kernel's dynamic shared memory (`.extern .shared .align A .b8 name[]`, sized at
    /// launch; more than 48 KB needs the function's attribute raised first).
    pub fn dynamic_shared(&mut self, name: &str, align: u32) -> Name {
        let name = self.intern(name);
        self.shared.push(SharedDecl { name, ty: PtxType::B32, count: 0, align });
        name
    }

    /// Total static shared memory in bytes.
    pub fn shared_bytes(&self) -> u32 {
        self.shared.iter().map(|s| s.count * s.ty.bytes()).sum()
    }

    /// A fresh virtual register.
    pub fn reg(&mut self, ty: PtxType) -> Reg {
        let slot = type_slot(ty);
        let index = self.reg_counts[slot];
        self.reg_counts[slot] += 1;
        Reg { kernel: self.id, index, ty }
    }

    /// A fresh label `$L_{hint}_{n}`, unique in this kernel.
    pub fn new_label(&mut self, hint: &str) -> Name {
        self.labels += 1;
        let text = self.names.text_mut();
        let start = text.len();
        text.push_str("$L_");
        text.push_str(hint);
        text.push('_');
        let mut digits = [0u8; 10];
        let mut v = self.labels;
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        digits[i..].iter().for_each(|&b| text.push(b as char));
        let index = self.names.intern_tail(start);
        Name { kernel: self.id, index }
    }

    /// Appends an instruction (guarded if inside [`PtxKernel::when`]).
    pub fn push(&mut self, op: Op) {
        self.insts.push(Inst { guard: self.guard, op });
    }

    /// Appends an instruction with an explicit guard `@p` (or `@!p` when `negate`).
    pub fn push_guarded(&mut self, p: Reg, negate: bool, op: Op) {
        self.insts.push(Inst { guard: Some((p, negate)), op });
    }

    /// Every instruction emitted inside `f` runs only where `p` (or `!p`) holds. Guards do not
    /// nest: a `when` inside `f` replaces `p` for its own instructions (combine predicates with
    /// `and.pred` first where both must hold).
    pub fn when(&mut self, p: Reg, negate: bool, f: impl FnOnce(&mut Self)) {
        let saved = self.guard.replace((p, negate));
        f(self);
        self.guard = saved;
    }

    // ---- moves, arithmetic ----

    pub fn mov(&mut self, ty: PtxType, a: impl Into<Operand>) -> Reg {
        let d = self.reg(ty);
        self.mov_to(d, a);
        d
    }
    pub fn mov_to(&mut self, d: Reg, a: impl Into<Operand>) {
        self.push(Op::Mov { ty: d.ty, d, a: a.into() });
    }
    pub fn special(&mut self, s: Special) -> Reg {
        self.mov(s.ty(), s)
    }
    pub fn un(&mut self, op: UnOp, ty: PtxType, a: impl Into<Operand>) -> Reg {
        let d = self.reg(ty);
        self.push(Op::Un { op, ty, d, a: a.into() });
        d
    }
    pub fn un_to(&mut self, op: UnOp, d: Reg, a: impl Into<Operand>) {
        self.push(Op::Un { op, ty: d.ty, d, a: a.into() });
    }
    pub fn bin(&mut self, op: BinOp, ty: PtxType, a: impl Into<Operand>, b: impl Into<Operand>) -> Reg {
        let dty = if op == BinOp::MulWide { ty.widened().unwrap_or(ty) } else { ty };
        let d = self.reg(dty);
        self.push(Op::Bin { op, ty, d, a: a.into(), b: b.into() });
        d
    }
    pub fn bin_to(&mut self, op: BinOp, d: Reg, a: impl Into<Operand>, b: impl Into<Operand>) {
        self.push(Op::Bin { op, ty: d.ty, d, a: a.into(), b: b.into() });
    }
    pub fn add(&mut self, ty: PtxType, a: impl Into<Operand>, b: impl Into<Operand>) -> Reg {
        self.bin(BinOp::Add, ty, a, b)
    }
    pub fn sub(&mut self, ty: PtxType, a: impl Into<Operand>, b: impl Into<Operand>) -> Reg {
        self.bin(BinOp::Sub, ty, a, b)
    }
    pub fn mul(&mut self, ty: PtxType, a: impl Into<Operand>, b: impl Into<Operand>) -> Reg {
        self.bin(BinOp::Mul, ty, a, b)
    }
    /// `fma.rn` for floats, `mad.lo` for integers: a*b + c in a fresh register.
    pub fn fma(&mut self, ty: PtxType, a: impl Into<Operand>, b: impl Into<Operand>, c: impl Into<Operand>) -> Reg {
        let d = self.reg(ty);
        self.fma_to(d, a, b, c);
        d
    }
    pub fn fma_to(&mut self, d: Reg, a: impl Into<Operand>, b: impl Into<Operand>, c: impl Into<Operand>) {
        self.push(Op::Fma { ty: d.ty, d, a: a.into(), b: b.into(), c: c.into() });
    }
    /// `mad.wide.ty`: a*b + c with c and the result twice as wide as `ty`.
    pub fn mad_wide(&mut self, ty: PtxType, a: impl Into<Operand>, b: impl Into<Operand>, c: impl Into<Operand>) -> Reg {
        let d = self.reg(ty.widened().unwrap_or(ty));
        self.push(Op::MadWide { ty, d, a: a.into(), b: b.into(), c: c.into() });
        d
    }
    pub fn setp(&mut self, cmp: Cmp, ty: PtxType, a: impl Into<Operand>, b: impl Into<Operand>) -> Reg {
        let d = self.reg(PtxType::Pred);
        self.push(Op::Setp { cmp, ty, d, a: a.into(), b: b.into() });
        d
    }
    pub fn selp(&mut self, ty: PtxType, a: impl Into<Operand>, b: impl Into<Operand>, p: Reg) -> Reg {
        let d = self.reg(ty);
        self.push(Op::Selp { ty, d, a: a.into(), b: b.into(), p });
        d
    }
    pub fn cvt(&mut self, dty: PtxType, sty: PtxType, a: impl Into<Operand>) -> Reg {
        let rnd = match (dty.is_float(), sty.is_float()) {
            (true, false) => Some("rn"),
            (false, true) => Some("rzi"),
            (true, true) if dty.bits() < sty.bits() => Some("rn"),
            _ => None,
        };
        let d = self.reg(dty);
        self.push(Op::Cvt { rnd, dty, sty, d, a: a.into() });
        d
    }
    /// `cvt.rni.dty.sty`: a float rounded to the nearest integer (ties to even).
    pub fn cvt_rni(&mut self, dty: PtxType, sty: PtxType, a: impl Into<Operand>) -> Reg {
        let d = self.reg(dty);
        self.push(Op::Cvt { rnd: Some("rni"), dty, sty, d, a: a.into() });
        d
    }
    /// Generic → global address (`cvta.to.global.u64`).
    pub fn to_global(&mut self, a: Reg) -> Reg {
        let d = self.reg(PtxType::U64);
        self.push(Op::CvtaTo { space: Space::Global, d, a });
        d
    }

    // ---- memory ----

    pub fn ld_param(&mut self, name: &str) -> Reg {
        let name = self.intern(name);
        let ty = self.params.iter().find(|p| p.name == name).map(|p| p.ty).unwrap_or(PtxType::U64);
        let d = self.reg(ty);
        self.push(Op::LdParam { ty, d, name });
        d
    }
    /// The generic address of a by-value parameter ([`PtxKernel::add_tensor_map_param`]).
    pub fn param_address(&mut self, name: &str) -> Reg {
        let name = self.intern(name);
        let d = self.reg(PtxType::U64);
        self.push(Op::ParamAddr { d, name });
        d
    }
    /// A 64-bit global pointer parameter, converted to a global address.
    pub fn ld_param_ptr(&mut self, name: &str) -> Reg {
        let p = self.ld_param(name);
        self.to_global(p)
    }
    pub fn ld(&mut self, space: Space, ty: PtxType, addr: Addr) -> Reg {
        let d = self.reg(ty);
        self.push(Op::Ld { space, ty, dst: Regs::One(d), addr, nc: false });
        d
    }
    pub fn ld_to(&mut self, space: Space, d: Reg, addr: Addr) {
        self.push(Op::Ld { space, ty: d.ty, dst: Regs::One(d), addr, nc: false });
    }
    /// A vector load of `width` (2 or 4) elements into fresh registers.
    pub fn ld_v(&mut self, space: Space, ty: PtxType, width: usize, addr: Addr) -> Vec<Reg> {
        let dst: Vec<Reg> = (0..width).map(|_| self.reg(ty)).collect();
        self.push(Op::Ld { space, ty, dst: Regs::from(&dst[..]), addr, nc: false });
        dst
    }
    /// A vector load into existing registers.
    pub fn ld_v_to(&mut self, space: Space, dst: &[Reg], addr: Addr) {
        let ty = dst.first().map(|r| r.ty).unwrap_or(PtxType::F32);
        self.push(Op::Ld { space, ty, dst: Regs::from(dst), addr, nc: false });
    }
    /// A read-only global vector load through the non-coherent cache (`ld.global.nc`).
    pub fn ld_nc_v(&mut self, ty: PtxType, width: usize, addr: Addr) -> Vec<Reg> {
        let dst: Vec<Reg> = (0..width).map(|_| self.reg(ty)).collect();
        self.push(Op::Ld { space: Space::Global, ty, dst: Regs::from(&dst[..]), addr, nc: true });
        dst
    }
    pub fn st(&mut self, space: Space, ty: PtxType, addr: Addr, v: impl Into<Operand>) {
        self.push(Op::St { space, ty, src: Few::One(v.into()), addr });
    }
    pub fn st_v(&mut self, space: Space, ty: PtxType, addr: Addr, vs: &[Reg]) {
        let src = match *vs {
            [a] => Few::One(Operand::Reg(a)),
            [a, b] => Few::Two([a.into(), b.into()]),
            [a, b, c, d] => Few::Four([a.into(), b.into(), c.into(), d.into()]),
            _ => Few::Many(vs.iter().map(|&r| Operand::Reg(r)).collect()),
        };
        self.push(Op::St { space, ty, src, addr });
    }
    pub fn atom(&mut self, space: Space, op: AtomOp, ty: PtxType, addr: Addr, b: impl Into<Operand>) -> Reg {
        let d = self.reg(ty);
        self.push(Op::Atom { space, op, ty, d, addr, b: b.into() });
        d
    }
    pub fn red(&mut self, space: Space, op: AtomOp, ty: PtxType, addr: Addr, b: impl Into<Operand>) {
        self.push(Op::Red { space, op, ty, addr, b: b.into() });
    }

    // ---- warps, control ----

    /// `shfl.sync.mode.b32 d, a, b, c, mask` on a 32-bit value (f32 or integer).
    pub fn shfl(&mut self, mode: ShflMode, a: Reg, b: impl Into<Operand>, c: u32) -> Reg {
        let d = self.reg(a.ty);
        self.push(Op::Shfl { mode, d, a: Operand::Reg(a), b: b.into(), c, mask: 0xffff_ffff });
        d
    }
    pub fn vote(&mut self, mode: VoteMode, p: Reg) -> Reg {
        let d = self.reg(if mode == VoteMode::Ballot { PtxType::B32 } else { PtxType::Pred });
        self.push(Op::Vote { mode, d, a: p, mask: 0xffff_ffff });
        d
    }
    /// `cvt.rna.tf32.f32`: an f32 rounded to TF32, as a .b32 register.
    pub fn cvt_tf32(&mut self, a: Reg) -> Reg {
        let d = self.reg(PtxType::B32);
        self.push(Op::CvtTf32 { d, a });
        d
    }
    /// `d = a·b + c` on one warp's m16n8k8 TF32 fragments (d and c may be the same registers).
    pub fn mma_tf32(&mut self, d: [Reg; 4], a: [Reg; 4], b: [Reg; 2], c: [Reg; 4]) {
        self.push_mma(MmaKind::Tf32, d, a, b, c);
    }
    /// `d = a·b + c` on one warp's m16n8k16 f16 fragments (f32 accumulators).
    pub fn mma_f16(&mut self, d: [Reg; 4], a: [Reg; 4], b: [Reg; 2], c: [Reg; 4]) {
        self.push_mma(MmaKind::F16, d, a, b, c);
    }
    fn push_mma(&mut self, kind: MmaKind, d: [Reg; 4], a: [Reg; 4], b: [Reg; 2], c: [Reg; 4]) {
        self.mmas.push(Mma { kind, d, a, b, c });
        self.push(Op::Mma(self.mmas.len() as u32 - 1));
    }
    /// `c + Σᵢ a.byteᵢ·b.byteᵢ` over the four bytes of `a` and `b` (`dp4a`, sm_61), each
    /// operand's bytes signed or not as its flag says.
    pub fn dp4a(&mut self, (a, a_signed): (impl Into<Operand>, bool), (b, b_signed): (impl Into<Operand>, bool), c: impl Into<Operand>) -> Reg {
        let d = self.reg(PtxType::S32);
        self.push(Op::Dp4a { d, a: a.into(), b: b.into(), c: c.into(), a_signed, b_signed });
        d
    }
    /// The low and high 16-bit halves of a 32-bit register (`mov.b32 {lo, hi}`), as .b16.
    pub fn unpack16(&mut self, a: Reg) -> (Reg, Reg) {
        let (lo, hi) = (self.reg(PtxType::B16), self.reg(PtxType::B16));
        self.push(Op::Unpack16 { lo, hi, a });
        (lo, hi)
    }
    /// Two f32 rounded to f16 and packed into a .b32 (`lo` in the low half: the lower index).
    pub fn cvt_f16x2(&mut self, hi: Reg, lo: Reg) -> Reg {
        let d = self.reg(PtxType::B32);
        self.push(Op::CvtF16x2 { d, hi, lo, bf16: false });
        d
    }
    /// [`PtxKernel::cvt_f16x2`] rounding to bf16.
    pub fn cvt_bf16x2(&mut self, hi: Reg, lo: Reg) -> Reg {
        let d = self.reg(PtxType::B32);
        self.push(Op::CvtF16x2 { d, hi, lo, bf16: true });
        d
    }
    /// Four 8×8 f16 matrices from shared memory (`ldmatrix ... .x4`), transposed with `trans`.
    pub fn ldmatrix_x4(&mut self, addr: Addr, trans: bool) -> [Reg; 4] {
        let d = [(); 4].map(|_| self.reg(PtxType::B32));
        self.push(Op::Ldmatrix { d, addr, trans });
        d
    }
    /// A 16-byte asynchronous copy from global `src` to shared `dst` (both 16-byte aligned).
    pub fn cp_async(&mut self, dst: Addr, src: Addr) {
        self.push(Op::CpAsync { dst, src });
    }
    /// Closes the group of the asynchronous copies issued since the last one.
    pub fn cp_async_commit(&mut self) {
        self.push(Op::CpAsyncCommit);
    }
    /// Waits until at most `n` groups of this thread's asynchronous copies are in flight.
    pub fn cp_async_wait(&mut self, n: u32) {
        self.push(Op::CpAsyncWait(n));
    }
    /// Places label `name` (from [`PtxKernel::new_label`] or [`PtxKernel::intern`]).
    pub fn label(&mut self, name: &Name) {
        self.insts.push(Inst { guard: None, op: Op::Label(*name) });
    }
    pub fn bra(&mut self, target: &Name) {
        self.push(Op::Bra { target: *target, uni: false });
    }
    /// Branch when `p` holds (or when it does not, with `negate`).
    pub fn bra_if(&mut self, p: Reg, negate: bool, target: &Name) {
        self.push_guarded(p, negate, Op::Bra { target: *target, uni: false });
    }
    pub fn bar_sync(&mut self) {
        self.push(Op::BarSync(0));
    }
    /// `membar.gl`: this thread's earlier writes are visible to the whole device before its
    /// later ones.
    pub fn membar_gl(&mut self) {
        self.push(Op::MembarGl);
    }
    /// `ld.global.cg.f32`: an f32 read through L2 only.
    pub fn ld_l2(&mut self, addr: Addr) -> Reg {
        let d = self.reg(PtxType::F32);
        self.push(Op::LdL2 { d, addr });
        d
    }
    /// `prefetch.global.L2 [addr]`.
    pub fn prefetch_l2(&mut self, addr: Addr) {
        self.push(Op::PrefetchL2 { addr });
    }
    /// Hopper's programmatic dependent launch, from `sm` 90 on (nothing before): waits for the
    /// previous grid's writes, then lets the next grid start. A kernel that calls this reads
    /// nothing the previous grid writes before it; its launches may then overlap the previous
    /// grid's tail (see `griddepcontrol` in the PTX ISA).
    pub fn grid_dep_sync(&mut self, sm: u32) {
        if sm >= 90 {
            self.push(Op::GridDepWait);
            self.push(Op::GridDepLaunch);
        }
    }
    /// Whether the kernel waits for its programmatic dependencies (so a launch may overlap the
    /// previous grid).
    /// The kernel as a `.func` a persistent kernel calls for each of a phase's blocks, run by
    /// `threads` threads (its launch's block) of a sub-block, one of `subs` in the calling
    /// block: see [`crate::kernels::PersistentKernel`]. Its shared arrays are declared before
    /// it, at module scope, a copy per sub-block.
    pub fn emit_device_function(&self, threads: u32, subs: u32) -> String {
        let mut out = Vec::with_capacity(1024 + 48 * self.insts.len());
        super::emit::device_function(self, threads, subs, &mut out);
        super::emit::into_string(out)
    }

    /// The name of the function [`PtxKernel::emit_device_function`] writes for `threads`.
    pub fn device_function_name(&self, threads: u32) -> String {
        super::emit::device_function_name(&self.name, threads)
    }

    pub fn waits_for_dependencies(&self) -> bool {
        self.insts.iter().any(|i| matches!(i.op, Op::GridDepWait))
    }
    pub fn ret(&mut self) {
        self.push(Op::Ret);
    }

    /// `base + index * elem_bytes` as a 64-bit address (index a u32 register or immediate).
    pub fn elem_addr(&mut self, base: Reg, index: impl Into<Operand>, elem_bytes: u32) -> Reg {
        self.mad_wide(PtxType::U32, index, elem_bytes, base)
    }
}
