//! Rotary position embedding of the query and key rows of a batch, in place. The angles come
//! from a table the host computes once per context (`(cos, sin)` of every position × pair,
//! as the CPU engine computes them), so both engines rotate by the same bits and the kernel
//! needs no transcendental functions. One block per activation row.

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

/// Which elements of a head form a rotated pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RopePairs {
    /// `(2i, 2i + 1)`, GGUF's `llama`.
    Adjacent,
    /// `(i, i + n_rot/2)`, e.g. `qwen2`.
    HalfSplit,
}

/// Parameters: `q` (m × n_head × head_dim f32), `k` (m × n_head_kv × head_dim), `table`
/// (positions × n_rot/2 pairs of f32 `(cos, sin)`), `pos` (one u32 in device memory: the first
/// row's position, so that a captured graph replays at any position) (u64); `n_head`,
/// `n_head_kv`, `head_dim`, `n_rot` (u32). Row `r` is at position `pos + r`; the grid is `m`
/// blocks.
///
/// With a cache ([`RopeKernel::with_cache`]): also `v` (m × n_head_kv × head_dim), `k_cache`,
/// `v_cache` (one layer, positions × n_head_kv × head_dim, f16 or f32) (u64): after the
/// rotation the row's K and V are stored at its position (the KV store in the same launch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RopeKernel {
    pairs: RopePairs,
    /// `Some(f16)`: store K and V into a cache of that type.
    cache: Option<bool>,
}

impl RopeKernel {
    /// Enough for one pass over a small model's pairs (SmolLM2: 384) and K/V row (192).
    pub const THREADS: u32 = 512;

    pub fn new(pairs: RopePairs) -> RopeKernel {
        RopeKernel { pairs, cache: None }
    }

    /// Rotation, then K and V stored into an f16 (or f32) cache.
    pub fn with_cache(pairs: RopePairs, f16: bool) -> RopeKernel {
        RopeKernel { pairs, cache: Some(f16) }
    }

    pub fn stores(&self) -> bool {
        self.cache.is_some()
    }

    pub fn launch(&self, m: u32) -> LaunchConfig {
        LaunchConfig { grid: (m.max(1), 1, 1), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for RopeKernel {
    fn name(&self) -> String {
        let pairs = match self.pairs {
            RopePairs::Adjacent => "rope_adjacent",
            RopePairs::HalfSplit => "rope_halfsplit",
        };
        match self.cache {
            None => pairs.into(),
            Some(f16) => format!("{pairs}_kv_{}", if f16 { "f16" } else { "f32" }),
        }
    }

    fn build(&self, sm: u32) -> PtxKernel {
        let mut k = PtxKernel::new(&self.name());
        for p in ["q", "k", "table", "pos"] {
            k.add_param(p, PtxType::U64);
        }
        if self.cache.is_some() {
            for p in ["v", "k_cache", "v_cache"] {
                k.add_param(p, PtxType::U64);
            }
        }
        for p in ["n_head", "n_head_kv", "head_dim", "n_rot"] {
            k.add_param(p, U);
        }
        k.launch_bounds((Self::THREADS, 1, 1), None);
        // Hopper: may start while the previous kernel finishes; waits for its writes here.
        k.grid_dep_sync(sm);
        let q = k.ld_param_ptr("q");
        let kk = k.ld_param_ptr("k");
        let table = k.ld_param_ptr("table");
        let n_head = k.ld_param("n_head");
        let n_head_kv = k.ld_param("n_head_kv");
        let head_dim = k.ld_param("head_dim");
        let n_rot = k.ld_param("n_rot");
        let pos_ptr = k.ld_param_ptr("pos");
        let pos0 = k.ld(Space::Global, U, Addr::reg(pos_ptr));
        let row = k.special(Special::CtaidX);
        let tid = k.special(Special::TidX);
        let half = k.bin(BinOp::Shr, U, n_rot, 1u32);
        let heads = k.add(U, n_head, n_head_kv);
        let total = k.mul(U, heads, half);
        let pos = k.add(U, pos0, row);
        let tab_row = k.mul(U, pos, half);
        let hd4 = k.mul(U, head_dim, 4u32);
        // first head of this row in q and in k
        let qh0 = k.mul(U, row, n_head);
        let kh0 = k.mul(U, row, n_head_kv);
        let idx = k.mov(U, tid);
        let (top, end) = (k.new_label("pairs"), k.new_label("pairs_end"));
        k.label(&top);
        let out = k.setp(Cmp::Ge, U, idx, total);
        k.bra_if(out, false, &end);
        let head = k.bin(BinOp::Div, U, idx, half);
        let hh = k.mul(U, head, half);
        let i = k.sub(U, idx, hh);
        let is_q = k.setp(Cmp::Lt, U, head, n_head);
        let qi = k.add(U, qh0, head);
        let kh = k.sub(U, head, n_head);
        let ki = k.add(U, kh0, kh);
        let qa = k.mad_wide(U, qi, hd4, q);
        let ka = k.mad_wide(U, ki, hd4, kk);
        let base = k.selp(PtxType::U64, qa, ka, is_q);
        let (ia, ib) = match self.pairs {
            RopePairs::Adjacent => {
                let a = k.bin(BinOp::Shl, PtxType::B32, i, 1u32);
                (a, k.add(U, a, 1u32))
            }
            RopePairs::HalfSplit => (i, k.add(U, i, half)),
        };
        let pa = k.elem_addr(base, ia, 4);
        let pb = k.elem_addr(base, ib, 4);
        let ti = k.add(U, tab_row, i);
        let ta = k.elem_addr(table, ti, 8);
        let cs = k.ld_v(Space::Global, F, 2, Addr::reg(ta));
        let (c, s) = (cs[0], cs[1]);
        let x0 = k.ld(Space::Global, F, Addr::reg(pa));
        let x1 = k.ld(Space::Global, F, Addr::reg(pb));
        // x0·c − x1·s and x0·s + x1·c, each product rounded (no FMA), as the CPU engine
        let a0 = k.mul(F, x0, c);
        let a1 = k.mul(F, x1, s);
        let y0 = k.sub(F, a0, a1);
        let b0 = k.mul(F, x0, s);
        let b1 = k.mul(F, x1, c);
        let y1 = k.add(F, b0, b1);
        k.st(Space::Global, F, Addr::reg(pa), y0);
        k.st(Space::Global, F, Addr::reg(pb), y1);
        k.bin_to(BinOp::Add, idx, idx, Self::THREADS);
        k.bra(&top);
        k.label(&end);
        if let Some(f16) = self.cache {
            // every pair of this row is rotated (one block per row): K and V to the cache
            k.bar_sync();
            let v = k.ld_param_ptr("v");
            let kc = k.ld_param_ptr("k_cache");
            let vc = k.ld_param_ptr("v_cache");
            let width = k.mul(U, n_head_kv, head_dim);
            let src0 = k.mul(U, row, width);
            let dst0 = k.mul(U, pos, width);
            let c = k.mov(U, tid);
            let (top, end) = (k.new_label("kv"), k.new_label("kv_end"));
            k.label(&top);
            let out = k.setp(Cmp::Ge, U, c, width);
            k.bra_if(out, false, &end);
            let si = k.add(U, src0, c);
            let di = k.add(U, dst0, c);
            for (src, dst) in [(kk, kc), (v, vc)] {
                let sa = k.elem_addr(src, si, 4);
                let val = k.ld(Space::Global, F, Addr::reg(sa));
                if f16 {
                    let h = k.cvt(PtxType::F16, F, val);
                    let da = k.elem_addr(dst, di, 2);
                    k.st(Space::Global, PtxType::B16, Addr::reg(da), h);
                } else {
                    let da = k.elem_addr(dst, di, 4);
                    k.st(Space::Global, F, Addr::reg(da), val);
                }
            }
            k.bin_to(BinOp::Add, c, c, Self::THREADS);
            k.bra(&top);
            k.label(&end);
        }
        k.ret();
        k
    }
}
