//! Matrix–vector products without packing: `y = alpha·A·x + beta·y` when A is row-major
//! (four row dot products at a time, sharing each load of x) or column-major (one axpy per
//! column into y). These are memory-bound: each element of A is read once.

use crate::cpu::simd::Simd;

/// Rows of A per pass of the row-major form.
const ROWS: usize = 4;

/// `y[i] = alpha·(A_i · x) + beta·y[i]` for row-major A (`rs` apart), contiguous x, y with
/// stride `ys`. With `beta == 0` y is only written.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn rows_dot<S: Simd>(s: S, a: &[f32], rs: usize, m: usize, x: &[f32], alpha: f32, beta: f32, y: &mut [f32], ys: usize) {
    let k = x.len();
    let l = S::LANES;
    let put = |y: &mut [f32], i: usize, d: f32| {
        let t = &mut y[i * ys];
        *t = if beta == 0.0 { alpha * d } else { alpha * d + beta * *t };
    };
    let mut i = 0;
    while i + ROWS <= m {
        let r: [&[f32]; ROWS] = core::array::from_fn(|j| &a[(i + j) * rs..(i + j) * rs + k]);
        let mut acc = [s.splat(0.0); ROWS];
        let mut p = 0;
        while p + l <= k {
            let xv = s.load(&x[p..]);
            for j in 0..ROWS {
                acc[j] = s.mul_add(s.load(&r[j][p..]), xv, acc[j]);
            }
            p += l;
        }
        if p < k {
            let xv = s.load_partial(&x[p..], 0.0);
            for j in 0..ROWS {
                acc[j] = s.mul_add(s.load_partial(&r[j][p..], 0.0), xv, acc[j]);
            }
        }
        for (j, v) in acc.iter().enumerate() {
            put(y, i + j, s.reduce_add(*v));
        }
        i += ROWS;
    }
    for i in i..m {
        let d = crate::cpu::kernels::reduce::dot(s, &a[i * rs..i * rs + k], x) as f32;
        put(y, i, d);
    }
}

/// `y = alpha·A·x + beta·y` for column-major A (columns `cs` apart, m long), x with stride
/// `xs`, contiguous y.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn cols_axpy<S: Simd>(s: S, a: &[f32], cs: usize, k: usize, x: &[f32], xs: usize, alpha: f32, beta: f32, y: &mut [f32]) {
    let m = y.len();
    let l = S::LANES;
    if beta == 0.0 {
        y.fill(0.0);
    } else if beta != 1.0 {
        for t in y.iter_mut() {
            *t *= beta;
        }
    }
    for j in 0..k {
        let col = &a[j * cs..j * cs + m];
        let w = s.splat(alpha * x[j * xs]);
        let mut yc = y.chunks_exact_mut(l);
        let mut cc = col.chunks_exact(l);
        for (yv, cv) in (&mut yc).zip(&mut cc) {
            s.store(yv, s.mul_add(w, s.load(cv), s.load(yv)));
        }
        let (yr, cr) = (yc.into_remainder(), cc.remainder());
        if !yr.is_empty() {
            s.store_partial(yr, s.mul_add(w, s.load_partial(cr, 0.0), s.load_partial(yr, 0.0)));
        }
    }
}
