//! Reductions: sums and dot products (blocked: f32 vector partials per block, f64 across
//! blocks, so the error grows with the block size, not with n), and NaN-propagating max/min.

use crate::cpu::simd::{Simd, SimdExt};

/// Elements per block of a blocked sum: each of the 4·LANES partial sums adds at most
/// `BLOCK / (4·LANES)` terms in f32 before it is carried into f64.
const BLOCK: usize = 4096;

/// Folds `x` with four independent accumulators (to hide the latency of `step`), the tail
/// padded with `fill`. Returns the merged accumulator.
#[inline(always)]
fn fold<S: Simd, A: Copy>(s: S, x: &[f32], fill: f32, init: A, step: impl Fn(A, S::V) -> A, merge: impl Fn(A, A) -> A) -> A {
    let l = S::LANES;
    let mut acc = [init; 4];
    let mut c4 = x.chunks_exact(4 * l);
    for c in &mut c4 {
        acc[0] = step(acc[0], s.load(c));
        acc[1] = step(acc[1], s.load(&c[l..]));
        acc[2] = step(acc[2], s.load(&c[2 * l..]));
        acc[3] = step(acc[3], s.load(&c[3 * l..]));
    }
    let mut c1 = c4.remainder().chunks_exact(l);
    for c in &mut c1 {
        acc[0] = step(acc[0], s.load(c));
    }
    let tail = c1.remainder();
    if !tail.is_empty() {
        acc[1] = step(acc[1], s.load_partial(tail, fill));
    }
    merge(merge(acc[0], acc[1]), merge(acc[2], acc[3]))
}

/// Two-input version of [`fold`] (dot products).
#[inline(always)]
fn fold2<S: Simd>(s: S, a: &[f32], b: &[f32], step: impl Fn(S::V, S::V, S::V) -> S::V) -> S::V {
    let l = S::LANES;
    let z = s.zero();
    let mut acc = [z; 4];
    let mut ca = a.chunks_exact(4 * l);
    let mut cb = b.chunks_exact(4 * l);
    for (x, y) in (&mut ca).zip(&mut cb) {
        acc[0] = step(acc[0], s.load(x), s.load(y));
        acc[1] = step(acc[1], s.load(&x[l..]), s.load(&y[l..]));
        acc[2] = step(acc[2], s.load(&x[2 * l..]), s.load(&y[2 * l..]));
        acc[3] = step(acc[3], s.load(&x[3 * l..]), s.load(&y[3 * l..]));
    }
    let mut ca = ca.remainder().chunks_exact(l);
    let mut cb = cb.remainder().chunks_exact(l);
    for (x, y) in (&mut ca).zip(&mut cb) {
        acc[0] = step(acc[0], s.load(x), s.load(y));
    }
    let (ta, tb) = (ca.remainder(), cb.remainder());
    if !ta.is_empty() {
        acc[1] = step(acc[1], s.load_partial(ta, 0.0), s.load_partial(tb, 0.0));
    }
    s.add(s.add(acc[0], acc[1]), s.add(acc[2], acc[3]))
}

/// Σ f(x_i), blocked.
// Plain loops, not iterator adaptors: a `sum()` over `map()` may stay out of line, outside
// the ISA's target-feature context.
#[inline(always)]
fn blocked_sum<S: Simd>(s: S, x: &[f32], f: impl Fn(S::V) -> S::V + Copy) -> f64 {
    let mut total = 0.0f64;
    for blk in x.chunks(BLOCK) {
        let v = fold(s, blk, 0.0, s.zero(), |acc, v| s.add(acc, f(v)), |a, b| s.add(a, b));
        total += s.reduce_add(v) as f64;
    }
    total
}

#[inline(always)]
pub fn sum<S: Simd>(s: S, x: &[f32]) -> f64 {
    blocked_sum(s, x, |v| v)
}

/// Σ |x_i|.
#[inline(always)]
pub fn sum_abs<S: Simd>(s: S, x: &[f32]) -> f64 {
    blocked_sum(s, x, |v| s.abs(v))
}

/// Σ x_i².
#[inline(always)]
pub fn sum_squares<S: Simd>(s: S, x: &[f32]) -> f64 {
    let mut total = 0.0f64;
    for blk in x.chunks(BLOCK) {
        total += s.reduce_add(fold(s, blk, 0.0, s.zero(), |acc, v| s.mul_add(v, v, acc), |a, b| s.add(a, b))) as f64;
    }
    total
}

/// Σ a_i b_i (same lengths, checked by the caller).
#[inline(always)]
pub fn dot<S: Simd>(s: S, a: &[f32], b: &[f32]) -> f64 {
    let mut total = 0.0f64;
    for (x, y) in a.chunks(BLOCK).zip(b.chunks(BLOCK)) {
        total += s.reduce_add(fold2(s, x, y, |acc, p, q| s.mul_add(p, q, acc))) as f64;
    }
    total
}

/// Largest element; NaN if any element is NaN; −inf for an empty slice.
#[inline(always)]
pub fn max<S: Simd>(s: S, x: &[f32]) -> f32 {
    extreme(s, x, f32::NEG_INFINITY, |a, b| s.max(a, b), |v| s.reduce_max(v))
}

/// Smallest element; NaN if any element is NaN; +inf for an empty slice.
#[inline(always)]
pub fn min<S: Simd>(s: S, x: &[f32]) -> f32 {
    extreme(s, x, f32::INFINITY, |a, b| s.min(a, b), |v| s.reduce_min(v))
}

/// Largest |x_i|; NaN if any element is NaN; 0 for an empty slice.
#[inline(always)]
pub fn max_abs<S: Simd>(s: S, x: &[f32]) -> f32 {
    let (m, nan) = fold(
        s,
        x,
        0.0,
        (s.zero(), s.mask_none()),
        |(m, n), v| (s.max(m, s.abs(v)), s.mask_or(n, s.is_nan(v))),
        |(a, n), (b, o)| (s.max(a, b), s.mask_or(n, o)),
    );
    if s.any(nan) {
        f32::NAN
    } else {
        s.reduce_max(m)
    }
}

#[inline(always)]
fn extreme<S: Simd>(s: S, x: &[f32], identity: f32, pick: impl Fn(S::V, S::V) -> S::V + Copy, reduce: impl Fn(S::V) -> f32) -> f32 {
    let (m, nan) = fold(
        s,
        x,
        identity,
        (s.splat(identity), s.mask_none()),
        |(m, n), v| (pick(m, v), s.mask_or(n, s.is_nan(v))),
        |(a, n), (b, o)| (pick(a, b), s.mask_or(n, o)),
    );
    if s.any(nan) {
        f32::NAN
    } else {
        reduce(m)
    }
}

/// Index of the first element equal to `target` (or the first NaN when `target` is NaN).
#[inline(always)]
pub fn position<S: Simd>(s: S, x: &[f32], target: f32) -> Option<usize> {
    let t = s.splat(target);
    let hit = |v: S::V| if target.is_nan() { s.is_nan(v) } else { s.eq(v, t) };
    let mut chunks = x.chunks_exact(S::LANES);
    let mut base = 0;
    for c in &mut chunks {
        if let Some(i) = s.first_set(hit(s.load(c))) {
            return Some(base + i);
        }
        base += S::LANES;
    }
    chunks.remainder().iter().position(|&v| if target.is_nan() { v.is_nan() } else { v == target }).map(|i| base + i)
}
