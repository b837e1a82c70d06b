//! Flash attention's forward pass on Hopper's tensor cores (sm_90a): `O = softmax(s·Q·Kᵀ)·V`
//! per head, causal or not, grouped-query (`heads / kv_heads` query heads share a K/V head),
//! head dim 64 or 128, f16 or bf16 in and out, f32 accumulation and softmax.
//!
//! Tensors are `[batch, heads, n, head_dim]` row-major (PyTorch's SDPA layout; K and V with
//! `kv_heads`). A block of 384 threads takes 128 query rows of one head:
//! - warpgroup 0 is the producer: one thread copies the block's Q once and K/V tiles of 128
//!   positions into a two-stage ring with the tensor-memory accelerator (3-D tensor maps
//!   `(head_dim, n, batch·heads)` with 128-byte swizzle, so rows past `n` arrive as zeros and
//!   never from the next head), each on its `full` mbarrier;
//! - warpgroups 1 and 2 each own 64 query rows. Per K/V tile: `S = Q·Kᵀ` by
//!   `wgmma.m64n128k16` from shared memory, the mask (only on tiles that cross `n` or the
//!   diagonal), the online softmax in base 2 with each row's running maximum and sum in
//!   registers, then `O += P·V` by `wgmma.m64n{head_dim}k16` with P taken from the score
//!   registers (rounded to the input type: the accumulator layout is the A-register layout)
//!   and V read N-major (transposed) from the swizzled tile. The tile's stages go back to the
//!   producer on `empty` mbarriers as soon as each product is done.
//! - Causal blocks are launched longest first (query tile `gridDim.x − 1 − blockIdx.x`).
//!
//! Parameters: `q_map`, `k_map`, `v_map` (the 128-byte tensor maps by value: box 64 values ×
//! 128 rows × 1), `out` (u64), `n`, `heads`, `kv_heads` (u32), `scale` (f32, usually
//! `1/√head_dim`).

use super::common::*;
use super::wgmma_gemm::{arch_target, descriptor, lanes, next_stage, swizzle_aligned, swizzled_descriptor, Lanes};
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

const S32: PtxType = PtxType::S32;

/// A shape the kernel is specialised on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WgmmaAttentionKernel {
    ty: WgmmaType,
    head_dim: u32,
    causal: bool,
}

impl WgmmaAttentionKernel {
    pub const THREADS: u32 = 384;
    /// Query rows a block.
    pub const BR: u32 = 128;
    /// Key/value positions a tile.
    pub const BC: u32 = 128;
    pub const STAGES: u32 = 2;

    /// `None` unless `ty` is f16 or bf16 and `head_dim` 64 or 128.
    pub fn new(ty: WgmmaType, head_dim: u32, causal: bool) -> Option<WgmmaAttentionKernel> {
        (ty != WgmmaType::TF32 && matches!(head_dim, 64 | 128)).then_some(WgmmaAttentionKernel { ty, head_dim, causal })
    }
    pub fn ty(&self) -> WgmmaType {
        self.ty
    }
    pub fn head_dim(&self) -> u32 {
        self.head_dim
    }
    pub fn causal(&self) -> bool {
        self.causal
    }
    /// Bytes of the block's Q (128 rows) and of one K or V tile.
    fn tile_bytes(&self) -> u32 {
        Self::BR * self.head_dim * 2
    }
    /// Dynamic shared memory: Q, the K and V stages, 1 KB to align them to 1024 bytes.
    pub fn shared_bytes(&self) -> u32 {
        self.tile_bytes() * (1 + 2 * Self::STAGES) + 1024
    }
    pub fn launch(&self, n: u32, heads: u32, batch: u32) -> LaunchConfig {
        LaunchConfig {
            grid: (n.div_ceil(Self::BR).max(1), heads.max(1), batch.max(1)),
            block: (Self::THREADS, 1, 1),
            shared_bytes: self.shared_bytes(),
        }
    }
    /// The products' floating-point operations: `4·batch·heads·n²·head_dim`, half that causal
    /// (the convention of flash-attention's benchmarks and PyTorch's).
    pub fn flops(&self, batch: u32, heads: u32, n: u32) -> f64 {
        let f = 4.0 * batch as f64 * heads as f64 * (n as f64).powi(2) * self.head_dim as f64;
        if self.causal {
            f / 2.0
        } else {
            f
        }
    }
}

impl Kernel for WgmmaAttentionKernel {
    fn name(&self) -> String {
        format!("wgmma_attention_{}_hd{}{}", self.ty.tag(), self.head_dim, if self.causal { "_causal" } else { "" })
    }

    fn target(&self, sm: u32) -> String {
        arch_target(sm)
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let (hd, stages) = (self.head_dim, Self::STAGES);
        let chunks = hd / 64; // 128-byte column blocks of a row
        let chunk = Self::BR * 128; // bytes of one column block of 128 rows
        let tile = self.tile_bytes();
        let mut k = PtxKernel::new(&self.name());
        for p in ["q_map", "k_map", "v_map"] {
            k.add_tensor_map_param(p);
        }
        k.add_param("out", PtxType::U64);
        for p in ["n", "heads", "kv_heads"] {
            k.add_param(p, U);
        }
        k.add_param("scale", F);
        k.launch_bounds((Self::THREADS, 1, 1), Some(1));
        let smem = k.dynamic_shared("smem", 1024);
        // mbarriers: Q full; K full, V full, K empty, V empty per stage
        let bars = k.shared_array("bars", PtxType::B64, 1 + 4 * stages, 8);
        let (q_map, k_map, v_map) = (k.param_address("q_map"), k.param_address("k_map"), k.param_address("v_map"));
        let out = k.ld_param_ptr("out");
        let (n, heads, kv_heads) = (k.ld_param("n"), k.ld_param("heads"), k.ld_param("kv_heads"));
        let scale = k.ld_param("scale");
        let tid = k.special(Special::TidX);
        let wg = k.bin(BinOp::Shr, U, tid, 7u32);
        let base = swizzle_aligned(&mut k, smem);
        let bar0 = k.mov(U, Operand::Symbol(bars));
        let bar = |k: &mut PtxKernel, first: u32, s: Reg| -> Reg {
            let b = k.fma(U, s, 8u32, bar0);
            k.add(U, b, 8 * first)
        };
        let (k_full, v_full, k_empty, v_empty) = (1, 1 + stages, 1 + 2 * stages, 1 + 3 * stages);
        let stage_at = |k: &mut PtxKernel, first: u32, s: Reg| -> Reg {
            let a = k.fma(U, s, tile, base);
            k.add(U, a, tile * (1 + first))
        };
        let is0 = k.setp(Cmp::Eq, U, tid, 0u32);
        k.when(is0, false, |k| {
            k.mbarrier_init(Addr::reg(bar0), 1);
            for s in 0..stages {
                k.mbarrier_init(Addr::at(bar0, 8 * (k_full + s) as i64), 1);
                k.mbarrier_init(Addr::at(bar0, 8 * (v_full + s) as i64), 1);
                k.mbarrier_init(Addr::at(bar0, 8 * (k_empty + s) as i64), 2);
                k.mbarrier_init(Addr::at(bar0, 8 * (v_empty + s) as i64), 2);
            }
            k.fence_proxy_async();
        });
        k.bar_sync();
        // this block's query tile (longest first when causal), head and batch
        let last = k.special(Special::NctaidX);
        let last = k.sub(U, last, 1u32);
        let bx = k.special(Special::CtaidX);
        let qt = k.sub(U, last, bx);
        let h = k.special(Special::CtaidY);
        let b = k.special(Special::CtaidZ);
        let plane_q = k.fma(U, b, heads, h);
        let group = k.bin(BinOp::Div, U, heads, kv_heads);
        let hkv = k.bin(BinOp::Div, U, h, group);
        let plane_kv = k.fma(U, b, kv_heads, hkv);
        let q0 = k.mul(U, qt, Self::BR);
        let tiles = k.add(U, n, Self::BC - 1);
        let tiles = k.bin(BinOp::Div, U, tiles, Self::BC);
        if self.causal {
            // keys up to the tile's last row (BR = BC: the diagonal tile is the last)
            let upto = k.add(U, qt, 1u32);
            k.bin_to(BinOp::Min, tiles, tiles, upto);
        }
        let producer = k.setp(Cmp::Eq, U, wg, 0u32);
        let (consumer, done) = (k.new_label("consumer"), k.new_label("done"));
        k.bra_if(producer, true, &consumer);

        // ---- producer: one thread copies Q, then K and V tile after tile ----
        k.setmaxnreg(false, 24);
        k.bra_if(is0, true, &done);
        {
            k.mbarrier_arrive(Addr::reg(bar0), Some(tile));
            for c in 0..chunks {
                let dst = k.add(U, base, c * chunk);
                k.tma_load_3d(Addr::reg(dst), q_map, (c * 64, q0, plane_q), Addr::reg(bar0));
            }
            let (j, s, phase) = (k.mov(U, 0u32), k.mov(U, 0u32), k.mov(PtxType::B32, 0u32));
            let (top, end) = (k.new_label("p_tile"), k.new_label("p_end"));
            k.label(&top);
            let out_of = k.setp(Cmp::Ge, U, j, tiles);
            k.bra_if(out_of, false, &end);
            let reuse = k.setp(Cmp::Ge, U, j, stages);
            let prev = k.bin(BinOp::Xor, PtxType::B32, phase, 1u32);
            let row = k.mul(U, j, Self::BC);
            for (full, empty, map, first) in [(k_full, k_empty, k_map, 0), (v_full, v_empty, v_map, stages)] {
                // wait until both consumers released this stage's previous tile
                let fresh = k.new_label("fresh");
                k.bra_if(reuse, true, &fresh);
                let e = bar(&mut k, empty, s);
                k.mbarrier_wait(Addr::reg(e), prev);
                k.label(&fresh);
                let f = bar(&mut k, full, s);
                k.mbarrier_arrive(Addr::reg(f), Some(tile));
                let dst = stage_at(&mut k, first, s);
                for c in 0..chunks {
                    let d = k.add(U, dst, c * chunk);
                    k.tma_load_3d(Addr::reg(d), map, (c * 64, row, plane_kv), Addr::reg(f));
                }
            }
            k.bin_to(BinOp::Add, j, j, 1u32);
            next_stage(&mut k, s, phase, stages);
            k.bra(&top);
            k.label(&end);
        }
        k.bra(&done);

        // ---- consumers: 64 query rows each ----
        k.label(&consumer);
        k.setmaxnreg(true, 240);
        let cw = k.sub(U, wg, 1u32);
        let on = k.setp(Cmp::Eq, U, tid, tid);
        let off = k.setp(Cmp::Ne, U, tid, tid);
        let Lanes { tl, warp, l4, lc } = lanes(&mut k, tid);
        let lead = k.setp(Cmp::Eq, U, tl, 0u32);
        // this thread's two rows: accumulator j is in row `rows[(j % 4) / 2]`, column
        // 8·(j / 4) + 2·lc + j % 2 (the wgmma accumulator layout)
        let first_row = k.fma(U, cw, 64u32, q0);
        let row_a = k.fma(U, warp, 16u32, first_row);
        let row_a = k.add(U, row_a, l4);
        let row_b = k.add(U, row_a, 8u32);
        let rows = [row_a, row_b];
        let sc: Vec<Reg> = (0..Self::BC / 2).map(|_| k.reg(F)).collect();
        let o: Vec<Reg> = (0..hd / 2).map(|_| k.reg(F)).collect();
        for &r in &o {
            k.mov_to(r, 0.0f32);
        }
        let m = [k.mov(F, f32::NEG_INFINITY), k.mov(F, f32::NEG_INFINITY)];
        let l = [k.mov(F, 0.0f32), k.mov(F, 0.0f32)];
        let c = k.mul(F, scale, LOG2E);
        let qa = k.fma(U, cw, 64 * 128, base);
        let dq = descriptor(&mut k, qa);
        k.mbarrier_wait(Addr::reg(bar0), 0u32);
        let (j, s, phase) = (k.mov(U, 0u32), k.mov(U, 0u32), k.mov(PtxType::B32, 0u32));
        let (top, end) = (k.new_label("c_tile"), k.new_label("c_end"));
        k.label(&top);
        let out_of = k.setp(Cmp::Ge, U, j, tiles);
        k.bra_if(out_of, false, &end);
        // S = Q·Kᵀ: head_dim / 16 products of 32 bytes along each row
        let f = bar(&mut k, k_full, s);
        k.mbarrier_wait(Addr::reg(f), phase);
        let ks = stage_at(&mut k, 0, s);
        let dk = descriptor(&mut k, ks);
        k.wgmma_fence();
        for kk in 0..hd / 16 {
            let step = ((kk / 4) * chunk + (kk % 4) * 32) as i64 >> 4;
            let a = k.add(PtxType::U64, dq, step);
            let bd = k.add(PtxType::U64, dk, step);
            let scale_d = if kk == 0 { off } else { on };
            k.wgmma_mma(Wgmma { ty: self.ty, n: Self::BC, d: sc.clone(), a: WgmmaA::Desc(a), b: bd, scale_d, trans_b: false });
        }
        k.wgmma_commit();
        k.wgmma_wait(0);
        let e = bar(&mut k, k_empty, s);
        k.when(lead, false, |k| k.mbarrier_arrive(Addr::reg(e), None));
        // the mask, on tiles past `n` or (causal) past this warpgroup's first row
        let kv0 = k.mul(U, j, Self::BC);
        let kv_end = k.add(U, kv0, Self::BC);
        let need = k.setp(Cmp::Gt, U, kv_end, n);
        if self.causal {
            let last_key = k.sub(U, kv_end, 1u32);
            let past = k.setp(Cmp::Gt, U, last_key, first_row);
            k.bin_to(BinOp::Or, need, need, past);
        }
        // (a branch, not predication: the masking's own predicates must not be read stale)
        let unmasked = k.new_label("unmasked");
        k.bra_if(need, true, &unmasked);
        {
            let k = &mut k;
            // keys `kbase + col` of row r are valid below lim_r = n, or min(n, row + 1)
            let kbase = k.fma(U, lc, 2u32, kv0);
            let rem = rows.map(|r| {
                let lim = if self.causal {
                    let r1 = k.add(U, r, 1u32);
                    k.bin(BinOp::Min, U, r1, n)
                } else {
                    n
                };
                k.sub(S32, lim, kbase)
            });
            for (jj, &v) in sc.iter().enumerate() {
                let jj = jj as u32;
                let col = 8 * (jj / 4) + jj % 2;
                let masked = k.setp(Cmp::Le, S32, rem[((jj % 4) / 2) as usize], col);
                k.push_guarded(masked, false, Op::Mov { ty: F, d: v, a: Operand::F32(f32::NEG_INFINITY) });
            }
        }
        k.label(&unmasked);
        // the online softmax, in base 2, each of the two rows
        for r in 0..2usize {
            let mine = |jj: &usize| (jj % 4) / 2 == r;
            let idx: Vec<usize> = (0..sc.len()).filter(mine).collect();
            let mx = k.mov(F, sc[idx[0]]);
            for &i in &idx[1..] {
                k.bin_to(BinOp::Max, mx, mx, sc[i]);
            }
            for lanes in [1u32, 2] {
                let other = k.shfl(ShflMode::Bfly, mx, lanes, 31);
                k.bin_to(BinOp::Max, mx, mx, other);
            }
            let m_new = k.mul(F, mx, c);
            k.bin_to(BinOp::Max, m_new, m_new, m[r]);
            let d = k.sub(F, m[r], m_new);
            let corr = k.un(UnOp::Ex2, F, d);
            k.mov_to(m[r], m_new);
            let neg = k.un(UnOp::Neg, F, m_new);
            let sum = k.mov(F, 0.0f32);
            for &i in &idx {
                let t = k.fma(F, sc[i], c, neg);
                k.un_to(UnOp::Ex2, sc[i], t);
                k.bin_to(BinOp::Add, sum, sum, sc[i]);
            }
            k.fma_to(l[r], l[r], corr, sum);
            for (jj, &v) in o.iter().enumerate() {
                if mine(&jj) {
                    k.bin_to(BinOp::Mul, v, v, corr);
                }
            }
        }
        // P in the A-register layout: per 16 keys, (row a, k), (row b, k), (row a, k + 8), (row b, k + 8)
        let bf16 = self.ty == WgmmaType::BF16;
        let p: Vec<[Reg; 4]> = (0..Self::BC as usize / 16)
            .map(|kk| {
                [0, 2, 4, 6].map(|x| {
                    let (lo, hi) = (sc[8 * kk + x], sc[8 * kk + x + 1]);
                    if bf16 {
                        k.cvt_bf16x2(hi, lo)
                    } else {
                        k.cvt_f16x2(hi, lo)
                    }
                })
            })
            .collect();
        // O += P·V: V's tile read N-major, 16 positions (2048 bytes) a product
        let f = bar(&mut k, v_full, s);
        k.mbarrier_wait(Addr::reg(f), phase);
        let vs = stage_at(&mut k, stages, s);
        let dv = swizzled_descriptor(&mut k, vs, chunk);
        k.wgmma_fence();
        for (kk, a) in p.into_iter().enumerate() {
            let bd = k.add(PtxType::U64, dv, (kk as i64 * 16 * 128) >> 4);
            k.wgmma_mma(Wgmma { ty: self.ty, n: hd, d: o.clone(), a: WgmmaA::Regs(a), b: bd, scale_d: on, trans_b: true });
        }
        k.wgmma_commit();
        k.wgmma_wait(0);
        let e = bar(&mut k, v_empty, s);
        k.when(lead, false, |k| k.mbarrier_arrive(Addr::reg(e), None));
        k.bin_to(BinOp::Add, j, j, 1u32);
        next_stage(&mut k, s, phase, stages);
        k.bra(&top);
        k.label(&end);

        // O / l, rounded to the input type, two values (4 bytes) a store
        let inv = l.map(|lr| {
            for lanes in [1u32, 2] {
                let other = k.shfl(ShflMode::Bfly, lr, lanes, 31);
                k.bin_to(BinOp::Add, lr, lr, other);
            }
            k.un(UnOp::Rcp, F, lr)
        });
        for (r, &row) in rows.iter().enumerate() {
            let inside = k.setp(Cmp::Lt, U, row, n);
            let at = k.fma(U, plane_q, n, row);
            let at = k.mul(U, at, hd);
            let at = k.fma(U, lc, 2u32, at);
            for jj in (0..o.len()).filter(|jj| (jj % 4) / 2 == r).step_by(2) {
                let lo = k.mul(F, o[jj], inv[r]);
                let hi = k.mul(F, o[jj + 1], inv[r]);
                let v = if bf16 { k.cvt_bf16x2(hi, lo) } else { k.cvt_f16x2(hi, lo) };
                let i = k.add(U, at, 8 * (jj as u32 / 4));
                let a = k.elem_addr(out, i, 2);
                k.when(inside, false, |k| k.st(Space::Global, PtxType::B32, Addr::reg(a), v));
            }
        }
        k.label(&done);
        k.ret();
        k
    }
}
