//! Reductions: dot, sum, max/min, argmax/argmin, norms.

use super::GRAIN_REDUCE;
use crate::backend::dispatch;
use crate::cpu::kernels::reduce as k;
use crate::cpu::parallel::{map_reduce, map_reduce2};
use crate::error::check_len;
use crate::{Backend, Error, Result};

/// The larger of two partial maxima, NaN winning.
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

/// `Σ a[i]·b[i]`: f32 partial sums over blocks of 4096, carried in f64 (error ≲ 64·ε·Σ|a·b|).
/// The lengths must agree; 0 for empty slices.
pub fn dot(backend: Backend, a: &[f32], b: &[f32]) -> Result<f32> {
    check_len("dot", a.len(), b.len())?;
    Ok(map_reduce2(a, b, GRAIN_REDUCE, &|x, y| dispatch!(backend, |s| k::dot(s, x, y)), &|p, q| p + q) as f32)
}

/// `out[j] = dot(a, rows[j·stride ..][..a.len()])` for each `j < out.len()`: [`dot`] of each
/// row, the same bits, in one dispatch (a call of [`dot`] per row costs more than the
/// arithmetic of a short row: attention's keys, 64 values each). Errors: `rows` too short for
/// the last row, or `stride` below `a.len()` with more than one row.
pub fn dot_rows(backend: Backend, a: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) -> Result<()> {
    let n = a.len();
    if out.len() > 1 && stride < n {
        return Err(Error::InvalidArgument { op: "dot_rows", name: "stride", value: stride.into(), reason: "below the row length" });
    }
    if let Some(last) = out.len().checked_sub(1) {
        let need = last
            .checked_mul(stride)
            .and_then(|o| o.checked_add(n))
            .ok_or_else(|| Error::SizeOverflow { op: "dot_rows", dims: vec![last, stride] })?;
        check_len("dot_rows", need, rows.len().min(need))?;
    }
    if crate::cpu::parallel::parts(n, GRAIN_REDUCE) > 1 {
        // long rows: `dot` splits them over threads, so each row as `dot` runs it
        for (j, o) in out.iter_mut().enumerate() {
            *o = dot(backend, a, &rows[j * stride..][..n])?;
        }
        return Ok(());
    }
    // one part: `dot` is the kernel's sum of the whole row
    dispatch!(backend, |s| {
        for (j, o) in out.iter_mut().enumerate() {
            *o = k::dot(s, a, &rows[j * stride..][..n]) as f32;
        }
    });
    Ok(())
}

/// `Σ x[i]` (blocked as [`dot`]); 0 for an empty slice.
pub fn sum(backend: Backend, x: &[f32]) -> f32 {
    map_reduce(x, GRAIN_REDUCE, &|x| dispatch!(backend, |s| k::sum(s, x)), &|p, q| p + q) as f32
}

/// The largest element; NaN if any element is NaN. An error for an empty slice.
pub fn max(backend: Backend, x: &[f32]) -> Result<f32> {
    if x.is_empty() {
        return Err(Error::EmptyInput { op: "max" });
    }
    Ok(map_reduce(x, GRAIN_REDUCE, &|x| dispatch!(backend, |s| k::max(s, x)), &max_nan))
}

/// The smallest element; NaN if any element is NaN. An error for an empty slice.
pub fn min(backend: Backend, x: &[f32]) -> Result<f32> {
    if x.is_empty() {
        return Err(Error::EmptyInput { op: "min" });
    }
    Ok(map_reduce(x, GRAIN_REDUCE, &|x| dispatch!(backend, |s| k::min(s, x)), &min_nan))
}

/// Index of the first largest element (of the first NaN, if any). An error when empty.
pub fn argmax(backend: Backend, x: &[f32]) -> Result<usize> {
    let m = max(backend, x).map_err(|_| Error::EmptyInput { op: "argmax" })?;
    Ok(position(backend, x, m))
}

/// Index of the first smallest element (of the first NaN, if any). An error when empty.
pub fn argmin(backend: Backend, x: &[f32]) -> Result<usize> {
    let m = min(backend, x).map_err(|_| Error::EmptyInput { op: "argmin" })?;
    Ok(position(backend, x, m))
}

/// Where `target` (taken from `x`) first occurs.
fn position(backend: Backend, x: &[f32], target: f32) -> usize {
    dispatch!(backend, |s| k::position(s, x, target)).unwrap_or(0)
}

/// `Σ |x[i]|`; 0 for an empty slice.
pub fn norm_l1(backend: Backend, x: &[f32]) -> f32 {
    map_reduce(x, GRAIN_REDUCE, &|x| dispatch!(backend, |s| k::sum_abs(s, x)), &|p, q| p + q) as f32
}

/// √(`Σ x[i]²`); 0 for an empty slice. No spurious overflow or underflow: when the fast
/// f32-block sum leaves its safe range the sum is redone in f64.
pub fn norm_l2(backend: Backend, x: &[f32]) -> f32 {
    let ss = map_reduce(x, GRAIN_REDUCE, &|x| dispatch!(backend, |s| k::sum_squares(s, x)), &|p, q| p + q);
    // Block partials are f32: one past 1e38 overflows, squares below 1e-38 vanish.
    if ss.is_finite() && ss > 1e-30 && ss < 1e36 {
        return ss.sqrt() as f32;
    }
    x.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>().sqrt() as f32
}

/// max |`x[i]|`; NaN if any element is NaN; 0 for an empty slice.
pub fn norm_inf(backend: Backend, x: &[f32]) -> f32 {
    map_reduce(x, GRAIN_REDUCE, &|x| dispatch!(backend, |s| k::max_abs(s, x)), &max_nan)
}

/// Any reduction of the registry ([`ReduceOp`](crate::ops::ReduceOp)): `y` is the second
/// input of `Dot` and must be absent otherwise. Errors: the lengths differ, `y` is missing or
/// extra, or `Max`/`Min` of an empty slice.
pub fn reduce(backend: Backend, op: crate::ops::ReduceOp, x: &[f32], y: Option<&[f32]>) -> Result<f32> {
    use crate::ops::ReduceOp as R;
    op.check_args(op.name(), x.len(), y.map(<[f32]>::len))?;
    match op {
        // check_args has made sure y is given for Dot (and only for Dot).
        R::Dot => dot(backend, x, y.unwrap_or(&[])),
        R::Sum => Ok(sum(backend, x)),
        R::Max => max(backend, x),
        R::Min => min(backend, x),
        R::NormL1 => Ok(norm_l1(backend, x)),
        R::NormL2 => Ok(norm_l2(backend, x)),
        R::NormInf => Ok(norm_inf(backend, x)),
    }
}
