//! `Vector`: a 1-D f32 array and the ops on it, run by the CPU backend it carries.

mod ops;

use crate::cpu::pool;
use crate::{Backend, Result};

/// A 1-D array of f32 with SIMD ops. Cloning copies the data.
///
/// Equality (`==`) compares the values (as f32: NaN is unequal to itself), not the backend:
/// the same numbers on AVX2 and on scalar code are the same vector.
#[derive(Debug, Clone)]
pub struct Vector {
    data: Vec<f32>,
    backend: Backend,
}

impl Vector {
    /// Copies `data` into a new vector that uses [`Backend::selected`].
    pub fn from_slice(data: &[f32]) -> Vector {
        let mut v = pool::take(data.len());
        v.copy_from_slice(data);
        Vector { data: v, backend: Backend::selected() }
    }

    /// Takes ownership of `data` (no copy).
    pub fn from_vec(data: Vec<f32>) -> Vector {
        Vector { data, backend: Backend::selected() }
    }

    /// A vector of `n` zeros: [`crate::Error::SizeOverflow`] when `n` floats do not fit in
    /// `usize` bytes, [`crate::Error::OutOfMemory`] when the system cannot provide them.
    pub fn zeros(n: usize) -> Result<Vector> {
        let n = crate::error::checked_len("Vector::zeros", &[n])?;
        Ok(Vector { data: crate::error::zeroed("Vector::zeros", n)?, backend: Backend::selected() })
    }

    /// A vector that runs its ops on `backend`; an error if this CPU cannot run it.
    pub fn with_backend(data: &[f32], backend: Backend) -> Result<Vector> {
        let mut v = Vector::from_slice(data);
        v.backend = backend.require()?;
        Ok(v)
    }

    /// The backend this vector's ops run on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub fn as_slice(&self) -> &[f32] {
        &self.data
    }

    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.data
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The elements as a `Vec` (no copy).
    pub fn into_vec(mut self) -> Vec<f32> {
        std::mem::take(&mut self.data)
    }

    /// Element `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<f32> {
        self.data.get(i).copied()
    }

    /// A new vector (same backend) filled by `fill`, which writes every element of its slice.
    fn fresh(&self, fill: impl FnOnce(&mut [f32]) -> Result<()>) -> Vector {
        let mut data = pool::take(self.len());
        let r = fill(&mut data);
        debug_assert!(r.is_ok(), "lengths agree by construction");
        Vector { data, backend: self.backend }
    }
}

impl PartialEq for Vector {
    fn eq(&self, other: &Vector) -> bool {
        self.data == other.data
    }
}

impl Drop for Vector {
    fn drop(&mut self) {
        pool::give(std::mem::take(&mut self.data));
    }
}

impl From<Vec<f32>> for Vector {
    fn from(v: Vec<f32>) -> Vector {
        Vector::from_vec(v)
    }
}

impl core::ops::Index<usize> for Vector {
    type Output = f32;
    /// Panics out of range, like a slice.
    fn index(&self, i: usize) -> &f32 {
        &self.data[i]
    }
}
