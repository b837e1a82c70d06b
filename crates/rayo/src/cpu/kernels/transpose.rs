//! Transpose: `LANES × LANES` tiles transposed in registers (`Simd::transpose_tile`), so
//! every cache line of the source is read once and every line of the destination written
//! once; split over the threads by destination rows.

use crate::cpu::parallel;
use crate::cpu::simd::Simd;

/// Block edge (elements): measured best at 16 (one AVX-512 tile; 32, 64, 128 and 256 were
/// slower at 1024² and 4096²).
const BLOCK: usize = 16;

/// `dst[j·ldb + i] = src[i·lda + j]` for i < rows, j < cols.
#[inline(always)]
pub fn transpose_block<S: Simd>(s: S, src: &[f32], rows: usize, cols: usize, lda: usize, dst: &mut [f32], ldb: usize) {
    let l = S::LANES;
    let (rf, cf) = (rows / l * l, cols / l * l);
    for i0 in (0..rf).step_by(BLOCK) {
        for j0 in (0..cf).step_by(BLOCK) {
            for i in (i0..rf.min(i0 + BLOCK)).step_by(l) {
                for j in (j0..cf.min(j0 + BLOCK)).step_by(l) {
                    s.transpose_tile(&src[i * lda + j..], lda, &mut dst[j * ldb + i..], ldb);
                }
            }
        }
    }
    // The ragged right and bottom edges, element by element.
    for i in 0..rows {
        let from = if i < rf { cf } else { 0 };
        for j in from..cols {
            dst[j * ldb + i] = src[i * lda + j];
        }
    }
}

/// Elements worth a second thread.
const GRAIN_ELEMS: usize = 1 << 18;

/// Transposes the dense `rows × cols` `src` into `dst` (`cols × rows`), splitting the
/// destination by row blocks (= source column blocks) over the threads.
pub fn transpose_parallel(
    src: &[f32],
    rows: usize,
    cols: usize,
    dst: &mut [f32],
    block: &(impl Fn(&[f32], usize, usize, usize, &mut [f32], usize) + Sync),
) {
    let parts = parallel::parts(rows * cols, GRAIN_ELEMS);
    if parts <= 1 || cols < 2 * BLOCK {
        return block(src, rows, cols, cols, dst, rows);
    }
    let half = (cols / 2).div_ceil(BLOCK) * BLOCK;
    let (d0, d1) = dst.split_at_mut(half * rows);
    parallel::both(|| block(src, rows, half, cols, d0, rows), || block(&src[half..], rows, cols - half, cols, d1, rows));
}
