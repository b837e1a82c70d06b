//! Host-slice ops: upload, run, read back (one submit per chunk). Inputs larger than the
//! storage-binding limit are processed in chunks (element-wise ops, dot and reductions) or
//! refused with [`Error::BufferTooLarge`] (softmax, matmul, convolve2d), never truncated.

use super::buffer::{blocking, check_matmul, check_reduce_args, check_softmax_shape, softmax_name};
use super::device::GpuDevice;
use super::elementwise::{encode_chain, BinaryOp, Chain, UnaryOp};
use super::encoder::{Encoder, Span};
use super::kernels::{encode_conv2d, encode_matmul, encode_reduce, encode_scaled_squares, encode_softmax};
use super::readback::submit_and_read;
use crate::error::check_len;
use crate::ops::{combine_f64, ReduceOp};
use crate::{Error, Result};

impl GpuDevice {
    /// Elements per chunk: the storage-binding limit in f32.
    fn chunk_elems(&self) -> usize {
        (self.binding_bytes / 4) as usize
    }

    fn refuse_over_limit(&self, op: &'static str, len: usize) -> Result<()> {
        let bytes = (len as u64).saturating_mul(4);
        if bytes > self.binding_bytes {
            return Err(Error::BufferTooLarge { op, bytes, limit: self.binding_bytes });
        }
        Ok(())
    }

    /// `out[i] = op(x[i])`, in chunks of the binding limit.
    pub async fn unary_async(&self, op: UnaryOp, x: &[f32], out: &mut [f32]) -> Result<()> {
        op.validate()?;
        check_len(op.name(), x.len(), out.len())?;
        let chain = Chain::unary(op);
        for (xc, oc) in x.chunks(self.chunk_elems()).zip(out.chunks_mut(self.chunk_elems())) {
            let xi = self.upload_pooled(xc)?;
            let mut enc = Encoder::new(self)?;
            let o = enc.temp(xc.len())?;
            encode_chain(&mut enc, &chain, &[&Span::whole(xi.buffer(), xc.len())], &[&o], xc.len()).await?;
            enc.keep(xi);
            submit_and_read(enc, &o, oc).await?;
        }
        Ok(())
    }

    /// `out[i] = a[i] op b[i]`, in chunks of the binding limit.
    pub async fn binary_async(&self, op: BinaryOp, a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()> {
        op.validate()?;
        check_len(op.name(), a.len(), b.len())?;
        check_len(op.name(), a.len(), out.len())?;
        let chain = Chain::binary(op);
        let c = self.chunk_elems();
        for ((ac, bc), oc) in a.chunks(c).zip(b.chunks(c)).zip(out.chunks_mut(c)) {
            let ai = self.upload_pooled(ac)?;
            let bi = self.upload_pooled(bc)?;
            let mut enc = Encoder::new(self)?;
            let o = enc.temp(ac.len())?;
            let (sa, sb) = (Span::whole(ai.buffer(), ac.len()), Span::whole(bi.buffer(), bc.len()));
            encode_chain(&mut enc, &chain, &[&sa, &sb], &[&o], ac.len()).await?;
            enc.keep(ai);
            enc.keep(bi);
            submit_and_read(enc, &o, oc).await?;
        }
        Ok(())
    }

    /// `op` over `x` (and `y`, for [`ReduceOp::Dot`] only), the same semantics as the CPU's:
    /// NaN propagates (`Max`, `Min`, `NormInf` included); an empty `x` gives 0, or
    /// [`Error::EmptyInput`] for `Max`/`Min`. A tiled multi-stage reduction per chunk of the
    /// binding limit, chunks combined on the host in f64.
    pub async fn reduce_async(&self, op: ReduceOp, x: &[f32], y: Option<&[f32]>) -> Result<f32> {
        check_reduce_args(op, x.len(), y.map(<[f32]>::len))?;
        if x.is_empty() {
            return op.empty_value().ok_or(Error::EmptyInput { op: op.name() });
        }
        if op == ReduceOp::NormL2 && x.len() > self.chunk_elems() {
            return self.norm_l2_chunked(x).await;
        }
        self.reduce_chunks(op, x, y).await.map(|v| v as f32)
    }

    /// One device reduction per chunk, combined in f64 (`NormL2` only when `x` is one chunk).
    async fn reduce_chunks(&self, op: ReduceOp, x: &[f32], y: Option<&[f32]>) -> Result<f64> {
        let mut acc: Option<f64> = None;
        let c = self.chunk_elems();
        for (i, xc) in x.chunks(c).enumerate() {
            let xi = self.upload_pooled(xc)?;
            let yi = match y {
                Some(y) => Some(self.upload_pooled(&y[i * c..i * c + xc.len()])?),
                None => None,
            };
            let mut enc = Encoder::new(self)?;
            let o = enc.temp(1)?;
            let ys = yi.as_ref().map(|p| Span::whole(p.buffer(), xc.len()));
            encode_reduce(&mut enc, op, &Span::whole(xi.buffer(), xc.len()), ys.as_ref(), &o, 0).await?;
            enc.keep(xi);
            if let Some(p) = yi {
                enc.keep(p);
            }
            let mut v = [0.0f32];
            submit_and_read(enc, &o, &mut v).await?;
            let v = v[0] as f64;
            acc = Some(match acc {
                None => v,
                Some(a) => combine_f64(op.combine(), a, v),
            });
        }
        Ok(acc.unwrap_or(0.0))
    }

    /// `NormL2` over several chunks: `s·√(Σ (x/s)²)` with `s = max |x|` over all of them.
    async fn norm_l2_chunked(&self, x: &[f32]) -> Result<f32> {
        let s = self.reduce_chunks(ReduceOp::NormInf, x, None).await? as f32;
        if !s.is_finite() || s == 0.0 {
            return Ok(s);
        }
        let sb = self.upload_pooled(&[s])?;
        let mut total = 0.0f64;
        for xc in x.chunks(self.chunk_elems()) {
            let xi = self.upload_pooled(xc)?;
            let mut enc = Encoder::new(self)?;
            let o = enc.temp(1)?;
            encode_scaled_squares(&mut enc, &Span::whole(xi.buffer(), xc.len()), &Span::whole(sb.buffer(), 1), &o).await?;
            enc.keep(xi);
            let mut v = [0.0f32];
            submit_and_read(enc, &o, &mut v).await?;
            total += v[0] as f64;
        }
        Ok((total.sqrt() * s as f64) as f32)
    }

    /// Σ x (0 for an empty slice): a tiled multi-stage reduction.
    pub async fn sum_async(&self, x: &[f32]) -> Result<f32> {
        self.reduce_async(ReduceOp::Sum, x, None).await
    }

    /// The largest element (NaN if any is NaN); [`Error::EmptyInput`] for an empty slice.
    pub async fn max_async(&self, x: &[f32]) -> Result<f32> {
        self.reduce_async(ReduceOp::Max, x, None).await
    }

    /// The smallest element (NaN if any is NaN); [`Error::EmptyInput`] for an empty slice.
    pub async fn min_async(&self, x: &[f32]) -> Result<f32> {
        self.reduce_async(ReduceOp::Min, x, None).await
    }

    /// a · b.
    pub async fn dot_async(&self, a: &[f32], b: &[f32]) -> Result<f32> {
        self.reduce_async(ReduceOp::Dot, a, Some(b)).await
    }

    /// Σ |x| (0 for an empty slice).
    pub async fn norm_l1_async(&self, x: &[f32]) -> Result<f32> {
        self.reduce_async(ReduceOp::NormL1, x, None).await
    }

    /// √(Σ x²) (0 for an empty slice), scaled by max |x| on the device: no spurious overflow or
    /// underflow, as on the CPU.
    pub async fn norm_l2_async(&self, x: &[f32]) -> Result<f32> {
        self.reduce_async(ReduceOp::NormL2, x, None).await
    }

    /// max |x| (NaN if any is NaN; 0 for an empty slice).
    pub async fn norm_inf_async(&self, x: &[f32]) -> Result<f32> {
        self.reduce_async(ReduceOp::NormInf, x, None).await
    }

    async fn softmax_host(&self, x: &[f32], out: &mut [f32], rows: usize, cols: usize, log: bool) -> Result<()> {
        let op = softmax_name(log);
        check_softmax_shape(op, x.len(), out.len(), rows, cols)?;
        self.refuse_over_limit(op, x.len())?;
        let xi = self.upload_pooled(x)?;
        let mut enc = Encoder::new(self)?;
        let o = enc.temp(x.len())?;
        encode_softmax(&mut enc, &Span::whole(xi.buffer(), x.len()), &o, rows, cols, log).await?;
        enc.keep(xi);
        submit_and_read(enc, &o, out).await
    }

    /// Softmax of the whole slice. Any NaN, or an infinite maximum, makes every output NaN
    /// (as on the CPU); [`Error::EmptyInput`] for an empty slice.
    pub async fn softmax_async(&self, x: &[f32], out: &mut [f32]) -> Result<()> {
        self.softmax_host(x, out, 1, x.len(), false).await
    }

    /// log(softmax(x)), computed as x - max - log Σ exp(x - max); NaN rules as [`Self::softmax_async`].
    pub async fn log_softmax_async(&self, x: &[f32], out: &mut [f32]) -> Result<()> {
        self.softmax_host(x, out, 1, x.len(), true).await
    }

    /// Softmax of each row of a row-major `rows × cols` `x` into `out`: `rows × cols` must be the
    /// length of both ([`Error::SizeMismatch`], [`Error::LengthMismatch`]). A row with a NaN, or
    /// an infinite maximum, becomes all NaN; the other rows are unaffected.
    pub async fn softmax_rows_async(&self, x: &[f32], rows: usize, cols: usize, out: &mut [f32]) -> Result<()> {
        self.softmax_host(x, out, rows, cols, false).await
    }

    /// log_softmax of each row of a row-major `rows × cols` `x`; as [`Self::softmax_rows_async`].
    pub async fn log_softmax_rows_async(&self, x: &[f32], rows: usize, cols: usize, out: &mut [f32]) -> Result<()> {
        self.softmax_host(x, out, rows, cols, true).await
    }

    /// `result (m×n) = a (m×k) · b (k×n)`, row-major.
    pub async fn matmul_async(&self, a: &[f32], b: &[f32], result: &mut [f32], m: usize, k: usize, n: usize) -> Result<()> {
        check_matmul(a.len(), b.len(), result.len(), m, k, n)?;
        for len in [a.len(), b.len(), result.len()] {
            self.refuse_over_limit("matmul", len)?;
        }
        if result.is_empty() {
            return Ok(());
        }
        let (ai, bi) = (self.upload_pooled(a)?, self.upload_pooled(b)?);
        let mut enc = Encoder::new(self)?;
        let c = enc.temp(result.len())?;
        encode_matmul(&mut enc, &Span::whole(ai.buffer(), a.len()), &Span::whole(bi.buffer(), b.len()), &c, m, k, n).await?;
        enc.keep(ai);
        enc.keep(bi);
        submit_and_read(enc, &c, result).await
    }

    /// Valid 2-D convolution (cross-correlation) of an h×w image with a kh×kw kernel into an
    /// (h-kh+1)×(w-kw+1) output.
    #[allow(clippy::too_many_arguments)]
    pub async fn convolve2d_async(&self, image: &[f32], kernel: &[f32], out: &mut [f32], h: usize, w: usize, kh: usize, kw: usize) -> Result<()> {
        let op = "convolve2d";
        // An empty kernel, or one larger than the image: the CPU's variant for both.
        if kh == 0 || kw == 0 || kh > h || kw > w {
            return Err(Error::ShapeMismatch { op, left: vec![h, w], right: vec![kh, kw] });
        }
        let size = |len: usize, r: usize, c: usize| -> Result<()> {
            match r.checked_mul(c) {
                Some(want) if want == len => Ok(()),
                _ => Err(Error::SizeMismatch { op, shape: vec![r, c], len }),
            }
        };
        size(image.len(), h, w)?;
        size(kernel.len(), kh, kw)?;
        size(out.len(), h - kh + 1, w - kw + 1)?;
        for len in [image.len(), kernel.len()] {
            self.refuse_over_limit(op, len)?;
        }
        let (ii, ki) = (self.upload_pooled(image)?, self.upload_pooled(kernel)?);
        let mut enc = Encoder::new(self)?;
        let o = enc.temp(out.len())?;
        encode_conv2d(&mut enc, &Span::whole(ii.buffer(), image.len()), &Span::whole(ki.buffer(), kernel.len()), &o, [h, w, kh, kw]).await?;
        enc.keep(ii);
        enc.keep(ki);
        submit_and_read(enc, &o, out).await
    }

    pub async fn relu_async(&self, x: &[f32], out: &mut [f32]) -> Result<()> {
        self.unary_async(UnaryOp::Relu, x, out).await
    }
    pub async fn leaky_relu_async(&self, x: &[f32], alpha: f32, out: &mut [f32]) -> Result<()> {
        self.unary_async(UnaryOp::LeakyRelu(alpha), x, out).await
    }
    pub async fn elu_async(&self, x: &[f32], alpha: f32, out: &mut [f32]) -> Result<()> {
        self.unary_async(UnaryOp::Elu(alpha), x, out).await
    }
    pub async fn sigmoid_async(&self, x: &[f32], out: &mut [f32]) -> Result<()> {
        self.unary_async(UnaryOp::Sigmoid, x, out).await
    }
    pub async fn tanh_async(&self, x: &[f32], out: &mut [f32]) -> Result<()> {
        self.unary_async(UnaryOp::Tanh, x, out).await
    }
    pub async fn swish_async(&self, x: &[f32], out: &mut [f32]) -> Result<()> {
        self.unary_async(UnaryOp::Swish, x, out).await
    }
    pub async fn gelu_async(&self, x: &[f32], out: &mut [f32]) -> Result<()> {
        self.unary_async(UnaryOp::Gelu, x, out).await
    }
    pub async fn clip_async(&self, x: &[f32], lo: f32, hi: f32, out: &mut [f32]) -> Result<()> {
        self.unary_async(UnaryOp::Clip(lo, hi), x, out).await
    }
    pub async fn scale_async(&self, x: &[f32], s: f32, out: &mut [f32]) -> Result<()> {
        self.unary_async(UnaryOp::Scale(s), x, out).await
    }
    pub async fn vec_add_async(&self, a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()> {
        self.binary_async(BinaryOp::Add, a, b, out).await
    }
    pub async fn vec_sub_async(&self, a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()> {
        self.binary_async(BinaryOp::Sub, a, b, out).await
    }
    pub async fn vec_mul_async(&self, a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()> {
        self.binary_async(BinaryOp::Mul, a, b, out).await
    }

    blocking!(unary => unary_async(op: UnaryOp, x: &[f32], out: &mut [f32]) -> Result<()>);
    blocking!(binary => binary_async(op: BinaryOp, a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()>);
    blocking!(relu => relu_async(x: &[f32], out: &mut [f32]) -> Result<()>);
    blocking!(leaky_relu => leaky_relu_async(x: &[f32], alpha: f32, out: &mut [f32]) -> Result<()>);
    blocking!(elu => elu_async(x: &[f32], alpha: f32, out: &mut [f32]) -> Result<()>);
    blocking!(sigmoid => sigmoid_async(x: &[f32], out: &mut [f32]) -> Result<()>);
    blocking!(tanh => tanh_async(x: &[f32], out: &mut [f32]) -> Result<()>);
    blocking!(swish => swish_async(x: &[f32], out: &mut [f32]) -> Result<()>);
    blocking!(gelu => gelu_async(x: &[f32], out: &mut [f32]) -> Result<()>);
    blocking!(clip => clip_async(x: &[f32], lo: f32, hi: f32, out: &mut [f32]) -> Result<()>);
    blocking!(scale => scale_async(x: &[f32], s: f32, out: &mut [f32]) -> Result<()>);
    blocking!(vec_add => vec_add_async(a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()>);
    blocking!(vec_sub => vec_sub_async(a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()>);
    blocking!(vec_mul => vec_mul_async(a: &[f32], b: &[f32], out: &mut [f32]) -> Result<()>);
    blocking!(softmax => softmax_async(x: &[f32], out: &mut [f32]) -> Result<()>);
    blocking!(log_softmax => log_softmax_async(x: &[f32], out: &mut [f32]) -> Result<()>);
    blocking!(softmax_rows => softmax_rows_async(x: &[f32], rows: usize, cols: usize, out: &mut [f32]) -> Result<()>);
    blocking!(log_softmax_rows => log_softmax_rows_async(x: &[f32], rows: usize, cols: usize, out: &mut [f32]) -> Result<()>);
    blocking!(reduce => reduce_async(op: ReduceOp, x: &[f32], y: Option<&[f32]>) -> Result<f32>);
    blocking!(dot => dot_async(a: &[f32], b: &[f32]) -> Result<f32>);
    blocking!(norm_l1 => norm_l1_async(x: &[f32]) -> Result<f32>);
    blocking!(norm_l2 => norm_l2_async(x: &[f32]) -> Result<f32>);
    blocking!(norm_inf => norm_inf_async(x: &[f32]) -> Result<f32>);
    blocking!(sum => sum_async(x: &[f32]) -> Result<f32>);
    blocking!(max => max_async(x: &[f32]) -> Result<f32>);
    blocking!(min => min_async(x: &[f32]) -> Result<f32>);
    blocking!(matmul => matmul_async(a: &[f32], b: &[f32], result: &mut [f32], m: usize, k: usize, n: usize) -> Result<()>);
    blocking!(
        #[allow(clippy::too_many_arguments)]
        convolve2d => convolve2d_async(image: &[f32], kernel: &[f32], out: &mut [f32], h: usize, w: usize, kh: usize, kw: usize) -> Result<()>);
}
