//! Activations prepared once for many products: a layer's Q, K and V projections (or its gate
//! and up projections) multiply the same activation rows, and an engine's threads each take a
//! range of weight rows. Quantizing the rows (and cutting them into tiles) once, and sharing
//! the result between the products and the threads, takes that work out of every product.

use super::activation::{activation_type, ActRow, QActs};
use super::matmul::{Activations, QuantMatrix};
use super::tile8::{self, Tile8};
use super::GgmlType;
use crate::backend::dispatch;
use crate::{Backend, Error, Result};
use std::sync::OnceLock;

/// Activation rows of a product, quantized to the paired 8-bit format of a weight type (or
/// kept in f32 where the product takes f32 activations), ready for [`super::matmul_rows`].
/// It is `Send + Sync`: share it between threads behind an `Arc`.
pub struct PreparedActs {
    act: Activations,
    /// The 8-bit format, `None` for the f32 path.
    ty: Option<GgmlType>,
    m: usize,
    cols: usize,
    /// The rows in f32 (the f32 path only).
    x: Vec<f32>,
    q: Option<QActs>,
    /// The first `single` rows are one-token rows (a decoding sequence's, computed as a row
    /// alone is); the rest are prompt rows (computed in tiles of eight).
    single: usize,
    /// Tiles of eight quantized prompt rows, block-major (the last one padded with its last
    /// row), made the first time a weight format that takes them asks.
    tiles8: OnceLock<Vec<Tile8>>,
}

impl PreparedActs {
    /// The `x.len() / cols` rows of `x` prepared for products with weights of `weight`.
    /// Errors: `cols` is 0 (`EmptyInput`), `x.len()` is not a multiple of `cols`
    /// (`SizeMismatch`), `cols` is not whole blocks of the activation format (`NotBlockMultiple`).
    pub fn new(backend: Backend, act: Activations, weight: GgmlType, x: &[f32], cols: usize) -> Result<PreparedActs> {
        const OP: &str = "quant::PreparedActs::new";
        if cols == 0 {
            return Err(Error::EmptyInput { op: OP });
        }
        if x.len() % cols != 0 {
            return Err(Error::SizeMismatch { op: OP, shape: vec![x.len() / cols + 1, cols], len: x.len() });
        }
        let ty = Self::format(act, weight);
        let (xs, q) = match ty {
            Some(t) => {
                t.bytes_for(cols)?;
                (Vec::new(), Some(dispatch!(backend, |s| QActs::quantize(s, t, x, cols))))
            }
            None => (x.to_vec(), None),
        };
        let m = x.len() / cols;
        Ok(PreparedActs { act, ty, m, cols, x: xs, q, single: usize::from(m == 1), tiles8: OnceLock::new() })
    }

    /// Marks the first `n` rows as one-token rows and the rest as prompt rows (by default one
    /// row is a one-token row, and every row of several is a prompt row). Each kind has its own
    /// arithmetic for a row — a one-token row's is that of a row alone, a prompt row's that of a
    /// tile of eight — and a row's result depends only on its values and its kind, never on
    /// the other rows or its place among them: a batch of many sequences gives each the bits it
    /// would get alone. Errors: `n` past the rows (`InvalidArgument`).
    pub fn with_single_rows(mut self, n: usize) -> Result<PreparedActs> {
        if n > self.m {
            let reason = "more one-token rows than rows";
            return Err(Error::InvalidArgument { op: "quant::PreparedActs::with_single_rows", name: "n", value: n.into(), reason });
        }
        self.single = n;
        Ok(self)
    }

    /// The one-token rows (the first ones; the rest are prompt rows).
    pub fn single_rows(&self) -> usize {
        self.single
    }

    /// The first row a product with `weight` computes in tiles: the first prompt row, or row 0
    /// where a tile computes a row as the one-row path does ([`tile8::same_as_one_row`]; one
    /// row alone stays on the one-row path).
    pub(crate) fn first_tiled(&self, weight: GgmlType) -> usize {
        if tile8::same_as_one_row(weight) && self.m > 1 {
            0
        } else {
            self.single
        }
    }

    /// The activation format a product of `act` activations with `weight` weights reads.
    fn format(act: Activations, weight: GgmlType) -> Option<GgmlType> {
        match act {
            Activations::Quantized => activation_type(weight),
            Activations::F32 => None,
        }
    }

    /// Whether products with weights of `weight` can use these activations (the same paired
    /// format: Q4_K and Q6_K weights share Q8_K rows, Q4_0 and Q8_0 share Q8_0 rows).
    pub fn serves(&self, weight: GgmlType) -> bool {
        Self::format(self.act, weight) == self.ty
    }

    /// Activation rows.
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Values per row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    pub(crate) fn f32_rows(&self) -> &[f32] {
        &self.x
    }

    pub(crate) fn quantized(&self) -> Option<&QActs> {
        self.q.as_ref()
    }

    /// Builds now what products with `weight` read of these activations (the rows rearranged
    /// into tiles of eight, where they take them), so that the threads of one product do not
    /// wait on each other for it (each would otherwise build it on first use, the others
    /// sleeping until it is done).
    pub fn prepare_for(&self, weight: GgmlType) {
        let _ = self.tiles8(weight);
    }

    /// The tiles for weights of `weight`, if that format takes them, eight rows at a time from
    /// [`PreparedActs::first_tiled`], the last tile padded with its last row.
    pub(crate) fn tiles8(&self, weight: GgmlType) -> Option<&[Tile8]> {
        let q = self.q.as_ref()?;
        let first = self.first_tiled(weight);
        if !tile8::unpacks(weight) || first == self.m {
            return None;
        }
        let tiles = self.tiles8.get_or_init(|| {
            (first..self.m)
                .step_by(8)
                .map(|r0| {
                    let rows: [ActRow<'_>; 8] = core::array::from_fn(|k| q.row((r0 + k).min(self.m - 1)));
                    Tile8::new(q.ty, &rows, self.cols)
                })
                .collect()
        });
        Some(tiles)
    }

    /// Checks that `w` and the output rows `r0..r1` of `y` fit these activations.
    pub(crate) fn check(&self, op: &'static str, w: &QuantMatrix<'_>, r0: usize, r1: usize, y: &[f32]) -> Result<()> {
        if w.cols() != self.cols {
            return Err(Error::LengthMismatch { op, expected: w.cols(), actual: self.cols });
        }
        if !self.serves(w.ty()) {
            let reason = "the weights pair with another activation format than the prepared one";
            return Err(Error::InvalidArgument { op, name: "weight type id", value: (w.ty().id() as usize).into(), reason });
        }
        if r0 > r1 || r1 > w.rows() {
            return Err(Error::InvalidArgument { op, name: "row range end", value: r1.into(), reason: "past the weight rows or before the start" });
        }
        let want = self.m.checked_mul(r1 - r0).ok_or_else(|| Error::SizeOverflow { op, dims: vec![self.m, r1 - r0] })?;
        if y.len() != want {
            return Err(Error::LengthMismatch { op, expected: want, actual: y.len() });
        }
        Ok(())
    }
}
