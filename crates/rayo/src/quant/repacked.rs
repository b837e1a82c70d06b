//! Q4_K weights repacked once, at load, for the decoding product on AVX-512 VNNI and on AVX2, as
//! llama.cpp's CPU backend repacks its weights: sixteen weight rows per panel (one vector of 16
//! i32 lanes on AVX-512, two of 8 on AVX2; the kernel is written once over `x86::Lanes16`).
//! Super-block `i` of rows `16g..16g + 16` is one [`Panel`]: vector `8c + k` holds bytes
//! `32c + 4k .. 32c + 4k + 4` of the 16 rows' nibbles (lane `r`: row `16g + r`), so one load,
//! two masks and two `vpdpbusd` with four activation bytes broadcast add a four-value dot to all
//! 16 rows of sub-blocks `2c` (low nibbles) and `2c + 1` (high nibbles). The 6-bit scales and
//! mins are unpacked beside them (bytes), the f16 `d` and `dmin` of the 16 rows side by side:
//! 2,368 bytes for 16 rows of 256 values, against the file's 2,304. No horizontal sums, no scale
//! unpacking in the loop:
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

/// Which kernel a [`Repacked`] runs, held as the proof of its CPU features.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Token {
    Avx512Vnni(crate::cpu::isa::avx512::Avx512<true>),
    Avx2(crate::cpu::isa::avx2::Avx2),
}

/// A Q4_K matrix's rows repacked for the one-token product on AVX-512 VNNI or AVX2
/// ([`Repacked::new`]; the module's text gives the layout and the arithmetic). Attach it to the
/// matrix it was made from with [`QuantMatrix::with_repacked`]: the products then take its
/// kernel for one-token rows.
pub struct Repacked {
    #[cfg(target_arch = "x86_64")]
    token: Token,
    /// No value exists off x86-64 (the kernels are x86-64's).
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
    /// backend (its VNNI kernel where the CPU has VNNI, else the AVX2 one) or the AVX2 backend;
    /// `None` otherwise (the file's layout serves). The two kernels give the same bits (exact
    /// integer sums, the same f32 operations per lane). Uses rayon's threads for large matrices.
    pub fn new(backend: Backend, w: &QuantMatrix<'_>) -> Option<Repacked> {
        #[cfg(target_arch = "x86_64")]
        {
            use crate::cpu::isa::{avx2::Avx2, avx512::Avx512};
            let avx2 = || Avx2::try_new().map(Token::Avx2);
            let token = match backend {
                Backend::Avx512 => Avx512::try_new_vnni().map(Token::Avx512Vnni).or_else(avx2)?,
                Backend::Avx2 => avx2()?,
                _ => return None,
            };
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
            let nb = p.len();
            macro_rules! rows {
                ($kernel:ident) => {
                    match a.len() {
                        1 => out[..1].copy_from_slice(&x86::$kernel::<1>(p, a.try_into().unwrap(), pairs, nb)),
                        2 => out[..2].copy_from_slice(&x86::$kernel::<2>(p, a.try_into().unwrap(), pairs, nb)),
                        3 => out[..3].copy_from_slice(&x86::$kernel::<3>(p, a.try_into().unwrap(), pairs, nb)),
                        _ => out[..4].copy_from_slice(&x86::$kernel::<4>(p, a.try_into().unwrap(), pairs, nb)),
                    }
                };
            }
            match self.token {
                // SAFETY: an `Avx512<true>` exists only where the CPU has avx512f, avx512bw,
                // avx512vl, avx512vnni, AVX2 and FMA, the kernel's features; it reads only
                // through references, indexed with checks.
                Token::Avx512Vnni(_) => unsafe { rows!(kernel_avx512_vnni) },
                // SAFETY: an `Avx2` exists only where the CPU has AVX2, FMA and F16C, the
                // kernel's features; as above.
                Token::Avx2(_) => unsafe { rows!(kernel_avx2) },
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

    /// The 16 lanes of a panel (lane `r`: weight row `r` of the group) as the kernel needs
    /// them: one 512-bit vector on AVX-512 VNNI, two 256-bit vectors on AVX2. Each operation is
    /// exact on integers and one IEEE operation per lane on floats, so both give the same bits.
    /// (Methods are `#[inline(always)]` and called only from the `#[target_feature]` kernels
    /// below, where the intrinsics they call are compiled for the features the token proved.)
    pub(super) trait Lanes16 {
        type I: Copy;
        type F: Copy;
        unsafe fn zero_i() -> Self::I;
        unsafe fn zero_f() -> Self::F;
        /// Sixteen 4-byte groups of a panel vector (`qs[v]`).
        unsafe fn load(p: &[u32; ROWS]) -> Self::I;
        /// `(v & 15, (v >> 4) & 15)` byte by byte.
        unsafe fn nibbles(v: Self::I) -> (Self::I, Self::I);
        /// `acc + Σ_{t<4} a.byte[4l + t] · y.byte[t]` per lane `l`: `a` unsigned (≤ 15), `y`'s
        /// four bytes signed.
        unsafe fn dot4(acc: Self::I, a: Self::I, y: i32) -> Self::I;
        /// Sixteen bytes, zero-extended to the 16 lanes.
        unsafe fn widen(p: &[u8; ROWS]) -> Self::I;
        /// `acc + lo·sl + hi·sh`, lane by lane (exact: every value fits i32).
        unsafe fn madd2(acc: Self::I, lo: Self::I, sl: Self::I, hi: Self::I, sh: Self::I) -> Self::I;
        /// `acc + m[2l]·pair.lo + m[2l + 1]·pair.hi` per lane `l`, for the pairs of 16-bit
        /// values `m` (the mins, zero-extended from `p`) and the two i16 of `pair`.
        unsafe fn mins_dot(acc: Self::I, p: &[u8; 2 * ROWS], pair: i32) -> Self::I;
        /// Sixteen IEEE halves as f32.
        unsafe fn halves(p: &[u16; ROWS]) -> Self::F;
        /// `acc + f32(isum)·(d·dy) − f32(ms)·(dmin·dy)`: two fused operations per lane, in that
        /// order.
        unsafe fn scale(acc: Self::F, isum: Self::I, d: Self::F, ms: Self::I, dmin: Self::F, dy: f32) -> Self::F;
        unsafe fn store(v: Self::F, out: &mut [f32; ROWS]);
    }

    pub(super) struct Zmm;
    pub(super) struct Ymm2;

    // SAFETY (every `unsafe` block of the two impls): the callers guarantee the features (the
    // trait's contract); memory is read and written through references of the exact sizes the
    // intrinsics take.
    impl Lanes16 for Zmm {
        type I = __m512i;
        type F = __m512;
        #[inline(always)]
        unsafe fn zero_i() -> __m512i {
            unsafe { _mm512_setzero_si512() }
        }
        #[inline(always)]
        unsafe fn zero_f() -> __m512 {
            unsafe { _mm512_setzero_ps() }
        }
        #[inline(always)]
        unsafe fn load(p: &[u32; ROWS]) -> __m512i {
            unsafe { _mm512_loadu_si512(p.as_ptr().cast()) }
        }
        #[inline(always)]
        unsafe fn nibbles(v: __m512i) -> (__m512i, __m512i) {
            unsafe {
                let m = _mm512_set1_epi8(0x0F);
                (_mm512_and_si512(v, m), _mm512_and_si512(_mm512_srli_epi16::<4>(v), m))
            }
        }
        #[inline(always)]
        unsafe fn dot4(acc: __m512i, a: __m512i, y: i32) -> __m512i {
            unsafe { _mm512_dpbusd_epi32(acc, a, _mm512_set1_epi32(y)) }
        }
        #[inline(always)]
        unsafe fn widen(p: &[u8; ROWS]) -> __m512i {
            unsafe { _mm512_cvtepu8_epi32(_mm_loadu_si128(p.as_ptr().cast())) }
        }
        #[inline(always)]
        unsafe fn madd2(acc: __m512i, lo: __m512i, sl: __m512i, hi: __m512i, sh: __m512i) -> __m512i {
            unsafe { _mm512_add_epi32(acc, _mm512_add_epi32(_mm512_mullo_epi32(lo, sl), _mm512_mullo_epi32(hi, sh))) }
        }
        #[inline(always)]
        unsafe fn mins_dot(acc: __m512i, p: &[u8; 2 * ROWS], pair: i32) -> __m512i {
            unsafe { _mm512_dpwssd_epi32(acc, _mm512_cvtepu8_epi16(_mm256_loadu_si256(p.as_ptr().cast())), _mm512_set1_epi32(pair)) }
        }
        #[inline(always)]
        unsafe fn halves(p: &[u16; ROWS]) -> __m512 {
            unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.as_ptr().cast())) }
        }
        #[inline(always)]
        unsafe fn scale(acc: __m512, isum: __m512i, d: __m512, ms: __m512i, dmin: __m512, dy: f32) -> __m512 {
            unsafe {
                let dy = _mm512_set1_ps(dy);
                let acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d, dy), acc);
                _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(dmin, dy), acc)
            }
        }
        #[inline(always)]
        unsafe fn store(v: __m512, out: &mut [f32; ROWS]) {
            unsafe { _mm512_storeu_ps(out.as_mut_ptr(), v) }
        }
    }

    /// `[e(0), e(1)]` for the two halves (rows 0–7 and 8–15), written out rather than through
    /// a closure, which might be compiled outside the kernel's features.
    macro_rules! halves {
        ($k:ident => $e:expr) => {
            [
                {
                    let $k = 0;
                    $e
                },
                {
                    let $k = 1;
                    $e
                },
            ]
        };
    }

    impl Lanes16 for Ymm2 {
        type I = [__m256i; 2];
        type F = [__m256; 2];
        #[inline(always)]
        unsafe fn zero_i() -> [__m256i; 2] {
            unsafe { [_mm256_setzero_si256(); 2] }
        }
        #[inline(always)]
        unsafe fn zero_f() -> [__m256; 2] {
            unsafe { [_mm256_setzero_ps(); 2] }
        }
        #[inline(always)]
        unsafe fn load(p: &[u32; ROWS]) -> [__m256i; 2] {
            unsafe { [_mm256_loadu_si256(p.as_ptr().cast()), _mm256_loadu_si256(p[8..].as_ptr().cast())] }
        }
        #[inline(always)]
        unsafe fn nibbles(v: [__m256i; 2]) -> ([__m256i; 2], [__m256i; 2]) {
            unsafe {
                let m = _mm256_set1_epi8(0x0F);
                let lo = halves!(k => _mm256_and_si256(v[k], m));
                (lo, halves!(k => _mm256_and_si256(_mm256_srli_epi16::<4>(v[k]), m)))
            }
        }
        #[inline(always)]
        unsafe fn dot4(acc: [__m256i; 2], a: [__m256i; 2], y: i32) -> [__m256i; 2] {
            // `maddubs` pairs (≤ 2·15·128, no saturation), then `madd` with ones: the four
            // products of each lane, exactly as `vpdpbusd`.
            unsafe {
                let (y, one) = (_mm256_set1_epi32(y), _mm256_set1_epi16(1));
                halves!(k => _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(a[k], y), one)))
            }
        }
        #[inline(always)]
        unsafe fn widen(p: &[u8; ROWS]) -> [__m256i; 2] {
            unsafe {
                let v = _mm_loadu_si128(p.as_ptr().cast());
                [_mm256_cvtepu8_epi32(v), _mm256_cvtepu8_epi32(_mm_srli_si128::<8>(v))]
            }
        }
        #[inline(always)]
        unsafe fn madd2(acc: [__m256i; 2], lo: [__m256i; 2], sl: [__m256i; 2], hi: [__m256i; 2], sh: [__m256i; 2]) -> [__m256i; 2] {
            unsafe { halves!(k => _mm256_add_epi32(acc[k], _mm256_add_epi32(_mm256_mullo_epi32(lo[k], sl[k]), _mm256_mullo_epi32(hi[k], sh[k])))) }
        }
        #[inline(always)]
        unsafe fn mins_dot(acc: [__m256i; 2], p: &[u8; 2 * ROWS], pair: i32) -> [__m256i; 2] {
            unsafe {
                let pair = _mm256_set1_epi32(pair);
                halves!(k => _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128(p[16 * k..].as_ptr().cast())), pair)))
            }
        }
        #[inline(always)]
        unsafe fn halves(p: &[u16; ROWS]) -> [__m256; 2] {
            unsafe { [_mm256_cvtph_ps(_mm_loadu_si128(p.as_ptr().cast())), _mm256_cvtph_ps(_mm_loadu_si128(p[8..].as_ptr().cast()))] }
        }
        #[inline(always)]
        unsafe fn scale(acc: [__m256; 2], isum: [__m256i; 2], d: [__m256; 2], ms: [__m256i; 2], dmin: [__m256; 2], dy: f32) -> [__m256; 2] {
            unsafe {
                let dy = _mm256_set1_ps(dy);
                halves!(k => {
                    let a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[k]), _mm256_mul_ps(d[k], dy), acc[k]);
                    _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms[k]), _mm256_mul_ps(dmin[k], dy), a)
                })
            }
        }
        #[inline(always)]
        unsafe fn store(v: [__m256; 2], out: &mut [f32; ROWS]) {
            unsafe {
                _mm256_storeu_ps(out.as_mut_ptr(), v[0]);
                _mm256_storeu_ps(out[8..].as_mut_ptr(), v[1]);
            }
        }
    }

    /// [`kernel`] on AVX-512 VNNI.
    ///
    /// # Safety
    /// The CPU must have avx512f, avx512bw, avx512vl, avx512vnni, avx2 and fma.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
    pub(super) unsafe fn kernel_avx512_vnni<const R: usize>(p: &[Panel], a: &[ActRow<'_>; R], pairs: &[[i32; 4]], nb: usize) -> [[f32; ROWS]; R] {
        // SAFETY: this function's features are `Zmm`'s.
        unsafe { kernel::<Zmm, R>(p, a, pairs, nb) }
    }

    /// [`kernel`] on AVX2.
    ///
    /// # Safety
    /// The CPU must have avx2, fma and f16c.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn kernel_avx2<const R: usize>(p: &[Panel], a: &[ActRow<'_>; R], pairs: &[[i32; 4]], nb: usize) -> [[f32; ROWS]; R] {
        // SAFETY: this function's features are `Ymm2`'s.
        unsafe { kernel::<Ymm2, R>(p, a, pairs, nb) }
    }

    /// The panels `p` (one group of 16 rows, `nb` super-blocks) against the activation rows
    /// `a` (`pairs[r · nb + i]`: row `r`'s paired sub-block sums of super-block `i`):
    /// `out[r][lane]`. (Each row of `a` holds `256 · nb` values and `nb` scales, `pairs`
    /// `R · nb` entries: checked by the indexing, a panic otherwise.)
    ///
    /// # Safety
    /// The CPU has `L`'s features ([`Lanes16`]).
    #[inline(always)]
    unsafe fn kernel<L: Lanes16, const R: usize>(p: &[Panel], a: &[ActRow<'_>; R], pairs: &[[i32; 4]], nb: usize) -> [[f32; ROWS]; R] {
        // SAFETY: the caller guarantees `L`'s features (the `Lanes16` calls); a prefetch never
        // faults; memory is read through references, indexed with checks.
        unsafe {
            let mut acc = [L::zero_f(); R];
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
                let mut isum = [L::zero_i(); R];
                for c in 0..4 {
                    let (mut lo, mut hi) = ([L::zero_i(); R], [L::zero_i(); R]);
                    for k in 0..8 {
                        let (l, h) = L::nibbles(L::load(&b.qs[8 * c + k]));
                        let at = 64 * c + 4 * k;
                        for r in 0..R {
                            let y = &ys[r][at..at + 36];
                            let yl = i32::from_le_bytes([y[0] as u8, y[1] as u8, y[2] as u8, y[3] as u8]);
                            let yh = i32::from_le_bytes([y[32] as u8, y[33] as u8, y[34] as u8, y[35] as u8]);
                            lo[r] = L::dot4(lo[r], l, yl);
                            hi[r] = L::dot4(hi[r], h, yh);
                        }
                    }
                    let (sl, sh) = (L::widen(&b.sc[2 * c]), L::widen(&b.sc[2 * c + 1]));
                    for r in 0..R {
                        isum[r] = L::madd2(isum[r], lo[r], sl, hi[r], sh);
                    }
                }
                let (d, dmin) = (L::halves(&b.d), L::halves(&b.dmin));
                for r in 0..R {
                    let pr = &pairs[r * nb + i];
                    let mut ms = L::zero_i();
                    for (mn, &pair) in b.mn.iter().zip(pr) {
                        ms = L::mins_dot(ms, mn, pair);
                    }
                    acc[r] = L::scale(acc[r], isum[r], d, ms, dmin, a[r].d[i]);
                }
            }
            let mut out = [[0f32; ROWS]; R];
            for (o, a) in out.iter_mut().zip(acc) {
                L::store(a, o);
            }
            out
        }
    }
}
