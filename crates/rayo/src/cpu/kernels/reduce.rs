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
/// same input could sum differently from one run to the next; [`dot`] aligns its loop and
/// keeps lanes by index by rotating its accumulators).
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

/// Lane numbers, for the masks of a dot product's head and tail.
const IOTA: [f32; 16] = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0];

/// Σ a_i b_i (same lengths, checked by the caller), blocked as a sum. The main loop runs on
/// addresses where `a` is vector-aligned (no load of `a` straddles two cache lines: at 100 K
/// floats, in L2, a split line costs what the loop has to spare), and yet the rounding is
/// that of lanes by index, so the same values give the same bits at any address: within a
/// block, element `j` lands in partial sum `j mod 4·LANES` (lane `j mod LANES` of accumulator
/// `(j / LANES) mod 4`), each partial sum adds its elements in index order, and the partial
/// sums are merged in one fixed order, `(P0 + P1) + (P2 + P3)` lane by lane (`Pq` the vector
/// of partial sums `q·LANES ..`), then `reduce_add`.
///
/// With `h` elements before `a`'s first aligned address, the loop's accumulators hold the
/// partial sums rotated by `h` (accumulator `q`, lane `r`: partial sum `(h + q·LANES + r) mod
/// 4·LANES`). So a block's head goes into the top `h` lanes of the last accumulator (where
/// partial sums `0..h` sit), what is left after the loop into accumulators `0, 1, …`, and the
/// merge takes lanes below `LANES − h` from `(A0 + A1) + (A2 + A3)` and the others from
/// `(A3 + A0) + (A1 + A2)` (the same partners by index), rotated back by `h` lanes.
#[inline(always)]
pub fn dot<S: Simd>(s: S, a: &[f32], b: &[f32]) -> f64 {
    let (l, n) = (S::LANES, a.len());
    let h = (l - (a.as_ptr() as usize / 4) % l) % l;
    let z = s.zero();
    let iota = s.load(&IOTA);
    // Lanes `l − h ..`: the head's lanes in the rotated accumulators.
    let top = s.le(s.splat((l - h) as f32), iota);
    let add = |p, q| s.add(p, q);
    let mut total = 0.0f64;
    let mut start = 0;
    while start < n {
        let end = (start + BLOCK).min(n);
        let mut acc = [z; 4];
        let head = h.min(end - start);
        if head > 0 {
            let (x, y) = if start + h >= l && start + h <= n {
                // The aligned vector that ends with the head, the previous block's lanes off.
                let i = start + h - l;
                (s.select(top, s.load(&a[i..]), z), s.select(top, s.load(&b[i..]), z))
            } else {
                let (x, y) = (s.load_partial(&a[start..start + head], 0.0), s.load_partial(&b[start..start + head], 0.0));
                (s.rotate_lanes(x, l - h), s.rotate_lanes(y, l - h))
            };
            acc[3] = s.mul_add(x, y, acc[3]);
        }
        let mut ca = a[start + head..end].chunks_exact(4 * l);
        let mut cb = b[start + head..end].chunks_exact(4 * l);
        for (x, y) in (&mut ca).zip(&mut cb) {
            acc[0] = s.mul_add(s.load(x), s.load(y), acc[0]);
            acc[1] = s.mul_add(s.load(&x[l..]), s.load(&y[l..]), acc[1]);
            acc[2] = s.mul_add(s.load(&x[2 * l..]), s.load(&y[2 * l..]), acc[2]);
            acc[3] = s.mul_add(s.load(&x[3 * l..]), s.load(&y[3 * l..]), acc[3]);
        }
        // What is left (under 4·LANES) into accumulators 0, 1, … by position; a last partial
        // vector as a full load with the next block's lanes off, where the slice has them.
        let mut i = end - ca.remainder().len();
        for v in acc.iter_mut() {
            let r = end - i;
            if r == 0 {
                break;
            }
            let (x, y) = if r >= l {
                (s.load(&a[i..]), s.load(&b[i..]))
            } else if i + l <= n {
                let m = s.lt(iota, s.splat(r as f32));
                (s.select(m, s.load(&a[i..]), z), s.select(m, s.load(&b[i..]), z))
            } else {
                (s.load_partial(&a[i..end], 0.0), s.load_partial(&b[i..end], 0.0))
            };
            *v = s.mul_add(x, y, *v);
            i += r.min(l);
        }
        let merged =
            if h == 0 { merge4(acc, add) } else { s.rotate_lanes(s.select(top, merge4([acc[3], acc[0], acc[1], acc[2]], add), merge4(acc, add)), h) };
        total += s.reduce_add(merged) as f64;
        start = end;
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
