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
