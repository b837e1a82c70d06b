//! Packing: copies a block of B (or a strip of A) into the order the micro-kernel reads
//! it, zero-padded past the matrix edge so the kernel never needs a slow path.

use crate::matrix::MatRef;

/// Copies rows `i0..i0+rows`, columns `p0..p0+kc` of `a` into `dst` as one strip in the
/// order the kernel reads it: k-major (`KMAJOR`, the MR values of each k step adjacent) or
/// row-major (`MR × kc`); zeros for the rows past `rows`.
#[inline(always)]
pub fn pack_a<const MR: usize, const KMAJOR: bool>(a: &MatRef, i0: usize, rows: usize, p0: usize, kc: usize, dst: &mut [f32]) {
    let dst = &mut dst[..MR * kc];
    if KMAJOR {
        if a.cs == 1 && rows == MR {
            let src: [&[f32]; MR] = core::array::from_fn(|i| &a.data[(i0 + i) * a.rs + p0..][..kc]);
            for (k, o) in dst.chunks_exact_mut(MR).enumerate() {
                for i in 0..MR {
                    o[i] = src[i][k];
                }
            }
        } else if a.rs == 1 && rows == MR {
            for (k, o) in dst.chunks_exact_mut(MR).enumerate() {
                let s = i0 + (p0 + k) * a.cs;
                o.copy_from_slice(&a.data[s..s + MR]);
            }
        } else {
            for (k, o) in dst.chunks_exact_mut(MR).enumerate() {
                for (i, x) in o.iter_mut().enumerate() {
                    *x = if i < rows { a.at(i0 + i, p0 + k) } else { 0.0 };
                }
            }
        }
        return;
    }
    for (i, out) in dst.chunks_exact_mut(kc).enumerate() {
        if i >= rows {
            out.fill(0.0);
        } else if a.cs == 1 {
            let s = (i0 + i) * a.rs + p0;
            out.copy_from_slice(&a.data[s..s + kc]);
        } else {
            for (k, x) in out.iter_mut().enumerate() {
                *x = a.at(i0 + i, p0 + k);
            }
        }
    }
}

/// Packs rows `p0..p0+kc`, columns `j0..j0+nc` of `b` into `dst` as `ceil(nc/nr)` strips of
/// `kc × nr` (k-major: the nr values of one k step are adjacent).
#[inline(always)]
pub fn pack_b(b: &MatRef, p0: usize, kc: usize, j0: usize, nc: usize, nr: usize, dst: &mut [f32]) {
    for (strip, out) in dst.chunks_exact_mut(kc * nr).take(nc.div_ceil(nr)).enumerate() {
        let c0 = j0 + strip * nr;
        let cols = nr.min(j0 + nc - c0);
        if b.cs == 1 && cols == nr {
            for (k, o) in out.chunks_exact_mut(nr).enumerate() {
                let s = (p0 + k) * b.rs + c0;
                o.copy_from_slice(&b.data[s..s + nr]);
            }
        } else if b.rs == 1 {
            // Column-major B: read each column's k run once.
            for j in 0..nr {
                if j < cols {
                    let s = p0 + (c0 + j) * b.cs;
                    for (k, &x) in b.data[s..s + kc].iter().enumerate() {
                        out[k * nr + j] = x;
                    }
                } else {
                    for k in 0..kc {
                        out[k * nr + j] = 0.0;
                    }
                }
            }
        } else {
            for (k, o) in out.chunks_exact_mut(nr).enumerate() {
                for (j, x) in o.iter_mut().enumerate() {
                    *x = if j < cols { b.at(p0 + k, c0 + j) } else { 0.0 };
                }
            }
        }
    }
}
