//! Strided matrix views: what the general GEMM entry point takes. A transpose is a view with
//! its strides swapped, so `op(A)` never copies.

use crate::{Error, Result};

/// Index of the last element a `rows × cols` view with these strides touches, plus one;
/// `None` on overflow.
fn extent(rows: usize, cols: usize, rs: usize, cs: usize) -> Option<usize> {
    if rows == 0 || cols == 0 {
        return Some(0);
    }
    (rows - 1).checked_mul(rs)?.checked_add((cols - 1).checked_mul(cs)?)?.checked_add(1)
}

fn check(op: &'static str, len: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> Result<()> {
    match extent(rows, cols, rs, cs) {
        Some(e) if e <= len => Ok(()),
        _ => Err(Error::ViewOutOfBounds { op, rows, cols, row_stride: rs, col_stride: cs, len }),
    }
}

/// A read-only `rows × cols` view of f32 data: element (i, j) is `data[i·row_stride + j·col_stride]`.
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    pub(crate) data: &'a [f32],
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) rs: usize,
    pub(crate) cs: usize,
}

impl<'a> MatRef<'a> {
    /// A strided view; an error if any element would fall outside `data`.
    pub fn new(data: &'a [f32], rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> Result<Self> {
        check("MatRef::new", data.len(), rows, cols, row_stride, col_stride)?;
        Ok(MatRef { data, rows, cols, rs: row_stride, cs: col_stride })
    }

    /// A dense row-major view (`row_stride = cols`); `data.len()` must be `rows·cols`.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Result<Self> {
        dense_len("MatRef::row_major", data.len(), rows, cols)?;
        Ok(MatRef { data, rows, cols, rs: cols, cs: 1 })
    }

    /// A dense column-major view (`col_stride = rows`); `data.len()` must be `rows·cols`.
    pub fn col_major(data: &'a [f32], rows: usize, cols: usize) -> Result<Self> {
        dense_len("MatRef::col_major", data.len(), rows, cols)?;
        Ok(MatRef { data, rows, cols, rs: 1, cs: rows })
    }

    /// The transpose, as a view (no copy).
    pub fn t(self) -> Self {
        MatRef { data: self.data, rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    pub fn row_stride(&self) -> usize {
        self.rs
    }

    pub fn col_stride(&self) -> usize {
        self.cs
    }

    /// Element (i, j); `None` out of range.
    pub fn get(&self, i: usize, j: usize) -> Option<f32> {
        (i < self.rows && j < self.cols).then(|| self.data[i * self.rs + j * self.cs])
    }

    #[inline(always)]
    pub(crate) fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.rs + j * self.cs]
    }
}

/// A mutable `rows × cols` view. Rows (or columns) may be padded but never overlap, so
/// every element is one distinct place in memory.
#[derive(Debug)]
pub struct MatMut<'a> {
    pub(crate) data: &'a mut [f32],
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) rs: usize,
    pub(crate) cs: usize,
}

impl<'a> MatMut<'a> {
    /// A strided mutable view; an error if any element would fall outside `data` or two
    /// elements would share a place (the layout must be row-major or column-major, padded).
    pub fn new(data: &'a mut [f32], rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> Result<Self> {
        check("MatMut::new", data.len(), rows, cols, row_stride, col_stride)?;
        let (rs, cs) = (row_stride, col_stride);
        // An empty view has no elements to share a place; otherwise `check` has shown that
        // (rows-1)·rs and (cols-1)·cs fit in usize.
        let distinct = rows == 0
            || cols == 0
            || rows == 1 && (cols == 1 || cs >= 1)
            || cols == 1 && rs >= 1
            || cs >= 1 && rs > (cols - 1) * cs
            || rs >= 1 && cs > (rows - 1) * rs;
        if !distinct {
            return Err(Error::OverlappingView { op: "MatMut::new", rows, cols, row_stride: rs, col_stride: cs });
        }
        Ok(MatMut { data, rows, cols, rs, cs })
    }

    /// A dense row-major view; `data.len()` must be `rows·cols`.
    pub fn row_major(data: &'a mut [f32], rows: usize, cols: usize) -> Result<Self> {
        dense_len("MatMut::row_major", data.len(), rows, cols)?;
        Ok(MatMut { data, rows, cols, rs: cols, cs: 1 })
    }

    /// A dense column-major view; `data.len()` must be `rows·cols`.
    pub fn col_major(data: &'a mut [f32], rows: usize, cols: usize) -> Result<Self> {
        dense_len("MatMut::col_major", data.len(), rows, cols)?;
        Ok(MatMut { data, rows, cols, rs: 1, cs: rows })
    }

    /// The transpose, as a view (no copy).
    pub fn t(self) -> Self {
        MatMut { data: self.data, rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    pub fn as_ref(&self) -> MatRef<'_> {
        MatRef { data: self.data, rows: self.rows, cols: self.cols, rs: self.rs, cs: self.cs }
    }
}

fn dense_len(op: &'static str, len: usize, rows: usize, cols: usize) -> Result<()> {
    match rows.checked_mul(cols) {
        Some(n) if n == len => Ok(()),
        _ => Err(Error::SizeMismatch { op, shape: vec![rows, cols], len }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_check_their_extent() {
        let d = [0.0f32; 12];
        assert!(MatRef::new(&d, 3, 4, 4, 1).is_ok());
        assert!(MatRef::new(&d, 3, 4, 5, 1).is_err());
        assert!(MatRef::new(&d, 0, 4, 100, 1).is_ok());
        assert!(MatRef::new(&d, 2, 2, usize::MAX, 1).is_err());
        assert!(MatRef::row_major(&d, 3, 3).is_err());
        let v = MatRef::row_major(&d, 3, 4).unwrap().t();
        assert_eq!((v.rows(), v.cols(), v.row_stride(), v.col_stride()), (4, 3, 1, 4));
        let mut m = [0.0f32; 12];
        assert!(MatMut::new(&mut m, 3, 4, 4, 1).is_ok());
        assert!(MatMut::new(&mut m, 3, 4, 1, 3).is_ok());
        assert!(matches!(MatMut::new(&mut m, 3, 4, 2, 1), Err(Error::OverlappingView { row_stride: 2, .. })), "rows overlap");
        assert!(MatMut::new(&mut m, 3, 4, 0, 1).is_err(), "rows alias");
        // Empty views: nothing to alias, and no (0 - 1) anywhere.
        assert!(MatMut::new(&mut m, 0, 0, 0, 0).is_ok());
        assert!(MatMut::new(&mut m, 3, 0, 0, 0).is_ok());
        assert!(MatMut::new(&mut m, 0, 5, usize::MAX, usize::MAX).is_ok());
        assert!(MatMut::new(&mut [], 0, usize::MAX, 1, usize::MAX).is_ok());
    }
}
