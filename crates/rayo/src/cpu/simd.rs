//! The `Simd` trait: the only door from kernels to `core::arch`.
//!
//! Every kernel in `cpu::kernels` and `cpu::math` is written once, generic over `S: Simd`.
//! Each implementation (`isa/*.rs`) is a zero-sized token that can only be obtained after the
//! CPU was checked for its features, so its safe methods may use the intrinsics.
//!
//! Lane semantics every implementation follows (tests hold them to it):
//! - `max(a, b)` is `if a > b { a } else { b }` and `min(a, b)` is `if a < b { a } else { b }`
//!   (x86 semantics: a NaN in `a` yields `b`, a NaN in `b` yields `b`). Kernels that must
//!   propagate NaN say so explicitly.
//! - `mul_add(a, b, c)` is `a * b + c`, fused where the instruction set has FMA.
//! - Comparisons are ordered (false when either side is NaN).

/// 1.5 · 2^23: adding it rounds a float (|x| < 2^22) to an integer held in the low mantissa bits.
pub const ROUND_MAGIC: f32 = 12_582_912.0;

/// One instruction set, as a zero-sized token.
pub trait Simd: Copy + Send + Sync + 'static {
    /// `LANES` f32 values.
    type V: Copy;
    /// `LANES` i32 values.
    type I: Copy;
    /// A per-lane predicate.
    type M: Copy;
    /// 32 bytes (see "byte lanes" below).
    type B: Copy;
    /// i32 partial sums of byte products.
    type D: Copy;
    /// f32 lanes, as many as `D` has.
    type F: Copy;

    const LANES: usize;
    const NAME: &'static str;

    /// Runs `f` inside a function compiled with this instruction set's target features, so the
    /// generic kernel `f` calls is compiled for it and every intrinsic inlines.
    fn vectorize<R>(self, f: impl FnOnce() -> R) -> R;

    // ---- memory (slices: a load reads the first LANES elements) ----
    fn splat(self, x: f32) -> Self::V;
    /// Loads `s[..LANES]`; `s` must hold at least `LANES` elements.
    fn load(self, s: &[f32]) -> Self::V;
    /// Stores into `s[..LANES]`; `s` must hold at least `LANES` elements.
    fn store(self, s: &mut [f32], v: Self::V);
    /// Loads the `s.len() < LANES` elements of `s`, filling the other lanes with `fill`.
    fn load_partial(self, s: &[f32], fill: f32) -> Self::V;
    /// Stores the first `s.len() < LANES` lanes of `v`.
    fn store_partial(self, s: &mut [f32], v: Self::V);

    // ---- arithmetic ----
    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    fn sub(self, a: Self::V, b: Self::V) -> Self::V;
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    fn div(self, a: Self::V, b: Self::V) -> Self::V;
    fn mul_add(self, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    fn min(self, a: Self::V, b: Self::V) -> Self::V;
    fn max(self, a: Self::V, b: Self::V) -> Self::V;
    fn sqrt(self, a: Self::V) -> Self::V;

    // ---- bits of f32 lanes ----
    fn and(self, a: Self::V, b: Self::V) -> Self::V;
    fn or(self, a: Self::V, b: Self::V) -> Self::V;
    fn xor(self, a: Self::V, b: Self::V) -> Self::V;

    // ---- comparisons and selection ----
    fn lt(self, a: Self::V, b: Self::V) -> Self::M;
    fn le(self, a: Self::V, b: Self::V) -> Self::M;
    fn eq(self, a: Self::V, b: Self::V) -> Self::M;
    /// True where `a` is NaN.
    fn is_nan(self, a: Self::V) -> Self::M;
    /// True where `a` or `b` is NaN (one unordered compare where the ISA has it: reductions
    /// that must propagate NaN check two vectors per instruction).
    #[inline(always)]
    fn either_nan(self, a: Self::V, b: Self::V) -> Self::M {
        self.mask_or(self.is_nan(a), self.is_nan(b))
    }
    /// `m ? a : b`, lane by lane.
    fn select(self, m: Self::M, a: Self::V, b: Self::V) -> Self::V;
    fn mask_or(self, a: Self::M, b: Self::M) -> Self::M;
    fn mask_and(self, a: Self::M, b: Self::M) -> Self::M;
    fn mask_none(self) -> Self::M;
    fn any(self, m: Self::M) -> bool;
    /// Index of the first true lane, if any.
    fn first_set(self, m: Self::M) -> Option<usize>;

    // ---- integer lanes (for exponent manipulation) ----
    fn to_bits(self, a: Self::V) -> Self::I;
    // `self` is the instruction set's token (proof the CPU has it), as on every method here.
    #[allow(clippy::wrong_self_convention)]
    fn from_bits(self, a: Self::I) -> Self::V;
    fn isplat(self, x: i32) -> Self::I;
    fn iadd(self, a: Self::I, b: Self::I) -> Self::I;
    fn isub(self, a: Self::I, b: Self::I) -> Self::I;
    /// Shift left by `n` (a constant at every call site).
    fn ishl(self, a: Self::I, n: u32) -> Self::I;
    /// Arithmetic shift right by `n`.
    fn ishr(self, a: Self::I, n: u32) -> Self::I;
    fn i_to_f(self, a: Self::I) -> Self::V;

    // ---- helpers with a generic default, overridden where one instruction does it ----
    /// Stores `v` into `s[..LANES]` bypassing the caches where the ISA can (non-temporal);
    /// `s` must be aligned to the vector width. Call [`Simd::stream_fence`] after the last one.
    #[inline(always)]
    fn store_stream(self, s: &mut [f32], v: Self::V) {
        self.store(s, v)
    }
    /// Orders earlier streaming stores before later stores.
    #[inline(always)]
    fn stream_fence(self) {}
    /// Rounds to the nearest integer, ties to even (|a| < 2^22; larger values are returned
    /// unchanged by the instruction forms and may be off by the magic-number form).
    #[inline(always)]
    fn round(self, a: Self::V) -> Self::V {
        let magic = self.splat(ROUND_MAGIC);
        self.sub(self.add(a, magic), magic)
    }
    /// `y · 2^n` for integral `n`, rounded once: correct for n in [-252, 254] (so results
    /// may be denormal, 0 or ±inf without double rounding).
    #[inline(always)]
    fn pow2_scale(self, y: Self::V, n: Self::V) -> Self::V {
        // n as an integer, from the low mantissa bits of n + 1.5·2^23.
        let magic = self.splat(ROUND_MAGIC);
        let ni = self.isub(self.to_bits(self.add(n, magic)), self.to_bits(magic));
        // Two halves so each factor 2^k is a normal number.
        let n1 = self.ishr(ni, 1);
        let n2 = self.isub(ni, n1);
        let p = |k| self.from_bits(self.ishl(self.iadd(k, self.isplat(127)), 23));
        self.mul(self.mul(y, p(n1)), p(n2))
    }
    /// `2^n` for integral `n` in [-126, 127] (exact; one instruction where the ISA scales).
    #[inline(always)]
    fn pow2n(self, n: Self::V) -> Self::V {
        let magic = self.splat(ROUND_MAGIC);
        let ni = self.isub(self.to_bits(self.add(n, magic)), self.to_bits(magic));
        self.from_bits(self.ishl(self.iadd(ni, self.isplat(127)), 23))
    }
    /// True where [`Simd::table32`] is one in-register permute, so that a kernel may trade
    /// arithmetic for table lookups (the math functions pick their table-driven forms then).
    const FAST_TABLE: bool = false;
    /// `t[i & 31]`, lane by lane: a 32-entry table lookup on the low five bits of each index.
    /// The default goes through memory, lane by lane (right everywhere, fast nowhere).
    #[inline(always)]
    fn table32(self, t: &[f32; 32], i: Self::I) -> Self::V {
        let mut idx = [0f32; 16];
        self.store(&mut idx, self.from_bits(i));
        let vals: [f32; 16] = core::array::from_fn(|l| t[(idx[l].to_bits() & 31) as usize]);
        self.load(&vals)
    }
    /// `v` with its lanes moved up by `k < LANES`: lane `i` of the result is lane
    /// `(i − k) mod LANES` of `v` (the top `k` lanes wrap to the bottom). One permute where the
    /// ISA has a variable one; the default goes through memory.
    #[inline(always)]
    fn rotate_lanes(self, v: Self::V, k: usize) -> Self::V {
        let l = Self::LANES;
        let mut buf = [0f32; 32];
        self.store(&mut buf, v);
        self.store(&mut buf[l..], v);
        self.load(&buf[l - k % l..])
    }
    /// `1 / a` for finite nonzero `a`, within 1 ULP (0 and ±inf inputs may give NaN).
    #[inline(always)]
    fn recip(self, a: Self::V) -> Self::V {
        self.div(self.splat(1.0), a)
    }

    /// Transposes the `LANES × LANES` tile whose rows start `lda` apart in `src` into `dst`
    /// (rows `ldb` apart): `dst[j·ldb + i] = src[i·lda + j]`. Overridden with in-register
    /// shuffles where the instruction set has them, so each cache line is touched once.
    #[inline(always)]
    fn transpose_tile(self, src: &[f32], lda: usize, dst: &mut [f32], ldb: usize) {
        let l = Self::LANES;
        for i in 0..l {
            for j in 0..l {
                dst[j * ldb + i] = src[i * lda + j];
            }
        }
    }

    /// Stores the lanes of `v`, integers in −128..=127 (rounded quantization levels), as the
    /// bytes `s[..LANES]`. One narrowing conversion where the ISA has it.
    #[inline(always)]
    fn store_i8(self, v: Self::V, s: &mut [i8]) {
        let mut buf = [0f32; 16];
        self.store(&mut buf, v);
        for (q, r) in s[..Self::LANES].iter_mut().zip(&buf) {
            *q = *r as i8;
        }
    }
    /// Loads `s[..LANES]` (signed bytes, as quantized formats store them) as f32 lanes;
    /// `s` must hold at least `LANES` bytes. One widening instruction where the ISA has it.
    #[inline(always)]
    fn load_i8(self, s: &[i8]) -> Self::V {
        let mut buf = [0.0f32; 16];
        for (b, &x) in buf.iter_mut().zip(&s[..Self::LANES]) {
            *b = x as f32;
        }
        self.load(&buf)
    }

    // ---- byte lanes (quantized dot products) ----
    //
    // A `B` holds 32 bytes: one block of a 32-value format, or two 16-value sub-blocks of a
    // k-quant, so each format's kernel is written once over these. Dots sum groups of byte
    // products into the i32 lanes of a `D` (how many lanes, and which bytes land in which, is
    // the ISA's business: only `dsum` of a `D` is defined); `F` holds f32 lanes as many as a
    // `D`'s, the accumulator of scaled dots.

    /// Loads `s[..32]`.
    fn bload(self, s: &[u8]) -> Self::B;
    /// Stores the 32 bytes into `out[..32]`.
    fn bstore(self, v: Self::B, out: &mut [u8]);
    /// Loads `s[..16]` as 32 nibbles: lane `i < 16` is `s[i] & 15`, lane `16 + i` is `s[i] >> 4`
    /// (the layout of Q4_0 and Q5_0).
    fn bload_nib(self, s: &[u8]) -> Self::B;
    fn bsplat(self, x: u8) -> Self::B;
    fn band(self, a: Self::B, b: Self::B) -> Self::B;
    fn bor(self, a: Self::B, b: Self::B) -> Self::B;
    /// Wrapping byte subtraction.
    fn bsub(self, a: Self::B, b: Self::B) -> Self::B;
    /// Logical shift right of each byte by `n < 8`.
    fn bshr(self, a: Self::B, n: u32) -> Self::B;
    /// Shift left of each byte by `n < 8` (bits leaving the byte are lost).
    fn bshl(self, a: Self::B, n: u32) -> Self::B;
    /// Byte `j` is `0xFF` where bit `j` of `bits` is set, else 0 (Q5_0/Q5_1's fifth bits).
    #[inline(always)]
    fn bbits(self, bits: u32) -> Self::B {
        let buf: [u8; 32] = core::array::from_fn(|j| if bits >> j & 1 == 1 { 0xFF } else { 0 });
        self.bload(&buf)
    }
    /// An IEEE half (the scales of the quantized blocks) as f32, exactly, without branches:
    /// the magnitude bits moved into place and scaled by 2^112 (right for zero, subnormals and
    /// normals), ±inf and NaN patched by a select. Scalar on purpose: F16C's `vcvtph2ps` on one
    /// value made LLVM merge the half into a live register (`vpinsrw`), a false dependency that
    /// chained each block's scale to the previous block's sum.
    #[inline(always)]
    fn f16_to_f32(self, h: u16) -> f32 {
        let h = h as u32;
        let mag = (h & 0x7fff) << 13;
        let v = f32::from_bits(mag) * f32::from_bits(0x7780_0000);
        let v = if h & 0x7c00 == 0x7c00 { f32::from_bits(mag | 0x7f80_0000) } else { v };
        f32::from_bits(v.to_bits() | ((h & 0x8000) << 16))
    }
    /// A hint to bring the cache line at `p` into L1 (weights streamed from DRAM in an order
    /// the hardware prefetcher does not follow). Any address: a prefetch never faults.
    #[inline(always)]
    fn prefetch(self, p: *const u8) {
        let _ = p;
    }
    /// `Σ a[i]·b[i]` with `a` unsigned in `0..=127` and `b` signed (the bound keeps the pair
    /// sums of `maddubs` from saturating).
    fn dot_u8i8(self, a: Self::B, b: Self::B) -> Self::D;
    /// `Σ a[i]·b[i]` with both signed in `-127..=127`.
    fn dot_i8i8(self, a: Self::B, b: Self::B) -> Self::D;
    /// `s0·Σ_{i<16} a[i]·b[i] + s1·Σ_{i≥16} a[i]·b[i]`, `a` in `0..=127`, `b` signed, `s0, s1`
    /// in `-128..=127` (the k-quants' sub-block scales).
    fn dot_u8i8_s2(self, a: Self::B, b: Self::B, s0: i16, s1: i16) -> Self::D;
    fn dzero(self) -> Self::D;
    fn dadd(self, a: Self::D, b: Self::D) -> Self::D;
    /// The sum of the lanes.
    fn dsum(self, a: Self::D) -> i32;
    /// The sums of the lanes of eight vectors (the eight rows of a tile of a quantized product).
    #[inline(always)]
    fn dsum8(self, v: &[Self::D; 8]) -> [i32; 8] {
        core::array::from_fn(|r| self.dsum(v[r]))
    }
    fn fzero(self) -> Self::F;
    /// `acc + scale · (d as f32)`, lane by lane.
    fn fmadd_d(self, acc: Self::F, d: Self::D, scale: f32) -> Self::F;
    /// The sum of the lanes.
    fn fsum(self, a: Self::F) -> f32;

    // ---- horizontal ----
    fn reduce_add(self, a: Self::V) -> f32;
    /// Largest lane by `max` semantics (NaN handling is the caller's).
    fn reduce_max(self, a: Self::V) -> f32;
    fn reduce_min(self, a: Self::V) -> f32;
}

/// Derived operations, written once over `Simd`.
pub trait SimdExt: Simd {
    #[inline(always)]
    fn zero(self) -> Self::V {
        self.splat(0.0)
    }
    #[inline(always)]
    fn abs(self, a: Self::V) -> Self::V {
        self.and(a, self.from_bits(self.isplat(0x7fff_ffff)))
    }
    #[inline(always)]
    fn neg(self, a: Self::V) -> Self::V {
        self.xor(a, self.splat(-0.0))
    }
    /// The sign bit of `a` (as ±0.0 lanes).
    #[inline(always)]
    fn sign_bit(self, a: Self::V) -> Self::V {
        self.and(a, self.splat(-0.0))
    }
    #[inline(always)]
    fn gt(self, a: Self::V, b: Self::V) -> Self::M {
        self.lt(b, a)
    }
    #[inline(always)]
    fn ge(self, a: Self::V, b: Self::V) -> Self::M {
        self.le(b, a)
    }
}

impl<S: Simd> SimdExt for S {}

#[cfg(test)]
mod tests {
    use super::Simd;

    /// `rotate_lanes` by every `k` against the index rule, on the token `s`.
    fn rotate_on<S: Simd>(s: S) {
        s.vectorize(|| {
            let l = S::LANES;
            let v: [f32; 16] = core::array::from_fn(|i| i as f32 + 1.0);
            for k in 0..l {
                let mut out = [0f32; 16];
                s.store(&mut out, s.rotate_lanes(s.load(&v), k));
                let want: Vec<f32> = (0..l).map(|i| v[(i + l - k) % l]).collect();
                assert_eq!(&out[..l], &want[..], "{} k={k}", S::NAME);
            }
        })
    }

    #[test]
    fn rotate_lanes_moves_lanes_up_on_every_isa() {
        use crate::cpu::isa::*;
        rotate_on(scalar::Scalar);
        let mut ran = vec!["scalar"];
        #[cfg(target_arch = "x86_64")]
        {
            if let Some(s) = sse2::Sse2::try_new() {
                rotate_on(s);
                ran.push("sse2");
            }
            if let Some(s) = avx2::Avx2::try_new() {
                rotate_on(s);
                ran.push("avx2");
            }
            if let Some(s) = avx512::Avx512::try_new() {
                rotate_on(s);
                ran.push("avx512");
            }
        }
        #[cfg(target_arch = "aarch64")]
        if let Some(s) = neon::Neon::try_new() {
            rotate_on(s);
            ran.push("neon");
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        if let Some(s) = simd128::Simd128::try_new() {
            rotate_on(s);
            ran.push("simd128");
        }
        println!("rotate_lanes checked on {ran:?}");
    }
}
