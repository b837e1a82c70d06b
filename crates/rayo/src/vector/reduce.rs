//! Reductions: dot, sum, max/min, argmax/argmin, norms.

use super::{Vector, GRAIN_REDUCE};
use crate::backend::dispatch;
use crate::cpu::kernels::reduce as k;
use crate::cpu::parallel::{map_reduce, map_reduce2};
use crate::{Error, Result};

/// Largest of two partial maxima, NaN winning.
fn max_nan(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else {
        a.max(b)
    }
}

fn min_nan(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else {
        a.min(b)
    }
}

impl Vector {
    /// Σ self[i]·other[i], accumulated in f32 blocks carried in f64 (error ≈ 64·ε·Σ|a·b|).
    /// The lengths must agree; 0 for empty vectors.
    pub fn dot(&self, other: &Vector) -> Result<f32> {
        crate::error::check_len("dot", self.len(), other.len())?;
        let b = self.backend;
        let r = map_reduce2(&self.data, &other.data, GRAIN_REDUCE, &|x, y| dispatch!(b, |s| k::dot(s, x, y)), &|p, q| p + q);
        Ok(r as f32)
    }

    /// Σ self[i] (blocked as `dot`); 0 for an empty vector.
    pub fn sum(&self) -> f32 {
        let b = self.backend;
        map_reduce(&self.data, GRAIN_REDUCE, &|x| dispatch!(b, |s| k::sum(s, x)), &|p, q| p + q) as f32
    }

    /// The largest element; NaN if any element is NaN. An error for an empty vector.
    pub fn max(&self) -> Result<f32> {
        if self.is_empty() {
            return Err(Error::EmptyInput { op: "max" });
        }
        let b = self.backend;
        Ok(map_reduce(&self.data, GRAIN_REDUCE, &|x| dispatch!(b, |s| k::max(s, x)), &max_nan))
    }

    /// The smallest element; NaN if any element is NaN. An error for an empty vector.
    pub fn min(&self) -> Result<f32> {
        if self.is_empty() {
            return Err(Error::EmptyInput { op: "min" });
        }
        let b = self.backend;
        Ok(map_reduce(&self.data, GRAIN_REDUCE, &|x| dispatch!(b, |s| k::min(s, x)), &min_nan))
    }

    /// Index of the first largest element (of the first NaN, if any). Error when empty.
    pub fn argmax(&self) -> Result<usize> {
        let m = self.max().map_err(|_| Error::EmptyInput { op: "argmax" })?;
        Ok(self.position(m))
    }

    /// Index of the first smallest element (of the first NaN, if any). Error when empty.
    pub fn argmin(&self) -> Result<usize> {
        let m = self.min().map_err(|_| Error::EmptyInput { op: "argmin" })?;
        Ok(self.position(m))
    }

    fn position(&self, target: f32) -> usize {
        let b = self.backend;
        let x = &self.data;
        // `target` came from this vector, so it is found.
        dispatch!(b, |s| k::position(s, x, target)).unwrap_or(0)
    }

    /// Σ |self[i]|; 0 for an empty vector.
    pub fn norm_l1(&self) -> f32 {
        let b = self.backend;
        map_reduce(&self.data, GRAIN_REDUCE, &|x| dispatch!(b, |s| k::sum_abs(s, x)), &|p, q| p + q) as f32
    }

    /// √(Σ self[i]²); 0 for an empty vector. No spurious overflow or underflow: when the
    /// fast f32-block sum leaves the safe range it is recomputed in f64.
    pub fn norm_l2(&self) -> f32 {
        let b = self.backend;
        let ss = map_reduce(&self.data, GRAIN_REDUCE, &|x| dispatch!(b, |s| k::sum_squares(s, x)), &|p, q| p + q);
        // Block partials are f32: a partial past 1e38 or a square below 1e-38 loses the answer.
        if ss.is_finite() && ss > 1e-30 && ss < 1e36 {
            return ss.sqrt() as f32;
        }
        self.data.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>().sqrt() as f32
    }

    /// max |self[i]|; NaN if any element is NaN; 0 for an empty vector.
    pub fn norm_inf(&self) -> f32 {
        let b = self.backend;
        map_reduce(&self.data, GRAIN_REDUCE, &|x| dispatch!(b, |s| k::max_abs(s, x)), &max_nan)
    }
}
