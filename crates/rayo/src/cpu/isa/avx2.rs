//! AVX2 + FMA: 8 f32 lanes, masks as all-ones lanes.

use crate::cpu::simd::Simd;
use core::arch::x86_64::*;

/// Proof that the CPU has AVX2, FMA and F16C (every AVX2 CPU made has all three): only
/// `try_new` makes one.
#[derive(Clone, Copy, Debug)]
pub struct Avx2(());

impl Avx2 {
    #[inline]
    pub fn try_new() -> Option<Self> {
        let ok = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") && std::is_x86_feature_detected!("f16c");
        ok.then_some(Avx2(()))
    }
}

// SAFETY (every `unsafe` block below): an `Avx2` value exists only after `try_new` saw avx2,
// fma and f16c on this CPU; full loads/stores assert the slice holds 8 elements, partial ones go through
// a stack buffer.
impl Simd for Avx2 {
    type V = __m256;
    type I = __m256i;
    type M = __m256;
    type B = __m256i;
    type D = __m256i;
    type F = __m256;
    const LANES: usize = 8;
    const NAME: &'static str = "avx2";

    #[inline(always)]
    fn vectorize<R>(self, f: impl FnOnce() -> R) -> R {
        #[target_feature(enable = "avx2,fma,f16c")]
        unsafe fn run<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        // SAFETY: the token proves the features `run` is compiled for.
        unsafe { run(f) }
    }
    #[inline(always)]
    fn splat(self, x: f32) -> __m256 {
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    fn load(self, s: &[f32]) -> __m256 {
        assert!(s.len() >= 8);
        unsafe { _mm256_loadu_ps(s.as_ptr()) }
    }
    #[inline(always)]
    fn store(self, s: &mut [f32], v: __m256) {
        assert!(s.len() >= 8);
        unsafe { _mm256_storeu_ps(s.as_mut_ptr(), v) }
    }
    #[inline(always)]
    fn load_partial(self, s: &[f32], fill: f32) -> __m256 {
        let mut buf = [fill; 8];
        let n = s.len().min(8);
        buf[..n].copy_from_slice(&s[..n]);
        self.load(&buf)
    }
    #[inline(always)]
    fn store_partial(self, s: &mut [f32], v: __m256) {
        let mut buf = [0.0; 8];
        self.store(&mut buf, v);
        let n = s.len().min(8);
        s[..n].copy_from_slice(&buf[..n]);
    }
    #[inline(always)]
    fn add(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_mul_ps(a, b) }
    }
    #[inline(always)]
    fn div(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_div_ps(a, b) }
    }
    #[inline(always)]
    fn mul_add(self, a: __m256, b: __m256, c: __m256) -> __m256 {
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn min(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_min_ps(a, b) }
    }
    #[inline(always)]
    fn max(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_max_ps(a, b) }
    }
    #[inline(always)]
    fn sqrt(self, a: __m256) -> __m256 {
        unsafe { _mm256_sqrt_ps(a) }
    }
    #[inline(always)]
    fn and(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_and_ps(a, b) }
    }
    #[inline(always)]
    fn or(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_or_ps(a, b) }
    }
    #[inline(always)]
    fn xor(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_xor_ps(a, b) }
    }
    #[inline(always)]
    fn lt(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_LT_OQ>(a, b) }
    }
    #[inline(always)]
    fn le(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_LE_OQ>(a, b) }
    }
    #[inline(always)]
    fn eq(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_EQ_OQ>(a, b) }
    }
    #[inline(always)]
    fn is_nan(self, a: __m256) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_UNORD_Q>(a, a) }
    }
    #[inline(always)]
    fn either_nan(self, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_cmp_ps::<_CMP_UNORD_Q>(a, b) }
    }
    #[inline(always)]
    fn select(self, m: __m256, a: __m256, b: __m256) -> __m256 {
        unsafe { _mm256_blendv_ps(b, a, m) }
    }
    #[inline(always)]
    fn mask_or(self, a: __m256, b: __m256) -> __m256 {
        self.or(a, b)
    }
    #[inline(always)]
    fn mask_and(self, a: __m256, b: __m256) -> __m256 {
        self.and(a, b)
    }
    #[inline(always)]
    fn mask_none(self) -> __m256 {
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    fn any(self, m: __m256) -> bool {
        unsafe { _mm256_movemask_ps(m) != 0 }
    }
    #[inline(always)]
    fn first_set(self, m: __m256) -> Option<usize> {
        let bits = unsafe { _mm256_movemask_ps(m) };
        (bits != 0).then(|| bits.trailing_zeros() as usize)
    }
    #[inline(always)]
    fn to_bits(self, a: __m256) -> __m256i {
        unsafe { _mm256_castps_si256(a) }
    }
    #[inline(always)]
    fn from_bits(self, a: __m256i) -> __m256 {
        unsafe { _mm256_castsi256_ps(a) }
    }
    #[inline(always)]
    fn isplat(self, x: i32) -> __m256i {
        unsafe { _mm256_set1_epi32(x) }
    }
    #[inline(always)]
    fn iadd(self, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_add_epi32(a, b) }
    }
    #[inline(always)]
    fn isub(self, a: __m256i, b: __m256i) -> __m256i {
        unsafe { _mm256_sub_epi32(a, b) }
    }
    #[inline(always)]
    fn ishl(self, a: __m256i, n: u32) -> __m256i {
        unsafe { _mm256_sll_epi32(a, _mm_cvtsi32_si128(n as i32)) }
    }
    #[inline(always)]
    fn ishr(self, a: __m256i, n: u32) -> __m256i {
        unsafe { _mm256_sra_epi32(a, _mm_cvtsi32_si128(n as i32)) }
    }
    #[inline(always)]
    fn load_i8(self, s: &[i8]) -> __m256 {
        assert!(s.len() >= 8);
        unsafe { _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(s.as_ptr().cast()))) }
    }
    #[inline(always)]
    fn store_i8(self, v: __m256, s: &mut [i8]) {
        assert!(s.len() >= 8);
        unsafe {
            // i32 → i16 → i8 within each 128-bit half, then the halves' first 4 bytes joined.
            let w = _mm256_cvtps_epi32(v);
            let b = _mm256_packs_epi16(_mm256_packs_epi32(w, w), _mm256_setzero_si256());
            let lo = _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b));
            _mm_storel_epi64(s.as_mut_ptr().cast(), lo)
        }
    }
    #[inline(always)]
    fn i_to_f(self, a: __m256i) -> __m256 {
        unsafe { _mm256_cvtepi32_ps(a) }
    }
    #[inline(always)]
    fn round(self, a: __m256) -> __m256 {
        unsafe { _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a) }
    }
    super::bytes256::byte_lanes_256!();
    #[inline(always)]
    fn bbits(self, bits: u32) -> __m256i {
        // SAFETY: register-only; the token proves AVX2.
        unsafe { super::bytes256::bits(bits) }
    }
    #[inline(always)]
    fn rotate_lanes(self, v: __m256, k: usize) -> __m256 {
        // vpermps: lane i takes lane (i − k) & 7.
        // SAFETY: register-only; the token proves avx2.
        unsafe {
            let idx =
                _mm256_and_si256(_mm256_sub_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(k as i32)), _mm256_set1_epi32(7));
            _mm256_permutevar8x32_ps(v, idx)
        }
    }
    #[inline(always)]
    fn f16_to_f32(self, h: u16) -> f32 {
        // One `vcvtph2ps` (the default is ~8 scalar ops, per block scale of every format).
        // SAFETY: register-only; the token proves F16C.
        unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32))) }
    }
    #[inline(always)]
    fn prefetch(self, p: *const u8) {
        // SAFETY: a prefetch reads nothing architecturally and never faults, at any address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    }
    #[inline(always)]
    fn dot_u8i8(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: register-only; the token proves AVX2.
        unsafe { super::bytes256::dot_u8i8(a, b) }
    }
    #[inline(always)]
    fn dot_i8i8(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: register-only; the token proves AVX2.
        unsafe {
            let (ua, sb) = super::bytes256::sign_trick(a, b);
            super::bytes256::dot_u8i8(ua, sb)
        }
    }
    #[inline(always)]
    fn reduce_add(self, a: __m256) -> f32 {
        unsafe {
            let s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<0b01>(s, s)))
        }
    }
    #[inline(always)]
    fn reduce_max(self, a: __m256) -> f32 {
        unsafe {
            let s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
            let s = _mm_max_ps(s, _mm_movehl_ps(s, s));
            _mm_cvtss_f32(_mm_max_ss(s, _mm_shuffle_ps::<0b01>(s, s)))
        }
    }
    #[inline(always)]
    fn reduce_min(self, a: __m256) -> f32 {
        unsafe {
            let s = _mm_min_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
            let s = _mm_min_ps(s, _mm_movehl_ps(s, s));
            _mm_cvtss_f32(_mm_min_ss(s, _mm_shuffle_ps::<0b01>(s, s)))
        }
    }
    #[inline(always)]
    fn transpose_tile(self, src: &[f32], lda: usize, dst: &mut [f32], ldb: usize) {
        let r: [__m256; 8] = core::array::from_fn(|i| self.load(&src[i * lda..]));
        let mut t = r;
        // SAFETY (each block): register-only shuffles; the token proves avx2.
        for p in 0..4 {
            t[2 * p] = unsafe { _mm256_unpacklo_ps(r[2 * p], r[2 * p + 1]) };
            t[2 * p + 1] = unsafe { _mm256_unpackhi_ps(r[2 * p], r[2 * p + 1]) };
        }
        let mut u = t;
        for q in [0, 4] {
            u[q] = unsafe { _mm256_shuffle_ps::<0x44>(t[q], t[q + 2]) };
            u[q + 1] = unsafe { _mm256_shuffle_ps::<0xEE>(t[q], t[q + 2]) };
            u[q + 2] = unsafe { _mm256_shuffle_ps::<0x44>(t[q + 1], t[q + 3]) };
            u[q + 3] = unsafe { _mm256_shuffle_ps::<0xEE>(t[q + 1], t[q + 3]) };
        }
        for j in 0..4 {
            let lo = unsafe { _mm256_permute2f128_ps::<0x20>(u[j], u[j + 4]) };
            let hi = unsafe { _mm256_permute2f128_ps::<0x31>(u[j], u[j + 4]) };
            self.store(&mut dst[j * ldb..], lo);
            self.store(&mut dst[(j + 4) * ldb..], hi);
        }
    }
}
