//! The portable fallback: one lane, plain Rust. Also the semantics every other ISA matches.

use crate::cpu::simd::Simd;

#[derive(Clone, Copy, Debug, Default)]
pub struct Scalar;

impl Simd for Scalar {
    type V = f32;
    type I = i32;
    type M = bool;
    type B = [u8; 32];
    type D = i32;
    type F = f32;
    const LANES: usize = 1;
    const NAME: &'static str = "scalar";

    #[inline(always)]
    fn vectorize<R>(self, f: impl FnOnce() -> R) -> R {
        f()
    }
    #[inline(always)]
    fn splat(self, x: f32) -> f32 {
        x
    }
    #[inline(always)]
    fn load(self, s: &[f32]) -> f32 {
        s[0]
    }
    #[inline(always)]
    fn store(self, s: &mut [f32], v: f32) {
        s[0] = v;
    }
    #[inline(always)]
    fn load_partial(self, s: &[f32], fill: f32) -> f32 {
        s.first().copied().unwrap_or(fill)
    }
    #[inline(always)]
    fn store_partial(self, s: &mut [f32], v: f32) {
        if let Some(x) = s.first_mut() {
            *x = v;
        }
    }
    #[inline(always)]
    fn add(self, a: f32, b: f32) -> f32 {
        a + b
    }
    #[inline(always)]
    fn sub(self, a: f32, b: f32) -> f32 {
        a - b
    }
    #[inline(always)]
    fn mul(self, a: f32, b: f32) -> f32 {
        a * b
    }
    #[inline(always)]
    fn div(self, a: f32, b: f32) -> f32 {
        a / b
    }
    #[inline(always)]
    fn mul_add(self, a: f32, b: f32, c: f32) -> f32 {
        // Not fused: a software fma would be far slower than the error it saves.
        a * b + c
    }
    #[inline(always)]
    fn min(self, a: f32, b: f32) -> f32 {
        if a < b {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    fn max(self, a: f32, b: f32) -> f32 {
        if a > b {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    fn sqrt(self, a: f32) -> f32 {
        a.sqrt()
    }
    #[inline(always)]
    fn and(self, a: f32, b: f32) -> f32 {
        f32::from_bits(a.to_bits() & b.to_bits())
    }
    #[inline(always)]
    fn or(self, a: f32, b: f32) -> f32 {
        f32::from_bits(a.to_bits() | b.to_bits())
    }
    #[inline(always)]
    fn xor(self, a: f32, b: f32) -> f32 {
        f32::from_bits(a.to_bits() ^ b.to_bits())
    }
    #[inline(always)]
    fn lt(self, a: f32, b: f32) -> bool {
        a < b
    }
    #[inline(always)]
    fn le(self, a: f32, b: f32) -> bool {
        a <= b
    }
    #[inline(always)]
    fn eq(self, a: f32, b: f32) -> bool {
        a == b
    }
    #[inline(always)]
    fn is_nan(self, a: f32) -> bool {
        a.is_nan()
    }
    #[inline(always)]
    fn select(self, m: bool, a: f32, b: f32) -> f32 {
        if m {
            a
        } else {
            b
        }
    }
    #[inline(always)]
    fn mask_or(self, a: bool, b: bool) -> bool {
        a | b
    }
    #[inline(always)]
    fn mask_and(self, a: bool, b: bool) -> bool {
        a & b
    }
    #[inline(always)]
    fn mask_none(self) -> bool {
        false
    }
    #[inline(always)]
    fn any(self, m: bool) -> bool {
        m
    }
    #[inline(always)]
    fn first_set(self, m: bool) -> Option<usize> {
        m.then_some(0)
    }
    #[inline(always)]
    fn to_bits(self, a: f32) -> i32 {
        a.to_bits() as i32
    }
    #[inline(always)]
    fn from_bits(self, a: i32) -> f32 {
        f32::from_bits(a as u32)
    }
    #[inline(always)]
    fn isplat(self, x: i32) -> i32 {
        x
    }
    #[inline(always)]
    fn iadd(self, a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }
    #[inline(always)]
    fn isub(self, a: i32, b: i32) -> i32 {
        a.wrapping_sub(b)
    }
    #[inline(always)]
    fn ishl(self, a: i32, n: u32) -> i32 {
        a.wrapping_shl(n)
    }
    #[inline(always)]
    fn ishr(self, a: i32, n: u32) -> i32 {
        a >> n
    }
    #[inline(always)]
    fn i_to_f(self, a: i32) -> f32 {
        a as f32
    }
    #[inline(always)]
    fn bload(self, s: &[u8]) -> [u8; 32] {
        s[..32].try_into().unwrap()
    }
    #[inline(always)]
    fn bstore(self, v: [u8; 32], out: &mut [u8]) {
        out[..32].copy_from_slice(&v);
    }
    #[inline(always)]
    fn bload_nib(self, s: &[u8]) -> [u8; 32] {
        let s = &s[..16];
        core::array::from_fn(|i| if i < 16 { s[i] & 15 } else { s[i - 16] >> 4 })
    }
    #[inline(always)]
    fn bsplat(self, x: u8) -> [u8; 32] {
        [x; 32]
    }
    #[inline(always)]
    fn band(self, a: [u8; 32], b: [u8; 32]) -> [u8; 32] {
        core::array::from_fn(|i| a[i] & b[i])
    }
    #[inline(always)]
    fn bor(self, a: [u8; 32], b: [u8; 32]) -> [u8; 32] {
        core::array::from_fn(|i| a[i] | b[i])
    }
    #[inline(always)]
    fn bsub(self, a: [u8; 32], b: [u8; 32]) -> [u8; 32] {
        core::array::from_fn(|i| a[i].wrapping_sub(b[i]))
    }
    #[inline(always)]
    fn bshr(self, a: [u8; 32], n: u32) -> [u8; 32] {
        a.map(|x| x >> n)
    }
    #[inline(always)]
    fn bshl(self, a: [u8; 32], n: u32) -> [u8; 32] {
        a.map(|x| x << n)
    }
    #[inline(always)]
    fn dot_u8i8(self, a: [u8; 32], b: [u8; 32]) -> i32 {
        a.iter().zip(&b).map(|(&x, &y)| x as i32 * y as i8 as i32).sum()
    }
    #[inline(always)]
    fn dot_i8i8(self, a: [u8; 32], b: [u8; 32]) -> i32 {
        a.iter().zip(&b).map(|(&x, &y)| x as i8 as i32 * y as i8 as i32).sum()
    }
    #[inline(always)]
    fn dot_u8i8_s2(self, a: [u8; 32], b: [u8; 32], s0: i16, s1: i16) -> i32 {
        let half = |r: core::ops::Range<usize>| a[r.clone()].iter().zip(&b[r]).map(|(&x, &y)| x as i32 * y as i8 as i32).sum::<i32>();
        s0 as i32 * half(0..16) + s1 as i32 * half(16..32)
    }
    #[inline(always)]
    fn dzero(self) -> i32 {
        0
    }
    #[inline(always)]
    fn dadd(self, a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }
    #[inline(always)]
    fn dsum(self, a: i32) -> i32 {
        a
    }
    #[inline(always)]
    fn fzero(self) -> f32 {
        0.0
    }
    #[inline(always)]
    fn fmadd_d(self, acc: f32, d: i32, scale: f32) -> f32 {
        acc + scale * d as f32
    }
    #[inline(always)]
    fn fsum(self, a: f32) -> f32 {
        a
    }
    #[inline(always)]
    fn reduce_add(self, a: f32) -> f32 {
        a
    }
    #[inline(always)]
    fn reduce_max(self, a: f32) -> f32 {
        a
    }
    #[inline(always)]
    fn reduce_min(self, a: f32) -> f32 {
        a
    }
}
