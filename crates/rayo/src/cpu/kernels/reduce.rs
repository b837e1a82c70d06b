//! Reductions: sums and dot products (blocked: f32 vector partials per block, f64 across
//! blocks, so the error grows with the block size, not with n), and NaN-propagating max/min.

use crate::cpu::kernels::elementwise::head_len;
use crate::cpu::simd::{Simd, SimdExt};

/// Elements per block of a blocked sum: each of the 4·LANES partial sums adds at most
/// `BLOCK / (4·LANES)` terms in f32 before it is carried into f64.
const BLOCK: usize = 4096;

/// Folds `x` four vectors at a time: `step4` takes the state and four vectors (its
/// independent accumulators hide the latency of the step), `step1` one vector (what is left,
/// and the head and tail padded with `fill`). With `ALIGNED` the head is the few elements
/// before the first vector-aligned address, so no load of the main loop straddles two cache
/// lines; that is for max/min only, whose result does not depend on the order: which elements
/// share a lane would then depend on the slice's address, and a sum's rounding with it (the
/// same input could sum differently from one run to the next).
#[inline(always)]
fn fold<S: Simd, A, const ALIGNED: bool>(s: S, x: &[f32], fill: f32, init: A, step4: impl Fn(A, [S::V; 4]) -> A, step1: impl Fn(A, S::V) -> A) -> A {
    let l = S::LANES;
    let (head, x) = x.split_at(if ALIGNED { head_len::<S>(x) } else { 0 });
    let mut acc = init;
    if !head.is_empty() {
        acc = step1(acc, s.load_partial(head, fill));
    }
    let mut c4 = x.chunks_exact(4 * l);
    for c in &mut c4 {
        acc = step4(acc, [s.load(c), s.load(&c[l..]), s.load(&c[2 * l..]), s.load(&c[3 * l..])]);
    }
    let mut c1 = c4.remainder().chunks_exact(l);
    for c in &mut c1 {
        acc = step1(acc, s.load(c));
    }
    let tail = c1.remainder();
    if !tail.is_empty() {
        acc = step1(acc, s.load_partial(tail, fill));
    }
    acc
}

/// `[f(a[0], v[0]), …, f(a[3], v[3])]`: four independent accumulators stepped at once.
#[inline(always)]
fn each<V: Copy, W: Copy>(a: [V; 4], v: [W; 4], f: impl Fn(V, W) -> V) -> [V; 4] {
    [f(a[0], v[0]), f(a[1], v[1]), f(a[2], v[2]), f(a[3], v[3])]
}

/// Four vector accumulators merged into one (`(a0 ∘ a1) ∘ (a2 ∘ a3)`).
#[inline(always)]
fn merge4<V: Copy>(a: [V; 4], f: impl Fn(V, V) -> V) -> V {
    f(f(a[0], a[1]), f(a[2], a[3]))
}

/// Σ f(v) over `x` (one block), as one vector of partial sums.
#[inline(always)]
fn fold_sum<S: Simd>(s: S, x: &[f32], f: impl Fn(S::V) -> S::V + Copy) -> S::V {
    let z = s.zero();
    let acc = fold::<S, _, false>(s, x, 0.0, [z; 4], |a, v| each(a, v, |a, v| s.add(a, f(v))), |a, v| [s.add(a[0], f(v)), a[1], a[2], a[3]]);
    merge4(acc, |a, b| s.add(a, b))
}

/// Two-input version of [`fold`] for dot products (lanes by index, as a sum's).
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
    merge4(acc, |a, b| s.add(a, b))
}

/// Σ f(x_i), blocked.
// Plain loops, not iterator adaptors: a `sum()` over `map()` may stay out of line, outside
// the ISA's target-feature context.
#[inline(always)]
fn blocked_sum<S: Simd>(s: S, x: &[f32], f: impl Fn(S::V) -> S::V + Copy) -> f64 {
    let mut total = 0.0f64;
    for blk in x.chunks(BLOCK) {
        total += s.reduce_add(fold_sum(s, blk, f)) as f64;
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
        let z = s.zero();
        let acc =
            fold::<S, _, false>(s, blk, 0.0, [z; 4], |a, v| each(a, v, |a, v| s.mul_add(v, v, a)), |a, v| [s.mul_add(v, v, a[0]), a[1], a[2], a[3]]);
        total += s.reduce_add(merge4(acc, |a, b| s.add(a, b))) as f64;
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
    extreme(s, x, 0.0, |m, v| s.max(m, s.abs(v)), |v| s.reduce_max(v))
}

/// Folds `pick` over `x` (four accumulators) while watching for NaN, two vectors per compare;
/// NaN if there was one, else `reduce` of the merged accumulators.
#[inline(always)]
fn extreme<S: Simd>(s: S, x: &[f32], identity: f32, pick: impl Fn(S::V, S::V) -> S::V + Copy, reduce: impl Fn(S::V) -> f32) -> f32 {
    let none = s.mask_none();
    let (m, n) = fold::<S, _, true>(
        s,
        x,
        identity,
        ([s.splat(identity); 4], [none; 2]),
        |(m, n), v| (each(m, v, pick), [s.mask_or(n[0], s.either_nan(v[0], v[1])), s.mask_or(n[1], s.either_nan(v[2], v[3]))]),
        |(m, n), v| ([pick(m[0], v), m[1], m[2], m[3]], [s.mask_or(n[0], s.is_nan(v)), n[1]]),
    );
    if s.any(s.mask_or(n[0], n[1])) {
        f32::NAN
    } else {
        reduce(merge4(m, pick))
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
