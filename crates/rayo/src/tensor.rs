//! `Tensor`: an n-dimensional, row-major f32 array.

use crate::{Error, Result};

/// An n-d array of f32 in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    shape: Vec<usize>,
    data: Vec<f32>,
}

impl Tensor {
    /// A tensor of `shape` holding `data` (row-major); an error unless
    /// `data.len()` is the product of `shape`.
    pub fn from_vec(shape: Vec<usize>, data: Vec<f32>) -> Result<Tensor> {
        match checked_size(&shape) {
            Some(n) if n == data.len() => Ok(Tensor { shape, data }),
            _ => Err(Error::SizeMismatch { op: "Tensor::from_vec", shape, len: data.len() }),
        }
    }

    /// A tensor of zeros: [`Error::SizeOverflow`] when the element count (or its size in
    /// bytes) overflows, [`Error::OutOfMemory`] when the system cannot provide it.
    pub fn zeros(shape: Vec<usize>) -> Result<Tensor> {
        let n = crate::error::checked_len("Tensor::zeros", &shape)?;
        Ok(Tensor { data: crate::error::zeroed("Tensor::zeros", n)?, shape })
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn size(&self) -> usize {
        self.data.len()
    }

    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.data
    }

    pub fn into_vec(self) -> Vec<f32> {
        self.data
    }

    /// The element at a multi-index, or `None` when the index has the wrong rank or is out
    /// of range.
    pub fn get(&self, index: &[usize]) -> Option<f32> {
        self.offset(index).map(|o| self.data[o])
    }

    /// Row-major offset of a multi-index.
    pub fn offset(&self, index: &[usize]) -> Option<usize> {
        if index.len() != self.shape.len() {
            return None;
        }
        // Every index in range first: then no dimension is 0, the offset is below the
        // element count, and no step of it overflows.
        if index.iter().zip(&self.shape).any(|(&i, &d)| i >= d) {
            return None;
        }
        Some(index.iter().zip(&self.shape).fold(0, |off, (&i, &d)| off * d + i))
    }

    /// The same data under a new shape with the same element count (no copy).
    pub fn reshape(self, shape: Vec<usize>) -> Result<Tensor> {
        match checked_size(&shape) {
            Some(n) if n == self.data.len() => Ok(Tensor { shape, data: self.data }),
            _ => Err(Error::ShapeMismatch { op: "Tensor::reshape", left: self.shape, right: shape }),
        }
    }
}

fn checked_size(shape: &[usize]) -> Option<usize> {
    crate::error::product(shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_example() {
        let a = Tensor::from_vec(vec![3, 3], (1..=9).map(|x| x as f32).collect()).unwrap();
        assert_eq!(a.shape(), &[3, 3]);
        assert_eq!(a.ndim(), 2);
        assert_eq!(a.size(), 9);
        assert_eq!(a.get(&[1, 2]), Some(6.0));
        assert_eq!(a.get(&[3, 0]), None);
        assert_eq!(a.get(&[0]), None);
    }

    #[test]
    fn shape_errors() {
        let e = Tensor::from_vec(vec![2, 3], vec![0.0; 5]).unwrap_err();
        assert_eq!(e, Error::SizeMismatch { op: "Tensor::from_vec", shape: vec![2, 3], len: 5 });
        assert!(Tensor::from_vec(vec![usize::MAX, 2], vec![]).is_err());
        let half = 1usize << (usize::BITS / 2 + 4); // half·half overflows usize on any target
        let big = Tensor::from_vec(vec![half, half, 0], vec![]).unwrap();
        assert_eq!(big.get(&[1, 1, 0]), None, "checked before the offset is formed");
        let t = Tensor::from_vec(vec![2, 3], vec![0.0; 6]).unwrap();
        let t = t.reshape(vec![3, 2]).unwrap();
        assert_eq!(t.shape(), &[3, 2]);
        let e = t.reshape(vec![4, 2]).unwrap_err();
        assert_eq!(e, Error::ShapeMismatch { op: "Tensor::reshape", left: vec![3, 2], right: vec![4, 2] });
        let s = Tensor::from_vec(vec![], vec![7.0]).unwrap();
        assert_eq!((s.ndim(), s.size()), (0, 1));
    }
}
