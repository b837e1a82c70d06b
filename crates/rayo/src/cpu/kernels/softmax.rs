//! Numerically stable softmax and log-softmax over one slice (three passes: max, exp-sum,
//! scale). Any NaN, or a non-finite maximum, makes every output NaN, as the f64 formula does.

use super::{elementwise, reduce};
use crate::cpu::{math, simd::Simd};

/// Σ exp(x_i − m), blocked like the other sums.
#[inline(always)]
pub fn sum_exp_shifted<S: Simd>(s: S, x: &[f32], m: f32) -> f64 {
    let mv = s.splat(m);
    x.chunks(4096)
        .map(|blk| {
            let mut acc = s.splat(0.0);
            let mut c = blk.chunks_exact(S::LANES);
            for v in &mut c {
                acc = s.add(acc, math::exp(s, s.sub(s.load(v), mv)));
            }
            // Pad with −inf: exp(−inf) = 0 adds nothing.
            let t = c.remainder();
            if !t.is_empty() {
                acc = s.add(acc, math::exp(s, s.sub(s.load_partial(t, f32::NEG_INFINITY), mv)));
            }
            s.reduce_add(acc) as f64
        })
        .sum()
}

/// out_i = exp(x_i − m); returns Σ out_i.
#[inline(always)]
pub fn exp_shifted_into<S: Simd>(s: S, x: &[f32], m: f32, out: &mut [f32]) -> f64 {
    let mv = s.splat(m);
    elementwise::map(s, x, out, |v| math::exp(s, s.sub(v, mv)));
    reduce::sum(s, out)
}

/// out_i *= k.
#[inline(always)]
pub fn scale_in_place<S: Simd>(s: S, out: &mut [f32], k: f32) {
    let kv = s.splat(k);
    let mut c = out.chunks_exact_mut(S::LANES);
    for v in &mut c {
        let y = s.mul(s.load(v), kv);
        s.store(v, y);
    }
    let t = c.into_remainder();
    if !t.is_empty() {
        let y = s.mul(s.load_partial(t, 0.0), kv);
        s.store_partial(t, y);
    }
}
