//! fp32 GEMM, `C[m×n] = A[m×k] · B[k×n]`, all row-major, shapes baked into the kernel.
//! Parameters: `a`, `b`, `c` (u64 device pointers).
//!
//! - `naive`: one thread per output, any shape.
//! - `tiled(tile)`: square shared-memory tiles, any shape (bounds-checked loads and stores).
//! - `blocked`: 128×128 block tile, BK-deep slices, 8×8 outputs per thread held in registers,
//!   16-byte global and shared loads, the A slice stored transposed, two shared buffers so the
//!   next slice's global loads overlap the current slice's FMAs (one barrier per slice). Needs
//!   `m % 128 == 0`, `n % 128 == 0`, `k % BK == 0`; [`GemmKernel::auto`] falls back to `tiled`.

mod blocked;
mod prologue;
mod simple;
mod tensor_core;

use super::{Kernel, LaunchConfig};
use crate::ptx::PtxKernel;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemmVariant {
    Naive,
    Tiled { tile: u32 },
    /// `split` = 1, or 2 for split-K: two blocks per output tile, each half of `k`, adding
    /// into a zeroed `c` (two adds onto zero: the same bits in either order).
    Blocked { bk: u32, split: u32 },
    /// TF32 tensor cores (`mma.sync`), 128×128 tiles, `bk`-deep slices (8 or 16): products
    /// rounded to TF32.
    TensorCore { bk: u32 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemmKernel {
    pub m: u32,
    pub n: u32,
    pub k: u32,
    pub variant: GemmVariant,
}

impl GemmKernel {
    pub fn naive(m: u32, n: u32, k: u32) -> GemmKernel {
        GemmKernel { m, n, k, variant: GemmVariant::Naive }
    }

    /// Square tiles of `tile`×`tile` threads; `tile` is rounded to a power of two in 8..=32.
    pub fn tiled(m: u32, n: u32, k: u32, tile: u32) -> GemmKernel {
        let tile = tile.clamp(8, 32).next_power_of_two().min(32);
        GemmKernel { m, n, k, variant: GemmVariant::Tiled { tile } }
    }

    /// TF32 tensor-core GEMM (fp32 in and out, products with a 10-bit mantissa) when
    /// `m % 128 == 0`, `n % 128 == 0`, `k % 8 == 0`; other shapes get the exact fp32 tiled kernel.
    pub fn tensor_core(m: u32, n: u32, k: u32) -> GemmKernel {
        let bk = if k % 16 == 0 { 16 } else { 8 };
        Self::tensor_core_bk(m, n, k, bk).unwrap_or_else(|| Self::tiled(m, n, k, 16))
    }

    /// The TF32 kernel with `bk`-deep slices (8 or 16), if the shape allows it.
    pub fn tensor_core_bk(m: u32, n: u32, k: u32, bk: u32) -> Option<GemmKernel> {
        let ok = (bk == 8 || bk == 16) && m % 128 == 0 && n % 128 == 0 && k % bk == 0 && m > 0 && n > 0 && k > 0;
        ok.then_some(GemmKernel { m, n, k, variant: GemmVariant::TensorCore { bk } })
    }

    /// The register-blocked kernel with 8-deep slices, if the shape allows it.
    pub fn blocked(m: u32, n: u32, k: u32) -> Option<GemmKernel> {
        Self::blocked_bk(m, n, k, 8)
    }

    /// The register-blocked kernel with `bk`-deep slices (8 or 16), if the shape allows it.
    pub fn blocked_bk(m: u32, n: u32, k: u32, bk: u32) -> Option<GemmKernel> {
        Self::blocked_split(m, n, k, bk, 1)
    }

    /// The register-blocked kernel with split-K (`split` 1 or 2), if the shape allows it.
    pub fn blocked_split(m: u32, n: u32, k: u32, bk: u32, split: u32) -> Option<GemmKernel> {
        let ok = (bk == 8 || bk == 16)
            && (split == 1 || split == 2)
            && m % 128 == 0
            && n % 128 == 0
            && k % (bk * split) == 0
            && m > 0
            && n > 0
            && k > 0;
        ok.then_some(GemmKernel { m, n, k, variant: GemmVariant::Blocked { bk, split } })
    }

    /// The fastest kernel for the shape on a chip with `sms` multiprocessors: split-K when the
    /// 128×128 tiles alone would leave half the chip idle.
    pub fn for_device(m: u32, n: u32, k: u32, sms: u32) -> GemmKernel {
        let tiles = (m / 128) as u64 * (n / 128) as u64;
        if tiles * 2 <= sms as u64 {
            if let Some(g) = Self::blocked_split(m, n, k, 8, 2) {
                return g;
            }
        }
        Self::auto(m, n, k)
    }

    /// Whether `c` must be zeroed before the launch (split-K adds into it).
    pub fn needs_zeroed_output(&self) -> bool {
        matches!(self.variant, GemmVariant::Blocked { split: 2, .. })
    }

    /// The fastest kernel that fits the shape.
    pub fn auto(m: u32, n: u32, k: u32) -> GemmKernel {
        Self::blocked(m, n, k).unwrap_or_else(|| Self::tiled(m, n, k, 16))
    }

    /// Whether every element index fits the kernels' 32-bit index arithmetic.
    pub fn indices_fit(&self) -> bool {
        let lim = u32::MAX as u64 / 4;
        let (m, n, k) = (self.m as u64, self.n as u64, self.k as u64);
        m * k <= lim && k * n <= lim && m * n <= lim
    }

    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    pub fn launch(&self) -> LaunchConfig {
        let (m, n) = (self.m, self.n);
        match self.variant {
            GemmVariant::Naive => {
                LaunchConfig { grid: (n.div_ceil(16), m.div_ceil(16), 1), block: (16, 16, 1), shared_bytes: 0 }
            }
            GemmVariant::Tiled { tile } => {
                LaunchConfig { grid: (n.div_ceil(tile), m.div_ceil(tile), 1), block: (tile, tile, 1), shared_bytes: 0 }
            }
            GemmVariant::TensorCore { .. } => {
                LaunchConfig { grid: (n / 128, m / 128, 1), block: (prologue::THREADS, 1, 1), shared_bytes: 0 }
            }
            GemmVariant::Blocked { split, .. } => {
                LaunchConfig { grid: (n / 128, m / 128, split), block: (prologue::THREADS, 1, 1), shared_bytes: 0 }
            }
        }
    }
}

impl Kernel for GemmKernel {
    fn name(&self) -> String {
        let v = match self.variant {
            GemmVariant::Naive => "naive".to_string(),
            GemmVariant::Tiled { tile } => format!("tiled{tile}"),
            GemmVariant::Blocked { bk, split: 1 } => format!("blocked128x128x{bk}"),
            GemmVariant::Blocked { bk, split } => format!("blocked128x128x{bk}s{split}"),
            GemmVariant::TensorCore { bk } => format!("tf32mma128x128x{bk}"),
        };
        format!("gemm_{v}_{}x{}x{}", self.m, self.n, self.k)
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let mut k = PtxKernel::new(&self.name());
        for p in ["a", "b", "c"] {
            k.add_param(p, crate::ptx::PtxType::U64);
        }
        match self.variant {
            GemmVariant::Naive => simple::naive(&mut k, self.m, self.n, self.k),
            GemmVariant::Tiled { tile } => simple::tiled(&mut k, self.m, self.n, self.k, tile),
            GemmVariant::Blocked { bk, split } => blocked::build(&mut k, self.m, self.n, self.k, bk, split),
            GemmVariant::TensorCore { bk } => tensor_core::build(&mut k, self.n, self.k, bk),
        }
        k
    }
}
