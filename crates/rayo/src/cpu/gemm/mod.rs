//! GEMM on the CPU: `C = alpha·A·B + beta·C` over strided views, the way the fastest BLAS
//! libraries do it (packing, cache blocking, a register-blocked micro-kernel per instruction
//! set, threads over row blocks), plus unpacked matrix–vector paths.

mod driver;
mod gemv;
mod kernel;
mod pack;

use crate::cpu::parallel::Par;
use crate::cpu::simd::Simd;
use crate::matrix::{MatMut, MatRef};
use crate::Backend;

/// The tile each instruction set uses: `MR` rows × `NV` vectors, sized to its register file.
pub trait GemmTile: Simd {
    fn gemm(self, alpha: f32, a: MatRef, b: MatRef, beta: f32, c: MatMut, threads: usize);
}

macro_rules! tile_for {
    ($isa:ty, $mr:literal, $nv:literal, in_place: $ip:literal) => {
        impl GemmTile for $isa {
            fn gemm(self, alpha: f32, a: MatRef, b: MatRef, beta: f32, c: MatMut, threads: usize) {
                driver::run::<Self, $mr, $nv, $ip>(self, alpha, a, b, beta, c, threads)
            }
        }
    };
}

// `in_place`: small row-major operands are read where they are. Only worth it with 32 vector
// registers: with 16, the strided addressing pushes an accumulator to the stack (measured:
// AVX2 at 64..256 runs 57-61 GFLOP/s in place, 72-110 packed; AVX-512 the other way round).
// 32 zmm registers: 24 accumulators (6 rows × 4 vectors), 4 B vectors, broadcasts.
#[cfg(target_arch = "x86_64")]
tile_for!(crate::cpu::isa::avx512::Avx512, 6, 4, in_place: true);
// 16 ymm registers: 12 accumulators, 2 B vectors, 1 broadcast.
#[cfg(target_arch = "x86_64")]
tile_for!(crate::cpu::isa::avx2::Avx2, 6, 2, in_place: false);
#[cfg(target_arch = "x86_64")]
tile_for!(crate::cpu::isa::sse2::Sse2, 6, 2, in_place: false);
// 32 q registers: 24 accumulators.
#[cfg(target_arch = "aarch64")]
tile_for!(crate::cpu::isa::neon::Neon, 8, 3, in_place: true);
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
tile_for!(crate::cpu::isa::simd128::Simd128, 4, 2, in_place: false);
tile_for!(crate::cpu::isa::scalar::Scalar, 4, 4, in_place: false);

/// Below this many multiply-adds (m·n·k) one thread does the whole product: splitting
/// costs more than it saves (measured with `rayo bench --op matmul --threads 2`).
const THREAD_MIN_WORK: usize = 96 * 96 * 96;

/// `C = alpha·A·B + beta·C` on `backend` with up to `par`'s threads; shapes checked by the
/// caller (`matrix::gemm_par`), and `m·n·k` within `isize::MAX`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm(backend: Backend, par: Par, alpha: f32, a: MatRef, b: MatRef, beta: f32, c: MatMut) {
    let (m, n, k) = (a.rows, b.cols, a.cols);
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 || alpha == 0.0 {
        return scale(c, beta);
    }
    // Work on whichever of C, Cᵀ is row-major-like: Cᵀ = Bᵀ·Aᵀ.
    if m > 1 && c.rs < c.cs {
        return gemm(backend, par, alpha, b.t(), a.t(), beta, c.t());
    }
    if n == 1 || m == 1 {
        if let Some(()) = try_gemv(backend, alpha, a, b, beta, c.data, c.rs, c.cs) {
            return;
        }
    }
    let work = m.saturating_mul(n).saturating_mul(k);
    let threads = if work >= THREAD_MIN_WORK { par.thread_count() } else { 1 };
    crate::backend::dispatch!(backend, |s| GemmTile::gemm(s, alpha, a, b, beta, c, threads))
}

/// Matrix–vector forms that need no packing; `None` when the layout has no fast form.
#[allow(clippy::too_many_arguments)]
fn try_gemv(backend: Backend, alpha: f32, a: MatRef, b: MatRef, beta: f32, c: &mut [f32], crs: usize, ccs: usize) -> Option<()> {
    let (m, n, k) = (a.rows, b.cols, a.cols);
    if n == 1 {
        // y (m) = A (m×k) · x (k)
        let x = b;
        if a.cs == 1 && x.rs == 1 {
            let xs = &x.data[..k];
            crate::backend::dispatch!(backend, |s| gemv::rows_dot(s, a.data, a.rs, m, xs, alpha, beta, c, crs));
            return Some(());
        }
        if a.rs == 1 && crs == 1 {
            let y = &mut c[..m];
            crate::backend::dispatch!(backend, |s| gemv::cols_axpy(s, a.data, a.cs, k, x.data, x.rs, alpha, beta, y));
            return Some(());
        }
        return None;
    }
    // m == 1: yᵀ (n) = Bᵀ (n×k) · aᵀ (k)
    try_gemv(backend, alpha, b.t(), a.t(), beta, c, ccs, crs)
}

/// `C = beta·C` (all zeros when `beta == 0`, whatever C held).
fn scale(c: MatMut, beta: f32) {
    for i in 0..c.rows {
        for j in 0..c.cols {
            let x = &mut c.data[i * c.rs + j * c.cs];
            *x = if beta == 0.0 { 0.0 } else { beta * *x };
        }
    }
}
