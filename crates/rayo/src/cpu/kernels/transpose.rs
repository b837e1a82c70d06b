//! Transpose: square tiles small enough that a tile of the source and one of the destination
//! sit in L1 together, so every cache line is read once and written once; tiles split over
//! the threads by rows of the source.

use crate::cpu::parallel;
use crate::cpu::simd::Simd;

/// Tile edge (elements): 32 rows × 32 floats = 4 KiB per side.
const TILE: usize = 32;

/// `dst[j·ldb + i] = src[i·lda + j]` for i < rows, j < cols.
#[inline(always)]
pub fn transpose_block<S: Simd>(_s: S, src: &[f32], rows: usize, cols: usize, lda: usize, dst: &mut [f32], ldb: usize) {
    for i0 in (0..rows).step_by(TILE) {
        let ie = TILE.min(rows - i0);
        for j0 in (0..cols).step_by(TILE) {
            let je = TILE.min(cols - j0);
            if ie == TILE && je == TILE {
                // Fixed trip counts: the compiler unrolls and vectorizes the 8×8 sub-blocks.
                for ib in (0..TILE).step_by(8) {
                    for jb in (0..TILE).step_by(8) {
                        let mut t = [[0.0f32; 8]; 8];
                        for (r, row) in t.iter_mut().enumerate() {
                            let s = (i0 + ib + r) * lda + j0 + jb;
                            row.copy_from_slice(&src[s..s + 8]);
                        }
                        for c in 0..8 {
                            let d = (j0 + jb + c) * ldb + i0 + ib;
                            let out = &mut dst[d..d + 8];
                            for r in 0..8 {
                                out[r] = t[r][c];
                            }
                        }
                    }
                }
            } else {
                for i in i0..i0 + ie {
                    for j in j0..j0 + je {
                        dst[j * ldb + i] = src[i * lda + j];
                    }
                }
            }
        }
    }
}

/// Source rows per thread worth splitting for.
const GRAIN_ELEMS: usize = 1 << 18;

/// Transposes the dense `rows × cols` `src` into `dst` (`cols × rows`), splitting the
/// destination by column blocks (= source row blocks) over the threads.
pub fn transpose_parallel(
    src: &[f32],
    rows: usize,
    cols: usize,
    dst: &mut [f32],
    block: &(impl Fn(&[f32], usize, usize, usize, &mut [f32], usize) + Sync),
) {
    let parts = parallel::parts(rows * cols, GRAIN_ELEMS);
    if parts <= 1 || rows < 2 * TILE {
        return block(src, rows, cols, cols, dst, rows);
    }
    // Split by destination rows (= source columns): each half owns a contiguous part of dst.
    let half = (cols / 2).div_ceil(TILE) * TILE;
    let (d0, d1) = dst.split_at_mut(half * rows);
    parallel::both(
        || block(src, rows, half, cols, d0, rows),
        || block(&src[half..], rows, cols - half, cols, d1, rows),
    );
}
