//! Q4_K weights repacked once, at load, for the decoding product on AVX-512 VNNI, as llama.cpp's
//! CPU backend repacks its weights: sixteen weight rows per vector. Super-block `i` of rows
//! `16g..16g + 16` is one [`Panel`]: vector `8c + k` holds bytes `32c + 4k .. 32c + 4k + 4` of
//! the 16 rows' nibbles (lane `r`: row `16g + r`), so one load, two masks and two `vpdpbusd`
//! with four activation bytes broadcast add a four-value dot to all 16 rows of sub-blocks `2c`
//! (low nibbles) and `2c + 1` (high nibbles). The 6-bit scales and mins are unpacked beside
//! them (bytes), the f16 `d` and `dmin` of the 16 rows side by side: 2,368 bytes for 16 rows
//! of 256 values, against the file's 2,304. No horizontal sums, no scale unpacking in the loop:
//! about 15 instructions per row and super-block where the file's layout takes about 75.
//!
//! The arithmetic of a row, per super-block `i` (one lane of one vector, whatever rows and how
//! many activation rows share the call): the exact integer sums `Σ_j sc_j·(q_j·y_j)` and
//! `Σ_j mn_j·Σy_j`, then `acc = fma(f32(Σ sc·q·y), d·d_y, acc)` and
//! `acc = fma(−f32(Σ mn·Σy), dmin·d_y, acc)`. A one-token row so gets the same bits alone or in
//! a batch, and in any split of the rows over threads.

use super::activation::ActRow;
use super::matmul::QuantMatrix;
use super::GgmlType;
use crate::Backend;

/// Weight rows per panel (the 16 i32 lanes of a vector).
pub(super) const ROWS: usize = 16;

/// Activation rows one kernel call multiplies with a panel (its accumulators stay in registers).
const MAX_ACT_ROWS: usize = 4;

/// One super-block of 16 weight rows (see the module's text).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // (the kernel is x86-64's)
pub(super) struct Panel {
    /// `qs[8c + k][r]`: bytes `32c + 4k .. 32c + 4k + 4` of row `r`'s nibbles.
    pub(super) qs: [[u32; ROWS]; 32],
    /// `sc[j][r]`: sub-block `j`'s 6-bit scale of row `r`.
    pub(super) sc: [[u8; ROWS]; 8],
    /// `mn[p][2r + t]`: sub-block `2p + t`'s 6-bit min of row `r` (pairs for `vpdpwssd`).
    pub(super) mn: [[u8; 2 * ROWS]; 4],
    /// The f16 bits of each row's `d` and `dmin`.
    pub(super) d: [u16; ROWS],
    pub(super) dmin: [u16; ROWS],
}

#[cfg(target_arch = "x86_64")]
const EMPTY: Panel = Panel { qs: [[0; ROWS]; 32], sc: [[0; ROWS]; 8], mn: [[0; 2 * ROWS]; 4], d: [0; ROWS], dmin: [0; ROWS] };

/// A Q4_K matrix's rows repacked for the one-token product on AVX-512 VNNI ([`Repacked::new`];
/// the module's text gives the layout and the arithmetic). Attach it to the matrix it was made
/// from with [`QuantMatrix::with_repacked`]: the products then take its kernel for one-token
/// rows.
pub struct Repacked {
    #[cfg(target_arch = "x86_64")]
    token: crate::cpu::isa::avx512::Avx512<true>,
    /// No value exists off x86-64 (the kernel is AVX-512's).
    #[cfg(not(target_arch = "x86_64"))]
    #[allow(dead_code)]
    never: core::convert::Infallible,
    rows: usize,
    cols: usize,
    /// A digest of the source bytes ([`digest`]), checked when attached.
    digest: u64,
    /// Group `g`'s super-block `i` at `g · cols/256 + i`.
    panels: Vec<Panel>,
}

impl core::fmt::Debug for Repacked {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Repacked {{ Q4_K, {} × {} }}", self.rows, self.cols)
    }
}

/// FNV-1a over the first 64 bytes of the first, middle and last rows of `w`: enough to catch a
/// copy attached to another matrix of the same shape, and cheap enough for every product (the
/// engine attaches the copy once per chunk of rows; whole rows cost ~6% of a 1B decode step).
pub(super) fn digest(w: &QuantMatrix<'_>) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    let last = w.rows().saturating_sub(1);
    for r in [0, last / 2, last] {
        let row = w.row(r);
        for b in &row[..row.len().min(64)] {
            h = (h ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

impl Repacked {
    /// `w` repacked, where the format and CPU have a kernel for it: Q4_K weights on the AVX-512
    /// backend of a CPU with VNNI; `None` otherwise (the file's layout serves). Uses rayon's
    /// threads for large matrices.
    pub fn new(backend: Backend, w: &QuantMatrix<'_>) -> Option<Repacked> {
        #[cfg(target_arch = "x86_64")]
        {
            let token = if backend == Backend::Avx512 { crate::cpu::isa::avx512::Avx512::try_new_vnni()? } else { return None };
            if w.ty() != GgmlType::Q4_K || w.rows() == 0 || w.cols() == 0 {
                return None;
            }
            let nb = w.cols() / 256;
            let groups = w.rows().div_ceil(ROWS);
            let mut panels = vec![EMPTY; groups * nb];
            let pack = |(g, out): (usize, &mut [Panel])| {
                for r in 0..ROWS.min(w.rows() - ROWS * g) {
                    let row = w.row(ROWS * g + r);
                    for (b, p) in row.as_chunks::<{ GgmlType::Q4_K.type_size() }>().0.iter().zip(out.iter_mut()) {
                        pack_block(b, r, p);
                    }
                }
            };
            use rayon::prelude::*;
            if w.bytes().len() >= 1 << 22 {
                panels.par_chunks_mut(nb).enumerate().for_each(pack);
            } else {
                panels.chunks_mut(nb).enumerate().for_each(pack);
            }
            Some(Repacked { token, rows: w.rows(), cols: w.cols(), digest: digest(w), panels })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (backend, w);
            None
        }
    }

    /// Weight rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values per row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.panels.len() * core::mem::size_of::<Panel>()
    }

    /// Group `g`'s panels: rows `16g..16g + 16` (past the matrix's last row, zeros), one
    /// panel per super-block.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // (the kernels are x86-64's)
    pub(super) fn group(&self, g: usize) -> &[Panel] {
        let nb = self.cols / 256;
        &self.panels[g * nb..(g + 1) * nb]
    }

    pub(super) fn made_from(&self, w: &QuantMatrix<'_>) -> bool {
        w.ty() == GgmlType::Q4_K && (w.rows(), w.cols()) == (self.rows, self.cols) && digest(w) == self.digest
    }

    /// `out[i · width + (j − r0)] = a[i] · row j` for the activation rows `a` (Q8_K, this
    /// matrix's width) and weight rows `j` in `r0..r1` (`width ≥ r1 − r0`).
    pub(super) fn dot_rows(&self, a: &[ActRow<'_>], r0: usize, r1: usize, out: &mut [f32], width: usize) {
        let nb = self.cols / 256;
        assert!(r0 <= r1 && r1 <= self.rows && width >= r1 - r0 && out.len() >= a.len() * width, "repacked rows {r0}..{r1} of {}", self.rows);
        // The activations' sub-block sums, paired as `vpdpwssd` takes them (two i16 in an i32:
        // sub-blocks 2p and 2p + 1; each a sum of 32 i8, so within i16).
        let mut pairs: Vec<[i32; 4]> = Vec::with_capacity(a.len() * nb);
        for row in a {
            assert!(row.qs.len() == self.cols && row.d.len() == nb && row.bsums.len() == 16 * nb, "a Q8_K row of {} values", row.qs.len());
            for b in row.bsums.as_chunks::<16>().0 {
                let half = |k: usize| (b[k] as i32 + b[k + 1] as i32) as i16 as u16 as u32;
                pairs.push(core::array::from_fn(|p| (half(4 * p) | half(4 * p + 2) << 16) as i32));
            }
        }
        for g in r0 / ROWS..r1.div_ceil(ROWS) {
            let p = &self.panels[g * nb..(g + 1) * nb];
            for (c, (a, pairs)) in a.chunks(MAX_ACT_ROWS).zip(pairs.chunks(MAX_ACT_ROWS * nb)).enumerate() {
                let mut o = [[0f32; ROWS]; MAX_ACT_ROWS];
                self.kernel(p, a, pairs, &mut o);
                for (k, o) in o[..a.len()].iter().enumerate() {
                    let i = c * MAX_ACT_ROWS + k;
                    for (lane, v) in o.iter().enumerate() {
                        let j = ROWS * g + lane;
                        if (r0..r1).contains(&j) {
                            out[i * width + j - r0] = *v;
                        }
                    }
                }
            }
        }
    }

    /// One group's panels against up to [`MAX_ACT_ROWS`] activation rows.
    fn kernel(&self, p: &[Panel], a: &[ActRow<'_>], pairs: &[[i32; 4]], out: &mut [[f32; ROWS]; MAX_ACT_ROWS]) {
        #[cfg(target_arch = "x86_64")]
        {
            // `self.token` is held as the proof of the kernel's features.
            let _ = self.token;
            let nb = p.len();
            // SAFETY: `self.token` (an `Avx512<true>`) exists only where the CPU has avx512f,
            // avx512bw, avx512vl, avx512vnni, AVX2 and FMA, the kernel's features; it reads only
            // through references, indexed with checks.
            unsafe {
                match a.len() {
                    1 => out[..1].copy_from_slice(&x86::kernel::<1>(p, a.try_into().unwrap(), pairs, nb)),
                    2 => out[..2].copy_from_slice(&x86::kernel::<2>(p, a.try_into().unwrap(), pairs, nb)),
                    3 => out[..3].copy_from_slice(&x86::kernel::<3>(p, a.try_into().unwrap(), pairs, nb)),
                    _ => out[..4].copy_from_slice(&x86::kernel::<4>(p, a.try_into().unwrap(), pairs, nb)),
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (p, a, pairs, out);
            match self.never {}
        }
    }
}

/// Writes super-block `b` of a Q4_K row into lane `r` of panel `p`.
#[cfg(target_arch = "x86_64")]
fn pack_block(b: &[u8; 144], r: usize, p: &mut Panel) {
    p.d[r] = u16::from_le_bytes([b[0], b[1]]);
    p.dmin[r] = u16::from_le_bytes([b[2], b[3]]);
    let (sc, mn) = super::search::scales_mins_k4(b[4..16].try_into().unwrap());
    for j in 0..8 {
        p.sc[j][r] = sc[j];
        p.mn[j / 2][2 * r + j % 2] = mn[j];
    }
    for (v, q) in p.qs.iter_mut().enumerate() {
        let o = 16 + 4 * v;
        q[r] = u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{ActRow, Panel, ROWS};

    /// Panels ahead that [`kernel`] prefetches.
    const PREFETCH: usize = 2;
    use core::arch::x86_64::*;

    /// The panels `p` (one group of 16 rows, `nb` super-blocks) against the activation rows
    /// `a` (`pairs[r · nb + i]`: row `r`'s paired sub-block sums of super-block `i`):
    /// `out[r][lane]`.
    ///
    /// # Safety
    /// The CPU must have avx512f, avx512bw, avx512vl, avx512vnni, avx2 and fma. (Each row of
    /// `a` holds `256 · nb` values and `nb` scales, `pairs` `R · nb` entries: checked by the
    /// indexing, a panic otherwise.)
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
    pub(super) unsafe fn kernel<const R: usize>(p: &[Panel], a: &[ActRow<'_>; R], pairs: &[[i32; 4]], nb: usize) -> [[f32; ROWS]; R] {
        let nibble = _mm512_set1_epi8(0x0F);
        let mut acc = [_mm512_setzero_ps(); R];
        for (i, b) in p[..nb].iter().enumerate() {
            // The panel PREFETCH places ahead (past the group's last, the next group's first:
            // the groups lie one after another), fetched while this one runs: the hardware
            // prefetcher alone loses the stream at each 4 KiB page (1 thread: 7.2 → 9.5 GB/s).
            // (A prefetch of any address is harmless; `wrapping_add` never dereferences.)
            let ahead = (b as *const Panel).wrapping_add(PREFETCH).cast::<i8>();
            for l in 0..core::mem::size_of::<Panel>() / 64 {
                _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64 * l));
            }
            // Each row's 256 values of this super-block, as fixed-size arrays (no bounds checks
            // in the unrolled loops).
            let mut ys: [&[i8; 256]; R] = [&[0; 256]; R];
            for (y, a) in ys.iter_mut().zip(a) {
                *y = a.qs[256 * i..256 * i + 256].try_into().unwrap();
            }
            let mut isum = [_mm512_setzero_si512(); R];
            for c in 0..4 {
                let (mut lo, mut hi) = ([_mm512_setzero_si512(); R], [_mm512_setzero_si512(); R]);
                for k in 0..8 {
                    // SAFETY: a 64-byte-aligned vector of the panel (`Panel` is align(64)).
                    let v = unsafe { _mm512_load_si512(b.qs[8 * c + k].as_ptr().cast()) };
                    let l = _mm512_and_si512(v, nibble);
                    let h = _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble);
                    let at = 64 * c + 4 * k;
                    for r in 0..R {
                        let y = &ys[r][at..at + 36];
                        let yl = i32::from_le_bytes([y[0] as u8, y[1] as u8, y[2] as u8, y[3] as u8]);
                        let yh = i32::from_le_bytes([y[32] as u8, y[33] as u8, y[34] as u8, y[35] as u8]);
                        lo[r] = _mm512_dpbusd_epi32(lo[r], l, _mm512_set1_epi32(yl));
                        hi[r] = _mm512_dpbusd_epi32(hi[r], h, _mm512_set1_epi32(yh));
                    }
                }
                // SAFETY: 16 bytes each from the panel's scale arrays.
                let (sl, sh) = unsafe { (_mm_loadu_si128(b.sc[2 * c].as_ptr().cast()), _mm_loadu_si128(b.sc[2 * c + 1].as_ptr().cast())) };
                let (sl, sh) = (_mm512_cvtepu8_epi32(sl), _mm512_cvtepu8_epi32(sh));
                for r in 0..R {
                    isum[r] = _mm512_add_epi32(isum[r], _mm512_add_epi32(_mm512_mullo_epi32(lo[r], sl), _mm512_mullo_epi32(hi[r], sh)));
                }
            }
            // SAFETY: 32 bytes from each of the panel's f16 and min arrays.
            let (d, dmin, mn) = unsafe {
                (
                    _mm512_cvtph_ps(_mm256_loadu_si256(b.d.as_ptr().cast())),
                    _mm512_cvtph_ps(_mm256_loadu_si256(b.dmin.as_ptr().cast())),
                    [
                        _mm512_cvtepu8_epi16(_mm256_loadu_si256(b.mn[0].as_ptr().cast())),
                        _mm512_cvtepu8_epi16(_mm256_loadu_si256(b.mn[1].as_ptr().cast())),
                        _mm512_cvtepu8_epi16(_mm256_loadu_si256(b.mn[2].as_ptr().cast())),
                        _mm512_cvtepu8_epi16(_mm256_loadu_si256(b.mn[3].as_ptr().cast())),
                    ],
                )
            };
            for r in 0..R {
                let pr = &pairs[r * nb + i];
                let mut ms = _mm512_setzero_si512();
                for q in 0..4 {
                    ms = _mm512_dpwssd_epi32(ms, mn[q], _mm512_set1_epi32(pr[q]));
                }
                let dy = _mm512_set1_ps(a[r].d[i]);
                acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(d, dy), acc[r]);
                acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(dmin, dy), acc[r]);
            }
        }
        let mut out = [[0f32; ROWS]; R];
        for (o, a) in out.iter_mut().zip(acc) {
            // SAFETY: 16 f32 into a 16-f32 array.
            unsafe { _mm512_storeu_ps(o.as_mut_ptr(), a) };
        }
        out
    }
}
