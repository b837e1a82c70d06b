//! fp32 GEMM, `C[m×n] = A[m×k] · B[k×n]`, all row-major. The shape reaches the kernel as three
//! u32 parameters (`m`, `k`, `n`), so one compiled kernel serves every shape its variant allows:
//! the generated code depends only on the variant (naive, tile size, slice depth, split).
//! Parameters: `a`, `b`, `c` (u64 device pointers), `m`, `k`, `n` (u32).
//!
//! - `naive`: one thread per output, any shape.
//! - `tiled(tile)`: square shared-memory tiles, any shape (bounds-checked loads and stores).
//! - `blocked`: 128×128 block tile, BK-deep slices, 8×8 outputs per thread held in registers,
//!   16-byte global and shared loads, the A slice stored transposed, two shared buffers so the
//!   next slice's global loads overlap the current slice's FMAs (one barrier per slice). Needs
//!   `m % 128 == 0`, `n % 128 == 0`, `k % (BK·split) == 0`; [`GemmKernel::auto`] falls back to
//!   `tiled`.
//!
//! A [`GemmKernel`] is a variant *and* the shape it will run on; its constructors refuse a shape
//! the variant cannot handle (they return `None`), and its fields are private, so safe code
//! cannot make one that reads out of bounds.

mod blocked;
mod prologue;
mod simple;
mod tensor_core;

use super::{Kernel, LaunchConfig};
use crate::ptx::{PtxKernel, PtxType};

/// The algorithm of a GEMM kernel: what its generated code is specialised on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GemmVariant {
    Naive,
    /// Square `tile`×`tile` thread blocks (8, 16 or 32).
    Tiled {
        tile: u32,
    },
    /// `split` = 1, or 2 for split-K: two blocks per output tile, each half of `k`, adding
    /// into a zeroed `c` (two adds onto zero: the same bits in either order).
    Blocked {
        bk: u32,
        split: u32,
    },
    /// TF32 tensor cores (`mma.sync`), 128×128 tiles, `bk`-deep slices (8 or 16): products
    /// rounded to TF32.
    TensorCore {
        bk: u32,
    },
}

impl GemmVariant {
    /// Whether the variant's parameters are ones the generator supports (tile 8/16/32, bk 8/16,
    /// split 1/2).
    pub fn is_valid(self) -> bool {
        match self {
            GemmVariant::Naive => true,
            GemmVariant::Tiled { tile } => matches!(tile, 8 | 16 | 32),
            GemmVariant::Blocked { bk, split } => matches!(bk, 8 | 16) && matches!(split, 1 | 2),
            GemmVariant::TensorCore { bk } => matches!(bk, 8 | 16),
        }
    }

    /// Whether the variant can run the shape `m×k · k×n` (valid parameters, and the
    /// divisibility a 128×128 kernel needs).
    pub fn supports(self, m: u32, k: u32, n: u32) -> bool {
        if !self.is_valid() {
            return false;
        }
        let tiles128 = m.is_multiple_of(128) && n.is_multiple_of(128) && m > 0 && n > 0 && k > 0;
        match self {
            GemmVariant::Naive | GemmVariant::Tiled { .. } => true,
            GemmVariant::Blocked { bk, split } => tiles128 && k.is_multiple_of(bk * split),
            GemmVariant::TensorCore { bk } => tiles128 && k.is_multiple_of(bk),
        }
    }
}

/// A GEMM kernel and the shape it runs on (`m×k` times `k×n`). Private fields: every value
/// comes from a constructor that checked the shape against the variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GemmKernel {
    m: u32,
    k: u32,
    n: u32,
    variant: GemmVariant,
}

impl GemmKernel {
    /// `variant` on `m×k · k×n`, if the variant supports that shape ([`GemmVariant::supports`]).
    pub fn new(variant: GemmVariant, m: u32, k: u32, n: u32) -> Option<GemmKernel> {
        variant.supports(m, k, n).then_some(GemmKernel { m, k, n, variant })
    }

    pub fn naive(m: u32, k: u32, n: u32) -> GemmKernel {
        GemmKernel { m, k, n, variant: GemmVariant::Naive }
    }

    /// Square tiles of `tile`×`tile` threads; `tile` is rounded to a power of two in 8..=32.
    pub fn tiled(m: u32, k: u32, n: u32, tile: u32) -> GemmKernel {
        let tile = tile.clamp(8, 32).next_power_of_two().min(32);
        GemmKernel { m, k, n, variant: GemmVariant::Tiled { tile } }
    }

    /// TF32 tensor-core GEMM (fp32 in and out, products with a 10-bit mantissa) when
    /// `m % 128 == 0`, `n % 128 == 0`, `k % 8 == 0`; other shapes get the exact fp32 tiled kernel.
    pub fn tensor_core(m: u32, k: u32, n: u32) -> GemmKernel {
        let bk = if k.is_multiple_of(16) { 16 } else { 8 };
        Self::tensor_core_bk(m, k, n, bk).unwrap_or_else(|| Self::tiled(m, k, n, 16))
    }

    /// The TF32 kernel with `bk`-deep slices (8 or 16), if the shape allows it.
    pub fn tensor_core_bk(m: u32, k: u32, n: u32, bk: u32) -> Option<GemmKernel> {
        Self::new(GemmVariant::TensorCore { bk }, m, k, n)
    }

    /// The register-blocked kernel with 8-deep slices, if the shape allows it.
    pub fn blocked(m: u32, k: u32, n: u32) -> Option<GemmKernel> {
        Self::blocked_bk(m, k, n, 8)
    }

    /// The register-blocked kernel with `bk`-deep slices (8 or 16), if the shape allows it.
    pub fn blocked_bk(m: u32, k: u32, n: u32, bk: u32) -> Option<GemmKernel> {
        Self::blocked_split(m, k, n, bk, 1)
    }

    /// The register-blocked kernel with split-K (`split` 1 or 2), if the shape allows it.
    pub fn blocked_split(m: u32, k: u32, n: u32, bk: u32, split: u32) -> Option<GemmKernel> {
        Self::new(GemmVariant::Blocked { bk, split }, m, k, n)
    }

    /// The fastest kernel for the shape on a chip with `sms` multiprocessors: split-K when the
    /// 128×128 tiles alone would leave half the chip idle.
    pub fn for_device(m: u32, k: u32, n: u32, sms: u32) -> GemmKernel {
        let tiles = (m / 128) as u64 * (n / 128) as u64;
        if tiles * 2 <= sms as u64 {
            if let Some(g) = Self::blocked_split(m, k, n, 8, 2) {
                return g;
            }
        }
        Self::auto(m, k, n)
    }

    /// The fastest kernel that fits the shape.
    pub fn auto(m: u32, k: u32, n: u32) -> GemmKernel {
        Self::blocked(m, k, n).unwrap_or_else(|| Self::tiled(m, k, n, 16))
    }

    /// Rows of A and C.
    pub fn m(&self) -> u32 {
        self.m
    }
    /// Columns of A, rows of B.
    pub fn k(&self) -> u32 {
        self.k
    }
    /// Columns of B and C.
    pub fn n(&self) -> u32 {
        self.n
    }
    /// `(m, k, n)`.
    pub fn shape(&self) -> (u32, u32, u32) {
        (self.m, self.k, self.n)
    }
    pub fn variant(&self) -> GemmVariant {
        self.variant
    }

    /// Whether `c` must be zeroed before the launch (split-K adds into it).
    pub fn needs_zeroed_output(&self) -> bool {
        matches!(self.variant, GemmVariant::Blocked { split: 2, .. })
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

    /// The u32 parameters of a launch, in the kernel's order: `m, k, n`.
    pub fn scalars(&self) -> [u32; 3] {
        [self.m, self.k, self.n]
    }

    pub fn launch(&self) -> LaunchConfig {
        let (m, n) = (self.m, self.n);
        match self.variant {
            GemmVariant::Naive => LaunchConfig { grid: (n.div_ceil(16), m.div_ceil(16), 1), block: (16, 16, 1), shared_bytes: 0 },
            GemmVariant::Tiled { tile } => LaunchConfig { grid: (n.div_ceil(tile), m.div_ceil(tile), 1), block: (tile, tile, 1), shared_bytes: 0 },
            GemmVariant::TensorCore { .. } => LaunchConfig { grid: (n / 128, m / 128, 1), block: (prologue::THREADS, 1, 1), shared_bytes: 0 },
            GemmVariant::Blocked { split, .. } => LaunchConfig { grid: (n / 128, m / 128, split), block: (prologue::THREADS, 1, 1), shared_bytes: 0 },
        }
    }
}

impl Kernel for GemmKernel {
    /// Names the variant only: every shape of one variant shares one compiled kernel.
    fn name(&self) -> String {
        let v = match self.variant {
            GemmVariant::Naive => "naive".to_string(),
            GemmVariant::Tiled { tile } => format!("tiled{tile}"),
            GemmVariant::Blocked { bk, split: 1 } => format!("blocked128x128x{bk}"),
            GemmVariant::Blocked { bk, split } => format!("blocked128x128x{bk}s{split}"),
            GemmVariant::TensorCore { bk } => format!("tf32mma128x128x{bk}"),
        };
        format!("gemm_{v}")
    }

    fn build(&self, _sm: u32) -> PtxKernel {
        let mut k = PtxKernel::new(&self.name());
        for p in ["a", "b", "c"] {
            k.add_param(p, PtxType::U64);
        }
        for p in ["m", "k", "n"] {
            k.add_param(p, PtxType::U32);
        }
        match self.variant {
            GemmVariant::Naive => simple::naive(&mut k),
            GemmVariant::Tiled { tile } => simple::tiled(&mut k, tile),
            GemmVariant::Blocked { bk, split } => blocked::build(&mut k, bk, split),
            GemmVariant::TensorCore { bk } => tensor_core::build(&mut k, bk),
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_a_variant_cannot_run_are_unconstructible() {
        // k = 4 is not a multiple of an 8-deep slice: the kernel would read past A and B
        assert_eq!(GemmKernel::blocked_bk(128, 4, 128, 8), None);
        assert_eq!(GemmKernel::blocked_split(128, 8, 128, 8, 2), None);
        assert_eq!(GemmKernel::blocked_split(128, 16, 128, 8, 0), None);
        assert_eq!(GemmKernel::blocked_split(128, 16, 128, 0, 1), None);
        assert_eq!(GemmKernel::new(GemmVariant::Tiled { tile: 0 }, 8, 8, 8), None);
        assert_eq!(GemmKernel::new(GemmVariant::Blocked { bk: 8, split: 0 }, 128, 128, 128), None);
        assert_eq!(GemmKernel::tensor_core_bk(128, 12, 128, 8), None);
        assert_eq!(GemmKernel::blocked(100, 128, 128), None);
        assert_eq!(GemmKernel::blocked(0, 128, 128), None);
        // clamped, never zero
        assert_eq!(GemmKernel::tiled(8, 8, 8, 0).variant(), GemmVariant::Tiled { tile: 8 });
        let g = GemmKernel::blocked_split(256, 64, 384, 16, 2).unwrap();
        assert_eq!(g.shape(), (256, 64, 384));
        assert_eq!(g.launch().grid, (3, 2, 2));
    }

    /// Extreme values are refused or clamped, never a panic or a wrapped size (run in debug
    /// builds too, where overflow checks are live).
    #[test]
    fn hostile_parameters_do_not_panic() {
        let max = u32::MAX;
        for v in [GemmVariant::Blocked { bk: max, split: max }, GemmVariant::TensorCore { bk: max }, GemmVariant::Tiled { tile: max }] {
            assert_eq!(GemmKernel::new(v, max, max, max), None);
        }
        let big = GemmKernel::blocked_split(max - 127, max - 127, max - 127, 16, 2).unwrap(); // 2^32 - 128
        assert!(!big.indices_fit());
        assert_eq!(GemmKernel::blocked_split(max - 63, 128, 128, 16, 2), None);
        for g in [
            GemmKernel::naive(max, max, max),
            GemmKernel::tiled(max, max, max, max),
            GemmKernel::auto(max, max, max),
            GemmKernel::for_device(max, max, max, max),
        ] {
            assert!(!g.indices_fit());
            let _ = (g.launch(), g.flops(), g.name());
        }
        let g = GemmKernel::blocked_split(1 << 31, 1 << 31, 1 << 31, 8, 2).unwrap();
        assert!(!g.indices_fit());
        assert_eq!(g.launch().grid, (1 << 24, 1 << 24, 2));
    }

    #[test]
    fn the_name_is_the_variant_not_the_shape() {
        assert_eq!(GemmKernel::tiled(3, 5, 7, 16).name(), GemmKernel::tiled(1024, 1, 9, 16).name());
        assert_ne!(GemmKernel::tiled(3, 5, 7, 16).name(), GemmKernel::tiled(3, 5, 7, 32).name());
        assert_eq!(GemmKernel::auto(512, 512, 512).name(), "gemm_blocked128x128x8");
        // the generated code is the same for every shape of a variant
        let (a, b) = (GemmKernel::blocked_bk(128, 16, 128, 16).unwrap(), GemmKernel::blocked_bk(4096, 4096, 4096, 16).unwrap());
        assert_eq!(a.emit_ptx(), b.emit_ptx());
    }
}
