//! The decoding products with 8-bit activations (as llama.cpp's `mmvq`): a work item's 8 (Q4_K: 32)
//! weights, still read in place, are unpacked four to a register and multiplied with the 8
//! activation bytes of [`super::NarrowKernel`] by two `dp4a`, the format's scales applied
//! to the integer sum. This cuts the per-value unpacking and conversion of the f32 path, whose
//! products are bound by instruction issue on large models, and reads a quarter of the
//! activation bytes.

use super::common::*;
use super::kquant::{q6_k_scales, scale_min_k4_of};
use super::qmatvec::{ld_f16, ld_u16, QFormat};
use crate::ptx::*;

/// Whether [`q8_dot`] reads `fmt`.
pub(crate) fn q8_reads(fmt: QFormat) -> bool {
    matches!(fmt, QFormat::Q4_0 | QFormat::Q4_1 | QFormat::Q5_0 | QFormat::Q5_1 | QFormat::Q8_0 | QFormat::Q4_K | QFormat::Q6_K)
}

/// The fifth bits of 4 values, bits 0..4 of `b` (the rest ignored), at bit 4 of each byte: the
/// multiply puts bit `e` at bit `8e` (its four shifted copies of `b` do not overlap: no carries).
fn fifth_bits(k: &mut PtxKernel, b: Reg) -> Reg {
    let b = k.bin(BinOp::And, PtxType::B32, b, 0xFu32);
    let spread = k.mul(U, b, 0x0020_4081u32);
    let at4 = k.bin(BinOp::Shl, PtxType::B32, spread, 4u32);
    k.bin(BinOp::And, PtxType::B32, at4, 0x1010_1010u32)
}

/// The 32-bit little-endian word at `a + off` of a 2-byte aligned block.
fn word16(k: &mut PtxKernel, a: Reg, off: i64) -> Reg {
    let lo = ld_u16(k, a, off);
    let hi = ld_u16(k, a, off + 2);
    let hi = k.bin(BinOp::Shl, PtxType::B32, hi, 16u32);
    k.bin(BinOp::Or, PtxType::B32, lo, hi)
}

/// `(w >> sh) & mask` on each of the two words.
fn fields(k: &mut PtxKernel, w: [Reg; 2], sh: Reg, mask: u32) -> [Reg; 2] {
    w.map(|w| {
        let v = k.bin(BinOp::Shr, U, w, sh);
        k.bin(BinOp::And, PtxType::B32, v, mask)
    })
}

/// `Σ q·xq` over 8 bytes: the weights' `q` (signed or not) and the activations' `xq` (signed).
fn dot8(k: &mut PtxKernel, q: [Reg; 2], signed: bool, xq: [Reg; 2]) -> Reg {
    let s = k.dp4a((q[0], signed), (xq[0], true), 0i32);
    k.dp4a((q[1], signed), (xq[1], true), s)
}

/// Work items per block: Q4_K's are 32 values (16 bytes of nibbles: half of each of two
/// sub-blocks, with the block's scales read in one 16-byte load), the rest 8 values.
pub(crate) fn q8_groups(fmt: QFormat) -> u32 {
    if fmt == QFormat::Q4_K {
        8
    } else {
        fmt.block_values() / 8
    }
}

/// One work item's activations: bytes and the scales of their 32-value blocks.
pub(crate) struct Q8Acts {
    q: Vec<Reg>,
    d: Vec<Reg>,
}

/// Item `g` of block `b`'s activations, the block's bytes at `xq` and scales at `xd`.
pub(crate) fn q8_acts(k: &mut PtxKernel, fmt: QFormat, g: Reg, xq: Reg, xd: Reg) -> Q8Acts {
    if fmt == QFormat::Q4_K {
        // item g: 64-value chunk c = g / 2, values 16(g % 2).. of its two sub-blocks
        let c = k.bin(BinOp::Shr, U, g, 1u32);
        let h = k.bin(BinOp::And, PtxType::B32, g, 1u32);
        let off = k.mul(U, c, 64u32);
        let off = k.fma(U, h, 16u32, off);
        let qa = k.mad_wide(U, off, 1u32, xq);
        let mut q = k.ld_v(Space::Global, U, 4, Addr::reg(qa));
        q.extend(k.ld_v(Space::Global, U, 4, Addr::at(qa, 32)));
        let da = k.mad_wide(U, c, 8u32, xd);
        let d = k.ld_v(Space::Global, F, 2, Addr::reg(da));
        return Q8Acts { q, d };
    }
    let off = k.mul(U, g, 8u32);
    let qa = k.mad_wide(U, off, 1u32, xq);
    let q = k.ld_v(Space::Global, U, 2, Addr::reg(qa));
    let s = k.bin(BinOp::Shr, U, g, 2u32);
    let da = k.elem_addr(xd, s, 4);
    Q8Acts { q, d: vec![k.ld(Space::Global, F, Addr::reg(da))] }
}

/// `Σ_j w_j·x_j` over item `g` of the block at `a`, `x` the item's activations `acts`.
pub(crate) fn q8_dot(k: &mut PtxKernel, fmt: QFormat, a: Reg, g: Reg, acts: &Q8Acts) -> Reg {
    if fmt == QFormat::Q4_K {
        return q4_k_item(k, a, g, acts);
    }
    let s = dot8_of(k, fmt, a, g, [acts.q[0], acts.q[1]]);
    k.mul(F, s, acts.d[0])
}

/// Q4_K's item `g`: 16 bytes of nibbles at `32c + 16h` (`c = g / 2`, `h = g % 2`), low nibbles
/// values `16h..` of sub-block `2c`, high ones of sub-block `2c + 1`.
fn q4_k_item(k: &mut PtxKernel, a: Reg, g: Reg, acts: &Q8Acts) -> Reg {
    // d, dmin and the 12 scale bytes in one 16-byte load
    let head = k.ld_v(Space::Global, U, 4, Addr::reg(a));
    let (d16, dmin16) = k.unpack16(head[0]);
    let d = k.cvt(F, PtxType::F16, d16);
    let dmin = k.cvt(F, PtxType::F16, dmin16);
    let c = k.bin(BinOp::Shr, U, g, 1u32);
    let h = k.bin(BinOp::And, PtxType::B32, g, 1u32);
    let off = k.mul(U, c, 32u32);
    let off = k.fma(U, h, 16u32, off);
    let qa = k.mad_wide(U, off, 1u32, a);
    let w = k.ld_v(Space::Global, U, 4, Addr::at(qa, 16));
    let ones = 0x0101_0101u32;
    let mut total = None;
    for half in 0..2usize {
        // sub-block 2c + half: the low nibbles, then the high ones
        let j = k.fma(U, c, 2u32, half as u32);
        let (sc, m) = scale_min_k4_of(k, [head[1], head[2], head[3]], j);
        let (mut s, mut sx) = (k.mov(PtxType::S32, 0i32), k.mov(PtxType::S32, 0i32));
        for (i, &wi) in w.iter().enumerate() {
            let v = if half == 0 { wi } else { k.bin(BinOp::Shr, U, wi, 4u32) };
            let q = k.bin(BinOp::And, PtxType::B32, v, 0x0F0F_0F0Fu32);
            let x = acts.q[4 * half + i];
            s = k.dp4a((q, false), (x, true), s);
            sx = k.dp4a((ones, false), (x, true), sx);
        }
        // (d·sc·Σ q·x − dmin·m·Σ x)·dx
        let s = k.cvt(F, PtxType::S32, s);
        let sx = k.cvt(F, PtxType::S32, sx);
        let ds = k.mul(F, d, sc);
        let dm = k.mul(F, dmin, m);
        let ms = k.mul(F, dm, sx);
        let neg = k.un(UnOp::Neg, F, ms);
        let part = k.fma(F, ds, s, neg);
        total = Some(match total {
            None => k.mul(F, part, acts.d[half]),
            Some(t) => k.fma(F, part, acts.d[half], t),
        });
    }
    total.expect("two halves")
}

/// `Σ_j w_j·q_j` over values `8g .. 8g + 8` of the block at `a` (`g` as in the f32 path's
/// `quarter_dot`: 0..4 for 32-value blocks, 0..32 for the k-quants), `q_j` the 8 activation
/// bytes `xq`: the caller multiplies by the activations' scale.
fn dot8_of(k: &mut PtxKernel, fmt: QFormat, a: Reg, g: Reg, xq: [Reg; 2]) -> Reg {
    // Σ q_j, for the formats' offsets and mins
    let ones = 0x0101_0101u32;
    let sx = {
        let s = k.dp4a((ones, false), (xq[0], true), 0i32);
        k.dp4a((ones, false), (xq[1], true), s)
    };
    match fmt {
        QFormat::Q8_0 => {
            let d = ld_f16(k, a, 0);
            let off = k.mul(U, g, 8u32);
            let qa = k.mad_wide(U, off, 1u32, a);
            let w = [word16(k, qa, 2), word16(k, qa, 6)];
            let s = dot8(k, w, true, xq);
            let s = k.cvt(F, PtxType::S32, s);
            k.mul(F, d, s)
        }
        QFormat::Q4_0 | QFormat::Q4_1 | QFormat::Q5_0 | QFormat::Q5_1 => {
            // values 8g..: the low nibbles of bytes 8(g & 1).. of `qs` for g < 2, the high ones
            // after; Q5's fifth bits are bits 8g.. of `qh` (the 4 bytes before `qs`)
            let five = matches!(fmt, QFormat::Q5_0 | QFormat::Q5_1);
            // the blocks of Q4_0 (18 bytes) and Q5_0 (22) are only 2-byte aligned
            let aligned = matches!(fmt, QFormat::Q4_1 | QFormat::Q5_1);
            let qs_off = match fmt {
                QFormat::Q4_0 => 2,
                QFormat::Q4_1 | QFormat::Q5_0 => 4 + 2 * five as i64,
                _ => 8,
            };
            let d = ld_f16(k, a, 0);
            let half = k.bin(BinOp::And, PtxType::B32, g, 1u32);
            let boff = k.mul(U, half, 8u32);
            let qa = k.mad_wide(U, boff, 1u32, a);
            let hi = k.bin(BinOp::Shr, U, g, 1u32);
            let nib = k.mul(U, hi, 4u32);
            let w = if aligned {
                [0i64, 4].map(|o| k.ld(Space::Global, U, Addr::at(qa, qs_off + o)))
            } else {
                [word16(k, qa, qs_off), word16(k, qa, qs_off + 4)]
            };
            let qh = five.then(|| if aligned { k.ld(Space::Global, U, Addr::at(a, qs_off - 4)) } else { word16(k, a, qs_off - 4) });
            let mut q = fields(k, w, nib, 0x0F0F_0F0F);
            if let Some(qh) = qh {
                let sh = k.mul(U, g, 8u32);
                let hb = k.bin(BinOp::Shr, U, qh, sh);
                let hb4 = k.bin(BinOp::Shr, U, hb, 4u32);
                q = [(q[0], hb), (q[1], hb4)].map(|(l, b)| {
                    let f = fifth_bits(k, b);
                    k.bin(BinOp::Or, PtxType::B32, l, f)
                });
            }
            let s = dot8(k, q, false, xq);
            if matches!(fmt, QFormat::Q4_0 | QFormat::Q5_0) {
                // d·(Σ q·x − 8 Σ x), Q5_0: − 16 Σ x
                let s = k.fma(PtxType::S32, sx, if five { -16i32 } else { -8i32 }, s);
                let s = k.cvt(F, PtxType::S32, s);
                k.mul(F, d, s)
            } else {
                // d·Σ q·x + m·Σ x
                let m = ld_f16(k, a, 2);
                let s = k.cvt(F, PtxType::S32, s);
                let sx = k.cvt(F, PtxType::S32, sx);
                let ms = k.mul(F, m, sx);
                k.fma(F, d, s, ms)
            }
        }
        QFormat::Q6_K => {
            // g = 16n + 4t + p: half n, quarter t of the half, values 8p.. of its 32
            let n = k.bin(BinOp::Shr, U, g, 4u32);
            let j = k.bin(BinOp::Shr, U, g, 2u32);
            let t = k.bin(BinOp::And, PtxType::B32, j, 3u32);
            let p = k.bin(BinOp::And, PtxType::B32, g, 3u32);
            let p8 = k.mul(U, p, 8u32);
            // low nibbles: ql bytes at 64n + 32(t % 2) + 8p, nibble t / 2
            let t_odd = k.bin(BinOp::And, PtxType::B32, t, 1u32);
            let lo_off = k.mul(U, n, 64u32);
            let lo_off = k.fma(U, t_odd, 32u32, lo_off);
            let lo_off = k.add(U, lo_off, p8);
            let la = k.mad_wide(U, lo_off, 1u32, a);
            let t_hi = k.bin(BinOp::Shr, U, t, 1u32);
            let nib = k.mul(U, t_hi, 4u32);
            let w = [word16(k, la, 0), word16(k, la, 4)];
            let lo = fields(k, w, nib, 0x0F0F_0F0F);
            // high two bits: qh bytes at 128 + 32n + 8p, bits 2t..
            let hn = k.mul(U, n, 32u32);
            let hn = k.add(U, hn, p8);
            let ha = k.mad_wide(U, hn, 1u32, a);
            let hsh = k.mul(U, t, 2u32);
            let w = [word16(k, ha, 128), word16(k, ha, 132)];
            let hi = fields(k, w, hsh, 0x0303_0303);
            let q = [0, 1].map(|i| {
                let h = k.bin(BinOp::Shl, PtxType::B32, hi[i], 4u32);
                k.bin(BinOp::Or, PtxType::B32, lo[i], h)
            });
            let s = dot8(k, q, false, xq);
            // d·sc·(Σ q·x − 32 Σ x)
            let s = k.fma(PtxType::S32, sx, -32i32, s);
            let (d, sc) = q6_k_scales(k, a, n, p, hsh);
            let s = k.cvt(F, PtxType::S32, s);
            let ds = k.mul(F, d, sc);
            k.mul(F, ds, s)
        }
        _ => unreachable!("{fmt:?}: no 8-value 8-bit item (q8_reads, q4_k_item)"),
    }
}
