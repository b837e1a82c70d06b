//! Transcendental functions as vectorized polynomials, written once over `Simd`.
//!
//! Error bounds (measured against f64 by `tests/accuracy.rs` on every instruction set, over
//! [-88, 88] and the special values): see each function. Coefficients of `expm1` and `gelu`
//! come from `tools/fit_poly.py`; `exp`, `ln` and the small-|x| `tanh` are Cephes' (S. Moshier).
//! Where the instruction set looks up a 32-entry table in one permute ([`Simd::FAST_TABLE`]),
//! `tanh` and `gelu` take table-driven forms instead (a short polynomial per interval, from
//! `tools/fit_tables.py`): fewer operations and no division, at the same error bounds.

// Coefficients as fitted or published (Cephes); the compiler rounds each to the nearest f32.
#![allow(clippy::excessive_precision)]

use super::math_tables::{GELU, TANH};
use super::simd::{Simd, SimdExt};

const LOG2E: f32 = core::f32::consts::LOG2_E;
// ln 2 split so that n * LN2_HI is exact for |n| < 2^15 (Cody–Waite reduction).
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;

/// `p(x)` by Horner's rule, `coeffs` from the highest power down.
#[inline(always)]
fn horner<S: Simd>(s: S, x: S::V, coeffs: &[f32]) -> S::V {
    let mut acc = s.splat(coeffs[0]);
    for &c in &coeffs[1..] {
        acc = s.mul_add(acc, x, s.splat(c));
    }
    acc
}

/// e^x. Max error 1 ULP on [-88, 88] with FMA, 2 ULP without; exact 0 / inf beyond the
/// range, NaN in NaN out, denormal results rounded once (the scale is applied in two halves).
#[inline(always)]
pub fn exp<S: Simd>(s: S, x: S::V) -> S::V {
    exp_split(s, x, None)
}

/// e^(x + lo) for a small `lo` (|lo| < 0.1) that is added inside the argument reduction, so
/// no rounding of `x + lo` is paid.
#[inline(always)]
fn exp_split<S: Simd>(s: S, x: S::V, lo: Option<S::V>) -> S::V {
    // Clamp with the constant first: `max(c, NaN)` returns NaN, so NaN passes through.
    exp_unclamped(s, s.min(s.splat(89.0), s.max(s.splat(-104.0), x)), lo)
}

/// [`exp_split`] for x in [-170, 88.7], where 2^n stays in `pow2_scale`'s range unclamped.
#[inline(always)]
fn exp_unclamped<S: Simd>(s: S, x: S::V, lo: Option<S::V>) -> S::V {
    let n = s.round(s.mul(x, s.splat(LOG2E)));
    let r = s.mul_add(n, s.splat(-LN2_HI), x); // exact (Cody–Waite)
    let r = match lo {
        Some(lo) => s.add(r, lo),
        None => r,
    };
    let r = s.mul_add(n, s.splat(-LN2_LO), r);
    let p = horner(s, r, &[1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5]);
    let y = s.add(s.mul_add(p, s.mul(r, r), r), s.splat(1.0));
    s.pow2_scale(y, n) // n is in [-150, 128]
}

/// e^x − 1 for x ≤ 0 (what elu and selu need), accurate near 0 where `exp(x) - 1` cancels.
/// Max error 2 ULP; keeps the sign of −0; NaN in NaN out. Positive lanes are not meaningful.
#[inline(always)]
pub fn expm1_nonpositive<S: Simd>(s: S, x: S::V) -> S::V {
    let xc = s.max(s.splat(-87.0), x); // below this the answer is -1 to f32 precision
    let n = s.round(s.mul(xc, s.splat(LOG2E)));
    let r = s.mul_add(n, s.splat(-LN2_HI), xc);
    let r = s.mul_add(n, s.splat(-LN2_LO), r);
    // expm1(r) = r + r^2/2 + r^3 q(r), |r| <= ln2/2
    let q = horner(s, r, &[2.481_812_3e-5, 1.989_095e-4, 1.388_891_6e-3, 8.333_311e-3, 4.166_666_5e-2, 0.166_666_67]);
    let em1r = s.mul_add(s.mul(r, r), s.mul_add(r, q, s.splat(0.5)), r);
    // expm1(x) = 2^n expm1(r) + (2^n - 1); 2^n - 1 is exact for n >= -24.
    let p2 = s.pow2n(n);
    let y = s.mul_add(p2, em1r, s.sub(p2, s.splat(1.0)));
    s.select(s.eq(x, s.zero()), x, y)
}

/// Natural logarithm. Max error 1 ULP (2 without FMA) for positive normal and denormal inputs;
/// ln(0) = −inf, ln(x<0) = NaN, ln(inf) = inf, NaN in NaN out.
#[inline(always)]
pub fn ln<S: Simd>(s: S, x: S::V) -> S::V {
    // Denormals: scale by 2^23 so the exponent field is meaningful.
    let den = s.lt(x, s.splat(f32::MIN_POSITIVE));
    let xs = s.select(den, s.mul(x, s.splat(8_388_608.0)), x);
    let bits = s.to_bits(xs);
    let e_raw = s.isub(s.ishr(bits, 23), s.isplat(127));
    let m = s.from_bits(s.iadd(s.to_bits(s.and(xs, s.from_bits(s.isplat(0x007f_ffff)))), s.isplat(0x3f80_0000))); // m in [1, 2)
    let big = s.lt(s.splat(core::f32::consts::SQRT_2), m);
    let m = s.select(big, s.mul(m, s.splat(0.5)), m);
    let e = s.add(s.i_to_f(e_raw), s.select(big, s.splat(1.0), s.zero()));
    let e = s.sub(e, s.select(den, s.splat(23.0), s.zero()));
    let f = s.sub(m, s.splat(1.0));
    let z = s.mul(f, f);
    let p = horner(
        s,
        f,
        &[
            7.037_683_6e-2, -1.151_461e-1, 1.167_699_9e-1, -1.242_014_1e-1, 1.424_932_3e-1, -1.666_805_8e-1, 2.000_071_5e-1, -2.499_999_4e-1,
            3.333_333_1e-1,
        ],
    );
    let y = s.mul(s.mul(p, f), z);
    let y = s.mul_add(e, s.splat(LN2_LO), y);
    let y = s.mul_add(z, s.splat(-0.5), y);
    let y = s.add(f, y);
    let y = s.mul_add(e, s.splat(LN2_HI), y);
    // Special values.
    let y = s.select(s.lt(x, s.zero()), s.splat(f32::NAN), y);
    let y = s.select(s.eq(x, s.zero()), s.splat(f32::NEG_INFINITY), y);
    let y = s.select(s.eq(x, s.splat(f32::INFINITY)), x, y);
    s.select(s.is_nan(x), x, y)
}

/// The polynomial of `a`'s interval from the tables `t` (`tools/fit_tables.py`), given
/// `b = a + offset`: interval k is the low five bits of bits(b) >> 20 (b's exponent and top
/// three mantissa bits, eight intervals an octave; b's range decides that the 32 are distinct),
/// and the polynomial's variable is y = a − e, e the interval's lower edge rebuilt from the same
/// bits of b (exact: both have a few significant bits), so only coefficients are looked up.
#[inline(always)]
fn table_poly<S: Simd, const N: usize>(s: S, a: S::V, b: S::V, offset: f32, t: &[[f32; 32]; N]) -> S::V {
    let [p] = table_poly_n(s, [a], [b], offset, t);
    p
}

/// [`table_poly`] of `M` vectors, stage by stage: every vector's index and variable, then every
/// vector's lookups and Horner step of one coefficient after the other (see [`tanh_n`]).
#[inline(always)]
fn table_poly_n<S: Simd, const N: usize, const M: usize>(s: S, a: [S::V; M], b: [S::V; M], offset: f32, t: &[[f32; 32]; N]) -> [S::V; M] {
    let (mut k, mut y) = ([s.isplat(0); M], a);
    for j in 0..M {
        k[j] = s.ishr(s.to_bits(b[j]), 20);
        let edge = s.sub(s.and(b[j], s.from_bits(s.isplat(0xfff0_0000_u32 as i32))), s.splat(offset));
        y[j] = s.sub(a[j], edge); // exact: e ≤ a ≤ 2e, or e = 0 (up to the rounding of b, where y ≈ 0)
    }
    let mut acc = a;
    for j in 0..M {
        acc[j] = s.table32(&t[N - 1], k[j]);
    }
    for c in t[..N - 1].iter().rev() {
        for j in 0..M {
            acc[j] = s.mul_add(acc[j], y[j], s.table32(c, k[j]));
        }
    }
    acc
}

/// tanh. Max error 2 ULP; odd (keeps the sign of −0), ±1 at ±inf, NaN in NaN out.
#[inline(always)]
pub fn tanh<S: Simd>(s: S, x: S::V) -> S::V {
    let [y] = tanh_n(s, [x]);
    y
}

/// [`tanh`] of `N` vectors at once, the same bits lane by lane. The table form runs the `N`
/// vectors stage by stage (every vector's lookups of a coefficient, then every vector's
/// Horner step): in that order the out-of-order core keeps the `N` dependency chains in
/// flight, where `N` calls of [`tanh`] one after the other left it waiting (Zen 4, 100 K
/// floats, three vectors: 18.0 against 19.2 µs for four one after the other).
#[inline(always)]
pub fn tanh_n<S: Simd, const N: usize>(s: S, x: [S::V; N]) -> [S::V; N] {
    if S::FAST_TABLE {
        tanh_table_n(s, x)
    } else {
        let mut y = x;
        for v in &mut y {
            *v = tanh_poly(s, *v);
        }
        y
    }
}

/// [`tanh_table_n`] of one vector (what the accuracy tests check).
#[cfg(test)]
fn tanh_table<S: Simd>(s: S, x: S::V) -> S::V {
    let [y] = tanh_table_n(s, [x]);
    y
}

/// tanh from a degree-4 polynomial per interval of a = |x| (clamped at 9.1, past which tanh is
/// 1 in f32; `min(c, NaN)` is NaN, so NaN passes): with b = a + 0.625 in [0.625, 9.725] the
/// intervals' indices are distinct without clamping b (see `tools/fit_tables.py`); interval 0
/// has no constant term, so tiny inputs keep their relative precision. `N` vectors, stage by
/// stage.
#[inline(always)]
fn tanh_table_n<S: Simd, const N: usize>(s: S, x: [S::V; N]) -> [S::V; N] {
    let (mut a, mut b) = (x, x);
    for j in 0..N {
        a[j] = s.min(s.splat(9.1), s.abs(x[j]));
        b[j] = s.add(a[j], s.splat(0.625));
    }
    let mut y = table_poly_n(s, a, b, 0.625, &TANH);
    for j in 0..N {
        y[j] = s.or(y[j], s.sign_bit(x[j]));
    }
    y
}

/// tanh from a small-|x| polynomial and `1 − 2/(e^{2|x|} + 1)`.
#[inline(always)]
fn tanh_poly<S: Simd>(s: S, x: S::V) -> S::V {
    let a = s.abs(x);
    // |x| < 0.625: x + x^3 P(x^2)
    let z = s.mul(a, a);
    let p = horner(s, z, &[-5.704_988_7e-3, 2.063_908_9e-2, -5.373_971_6e-2, 1.333_144_2e-1, -3.333_328_2e-1]);
    let small = s.mul_add(s.mul(p, z), a, a);
    // otherwise 1 - 2 / (e^{2|x|} + 1); past 9.1 that is 1 in f32 (the clamp keeps e finite)
    let ac = s.min(s.splat(9.5), a);
    let e = exp(s, s.add(ac, ac));
    let large = s.sub(s.splat(1.0), s.mul(s.splat(2.0), s.recip(s.add(e, s.splat(1.0)))));
    let y = s.select(s.lt(a, s.splat(0.625)), small, large);
    s.or(y, s.sign_bit(x))
}

/// 1 / (1 + e^−x), computed as e^x / (1 + e^x) for x < 0 so tiny results keep full precision.
/// Max error 3 ULP; 0 and 1 at ∓inf, NaN in NaN out.
#[inline(always)]
pub fn sigmoid<S: Simd>(s: S, x: S::V) -> S::V {
    let e = exp(s, s.neg(s.abs(x)));
    let r = s.recip(s.add(s.splat(1.0), e));
    s.select(s.le(s.zero(), x), r, s.mul(e, r))
}

/// x · sigmoid(x). Max error 4 ULP; swish(−inf) = −0 (the limit), NaN in NaN out.
#[inline(always)]
pub fn swish<S: Simd>(s: S, x: S::V) -> S::V {
    // Clamp keeps −inf · 0 from making NaN; NaN passes through `max(c, NaN)`.
    s.mul(s.max(s.splat(f32::MIN), x), sigmoid(s, x))
}

/// x · tanh(softplus(x)) = x · n / (n + 2), n = e^x (e^x + 2). Max error 4 ULP where
/// |result| ≥ 1e-30, absolute error ≤ 1e-37 below; mish(−inf) = −0, NaN in NaN out.
#[inline(always)]
pub fn mish<S: Simd>(s: S, x: S::V) -> S::V {
    let e = exp(s, x);
    let n = s.mul(e, s.add(e, s.splat(2.0)));
    let t = s.div(n, s.add(n, s.splat(2.0))); // exact division: a reciprocal costs mish its 4 ULP
    let y = s.mul(s.max(s.splat(f32::MIN), x), t);
    // Beyond 20, n / (n + 2) is 1 to f32 precision (and n would overflow at 44).
    s.select(s.lt(s.splat(20.0), x), x, y)
}

/// e^{−u²/2} for 0 ≤ u ≤ 20 with the square taken exactly: u = uh + ul with uh holding 12
/// significant bits, so uh²/2 is exact and the small rest, ul·(u + uh)/2, joins the argument
/// inside the reduction of `exp`. `CLAMP = false` where u ≤ 18 (−u²/2 ≥ −162: no clamp needed).
#[inline(always)]
fn exp_neg_half_square<S: Simd, const CLAMP: bool>(s: S, u: S::V) -> S::V {
    let uh = s.and(u, s.from_bits(s.isplat(0xffff_f000_u32 as i32)));
    let ul = s.sub(u, uh);
    let nh = s.mul(uh, s.splat(-0.5)); // exact
    let hi = s.mul(uh, nh); // −uh²/2, exact
    let rest = s.mul(ul, s.mul_add(u, s.splat(-0.5), nh)); // ul · −(u + uh)/2
    if CLAMP {
        exp_split(s, hi, Some(rest))
    } else {
        exp_unclamped(s, hi, Some(rest))
    }
}

/// Exact GELU, x · Φ(x) (the erf form, not the tanh approximation).
/// Max error 4 ULP where |result| ≥ 1e-30, absolute error ≤ 1e-37 below; gelu(−inf) = −0,
/// gelu(inf) = inf, NaN in NaN out.
#[inline(always)]
pub fn gelu<S: Simd>(s: S, x: S::V) -> S::V {
    if S::FAST_TABLE {
        gelu_table(s, x)
    } else {
        gelu_poly(s, x)
    }
}

/// GELU as max(x, 0) − u Φ(−u), u = |x|, for every x: the tail u Φ(−u) = e^{−u²/2} g(u) with g
/// a degree-5 polynomial per interval of u (u clamped at 14.5, where e^{−u²/2} is 0 in f32).
#[inline(always)]
pub(crate) fn gelu_table<S: Simd>(s: S, x: S::V) -> S::V {
    let u = s.min(s.splat(14.5), s.abs(x)); // NaN passes `min(c, NaN)`
    let tail = s.mul(exp_neg_half_square::<S, false>(s, u), table_poly(s, u, s.add(u, s.splat(1.0)), 1.0, &GELU));
    // `max(−0, x)`: x where x ≥ 0 or NaN, else −0, so gelu(x < 0) keeps its sign when the tail is 0.
    s.sub(s.max(s.splat(-0.0), x), tail)
}

/// GELU from a polynomial in x² for |x| ≤ 1 and a polynomial in 1/|x| times e^{−x²/2} above.
#[inline(always)]
fn gelu_poly<S: Simd>(s: S, x: S::V) -> S::V {
    let a = s.abs(x);
    // Past 20 the tail is 0; clamping keeps inf − inf out of the exact-square split.
    let ac = s.min(s.splat(20.0), a);
    // |x| <= 1: Φ(x) = 0.5 + x E(x²)
    let ep = horner(s, s.mul(x, x), &[5.367_327_3e-7, -9.272_798e-6, 1.153_189_3e-4, -1.187_287_8e-3, 9.973_55e-3, -6.649_038e-2, 3.989_422_8e-1]);
    let small = s.mul(x, s.mul_add(x, ep, s.splat(0.5)));
    // |x| > 1: |x| Φ(−|x|) = e^{−x²/2} h(1/|x|), h a polynomial in v = (1/|x| − c) / w
    let t = s.recip(ac);
    let v = s.mul(s.sub(t, s.splat(5.370_370_4e-1)), s.splat(2.16));
    let h = horner(
        s,
        v,
        &[
            5.155182079e-05, -5.889248757e-05, -1.518617758e-04, 2.889177891e-04, -1.764116138e-04, 1.316017447e-04, 3.010103509e-05,
            -9.683196935e-04, 3.121937205e-03, -6.334572767e-03, 7.622989655e-03, 6.204406794e-03, -7.810335049e-02, 3.299201973e-01,
        ],
    );
    let tail = s.mul(exp_neg_half_square::<S, true>(s, ac), h);
    let large = s.select(s.lt(x, s.zero()), s.neg(tail), s.sub(x, tail));
    s.select(s.le(a, s.splat(1.0)), small, large)
}

#[cfg(test)]
mod tests {
    //! The table-driven forms on every f32 near each interval edge and on a sweep, through the
    //! generic `table32` without FMA (the scalar token) and through `vpermt2ps` (AVX-512, where
    //! the CPU has it); `tests/accuracy.rs` covers them again where an ISA picks them.
    use super::*;
    use crate::cpu::isa::scalar::Scalar;

    fn ulps(got: f32, want: f64) -> f64 {
        if got.is_nan() || want.is_nan() {
            return if got.is_nan() && want.is_nan() { 0.0 } else { f64::INFINITY };
        }
        let w = (want as f32).abs();
        (got as f64 - want).abs() / (f32::from_bits(w.to_bits() + 1) - w) as f64
    }

    /// A sweep of [-16, 16], ± log-spaced magnitudes, and the 64 floats on either side of every
    /// interval edge of both tables (b = a + offset at each eighth of an octave).
    fn inputs() -> Vec<f32> {
        let mut xs: Vec<f32> = (0..=300_000).map(|i| -16.0 + 32.0 * i as f32 / 300_000.0).collect();
        xs.extend((0..=4000).flat_map(|i| {
            let m = 10f64.powf(-45.0 + 46.0 * i as f64 / 4000.0) as f32;
            [m, -m]
        }));
        for offset in [0.625f32, 1.0] {
            for e in -1..4 {
                for m in 0..8 {
                    let edge = 2f32.powi(e) * (1.0 + m as f32 / 8.0) - offset;
                    if edge > 0.0 {
                        let b = edge.to_bits();
                        xs.extend((b - 64..b + 64).flat_map(|u| [f32::from_bits(u), -f32::from_bits(u)]));
                    }
                }
            }
        }
        xs
    }

    /// `f` over `xs` with the instruction set `s` (any length: the tail goes through a partial load).
    fn map<S: Simd>(s: S, xs: &[f32], f: fn(S, S::V) -> S::V) -> Vec<f32> {
        s.vectorize(|| {
            let mut out = vec![0.0; xs.len()];
            for (x, o) in xs.chunks(S::LANES).zip(out.chunks_mut(S::LANES)) {
                if x.len() == S::LANES {
                    s.store(o, f(s, s.load(x)));
                } else {
                    s.store_partial(o, f(s, s.load_partial(x, 0.0)));
                }
            }
            out
        })
    }

    fn check(name: &str, xs: &[f32], got: &[f32], want: fn(f64) -> f64, max_ulp: f64, tiny: f64) {
        let mut worst = 0.0f64;
        for (&x, &g) in xs.iter().zip(got) {
            let w = want(x as f64);
            if w.abs() < tiny {
                assert!((g as f64 - w).abs() <= 1.5e-37, "{name}({x:e}) = {g:e}, want {w:e}");
            } else {
                let e = ulps(g, w);
                assert!(e <= max_ulp, "{name}({x:e}) = {g:e}, want {w:e}: {e} ULP");
                worst = worst.max(e);
            }
        }
        println!("{name} max error {worst:.2} ULP");
    }

    fn gelu_ref(x: f64) -> f64 {
        x * 0.5 * libm::erfc(-x / core::f64::consts::SQRT_2)
    }

    #[test]
    fn table_forms_within_their_bounds() {
        let xs = inputs();
        check("scalar tanh_table", &xs, &map(Scalar, &xs, tanh_table), f64::tanh, 2.0, 0.0);
        check("scalar gelu_table", &xs, &map(Scalar, &xs, gelu_table), gelu_ref, 4.0, 1e-30);
        #[cfg(target_arch = "x86_64")]
        match crate::cpu::isa::avx512::Avx512::try_new() {
            Some(s) => {
                check("avx512 tanh_table", &xs, &map(s, &xs, tanh_table), f64::tanh, 2.0, 0.0);
                check("avx512 gelu_table", &xs, &map(s, &xs, gelu_table), gelu_ref, 4.0, 1e-30);
            }
            None => println!("skipped avx512: the CPU lacks AVX-512F"),
        }
    }

    /// `tanh_n` (what the element-wise loop calls on three vectors) gives `tanh`'s bits.
    #[test]
    fn tanh_of_three_vectors_is_tanh_of_each() {
        fn same<S: Simd>(s: S, xs: &[f32]) {
            let one = map(s, xs, tanh);
            let three = s.vectorize(|| {
                let mut out = vec![0.0; xs.len()];
                for (x, o) in xs.chunks_exact(3 * S::LANES).zip(out.chunks_exact_mut(3 * S::LANES)) {
                    let l = S::LANES;
                    let y = tanh_n(s, [s.load(x), s.load(&x[l..]), s.load(&x[2 * l..])]);
                    for (j, v) in y.into_iter().enumerate() {
                        s.store(&mut o[j * l..], v);
                    }
                }
                out
            });
            let n = xs.len() / (3 * S::LANES) * 3 * S::LANES;
            for i in 0..n {
                assert_eq!(three[i].to_bits(), one[i].to_bits(), "tanh_n({:e})", xs[i]);
            }
        }
        let mut xs = inputs();
        xs.extend([0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e30, -9.5]);
        same(Scalar, &xs);
        #[cfg(target_arch = "x86_64")]
        if let Some(s) = crate::cpu::isa::avx512::Avx512::try_new() {
            same(s, &xs);
        }
    }

    #[test]
    fn table_forms_special_values() {
        let tanh_want = [(0.0f32, 0.0f32), (-0.0, -0.0), (f32::INFINITY, 1.0), (f32::NEG_INFINITY, -1.0), (1e30, 1.0), (-9.5, -1.0)];
        let gelu_want = [(0.0f32, 0.0f32), (-0.0, -0.0), (f32::INFINITY, f32::INFINITY), (f32::NEG_INFINITY, -0.0), (-100.0, -0.0), (100.0, 100.0)];
        let run = |name: &str, got: &dyn Fn(&[f32]) -> Vec<f32>, want: &[(f32, f32)]| {
            let xs: Vec<f32> = want.iter().map(|w| w.0).chain([f32::NAN]).collect();
            let out = got(&xs);
            for (&(x, w), &g) in want.iter().zip(&out) {
                assert_eq!(g.to_bits(), w.to_bits(), "{name}({x}) = {g}, want {w}");
            }
            assert!(out[want.len()].is_nan(), "{name}(NaN)");
        };
        run("scalar tanh_table", &|x| map(Scalar, x, tanh_table), &tanh_want);
        run("scalar gelu_table", &|x| map(Scalar, x, gelu_table), &gelu_want);
        #[cfg(target_arch = "x86_64")]
        if let Some(s) = crate::cpu::isa::avx512::Avx512::try_new() {
            run("avx512 tanh_table", &|x| map(s, x, tanh_table), &tanh_want);
            run("avx512 gelu_table", &|x| map(s, x, gelu_table), &gelu_want);
        }
    }
}
