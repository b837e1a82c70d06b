//! WebAssembly SIMD128: 4 f32 lanes, no FMA. Present when the crate is built with +simd128.

use crate::cpu::simd::Simd;
use core::arch::wasm32::*;

#[derive(Clone, Copy, Debug)]
pub struct Simd128(pub(crate) ());

impl Simd128 {
    #[inline]
    pub fn try_new() -> Option<Self> {
        Some(Simd128(()))
    }
}

// SAFETY (every `unsafe` block below): this module is compiled only with simd128 enabled; full
// loads/stores assert the slice holds 4 elements, partial ones go through a stack buffer.
impl Simd for Simd128 {
    type V = v128;
    type I = v128;
    type M = v128;
    type B = (v128, v128);
    type D = v128;
    type F = v128;
    const LANES: usize = 4;
    const NAME: &'static str = "simd128";

    #[inline(always)]
    fn vectorize<R>(self, f: impl FnOnce() -> R) -> R {
        f()
    }
    #[inline(always)]
    fn splat(self, x: f32) -> v128 {
        f32x4_splat(x)
    }
    #[inline(always)]
    fn load(self, s: &[f32]) -> v128 {
        assert!(s.len() >= 4);
        unsafe { v128_load(s.as_ptr() as *const v128) }
    }
    #[inline(always)]
    fn store(self, s: &mut [f32], v: v128) {
        assert!(s.len() >= 4);
        unsafe { v128_store(s.as_mut_ptr() as *mut v128, v) }
    }
    #[inline(always)]
    fn load_partial(self, s: &[f32], fill: f32) -> v128 {
        let mut buf = [fill; 4];
        let n = s.len().min(4);
        buf[..n].copy_from_slice(&s[..n]);
        self.load(&buf)
    }
    #[inline(always)]
    fn store_partial(self, s: &mut [f32], v: v128) {
        let mut buf = [0.0; 4];
        self.store(&mut buf, v);
        let n = s.len().min(4);
        s[..n].copy_from_slice(&buf[..n]);
    }
    #[inline(always)]
    fn add(self, a: v128, b: v128) -> v128 {
        f32x4_add(a, b)
    }
    #[inline(always)]
    fn sub(self, a: v128, b: v128) -> v128 {
        f32x4_sub(a, b)
    }
    #[inline(always)]
    fn mul(self, a: v128, b: v128) -> v128 {
        f32x4_mul(a, b)
    }
    #[inline(always)]
    fn div(self, a: v128, b: v128) -> v128 {
        f32x4_div(a, b)
    }
    #[inline(always)]
    fn mul_add(self, a: v128, b: v128, c: v128) -> v128 {
        f32x4_add(f32x4_mul(a, b), c)
    }
    #[inline(always)]
    fn min(self, a: v128, b: v128) -> v128 {
        f32x4_pmin(b, a) // pmin(b, a) = a < b ? a : b
    }
    #[inline(always)]
    fn max(self, a: v128, b: v128) -> v128 {
        f32x4_pmax(b, a) // pmax(b, a) = b < a ? a : b
    }
    #[inline(always)]
    fn sqrt(self, a: v128) -> v128 {
        f32x4_sqrt(a)
    }
    #[inline(always)]
    fn and(self, a: v128, b: v128) -> v128 {
        v128_and(a, b)
    }
    #[inline(always)]
    fn or(self, a: v128, b: v128) -> v128 {
        v128_or(a, b)
    }
    #[inline(always)]
    fn xor(self, a: v128, b: v128) -> v128 {
        v128_xor(a, b)
    }
    #[inline(always)]
    fn lt(self, a: v128, b: v128) -> v128 {
        f32x4_lt(a, b)
    }
    #[inline(always)]
    fn le(self, a: v128, b: v128) -> v128 {
        f32x4_le(a, b)
    }
    #[inline(always)]
    fn eq(self, a: v128, b: v128) -> v128 {
        f32x4_eq(a, b)
    }
    #[inline(always)]
    fn is_nan(self, a: v128) -> v128 {
        f32x4_ne(a, a)
    }
    #[inline(always)]
    fn select(self, m: v128, a: v128, b: v128) -> v128 {
        v128_bitselect(a, b, m)
    }
    #[inline(always)]
    fn mask_or(self, a: v128, b: v128) -> v128 {
        v128_or(a, b)
    }
    #[inline(always)]
    fn mask_and(self, a: v128, b: v128) -> v128 {
        v128_and(a, b)
    }
    #[inline(always)]
    fn mask_none(self) -> v128 {
        i32x4_splat(0)
    }
    #[inline(always)]
    fn any(self, m: v128) -> bool {
        v128_any_true(m)
    }
    #[inline(always)]
    fn first_set(self, m: v128) -> Option<usize> {
        let bits = i32x4_bitmask(m);
        (bits != 0).then(|| bits.trailing_zeros() as usize)
    }
    #[inline(always)]
    fn to_bits(self, a: v128) -> v128 {
        a
    }
    #[inline(always)]
    fn from_bits(self, a: v128) -> v128 {
        a
    }
    #[inline(always)]
    fn isplat(self, x: i32) -> v128 {
        i32x4_splat(x)
    }
    #[inline(always)]
    fn iadd(self, a: v128, b: v128) -> v128 {
        i32x4_add(a, b)
    }
    #[inline(always)]
    fn isub(self, a: v128, b: v128) -> v128 {
        i32x4_sub(a, b)
    }
    #[inline(always)]
    fn ishl(self, a: v128, n: u32) -> v128 {
        i32x4_shl(a, n)
    }
    #[inline(always)]
    fn ishr(self, a: v128, n: u32) -> v128 {
        i32x4_shr(a, n)
    }
    #[inline(always)]
    fn i_to_f(self, a: v128) -> v128 {
        f32x4_convert_i32x4(a)
    }
    #[inline(always)]
    fn round(self, a: v128) -> v128 {
        f32x4_nearest(a)
    }
    #[inline(always)]
    fn bload(self, s: &[u8]) -> (v128, v128) {
        assert!(s.len() >= 32);
        unsafe { (v128_load(s.as_ptr().cast()), v128_load(s.as_ptr().add(16).cast())) }
    }
    #[inline(always)]
    fn bstore(self, v: (v128, v128), out: &mut [u8]) {
        assert!(out.len() >= 32);
        unsafe {
            v128_store(out.as_mut_ptr().cast(), v.0);
            v128_store(out.as_mut_ptr().add(16).cast(), v.1);
        }
    }
    #[inline(always)]
    fn bload_nib(self, s: &[u8]) -> (v128, v128) {
        assert!(s.len() >= 16);
        let x = unsafe { v128_load(s.as_ptr().cast()) };
        (v128_and(x, u8x16_splat(15)), u8x16_shr(x, 4))
    }
    #[inline(always)]
    fn bsplat(self, x: u8) -> (v128, v128) {
        (u8x16_splat(x), u8x16_splat(x))
    }
    #[inline(always)]
    fn band(self, a: (v128, v128), b: (v128, v128)) -> (v128, v128) {
        (v128_and(a.0, b.0), v128_and(a.1, b.1))
    }
    #[inline(always)]
    fn bor(self, a: (v128, v128), b: (v128, v128)) -> (v128, v128) {
        (v128_or(a.0, b.0), v128_or(a.1, b.1))
    }
    #[inline(always)]
    fn bsub(self, a: (v128, v128), b: (v128, v128)) -> (v128, v128) {
        (i8x16_sub(a.0, b.0), i8x16_sub(a.1, b.1))
    }
    #[inline(always)]
    fn bshr(self, a: (v128, v128), n: u32) -> (v128, v128) {
        (u8x16_shr(a.0, n), u8x16_shr(a.1, n))
    }
    #[inline(always)]
    fn bshl(self, a: (v128, v128), n: u32) -> (v128, v128) {
        (i8x16_shl(a.0, n), i8x16_shl(a.1, n))
    }
    #[inline(always)]
    fn dot_u8i8(self, a: (v128, v128), b: (v128, v128)) -> v128 {
        // `a` ≤ 127 reads the same as i8.
        self.dot_i8i8(a, b)
    }
    #[inline(always)]
    fn dot_i8i8(self, a: (v128, v128), b: (v128, v128)) -> v128 {
        i32x4_add(i32x4_extadd_pairwise_i16x8(prod16(a.0, b.0)), i32x4_extadd_pairwise_i16x8(prod16(a.1, b.1)))
    }
    #[inline(always)]
    fn dot_u8i8_s2(self, a: (v128, v128), b: (v128, v128), s0: i16, s1: i16) -> v128 {
        i32x4_add(i32x4_dot_i16x8(prod16(a.0, b.0), i16x8_splat(s0)), i32x4_dot_i16x8(prod16(a.1, b.1), i16x8_splat(s1)))
    }
    #[inline(always)]
    fn dzero(self) -> v128 {
        i32x4_splat(0)
    }
    #[inline(always)]
    fn dadd(self, a: v128, b: v128) -> v128 {
        i32x4_add(a, b)
    }
    #[inline(always)]
    fn dsum(self, a: v128) -> i32 {
        i32x4_extract_lane::<0>(a)
            .wrapping_add(i32x4_extract_lane::<1>(a))
            .wrapping_add(i32x4_extract_lane::<2>(a))
            .wrapping_add(i32x4_extract_lane::<3>(a))
    }
    #[inline(always)]
    fn fzero(self) -> v128 {
        f32x4_splat(0.0)
    }
    #[inline(always)]
    fn fmadd_d(self, acc: v128, d: v128, scale: f32) -> v128 {
        f32x4_add(acc, f32x4_mul(f32x4_convert_i32x4(d), f32x4_splat(scale)))
    }
    #[inline(always)]
    fn fsum(self, a: v128) -> f32 {
        self.reduce_add(a)
    }
    #[inline(always)]
    fn reduce_add(self, a: v128) -> f32 {
        (f32x4_extract_lane::<0>(a) + f32x4_extract_lane::<1>(a)) + (f32x4_extract_lane::<2>(a) + f32x4_extract_lane::<3>(a))
    }
    #[inline(always)]
    fn reduce_max(self, a: v128) -> f32 {
        let h = self.max(a, i32x4_shuffle::<2, 3, 0, 1>(a, a));
        let h = self.max(h, i32x4_shuffle::<1, 0, 3, 2>(h, h));
        f32x4_extract_lane::<0>(h)
    }
    #[inline(always)]
    fn reduce_min(self, a: v128) -> f32 {
        let h = self.min(a, i32x4_shuffle::<2, 3, 0, 1>(a, a));
        let h = self.min(h, i32x4_shuffle::<1, 0, 3, 2>(h, h));
        f32x4_extract_lane::<0>(h)
    }
}

/// The 16 i8 products of `a` and `b` (exact in i16), pairs summed: 8 i16 lanes. The pair sums
/// fit too: |2 · 127 · 128| < 2^15.
#[inline(always)]
fn prod16(a: v128, b: v128) -> v128 {
    i16x8_add(i16x8_extmul_low_i8x16(a, b), i16x8_extmul_high_i8x16(a, b))
}
