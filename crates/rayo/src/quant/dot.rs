//! Integer dot products of one weight row (any block format, bytes of any alignment) with `R`
//! rows of quantized activations ([`ActRow`]), written once over the byte lanes of [`Simd`].
//!
//! Each weight block is unpacked once into byte vectors and then multiplied with all `R`
//! activation rows, so a product of many rows (prefill) unpacks each block once per tile
//! rather than once per row. Offsets (`q − 8`, `q − 32`, ...) and mins are taken out of the
//! integer sums with the activations' block sums (Q8_1's `s`, Q8_K's `bsums`) as llama.cpp
//! does; integer sums are scaled to f32 once per block (per super-block for the k-quants).

use super::activation::ActRow;
use super::search::scales_mins_k4;
use super::GgmlType;
use crate::cpu::simd::Simd;

#[inline(always)]
pub(super) fn f16_at<S: Simd>(s: S, b: &[u8], o: usize) -> f32 {
    s.f16_to_f32(u16::from_le_bytes([b[o], b[o + 1]]))
}

#[inline(always)]
fn bytes(q: &[i8]) -> &[u8] {
    bytemuck::cast_slice(q)
}

/// `out[j] = [w_j · a[r] for r in 0..R]` for the `out.len()` weight rows `w_j` that `w` holds
/// (rows of whole blocks of `ty`, of equal length), against activation rows quantized to
/// `activation_type(ty)`. The format is matched and the activation rows are cut into blocks
/// once for all weight rows: a decode step's matrices have rows of only 18–48 blocks.
#[inline(always)]
pub(crate) fn dot_matrix<S: Simd, const R: usize>(s: S, ty: GgmlType, w: &[u8], a: &[ActRow<'_>; R], out: &mut [[f32; R]]) {
    use GgmlType::*;
    if out.is_empty() {
        return;
    }
    let row_len = w.len() / out.len();
    let nb = row_len / ty.type_size();
    macro_rules! each_row {
        ($n:literal, $sums:expr, |$wr:ident, $rows:ident| $body:expr) => {
            each_row!(w, out, $n, $sums, |$wr, $rows| $body)
        };
        ($w:expr, $out:expr, $n:literal, $sums:expr, |$wr:ident, $rows:ident| $body:expr) => {{
            let $rows: [Row<'_, $n>; R] = core::array::from_fn(|r| Row::new::<$n>(&a[r], nb, $sums));
            let $rows = &$rows;
            for ($wr, o) in $w.chunks_exact(row_len).zip($out.iter_mut()) {
                *o = $body;
            }
        }};
    }
    // The 32-value formats: one activation row (decoding) takes eight weight rows at a time.
    macro_rules! legacy_fmt {
        ($ty:ident, $min:literal, $dec:expr) => {{
            if R == 1 {
                legacy_rows8::<S, R, { $ty.type_size() }, $min>(
                    s,
                    w,
                    row_len,
                    &Row::new::<32>(&a[0], nb, $min),
                    out,
                    #[inline(always)]
                    |s, b| $dec(s, b),
                )
            } else {
                each_row!(32, $min, |wr, rows| legacy::<S, R, { $ty.type_size() }, $min>(
                    s,
                    wr,
                    rows,
                    #[inline(always)]
                    |s, b| $dec(s, b)
                ))
            }
        }};
    }
    match ty {
        Q4_0 => legacy_fmt!(Q4_0, true, dec_q4_0::<S>),
        Q4_1 => legacy_fmt!(Q4_1, true, dec_q4_1::<S>),
        Q5_0 => legacy_fmt!(Q5_0, true, dec_q5_0::<S>),
        Q5_1 => legacy_fmt!(Q5_1, true, dec_q5_1::<S>),
        Q8_0 => legacy_fmt!(Q8_0, false, dec_q8_0::<S>),
        Q8_1 => legacy_fmt!(Q8_1, false, dec_q8_1::<S>),
        Q2_K => each_row!(256, false, |wr, rows| q2_k(s, wr, rows)),
        Q3_K => each_row!(256, false, |wr, rows| q3_k(s, wr, rows)),
        Q4_K => each_row!(256, false, |wr, rows| q4_k(s, wr, rows)),
        Q5_K => each_row!(256, false, |wr, rows| q5_k(s, wr, rows)),
        Q6_K => each_row!(256, false, |wr, rows| q6_k(s, wr, rows)),
        Q8_K => each_row!(256, false, |wr, rows| q8_k(s, wr, rows)),
        F32 | F16 | BF16 => unreachable!("float weights take the f32 path"),
    }
}

// The 32-value formats' blocks as (bytes, d, m): signed `q − k` without a min, unsigned `q`
// with one (value = d·q + m). Q4_0/Q5_0 take their offset as a min (`d·(q − 8) = d·q − 8·d`),
// so their dot needs no sign trick.
#[inline(always)]
pub(super) fn dec_q4_0<S: Simd>(s: S, b: &[u8]) -> (S::B, f32, f32) {
    let d = f16_at(s, b, 0);
    (s.bload_nib(&b[2..]), d, -8.0 * d)
}
#[inline(always)]
pub(super) fn dec_q4_1<S: Simd>(s: S, b: &[u8]) -> (S::B, f32, f32) {
    (s.bload_nib(&b[4..]), f16_at(s, b, 0), f16_at(s, b, 2))
}
#[inline(always)]
pub(super) fn dec_q5_0<S: Simd>(s: S, b: &[u8]) -> (S::B, f32, f32) {
    let hi = s.band(s.bbits(u32::from_le_bytes([b[2], b[3], b[4], b[5]])), s.bsplat(0x10));
    let d = f16_at(s, b, 0);
    (s.bor(s.bload_nib(&b[6..]), hi), d, -16.0 * d)
}
#[inline(always)]
pub(super) fn dec_q5_1<S: Simd>(s: S, b: &[u8]) -> (S::B, f32, f32) {
    let hi = s.band(s.bbits(u32::from_le_bytes([b[4], b[5], b[6], b[7]])), s.bsplat(0x10));
    (s.bor(s.bload_nib(&b[8..]), hi), f16_at(s, b, 0), f16_at(s, b, 2))
}
#[inline(always)]
pub(super) fn dec_q8_0<S: Simd>(s: S, b: &[u8]) -> (S::B, f32, f32) {
    (s.bload(&b[2..]), f16_at(s, b, 0), 0.0)
}
#[inline(always)]
pub(super) fn dec_q8_1<S: Simd>(s: S, b: &[u8]) -> (S::B, f32, f32) {
    (s.bload(&b[4..]), f16_at(s, b, 0), 0.0)
}

/// The 32-value formats. `decode` gives the block's 32 values as bytes — signed (`q − k`)
/// without a min, unsigned `q` with one — its `d` and its `m` (value = `d·q + m`).
#[inline(always)]
fn legacy<S: Simd, const R: usize, const SIZE: usize, const MIN: bool>(
    s: S,
    w: &[u8],
    rows: &[Row<'_>; R],
    decode: impl Fn(S, &[u8]) -> (S::B, f32, f32),
) -> [f32; R] {
    // The blocks as fixed-size arrays, as many as the activation rows were cut into: the loops
    // index both without bounds checks.
    let w = &w.as_chunks::<SIZE>().0[..rows[0].d.len()];
    let nb = w.len();
    // Two accumulators per row (even and odd blocks): the FMA's latency is not a chain.
    let mut acc = [[s.fzero(); R]; 2];
    let mut msum = [[0f32; R]; 2];
    let [acc0, acc1] = &mut acc;
    let [msum0, msum1] = &mut msum;
    for p in 0..nb / 2 {
        let i = 2 * p;
        legacy_step::<S, R, MIN>(s, i, decode(s, &w[i]), rows, acc0, msum0);
        legacy_step::<S, R, MIN>(s, i + 1, decode(s, &w[i + 1]), rows, acc1, msum1);
    }
    if nb % 2 == 1 {
        legacy_step::<S, R, MIN>(s, nb - 1, decode(s, &w[nb - 1]), rows, acc0, msum0);
    }
    let mut out = [0f32; R];
    for r in 0..R {
        out[r] = s.fsum(acc[0][r]) + s.fsum(acc[1][r]) + (msum[0][r] + msum[1][r]);
    }
    out
}

/// How many groups of eight rows ahead [`legacy_rows8`] prefetches.
const PREFETCH_GROUPS: usize = 2;

/// [`legacy`] for one activation row (decoding), eight weight rows at a time: per block, the
/// activation block is loaded once, the eight integer dots are summed horizontally together
/// ([`Simd::dsum8`]) and scaled as one vector, and the eight results need no horizontal sum
/// at the end (a row is only 18–48 blocks: per row, that sum and the per-block scaling were
/// half the time). `out[j][0]` is written. Each row's arithmetic is its own lane's, so a row
/// gets the same bits whichever rows share its group (a last group of fewer than eight
/// repeats its last row): the result does not depend on how threads split the rows.
#[inline(always)]
fn legacy_rows8<S: Simd, const R: usize, const SIZE: usize, const MIN: bool>(
    s: S,
    w: &[u8],
    row_len: usize,
    a: &Row<'_>,
    out: &mut [[f32; R]],
    decode: impl Fn(S, &[u8]) -> (S::B, f32, f32),
) {
    let nb = a.d.len();
    for (g, (w8, o8)) in w.chunks(8 * row_len).zip(out.chunks_mut(8)).enumerate() {
        // The group after the next is fetched as this one runs: eight streams 18–48 blocks
        // long are too short for the hardware prefetcher (from DRAM, 2–3× slower without).
        let ahead = w.as_ptr().wrapping_add((g + PREFETCH_GROUPS) * 8 * row_len);
        // (A loop, not `array::from_fn`: its closure may be compiled outside the vectorized
        // context, the intrinsics in it then calls.)
        let n = o8.len();
        let mut rows: [&[[u8; SIZE]]; 8] = [&[]; 8];
        for (k, r) in rows.iter_mut().enumerate() {
            let k = k.min(n - 1);
            *r = &w8[k * row_len..(k + 1) * row_len].as_chunks::<SIZE>().0[..nb];
        }
        let (mut acc, mut macc) = ([0f32; 8], [0f32; 8]);
        // (Indexed: block i of eight rows and of the activations.)
        #[allow(clippy::needless_range_loop)]
        for i in 0..nb {
            // The group ahead in address order, 8·SIZE bytes per block step.
            for l in 0..(8 * SIZE).div_ceil(64) {
                s.prefetch(ahead.wrapping_add(8 * SIZE * i + 64 * l));
            }
            let y = s.bload(&a.qs[i]);
            let mut isum = [s.dzero(); 8];
            let (mut dw, mut mw) = ([0f32; 8], [0f32; 8]);
            for k in 0..8 {
                let (q, d, m) = decode(s, &rows[k][i]);
                isum[k] = if MIN { s.dot_u8i8(q, y) } else { s.dot_i8i8(q, y) };
                (dw[k], mw[k]) = (d, m);
            }
            let si = s.dsum8(&isum);
            let da = a.d[i];
            for k in 0..8 {
                acc[k] += si[k] as f32 * (dw[k] * da);
            }
            if MIN {
                let sa = a.sums[i];
                for k in 0..8 {
                    macc[k] += mw[k] * sa;
                }
            }
        }
        for (k, o) in o8.iter_mut().enumerate() {
            o[0] = acc[k] + macc[k];
        }
    }
}

/// One activation row cut to `nb` blocks of `N` values.
struct Row<'a, const N: usize = 32> {
    qs: &'a [[u8; N]],
    d: &'a [f32],
    sums: &'a [f32],
    bsums: &'a [[i16; 16]],
}

impl<'a> Row<'a> {
    #[inline(always)]
    fn new<const N: usize>(a: &ActRow<'a>, nb: usize, sums: bool) -> Row<'a, N> {
        Row {
            qs: &bytes(a.qs).as_chunks::<N>().0[..nb],
            d: &a.d[..nb],
            sums: if sums { &a.sums[..nb] } else { &[] },
            bsums: if N == 256 { &a.bsums.as_chunks::<16>().0[..nb] } else { &[] },
        }
    }
}

/// Block `i` (decoded) against each activation row.
#[inline(always)]
fn legacy_step<S: Simd, const R: usize, const MIN: bool>(
    s: S,
    i: usize,
    (q, dw, mw): (S::B, f32, f32),
    a: &[Row<'_>; R],
    acc: &mut [S::F; R],
    msum: &mut [f32; R],
) {
    for r in 0..R {
        let y = s.bload(&a[r].qs[i]);
        if MIN {
            acc[r] = s.fmadd_d(acc[r], s.dot_u8i8(q, y), dw * a[r].d[i]);
            msum[r] += mw * a[r].sums[i];
        } else {
            acc[r] = s.fmadd_d(acc[r], s.dot_i8i8(q, y), dw * a[r].d[i]);
        }
    }
}

/// Sums `Σ_k c[k]·bsums[k]` over the 16 sub-blocks of a super-block.
#[inline(always)]
fn bsum_dot(c: &[i32; 16], bsums: &[i16; 16]) -> i32 {
    c.iter().zip(bsums).map(|(&c, &b)| c * b as i32).sum()
}

/// Q8_K weights: `d·Σ q·y` over 8 vectors of 32.
#[inline(always)]
fn q8_k<S: Simd, const R: usize>(s: S, w: &[u8], rows: &[Row<'_, 256>; R]) -> [f32; R] {
    let mut acc = [s.fzero(); R];
    let w = &w.as_chunks::<{ GgmlType::Q8_K.type_size() }>().0[..rows[0].d.len()];
    for (i, b) in w.iter().enumerate() {
        let dw = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let mut q = [s.bsplat(0); 8];
        for (j, q) in q.iter_mut().enumerate() {
            *q = s.bload(&b[4 + 32 * j..]);
        }
        for r in 0..R {
            let y = &rows[r].qs[i];
            let mut isum = s.dzero();
            for (j, q) in q.iter().enumerate() {
                isum = s.dadd(isum, s.dot_i8i8(*q, s.bload(&y[32 * j..])));
            }
            acc[r] = s.fmadd_d(acc[r], isum, dw * rows[r].d[i]);
        }
    }
    let mut out = [0f32; R];
    for (o, a) in out.iter_mut().zip(acc) {
        *o = s.fsum(a);
    }
    out
}

/// Runs the 8 unpacked vectors of a k-quant super-block (32 values each, two 16-value
/// sub-blocks with scales `sc[2j]`, `sc[2j + 1]`) against each activation row: the integer
/// sum goes to `acc` scaled by `d·d_y`, and `corr·d_y` (the offsets and mins, from `bsums`) to
/// `extra`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn kquant_rows<S: Simd, const R: usize>(
    s: S,
    i: usize,
    q: &[S::B; 8],
    sc: &[i16; 16],
    d: f32,
    corr: impl Fn(&[i16; 16]) -> f32,
    a: &[Row<'_, 256>; R],
    acc: &mut [S::F; R],
    extra: &mut [f32; R],
) {
    for r in 0..R {
        let y = &a[r].qs[i];
        let mut isum = s.dzero();
        for (j, q) in q.iter().enumerate() {
            isum = s.dadd(isum, s.dot_u8i8_s2(*q, s.bload(&y[32 * j..]), sc[2 * j], sc[2 * j + 1]));
        }
        let dy = a[r].d[i];
        acc[r] = s.fmadd_d(acc[r], isum, d * dy);
        extra[r] += dy * corr(&a[r].bsums[i]);
    }
}

#[inline(always)]
fn finish<S: Simd, const R: usize>(s: S, acc: [S::F; R], extra: [f32; R]) -> [f32; R] {
    let mut out = extra;
    for (o, a) in out.iter_mut().zip(acc) {
        *o += s.fsum(a);
    }
    out
}

/// A Q4_K/Q5_K block's scales, one per 16 values (each of the 8 twice), and its 8 mins.
#[inline(always)]
fn k4_scales(packed: &[u8; 12]) -> ([i16; 16], [u8; 8]) {
    let (sc8, mn) = scales_mins_k4(packed);
    let mut sc = [0i16; 16];
    for (j, &x) in sc8.iter().enumerate() {
        (sc[2 * j], sc[2 * j + 1]) = (x as i16, x as i16);
    }
    (sc, mn)
}

/// `Σ_j m[j]·(bsums[2j] + bsums[2j+1])`: the mins of 32 values against the activations' sums.
#[inline(always)]
fn min_dot(m: &[u8; 8], bsums: &[i16; 16]) -> i32 {
    m.iter().enumerate().map(|(j, &m)| m as i32 * (bsums[2 * j] as i32 + bsums[2 * j + 1] as i32)).sum()
}

/// Q4_K: `d·sc·q − dmin·m` over 8 sub-blocks of 32.
#[inline(always)]
fn q4_k<S: Simd, const R: usize>(s: S, w: &[u8], rows: &[Row<'_, 256>; R]) -> [f32; R] {
    let (mut acc, mut extra) = ([s.fzero(); R], [0f32; R]);
    let w = &w.as_chunks::<{ GgmlType::Q4_K.type_size() }>().0[..rows[0].d.len()];
    for (i, b) in w.iter().enumerate() {
        let (d, dmin) = (f16_at(s, b, 0), f16_at(s, b, 2));
        let (sc, mn) = k4_scales(b[4..16].try_into().unwrap());
        let mut q = [s.bsplat(0); 8];
        for (j, qj) in q.iter_mut().enumerate() {
            let x = s.bload(&b[16 + 32 * (j / 2)..]);
            *qj = if j % 2 == 0 { s.band(x, s.bsplat(15)) } else { s.bshr(x, 4) };
        }
        kquant_rows(s, i, &q, &sc, d, |bs| -dmin * min_dot(&mn, bs) as f32, rows, &mut acc, &mut extra);
    }
    finish(s, acc, extra)
}

/// Q5_K: Q4_K with a fifth bit per value from `qh` (bit `j` of `qh[l]` for vector `j`).
#[inline(always)]
fn q5_k<S: Simd, const R: usize>(s: S, w: &[u8], rows: &[Row<'_, 256>; R]) -> [f32; R] {
    let (mut acc, mut extra) = ([s.fzero(); R], [0f32; R]);
    let w = &w.as_chunks::<{ GgmlType::Q5_K.type_size() }>().0[..rows[0].d.len()];
    for (i, b) in w.iter().enumerate() {
        let (d, dmin) = (f16_at(s, b, 0), f16_at(s, b, 2));
        let (sc, mn) = k4_scales(b[4..16].try_into().unwrap());
        let qh = s.bload(&b[16..]);
        let (one, nib) = (s.bsplat(1), s.bsplat(15));
        let mut q = [s.bsplat(0); 8];
        for (j, qj) in q.iter_mut().enumerate() {
            let x = s.bload(&b[48 + 32 * (j / 2)..]);
            let low = if j % 2 == 0 { s.band(x, nib) } else { s.bshr(x, 4) };
            *qj = s.bor(low, s.bshl(s.band(s.bshr(qh, j as u32), one), 4));
        }
        kquant_rows(s, i, &q, &sc, d, |bs| -dmin * min_dot(&mn, bs) as f32, rows, &mut acc, &mut extra);
    }
    finish(s, acc, extra)
}

/// Q6_K: `d·sc·(q − 32)` over 16 sub-blocks of 16; 4 low bits in `ql`, 2 high in `qh`.
#[inline(always)]
fn q6_k<S: Simd, const R: usize>(s: S, w: &[u8], rows: &[Row<'_, 256>; R]) -> [f32; R] {
    let (mut acc, mut extra) = ([s.fzero(); R], [0f32; R]);
    let w = &w.as_chunks::<{ GgmlType::Q6_K.type_size() }>().0[..rows[0].d.len()];
    for (i, b) in w.iter().enumerate() {
        let d = f16_at(s, b, 208);
        let sc: [i16; 16] = core::array::from_fn(|k| b[192 + k] as i8 as i16);
        let c32: [i32; 16] = core::array::from_fn(|k| 32 * sc[k] as i32);
        let (nib, three) = (s.bsplat(15), s.bsplat(3));
        // Vector j = 4h + t covers values 128h + 32t ..: low nibbles of ql[64h..] (t = 0, 1)
        // or high nibbles (t = 2, 3), and bits 2t..2t+2 of qh[32h..].
        let mut q = [s.bsplat(0); 8];
        for (j, qj) in q.iter_mut().enumerate() {
            let (h, t) = (j / 4, j % 4);
            let ql = s.bload(&b[64 * h + 32 * (t % 2)..]);
            let qh = s.bload(&b[128 + 32 * h..]);
            let low = if t < 2 { s.band(ql, nib) } else { s.bshr(ql, 4) };
            *qj = s.bor(low, s.bshl(s.band(s.bshr(qh, 2 * t as u32), three), 4));
        }
        kquant_rows(s, i, &q, &sc, d, |bs| -d * bsum_dot(&c32, bs) as f32, rows, &mut acc, &mut extra);
    }
    finish(s, acc, extra)
}

/// Q3_K: `d·(sc − 32)·(q − 4·!h)`: 2 low bits in `qs`, the high bit in `hmask`.
#[inline(always)]
fn q3_k<S: Simd, const R: usize>(s: S, w: &[u8], rows: &[Row<'_, 256>; R]) -> [f32; R] {
    let (mut acc, mut extra) = ([s.fzero(); R], [0f32; R]);
    let w = &w.as_chunks::<{ GgmlType::Q3_K.type_size() }>().0[..rows[0].d.len()];
    for (i, b) in w.iter().enumerate() {
        let d = f16_at(s, b, 108);
        let p = &b[96..108];
        // The 6-bit scales as llama.cpp unpacks them: four words of four, low nibbles from
        // bytes 0..8, high bits from bytes 8..12 (a loop over j with variable shifts was 30%).
        let word = |o: usize| u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]]);
        let (a0, a1, t) = (word(0), word(4), word(8));
        let (k4, k2) = (0x0f0f_0f0fu32, 0x0303_0303u32);
        let words = [
            (a0 & k4) | ((t & k2) << 4),
            (a1 & k4) | (((t >> 2) & k2) << 4),
            ((a0 >> 4) & k4) | (((t >> 4) & k2) << 4),
            ((a1 >> 4) & k4) | (((t >> 6) & k2) << 4),
        ];
        let mut sc = [0i16; 16];
        for (k, w) in words.iter().enumerate() {
            for (b, v) in w.to_le_bytes().iter().enumerate() {
                sc[4 * k + b] = *v as i16 - 32;
            }
        }
        let c4: [i32; 16] = core::array::from_fn(|k| 4 * sc[k] as i32);
        let hm = s.bload(&b[..32]);
        let (one, three) = (s.bsplat(1), s.bsplat(3));
        // Vector j = 4h + t: bits 2t..2t+2 of qs[32h..], bit j of hmask; `q + 4h` is 0..=7.
        let mut q = [s.bsplat(0); 8];
        for (j, qj) in q.iter_mut().enumerate() {
            let (h, t) = (j / 4, j % 4);
            let low = s.band(s.bshr(s.bload(&b[32 + 32 * h..]), 2 * t as u32), three);
            *qj = s.bor(low, s.bshl(s.band(s.bshr(hm, j as u32), one), 2));
        }
        kquant_rows(s, i, &q, &sc, d, |bs| -d * bsum_dot(&c4, bs) as f32, rows, &mut acc, &mut extra);
    }
    finish(s, acc, extra)
}

/// Q2_K: `d·(sc & 15)·q − dmin·(sc >> 4)` with 2-bit `q`.
#[inline(always)]
fn q2_k<S: Simd, const R: usize>(s: S, w: &[u8], rows: &[Row<'_, 256>; R]) -> [f32; R] {
    let (mut acc, mut extra) = ([s.fzero(); R], [0f32; R]);
    let w = &w.as_chunks::<{ GgmlType::Q2_K.type_size() }>().0[..rows[0].d.len()];
    for (i, b) in w.iter().enumerate() {
        let (d, dmin) = (f16_at(s, b, 80), f16_at(s, b, 82));
        let sc: [i16; 16] = core::array::from_fn(|k| (b[k] & 15) as i16);
        let mn: [i32; 16] = core::array::from_fn(|k| (b[k] >> 4) as i32);
        let three = s.bsplat(3);
        let mut q = [s.bsplat(0); 8];
        for (j, qj) in q.iter_mut().enumerate() {
            let (h, t) = (j / 4, j % 4);
            *qj = s.band(s.bshr(s.bload(&b[16 + 32 * h..]), 2 * t as u32), three);
        }
        kquant_rows(s, i, &q, &sc, d, |bs| -dmin * bsum_dot(&mn, bs) as f32, rows, &mut acc, &mut extra);
    }
    finish(s, acc, extra)
}
