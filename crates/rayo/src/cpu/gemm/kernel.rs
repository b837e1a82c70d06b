//! The register-blocked micro-kernel: an `MR × NR` tile of C (NR = NV·LANES) held in
//! `MR·NV` vector registers while k runs over packed panels of A and B. Written once over
//! `Simd`; each instruction set picks the tile that fills its register file (`GemmTile`).

use crate::cpu::simd::Simd;

/// Largest tile any instruction set uses (elements); sizes the stack buffer of edge tiles.
pub const MAX_TILE: usize = 16 * 64;

/// `Σ_k a[i][k] · b[k][j]` for one tile. Row `k` of B is `b[k·brs..][..NR]` (a packed
/// strip, or B itself when small and row-major). A is either packed k-major (`KMAJOR`: the
/// MR values of step k at `a[k·MR..]`, so every broadcast has a constant offset) or read in
/// place, row `i` at `a[i·ars..][..kc]` (small row-major A, where packing would cost more).
#[inline(always)]
pub fn tile<S: Simd, const MR: usize, const NV: usize, const KMAJOR: bool>(
    s: S,
    kc: usize,
    a: &[f32],
    ars: usize,
    b: &[f32],
    brs: usize,
) -> [[S::V; NV]; MR] {
    let nr = NV * S::LANES;
    let mut acc = [[s.splat(0.0); NV]; MR];
    if KMAJOR && brs == nr {
        // Both packed: exact chunks, so the loop carries no bounds checks (their registers
        // would push an accumulator out to the stack on 16-register ISAs).
        for (ak, bk) in a[..kc * MR].chunks_exact(MR).zip(b[..kc * nr].chunks_exact(nr)) {
            step::<S, MR, NV>(s, &mut acc, bk, |i| ak[i]);
        }
    } else if KMAJOR {
        for (k, ak) in a[..kc * MR].chunks_exact(MR).enumerate() {
            step::<S, MR, NV>(s, &mut acc, &b[k * brs..k * brs + nr], |i| ak[i]);
        }
    } else {
        let rows: [&[f32]; MR] = core::array::from_fn(|i| &a[i * ars..i * ars + kc]);
        for k in 0..kc {
            step::<S, MR, NV>(s, &mut acc, &b[k * brs..k * brs + nr], |i| rows[i][k]);
        }
    }
    acc
}

/// One k step: the NV vectors of B's row times each of A's MR values.
#[inline(always)]
fn step<S: Simd, const MR: usize, const NV: usize>(s: S, acc: &mut [[S::V; NV]; MR], bk: &[f32], ai: impl Fn(usize) -> f32) {
    let bv: [S::V; NV] = core::array::from_fn(|v| s.load(&bk[v * S::LANES..]));
    for (i, row) in acc.iter_mut().enumerate() {
        let x = s.splat(ai(i));
        for v in 0..NV {
            row[v] = s.mul_add(x, bv[v], row[v]);
        }
    }
}

/// `C = alpha·acc + beta·C` for the top-left `rows × cols` of a tile, C row-major-like with
/// row stride `rs` and column stride `cs`. With `beta == 0` C is only written (a NaN
/// there does not survive), as BLAS does.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn store<S: Simd, const MR: usize, const NV: usize>(
    s: S,
    acc: &[[S::V; NV]; MR],
    c: &mut [f32],
    rs: usize,
    cs: usize,
    rows: usize,
    cols: usize,
    alpha: f32,
    beta: f32,
) {
    let l = S::LANES;
    let nr = NV * l;
    let va = s.splat(alpha);
    if cs == 1 && rows == MR && cols == nr {
        let vb = s.splat(beta);
        for (i, row) in acc.iter().enumerate() {
            let dst = &mut c[i * rs..i * rs + nr];
            for (v, &x) in row.iter().enumerate() {
                let d = &mut dst[v * l..];
                let r = if beta == 0.0 { s.mul(x, va) } else { s.mul_add(s.load(d), vb, s.mul(x, va)) };
                s.store(d, r);
            }
        }
        return;
    }
    // Edge tile or strided C: through a buffer, element by element.
    let mut buf = [0.0f32; MAX_TILE];
    for (i, row) in acc.iter().enumerate().take(rows) {
        for (v, &x) in row.iter().enumerate() {
            s.store(&mut buf[(i * NV + v) * l..], s.mul(x, va));
        }
    }
    for i in 0..rows {
        for j in 0..cols {
            let d = &mut c[i * rs + j * cs];
            let r = buf[i * nr + j];
            *d = if beta == 0.0 { r } else { r + beta * *d };
        }
    }
}
