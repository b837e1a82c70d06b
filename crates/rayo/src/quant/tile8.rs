//! A prompt's quantized product, block by block: a block of weight rows is unpacked once into
//! 32-value blocks of bytes with f32 scales ([`unpack_rows`]), then multiplied with every tile
//! of eight activation rows laid out block-major ([`Tile8`]). Per weight block the eight integer
//! dots are summed horizontally together ([`Simd::dsum8`]) and scaled as one vector.
//!
//! Unpacking once per block of rows, not once per tile, takes the format's bit work (nibbles,
//! fifth bits, f16 scales, the k-quants' 6-bit scales) out of the loop that runs once per tile:
//! at 64 activation rows it ran eight times per weight block.

use super::activation::ActRow;
use super::dot::{dec_q4_0, dec_q4_1, dec_q5_0, dec_q5_1, dec_q8_0, dec_q8_1, f16_at};
use super::search::scales_mins_k4;
use super::GgmlType;
use crate::cpu::simd::Simd;

/// An unpacked block: 32 value bytes, then `d` and `m` as f32 (value = `d·q + m`).
pub(crate) type Unpacked = [u8; 40];

/// Whether the tiled path computes a row of `ty` as the one-row (decoding) path does, bit for
/// bit: the 32-value formats (the same integer sums, scaled and added in the same order). The
/// k-quants' tiles scale each 32-value sub-block in f32 where the one-row path keeps integer
/// scales, so their one-token rows stay off the tiles
/// ([`super::PreparedActs::with_single_rows`]).
pub(crate) fn same_as_one_row(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(ty, Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q8_1)
}

/// Whether the tiled path takes weights of `ty`: the 32-value formats, and the k-quants whose
/// sub-blocks are 32 values with one scale and one min (Q4_K, Q5_K).
pub(crate) fn unpacks(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(ty, Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q8_1 | Q4_K | Q5_K)
}

/// Signed value bytes and no min (the 8-bit formats); the others unpack to unsigned bytes.
pub(super) fn signed(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q8_0 | GgmlType::Q8_1)
}

/// Eight activation rows cut into 32-value blocks, block-major: block `i` of the eight rows is
/// `qs[i]` (256 contiguous bytes), their scales and sums `d[i][r]`, `sums[i][r]` (`d·Σq` of the
/// block), so that the eight products of a weight block read one place.
pub(crate) struct Tile8 {
    pub(super) qs: Vec<[[u8; 32]; 8]>,
    pub(super) d: Vec<[f32; 8]>,
    pub(super) sums: Vec<[f32; 8]>,
    /// `Σq` of each block (the signed weights of [`super::panel16`] take `128·Σq` off).
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // (panel16's kernel is x86-64's)
    pub(super) isums: Vec<[i32; 8]>,
}

impl Tile8 {
    /// The eight rows (quantized to `act`, `cols` values each) of a product with weights of a
    /// format that [`unpacks`].
    pub(crate) fn new(act: GgmlType, a: &[ActRow<'_>; 8], cols: usize) -> Tile8 {
        let nb = cols / 32;
        let qs = (0..nb).map(|i| core::array::from_fn(|r| bytemuck::cast_slice::<i8, u8>(&a[r].qs[32 * i..32 * i + 32]).try_into().unwrap()));
        let isums = (0..nb).map(|i| core::array::from_fn(|r| a[r].qs[32 * i..32 * i + 32].iter().map(|&q| q as i32).sum())).collect();
        if act == GgmlType::Q8_K {
            // Q8_K rows: one scale per 256 values, integer sums per 16 (`bsums`).
            let d = (0..nb).map(|i| core::array::from_fn(|r| a[r].d[i / 8]));
            let sums = (0..nb).map(|i| core::array::from_fn(|r| a[r].d[i / 8] * (a[r].bsums[2 * i] as i32 + a[r].bsums[2 * i + 1] as i32) as f32));
            return Tile8 { qs: qs.collect(), d: d.collect(), sums: sums.collect(), isums };
        }
        let with_sums = !a[0].sums.is_empty();
        let d = (0..nb).map(|i| core::array::from_fn(|r| a[r].d[i]));
        let sums = (0..nb).map(|i| core::array::from_fn(|r| if with_sums { a[r].sums[i] } else { 0.0 }));
        Tile8 { qs: qs.collect(), d: d.collect(), sums: sums.collect(), isums }
    }
}

/// Unpacks the weight rows `w` (whole rows of `ty`, one that [`unpacks`]) into `out`: row after
/// row, 32-value blocks in order.
#[inline(always)]
pub(crate) fn unpack_rows<S: Simd>(s: S, ty: GgmlType, w: &[u8], out: &mut Vec<Unpacked>) {
    use GgmlType::*;
    out.clear();
    out.resize(w.len() / ty.type_size() * (ty.block_size() / 32), [0; 40]);
    // (Each decoder through an `#[inline(always)]` closure: passed as a fn item, its call
    // went through `Fn::call`, which LLVM left out of line on AVX2, and the intrinsics in it
    // then compiled as calls: 40% of a Q5_0 prompt's time.)
    macro_rules! legacy {
        ($ty:ident, $dec:ident) => {
            unpack_legacy::<S, { $ty.type_size() }>(
                s,
                w,
                out,
                #[inline(always)]
                |s, b| $dec::<S>(s, b),
            )
        };
    }
    match ty {
        Q4_0 => legacy!(Q4_0, dec_q4_0),
        Q4_1 => legacy!(Q4_1, dec_q4_1),
        Q5_0 => legacy!(Q5_0, dec_q5_0),
        Q5_1 => legacy!(Q5_1, dec_q5_1),
        Q8_0 => legacy!(Q8_0, dec_q8_0),
        Q8_1 => legacy!(Q8_1, dec_q8_1),
        Q4_K => unpack_k::<S, { Q4_K.type_size() }>(
            s,
            w,
            out,
            #[inline(always)]
            |s, b, j| {
                let x = s.bload(&b[16 + 32 * (j / 2)..]);
                if j % 2 == 0 {
                    s.band(x, s.bsplat(15))
                } else {
                    s.bshr(x, 4)
                }
            },
        ),
        // Q4_K's nibbles at 48.., with bit `j` of `qh[l]` as the fifth bit of vector `j`.
        Q5_K => unpack_k::<S, { Q5_K.type_size() }>(
            s,
            w,
            out,
            #[inline(always)]
            |s, b, j| {
                let x = s.bload(&b[48 + 32 * (j / 2)..]);
                let low = if j % 2 == 0 { s.band(x, s.bsplat(15)) } else { s.bshr(x, 4) };
                let high = s.band(s.bshr(s.bload(&b[16..]), j as u32), s.bsplat(1));
                s.bor(low, s.bshl(high, 4))
            },
        ),
        _ => unreachable!("unpack_rows: {ty:?} does not unpack (see `unpacks`)"),
    }
}

#[inline(always)]
fn put(o: &mut Unpacked, d: f32, m: f32) {
    o[32..36].copy_from_slice(&d.to_le_bytes());
    o[36..].copy_from_slice(&m.to_le_bytes());
}

#[inline(always)]
fn unpack_legacy<S: Simd, const SIZE: usize>(s: S, w: &[u8], out: &mut [Unpacked], decode: impl Fn(S, &[u8]) -> (S::B, f32, f32)) {
    for (b, o) in w.as_chunks::<SIZE>().0.iter().zip(out.iter_mut()) {
        let (q, d, m) = decode(s, b);
        s.bstore(q, o);
        put(o, d, m);
    }
}

/// Q4_K/Q5_K: super-blocks of 8 × 32 values, `d·sc·q − dmin·mn` with 6-bit `sc`, `mn`;
/// `values(s, block, j)` gives vector `j`'s bytes.
#[inline(always)]
fn unpack_k<S: Simd, const SIZE: usize>(s: S, w: &[u8], out: &mut [Unpacked], values: impl Fn(S, &[u8; SIZE], usize) -> S::B) {
    for (b, o8) in w.as_chunks::<SIZE>().0.iter().zip(out.as_chunks_mut::<8>().0) {
        let (d, dmin) = (f16_at(s, b, 0), f16_at(s, b, 2));
        let (sc, mn) = scales_mins_k4(b[4..16].try_into().unwrap());
        for (j, o) in o8.iter_mut().enumerate() {
            s.bstore(values(s, b, j), o);
            put(o, d * sc[j] as f32, -dmin * mn[j] as f32);
        }
    }
}

/// `out[j] = [w_j · t row r for r in 0..8]` for the unpacked weight rows `w` (`out.len()` rows
/// of equal length) of a format of type `ty`.
#[inline(always)]
pub(crate) fn dot_tile8<S: Simd>(s: S, ty: GgmlType, w: &[Unpacked], t: &Tile8, out: &mut [[f32; 8]]) {
    if signed(ty) {
        tile8::<S, false>(s, w, t, out)
    } else {
        tile8::<S, true>(s, w, t, out)
    }
}

#[inline(always)]
fn tile8<S: Simd, const MIN: bool>(s: S, w: &[Unpacked], t: &Tile8, out: &mut [[f32; 8]]) {
    if out.is_empty() {
        return;
    }
    let nb = t.d.len();
    for (wr, o) in w.chunks_exact(w.len() / out.len()).zip(out.iter_mut()) {
        let (mut acc, mut macc) = ([0f32; 8], [0f32; 8]);
        // Zipped, not indexed: no bounds checks in the loop.
        for (((b, y8), da), sa) in wr[..nb].iter().zip(&t.qs).zip(&t.d).zip(&t.sums) {
            let q = s.bload(b);
            let dw = f32::from_le_bytes([b[32], b[33], b[34], b[35]]);
            // A loop, not `array::from_fn`: its closure may be compiled outside the vectorized
            // context, the intrinsics in it then calls.
            let mut isum = [s.dzero(); 8];
            for (v, y) in isum.iter_mut().zip(y8) {
                let y = s.bload(y);
                *v = if MIN { s.dot_u8i8(q, y) } else { s.dot_i8i8(q, y) };
            }
            let si = s.dsum8(&isum);
            for r in 0..8 {
                acc[r] += si[r] as f32 * (dw * da[r]);
            }
            if MIN {
                let mw = f32::from_le_bytes([b[36], b[37], b[38], b[39]]);
                for r in 0..8 {
                    macc[r] += mw * sa[r];
                }
            }
        }
        for r in 0..8 {
            o[r] = acc[r] + macc[r];
        }
    }
}
