//! AVX-512F (with AVX2/FMA): 16 f32 lanes, k-register masks, masked tail loads/stores.

use crate::cpu::simd::Simd;
use core::arch::x86_64::*;

/// Proof that the CPU has AVX-512F, AVX2 and FMA: only `try_new` makes one.
///
/// `VNNI` (a type parameter, off by default) says the CPU also has AVX-512 VNNI, BW and VL: it
/// only changes byte lanes (`vpdpbusd` instead of `maddubs` + `madd`; `vpmovm2b` for Q5's
/// fifth bits), so it is not a
/// backend of its own. As a constant it costs nothing in the loops: a run-time flag was tried
/// first and left a branch in every block of the quantized kernels (LLVM did not unswitch
/// them). Only the quantized products ask for the VNNI token ([`Avx512::try_new_vnni`]); the
/// other kernels are compiled once, for `Avx512<false>`.
#[derive(Clone, Copy, Debug)]
pub struct Avx512<const VNNI: bool = false>(());

impl Avx512 {
    #[inline]
    pub fn try_new() -> Option<Self> {
        let ok = std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        ok.then_some(Avx512(()))
    }

    /// The VNNI token, where the CPU has AVX-512 VNNI, BW and VL as well (every CPU with VNNI
    /// has them).
    #[inline]
    pub fn try_new_vnni() -> Option<Avx512<true>> {
        let vnni =
            std::is_x86_feature_detected!("avx512vnni") && std::is_x86_feature_detected!("avx512vl") && std::is_x86_feature_detected!("avx512bw");
        Avx512::try_new().filter(|_| vnni).map(|_| Avx512(()))
    }
}

/// `vpdpbusd` on 256-bit lanes: u8 × i8, four products summed into each i32 lane.
#[inline]
#[target_feature(enable = "avx512f,avx2,fma,avx512vnni,avx512vl")]
fn dpbusd(a: __m256i, b: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), a, b)
}

/// Byte j is 0xFF where bit j is set (one `vpmovm2b`).
#[inline]
#[target_feature(enable = "avx512f,avx2,fma,avx512vl,avx512bw")]
fn movm_epi8(bits: u32) -> __m256i {
    _mm256_movm_epi8(bits)
}

#[inline(always)]
fn tail_mask(len: usize) -> __mmask16 {
    ((1u32 << len) - 1) as __mmask16
}

// SAFETY (every `unsafe` block below): an `Avx512` value exists only after `try_new` saw
// avx512f, avx2 and fma on this CPU; pointer accesses stay inside the slices they come from
// (full loads/stores assert the length; masked ones touch only `len` lanes).
impl<const VNNI: bool> Simd for Avx512<VNNI> {
    type V = __m512;
    type I = __m512i;
    type M = __mmask16;
    type B = __m256i;
    type D = __m256i;
    type F = __m256;
    const LANES: usize = 16;
    const NAME: &'static str = "avx512";

    #[inline(always)]
    fn vectorize<R>(self, f: impl FnOnce() -> R) -> R {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn run<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        #[target_feature(enable = "avx512f,avx2,fma,avx512vnni,avx512vl,avx512bw")]
        unsafe fn run_vnni<R>(f: impl FnOnce() -> R) -> R {
            f()
        }
        // SAFETY: the token proves the features `run` (and, with `VNNI`, `run_vnni`) is
        // compiled for.
        unsafe {
            if VNNI {
                run_vnni(f)
            } else {
                run(f)
            }
        }
    }
    #[inline(always)]
    fn splat(self, x: f32) -> __m512 {
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    fn load(self, s: &[f32]) -> __m512 {
        assert!(s.len() >= 16);
        unsafe { _mm512_loadu_ps(s.as_ptr()) }
    }
    #[inline(always)]
    fn store(self, s: &mut [f32], v: __m512) {
        assert!(s.len() >= 16);
        unsafe { _mm512_storeu_ps(s.as_mut_ptr(), v) }
    }
    #[inline(always)]
    fn load_partial(self, s: &[f32], fill: f32) -> __m512 {
        let n = s.len().min(16);
        unsafe { _mm512_mask_loadu_ps(_mm512_set1_ps(fill), tail_mask(n), s.as_ptr()) }
    }
    #[inline(always)]
    fn store_partial(self, s: &mut [f32], v: __m512) {
        let n = s.len().min(16);
        unsafe { _mm512_mask_storeu_ps(s.as_mut_ptr(), tail_mask(n), v) }
    }
    #[inline(always)]
    fn add(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    fn sub(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_sub_ps(a, b) }
    }
    #[inline(always)]
    fn mul(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_mul_ps(a, b) }
    }
    #[inline(always)]
    fn div(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_div_ps(a, b) }
    }
    #[inline(always)]
    fn mul_add(self, a: __m512, b: __m512, c: __m512) -> __m512 {
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    fn min(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_min_ps(a, b) }
    }
    #[inline(always)]
    fn max(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_max_ps(a, b) }
    }
    #[inline(always)]
    fn sqrt(self, a: __m512) -> __m512 {
        unsafe { _mm512_sqrt_ps(a) }
    }
    #[inline(always)]
    fn and(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b))) }
    }
    #[inline(always)]
    fn or(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b))) }
    }
    #[inline(always)]
    fn xor(self, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_castps_si512(b))) }
    }
    #[inline(always)]
    fn lt(self, a: __m512, b: __m512) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b) }
    }
    #[inline(always)]
    fn le(self, a: __m512, b: __m512) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_LE_OQ>(a, b) }
    }
    #[inline(always)]
    fn eq(self, a: __m512, b: __m512) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, b) }
    }
    #[inline(always)]
    fn is_nan(self, a: __m512) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, a) }
    }
    #[inline(always)]
    fn either_nan(self, a: __m512, b: __m512) -> __mmask16 {
        unsafe { _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, b) }
    }
    #[inline(always)]
    fn select(self, m: __mmask16, a: __m512, b: __m512) -> __m512 {
        unsafe { _mm512_mask_blend_ps(m, b, a) }
    }
    #[inline(always)]
    fn mask_or(self, a: __mmask16, b: __mmask16) -> __mmask16 {
        a | b
    }
    #[inline(always)]
    fn mask_and(self, a: __mmask16, b: __mmask16) -> __mmask16 {
        a & b
    }
    #[inline(always)]
    fn mask_none(self) -> __mmask16 {
        0
    }
    #[inline(always)]
    fn any(self, m: __mmask16) -> bool {
        m != 0
    }
    #[inline(always)]
    fn first_set(self, m: __mmask16) -> Option<usize> {
        (m != 0).then(|| m.trailing_zeros() as usize)
    }
    #[inline(always)]
    fn to_bits(self, a: __m512) -> __m512i {
        unsafe { _mm512_castps_si512(a) }
    }
    #[inline(always)]
    fn from_bits(self, a: __m512i) -> __m512 {
        unsafe { _mm512_castsi512_ps(a) }
    }
    #[inline(always)]
    fn isplat(self, x: i32) -> __m512i {
        unsafe { _mm512_set1_epi32(x) }
    }
    #[inline(always)]
    fn iadd(self, a: __m512i, b: __m512i) -> __m512i {
        unsafe { _mm512_add_epi32(a, b) }
    }
    #[inline(always)]
    fn isub(self, a: __m512i, b: __m512i) -> __m512i {
        unsafe { _mm512_sub_epi32(a, b) }
    }
    #[inline(always)]
    fn ishl(self, a: __m512i, n: u32) -> __m512i {
        unsafe { _mm512_sll_epi32(a, _mm_cvtsi32_si128(n as i32)) }
    }
    #[inline(always)]
    fn ishr(self, a: __m512i, n: u32) -> __m512i {
        unsafe { _mm512_sra_epi32(a, _mm_cvtsi32_si128(n as i32)) }
    }
    #[inline(always)]
    fn load_i8(self, s: &[i8]) -> __m512 {
        assert!(s.len() >= 16);
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(s.as_ptr().cast()))) }
    }
    #[inline(always)]
    fn store_i8(self, v: __m512, s: &mut [i8]) {
        assert!(s.len() >= 16);
        // (In range by the contract: the saturating narrowing changes no value.)
        unsafe { _mm_storeu_si128(s.as_mut_ptr().cast(), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v))) }
    }
    #[inline(always)]
    fn i_to_f(self, a: __m512i) -> __m512 {
        unsafe { _mm512_cvtepi32_ps(a) }
    }
    #[inline(always)]
    fn store_stream(self, s: &mut [f32], v: __m512) {
        assert!(s.len() >= 16 && s.as_ptr() as usize % 64 == 0);
        unsafe { _mm512_stream_ps(s.as_mut_ptr(), v) }
    }
    #[inline(always)]
    fn stream_fence(self) {
        unsafe { _mm_sfence() }
    }
    #[inline(always)]
    fn round(self, a: __m512) -> __m512 {
        // imm 0x08: round to nearest even, exceptions suppressed.
        unsafe { _mm512_roundscale_ps::<0x08>(a) }
    }
    #[inline(always)]
    fn pow2_scale(self, y: __m512, n: __m512) -> __m512 {
        // vscalefps: y · 2^floor(n) with one rounding, denormals and overflow handled.
        unsafe { _mm512_scalef_ps(y, n) }
    }
    #[inline(always)]
    fn pow2n(self, n: __m512) -> __m512 {
        // SAFETY: register-only; the token proves avx512f.
        unsafe { _mm512_scalef_ps(_mm512_set1_ps(1.0), n) }
    }
    const FAST_TABLE: bool = true;
    #[inline(always)]
    fn table32(self, t: &[f32; 32], i: __m512i) -> __m512 {
        // vpermt2ps: each lane picks from the 32 floats of the two halves by its low five bits.
        // (The table loads are loop-invariant: LLVM keeps both halves in registers.)
        // SAFETY: the two loads read t[0..16] and t[16..32], inside the array.
        unsafe { _mm512_permutex2var_ps(_mm512_loadu_ps(t.as_ptr()), i, _mm512_loadu_ps(t.as_ptr().add(16))) }
    }
    #[inline(always)]
    fn rotate_lanes(self, v: __m512, k: usize) -> __m512 {
        // vpermps: lane i takes lane (i − k) & 15.
        // SAFETY: register-only; the token proves avx512f.
        unsafe {
            let idx = _mm512_and_si512(
                _mm512_sub_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(k as i32)),
                _mm512_set1_epi32(15),
            );
            _mm512_permutexvar_ps(idx, v)
        }
    }
    #[inline(always)]
    fn recip(self, a: __m512) -> __m512 {
        // 14-bit estimate and one Newton step: r + r(1 − a·r), relative error < 2^-23.
        unsafe {
            let r = _mm512_rcp14_ps(a);
            _mm512_fmadd_ps(r, _mm512_fnmadd_ps(a, r, _mm512_set1_ps(1.0)), r)
        }
    }
    super::bytes256::byte_lanes_256!();
    #[inline(always)]
    fn bbits(self, bits: u32) -> __m256i {
        if VNNI {
            // SAFETY: an `Avx512<true>` is made only where the CPU has avx512bw and avx512vl.
            unsafe { movm_epi8(bits) }
        } else {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { super::bytes256::bits(bits) }
        }
    }
    #[inline(always)]
    fn f16_to_f32(self, h: u16) -> f32 {
        // One `vcvtph2ps` (the default is ~8 scalar ops, per block scale of every format).
        // SAFETY: register-only; AVX-512F implies F16C.
        unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h as i32))) }
    }
    #[inline(always)]
    fn prefetch(self, p: *const u8) {
        // SAFETY: a prefetch reads nothing architecturally and never faults, at any address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    }
    #[inline(always)]
    fn dot_u8i8(self, a: __m256i, b: __m256i) -> __m256i {
        if VNNI {
            // SAFETY: an `Avx512<true>` is made only where the CPU has avx512vnni and avx512vl.
            unsafe { dpbusd(a, b) }
        } else {
            // SAFETY: register-only; the token proves AVX2.
            unsafe { super::bytes256::dot_u8i8(a, b) }
        }
    }
    #[inline(always)]
    fn dot_i8i8(self, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: register-only; the token proves AVX2.
        let (ua, sb) = unsafe { super::bytes256::sign_trick(a, b) };
        self.dot_u8i8(ua, sb)
    }
    #[inline(always)]
    fn reduce_add(self, a: __m512) -> f32 {
        unsafe { _mm512_reduce_add_ps(a) }
    }
    #[inline(always)]
    fn reduce_max(self, a: __m512) -> f32 {
        unsafe { _mm512_reduce_max_ps(a) }
    }
    #[inline(always)]
    fn reduce_min(self, a: __m512) -> f32 {
        unsafe { _mm512_reduce_min_ps(a) }
    }
    #[inline(always)]
    fn transpose_tile(self, src: &[f32], lda: usize, dst: &mut [f32], ldb: usize) {
        let mut r: [__m512; 16] = core::array::from_fn(|i| self.load(&src[i * lda..]));
        let mut t = r;
        // SAFETY (each block): register-only shuffles; the token proves avx512f.
        for p in 0..8 {
            t[2 * p] = unsafe { _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]) };
            t[2 * p + 1] = unsafe { _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]) };
        }
        for q in (0..16).step_by(4) {
            r[q] = unsafe { _mm512_shuffle_ps::<0x44>(t[q], t[q + 2]) };
            r[q + 1] = unsafe { _mm512_shuffle_ps::<0xEE>(t[q], t[q + 2]) };
            r[q + 2] = unsafe { _mm512_shuffle_ps::<0x44>(t[q + 1], t[q + 3]) };
            r[q + 3] = unsafe { _mm512_shuffle_ps::<0xEE>(t[q + 1], t[q + 3]) };
        }
        for h in [0, 8] {
            for j in 0..4 {
                t[h + j] = unsafe { _mm512_shuffle_f32x4::<0x88>(r[h + j], r[h + j + 4]) };
                t[h + j + 4] = unsafe { _mm512_shuffle_f32x4::<0xDD>(r[h + j], r[h + j + 4]) };
            }
        }
        for j in 0..8 {
            r[j] = unsafe { _mm512_shuffle_f32x4::<0x88>(t[j], t[j + 8]) };
            r[j + 8] = unsafe { _mm512_shuffle_f32x4::<0xDD>(t[j], t[j + 8]) };
        }
        for (j, v) in r.iter().enumerate() {
            self.store(&mut dst[j * ldb..], *v);
        }
    }
}
