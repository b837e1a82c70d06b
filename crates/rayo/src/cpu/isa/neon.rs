//! NEON (aarch64): 4 f32 lanes with FMA. Baseline on every aarch64 CPU. `Neon<true>` also has
//! the dot-product extension (`sdot`, Armv8.2's dotprod: every Apple M, Graviton 2 and later,
//! Cortex-A76 and later), which only the quantized byte dots use.

use crate::cpu::simd::Simd;
use core::arch::aarch64::*;

#[derive(Clone, Copy, Debug)]
pub struct Neon<const DOT: bool = false>(pub(crate) ());

impl Neon {
    #[inline]
    pub fn try_new() -> Option<Self> {
        Some(Neon(()))
    }

    /// The token with the dot-product extension, where the CPU has it (`sdot`).
    #[inline]
    pub fn try_new_dot() -> Option<Neon<true>> {
        std::arch::is_aarch64_feature_detected!("dotprod").then_some(Neon(()))
    }
}

// SAFETY (every `unsafe` block below): NEON is part of the aarch64 baseline; full loads/stores
// assert the slice holds 4 elements, partial ones go through a stack buffer. `sdot` runs only in
// a `Neon<true>`, which `try_new_dot` makes only where the CPU has dotprod.
impl<const DOT: bool> Simd for Neon<DOT> {
    type V = float32x4_t;
    type I = int32x4_t;
    type M = uint32x4_t;
    type B = (int8x16_t, int8x16_t);
    type D = int32x4_t;
    type F = float32x4_t;
    const LANES: usize = 4;
    const NAME: &'static str = "neon";

    #[inline(always)]
    fn vectorize<R>(self, f: impl FnOnce() -> R) -> R {
        #[target_feature(enable = "dotprod")]
        unsafe fn run_dot<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        if DOT {
            // SAFETY: a `Neon<true>` exists only where the CPU has dotprod.
            unsafe { run_dot(f) }
        } else {
            f()
        }
    }
    #[inline(always)]
    fn splat(self, x: f32) -> float32x4_t {
        unsafe { vdupq_n_f32(x) }
    }
    #[inline(always)]
    fn load(self, s: &[f32]) -> float32x4_t {
        assert!(s.len() >= 4);
        unsafe { vld1q_f32(s.as_ptr()) }
    }
    #[inline(always)]
    fn store(self, s: &mut [f32], v: float32x4_t) {
        assert!(s.len() >= 4);
        unsafe { vst1q_f32(s.as_mut_ptr(), v) }
    }
    #[inline(always)]
    fn load_partial(self, s: &[f32], fill: f32) -> float32x4_t {
        let mut buf = [fill; 4];
        let n = s.len().min(4);
        buf[..n].copy_from_slice(&s[..n]);
        self.load(&buf)
    }
    #[inline(always)]
    fn store_partial(self, s: &mut [f32], v: float32x4_t) {
        let mut buf = [0.0; 4];
        self.store(&mut buf, v);
        let n = s.len().min(4);
        s[..n].copy_from_slice(&buf[..n]);
    }
    #[inline(always)]
    fn add(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vaddq_f32(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vsubq_f32(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vmulq_f32(a, b) }
    }
    #[inline(always)]
    fn div(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vdivq_f32(a, b) }
    }
    #[inline(always)]
    fn mul_add(self, a: float32x4_t, b: float32x4_t, c: float32x4_t) -> float32x4_t {
        unsafe { vfmaq_f32(c, a, b) }
    }
    #[inline(always)]
    fn min(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        // a < b ? a : b (vminq would propagate NaN from either side)
        unsafe { vbslq_f32(vcltq_f32(a, b), a, b) }
    }
    #[inline(always)]
    fn max(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vbslq_f32(vcgtq_f32(a, b), a, b) }
    }
    #[inline(always)]
    fn sqrt(self, a: float32x4_t) -> float32x4_t {
        unsafe { vsqrtq_f32(a) }
    }
    #[inline(always)]
    fn and(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b))) }
    }
    #[inline(always)]
    fn or(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b))) }
    }
    #[inline(always)]
    fn xor(self, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vreinterpretq_f32_u32(veorq_u32(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b))) }
    }
    #[inline(always)]
    fn lt(self, a: float32x4_t, b: float32x4_t) -> uint32x4_t {
        unsafe { vcltq_f32(a, b) }
    }
    #[inline(always)]
    fn le(self, a: float32x4_t, b: float32x4_t) -> uint32x4_t {
        unsafe { vcleq_f32(a, b) }
    }
    #[inline(always)]
    fn eq(self, a: float32x4_t, b: float32x4_t) -> uint32x4_t {
        unsafe { vceqq_f32(a, b) }
    }
    #[inline(always)]
    fn is_nan(self, a: float32x4_t) -> uint32x4_t {
        unsafe { vmvnq_u32(vceqq_f32(a, a)) }
    }
    #[inline(always)]
    fn select(self, m: uint32x4_t, a: float32x4_t, b: float32x4_t) -> float32x4_t {
        unsafe { vbslq_f32(m, a, b) }
    }
    #[inline(always)]
    fn mask_or(self, a: uint32x4_t, b: uint32x4_t) -> uint32x4_t {
        unsafe { vorrq_u32(a, b) }
    }
    #[inline(always)]
    fn mask_and(self, a: uint32x4_t, b: uint32x4_t) -> uint32x4_t {
        unsafe { vandq_u32(a, b) }
    }
    #[inline(always)]
    fn mask_none(self) -> uint32x4_t {
        unsafe { vdupq_n_u32(0) }
    }
    #[inline(always)]
    fn any(self, m: uint32x4_t) -> bool {
        unsafe { vmaxvq_u32(m) != 0 }
    }
    #[inline(always)]
    fn first_set(self, m: uint32x4_t) -> Option<usize> {
        let mut lanes = [0u32; 4];
        unsafe { vst1q_u32(lanes.as_mut_ptr(), m) };
        lanes.iter().position(|&l| l != 0)
    }
    #[inline(always)]
    fn to_bits(self, a: float32x4_t) -> int32x4_t {
        unsafe { vreinterpretq_s32_f32(a) }
    }
    #[inline(always)]
    fn from_bits(self, a: int32x4_t) -> float32x4_t {
        unsafe { vreinterpretq_f32_s32(a) }
    }
    #[inline(always)]
    fn isplat(self, x: i32) -> int32x4_t {
        unsafe { vdupq_n_s32(x) }
    }
    #[inline(always)]
    fn iadd(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        unsafe { vaddq_s32(a, b) }
    }
    #[inline(always)]
    fn isub(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        unsafe { vsubq_s32(a, b) }
    }
    #[inline(always)]
    fn ishl(self, a: int32x4_t, n: u32) -> int32x4_t {
        unsafe { vshlq_s32(a, vdupq_n_s32(n as i32)) }
    }
    #[inline(always)]
    fn ishr(self, a: int32x4_t, n: u32) -> int32x4_t {
        unsafe { vshlq_s32(a, vdupq_n_s32(-(n as i32))) }
    }
    #[inline(always)]
    fn i_to_f(self, a: int32x4_t) -> float32x4_t {
        unsafe { vcvtq_f32_s32(a) }
    }
    #[inline(always)]
    fn round(self, a: float32x4_t) -> float32x4_t {
        unsafe { vrndnq_f32(a) }
    }
    #[inline(always)]
    fn bload(self, s: &[u8]) -> (int8x16_t, int8x16_t) {
        assert!(s.len() >= 32);
        unsafe { (vld1q_s8(s.as_ptr().cast()), vld1q_s8(s.as_ptr().add(16).cast())) }
    }
    #[inline(always)]
    fn bstore(self, v: (int8x16_t, int8x16_t), out: &mut [u8]) {
        assert!(out.len() >= 32);
        unsafe {
            vst1q_s8(out.as_mut_ptr().cast(), v.0);
            vst1q_s8(out.as_mut_ptr().add(16).cast(), v.1);
        }
    }
    #[inline(always)]
    fn bload_nib(self, s: &[u8]) -> (int8x16_t, int8x16_t) {
        assert!(s.len() >= 16);
        unsafe {
            let x = vld1q_u8(s.as_ptr());
            (vreinterpretq_s8_u8(vandq_u8(x, vdupq_n_u8(15))), vreinterpretq_s8_u8(vshrq_n_u8::<4>(x)))
        }
    }
    #[inline(always)]
    fn bsplat(self, x: u8) -> (int8x16_t, int8x16_t) {
        let v = unsafe { vdupq_n_s8(x as i8) };
        (v, v)
    }
    #[inline(always)]
    fn band(self, a: (int8x16_t, int8x16_t), b: (int8x16_t, int8x16_t)) -> (int8x16_t, int8x16_t) {
        unsafe { (vandq_s8(a.0, b.0), vandq_s8(a.1, b.1)) }
    }
    #[inline(always)]
    fn bor(self, a: (int8x16_t, int8x16_t), b: (int8x16_t, int8x16_t)) -> (int8x16_t, int8x16_t) {
        unsafe { (vorrq_s8(a.0, b.0), vorrq_s8(a.1, b.1)) }
    }
    #[inline(always)]
    fn bsub(self, a: (int8x16_t, int8x16_t), b: (int8x16_t, int8x16_t)) -> (int8x16_t, int8x16_t) {
        unsafe { (vsubq_s8(a.0, b.0), vsubq_s8(a.1, b.1)) }
    }
    #[inline(always)]
    fn bshr(self, a: (int8x16_t, int8x16_t), n: u32) -> (int8x16_t, int8x16_t) {
        // `vshlq_u8` by a negative count shifts right (logically, on u8 lanes).
        unsafe {
            let c = vdupq_n_s8(-(n as i8));
            let f = |x: int8x16_t| vreinterpretq_s8_u8(vshlq_u8(vreinterpretq_u8_s8(x), c));
            (f(a.0), f(a.1))
        }
    }
    #[inline(always)]
    fn bshl(self, a: (int8x16_t, int8x16_t), n: u32) -> (int8x16_t, int8x16_t) {
        unsafe {
            let c = vdupq_n_s8(n as i8);
            let f = |x: int8x16_t| vreinterpretq_s8_u8(vshlq_u8(vreinterpretq_u8_s8(x), c));
            (f(a.0), f(a.1))
        }
    }
    #[inline(always)]
    fn dot_u8i8(self, a: (int8x16_t, int8x16_t), b: (int8x16_t, int8x16_t)) -> int32x4_t {
        // `a` ≤ 127 reads the same as i8, so both dots are signed `vmull` + pairwise adds.
        self.dot_i8i8(a, b)
    }
    #[inline(always)]
    fn dot_i8i8(self, a: (int8x16_t, int8x16_t), b: (int8x16_t, int8x16_t)) -> int32x4_t {
        if DOT {
            // SAFETY: see the impl's comment (sdot only in a `Neon<true>`).
            unsafe { sdot(sdot(vdupq_n_s32(0), a.0, b.0), a.1, b.1) }
        } else {
            unsafe { vaddq_s32(dot16(a.0, b.0), dot16(a.1, b.1)) }
        }
    }
    #[inline(always)]
    fn dot_u8i8_s2(self, a: (int8x16_t, int8x16_t), b: (int8x16_t, int8x16_t), s0: i16, s1: i16) -> int32x4_t {
        // (Both halves' dots are exact i32 sums, so `sdot`'s lanes hold the same totals.)
        let (d0, d1) = if DOT {
            // SAFETY: see the impl's comment.
            unsafe { (sdot(vdupq_n_s32(0), a.0, b.0), sdot(vdupq_n_s32(0), a.1, b.1)) }
        } else {
            (dot16(a.0, b.0), dot16(a.1, b.1))
        };
        unsafe { vmlaq_n_s32(vmulq_n_s32(d0, s0 as i32), d1, s1 as i32) }
    }
    #[inline(always)]
    fn dzero(self) -> int32x4_t {
        unsafe { vdupq_n_s32(0) }
    }
    #[inline(always)]
    fn dadd(self, a: int32x4_t, b: int32x4_t) -> int32x4_t {
        unsafe { vaddq_s32(a, b) }
    }
    #[inline(always)]
    fn dsum(self, a: int32x4_t) -> i32 {
        unsafe { vaddvq_s32(a) }
    }
    #[inline(always)]
    fn fzero(self) -> float32x4_t {
        unsafe { vdupq_n_f32(0.0) }
    }
    #[inline(always)]
    fn fmadd_d(self, acc: float32x4_t, d: int32x4_t, scale: f32) -> float32x4_t {
        unsafe { vfmaq_n_f32(acc, vcvtq_f32_s32(d), scale) }
    }
    #[inline(always)]
    fn fsum(self, a: float32x4_t) -> f32 {
        unsafe { vaddvq_f32(a) }
    }
    #[inline(always)]
    fn reduce_add(self, a: float32x4_t) -> f32 {
        unsafe { vaddvq_f32(a) }
    }
    #[inline(always)]
    fn reduce_max(self, a: float32x4_t) -> f32 {
        unsafe { vmaxvq_f32(a) }
    }
    #[inline(always)]
    fn reduce_min(self, a: float32x4_t) -> f32 {
        unsafe { vminvq_f32(a) }
    }
}

/// `acc + ` the 16 i8 products of `a` and `b` summed four to an i32 lane, in one `sdot` (the
/// dot-product extension; its intrinsic `vdotq_s32` is stable only from Rust 1.98, so inline
/// assembly).
///
/// # Safety
/// The CPU must have dotprod (the caller's `Neon<true>` proves it).
#[inline(always)]
unsafe fn sdot(acc: int32x4_t, a: int8x16_t, b: int8x16_t) -> int32x4_t {
    let mut acc = acc;
    // SAFETY: registers only; the caller guarantees the instruction exists.
    unsafe {
        // (`.arch_extension`: the assembler checks the instruction against the function it ends
        // up in, which is not always one compiled with dotprod, e.g. a closure passed to
        // `vectorize`; the token, not the function's features, is what proves the CPU has it.)
        core::arch::asm!(".arch_extension dotprod", "sdot {acc:v}.4s, {a:v}.16b, {b:v}.16b", acc = inout(vreg) acc, a = in(vreg) a, b = in(vreg) b, options(pure, nomem, nostack, preserves_flags));
    }
    acc
}

/// 16 i8 products (`vmull_s8`, exact in i16) summed four to an i32 lane (without dotprod).
#[inline(always)]
fn dot16(a: int8x16_t, b: int8x16_t) -> int32x4_t {
    // SAFETY: register-only NEON, baseline on aarch64.
    unsafe { vpadalq_s16(vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(b))), vmull_high_s8(a, b)) }
}
