//! Attention of a decoding step — one query row at position `p` over `0..=p` of a layer's KV
//! cache (the last `window` of them on a sliding-window layer) — split over the positions
//! (flash-decoding), with RoPE and the KV store fused in.
//!
//! The grid is (query heads, splits). Block (h, s) takes a contiguous share of the positions:
//! scores, their maximum `m_s`, `l_s = Σ e^{score − m_s}` and `Σ e^{score − m_s}·v` (the
//! scores in shared memory, a warp per position and the lanes over the head's dimensions, as
//! [`super::AttentionKernel`]). It writes these to a scratch row, and the head's last block to
//! finish (an atomic count per head, reset by that block for the next step) combines them:
//! `Σ_s e^{m_s − M}·acc_s / Σ_s e^{m_s − M}·l_s`. With one query row the positions are the only
//! parallelism; a block per head (nine for SmolLM2) left most of the GPU idle and took 11 µs at
//! position 100.
//!
//! RoPE: every block rotates its query and its KV head's new key (n_rot = head_dim) with the
//! host-made table of [`super::RopeKernel`], takes the new key and value for position `p` from
//! registers (rounded as the cache holds them), and block (first query head of the group, split
//! 0) stores them into the cache. No block reads position `p` from the cache.

use super::attention::{add_warp_sums, count, each_dim, exponentials, ld_cache, smem_at, stash_warp_sums, window_start};
use super::common::*;
use super::{Kernel, LaunchConfig, RopePairs};
use crate::ptx::*;

/// Parameters: `q` (n_head × head_dim f32, not rotated), `k`, `v` (n_head_kv × head_dim f32: the
/// step's new row, not rotated), `table` (positions × head_dim/2 `(cos, sin)` f32), `k_cache`,
/// `v_cache` (one layer: positions × n_head_kv × head_dim, f16 or f32), `out` (n_head × head_dim
/// f32), `pos` (one u32 in device memory: the row's position), `part` (n_head × splits ×
/// (head_dim + 2) f32 scratch), `done` (n_head u32, zero before the first launch) (u64);
/// `n_head`, `n_head_kv` (u32), `scale` (f32), `round_q` (u32: nonzero rounds the rotated query
/// to f16, as llama.cpp's one-row kernel), `window` (u32: the row sees `p + 1 − window ..= p`;
/// 0 for every position); with QK-norm ([`DecodeAttentionKernel::with_qk_norm`]) `q_norm`,
/// `k_norm` (head_dim f32 each) (u64) and `eps` (f32): each head of `q` and `k` RMS-normalized
/// with them before RoPE (Qwen 3's and Gemma 3's per-head norm). The grid's y is the number
/// of splits.
///
/// The batched variant ([`DecodeAttentionKernel::batched`]) runs one decoding row of each of
/// many sequences, grid z = the rows: row `r`'s `q`, `k`, `v`, `out`, `part` and `done` come
/// `r` rows on (of the widths above); `pos` holds a position per row, and two more parameters
/// say where each row's cache is: `slots` (u64, one u32 per row, after `done`) and
/// `slot_positions` (u32, last): the caches hold slots of `slot_positions` positions one after
/// another, row `r`'s is slot `slots[r]`. Each row's arithmetic is the one-row kernel's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecodeAttentionKernel {
    head_dim: u32,
    max_chunk: u32,
    f16: bool,
    pairs: RopePairs,
    batched: bool,
    qk_norm: bool,
}

impl DecodeAttentionKernel {
    pub const THREADS: u32 = 128;
    /// Splits of the positions (blocks per head): with SmolLM2's 9 heads, 144 blocks.
    pub const SPLITS: u32 = 16;

    /// `None` unless `head_dim` is a multiple of 32 up to
    /// [`super::AttentionKernel::MAX_HEAD_DIM`] and a split of `positions` (`positions /
    /// SPLITS`, rounded up) fits the shared scores (10240 of them).
    pub fn new(head_dim: u32, positions: u32, f16: bool, pairs: RopePairs) -> Option<DecodeAttentionKernel> {
        if head_dim == 0 || !head_dim.is_multiple_of(32) || head_dim > super::AttentionKernel::MAX_HEAD_DIM || positions == 0 {
            return None;
        }
        let chunk = positions.div_ceil(Self::SPLITS);
        if chunk > super::AttentionKernel::MAX_POSITIONS {
            return None;
        }
        // kernels for 256, 512, ... positions per split: a context of any length shares one
        let max_chunk = chunk.next_power_of_two().max(256);
        Some(DecodeAttentionKernel { head_dim, max_chunk, f16, pairs, batched: false, qk_norm: false })
    }

    /// The variant for one decoding row of each of many sequences (see the type).
    pub fn batched(self) -> DecodeAttentionKernel {
        DecodeAttentionKernel { batched: true, ..self }
    }

    /// The variant that RMS-normalizes each head of the query and the new key first (see the
    /// type): a model's QK-norm in the same launch.
    pub fn with_qk_norm(self) -> DecodeAttentionKernel {
        DecodeAttentionKernel { qk_norm: true, ..self }
    }

    /// Whether this is the many-sequence variant.
    pub fn is_batched(&self) -> bool {
        self.batched
    }

    /// The head size it takes.
    pub fn head_dim(&self) -> u32 {
        self.head_dim
    }

    /// Scratch floats `part` must hold for `n_head` heads.
    pub fn part_len(&self, n_head: usize) -> usize {
        n_head * Self::SPLITS as usize * (self.head_dim as usize + 2)
    }

    pub fn launch(&self, n_head: u32) -> LaunchConfig {
        self.launch_rows(n_head, 1)
    }

    /// The batched variant's launch for `rows` rows.
    pub fn launch_rows(&self, n_head: u32, rows: u32) -> LaunchConfig {
        LaunchConfig { grid: (n_head.max(1), Self::SPLITS, rows.max(1)), block: (Self::THREADS, 1, 1), shared_bytes: 0 }
    }
}

/// The lane's `dpl` values `x` (dimensions `lane·dpl ..` of a head) rotated by the table row at
/// `tab` (`(cos, sin)` per pair), as [`super::RopeKernel`] rotates them: the pair's first
/// becomes `x0·c − x1·s`, its second `x0·s + x1·c`, each product rounded.
fn rotate(k: &mut PtxKernel, pairs: RopePairs, x: &[Reg], lane: Reg, tab: Reg) -> Vec<Reg> {
    let dpl = x.len() as u32;
    let pair = |k: &mut PtxKernel, i: Reg, mine: Reg, partner: Reg, first: Option<Reg>| {
        let ta = k.elem_addr(tab, i, 8);
        let cs = k.ld_v(Space::Global, F, 2, Addr::reg(ta));
        let (c, s) = (cs[0], cs[1]);
        let rot = |k: &mut PtxKernel, x0: Reg, x1: Reg, is_first: bool| {
            if is_first {
                let (a0, a1) = (k.mul(F, x0, c), k.mul(F, x1, s));
                k.sub(F, a0, a1)
            } else {
                let (b0, b1) = (k.mul(F, x0, s), k.mul(F, x1, c));
                k.add(F, b0, b1)
            }
        };
        match first {
            None => rot(k, mine, partner, true),
            Some(p) => {
                let y0 = rot(k, mine, partner, true);
                let y1 = rot(k, partner, mine, false);
                k.selp(F, y0, y1, p)
            }
        }
    };
    (0..dpl as usize)
        .map(|j| {
            let ju = j as u32;
            match pairs {
                RopePairs::Adjacent if dpl % 2 == 0 => {
                    // pairs inside the lane: (x[j], x[j + 1]) for even j
                    let d0 = k.mul(U, lane, dpl / 2);
                    let i = k.add(U, d0, ju / 2);
                    let ta = k.elem_addr(tab, i, 8);
                    let cs = k.ld_v(Space::Global, F, 2, Addr::reg(ta));
                    let (c, s) = (cs[0], cs[1]);
                    if j % 2 == 0 {
                        let (a0, a1) = (k.mul(F, x[j], c), k.mul(F, x[j + 1], s));
                        k.sub(F, a0, a1)
                    } else {
                        let (b0, b1) = (k.mul(F, x[j - 1], s), k.mul(F, x[j], c));
                        k.add(F, b0, b1)
                    }
                }
                RopePairs::Adjacent => {
                    // one value per lane: a pair is two neighbouring lanes
                    let i = k.bin(BinOp::Shr, U, lane, 1u32);
                    let partner = k.shfl(ShflMode::Bfly, x[j], 1u32, 0x1f);
                    let odd = k.bin(BinOp::And, PtxType::B32, lane, 1u32);
                    let first = k.setp(Cmp::Eq, U, odd, 0u32);
                    pair(k, i, x[j], partner, Some(first))
                }
                RopePairs::HalfSplit => {
                    // dimensions d and d + head_dim/2 are the same value of lanes l and l + 16
                    let l = k.bin(BinOp::And, PtxType::B32, lane, 15u32);
                    let i = k.mul(U, l, dpl);
                    let i = k.add(U, i, ju);
                    let partner = k.shfl(ShflMode::Bfly, x[j], 16u32, 0x1f);
                    let first = k.setp(Cmp::Lt, U, lane, 16u32);
                    pair(k, i, x[j], partner, Some(first))
                }
            }
        })
        .collect()
}

/// `v` as the cache holds it: rounded to f16 and back, or as it is.
fn as_cached(k: &mut PtxKernel, f16: bool, v: Reg) -> Reg {
    if f16 {
        let h = k.cvt(PtxType::F16, F, v);
        k.cvt(F, PtxType::F16, h)
    } else {
        v
    }
}

impl Kernel for DecodeAttentionKernel {
    fn name(&self) -> String {
        let pairs = match self.pairs {
            RopePairs::Adjacent => "adjacent",
            RopePairs::HalfSplit => "halfsplit",
        };
        let rows = if self.batched { "_rows" } else { "" };
        let norm = if self.qk_norm { "_qknorm" } else { "" };
        format!("decode_attention{rows}{norm}_{}_hd{}_c{}_{pairs}", if self.f16 { "f16" } else { "f32" }, self.head_dim, self.max_chunk)
    }

    fn build(&self, sm: u32) -> PtxKernel {
        let (hd, threads, f16) = (self.head_dim, Self::THREADS, self.f16);
        let mut k = PtxKernel::new(&self.name());
        for p in ["q", "k", "v", "table", "k_cache", "v_cache", "out", "pos", "part", "done"] {
            k.add_param(p, PtxType::U64);
        }
        if self.batched {
            k.add_param("slots", PtxType::U64);
        }
        for p in ["n_head", "n_head_kv"] {
            k.add_param(p, U);
        }
        k.add_param("scale", F);
        k.add_param("round_q", U);
        k.add_param("window", U);
        if self.qk_norm {
            k.add_param("q_norm", PtxType::U64);
            k.add_param("k_norm", PtxType::U64);
            k.add_param("eps", F);
        }
        if self.batched {
            k.add_param("slot_positions", U);
        }
        k.launch_bounds((threads, 1, 1), None);
        // Hopper: may start while the previous kernel finishes; waits for its writes here.
        k.grid_dep_sync(sm);
        let warps = threads / 32;
        let dpl = hd / 32;
        let ss = k.shared_array("ss", F, self.max_chunk, 16);
        let sred = k.shared_array("sred", F, warps * hd, 16);
        let swarp = k.shared_array("swarp", F, warps, 4);
        let slast = k.shared_array("slast", U, 1, 4);
        let [q, kr, vr, table, kc, vc, out, pos_ptr, part, done] =
            ["q", "k", "v", "table", "k_cache", "v_cache", "out", "pos", "part", "done"].map(|p| k.ld_param_ptr(p));
        let n_head = k.ld_param("n_head");
        let n_head_kv = k.ld_param("n_head_kv");
        let scale = k.ld_param("scale");
        let round_q = k.ld_param("round_q");
        let window = k.ld_param("window");
        // the batched variant: row r's inputs, outputs, scratch and cache slot (the rest of the
        // kernel is the one-row kernel's, on these)
        let (q, kr, vr, kc, vc, out, pos_ptr, part, done) = if self.batched {
            let r = k.special(Special::CtaidZ);
            let slots = k.ld_param_ptr("slots");
            let slot_positions = k.ld_param("slot_positions");
            let qw = k.mul(U, n_head, hd);
            let kvw = k.mul(U, n_head_kv, hd);
            let (qi, kvi) = (k.mul(U, r, qw), k.mul(U, r, kvw));
            let pi = k.mul(U, r, n_head);
            let parts = k.mul(U, pi, Self::SPLITS * (hd + 2));
            let sa = k.elem_addr(slots, r, 4);
            let slot = k.ld(Space::Global, U, Addr::reg(sa));
            let s0 = k.mul(U, slot, slot_positions);
            let s0 = k.mul(U, s0, kvw);
            let esz = if f16 { 2 } else { 4 };
            (
                k.elem_addr(q, qi, 4),
                k.elem_addr(kr, kvi, 4),
                k.elem_addr(vr, kvi, 4),
                k.elem_addr(kc, s0, esz),
                k.elem_addr(vc, s0, esz),
                k.elem_addr(out, qi, 4),
                k.elem_addr(pos_ptr, r, 4),
                k.elem_addr(part, parts, 4),
                k.elem_addr(done, pi, 4),
            )
        } else {
            (q, kr, vr, kc, vc, out, pos_ptr, part, done)
        };
        let p = k.ld(Space::Global, U, Addr::reg(pos_ptr));
        let h = k.special(Special::CtaidX);
        let split = k.special(Special::CtaidY);
        let splits = k.special(Special::NctaidY);
        let tid = k.special(Special::TidX);
        let lane = k.bin(BinOp::And, PtxType::B32, tid, 31u32);
        let warp = k.bin(BinOp::Shr, U, tid, 5u32);
        let n = k.add(U, p, 1u32);
        // the row sees lo..n; this block's positions t0..t1 of them (maybe none), of which
        // t0..tc come from the cache
        let lo = window_start(&mut k, n, window);
        let span = k.sub(U, n, lo);
        let chunk0 = k.add(U, span, splits);
        let chunk1 = k.sub(U, chunk0, 1u32);
        let chunk = k.bin(BinOp::Div, U, chunk1, splits);
        let t0 = k.fma(U, split, chunk, lo);
        let t0 = k.bin(BinOp::Min, U, t0, n);
        let t1 = k.add(U, t0, chunk);
        let t1 = k.bin(BinOp::Min, U, t1, n);
        let tc = k.bin(BinOp::Min, U, t1, p);
        // position p is this block's when its share is not empty and ends at n
        let nonempty = k.setp(Cmp::Lt, U, t0, n);
        let ends = k.setp(Cmp::Eq, U, t1, n);
        let nonempty = k.selp(U, 1u32, 0u32, nonempty);
        let ends = k.selp(U, 1u32, 0u32, ends);
        let has_new = k.bin(BinOp::And, PtxType::B32, nonempty, ends);
        let mine = k.sub(U, t1, t0);
        let group = k.bin(BinOp::Div, U, n_head, n_head_kv);
        let g = k.bin(BinOp::Div, U, h, group);
        let stride = k.mul(U, n_head_kv, hd);
        let g_off = k.mul(U, g, hd);
        let d0 = k.mul(U, lane, dpl);
        let lane_off = k.add(U, g_off, d0);

        // 1. the rotated query (rounded to f16 if asked), the new key and value as cached
        let tab_row = k.mul(U, p, hd / 2);
        let tab = k.elem_addr(table, tab_row, 8);
        let qoff = k.mul(U, h, hd);
        let qi = k.add(U, qoff, d0);
        let qa = k.elem_addr(q, qi, 4);
        let qraw: Vec<Reg> = (0..dpl).map(|j| k.ld(Space::Global, F, Addr::at(qa, 4 * j as i64))).collect();
        // QK-norm: a head is one warp's (each lane `dpl` of its values), so its sum of squares
        // is a warp sum; then x·rstd·w, rounded as the norm kernel rounds it
        let norms = self.qk_norm.then(|| (k.ld_param_ptr("q_norm"), k.ld_param_ptr("k_norm"), k.ld_param("eps")));
        let head_norm = |k: &mut PtxKernel, x: Vec<Reg>, w: Reg, eps: Reg| -> Vec<Reg> {
            let mut ss = k.mov(F, 0.0f32);
            for &v in &x {
                ss = k.fma(F, v, v, ss);
            }
            let ss = warp_reduce(k, ReduceCombine::Sum, ss);
            let hdf = k.mov(F, hd as f32);
            let inv = k.un(UnOp::Rcp, F, hdf);
            let ms = k.mul(F, ss, inv);
            let me = k.add(F, ms, eps);
            let rstd = k.un(UnOp::Rsqrt, F, me);
            let wa = k.elem_addr(w, d0, 4);
            x.iter()
                .enumerate()
                .map(|(j, &v)| {
                    let g = k.ld(Space::Global, F, Addr::at(wa, 4 * j as i64));
                    let t = k.mul(F, v, rstd);
                    k.mul(F, t, g)
                })
                .collect()
        };
        let qraw = match norms {
            Some((qn, _, eps)) => head_norm(&mut k, qraw, qn, eps),
            None => qraw,
        };
        let rq = k.setp(Cmp::Ne, U, round_q, 0u32);
        let qv: Vec<Reg> = rotate(&mut k, self.pairs, &qraw, lane, tab)
            .into_iter()
            .map(|v| {
                let r = as_cached(&mut k, true, v);
                k.selp(F, r, v, rq)
            })
            .collect();
        let ka = k.elem_addr(kr, lane_off, 4);
        let va = k.elem_addr(vr, lane_off, 4);
        let kraw: Vec<Reg> = (0..dpl).map(|j| k.ld(Space::Global, F, Addr::at(ka, 4 * j as i64))).collect();
        let kraw = match norms {
            Some((_, kn, eps)) => head_norm(&mut k, kraw, kn, eps),
            None => kraw,
        };
        let knew: Vec<Reg> = rotate(&mut k, self.pairs, &kraw, lane, tab).into_iter().map(|v| as_cached(&mut k, f16, v)).collect();
        let vnew: Vec<Reg> = (0..dpl)
            .map(|j| {
                let v = k.ld(Space::Global, F, Addr::at(va, 4 * j as i64));
                as_cached(&mut k, f16, v)
            })
            .collect();
        // the store: warp 0 of split 0 of the group's first query head
        let hg = k.mul(U, g, group);
        let rank = k.sub(U, h, hg);
        let r1 = k.bin(BinOp::Or, PtxType::B32, rank, warp);
        let r2 = k.bin(BinOp::Or, PtxType::B32, r1, split);
        let writer = k.setp(Cmp::Eq, U, r2, 0u32);
        let cbase = k.fma(U, p, stride, lane_off);
        k.when(writer, false, |k| {
            for (cache, vals) in [(kc, &knew), (vc, &vnew)] {
                for (j, &v) in vals.iter().enumerate() {
                    let idx = k.add(U, cbase, j as u32);
                    if f16 {
                        let hv = k.cvt(PtxType::F16, F, v);
                        let a = k.elem_addr(cache, idx, 2);
                        k.st(Space::Global, PtxType::B16, Addr::reg(a), hv);
                    } else {
                        let a = k.elem_addr(cache, idx, 4);
                        k.st(Space::Global, F, Addr::reg(a), v);
                    }
                }
            }
        });
        // (`when` guards do not nest: predicates of two conditions are made from 0/1 values)
        let is_w0 = k.setp(Cmp::Eq, U, warp, 0u32);
        let w0 = k.selp(U, 1u32, 0u32, is_w0);
        let w0_new_u = k.bin(BinOp::And, PtxType::B32, w0, has_new);
        let w0_new = k.setp(Cmp::Ne, U, w0_new_u, 0u32);
        let is_l0 = k.setp(Cmp::Eq, U, lane, 0u32);
        let l0 = k.selp(U, 1u32, 0u32, is_l0);
        let w0_new_l0 = k.bin(BinOp::And, PtxType::B32, w0_new_u, l0);
        let w0_new_l0 = k.setp(Cmp::Ne, U, w0_new_l0, 0u32);

        // 2. scores (a warp per cached position, warp 0 also the new one) and their maximum
        let dot = |k: &mut PtxKernel, keys: &[Reg]| {
            let mut s = k.mov(F, 0.0f32);
            for (&qd, &kv) in qv.iter().zip(keys) {
                s = k.fma(F, qd, kv, s);
            }
            let s = warp_reduce(k, ReduceCombine::Sum, s);
            k.mul(F, s, scale)
        };
        let mx = k.mov(F, f32::NEG_INFINITY);
        let start = k.add(U, t0, warp);
        count(&mut k, start, tc, warps, |k, t| {
            let base = k.fma(U, t, stride, lane_off);
            let keys: Vec<Reg> = (0..dpl)
                .map(|j| {
                    let idx = k.add(U, base, j);
                    ld_cache(k, f16, kc, idx)
                })
                .collect();
            let s = dot(k, &keys);
            let local = k.sub(U, t, t0);
            let a = smem_at(k, &ss, local);
            let is0 = k.setp(Cmp::Eq, U, lane, 0u32);
            k.when(is0, false, |k| k.st(Space::Shared, F, Addr::reg(a), s));
            k.bin_to(BinOp::Max, mx, mx, s);
        });
        // (warp-uniform: every lane of warp 0 runs the shuffles, or none does)
        k.when(w0_new, false, |k| {
            let s = dot(k, &knew);
            k.bin_to(BinOp::Max, mx, mx, s);
            let local = k.sub(U, p, t0);
            let a = smem_at(k, &ss, local);
            k.when(w0_new_l0, false, |k| k.st(Space::Shared, F, Addr::reg(a), s));
        });
        let mx = block_reduce(&mut k, ReduceCombine::Max, mx, threads, &swarp);

        // 3. exponentials and their sum (none for an empty share: mx is −inf there)
        let sum = exponentials(&mut k, &ss, (tid, threads), mine, mx, &swarp);

        // 4. Σ e_t·v_t, the warps' sums added in shared memory
        let accs: Vec<Reg> = (0..dpl).map(|_| k.mov(F, 0.0f32)).collect();
        count(&mut k, start, tc, warps, |k, t| {
            let local = k.sub(U, t, t0);
            let a = smem_at(k, &ss, local);
            let e = k.ld(Space::Shared, F, Addr::reg(a));
            let base = k.fma(U, t, stride, lane_off);
            for (j, &acc) in accs.iter().enumerate() {
                let idx = k.add(U, base, j as u32);
                let v = ld_cache(k, f16, vc, idx);
                k.fma_to(acc, e, v, acc);
            }
        });
        k.when(w0_new, false, |k| {
            let local = k.sub(U, p, t0);
            let a = smem_at(k, &ss, local);
            let e = k.ld(Space::Shared, F, Addr::reg(a));
            for (&acc, &v) in accs.iter().zip(&vnew) {
                k.fma_to(acc, e, v, acc);
            }
        });
        stash_warp_sums(&mut k, &sred, &accs, (warp, d0), hd);

        // 5. this split's (acc, m, l) to its scratch row; the head's last block combines
        let row_len = hd + 2;
        let hs = k.fma(U, h, splits, split);
        let rowi = k.mul(U, hs, row_len);
        let prow = k.elem_addr(part, rowi, 4);
        each_dim(&mut k, tid, threads, hd, |k, d| {
            let o = add_warp_sums(k, &sred, d, warps, hd);
            let pa = k.elem_addr(prow, d, 4);
            k.st(Space::Global, F, Addr::reg(pa), o);
        });
        let is_t0 = k.setp(Cmp::Eq, U, tid, 0u32);
        let head_done = k.elem_addr(done, h, 4);
        let sl = k.mov(U, Operand::Symbol(slast));
        k.when(is_t0, false, |k| {
            k.st(Space::Global, F, Addr::at(prow, 4 * hd as i64), mx);
            k.st(Space::Global, F, Addr::at(prow, 4 * (hd + 1) as i64), sum);
        });
        // every thread's writes visible device-wide, then one arrival per block
        k.membar_gl();
        k.bar_sync();
        k.when(is_t0, false, |k| {
            let before = k.atom(Space::Global, AtomOp::Add, U, Addr::reg(head_done), 1u32);
            k.st(Space::Shared, U, Addr::reg(sl), before);
        });
        k.bar_sync();
        let before = k.ld(Space::Shared, U, Addr::reg(sl));
        let last_n = k.sub(U, splits, 1u32);
        let not_last = k.setp(Cmp::Ne, U, before, last_n);
        let end = k.new_label("end");
        k.bra_if(not_last, false, &end);
        k.membar_gl();
        let hrow = k.mul(U, h, splits);
        let hrow = k.mul(U, hrow, row_len);
        let head_rows = k.elem_addr(part, hrow, 4);
        // the largest split maximum, then the weights e^{m_s − M}
        let big = k.mov(F, f32::NEG_INFINITY);
        let ms: Vec<Reg> = (0..Self::SPLITS)
            .map(|s| {
                let m = k.ld_l2(Addr::at(head_rows, 4 * (s * row_len + hd) as i64));
                k.bin_to(BinOp::Max, big, big, m);
                m
            })
            .collect();
        each_dim(&mut k, tid, threads, hd, |k, d| {
            let (l, o) = (k.mov(F, 0.0f32), k.mov(F, 0.0f32));
            let col = k.elem_addr(head_rows, d, 4);
            for (s, &m) in ms.iter().enumerate() {
                let d = k.sub(F, m, big);
                let w = exp(k, d);
                let ls = k.ld_l2(Addr::at(head_rows, 4 * (s as u32 * row_len + hd + 1) as i64));
                k.fma_to(l, w, ls, l);
                let a = k.ld_l2(Addr::at(col, 4 * (s as u32 * row_len) as i64));
                k.fma_to(o, w, a, o);
            }
            let inv = k.un(UnOp::Rcp, F, l);
            let o = k.mul(F, o, inv);
            let oi = k.add(U, qoff, d);
            let oa = k.elem_addr(out, oi, 4);
            k.st(Space::Global, F, Addr::reg(oa), o);
        });
        // ready for the next step (every block of this head has arrived)
        k.when(is_t0, false, |k| k.st(Space::Global, U, Addr::reg(head_done), 0u32));
        k.label(&end);
        k.ret();
        k
    }
}
