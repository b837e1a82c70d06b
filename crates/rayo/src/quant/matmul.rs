//! Products of a quantized weight matrix (rows of whole blocks, as a GGUF file stores a
//! tensor: `rows` = the output features, `cols` = the input features) with f32 activations:
//! matrix–vector for decoding, matrix–matrix for a prompt's rows.
//!
//! Two paths: [`Activations::Quantized`] quantizes the activations on the fly to the paired
//! 8-bit format ([`activation_type`](super::activation_type), as llama.cpp does) and runs integer dot products;
//! [`Activations::F32`] dequantizes the weights on the fly and keeps the activations exact.
//! Float weights (F32/F16/BF16) always take the f32 path. Threads split the weight rows;
//! each weight row is read once per tile of activation rows.

use super::activation::{ActRow, QActs};
use super::panel16::Panels;
use super::prepared::PreparedActs;
use super::repacked::Repacked;
use super::tile8;
use super::{dot, dot_f32, GgmlType};
use crate::backend::dispatch;
use crate::cpu::parallel::{both, Par};
use crate::{Backend, Error, Result};

/// [`dispatch!`], with AVX-512 VNNI's token where the CPU has it, and on aarch64 NEON's with the
/// dot-product extension (only the byte dots of these kernels differ, so only they are
/// compiled for it).
macro_rules! dispatch_dots {
    ($backend:expr, |$s:ident| $body:expr) => {{
        #[cfg(target_arch = "x86_64")]
        let vnni = if $backend == Backend::Avx512 { crate::cpu::isa::avx512::Avx512::try_new_vnni() } else { None };
        #[cfg(not(target_arch = "x86_64"))]
        let vnni: Option<()> = None;
        #[cfg(target_arch = "aarch64")]
        let dot = if $backend == Backend::Neon { crate::cpu::isa::neon::Neon::try_new_dot() } else { None };
        #[cfg(not(target_arch = "aarch64"))]
        let dot: Option<()> = None;
        match (vnni, dot) {
            #[cfg(target_arch = "x86_64")]
            (Some($s), _) => {
                use crate::cpu::simd::Simd as _;
                $s.vectorize(
                    #[inline(always)]
                    || $body,
                )
            }
            #[cfg(target_arch = "aarch64")]
            (_, Some($s)) => {
                use crate::cpu::simd::Simd as _;
                $s.vectorize(
                    #[inline(always)]
                    || $body,
                )
            }
            _ => dispatch!($backend, |$s| $body),
        }
    }};
}

/// Activation rows multiplied with one pass over a weight row's blocks.
const TILE: usize = 8;

/// Below this many weight bytes × activation rows a product stays on one thread.
const PAR_GRAIN: usize = 1 << 18;

/// A row-major weight matrix of `rows × cols` values of `ty`, borrowed (a GGUF file's tensor
/// data in place, any alignment): each row is `ty.bytes_for(cols)` bytes.
#[derive(Clone, Copy, Debug)]
pub struct QuantMatrix<'a> {
    ty: GgmlType,
    rows: usize,
    cols: usize,
    bytes: &'a [u8],
    /// The same rows repacked for the one-token product ([`QuantMatrix::with_repacked`]).
    repacked: Option<&'a Repacked>,
}

impl<'a> QuantMatrix<'a> {
    /// Checks that `cols` is a whole number of `ty`'s blocks (`NotBlockMultiple`) and that
    /// `bytes` holds exactly `rows` such rows (`LengthMismatch`, `SizeOverflow`).
    pub fn new(ty: GgmlType, rows: usize, cols: usize, bytes: &'a [u8]) -> Result<Self> {
        let row = ty.bytes_for(cols)?;
        let total = row.checked_mul(rows).ok_or_else(|| Error::SizeOverflow { op: "QuantMatrix::new", dims: vec![rows, cols] })?;
        if bytes.len() != total {
            return Err(Error::LengthMismatch { op: "QuantMatrix::new", expected: total, actual: bytes.len() });
        }
        Ok(QuantMatrix { ty, rows, cols, bytes, repacked: None })
    }

    /// This matrix with its rows repacked ([`Repacked::new`] of this matrix): the products
    /// compute its one-token rows with the repacked copy's kernel (and their bits are that
    /// kernel's: alone, batched or split over threads alike), and build the prompt rows'
    /// panels from the copy (the same bits as from the file's layout, with less work).
    /// Errors: `r` was made from another matrix (`InvalidArgument`).
    pub fn with_repacked(mut self, r: &'a Repacked) -> Result<Self> {
        if !r.made_from(&self) {
            let reason = "the repacked rows were made from another matrix";
            return Err(Error::InvalidArgument { op: "QuantMatrix::with_repacked", name: "rows", value: self.rows.into(), reason });
        }
        self.repacked = Some(r);
        Ok(self)
    }
    pub fn ty(&self) -> GgmlType {
        self.ty
    }
    pub fn rows(&self) -> usize {
        self.rows
    }
    pub fn cols(&self) -> usize {
        self.cols
    }
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    /// The bytes of row `j` (`j < rows`).
    pub fn row(&self, j: usize) -> &'a [u8] {
        let n = self.bytes.len() / self.rows.max(1);
        &self.bytes[j * n..(j + 1) * n]
    }
}

/// What the activations of a product are made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Activations {
    /// Quantized on the fly to [`activation_type`](super::activation_type) of the weights; integer dot products.
    Quantized,
    /// Exact f32; the weights are dequantized on the fly.
    F32,
}

/// `y = W·x` (`x`: `cols` values, `y`: `rows`), activations quantized (see [`matmul_with`]).
pub fn matvec(w: &QuantMatrix<'_>, x: &[f32], y: &mut [f32], par: Par) -> Result<()> {
    check_vec("quant::matvec", w, x, y)?;
    matmul_with(Backend::selected(), Activations::Quantized, w, x, y, par)
}

/// [`matvec`] with exact f32 activations (the weights dequantized on the fly).
pub fn matvec_f32act(w: &QuantMatrix<'_>, x: &[f32], y: &mut [f32], par: Par) -> Result<()> {
    check_vec("quant::matvec_f32act", w, x, y)?;
    matmul_with(Backend::selected(), Activations::F32, w, x, y, par)
}

/// `Y = X·Wᵀ` for `m` activation rows: `x` is `m × cols`, `y` is `m × rows` (row-major;
/// `m = x.len() / cols`), activations quantized (see [`matmul_with`]).
pub fn matmul(w: &QuantMatrix<'_>, x: &[f32], y: &mut [f32], par: Par) -> Result<()> {
    matmul_with(Backend::selected(), Activations::Quantized, w, x, y, par)
}

/// [`matmul`] with exact f32 activations.
pub fn matmul_f32act(w: &QuantMatrix<'_>, x: &[f32], y: &mut [f32], par: Par) -> Result<()> {
    matmul_with(Backend::selected(), Activations::F32, w, x, y, par)
}

fn check_vec(op: &'static str, w: &QuantMatrix<'_>, x: &[f32], y: &[f32]) -> Result<()> {
    if x.len() != w.cols {
        return Err(Error::LengthMismatch { op, expected: w.cols, actual: x.len() });
    }
    if y.len() != w.rows {
        return Err(Error::LengthMismatch { op, expected: w.rows, actual: y.len() });
    }
    Ok(())
}

/// The product on a given backend (an unsupported one runs the scalar code) with the given
/// activations. Errors: `cols` is 0 (`EmptyInput`), `x.len()` is not a multiple of `cols`
/// (`SizeMismatch`), `y.len()` is not `m · rows` (`LengthMismatch`).
pub fn matmul_with(backend: Backend, act: Activations, w: &QuantMatrix<'_>, x: &[f32], y: &mut [f32], par: Par) -> Result<()> {
    const OP: &str = "quant::matmul";
    if w.cols == 0 {
        return Err(Error::EmptyInput { op: OP });
    }
    if x.len() % w.cols != 0 {
        return Err(Error::SizeMismatch { op: OP, shape: vec![x.len() / w.cols + 1, w.cols], len: x.len() });
    }
    let m = x.len() / w.cols;
    let want = m.checked_mul(w.rows).ok_or_else(|| Error::SizeOverflow { op: OP, dims: vec![m, w.rows] })?;
    if y.len() != want {
        return Err(Error::LengthMismatch { op: OP, expected: want, actual: y.len() });
    }
    if m == 0 || w.rows == 0 {
        return Ok(());
    }
    let p = PreparedActs::new(backend, act, w.ty, x, w.cols)?;
    let threads = if w.bytes.len().saturating_mul(m) < PAR_GRAIN { 1 } else { par.thread_count().min(w.rows) };
    Job { backend, w, p: &p }.split(0, w.rows, y, threads);
    Ok(())
}

/// Weight rows `r0..r1` of `w` times activations prepared once ([`PreparedActs`], shared by
/// several products and threads) into `y` (`m × (r1 − r0)`, row-major: columns `r0..r1` of the
/// full product), on the calling thread. Errors: `w.cols` is not the activations' width
/// (`LengthMismatch`), `w`'s format pairs with another activation format, or `r0..r1` is not a
/// range of `w`'s rows (`InvalidArgument`), `y.len()` is not `m · (r1 − r0)` (`LengthMismatch`).
pub fn matmul_rows(backend: Backend, w: &QuantMatrix<'_>, p: &PreparedActs, r0: usize, r1: usize, y: &mut [f32]) -> Result<()> {
    p.check("quant::matmul_rows", w, r0, r1, y)?;
    if p.rows() > 0 && r1 > r0 {
        Job { backend, w, p }.split(r0, r1, y, 1);
    }
    Ok(())
}

/// Weight rows per block of the quantized product: a block (a few KB) stays in L1 while
/// every tile of activation rows passes over it.
const ROW_BLOCK: usize = super::panel16::ROWS;
// (The prompt path takes the repacked copy's groups of rows as its blocks.)
const _: () = assert!(ROW_BLOCK == super::repacked::ROWS);

struct Job<'a, 'w> {
    backend: Backend,
    w: &'a QuantMatrix<'w>,
    p: &'a PreparedActs,
}

impl Job<'_, '_> {
    /// Weight rows `r0..r1` into `out` (`m × (r1 − r0)`, row-major: columns `r0..r1` of `y`),
    /// over `p` threads; each thread fills its own columns, copied into `out` at the end.
    fn split(&self, r0: usize, r1: usize, out: &mut [f32], p: usize) {
        if p <= 1 {
            return dispatch_dots!(self.backend, |s| self.rows(s, r0, r1, out));
        }
        let mid = r0 + (r1 - r0) * (p / 2) / p;
        let m = self.p.rows();
        if m == 1 {
            let (a, b) = out.split_at_mut(mid - r0);
            both(|| self.split(r0, mid, a, p / 2), || self.split(mid, r1, b, p - p / 2));
            return;
        }
        let (mut a, mut b) = (vec![0f32; m * (mid - r0)], vec![0f32; m * (r1 - mid)]);
        both(|| self.split(r0, mid, &mut a, p / 2), || self.split(mid, r1, &mut b, p - p / 2));
        for ((o, a), b) in out.chunks_exact_mut(r1 - r0).zip(a.chunks_exact(mid - r0)).zip(b.chunks_exact(r1 - mid)) {
            o[..mid - r0].copy_from_slice(a);
            o[mid - r0..].copy_from_slice(b);
        }
    }

    #[inline(always)]
    fn rows<S: crate::cpu::simd::Simd>(&self, s: S, r0: usize, r1: usize, out: &mut [f32]) {
        let (m, ty, cols) = (self.p.rows(), self.w.ty, self.w.cols);
        let row_len = self.w.bytes.len() / self.w.rows;
        if let Some(a) = self.p.quantized() {
            return self.quantized_rows(s, a, r0, r1, row_len, out);
        }
        // The f32 path: each weight row against every tile of activation rows.
        let width = r1 - r0;
        let x = self.p.f32_rows();
        let xr = |i: usize| &x[i * cols..(i + 1) * cols];
        for j in r0..r1 {
            let wrow = self.w.row(j);
            let mut i = 0;
            while i + TILE <= m {
                let rows: [&[f32]; TILE] = core::array::from_fn(|t| xr(i + t));
                for (t, v) in dot_f32::dot_rows_f32(s, ty, wrow, &rows).into_iter().enumerate() {
                    out[(i + t) * width + j - r0] = v;
                }
                i += TILE;
            }
            for i in i..m {
                out[i * width + j - r0] = dot_f32::dot_rows_f32(s, ty, wrow, &[xr(i)])[0];
            }
        }
    }

    /// Writes `v` (per weight row `c + j`, the products of activation rows `i0..i0 + R`) into
    /// `out` (rows of `width` columns).
    #[inline(always)]
    fn place<const R: usize>(&self, out: &mut [f32], width: usize, c: usize, i0: usize, v: &[[f32; R]]) {
        for r in 0..R {
            for (o, x) in out[(i0 + r) * width + c..][..v.len()].iter_mut().zip(v) {
                *o = x[r];
            }
        }
    }

    /// The integer path: blocks of [`ROW_BLOCK`] weight rows, each against every tile of
    /// [`TILE`] prompt rows (the last tile padded with its last row), then each one-token row
    /// alone ([`PreparedActs::with_single_rows`]), the format matched and the activation rows
    /// cut into blocks once per block of weight rows, not once per weight row. A row's result
    /// depends only on its values and its kind: a prompt row gets the same bits in any tile, a
    /// one-token row those of the decoding path.
    #[inline(always)]
    fn quantized_rows<S: crate::cpu::simd::Simd>(&self, s: S, a: &QActs, r0: usize, r1: usize, row_len: usize, out: &mut [f32]) {
        let (m, ty, width) = (self.p.rows(), self.w.ty, r1 - r0);
        // rows before `single` take the one-row arithmetic, the rest tiles
        let single = self.p.first_tiled(ty);
        // One-token rows through the repacked rows' kernel where the matrix has them.
        let repacked = self.w.repacked.filter(|_| single > 0);
        if let Some(rp) = repacked {
            let rows: Vec<ActRow<'_>> = (0..single).map(|i| a.row(i)).collect();
            rp.dot_rows(&rows, r0, r1, out, width);
            if single == m {
                return;
            }
        }
        if m == 1 && single == 1 {
            // Decoding: every weight row in one call.
            let w = &self.w.bytes[r0 * row_len..r1 * row_len];
            return dot::dot_matrix(s, ty, w, &[a.row(0)], out.as_chunks_mut::<1>().0);
        }
        let tiles: Vec<[ActRow<'_>; TILE]> = (single..m).step_by(TILE).map(|t0| core::array::from_fn(|k| a.row((t0 + k).min(m - 1)))).collect();
        // Formats that unpack to 32-value blocks: each block of weight rows is unpacked once for
        // all tiles, and a tile's eight products are scaled as one vector (block-major scales).
        let tiles8 = self.p.tiles8(ty).unwrap_or(&[]);
        let mut unpacked = Vec::new();
        // On AVX-512 VNNI, each block of weight rows interleaved once more, into a panel
        // (`ROW_BLOCK` is its 16 rows).
        // With a single tile (a step of a few sequences' next tokens), interleaving each block
        // of weight rows costs more than the one tile gains from it (measured: 8 rows of SmolLM2
        // Q4_1 spent 24% of the step packing panels): the tile takes the unpacked rows (the
        // same bits: tile8's arithmetic is the panels').
        let mut panels = if tiles8.len() < 2 { None } else { Panels::new(self.backend, ty) };
        // Where the matrix has repacked rows, the panels are built from them (the same bits, a
        // fraction of the work), so the blocks of weight rows are the copy's groups of 16 rows,
        // cut to `r0..r1`.
        let from_copy = self.w.repacked.filter(|_| panels.is_some());
        let singles: Vec<ActRow<'_>> = (0..single).map(|i| a.row(i)).collect();
        let (mut tile_out, mut row_out) = ([[0f32; TILE]; ROW_BLOCK], [[0f32; 1]; ROW_BLOCK]);
        let blocks: Vec<(usize, usize)> = match from_copy {
            Some(_) => (r0 / ROW_BLOCK..r1.div_ceil(ROW_BLOCK)).map(|g| ((ROW_BLOCK * g).max(r0), (ROW_BLOCK * g + ROW_BLOCK).min(r1))).collect(),
            None => (r0..r1).step_by(ROW_BLOCK).map(|j0| (j0, (j0 + ROW_BLOCK).min(r1))).collect(),
        };
        for (j0, j1) in blocks {
            let n = j1 - j0;
            // rows j0..j1 are the panel's lanes lane..lane + n
            let lane = if from_copy.is_some() { j0 % ROW_BLOCK } else { 0 };
            let w = &self.w.bytes[j0 * row_len..j1 * row_len];
            let c = j0 - r0;
            match (from_copy, &mut panels) {
                (Some(rp), Some(p)) => p.pack_repacked(rp, j0 / ROW_BLOCK),
                _ if !tiles8.is_empty() => {
                    tile8::unpack_rows(s, ty, w, &mut unpacked);
                    if let Some(p) = &mut panels {
                        p.pack(&unpacked, n);
                    }
                }
                _ => {}
            }
            for (t, tile) in tiles.iter().enumerate() {
                // (No closure here: one would be compiled outside the vectorized context.)
                match (tiles8.get(t), &panels) {
                    (Some(t8), Some(p)) => p.dot(t8, &mut tile_out[..lane + n]),
                    (Some(t8), None) => tile8::dot_tile8(s, ty, &unpacked, t8, &mut tile_out[..n]),
                    (None, _) => dot::dot_matrix(s, ty, w, tile, &mut tile_out[..n]),
                }
                let t0 = single + t * TILE;
                for r in 0..TILE.min(m - t0) {
                    for (o, v) in out[(t0 + r) * width + c..][..n].iter_mut().zip(&tile_out[lane..lane + n]) {
                        *o = v[r];
                    }
                }
            }
            // one-token rows in groups of 8, 4, 2 and 1: each weight block unpacked once per
            // group, every row's arithmetic that of the row alone
            let mut i = if repacked.is_some() { single } else { 0 };
            while i < single {
                let left = single - i;
                if left >= 8 {
                    dot::dot_matrix(
                        s,
                        ty,
                        w,
                        &[singles[i], singles[i + 1], singles[i + 2], singles[i + 3], singles[i + 4], singles[i + 5], singles[i + 6], singles[i + 7]],
                        &mut tile_out[..n],
                    );
                    self.place(out, width, c, i, &tile_out[..n]);
                    i += 8;
                } else if left >= 4 {
                    let mut o4 = [[0f32; 4]; ROW_BLOCK];
                    dot::dot_matrix(s, ty, w, &[singles[i], singles[i + 1], singles[i + 2], singles[i + 3]], &mut o4[..n]);
                    self.place(out, width, c, i, &o4[..n]);
                    i += 4;
                } else if left >= 2 {
                    let mut o2 = [[0f32; 2]; ROW_BLOCK];
                    dot::dot_matrix(s, ty, w, &[singles[i], singles[i + 1]], &mut o2[..n]);
                    self.place(out, width, c, i, &o2[..n]);
                    i += 2;
                } else {
                    dot::dot_matrix(s, ty, w, &[singles[i]], &mut row_out[..n]);
                    self.place(out, width, c, i, &row_out[..n]);
                    i += 1;
                }
            }
        }
    }
}
