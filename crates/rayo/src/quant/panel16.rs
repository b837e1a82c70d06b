//! A prompt's quantized product on AVX-512 VNNI, sixteen weight rows per vector: a block of 16
//! unpacked weight rows ([`super::tile8::unpack_rows`]) is interleaved into a panel whose
//! vector `k` of block `i` holds bytes `4k..4k + 4` of block `i` of each of the 16 rows. One
//! `vpdpbusd` with four activation bytes broadcast then adds a four-value dot to each of the
//! 16 rows' lanes, so a tile's sums never need the horizontal reductions of [`super::tile8`]:
//! eight `vpdpbusd` make one 32-value block of 16 rows × one activation row.
//!
//! The arithmetic of a row is [`super::tile8`]'s, bit for bit: the same integer sums (exact in
//! any order), then `acc += Σ·(d_w·d_a)`, `macc += m_w·s_a` and `acc + macc`, one rounding
//! each. So the 32-value formats still compute a one-token row in a tile as the one-row path
//! does ([`super::tile8::same_as_one_row`]).

use super::repacked::Repacked;
use super::tile8::{Tile8, Unpacked};
use super::GgmlType;
use crate::Backend;

/// Weight rows per panel (the 16 f32 lanes of a vector).
pub(crate) const ROWS: usize = 16;

/// One 32-value block of 16 weight rows: the bytes of `q[k][r]` are values `4k..4k + 4` of row
/// `r` (for the signed formats, offset by 128 to unsigned bytes), `d[r]` and `m[r]` its scale
/// and min (value = `d·q + m`).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct PanelBlock {
    q: [[u32; ROWS]; 8],
    d: [f32; ROWS],
    m: [f32; ROWS],
}

const EMPTY: PanelBlock = PanelBlock { q: [[0; ROWS]; 8], d: [0.0; ROWS], m: [0.0; ROWS] };

/// Panels for the products of one weight format on a CPU with AVX-512 VNNI: the interleaved
/// blocks of the current 16 weight rows, and the kernel that multiplies them with tiles.
pub(crate) struct Panels {
    #[cfg(target_arch = "x86_64")]
    token: crate::cpu::isa::avx512::Avx512<true>,
    /// No value exists off x86-64 (the kernel is AVX-512's).
    #[cfg(not(target_arch = "x86_64"))]
    never: core::convert::Infallible,
    signed: bool,
    blocks: Vec<PanelBlock>,
}

impl Panels {
    /// Panels for weights of `ty` (a format that unpacks) on `backend`, where that backend is
    /// AVX-512 and the CPU has VNNI; `None` elsewhere (the tiles of [`super::tile8`] serve).
    pub(crate) fn new(backend: Backend, ty: GgmlType) -> Option<Panels> {
        #[cfg(target_arch = "x86_64")]
        {
            let token = if backend == Backend::Avx512 { crate::cpu::isa::avx512::Avx512::try_new_vnni()? } else { return None };
            Some(Panels { token, signed: super::tile8::signed(ty), blocks: Vec::new() })
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (backend, ty);
            None
        }
    }

    /// Interleaves `rows` (at most 16) unpacked weight rows — `unpacked` holds them one after
    /// another, each the same number of blocks — into this panel; missing rows are zeros.
    pub(crate) fn pack(&mut self, unpacked: &[Unpacked], rows: usize) {
        assert!((1..=ROWS).contains(&rows) && unpacked.len() % rows == 0, "panel of {rows} rows from {} blocks", unpacked.len());
        let nb = unpacked.len() / rows;
        let flip = if self.signed { 0x8080_8080 } else { 0 };
        self.blocks.clear();
        self.blocks.resize(nb, EMPTY);
        // Block by block (the panel is written in order; it outgrows L1 where a row is long).
        for (i, b) in self.blocks.iter_mut().enumerate() {
            for r in 0..rows {
                let u = &unpacked[r * nb + i];
                for (q, v) in b.q.iter_mut().zip(u[..32].as_chunks::<4>().0) {
                    q[r] = u32::from_le_bytes(*v) ^ flip;
                }
                b.d[r] = f32::from_le_bytes([u[32], u[33], u[34], u[35]]);
                b.m[r] = f32::from_le_bytes([u[36], u[37], u[38], u[39]]);
            }
        }
    }

    /// This panel from group `g` (rows `16g..16g + 16`) of Q4_K rows repacked for decoding: the
    /// same bytes and scales as [`Panels::pack`] of those rows unpacked
    /// ([`super::tile8::unpack_rows`]; `d·sc` and `−dmin·mn` rounded once, as there), so the
    /// same bits, in a few vector operations per super-block instead of a byte-wise interleave.
    pub(crate) fn pack_repacked(&mut self, rp: &Repacked, g: usize) {
        let src = rp.group(g);
        self.blocks.clear();
        self.blocks.resize(8 * src.len(), EMPTY);
        #[cfg(target_arch = "x86_64")]
        {
            let _ = self.token;
            // SAFETY: `self.token` (an `Avx512<true>`) exists only where the CPU has the
            // kernel's features; it writes only through the references (8 blocks per panel).
            unsafe { x86::from_repacked(src, &mut self.blocks) }
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }

    /// `out[j] = [row j · t row r for r in 0..8]` for the panel's first `out.len()` rows.
    pub(crate) fn dot(&self, t: &Tile8, out: &mut [[f32; 8]]) {
        assert!(out.len() <= ROWS && self.blocks.len() == t.d.len(), "a panel of {} blocks against a tile of {}", self.blocks.len(), t.d.len());
        #[cfg(target_arch = "x86_64")]
        {
            // `self.token` is held as the proof of the kernel's features.
            let _ = self.token;
            // SAFETY: `self.token` (an `Avx512<true>`) exists only where the CPU has avx512f,
            // avx512bw, avx512vl and avx512vnni; the kernel reads only through references
            // (lengths checked above).
            let o = unsafe {
                if self.signed {
                    x86::kernel::<true>(&self.blocks, t)
                } else {
                    x86::kernel::<false>(&self.blocks, t)
                }
            };
            for (j, row) in out.iter_mut().enumerate() {
                for (r, v) in row.iter_mut().enumerate() {
                    *v = o[r][j];
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self.never {}
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{PanelBlock, ROWS};
    use crate::quant::repacked::Panel;
    use crate::quant::tile8::Tile8;
    use core::arch::x86_64::*;

    /// `out[8i + j]`: sub-block `j` of the repacked super-block `src[i]` (16 rows) as a panel
    /// block: the low (`j` even) or high nibbles of vectors `8(j/2)..8(j/2) + 8`, `d·sc_j` and
    /// `(−dmin)·mn_j`.
    ///
    /// # Safety
    /// The CPU must have avx512f, avx512bw, avx512vl, avx512vnni, avx2 and fma (the features
    /// [`Panels`]' token proves).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
    pub(super) unsafe fn from_repacked(src: &[Panel], out: &mut [PanelBlock]) {
        let nibble = _mm512_set1_epi8(0x0F);
        for (p, o8) in src.iter().zip(out.as_chunks_mut::<8>().0) {
            for c in 0..4 {
                for k in 0..8 {
                    // SAFETY: 64-byte-aligned vectors (`Panel` and `PanelBlock` are align(64),
                    // their rows of 16 u32 at multiples of 64 bytes).
                    unsafe {
                        let v = _mm512_load_si512(p.qs[8 * c + k].as_ptr().cast());
                        _mm512_store_si512(o8[2 * c].q[k].as_mut_ptr().cast(), _mm512_and_si512(v, nibble));
                        _mm512_store_si512(o8[2 * c + 1].q[k].as_mut_ptr().cast(), _mm512_and_si512(_mm512_srli_epi16::<4>(v), nibble));
                    }
                }
            }
            // SAFETY: 32 bytes from each f16 array, 16 from each scale row, 32 from each min row;
            // 16 f32 into each block's `d` and `m`.
            unsafe {
                let d = _mm512_cvtph_ps(_mm256_loadu_si256(p.d.as_ptr().cast()));
                // the sign flipped (an exact negation, −0 included)
                let dmin = _mm512_castps_si512(_mm512_cvtph_ps(_mm256_loadu_si256(p.dmin.as_ptr().cast())));
                let neg_dmin = _mm512_castsi512_ps(_mm512_xor_si512(dmin, _mm512_set1_epi32(i32::MIN)));
                for (j, o) in o8.iter_mut().enumerate() {
                    let sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(p.sc[j].as_ptr().cast())));
                    // row r's pair of mins as one u16: sub-block 2(j/2) low, 2(j/2) + 1 high
                    let pair = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p.mn[j / 2].as_ptr().cast()));
                    let mn = if j % 2 == 0 { _mm512_and_si512(pair, _mm512_set1_epi32(0xFF)) } else { _mm512_srli_epi32::<8>(pair) };
                    _mm512_storeu_ps(o.d.as_mut_ptr(), _mm512_mul_ps(d, sc));
                    _mm512_storeu_ps(o.m.as_mut_ptr(), _mm512_mul_ps(neg_dmin, _mm512_cvtepi32_ps(mn)));
                }
            }
        }
    }

    /// The products of the panel `p` with the eight rows of `t`: `out[r][j]` for activation
    /// row `r`, weight row `j`. `SIGNED`: the weights are signed bytes stored plus 128, so
    /// `128·Σa` comes off each sum (exact); otherwise the min term is added.
    ///
    /// # Safety
    /// The CPU must have avx512f, avx512bw, avx512vl and avx512vnni.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")]
    pub(super) unsafe fn kernel<const SIGNED: bool>(p: &[PanelBlock], t: &Tile8) -> [[f32; ROWS]; 8] {
        let mut acc = [_mm512_setzero_ps(); 8];
        let mut macc = [_mm512_setzero_ps(); 8];
        for ((((b, y8), da), sa), isum) in p.iter().zip(&t.qs).zip(&t.d).zip(&t.sums).zip(&t.isums) {
            // SAFETY: loads from 16-u32 arrays of `b` (aligned: `PanelBlock` is align(64)).
            let w: [__m512i; 8] = core::array::from_fn(|k| unsafe { _mm512_load_si512(b.q[k].as_ptr().cast()) });
            // SAFETY: 16 f32 in each array.
            let (dw, mw) = unsafe { (_mm512_loadu_ps(b.d.as_ptr()), _mm512_loadu_ps(b.m.as_ptr())) };
            for r in 0..8 {
                let y = &y8[r];
                let mut s = _mm512_setzero_si512();
                for (k, wk) in w.iter().enumerate() {
                    let a = i32::from_le_bytes([y[4 * k], y[4 * k + 1], y[4 * k + 2], y[4 * k + 3]]);
                    s = _mm512_dpbusd_epi32(s, *wk, _mm512_set1_epi32(a));
                }
                if SIGNED {
                    s = _mm512_sub_epi32(s, _mm512_set1_epi32(128 * isum[r]));
                }
                acc[r] = _mm512_add_ps(acc[r], _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(da[r]))));
                if !SIGNED {
                    macc[r] = _mm512_add_ps(macc[r], _mm512_mul_ps(mw, _mm512_set1_ps(sa[r])));
                }
            }
        }
        let mut out = [[0f32; ROWS]; 8];
        for (o, (a, m)) in out.iter_mut().zip(acc.iter().zip(&macc)) {
            // SAFETY: 16 f32 into a 16-f32 array.
            unsafe { _mm512_storeu_ps(o.as_mut_ptr(), _mm512_add_ps(*a, *m)) };
        }
        out
    }
}
