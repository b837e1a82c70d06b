//! Packing: copies a block of A (or B) into the order the micro-kernel reads it, in strips
//! of MR rows (NR columns), one k step after another, zero-padded past the matrix edge so
//! the kernel never needs a slow path.

use crate::matrix::MatRef;

/// Packs rows `i0..i0+mc`, columns `p0..p0+kc` of `a` into `dst` as `ceil(mc/MR)` strips of
/// `kc × MR` (k-major: the MR values of one k step are adjacent).
#[inline(always)]
pub fn pack_a<const MR: usize>(a: &MatRef, i0: usize, mc: usize, p0: usize, kc: usize, dst: &mut [f32]) {
    for (strip, out) in dst.chunks_exact_mut(kc * MR).take(mc.div_ceil(MR)).enumerate() {
        let r0 = i0 + strip * MR;
        let rows = MR.min(i0 + mc - r0);
        if a.cs == 1 && rows == MR {
            // Row-major A: MR row streams, interleaved.
            let base: [usize; MR] = core::array::from_fn(|i| (r0 + i) * a.rs + p0);
            for (k, o) in out.chunks_exact_mut(MR).enumerate() {
                for i in 0..MR {
                    o[i] = a.data[base[i] + k];
                }
            }
        } else if a.rs == 1 && rows == MR {
            // Column-major A (a transposed row-major one): each k step is contiguous.
            for (k, o) in out.chunks_exact_mut(MR).enumerate() {
                let s = r0 + (p0 + k) * a.cs;
                o.copy_from_slice(&a.data[s..s + MR]);
            }
        } else {
            for (k, o) in out.chunks_exact_mut(MR).enumerate() {
                for (i, x) in o.iter_mut().enumerate() {
                    *x = if i < rows { a.at(r0 + i, p0 + k) } else { 0.0 };
                }
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
