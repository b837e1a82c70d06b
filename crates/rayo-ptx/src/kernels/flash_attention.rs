//! A prompt's causal grouped-query attention on the tensor cores, flash-attention style: a
//! block takes 64 query rows of one head and walks the KV cache (f16) in tiles of 64
//! positions (32 for heads of 256, whose two tiles then fill the 48 KB of static shared
//! memory), keeping each row's running maximum, sum of exponentials and weighted sum of
//! values in registers — the scores never leave the chip.
//!
//! 4 warps, 16 query rows each. The query rows are scaled by `scale·log2 e`, rounded to f16
//! and kept as mma fragments; per tile, `S = Q·Kᵀ` (`mma.sync.m16n8k16`, K as stored is the
//! `col` operand), the causal mask, the online softmax in base 2, and `O += P·V` with `P`
//! taken straight from the score accumulators (rounded to f16) and V through `ldmatrix.trans`.
//! Row `i` is at position `pos0 + i` (`pos0` read from device memory) and sees positions
//! `0..=pos0 + i`, or on a sliding-window layer the last `window` of them: the walk starts at
//! the tile of the block's first visible position, and a row's maximum stays −inf (its
//! weights 0) over tiles it sees none of.

use super::common::*;
use super::{Kernel, LaunchConfig};
use crate::ptx::*;

const B32: PtxType = PtxType::B32;
const ROWS: u32 = 64;
const THREADS: u32 = 128;

/// Parameters: `q` (m × n_head × head_dim f32), `k_cache`, `v_cache` (one layer, positions ×
/// n_head_kv × head_dim f16), `out` (m × n_head × head_dim f32), `pos` (one u32 in device
/// memory: row 0's position) (u64); `n_head`, `n_head_kv`, `m` (u32), `scale` (f32), `window`
/// (u32: a row at position `p` sees `p + 1 − window ..= p`; 0 for every position). The
/// caller checks that `pos0 + m` positions fit the cache and every index fits 32 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlashAttentionKernel {
    head_dim: u32,
}

impl FlashAttentionKernel {
    pub const THREADS: u32 = THREADS;
    /// Query rows per block.
    pub const ROWS: u32 = ROWS;

    /// `None` unless `head_dim` is 64, 128 or 256.
    pub fn new(head_dim: u32) -> Option<FlashAttentionKernel> {
        matches!(head_dim, 64 | 128 | 256).then_some(FlashAttentionKernel { head_dim })
    }

    /// Cache positions per tile: 64, or 32 for heads of 256 (two tiles of K and V within
    /// static shared memory).
    fn tile_positions(&self) -> u32 {
        if self.head_dim > 128 {
            32
        } else {
            64
        }
    }

    pub fn launch(&self, n_head: u32, m: u32) -> LaunchConfig {
        LaunchConfig { grid: (m.div_ceil(ROWS).max(1), n_head.max(1), 1), block: (THREADS, 1, 1), shared_bytes: 0 }
    }
}

impl Kernel for FlashAttentionKernel {
    fn name(&self) -> String {
        format!("flash_attention_f16_hd{}", self.head_dim)
    }

    fn build(&self, sm: u32) -> PtxKernel {
        let hd = self.head_dim;
        // shared rows of hd halves and 8 of padding: the 8 addresses of an ldmatrix phase
        // land in different banks
        let row_bytes = (hd + 8) * 2;
        let kvr = self.tile_positions();
        let tile = kvr * row_bytes;
        // the query rows are staged in the K and V tiles' place
        assert!(ROWS * row_bytes <= 2 * tile && 2 * tile <= 48 * 1024);
        let mut k = PtxKernel::new(&self.name());
        for p in ["q", "k_cache", "v_cache", "out", "pos"] {
            k.add_param(p, PtxType::U64);
        }
        for p in ["n_head", "n_head_kv", "m"] {
            k.add_param(p, U);
        }
        k.add_param("scale", F);
        k.add_param("window", U);
        k.launch_bounds((THREADS, 1, 1), None);
        let sh = k.shared_array("kv", B32, 2 * tile / 4, 16);
        k.grid_dep_sync(sm);
        let q = k.ld_param_ptr("q");
        let kc = k.ld_param_ptr("k_cache");
        let vc = k.ld_param_ptr("v_cache");
        let out = k.ld_param_ptr("out");
        let pos = k.ld_param_ptr("pos");
        let n_head = k.ld_param("n_head");
        let n_kv = k.ld_param("n_head_kv");
        let m = k.ld_param("m");
        let scale = k.ld_param("scale");
        let window = k.ld_param("window");
        let tid = k.special(Special::TidX);
        let bx = k.special(Special::CtaidX);
        let h = k.special(Special::CtaidY);
        let lane = k.bin(BinOp::And, B32, tid, 31u32);
        let warp = k.bin(BinOp::Shr, U, tid, 5u32);
        let g = k.bin(BinOp::Shr, U, lane, 2u32);
        let t = k.bin(BinOp::And, B32, lane, 3u32);
        let l8 = k.bin(BinOp::And, B32, lane, 7u32);
        let l16 = k.bin(BinOp::And, B32, lane, 15u32);
        let hi = k.bin(BinOp::Shr, U, lane, 4u32);
        let mid = k.bin(BinOp::Shr, U, lane, 3u32);
        let mid = k.bin(BinOp::And, B32, mid, 1u32);
        let group = k.bin(BinOp::Div, U, n_head, n_kv);
        let kvh = k.bin(BinOp::Div, U, h, group);
        let pos0 = k.ld(Space::Global, U, Addr::reg(pos));
        let q0 = k.mul(U, bx, ROWS);
        let m1 = k.sub(U, m, 1u32);
        let last = k.add(U, q0, ROWS - 1);
        let last = k.bin(BinOp::Min, U, last, m1);
        let maxpos = k.add(U, pos0, last);
        let ks = k.mov(U, Operand::Symbol(sh));
        let vs = k.add(U, ks, tile);

        // the block's query rows, scaled, as f16 in the K tile's place (rows past m clamped)
        let qs = k.mul(F, scale, LOG2E);
        let c4 = hd / 4;
        for i in 0..ROWS * c4 / THREADS {
            let idx = k.add(U, tid, i * THREADS);
            let r = k.bin(BinOp::Shr, U, idx, c4.trailing_zeros());
            let c = k.bin(BinOp::And, B32, idx, c4 - 1);
            let row = k.add(U, q0, r);
            let row = k.bin(BinOp::Min, U, row, m1);
            let gi = k.fma(U, row, n_head, h);
            let c4i = k.mul(U, c, 4u32);
            let gi = k.fma(U, gi, hd, c4i);
            let ga = k.elem_addr(q, gi, 4);
            let v = k.ld_v(Space::Global, F, 4, Addr::reg(ga));
            let v: Vec<Reg> = v.iter().map(|&x| k.mul(F, x, qs)).collect();
            let lo = k.cvt_f16x2(v[1], v[0]);
            let hi2 = k.cvt_f16x2(v[3], v[2]);
            let so = k.mul(U, r, row_bytes);
            let so = k.fma(U, c, 8u32, so);
            let sa = k.add(U, ks, so);
            k.st_v(Space::Shared, B32, Addr::reg(sa), &[lo, hi2]);
        }
        k.bar_sync();
        // A fragments of the warp's 16 rows: lane l gives row l % 16, column (l / 16)·8
        let ar = k.fma(U, warp, 16u32, l16);
        let ao = k.mul(U, ar, row_bytes);
        let ao = k.fma(U, hi, 16u32, ao);
        let qa = k.add(U, ks, ao);
        let qf: Vec<[Reg; 4]> = (0..hd / 16).map(|kk| k.ldmatrix_x4(Addr::at(qa, 32 * kk as i64), false)).collect();
        k.bar_sync();

        // K fragments (B, not transposed): lane l gives position l % 8 + (l / 16)·8, column
        // ((l / 8) % 2)·8; V fragments (B, transposed): position l % 8 + ((l / 8) % 2)·8,
        // column (l / 16)·8
        let kb = k.fma(U, hi, 8u32, l8);
        let kb = k.mul(U, kb, row_bytes);
        let kb = k.fma(U, mid, 16u32, kb);
        let kb = k.add(U, ks, kb);
        let vb = k.fma(U, mid, 8u32, l8);
        let vb = k.mul(U, vb, row_bytes);
        let vb = k.fma(U, hi, 16u32, vb);
        let vb = k.add(U, vs, vb);

        // K/V tile loads: 16-byte chunks, rows past the last position clamped to it
        let c8 = hd / 8;
        let loads: Vec<(Reg, Reg, Reg)> = (0..kvr * c8 / THREADS)
            .map(|i| {
                let idx = k.add(U, tid, i * THREADS);
                let r = k.bin(BinOp::Shr, U, idx, c8.trailing_zeros());
                let c = k.bin(BinOp::And, B32, idx, c8 - 1);
                let so = k.mul(U, r, row_bytes);
                let so = k.fma(U, c, 16u32, so);
                let ch = k.mul(U, c, 8u32);
                (r, so, ch)
            })
            .collect();
        let kvh_off = k.mul(U, kvh, hd);
        let pos_stride = k.mul(U, n_kv, hd);

        // running state: rows g and g + 8 of the warp's 16
        let ninf = f32::NEG_INFINITY;
        let mx = [k.mov(F, ninf), k.mov(F, ninf)];
        let lsum = [k.mov(F, 0.0f32), k.mov(F, 0.0f32)];
        let o: Vec<[Reg; 4]> = (0..hd / 8).map(|_| [(); 4].map(|_| k.mov(F, 0.0f32))).collect();
        let wr = k.fma(U, warp, 16u32, g);
        let ra = k.add(U, q0, wr);
        let lim = [k.add(U, pos0, ra), k.add(U, pos0, ra)];
        k.bin_to(BinOp::Add, lim[1], lim[1], 8u32);
        // each row's first visible position (0 without a window)
        let lo = lim.map(|l| {
            let n = k.add(U, l, 1u32);
            super::attention::window_start(&mut k, n, window)
        });
        let t2 = k.mul(U, t, 2u32);

        // from the tile of the block's first row's first visible position
        let first = k.add(U, pos0, q0);
        let first = k.add(U, first, 1u32);
        let first = super::attention::window_start(&mut k, first, window);
        let first = k.bin(BinOp::Div, U, first, kvr);
        let kv0 = k.mul(U, first, kvr);
        let (top, done) = (k.new_label("tile"), k.new_label("tiles_end"));
        k.label(&top);
        let past = k.setp(Cmp::Gt, U, kv0, maxpos);
        k.bra_if(past, false, &done);
        for &(r, so, ch) in &loads {
            let p = k.add(U, kv0, r);
            let p = k.bin(BinOp::Min, U, p, maxpos);
            let e = k.fma(U, p, pos_stride, kvh_off);
            let e = k.add(U, e, ch);
            let ka = k.elem_addr(kc, e, 2);
            let va = k.elem_addr(vc, e, 2);
            let kv = k.ld_v(Space::Global, B32, 4, Addr::reg(ka));
            let vv = k.ld_v(Space::Global, B32, 4, Addr::reg(va));
            let sk = k.add(U, ks, so);
            let sv = k.add(U, vs, so);
            k.st_v(Space::Shared, B32, Addr::reg(sk), &kv);
            k.st_v(Space::Shared, B32, Addr::reg(sv), &vv);
        }
        k.bar_sync();
        // S = Q·Kᵀ: 16 rows × kvr positions, tiles of 16×8
        let s: Vec<[Reg; 4]> = (0..kvr / 8).map(|_| [(); 4].map(|_| k.mov(F, 0.0f32))).collect();
        for (kk, a) in qf.iter().enumerate() {
            for nj in 0..(kvr / 16) as usize {
                let b = k.ldmatrix_x4(Addr::at(kb, (nj as u32 * 16 * row_bytes) as i64 + 32 * kk as i64), false);
                k.mma_f16(s[2 * nj], *a, [b[0], b[1]], s[2 * nj]);
                k.mma_f16(s[2 * nj + 1], *a, [b[2], b[3]], s[2 * nj + 1]);
            }
        }
        // the causal mask (and the window's), then each row's maximum over the tile (the 4
        // lanes of a row)
        let cbase = k.add(U, kv0, t2);
        let tmax = [k.mov(F, ninf), k.mov(F, ninf)];
        for (nt, tile_s) in s.iter().enumerate() {
            for (e, &se) in tile_s.iter().enumerate() {
                let (half, col) = (e / 2, e % 2);
                let p = k.add(U, cbase, (8 * nt + col) as u32);
                let after = k.setp(Cmp::Gt, U, p, lim[half]);
                let before = k.setp(Cmp::Lt, U, p, lo[half]);
                let masked = k.bin(BinOp::Or, PtxType::Pred, after, before);
                let v = k.selp(F, ninf, se, masked);
                k.mov_to(se, v);
                k.bin_to(BinOp::Max, tmax[half], tmax[half], se);
            }
        }
        let mut corr = [tmax[0]; 2];
        // the maximum the exponentials subtract: 0 while a row has seen no position (its
        // maximum −inf: −inf − −inf would be NaN; its weights are then 2^−inf = 0)
        let mut base = [tmax[0]; 2];
        for half in 0..2 {
            for sh in [1u32, 2] {
                let other = k.shfl(ShflMode::Bfly, tmax[half], sh, 31);
                k.bin_to(BinOp::Max, tmax[half], tmax[half], other);
            }
            let m_new = k.bin(BinOp::Max, F, mx[half], tmax[half]);
            let none = k.setp(Cmp::Eq, F, m_new, ninf);
            base[half] = k.selp(F, 0.0f32, m_new, none);
            let d = k.sub(F, mx[half], base[half]);
            corr[half] = k.un(UnOp::Ex2, F, d);
            k.mov_to(mx[half], m_new);
        }
        // P = 2^(S − max), the row sums (this lane's share), O rescaled
        for tile_s in &s {
            for e in 0..4usize {
                let d = k.sub(F, tile_s[e], base[e / 2]);
                k.un_to(UnOp::Ex2, tile_s[e], d);
            }
        }
        for half in 0..2 {
            k.bin_to(BinOp::Mul, lsum[half], lsum[half], corr[half]);
            for tile_s in &s {
                k.bin_to(BinOp::Add, lsum[half], lsum[half], tile_s[2 * half]);
                k.bin_to(BinOp::Add, lsum[half], lsum[half], tile_s[2 * half + 1]);
            }
        }
        for acc in &o {
            for e in 0..4usize {
                k.bin_to(BinOp::Mul, acc[e], acc[e], corr[e / 2]);
            }
        }
        // O += P·V, P's fragments straight from the score tiles
        for j in 0..(kvr / 16) as usize {
            let (s0, s1) = (s[2 * j], s[2 * j + 1]);
            let a = [k.cvt_f16x2(s0[1], s0[0]), k.cvt_f16x2(s0[3], s0[2]), k.cvt_f16x2(s1[1], s1[0]), k.cvt_f16x2(s1[3], s1[2])];
            for dp in 0..(hd / 16) as usize {
                let b = k.ldmatrix_x4(Addr::at(vb, (j as u32 * 16 * row_bytes) as i64 + 32 * dp as i64), true);
                k.mma_f16(o[2 * dp], a, [b[0], b[1]], o[2 * dp]);
                k.mma_f16(o[2 * dp + 1], a, [b[2], b[3]], o[2 * dp + 1]);
            }
        }
        k.bar_sync();
        k.bin_to(BinOp::Add, kv0, kv0, kvr);
        k.bra(&top);
        k.label(&done);

        // the rows' sums over their 4 lanes, then O / sum for rows below m
        for half in 0..2usize {
            for sh in [1u32, 2] {
                let other = k.shfl(ShflMode::Bfly, lsum[half], sh, 31);
                k.bin_to(BinOp::Add, lsum[half], lsum[half], other);
            }
            let inv = k.un(UnOp::Rcp, F, lsum[half]);
            let row = k.add(U, ra, 8 * half as u32);
            let ok = k.setp(Cmp::Lt, U, row, m);
            let gi = k.fma(U, row, n_head, h);
            let gi = k.mul(U, gi, hd);
            let gi = k.add(U, gi, t2);
            let base = k.elem_addr(out, gi, 4);
            let vals: Vec<[Reg; 2]> = o.iter().map(|acc| [k.mul(F, acc[2 * half], inv), k.mul(F, acc[2 * half + 1], inv)]).collect();
            k.when(ok, false, |k| {
                for (nt, v) in vals.iter().enumerate() {
                    k.st_v(Space::Global, F, Addr::at(base, 32 * nt as i64), v);
                }
            });
        }
        k.ret();
        k
    }
}
