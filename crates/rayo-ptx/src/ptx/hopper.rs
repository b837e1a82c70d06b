//! Hopper's asynchronous instructions (sm_90, `wgmma` and `setmaxnreg` sm_90a): warpgroup
//! matrix products from shared-memory descriptors, mbarriers, and tensor-map (TMA) copies.

use super::instr::{Addr, Op, Operand, Reg};
use super::kernel::PtxKernel;
use super::types::PtxType;

/// The operand type of a `wgmma` (f32 accumulation in each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WgmmaType {
    F16,
    BF16,
    /// f32 operands read as TF32 (their top 19 bits), K-major only.
    TF32,
}

impl WgmmaType {
    pub fn tag(self) -> &'static str {
        match self {
            WgmmaType::F16 => "f16",
            WgmmaType::BF16 => "bf16",
            WgmmaType::TF32 => "tf32",
        }
    }
    /// Bytes of one operand value.
    pub fn bytes(self) -> u32 {
        if self == WgmmaType::TF32 {
            4
        } else {
            2
        }
    }
    /// The instruction's K: 32 bytes of each operand row (16 values, 8 for TF32).
    pub fn k(self) -> u32 {
        32 / self.bytes()
    }
}

/// Where a `wgmma` reads its A tile (64 × K).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WgmmaA {
    /// A 64-bit shared-memory descriptor.
    Desc(Reg),
    /// Four .b32 registers a thread (f16/bf16 only), in the layout of the accumulators of a
    /// 64×16 tile: pairs of values `(row, k..k+1)`, `(row + 8, k..)`, `(row, k + 8..)`,
    /// `(row + 8, k + 8..)` — so scores computed by one wgmma feed the next as its A.
    Regs([Reg; 4]),
}

/// One `wgmma.mma_async.sync.aligned.m64nNkK.f32.T.T d, a, b, scale_d, 1, 1[, 0], trans_b`
/// (K = [`WgmmaType::k`]; TF32 has no transpose operands, A from registers no A transpose):
/// `d (+)= A·B` for a 64×K tile of A ([`WgmmaA`]) and a K×N tile of B in shared memory
/// (64-bit descriptor `b`), over the warpgroup's `N/2` f32 accumulators per thread;
/// `scale_d` (a predicate) false overwrites `d` instead of adding.
#[derive(Debug, Clone, PartialEq)]
pub struct Wgmma {
    pub ty: WgmmaType,
    pub n: u32,
    pub d: Vec<Reg>,
    pub a: WgmmaA,
    pub b: Reg,
    pub scale_d: Reg,
    /// B is N-major (transposed); else K-major as A.
    pub trans_b: bool,
}

impl PtxKernel {
    /// The operands of wgmma `i`.
    pub fn wgmma(&self, i: u32) -> Option<&Wgmma> {
        self.wgmmas.get(i as usize)
    }
    /// Records a [`Wgmma`] (`d.len()` must be `n / 2`; the checker says so otherwise).
    pub fn wgmma_mma(&mut self, w: Wgmma) {
        self.wgmmas.push(w);
        self.push(Op::Wgmma(self.wgmmas.len() as u32 - 1));
    }
    pub fn wgmma_fence(&mut self) {
        self.push(Op::WgmmaFence);
    }
    pub fn wgmma_commit(&mut self) {
        self.push(Op::WgmmaCommit);
    }
    pub fn wgmma_wait(&mut self, n: u32) {
        self.push(Op::WgmmaWait(n));
    }
    pub fn mbarrier_init(&mut self, addr: Addr, count: u32) {
        self.push(Op::MbarInit { addr, count });
    }
    /// One arrival; with `tx`, the bytes this phase's asynchronous copies will complete.
    pub fn mbarrier_arrive(&mut self, addr: Addr, tx: Option<u32>) {
        self.push(Op::MbarArrive { addr, tx });
    }
    /// Waits (a spin over `try_wait`) until the phase of parity `parity` (0 or 1) completes.
    pub fn mbarrier_wait(&mut self, addr: Addr, parity: impl Into<Operand>) {
        let parity = parity.into();
        let top = self.new_label("mbar_wait");
        self.label(&top);
        let p = self.reg(PtxType::Pred);
        self.push(Op::MbarTryWait { p, addr, parity });
        self.bra_if(p, true, &top);
    }
    /// A 2-D tile of the tensor map at generic address `map`, coordinates `(x, y)` (x
    /// innermost), into shared memory at `dst`, completing on the mbarrier at `bar`.
    pub fn tma_load_2d(&mut self, dst: Addr, map: Reg, (x, y): (impl Into<Operand>, impl Into<Operand>), bar: Addr) {
        self.push(Op::TmaLoad { dst, map, x: x.into(), y: y.into(), z: None, bar, multicast: None });
    }
    /// [`PtxKernel::tma_load_2d`] into the same place of every block of the cluster in `mask`
    /// (a .b16 register), completing on each one's mbarrier at `bar`.
    pub fn tma_load_2d_multicast(&mut self, dst: Addr, map: Reg, (x, y): (impl Into<Operand>, impl Into<Operand>), bar: Addr, mask: Reg) {
        self.push(Op::TmaLoad { dst, map, x: x.into(), y: y.into(), z: None, bar, multicast: Some(mask) });
    }
    /// [`PtxKernel::tma_load_2d`] for a 3-D tensor map, coordinates `(x, y, z)`.
    pub fn tma_load_3d(&mut self, dst: Addr, map: Reg, (x, y, z): (impl Into<Operand>, impl Into<Operand>, impl Into<Operand>), bar: Addr) {
        self.push(Op::TmaLoad { dst, map, x: x.into(), y: y.into(), z: Some(z.into()), bar, multicast: None });
    }
    /// One arrival on the mbarrier at `addr` of the block of rank `rank` in this cluster.
    pub fn mbarrier_arrive_remote(&mut self, addr: Reg, rank: impl Into<Operand>) {
        let d = self.reg(PtxType::U32);
        self.push(Op::Mapa { d, a: addr, rank: rank.into() });
        self.push(Op::MbarArriveRemote { addr: Addr::reg(d) });
    }
    /// Makes this block's mbarrier inits visible to the cluster (before a [`Op::ClusterSync`]).
    pub fn fence_mbarrier_init(&mut self) {
        self.push(Op::FenceMbarrierInit);
    }
    /// Every thread of the cluster arrives and waits.
    pub fn cluster_sync(&mut self) {
        self.push(Op::ClusterSync);
    }
    /// Blocks launch in clusters of `(x, y, z)` (`.reqnctapercluster`, sm_90).
    pub fn cluster_dims(&mut self, dims: (u32, u32, u32)) {
        self.cluster = Some(dims);
    }
    pub fn fence_proxy_async(&mut self) {
        self.push(Op::FenceProxyAsync);
    }
    /// Raises (`inc`) or lowers the warpgroup's registers per thread to `n` (24..=256, a
    /// multiple of 8).
    pub fn setmaxnreg(&mut self, inc: bool, n: u32) {
        self.push(Op::SetMaxNReg { inc, n });
    }
}
