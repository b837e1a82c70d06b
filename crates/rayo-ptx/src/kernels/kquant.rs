//! The k-quants' 256-value super-blocks on the device (layouts as ggml's
//! `dequantize_row_q{2,3,4,5,6}_K`): eight values of a block times activations, for the
//! quantized matvec, and one value, for the token embedding and the dequantizing transpose.
//!
//! - Q2_K (84 bytes, blocks 4-byte aligned): 16 bytes of scales (a 4-bit scale and a 4-bit min
//!   per 16 values), 64 bytes of 2-bit values, `d`, `dmin` (f16). Value `128n + 32t + l` (`t`
//!   < 4, `l` < 32) is bits `2t..2t+2` of byte `16 + 32n + l`; value = `d·(sc & 15)·q −
//!   dmin·(sc >> 4)`, `sc` the byte of its 16 values.
//! - Q3_K (110 bytes, 2-byte aligned): 32 bytes `hmask`, 64 bytes of 2-bit values (as Q2_K's
//!   at 32), 12 bytes of sixteen 6-bit scales, `d` (f16). Value = `d·(scale − 32)·(q − 4)`,
//!   plus 4 where bit `4n + t` of `hmask[l]` is set; scale `s` is the nibble `s/8` of byte
//!   `96 + s%8` with bits `2(s/4)..` of byte `104 + s%4` above it.
//! - Q4_K (144 bytes): `d`, `dmin` (f16), 12 bytes of 6-bit scales and mins for eight 32-value
//!   sub-blocks, 128 bytes of nibbles: 64-value chunk `c` is the low nibbles of bytes
//!   `32c..32c+32` then their high nibbles. Value = `d·sc·q − dmin·m`.
//! - Q5_K (176 bytes): the same with 32 bytes `qh` before the nibbles: bit `j` of `qh[l]` is
//!   the fifth bit of value `l` of sub-block `j`.
//! - Q6_K (210 bytes, blocks only 2-byte aligned): 128 bytes of low nibbles `ql`, 64 bytes of
//!   2-bit highs `qh`, 16 signed 8-bit scales of 16 values each, `d` (f16) last. Value
//!   `128n + 32t + l` (`t` < 4, `l` < 32) = `d·sc[8n + l/16 + 2t]·(q − 32)` with `q` the nibble
//!   `t/2` of `ql[64n + 32(t%2) + l]` and bits `2t..2t+2` of `qh[32n + l]` above it.

use super::common::*;
use super::embed::byte_at;
use super::qmatvec::{dot, ld_f16, ld_u16, QFormat};
use crate::ptx::*;

/// Byte `i` (a constant) of the u32 `w`, shifted right by `sh` first, masked with `mask`.
fn field(k: &mut PtxKernel, w: Reg, i: u32, mask: u32) -> Reg {
    let v = if i == 0 { w } else { k.bin(BinOp::Shr, U, w, 8 * i) };
    k.bin(BinOp::And, PtxType::B32, v, mask)
}

/// Q4_K/Q5_K: the 6-bit scale and min of sub-block `j` (a u32 register, 0..8) of the block at
/// `a` (16-byte aligned), as f32 (ggml's `get_scale_min_k4`).
pub(crate) fn scale_min_k4(k: &mut PtxKernel, a: Reg, j: Reg) -> (Reg, Reg) {
    let words = [4i64, 8, 12].map(|o| k.ld(Space::Global, U, Addr::at(a, o)));
    scale_min_k4_of(k, words, j)
}

/// [`scale_min_k4`] from the 12 scale bytes as three words (bytes 4..16 of the block).
pub(crate) fn scale_min_k4_of(k: &mut PtxKernel, words: [Reg; 3], j: Reg) -> (Reg, Reg) {
    // bytes s[j & 3], s[(j & 3) + 4], s[(j & 3) + 8] of the 12 scale bytes
    let jj = k.bin(BinOp::And, PtxType::B32, j, 3u32);
    let sh = k.mul(U, jj, 8u32);
    let [x, y, z] = words.map(|w| {
        let w = k.bin(BinOp::Shr, U, w, sh);
        k.bin(BinOp::And, PtxType::B32, w, 0xffu32)
    });
    // j < 4: s[j] & 63, s[j + 4] & 63
    let sc_lo = k.bin(BinOp::And, PtxType::B32, x, 63u32);
    let m_lo = k.bin(BinOp::And, PtxType::B32, y, 63u32);
    // j ≥ 4: (s[j + 4] & 15) | (s[j − 4] >> 6) << 4, (s[j + 4] >> 4) | (s[j] >> 6) << 4
    let top = |k: &mut PtxKernel, v: Reg| {
        let t = k.bin(BinOp::Shr, U, v, 6u32);
        k.bin(BinOp::Shl, PtxType::B32, t, 4u32)
    };
    let z_lo = k.bin(BinOp::And, PtxType::B32, z, 15u32);
    let x_top = top(k, x);
    let sc_hi = k.bin(BinOp::Or, PtxType::B32, z_lo, x_top);
    let z_hi = k.bin(BinOp::Shr, U, z, 4u32);
    let y_top = top(k, y);
    let m_hi = k.bin(BinOp::Or, PtxType::B32, z_hi, y_top);
    let high = k.setp(Cmp::Ge, U, j, 4u32);
    let sc = k.selp(U, sc_hi, sc_lo, high);
    let m = k.selp(U, m_hi, m_lo, high);
    (k.cvt(F, U, sc), k.cvt(F, U, m))
}

/// Q6_K: the block's `d` and the signed scale `sc[8n + p/2 + 2t]` (byte 192.. of the block at
/// `a`; `t2` = 2t) of values `128n + 32t + 8p ..`, both as f32.
pub(crate) fn q6_k_scales(k: &mut PtxKernel, a: Reg, n: Reg, p: Reg, t2: Reg) -> (Reg, Reg) {
    let so = k.mul(U, n, 8u32);
    let p2 = k.bin(BinOp::Shr, U, p, 1u32);
    let so = k.add(U, so, p2);
    let so = k.add(U, so, t2);
    let so = k.add(U, so, 192u32);
    let sc = byte_at(k, a, so);
    let sc = k.bin(BinOp::Shl, PtxType::B32, sc, 24u32);
    let sc = k.bin(BinOp::Shr, PtxType::S32, sc, 24u32);
    (ld_f16(k, a, 208), k.cvt(F, PtxType::S32, sc))
}

/// `Σ` over values `8g .. 8g + 8` (`g` a u32 register, 0..32) of the k-quant block at `a`
/// times the 8 activations `xs`.
pub(crate) fn group_dot(k: &mut PtxKernel, fmt: QFormat, a: Reg, g: Reg, xs: &[Reg]) -> Reg {
    let mut sx = xs[0];
    for &v in &xs[1..] {
        sx = k.add(F, sx, v);
    }
    let p = k.bin(BinOp::And, PtxType::B32, g, 3u32);
    let j = k.bin(BinOp::Shr, U, g, 2u32);
    match fmt {
        QFormat::Q4_K | QFormat::Q5_K => {
            let d = ld_f16(k, a, 0);
            let dmin = ld_f16(k, a, 2);
            let (sc, m) = scale_min_k4(k, a, j);
            // the 8 bytes of nibbles: chunk j / 2, bytes 8p.., nibble j % 2
            let qs = if fmt == QFormat::Q4_K { 16u32 } else { 48 };
            let c = k.bin(BinOp::Shr, U, j, 1u32);
            let off = k.mad_wide(U, c, 32u32, a);
            let p8 = k.mul(U, p, 8u32);
            let qa = k.mad_wide(U, p8, 1u32, off);
            let ws = k.ld_v(Space::Global, U, 2, Addr::at(qa, qs as i64));
            let odd = k.bin(BinOp::And, PtxType::B32, j, 1u32);
            let nib = k.mul(U, odd, 4u32);
            let ws: Vec<Reg> = ws.iter().map(|&w| k.bin(BinOp::Shr, U, w, nib)).collect();
            // Q5_K: bytes qh[8p..8p + 8], each shifted right by j (bit j → bit 0)
            let hs = (fmt == QFormat::Q5_K).then(|| {
                let ha = k.mad_wide(U, p8, 1u32, a);
                let hs = k.ld_v(Space::Global, U, 2, Addr::at(ha, 16));
                hs.iter().map(|&h| k.bin(BinOp::Shr, U, h, j)).collect::<Vec<_>>()
            });
            let q: Vec<Reg> = (0..8u32)
                .map(|i| {
                    let v = field(k, ws[(i / 4) as usize], i % 4, 15);
                    match &hs {
                        Some(hs) => {
                            let b = field(k, hs[(i / 4) as usize], i % 4, 1);
                            let b = k.bin(BinOp::Shl, PtxType::B32, b, 4u32);
                            k.bin(BinOp::Or, PtxType::B32, v, b)
                        }
                        None => v,
                    }
                })
                .collect();
            let s = dot(k, U, &q, xs);
            let ds = k.mul(F, d, sc);
            let dm = k.mul(F, dmin, m);
            let ms = k.mul(F, dm, sx);
            let neg = k.un(UnOp::Neg, F, ms);
            k.fma(F, ds, s, neg)
        }
        QFormat::Q6_K => {
            // g = 16n + 4t + p: half n, quarter t of the half, values 8p.. of its 32
            let n = k.bin(BinOp::Shr, U, g, 4u32);
            let t = k.bin(BinOp::And, PtxType::B32, j, 3u32);
            let p8 = k.mul(U, p, 8u32);
            // ql bytes at 64n + 32(t % 2) + 8p, nibble t / 2
            let t_odd = k.bin(BinOp::And, PtxType::B32, t, 1u32);
            let lo_off = k.mad_wide(U, n, 64u32, a);
            let lo_off2 = k.mul(U, t_odd, 32u32);
            let lo_off2 = k.add(U, lo_off2, p8);
            let la = k.mad_wide(U, lo_off2, 1u32, lo_off);
            let t_hi = k.bin(BinOp::Shr, U, t, 1u32);
            let nib = k.mul(U, t_hi, 4u32);
            // qh bytes at 128 + 32n + 8p, bits 2t..
            let hn = k.mul(U, n, 32u32);
            let hn = k.add(U, hn, p8);
            let ha = k.mad_wide(U, hn, 1u32, a);
            let hsh = k.mul(U, t, 2u32);
            let mut q = Vec::with_capacity(8);
            for w in 0..4i64 {
                let l = ld_u16(k, la, 2 * w);
                let l = k.bin(BinOp::Shr, U, l, nib);
                let h = ld_u16(k, ha, 128 + 2 * w);
                let h = k.bin(BinOp::Shr, U, h, hsh);
                for b in 0..2u32 {
                    let lv = field(k, l, b, 15);
                    let hv = field(k, h, b, 3);
                    let hv = k.bin(BinOp::Shl, PtxType::B32, hv, 4u32);
                    q.push(k.bin(BinOp::Or, PtxType::B32, lv, hv));
                }
            }
            let (d, sc) = q6_k_scales(k, a, n, p, hsh);
            let s = dot(k, U, &q, xs);
            // d·sc·(Σ q·x − 32 Σ x)
            let s = k.fma(F, sx, -32.0f32, s);
            let ds = k.mul(F, d, sc);
            k.mul(F, ds, s)
        }
        QFormat::Q2_K | QFormat::Q3_K => {
            // g = 16n + 4t + p: values 8p.. of quarter t of half n; sub-block g / 2
            let n = k.bin(BinOp::Shr, U, g, 4u32);
            let t = k.bin(BinOp::And, PtxType::B32, j, 3u32);
            let s = k.bin(BinOp::Shr, U, g, 1u32);
            let p8 = k.mul(U, p, 8u32);
            let off = k.mad_wide(U, n, 32u32, a);
            let qa = k.mad_wide(U, p8, 1u32, off);
            let sh = k.mul(U, t, 2u32);
            let q2 = fmt == QFormat::Q2_K;
            // the 8 bytes of 2-bit values (Q2_K's 4-byte aligned: two words; Q3_K's 2: four halves)
            let words: Vec<(Reg, u32)> = if q2 {
                (0..2i64).map(|w| (k.ld(Space::Global, U, Addr::at(qa, 16 + 4 * w)), 4)).collect()
            } else {
                (0..4i64).map(|w| (ld_u16(k, qa, 32 + 2 * w), 2)).collect()
            };
            // Q3_K: the hmask bytes 8p.., shifted so that bit 4n + t of each is bit 0
            let hs: Option<Vec<Reg>> = (!q2).then(|| {
                let ha = k.mad_wide(U, p8, 1u32, a);
                let hb = k.mul(U, n, 4u32);
                let hb = k.add(U, hb, t);
                (0..4i64)
                    .map(|w| {
                        let h = ld_u16(k, ha, 2 * w);
                        k.bin(BinOp::Shr, U, h, hb)
                    })
                    .collect()
            });
            let mut q = Vec::with_capacity(8);
            for (wi, &(w, per)) in words.iter().enumerate() {
                let w = k.bin(BinOp::Shr, U, w, sh);
                for bi in 0..per {
                    let v = field(k, w, bi, 3);
                    q.push(match &hs {
                        Some(hs) => {
                            // q + 4·hbit (the −4 is taken out below)
                            let i = wi as u32 * per + bi;
                            let hb = field(k, hs[(i / 2) as usize], i % 2, 1);
                            let hb = k.bin(BinOp::Shl, PtxType::B32, hb, 2u32);
                            k.add(U, v, hb)
                        }
                        None => v,
                    });
                }
            }
            let dot8 = dot(k, U, &q, xs);
            if q2 {
                let (ds, dm) = q2_scale_min(k, a, s);
                let ms = k.mul(F, dm, sx);
                let neg = k.un(UnOp::Neg, F, ms);
                k.fma(F, ds, dot8, neg)
            } else {
                let sc = q3_scale(k, a, s);
                let d = ld_f16(k, a, 108);
                // d·sc·(Σ (q + 4h)·x − 4 Σ x)
                let v = k.fma(F, sx, -4.0f32, dot8);
                let ds = k.mul(F, d, sc);
                k.mul(F, ds, v)
            }
        }
        _ => unreachable!("group_dot takes the k-quants"),
    }
}

/// Q2_K: `d·scale` and `dmin·min` of sub-block `s` (a u32 register, 0..16), as f32.
fn q2_scale_min(k: &mut PtxKernel, a: Reg, s: Reg) -> (Reg, Reg) {
    let sc = byte_at(k, a, s);
    let lo = k.bin(BinOp::And, PtxType::B32, sc, 15u32);
    let hi = k.bin(BinOp::Shr, U, sc, 4u32);
    let (lo, hi) = (k.cvt(F, U, lo), k.cvt(F, U, hi));
    let d = ld_f16(k, a, 80);
    let dmin = ld_f16(k, a, 82);
    (k.mul(F, d, lo), k.mul(F, dmin, hi))
}

/// Q3_K: the signed scale (`− 32`) of sub-block `s` (a u32 register, 0..16), as f32.
fn q3_scale(k: &mut PtxKernel, a: Reg, s: Reg) -> Reg {
    let s7 = k.bin(BinOp::And, PtxType::B32, s, 7u32);
    let lo_off = k.add(U, s7, 96u32);
    let lo = byte_at(k, a, lo_off);
    let s8 = k.bin(BinOp::Shr, U, s, 3u32);
    let lsh = k.mul(U, s8, 4u32);
    let lo = k.bin(BinOp::Shr, U, lo, lsh);
    let lo = k.bin(BinOp::And, PtxType::B32, lo, 15u32);
    let s3 = k.bin(BinOp::And, PtxType::B32, s, 3u32);
    let hi_off = k.add(U, s3, 104u32);
    let hi = byte_at(k, a, hi_off);
    let s4 = k.bin(BinOp::Shr, U, s, 2u32);
    let hsh = k.mul(U, s4, 2u32);
    let hi = k.bin(BinOp::Shr, U, hi, hsh);
    let hi = k.bin(BinOp::And, PtxType::B32, hi, 3u32);
    let hi = k.bin(BinOp::Shl, PtxType::B32, hi, 4u32);
    let sc = k.bin(BinOp::Or, PtxType::B32, lo, hi);
    let sc = k.cvt(F, U, sc);
    k.sub(F, sc, 32.0f32)
}

/// Value `j` (a u32 register, 0..256) of the k-quant block at `a`, as f32.
pub(crate) fn value_at(k: &mut PtxKernel, fmt: QFormat, a: Reg, j: Reg) -> Reg {
    match fmt {
        QFormat::Q4_K | QFormat::Q5_K => {
            let d = ld_f16(k, a, 0);
            let dmin = ld_f16(k, a, 2);
            let sub = k.bin(BinOp::Shr, U, j, 5u32);
            let l = k.bin(BinOp::And, PtxType::B32, j, 31u32);
            let (sc, m) = scale_min_k4(k, a, sub);
            let qs = if fmt == QFormat::Q4_K { 16u32 } else { 48 };
            let c = k.bin(BinOp::Shr, U, sub, 1u32);
            let off = k.fma(U, c, 32u32, l);
            let off = k.add(U, off, qs);
            let byte = byte_at(k, a, off);
            let odd = k.bin(BinOp::And, PtxType::B32, sub, 1u32);
            let nib = k.mul(U, odd, 4u32);
            let v = k.bin(BinOp::Shr, U, byte, nib);
            let mut q = k.bin(BinOp::And, PtxType::B32, v, 15u32);
            if fmt == QFormat::Q5_K {
                let ho = k.add(U, l, 16u32);
                let h = byte_at(k, a, ho);
                let h = k.bin(BinOp::Shr, U, h, sub);
                let h = k.bin(BinOp::And, PtxType::B32, h, 1u32);
                let h = k.bin(BinOp::Shl, PtxType::B32, h, 4u32);
                q = k.bin(BinOp::Or, PtxType::B32, q, h);
            }
            let qf = k.cvt(F, U, q);
            let ds = k.mul(F, d, sc);
            let dm = k.mul(F, dmin, m);
            let neg = k.un(UnOp::Neg, F, dm);
            k.fma(F, ds, qf, neg)
        }
        QFormat::Q6_K => {
            let n = k.bin(BinOp::Shr, U, j, 7u32);
            let w = k.bin(BinOp::And, PtxType::B32, j, 127u32);
            let t = k.bin(BinOp::Shr, U, w, 5u32);
            let l = k.bin(BinOp::And, PtxType::B32, w, 31u32);
            let t_odd = k.bin(BinOp::And, PtxType::B32, t, 1u32);
            let lo = k.mul(U, n, 64u32);
            let lo = k.fma(U, t_odd, 32u32, lo);
            let lo = k.add(U, lo, l);
            let lb = byte_at(k, a, lo);
            let t_hi = k.bin(BinOp::Shr, U, t, 1u32);
            let nib = k.mul(U, t_hi, 4u32);
            let lv = k.bin(BinOp::Shr, U, lb, nib);
            let lv = k.bin(BinOp::And, PtxType::B32, lv, 15u32);
            let ho = k.fma(U, n, 32u32, l);
            let ho = k.add(U, ho, 128u32);
            let hb = byte_at(k, a, ho);
            let hsh = k.mul(U, t, 2u32);
            let hv = k.bin(BinOp::Shr, U, hb, hsh);
            let hv = k.bin(BinOp::And, PtxType::B32, hv, 3u32);
            let hv = k.bin(BinOp::Shl, PtxType::B32, hv, 4u32);
            let q = k.bin(BinOp::Or, PtxType::B32, lv, hv);
            let q = k.cvt(F, U, q);
            let q = k.sub(F, q, 32.0f32);
            let so = k.mul(U, n, 8u32);
            let l16 = k.bin(BinOp::Shr, U, l, 4u32);
            let so = k.add(U, so, l16);
            let so = k.add(U, so, hsh);
            let so = k.add(U, so, 192u32);
            let sc = byte_at(k, a, so);
            let sc = k.bin(BinOp::Shl, PtxType::B32, sc, 24u32);
            let sc = k.bin(BinOp::Shr, PtxType::S32, sc, 24u32);
            let sc = k.cvt(F, PtxType::S32, sc);
            let d = ld_f16(k, a, 208);
            let ds = k.mul(F, d, sc);
            k.mul(F, ds, q)
        }
        QFormat::Q2_K | QFormat::Q3_K => {
            let n = k.bin(BinOp::Shr, U, j, 7u32);
            let t = k.bin(BinOp::Shr, U, j, 5u32);
            let t = k.bin(BinOp::And, PtxType::B32, t, 3u32);
            let l = k.bin(BinOp::And, PtxType::B32, j, 31u32);
            let s = k.bin(BinOp::Shr, U, j, 4u32);
            let q2 = fmt == QFormat::Q2_K;
            let qo = k.fma(U, n, 32u32, l);
            let qo = k.add(U, qo, if q2 { 16u32 } else { 32 });
            let qb = byte_at(k, a, qo);
            let sh = k.mul(U, t, 2u32);
            let q = k.bin(BinOp::Shr, U, qb, sh);
            let q = k.bin(BinOp::And, PtxType::B32, q, 3u32);
            let q = k.cvt(F, U, q);
            if q2 {
                let (ds, dm) = q2_scale_min(k, a, s);
                let neg = k.un(UnOp::Neg, F, dm);
                k.fma(F, ds, q, neg)
            } else {
                let hb = byte_at(k, a, l);
                let hsh = k.mul(U, n, 4u32);
                let hsh = k.add(U, hsh, t);
                let h = k.bin(BinOp::Shr, U, hb, hsh);
                let h = k.bin(BinOp::And, PtxType::B32, h, 1u32);
                let h = k.cvt(F, U, h);
                // q − 4 + 4h
                let v = k.fma(F, h, 4.0f32, q);
                let v = k.sub(F, v, 4.0f32);
                let sc = q3_scale(k, a, s);
                let d = ld_f16(k, a, 108);
                let ds = k.mul(F, d, sc);
                k.mul(F, ds, v)
            }
        }
        _ => unreachable!("value_at takes the k-quants"),
    }
}
