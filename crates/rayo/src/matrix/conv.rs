//! 2-D convolution, "valid" (no padding, stride 1) and without flipping the kernel, as ML
//! frameworks define it: `out[i][j] = Σ_{u,v} img[i+u][j+v] · ker[u][v]`.

use super::Matrix;
use crate::backend::dispatch;
use crate::cpu::kernels::conv::conv2d_valid;
use crate::cpu::parallel;
use crate::{Backend, Error, Result, Tensor};

/// Output rows per thread worth splitting for (of a 512-wide image, 3×3 kernel).
const GRAIN_ROWS_WORK: usize = 1 << 20;

fn out_dims(op: &'static str, h: usize, w: usize, kh: usize, kw: usize) -> Result<(usize, usize)> {
    if kh == 0 || kw == 0 || kh > h || kw > w {
        return Err(Error::ShapeMismatch { op, left: vec![h, w], right: vec![kh, kw] });
    }
    Ok((h - kh + 1, w - kw + 1))
}

/// One channel, rows split over the threads when the work is large.
#[allow(clippy::too_many_arguments)]
fn conv_channel(backend: Backend, img: &[f32], w: usize, ker: &[f32], kh: usize, kw: usize, out: &mut [f32], oh: usize, accumulate: bool) {
    let ow = w - kw + 1;
    let work = oh.saturating_mul(ow).saturating_mul(kh).saturating_mul(kw);
    let parts = parallel::parts(work, GRAIN_ROWS_WORK);
    if parts <= 1 || oh < 2 {
        return dispatch!(backend, |s| conv2d_valid(s, img, w, ker, kh, kw, out, oh, accumulate));
    }
    let top = oh / 2;
    let (o0, o1) = out.split_at_mut(top * ow);
    parallel::both(
        || conv_channel(backend, img, w, ker, kh, kw, o0, top, accumulate),
        || conv_channel(backend, &img[top * w..], w, ker, kh, kw, o1, oh - top, accumulate),
    );
}

impl Matrix {
    /// "Valid" 2-D convolution with `kernel` (no flip): an (h−kh+1)×(w−kw+1) matrix; an error
    /// if the kernel is empty or larger than the image.
    pub fn convolve2d(&self, kernel: &Matrix) -> Result<Matrix> {
        let (oh, ow) = out_dims("Matrix::convolve2d", self.rows, self.cols, kernel.rows, kernel.cols)?;
        let mut out = Matrix::uninit(oh, ow, self.backend)?;
        conv_channel(self.backend, &self.data, self.cols, &kernel.data, kernel.rows, kernel.cols, &mut out.data, oh, false);
        Ok(out)
    }
}

impl Tensor {
    /// Multi-channel "valid" convolution: self `[c_in, h, w]` with `kernel`
    /// `[c_out, c_in, kh, kw]` gives `[c_out, h−kh+1, w−kw+1]`; shapes that disagree are errors.
    pub fn conv2d(&self, kernel: &Tensor) -> Result<Tensor> {
        let (&[ci, h, w], &[co, kci, kh, kw]) = (self.shape(), kernel.shape()) else {
            return Err(Error::ShapeMismatch { op: "Tensor::conv2d", left: self.shape().to_vec(), right: kernel.shape().to_vec() });
        };
        if kci != ci {
            return Err(Error::ShapeMismatch { op: "Tensor::conv2d (channels)", left: self.shape().to_vec(), right: kernel.shape().to_vec() });
        }
        let (oh, ow) = out_dims("Tensor::conv2d", h, w, kh, kw)?;
        let out_len = crate::error::checked_len("Tensor::conv2d", &[co, oh, ow])?;
        let backend = crate::Backend::selected();
        let (img, ker) = (self.as_slice(), kernel.as_slice());
        let out = if out_len == 0 {
            Vec::new()
        } else if ci == 0 {
            // No input channels: every output is an empty sum.
            crate::error::zeroed("Tensor::conv2d", out_len)?
        } else if ci * kh * kw >= IM2COL_MIN_DEPTH && co > 1 {
            conv_im2col(backend, img, ci, h, w, ker, co, kh, kw)?
        } else {
            let mut out = vec![0.0f32; out_len];
            for (o, dst) in out.chunks_exact_mut(oh * ow).enumerate() {
                for c in 0..ci {
                    let k = &ker[(o * ci + c) * kh * kw..(o * ci + c + 1) * kh * kw];
                    conv_channel(backend, &img[c * h * w..(c + 1) * h * w], w, k, kh, kw, dst, oh, c > 0);
                }
            }
            out
        };
        Tensor::from_vec(vec![co, oh, ow], out)
    }
}

/// From this reduction depth (c_in·kh·kw) on, multi-channel convolution goes through one GEMM
/// (weights `[c_out, c_in·kh·kw]` times the unfolded image `[c_in·kh·kw, oh·ow]`), which runs
/// near the FMA peak; below it the direct kernel, which needs no unfolded copy.
const IM2COL_MIN_DEPTH: usize = 32;

/// im2col + GEMM: row (c, u, v) of the unfolded image holds every output position's input
/// under kernel tap (u, v) of channel c.
#[allow(clippy::too_many_arguments)]
fn conv_im2col(backend: Backend, img: &[f32], ci: usize, h: usize, w: usize, ker: &[f32], co: usize, kh: usize, kw: usize) -> Result<Vec<f32>> {
    let (oh, ow) = (h - kh + 1, w - kw + 1);
    let (depth, positions) = (ci * kh * kw, oh * ow);
    let mut cols = crate::cpu::pool::take(crate::error::checked_len("Tensor::conv2d (im2col)", &[depth, positions])?);
    for (r, row) in cols.chunks_exact_mut(positions).enumerate() {
        let (c, u, v) = (r / (kh * kw), r / kw % kh, r % kw);
        for (i, dst) in row.chunks_exact_mut(ow).enumerate() {
            let s = c * h * w + (i + u) * w + v;
            dst.copy_from_slice(&img[s..s + ow]);
        }
    }
    let mut out = vec![0.0f32; co * positions];
    let a = super::MatRef::row_major(ker, co, depth)?;
    let b = super::MatRef::row_major(&cols, depth, positions)?;
    super::gemm_with(backend, 1.0, a, b, 0.0, super::MatMut::row_major(&mut out, co, positions)?)?;
    crate::cpu::pool::give(cols);
    Ok(out)
}
