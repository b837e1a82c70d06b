//! The CUDA backend's matrix products and attention on device buffers: the decoding
//! products on narrower activations, a prompt's GEMMs (fp32, `mma.sync` or Hopper's `wgmma`
//! over f16 copies of the weights), and attention over a layer's caches.

use super::ops::{LayerCache, StepCtx};
use super::{Cuda, CudaWeight, GEMM_ROWS};
use crate::config::Config;
use crate::Result;
use rayo::cuda::{ActFormat, CudaDevice, DeviceBuffer, DeviceBytes, Epilogue, NarrowActivations, QMatvecKernel};
use std::sync::Arc;

impl Cuda {
    /// A decoding step's products over `x` (RMS-normalized first with `norm`) on narrower
    /// activations: one launch narrows, one multiplies (`epi` as [`QMatvecKernel::fused`], and
    /// a bias per matrix added to its sums unless `biases` is empty).
    /// `false`, with nothing done, when they are off, `m` is a prompt's (unless the backend is
    /// deterministic: then every row's), or the matrices have no such kernel or differ in
    /// format or width.
    pub(super) fn narrow_products(
        &mut self,
        x: &DeviceBuffer,
        norm: Option<(&DeviceBuffer, f32)>,
        m: usize,
        ws: &[&Arc<CudaWeight>],
        (epi, biases): (Epilogue, &[&DeviceBuffer]),
        outs: &mut [&mut DeviceBuffer],
    ) -> Result<bool> {
        let (fmt, cols) = (ws[0].fmt, ws[0].cols);
        let act = match self.context.as_ref().map_or(ActFormat::F32, |c| c.act) {
            ActFormat::F32 if self.decode_act.is_none() && ws[0].rows >= super::Q8_MIN_ROWS => ActFormat::Q8,
            a => a,
        };
        let k = QMatvecKernel::fused(fmt, false, ws.len() as u32, epi).and_then(|k| k.with_activations(act)).map(|k| self.alike(k));
        let k = if biases.is_empty() { k } else { k.and_then(QMatvecKernel::with_bias) };
        let same = ws.iter().all(|w| w.fmt == fmt && w.cols == cols);
        let Some(k) = k.filter(|_| act != ActFormat::F32 && m < self.matvec_rows() && same) else { return Ok(false) };
        let Some(c) = self.context.as_mut() else { return Ok(false) };
        if m > c.narrow_rows {
            // a deterministic step's rows, past the decoding steps' room (a recording may hold
            // the old buffer's address)
            let rows = m.next_power_of_two();
            c.narrow = NarrowActivations::new(&self.dev, rows, c.narrow_cols)?;
            c.narrow_rows = rows;
            self.graph.clear();
        }
        let narrow = &mut c.narrow;
        self.dev.narrow_activations(x, norm, cols, m, act, narrow)?;
        let mats: Vec<(&DeviceBytes, usize)> = ws.iter().map(|w| (&w.bytes, w.rows)).collect();
        self.dev.qmatvec_narrow_bias(k, narrow, cols, m, &mats, biases, outs)?;
        self.count(2);
        Ok(true)
    }

    /// From how many rows on a product takes a GEMM: [`GEMM_ROWS`], or never on a
    /// deterministic backend (every row through the matvec kernels, whose sum for a row does
    /// not depend on the rows beside it).
    pub(super) fn matvec_rows(&self) -> usize {
        if self.deterministic {
            usize::MAX
        } else {
            GEMM_ROWS
        }
    }

    /// `k` as this backend launches it: on a deterministic backend each activation row's sum
    /// in the order it has alone ([`QMatvecKernel::rows_alike`]).
    fn alike(&self, k: QMatvecKernel) -> QMatvecKernel {
        k.rows_alike(self.deterministic)
    }

    /// Whether `w·x` for `m` rows takes the GEMM path.
    pub(super) fn use_gemm(&self, w: &CudaWeight, x: &DeviceBuffer, m: usize) -> bool {
        m >= self.matvec_rows() && x.len() >= m.next_multiple_of(128) * w.cols
    }

    /// Whether a prompt's product with `w` runs on the tensor cores.
    pub(super) fn on_tensor_cores(&self, w: &CudaWeight) -> bool {
        self.tensor_cores && CudaDevice::half_gemm_fits(w.rows, w.cols)
    }

    /// Whether a prompt's products with `ws` (one input of `m` rows) run on `wgmma`.
    pub(super) fn on_wgmma(&self, ws: &[&Arc<CudaWeight>], m: usize) -> bool {
        self.tensor_cores
            && self.wgmma.is_some_and(|from| ws[0].cols >= from)
            && m >= self.matvec_rows()
            && ws.iter().all(|w| w.cols == ws[0].cols && self.on_tensor_cores(w))
    }

    /// `outs[i] = x·ws[i]ᵀ` (`add`: `+=`) on `wgmma`: the `m` rows of `x` (RMS-normalized
    /// first with `norm`) rounded to f16 once, in one launch, then a GEMM per matrix.
    pub(super) fn wgmma_products(
        &mut self,
        x: &DeviceBuffer,
        norm: Option<(&DeviceBuffer, f32)>,
        m: usize,
        ws: &[&Arc<CudaWeight>],
        outs: &mut [&mut DeviceBuffer],
        add: bool,
    ) -> Result<()> {
        let cols = ws[0].cols;
        let need = m * cols;
        if self.x16.as_ref().is_none_or(|(_, room)| *room < need) {
            let grown = NarrowActivations::new(&self.dev, m, cols)?;
            self.drop_recording();
            self.x16 = Some((grown, need));
        }
        let (x16, _) = self.x16.as_mut().expect("made above");
        self.dev.narrow_activations(x, norm, cols, m, ActFormat::F16, x16)?;
        for (w, out) in ws.iter().zip(outs.iter_mut()) {
            let wh = f16_weights(&self.dev, w, (&mut self.f16_kept, self.f16_budget), (&mut self.half, &mut self.graph))?;
            let x16 = &self.x16.as_ref().expect("made above").0;
            self.dev.gemm_half_wgmma(x16, wh, (w.rows, w.cols), m, out, add)?;
        }
        Ok(())
    }

    /// `out = x·wᵀ` (`add`: `out += x·wᵀ`) on the tensor cores: `wgmma` where the device has
    /// it and the rows are long enough ([`Cuda::on_wgmma`]), else `mma.sync`.
    pub(super) fn half_matmul(&mut self, w: &Arc<CudaWeight>, x: &DeviceBuffer, m: usize, out: &mut DeviceBuffer, add: bool) -> Result<()> {
        if self.on_wgmma(&[w], m) {
            return self.wgmma_products(x, None, m, &[w], &mut [out], add);
        }
        let wh = f16_weights(&self.dev, w, (&mut self.f16_kept, self.f16_budget), (&mut self.half, &mut self.graph))?;
        self.dev.gemm_half(x, wh, (w.rows, w.cols), m, out, add).map_err(crate::Error::from)
    }

    /// `out = x·wᵀ` through the fp32 GEMM (scratch grown as needed).
    pub(super) fn gemm_matmul(&mut self, w: &CudaWeight, x: &DeviceBuffer, m: usize, out: &mut DeviceBuffer) -> Result<()> {
        let (ld, m_pad) = (w.rows.next_multiple_of(128), m.next_multiple_of(128));
        let (need_wt, need_yp) = (w.cols * ld, m_pad * ld);
        let fits = matches!(&self.gemm, Some((wt, yp)) if wt.len() >= need_wt && yp.len() >= need_yp);
        if !fits {
            let (old_wt, old_yp) = self.gemm.as_ref().map_or((0, 0), |(a, b)| (a.len(), b.len()));
            let grown = (self.dev.zeros(need_wt.max(old_wt))?, self.dev.zeros(need_yp.max(old_yp))?);
            self.drop_recording();
            self.gemm = Some(grown);
        }
        let (wt, yp) = self.gemm.as_mut().expect("made above");
        self.dev.qmatmul_gemm(w.fmt, &w.bytes, (w.rows, w.cols), x, m, out, wt, yp).map_err(crate::Error::from)
    }

    /// `out = x·wᵀ` for `m` rows, by the path the shapes take: a GEMM for a prompt's rows (on
    /// the tensor cores where they fit), else the quantized matvec kernels.
    pub(super) fn product(&mut self, w: &Arc<CudaWeight>, x: &DeviceBuffer, m: usize, out: &mut DeviceBuffer) -> Result<()> {
        if self.use_gemm(w, x, m) {
            if self.on_tensor_cores(w) {
                return self.half_matmul(w, x, m, out, false);
            }
            return self.gemm_matmul(w, x, m, out);
        }
        if self.narrow_products(x, None, m, &[w], (Epilogue::Store, &[]), &mut [out])? {
            return Ok(());
        }
        self.count(1);
        let k = self.alike(QMatvecKernel::new(w.fmt));
        self.dev.qmatvec_fused(k, x, None, w.cols, m, &[(&w.bytes, w.rows)], &mut [out]).map_err(crate::Error::from)
    }

    /// `acc += x·wᵀ` for `m` rows: a prompt's rows on the tensor cores (the fp32 GEMM's path,
    /// through a product then an add, is the caller's), else a matvec kernel that adds.
    pub(super) fn product_add(&mut self, w: &Arc<CudaWeight>, x: &DeviceBuffer, m: usize, acc: &mut DeviceBuffer) -> Result<()> {
        if self.use_gemm(w, x, m) {
            return self.half_matmul(w, x, m, acc, true);
        }
        if self.narrow_products(x, None, m, &[w], (Epilogue::Add, &[]), &mut [acc])? {
            return Ok(());
        }
        let k = self.alike(QMatvecKernel::fused(w.fmt, false, 1, Epilogue::Add).expect("one matrix, add"));
        self.count(1);
        self.dev.qmatvec_fused(k, x, None, w.cols, m, &[(&w.bytes, w.rows)], &mut [acc]).map_err(crate::Error::from)
    }

    /// `outs[i] = rms_norm(x)·wsᵢᵀ (+ biases[i])` for `m` rows (no biases: `biases` empty):
    /// one launch where a fused kernel takes them (the norm computed by each warp, the biases
    /// added to the sums), else the norm into `tmp`, a product each and a launch per bias.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn norm_products(
        &mut self,
        x: &DeviceBuffer,
        norm: &DeviceBuffer,
        eps: f32,
        m: usize,
        (ws, biases): (&[&Arc<CudaWeight>], &[&DeviceBuffer]),
        tmp: &mut DeviceBuffer,
        outs: &mut [&mut DeviceBuffer],
    ) -> Result<()> {
        if self.narrow_products(x, Some((norm, eps)), m, ws, (Epilogue::Store, biases), outs)? {
            return Ok(());
        }
        if self.on_wgmma(ws, m) {
            self.wgmma_products(x, Some((norm, eps)), m, ws, outs, false)?;
            return self.add_biases(outs, biases, m);
        }
        let fmt = ws[0].fmt;
        let same = ws.iter().all(|w| w.fmt == fmt && w.cols == ws[0].cols);
        let fused =
            QMatvecKernel::fused(fmt, true, ws.len() as u32, Epilogue::Store).filter(|_| m < self.matvec_rows() && same).map(|k| self.alike(k));
        let fused = if biases.is_empty() { fused } else { fused.and_then(QMatvecKernel::with_bias) };
        match fused {
            // one launch: the norm computed by each warp, the matrices' rows as one range
            Some(k) => {
                self.count(1);
                let mats: Vec<(&DeviceBytes, usize)> = ws.iter().map(|w| (&w.bytes, w.rows)).collect();
                self.dev.qmatvec_fused_bias(k, x, Some((norm, eps)), ws[0].cols, m, &mats, biases, outs).map_err(crate::Error::from)
            }
            None => {
                self.count(1);
                self.dev.rms_norm_rows(x, norm, m, norm.len(), eps, tmp)?;
                for (w, out) in ws.iter().zip(outs.iter_mut()) {
                    self.product(w, tmp, m, out)?;
                }
                self.add_biases(outs, biases, m)
            }
        }
    }

    /// `outs[i][r] += biases[i]` for `m` rows, a launch each (none without biases).
    fn add_biases(&mut self, outs: &mut [&mut DeviceBuffer], biases: &[&DeviceBuffer], m: usize) -> Result<()> {
        for (out, b) in outs.iter_mut().zip(biases) {
            self.count(1);
            self.dev.add_rows(out, b, m)?;
        }
        Ok(())
    }

    /// `out = act(n·gateᵀ) · (n·upᵀ)`, `n = rms_norm(x)`, with the activation of `epi` (SiLU or
    /// GELU), in the one-launch paths of a decoding step; `false`, with nothing done, where
    /// none applies.
    pub(super) fn fused_gated(
        &mut self,
        epi: Epilogue,
        x: &DeviceBuffer,
        (norm, eps): (&DeviceBuffer, f32),
        m: usize,
        (gate, up): (&Arc<CudaWeight>, &Arc<CudaWeight>),
        out: &mut DeviceBuffer,
    ) -> Result<bool> {
        if gate.rows == up.rows && self.narrow_products(x, Some((norm, eps)), m, &[gate, up], (epi, &[]), &mut [&mut *out])? {
            return Ok(true);
        }
        if gate.fmt == up.fmt && gate.rows == up.rows && gate.cols == up.cols && m < self.matvec_rows() {
            let k = self.alike(QMatvecKernel::fused(gate.fmt, true, 2, epi).expect("two matrices, a gated epilogue"));
            self.count(1);
            self.dev.qmatvec_fused(k, x, Some((norm, eps)), gate.cols, m, &[(&gate.bytes, gate.rows), (&up.bytes, up.rows)], &mut [out])?;
            return Ok(true);
        }
        Ok(false)
    }
}

/// Attention of the pass's rows of `q` over a layer's caches (the new rows already stored):
/// flash attention on the tensor cores for a prompt's rows where it fits, else one block per
/// row.
pub(super) fn attend(tensor_cores: bool, cfg: &Config, st: &StepCtx, cache: &LayerCache, q: &DeviceBuffer, out: &mut DeviceBuffer) -> Result<()> {
    let scale = 1.0 / (cfg.head_dim as f32).sqrt();
    if tensor_cores && st.m() >= GEMM_ROWS && cache.shape.flash_fits() {
        return cache.flash_attend(st, q, scale, out).map_err(crate::Error::from);
    }
    // as the CPU engine (llama.cpp's one-row flash-attention kernel): the query in f16
    let round_q = cache.shape.f16 && st.m() < 64;
    cache.attend(st, q, (scale, round_q), out).map_err(crate::Error::from)
}

/// `w` as f16 for a prompt's tensor-core products: its copy, made on first use and kept while
/// the copies stay within `budget` bytes (`kept` so far), else dequantized into `scratch`
/// (regrowing it drops the backend's recorded step, which may hold the old one's address).
fn f16_weights<'a>(
    dev: &CudaDevice,
    w: &'a CudaWeight,
    (kept, budget): (&mut usize, usize),
    (scratch, recording): (&'a mut Option<DeviceBytes>, &mut super::recording::Recordings),
) -> Result<&'a DeviceBytes> {
    let shape = (w.rows, w.cols);
    let need = w.rows * w.cols * 2;
    if w.f16.get().is_none() && *kept + need <= budget {
        let mut wh = dev.zero_bytes(need)?;
        dev.dequantize_f16(w.fmt, &w.bytes, shape, &mut wh)?;
        *kept += need;
        let _ = w.f16.set(wh);
    }
    if let Some(wh) = w.f16.get() {
        return Ok(wh);
    }
    if scratch.as_ref().is_none_or(|h| h.len() < need) {
        let grown = dev.zero_bytes(need)?;
        recording.clear();
        *scratch = Some(grown);
    }
    let wh = scratch.as_mut().expect("made above");
    dev.dequantize_f16(w.fmt, &w.bytes, shape, wh)?;
    Ok(wh)
}
