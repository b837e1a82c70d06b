//! Direct "valid" 2-D convolution (cross-correlation, no kernel flip, as ML frameworks do),
//! register-blocked: a strip of 4 vectors of output columns stays in registers while every
//! kernel tap adds its weight times the matching (shifted) input strip.

use crate::cpu::simd::Simd;

/// Output vectors per register strip.
const STRIP: usize = 4;

/// `out (+)= img ⋆ ker` for one channel: img is h×w, ker kh×kw, out (h−kh+1)×(w−kw+1), all
/// dense row-major. With `accumulate` the result is added to `out` (multi-channel sums).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_valid<S: Simd>(s: S, img: &[f32], w: usize, ker: &[f32], kh: usize, kw: usize, out: &mut [f32], oh: usize, accumulate: bool) {
    let ow = w - kw + 1;
    let l = S::LANES;
    for i in 0..oh {
        let orow = &mut out[i * ow..(i + 1) * ow];
        let mut j = 0;
        while j + STRIP * l <= ow {
            let mut acc: [S::V; STRIP] = core::array::from_fn(|c| if accumulate { s.load(&orow[j + c * l..]) } else { s.splat(0.0) });
            for u in 0..kh {
                let irow = &img[(i + u) * w + j..(i + u + 1) * w];
                for (v, &kv) in ker[u * kw..(u + 1) * kw].iter().enumerate() {
                    let kv = s.splat(kv);
                    for (c, a) in acc.iter_mut().enumerate() {
                        *a = s.mul_add(kv, s.load(&irow[v + c * l..]), *a);
                    }
                }
            }
            for (c, a) in acc.iter().enumerate() {
                s.store(&mut orow[j + c * l..], *a);
            }
            j += STRIP * l;
        }
        // The rest of the row, a vector (or part of one) at a time.
        while j < ow {
            let n = l.min(ow - j);
            let mut acc = if accumulate { s.load_partial(&orow[j..j + n], 0.0) } else { s.splat(0.0) };
            for u in 0..kh {
                let irow = &img[(i + u) * w..(i + u + 1) * w];
                for (v, &kv) in ker[u * kw..(u + 1) * kw].iter().enumerate() {
                    let x = if n == l { s.load(&irow[j + v..]) } else { s.load_partial(&irow[j + v..j + v + n], 0.0) };
                    acc = s.mul_add(s.splat(kv), x, acc);
                }
            }
            if n == l {
                s.store(&mut orow[j..], acc);
            } else {
                s.store_partial(&mut orow[j..j + n], acc);
            }
            j += n;
        }
    }
}
