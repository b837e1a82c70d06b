//! Sampling's work on the device: greedy ([`argmax`]: the host reads one token id and two
//! words of checks) and top-k ([`top_k`]: the host reads k (id, logit) pairs) instead of the
//! vocabulary's logits.

use super::args::{ArgmaxArgs, TopKArgs, TopKRowsArgs};
use rayo::cuda::kernels::{ArgmaxKernel, TopKKernel, TopKRowsKernel};
use rayo::cuda::{CudaDevice, DeviceBuffer};
use rayo::{Error, Result};

/// What [`argmax`] found in a row of values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Argmax {
    /// The index of the first maximum (`None`: every value is −inf or NaN).
    pub index: Option<u32>,
    /// The maximum (−inf when `index` is `None`).
    pub max: f32,
    /// The first NaN or +inf and its index, if any.
    pub first_bad: Option<(u32, f32)>,
}

/// What [`top_k`] found in a row of values.
#[derive(Debug, Clone, PartialEq)]
pub struct TopK {
    /// The `k` largest (index, value), largest first in `f32::total_cmp`'s order, the smaller
    /// index first among equal values.
    pub best: Vec<(u32, f32)>,
    /// The first NaN or +inf and its index, if any (then `best` is meaningless).
    pub first_bad: Option<(u32, f32)>,
}

/// The `k` largest of the first `n` values of `x` (`1 ≤ k ≤ 128`, `k < n`), in one launch;
/// `scratch` (at least `2k + 1` values) takes them, and the host reads `8k + 4` bytes.
pub fn top_k(dev: &CudaDevice, x: &DeviceBuffer, n: usize, k: usize, scratch: &mut DeviceBuffer) -> Result<TopK> {
    if k == 0 || k > TopKKernel::MAX_K as usize || k >= n {
        return Err(Error::InvalidArgument { op: "cuda top_k", name: "k", value: k.into(), reason: "must be in 1..=128 and below the row's length" });
    }
    dev.launch(&TopKKernel, &mut TopKArgs { x, n, k, out: scratch })?;
    let mut r = vec![0f32; 2 * k + 1];
    dev.download_prefix(scratch, &mut r)?;
    let first_bad = bad_value(dev, x, r[2 * k].to_bits(), scratch)?;
    let mut best: Vec<(u32, f32)> = (0..k).map(|i| (r[i].to_bits(), r[k + i])).collect();
    best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(TopK { best, first_bad })
}

/// [`top_k`] of each of the first `rows` rows of `x` (rows of `n` values), in one launch;
/// `scratch` (at least `rows · (2k + 1)` values) takes them, and the host reads
/// `rows · (8k + 4)` bytes.
pub fn top_k_rows(dev: &CudaDevice, x: &DeviceBuffer, n: usize, rows: usize, k: usize, scratch: &mut DeviceBuffer) -> Result<Vec<TopK>> {
    dev.launch(&TopKRowsKernel, &mut TopKRowsArgs { x, n, rows, k, out: scratch })?;
    let w = 2 * k + 1;
    let mut r = vec![0f32; rows * w];
    dev.download_prefix(scratch, &mut r)?;
    let mut all = Vec::with_capacity(rows);
    for (i, r) in r.chunks_exact(w).enumerate() {
        let bad = r[2 * k].to_bits();
        // (the index is the row's: the value is read from the row)
        let first_bad = match bad {
            u32::MAX => None,
            b => {
                let mut v = [0f32];
                dev.copy_within_device(x, i * n + b as usize, scratch, 0, 1)?;
                dev.download_prefix(scratch, &mut v)?;
                Some((b, v[0]))
            }
        };
        let mut best: Vec<(u32, f32)> = (0..k).map(|j| (r[j].to_bits(), r[k + j])).collect();
        best.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        all.push(TopK { best, first_bad });
    }
    Ok(all)
}

/// The first maximum of the first `n` values of `x`, in one launch; `scratch` (at least 3
/// values) takes the result, of which the host reads 12 bytes.
pub fn argmax(dev: &CudaDevice, x: &DeviceBuffer, n: usize, scratch: &mut DeviceBuffer) -> Result<Argmax> {
    if n == 0 {
        return Err(Error::EmptyInput { op: "cuda argmax" });
    }
    dev.launch(&ArgmaxKernel, &mut ArgmaxArgs { x, n, out: scratch })?;
    let mut r = [0f32; 3];
    dev.download_prefix(scratch, &mut r)?;
    let (index, bad) = (r[0].to_bits(), r[1].to_bits());
    let first_bad = bad_value(dev, x, bad, scratch)?;
    Ok(Argmax { index: (index != u32::MAX).then_some(index), max: r[2], first_bad })
}

/// The kernels' "first NaN or +inf" index (`u32::MAX`: none) with the value there, read
/// through `scratch`.
fn bad_value(dev: &CudaDevice, x: &DeviceBuffer, index: u32, scratch: &mut DeviceBuffer) -> Result<Option<(u32, f32)>> {
    if index == u32::MAX {
        return Ok(None);
    }
    let mut v = [0f32];
    dev.copy_within_device(x, index as usize, scratch, 0, 1)?;
    dev.download_prefix(scratch, &mut v)?;
    Ok(Some((index, v[0])))
}
