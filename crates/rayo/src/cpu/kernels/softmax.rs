//! Pieces of softmax and log-softmax over one slice (max, exp-sum, scale), each one pass.

use super::elementwise::map;
use super::functions::ExpShifted;
use super::reduce;
use crate::cpu::{math, simd::Simd};

/// Σ exp(x_i − m), blocked like the other sums.
#[inline(always)]
pub fn sum_exp_shifted<S: Simd>(s: S, x: &[f32], m: f32) -> f64 {
    let mv = s.splat(m);
    let mut total = 0.0f64;
    for blk in x.chunks(4096) {
        let mut acc = [s.splat(0.0), s.splat(0.0)];
        let mut c = blk.chunks_exact(2 * S::LANES);
        for v in &mut c {
            acc[0] = s.add(acc[0], math::exp(s, s.sub(s.load(v), mv)));
            acc[1] = s.add(acc[1], math::exp(s, s.sub(s.load(&v[S::LANES..]), mv)));
        }
        // Pad with −inf: exp(−inf) = 0 adds nothing.
        for t in c.remainder().chunks(S::LANES) {
            let v = if t.len() == S::LANES { s.load(t) } else { s.load_partial(t, f32::NEG_INFINITY) };
            acc[0] = s.add(acc[0], math::exp(s, s.sub(v, mv)));
        }
        total += s.reduce_add(s.add(acc[0], acc[1])) as f64;
    }
    total
}

/// out_i = exp(x_i − m); returns Σ out_i.
#[inline(always)]
pub fn exp_shifted_into<S: Simd>(s: S, x: &[f32], m: f32, out: &mut [f32]) -> f64 {
    map(s, x, out, ExpShifted { m });
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
