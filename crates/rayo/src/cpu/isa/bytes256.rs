//! The 256-bit byte lanes AVX2 and AVX-512 share (`Simd::B` and its dots on x86-64): one copy
//! of llama.cpp's AVX2 methods, called by both tokens.
//!
//! Every function is `unsafe`: the caller must have proved AVX2 (an `Avx2` or `Avx512` token)
//! and run inside that token's `vectorize`, so the intrinsics inline.

use core::arch::x86_64::*;

/// Loads `s[..32]`.
#[inline(always)]
pub unsafe fn load(s: &[u8]) -> __m256i {
    assert!(s.len() >= 32);
    // SAFETY: 32 bytes are in the slice (asserted); AVX2 per the caller's contract.
    unsafe { _mm256_loadu_si256(s.as_ptr().cast()) }
}

/// Stores `v` into `out[..32]`.
#[inline(always)]
pub unsafe fn store(v: __m256i, out: &mut [u8]) {
    assert!(out.len() >= 32);
    // SAFETY: 32 bytes are in the slice (asserted); AVX2 per the caller's contract.
    unsafe { _mm256_storeu_si256(out.as_mut_ptr().cast(), v) }
}

/// 16 bytes as 32 nibbles: low nibbles in lanes 0..16, high nibbles in lanes 16..32.
#[inline(always)]
pub unsafe fn load_nib(s: &[u8]) -> __m256i {
    assert!(s.len() >= 16);
    // SAFETY: 16 bytes are in the slice (asserted); AVX2 per the caller's contract.
    unsafe {
        let x = _mm_loadu_si128(s.as_ptr().cast());
        let both = _mm256_set_m128i(_mm_srli_epi16::<4>(x), x);
        _mm256_and_si256(both, _mm256_set1_epi8(15))
    }
}

#[inline(always)]
pub unsafe fn shr(a: __m256i, n: u32) -> __m256i {
    // SAFETY: register-only; AVX2 per the caller's contract.
    unsafe { _mm256_and_si256(_mm256_srl_epi16(a, _mm_cvtsi32_si128(n as i32)), _mm256_set1_epi8((0xFFu8 >> n) as i8)) }
}

#[inline(always)]
pub unsafe fn shl(a: __m256i, n: u32) -> __m256i {
    // SAFETY: register-only; AVX2 per the caller's contract.
    unsafe { _mm256_and_si256(_mm256_sll_epi16(a, _mm_cvtsi32_si128(n as i32)), _mm256_set1_epi8((0xFFu8 << n) as i8)) }
}

/// llama.cpp's `bytes_from_bits_32`: byte j is 0xFF where bit j is set.
#[inline(always)]
pub unsafe fn bits(x: u32) -> __m256i {
    // SAFETY: register-only; AVX2 per the caller's contract.
    unsafe {
        let shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
        let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x as i32), shuf);
        let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
        _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
    }
}

/// `maddubs` then `madd` with ones: u8 (≤ 127) × i8, four products per i32 lane.
#[inline(always)]
pub unsafe fn dot_u8i8(a: __m256i, b: __m256i) -> __m256i {
    // SAFETY: register-only; AVX2 per the caller's contract.
    unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1)) }
}

/// llama.cpp's sign trick: `|a| · (b · sign(a))` makes the left side unsigned.
#[inline(always)]
pub unsafe fn sign_trick(a: __m256i, b: __m256i) -> (__m256i, __m256i) {
    // SAFETY: register-only; AVX2 per the caller's contract.
    unsafe { (_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a)) }
}

/// The products' pair sums (i16) times `s0` in the low 16 bytes, `s1` in the high.
#[inline(always)]
pub unsafe fn dot_u8i8_s2(a: __m256i, b: __m256i, s0: i16, s1: i16) -> __m256i {
    // SAFETY: register-only; AVX2 per the caller's contract.
    unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set_m128i(_mm_set1_epi16(s1), _mm_set1_epi16(s0))) }
}

/// The lane sums of eight vectors: three rounds of `hadd` and one of the 128-bit halves.
#[inline(always)]
pub unsafe fn hsum8(v: &[__m256i; 8]) -> [i32; 8] {
    // SAFETY: register-only, and a store into a local array of 8 i32; AVX2 per the caller's
    // contract.
    unsafe {
        let ab = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        let cd = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
        // ab = [v0..v3 low-half sums | v0..v3 high-half sums], cd the same for v4..v7.
        let sum = _mm256_add_epi32(_mm256_permute2x128_si256::<0x20>(ab, cd), _mm256_permute2x128_si256::<0x31>(ab, cd));
        let mut out = [0i32; 8];
        _mm256_storeu_si256(out.as_mut_ptr().cast(), sum);
        out
    }
}

#[inline(always)]
pub unsafe fn hsum_i32(a: __m256i) -> i32 {
    // SAFETY: register-only; AVX2 per the caller's contract.
    unsafe {
        let x = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256::<1>(a));
        let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b01_00_11_10>(x));
        let x = _mm_add_epi32(x, _mm_shuffle_epi32::<0b10_11_00_01>(x));
        _mm_cvtsi128_si32(x)
    }
}

#[inline(always)]
pub unsafe fn hsum_f32(a: __m256) -> f32 {
    // SAFETY: register-only; AVX2 per the caller's contract.
    unsafe {
        let x = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps::<1>(a));
        let x = _mm_add_ps(x, _mm_movehl_ps(x, x));
        let x = _mm_add_ss(x, _mm_shuffle_ps::<0b01>(x, x));
        _mm_cvtss_f32(x)
    }
}

/// The byte-lane methods of `Simd` for a token whose `B`/`D`/`F` are `__m256i`/`__m256i`/`__m256`
/// (all but `dot_u8i8`/`dot_i8i8`, which AVX-512 overrides with VNNI).
macro_rules! byte_lanes_256 {
    () => {
        #[inline(always)]
        fn bload(self, s: &[u8]) -> __m256i {
            // SAFETY: the token proves AVX2; the load asserts its length.
            unsafe { super::bytes256::load(s) }
        }
        #[inline(always)]
        fn bstore(self, v: __m256i, out: &mut [u8]) {
            // SAFETY: the token proves AVX2; the store asserts its length.
            unsafe { super::bytes256::store(v, out) }
        }
        #[inline(always)]
        fn bload_nib(self, s: &[u8]) -> __m256i {
            // SAFETY: the token proves AVX2; the load asserts its length.
            unsafe { super::bytes256::load_nib(s) }
        }
        #[inline(always)]
        fn bsplat(self, x: u8) -> __m256i {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { _mm256_set1_epi8(x as i8) }
        }
        #[inline(always)]
        fn band(self, a: __m256i, b: __m256i) -> __m256i {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { _mm256_and_si256(a, b) }
        }
        #[inline(always)]
        fn bor(self, a: __m256i, b: __m256i) -> __m256i {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { _mm256_or_si256(a, b) }
        }
        #[inline(always)]
        fn bsub(self, a: __m256i, b: __m256i) -> __m256i {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { _mm256_sub_epi8(a, b) }
        }
        #[inline(always)]
        fn bshr(self, a: __m256i, n: u32) -> __m256i {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { super::bytes256::shr(a, n) }
        }
        #[inline(always)]
        fn bshl(self, a: __m256i, n: u32) -> __m256i {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { super::bytes256::shl(a, n) }
        }
        #[inline(always)]
        fn dot_u8i8_s2(self, a: __m256i, b: __m256i, s0: i16, s1: i16) -> __m256i {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { super::bytes256::dot_u8i8_s2(a, b, s0, s1) }
        }
        #[inline(always)]
        fn dzero(self) -> __m256i {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { _mm256_setzero_si256() }
        }
        #[inline(always)]
        fn dadd(self, a: __m256i, b: __m256i) -> __m256i {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { _mm256_add_epi32(a, b) }
        }
        #[inline(always)]
        fn dsum8(self, v: &[__m256i; 8]) -> [i32; 8] {
            // SAFETY: register-only and a store into a local array; the token proves AVX2.
            unsafe { super::bytes256::hsum8(v) }
        }
        #[inline(always)]
        fn dsum(self, a: __m256i) -> i32 {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { super::bytes256::hsum_i32(a) }
        }
        #[inline(always)]
        fn fzero(self) -> __m256 {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { _mm256_setzero_ps() }
        }
        #[inline(always)]
        fn fmadd_d(self, acc: __m256, d: __m256i, scale: f32) -> __m256 {
            // SAFETY: register-only; the token proves AVX2 and FMA.
            unsafe { _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(scale), acc) }
        }
        #[inline(always)]
        fn fsum(self, a: __m256) -> f32 {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { super::bytes256::hsum_f32(a) }
        }
    };
}
pub(crate) use byte_lanes_256;
