//! SSE2 (the x86-64 baseline): 4 f32 lanes, masks as all-ones lanes, no FMA.

use crate::cpu::simd::Simd;
use core::arch::x86_64::*;

/// SSE2 is part of x86-64 itself, so every x86-64 CPU has it.
#[derive(Clone, Copy, Debug)]
pub struct Sse2(pub(crate) ());

impl Sse2 {
    #[inline]
    pub fn try_new() -> Option<Self> {
        Some(Sse2(()))
    }
}

// SAFETY (every `unsafe` block below): SSE2 is baseline on x86-64; full loads/stores assert the
// slice holds 4 elements, partial ones go through
// a stack buffer.
impl Simd for Sse2 {
    type V = __m128;
    type I = __m128i;
    type M = __m128;
    type B = (__m128i, __m128i);
    type D = __m128i;
    type F = __m128;
    const LANES: usize = 4;
    const NAME: &'static str = "sse2";

    #[inline(always)]
    fn vectorize<R>(self, f: impl FnOnce() -> R) -> R {
        f() // baseline: the crate is already compiled for SSE2
    }
    #[inline(always)]
    fn splat(self, x: f32) -> __m128 {
        unsafe { _mm_set1_ps(x) }
    }
    #[inline(always)]
    fn load(self, s: &[f32]) -> __m128 {
        assert!(s.len() >= 4);
        unsafe { _mm_loadu_ps(s.as_ptr()) }
    }
    #[inline(always)]
    fn store(self, s: &mut [f32], v: __m128) {
        assert!(s.len() >= 4);
        unsafe { _mm_storeu_ps(s.as_mut_ptr(), v) }
    }
    #[inline(always)]
    fn load_partial(self, s: &[f32], fill: f32) -> __m128 {
        let mut buf = [fill; 4];
        let n = s.len().min(4);
        buf[..n].copy_from_slice(&s[..n]);
        self.load(&buf)
    }
    #[inline(always)]
    fn store_partial(self, s: &mut [f32], v: __m128) {
        let mut buf = [0.0; 4];
        self.store(&mut buf, v);
        let n = s.len().min(4);
        s[..n].copy_from_slice(&buf[..n]);
    }
    #[inline(always)]
    fn add(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_mul_ps(a, b) }
    }
    #[inline(always)]
    fn div(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_div_ps(a, b) }
    }
    #[inline(always)]
    fn mul_add(self, a: __m128, b: __m128, c: __m128) -> __m128 {
        unsafe { _mm_add_ps(_mm_mul_ps(a, b), c) } // no FMA in SSE2
    }
    #[inline(always)]
    fn min(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_min_ps(a, b) }
    }
    #[inline(always)]
    fn max(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_max_ps(a, b) }
    }
    #[inline(always)]
    fn sqrt(self, a: __m128) -> __m128 {
        unsafe { _mm_sqrt_ps(a) }
    }
    #[inline(always)]
    fn and(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_and_ps(a, b) }
    }
    #[inline(always)]
    fn or(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_or_ps(a, b) }
    }
    #[inline(always)]
    fn xor(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_xor_ps(a, b) }
    }
    #[inline(always)]
    fn lt(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_cmplt_ps(a, b) }
    }
    #[inline(always)]
    fn le(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_cmple_ps(a, b) }
    }
    #[inline(always)]
    fn eq(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_cmpeq_ps(a, b) }
    }
    #[inline(always)]
    fn is_nan(self, a: __m128) -> __m128 {
        unsafe { _mm_cmpunord_ps(a, a) }
    }
    #[inline(always)]
    fn either_nan(self, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_cmpunord_ps(a, b) }
    }
    #[inline(always)]
    fn select(self, m: __m128, a: __m128, b: __m128) -> __m128 {
        unsafe { _mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b)) }
    }
    #[inline(always)]
    fn mask_or(self, a: __m128, b: __m128) -> __m128 {
        self.or(a, b)
    }
    #[inline(always)]
    fn mask_and(self, a: __m128, b: __m128) -> __m128 {
        self.and(a, b)
    }
    #[inline(always)]
    fn mask_none(self) -> __m128 {
        unsafe { _mm_setzero_ps() }
    }
    #[inline(always)]
    fn any(self, m: __m128) -> bool {
        unsafe { _mm_movemask_ps(m) != 0 }
    }
    #[inline(always)]
    fn first_set(self, m: __m128) -> Option<usize> {
        let bits = unsafe { _mm_movemask_ps(m) };
        (bits != 0).then(|| bits.trailing_zeros() as usize)
    }
    #[inline(always)]
    fn to_bits(self, a: __m128) -> __m128i {
        unsafe { _mm_castps_si128(a) }
    }
    #[inline(always)]
    fn from_bits(self, a: __m128i) -> __m128 {
        unsafe { _mm_castsi128_ps(a) }
    }
    #[inline(always)]
    fn isplat(self, x: i32) -> __m128i {
        unsafe { _mm_set1_epi32(x) }
    }
    #[inline(always)]
    fn iadd(self, a: __m128i, b: __m128i) -> __m128i {
        unsafe { _mm_add_epi32(a, b) }
    }
    #[inline(always)]
    fn isub(self, a: __m128i, b: __m128i) -> __m128i {
        unsafe { _mm_sub_epi32(a, b) }
    }
    #[inline(always)]
    fn ishl(self, a: __m128i, n: u32) -> __m128i {
        unsafe { _mm_sll_epi32(a, _mm_cvtsi32_si128(n as i32)) }
    }
    #[inline(always)]
    fn ishr(self, a: __m128i, n: u32) -> __m128i {
        unsafe { _mm_sra_epi32(a, _mm_cvtsi32_si128(n as i32)) }
    }
    #[inline(always)]
    fn i_to_f(self, a: __m128i) -> __m128 {
        unsafe { _mm_cvtepi32_ps(a) }
    }
    #[inline(always)]
    fn bload(self, s: &[u8]) -> (__m128i, __m128i) {
        assert!(s.len() >= 32);
        unsafe { (_mm_loadu_si128(s.as_ptr().cast()), _mm_loadu_si128(s.as_ptr().add(16).cast())) }
    }
    #[inline(always)]
    fn bstore(self, v: (__m128i, __m128i), out: &mut [u8]) {
        assert!(out.len() >= 32);
        unsafe {
            _mm_storeu_si128(out.as_mut_ptr().cast(), v.0);
            _mm_storeu_si128(out.as_mut_ptr().add(16).cast(), v.1);
        }
    }
    #[inline(always)]
    fn bload_nib(self, s: &[u8]) -> (__m128i, __m128i) {
        assert!(s.len() >= 16);
        unsafe {
            let x = _mm_loadu_si128(s.as_ptr().cast());
            let m = _mm_set1_epi8(15);
            (_mm_and_si128(x, m), _mm_and_si128(_mm_srli_epi16::<4>(x), m))
        }
    }
    #[inline(always)]
    fn bsplat(self, x: u8) -> (__m128i, __m128i) {
        let v = unsafe { _mm_set1_epi8(x as i8) };
        (v, v)
    }
    #[inline(always)]
    fn band(self, a: (__m128i, __m128i), b: (__m128i, __m128i)) -> (__m128i, __m128i) {
        unsafe { (_mm_and_si128(a.0, b.0), _mm_and_si128(a.1, b.1)) }
    }
    #[inline(always)]
    fn bor(self, a: (__m128i, __m128i), b: (__m128i, __m128i)) -> (__m128i, __m128i) {
        unsafe { (_mm_or_si128(a.0, b.0), _mm_or_si128(a.1, b.1)) }
    }
    #[inline(always)]
    fn bsub(self, a: (__m128i, __m128i), b: (__m128i, __m128i)) -> (__m128i, __m128i) {
        unsafe { (_mm_sub_epi8(a.0, b.0), _mm_sub_epi8(a.1, b.1)) }
    }
    #[inline(always)]
    fn bshr(self, a: (__m128i, __m128i), n: u32) -> (__m128i, __m128i) {
        unsafe {
            let (c, m) = (_mm_cvtsi32_si128(n as i32), _mm_set1_epi8((0xFFu8 >> n) as i8));
            (_mm_and_si128(_mm_srl_epi16(a.0, c), m), _mm_and_si128(_mm_srl_epi16(a.1, c), m))
        }
    }
    #[inline(always)]
    fn bshl(self, a: (__m128i, __m128i), n: u32) -> (__m128i, __m128i) {
        unsafe {
            let (c, m) = (_mm_cvtsi32_si128(n as i32), _mm_set1_epi8((0xFFu8 << n) as i8));
            (_mm_and_si128(_mm_sll_epi16(a.0, c), m), _mm_and_si128(_mm_sll_epi16(a.1, c), m))
        }
    }
    #[inline(always)]
    fn dot_u8i8(self, a: (__m128i, __m128i), b: (__m128i, __m128i)) -> __m128i {
        unsafe {
            _mm_add_epi32(
                madd16(zext_lo(a.0), sext_lo(b.0), zext_hi(a.0), sext_hi(b.0)),
                madd16(zext_lo(a.1), sext_lo(b.1), zext_hi(a.1), sext_hi(b.1)),
            )
        }
    }
    #[inline(always)]
    fn dot_i8i8(self, a: (__m128i, __m128i), b: (__m128i, __m128i)) -> __m128i {
        unsafe {
            _mm_add_epi32(
                madd16(sext_lo(a.0), sext_lo(b.0), sext_hi(a.0), sext_hi(b.0)),
                madd16(sext_lo(a.1), sext_lo(b.1), sext_hi(a.1), sext_hi(b.1)),
            )
        }
    }
    #[inline(always)]
    fn dot_u8i8_s2(self, a: (__m128i, __m128i), b: (__m128i, __m128i), s0: i16, s1: i16) -> __m128i {
        // Products fit i16 (|a·b| ≤ 127·128); `madd` with the scale sums pairs of them.
        unsafe {
            let half = |a: __m128i, b: __m128i, s: i16| {
                let p = _mm_add_epi16(_mm_mullo_epi16(zext_lo(a), sext_lo(b)), _mm_mullo_epi16(zext_hi(a), sext_hi(b)));
                _mm_madd_epi16(p, _mm_set1_epi16(s))
            };
            _mm_add_epi32(half(a.0, b.0, s0), half(a.1, b.1, s1))
        }
    }
    #[inline(always)]
    fn dzero(self) -> __m128i {
        unsafe { _mm_setzero_si128() }
    }
    #[inline(always)]
    fn dadd(self, a: __m128i, b: __m128i) -> __m128i {
        unsafe { _mm_add_epi32(a, b) }
    }
    #[inline(always)]
    fn dsum(self, a: __m128i) -> i32 {
        unsafe {
            let x = _mm_add_epi32(a, _mm_shuffle_epi32::<0b01_00_11_10>(a));
            let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b10_11_00_01>(x));
            _mm_cvtsi128_si32(x)
        }
    }
    #[inline(always)]
    fn fzero(self) -> __m128 {
        unsafe { _mm_setzero_ps() }
    }
    #[inline(always)]
    fn fmadd_d(self, acc: __m128, d: __m128i, scale: f32) -> __m128 {
        unsafe { _mm_add_ps(acc, _mm_mul_ps(_mm_cvtepi32_ps(d), _mm_set1_ps(scale))) }
    }
    #[inline(always)]
    fn fsum(self, a: __m128) -> f32 {
        self.reduce_add(a)
    }
    #[inline(always)]
    fn reduce_add(self, a: __m128) -> f32 {
        unsafe {
            let s = _mm_add_ps(a, _mm_movehl_ps(a, a));
            _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<0b01>(s, s)))
        }
    }
    #[inline(always)]
    fn reduce_max(self, a: __m128) -> f32 {
        unsafe {
            let s = _mm_max_ps(a, _mm_movehl_ps(a, a));
            _mm_cvtss_f32(_mm_max_ss(s, _mm_shuffle_ps::<0b01>(s, s)))
        }
    }
    #[inline(always)]
    fn reduce_min(self, a: __m128) -> f32 {
        unsafe {
            let s = _mm_min_ps(a, _mm_movehl_ps(a, a));
            _mm_cvtss_f32(_mm_min_ss(s, _mm_shuffle_ps::<0b01>(s, s)))
        }
    }
    #[inline(always)]
    fn transpose_tile(self, src: &[f32], lda: usize, dst: &mut [f32], ldb: usize) {
        let r: [__m128; 4] = core::array::from_fn(|i| self.load(&src[i * lda..]));
        // SAFETY: register-only shuffles (SSE2 is baseline on x86-64).
        let (t0, t1, t2, t3) =
            unsafe { (_mm_unpacklo_ps(r[0], r[1]), _mm_unpacklo_ps(r[2], r[3]), _mm_unpackhi_ps(r[0], r[1]), _mm_unpackhi_ps(r[2], r[3])) };
        let out = unsafe { [_mm_movelh_ps(t0, t1), _mm_movehl_ps(t1, t0), _mm_movelh_ps(t2, t3), _mm_movehl_ps(t3, t2)] };
        for (j, v) in out.iter().enumerate() {
            self.store(&mut dst[j * ldb..], *v);
        }
    }
}

// Byte widening for the SSE2 dots (SSE2 has no `maddubs`): bytes to i16 lanes, then `madd`.
// SAFETY (each): register-only SSE2, baseline on x86-64.
#[inline(always)]
fn zext_lo(a: __m128i) -> __m128i {
    unsafe { _mm_unpacklo_epi8(a, _mm_setzero_si128()) }
}
#[inline(always)]
fn zext_hi(a: __m128i) -> __m128i {
    unsafe { _mm_unpackhi_epi8(a, _mm_setzero_si128()) }
}
#[inline(always)]
fn sext_lo(a: __m128i) -> __m128i {
    unsafe { _mm_srai_epi16::<8>(_mm_unpacklo_epi8(a, a)) }
}
#[inline(always)]
fn sext_hi(a: __m128i) -> __m128i {
    unsafe { _mm_srai_epi16::<8>(_mm_unpackhi_epi8(a, a)) }
}
/// `madd(a0, b0) + madd(a1, b1)`: i16 products summed in pairs into i32 lanes.
#[inline(always)]
fn madd16(a0: __m128i, b0: __m128i, a1: __m128i, b1: __m128i) -> __m128i {
    unsafe { _mm_add_epi32(_mm_madd_epi16(a0, b0), _mm_madd_epi16(a1, b1)) }
}
