//! The CUDA backend (feature `cuda`): weights uploaded once, as the file holds them, and
//! multiplied in place by rayo's PTX kernels ([`rayo::cuda`]); activations, the KV cache and
//! RoPE's angle table live on the device. The host sends token rows and reads logits.
//!
//! Every format of the CPU engine (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K–Q6_K)
//! is uploaded as the file holds it and read in place by the kernels.
//!
//! A decoding step's products read the quantized weights in place (the matvec kernels). A
//! prompt's run on the tensor cores: each matrix dequantized to f16 once, on first use, and
//! kept (within a quarter of the device's memory); attention is flash attention over the f16
//! cache. The GEMM is chosen by the device's compute capability: on 9.0 (Hopper), for inputs
//! of at least [`WGMMA_MIN_COLS`] values a row, Hopper's `wgmma` GEMM over activations rounded
//! to f16 once per product input (with the RMSNorm before them, in the same launch);
//! elsewhere the `mma.sync` GEMM that rounds the f32 activations as it reads them.
//! `RAYO_CUDA_PREFILL=mma` keeps `mma.sync` on Hopper too, `RAYO_CUDA_PREFILL=f32` runs a
//! prompt on the exact fp32 kernels instead.
//!
//! A decoding step's products take f32 activations (the norm computed inside the product: one
//! launch per product) or, on models of at least [`Q8_MIN_WIDTH`] values a row, 8-bit ones
//! (one more launch per product input, which quantizes; `dp4a` in the product, for Q4_0,
//! Q4_1, Q8_0, Q4_K and Q6_K weights). `RAYO_CUDA_DECODE=f32|q8|f16` picks one for any model
//! (f16: the inputs rounded to f16 by that extra launch, for every format; measured slower
//! than both, kept for the comparison).

use crate::backend::{Backend, KvType};
use crate::config::{Config, RopeStyle};
use crate::weights::WeightRef;
use rayo::cuda::{
    ActFormat, AttentionShape, CudaDevice, DecodeScratch, DeviceBuffer, DeviceBytes, Epilogue, Expr, NarrowActivations, QFormat, QMatvecKernel,
    Replay, RopePairs, StepInputs,
};
use rayo::gguf::GgufFile;
use rayo::ops::{BinaryOp, UnaryOp};
use rayo::quant::{self, GgmlType};
use rayo::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// A weight matrix on the device.
pub struct CudaWeight {
    fmt: QFormat,
    rows: usize,
    cols: usize,
    bytes: DeviceBytes,
    /// The matrix dequantized to f16 for a prompt's products on the tensor cores, made by the
    /// first one (while the copies fit [`Cuda`]'s budget; past it, into a scratch per product).
    f16: OnceLock<DeviceBytes>,
}

/// The KV cache of every layer, and the shape its kernels take.
pub struct CudaKv {
    shape: AttentionShape,
    k: Vec<DeviceBytes>,
    v: Vec<DeviceBytes>,
}

impl CudaKv {
    /// Layer `layer`'s shape and caches.
    fn layer(&mut self, layer: usize) -> Result<(&AttentionShape, &mut DeviceBytes, &mut DeviceBytes)> {
        let layers = self.k.len();
        match (self.k.get_mut(layer), self.v.get_mut(layer)) {
            (Some(kc), Some(vc)) => Ok((&self.shape, kc, vc)),
            _ => Err(Error::Model { what: format!("layer {layer} is past the cache's {layers} layers") }),
        }
    }
}

/// The device state of the passes over one KV cache.
struct Context {
    /// RoPE's `(cos, sin)` table for the cache's positions.
    rope: DeviceBuffer,
    /// The pass's token ids and first position.
    inputs: StepInputs,
    /// Scratch of a decoding step's attention (split over the positions).
    scratch: DecodeScratch,
    /// A product input in 8 bits or f16, when the decoding products take them.
    narrow: Option<NarrowActivations>,
}

fn no_context() -> Error {
    Error::Model { what: "a pass before the KV cache was made".into() }
}

/// The CUDA backend of one model file.
pub struct Cuda {
    dev: CudaDevice,
    file: Arc<GgufFile>,
    /// Uploaded weights by tensor name (a tied LM head is the embedding table, uploaded once).
    weights: HashMap<String, Arc<CudaWeight>>,
    /// What the passes over one KV cache use on the device (made with the cache).
    context: Option<Context>,
    /// Spare buffers by length: an op writing `x` from `x` computes into a spare and swaps.
    spare: HashMap<usize, DeviceBuffer>,
    /// The recorded one-token step, and whether recording is on (`RAYO_CUDA_GRAPHS=0`: off).
    graph: Option<Replay>,
    graphs: bool,
    /// Device operations (kernels and copies) queued since the recording began: after it, the
    /// recorded step's count.
    ops: usize,
    capturing: bool,
    /// The GEMM path's scratch (a prompt's products): the transposed dequantized weights and
    /// the padded product.
    gemm: Option<(DeviceBuffer, DeviceBuffer)>,
    /// A prompt's products and attention on the tensor cores (f16 operands); off
    /// (`RAYO_CUDA_PREFILL=f32`): the exact fp32 GEMM and the one-block-per-row attention.
    tensor_cores: bool,
    /// On tensor cores: Hopper's `wgmma` GEMM (compute capability 9.0, unless
    /// `RAYO_CUDA_PREFILL=mma`) rather than `mma.sync`, for inputs of at least this many values
    /// a row ([`WGMMA_MIN_COLS`] by default).
    wgmma: Option<usize>,
    /// The `wgmma` products' input: a prompt's rows in f16, and the values it has room for.
    x16: Option<(NarrowActivations, usize)>,
    /// The tensor-core products' scratch: a matrix dequantized to f16 when its copy is not
    /// kept.
    half: Option<DeviceBytes>,
    /// Bytes of the f16 copies kept, and the most they may take (a quarter of the device's
    /// memory): within it a prompt dequantizes each matrix once, not once per product.
    f16_kept: usize,
    f16_budget: usize,
    /// Sampling's results on the device (argmax: 3 words; top-k: 2k + 1).
    sample_out: Option<DeviceBuffer>,
    /// The activations a decoding step's products take: `None` decides by the model's width
    /// when the cache is made (`RAYO_CUDA_DECODE` sets it).
    decode_act: Option<ActFormat>,
}

/// From this many values per activation row on, a decoding step's products take 8-bit
/// activations by default: there the products are bound by the f32 path's unpacking (a
/// 1B-class model); below, by launches, which the quantizing adds.
pub const Q8_MIN_WIDTH: usize = 1024;

/// From this many values per input row on, a prompt's products run on Hopper's `wgmma` GEMM
/// (where the device has it). Shorter rows make short tiles (a few 64-deep slices each), where
/// the pipeline's fill and the epilogue outweigh the faster products: on an H100, SmolLM2-135M
/// (rows of 576 and 1536) prefills at 0.86× `mma.sync`'s speed on `wgmma`, Llama-3.2-1B (2048
/// and 8192) at 1.63× (docs/perf/issue14-hopper.md).
pub const WGMMA_MIN_COLS: usize = 2048;

/// From this many activation rows on, a product dequantizes its weights and runs the GEMM
/// (below, the quantized matvec kernel takes each row).
const GEMM_ROWS: usize = 16;

impl Cuda {
    /// A backend on CUDA device 0 for the weights of `file`. No driver or no device is an
    /// error that names the CPU backend as the alternative.
    pub fn new(file: Arc<GgufFile>) -> Result<Cuda> {
        let dev = CudaDevice::new().map_err(|e| match e {
            Error::NoDevice { reason, .. } => {
                Error::NoDevice { api: "cuda", reason: format!("{reason}; the CPU backend (--backend cpu) runs the model without a GPU") }
            }
            e => e,
        })?;
        let graphs = std::env::var("RAYO_CUDA_GRAPHS").map(|v| v != "0").unwrap_or(true);
        let prefill = std::env::var("RAYO_CUDA_PREFILL").unwrap_or_default();
        let tensor_cores = prefill != "f32";
        let wgmma = (dev.has_wgmma() && prefill != "mma").then_some(WGMMA_MIN_COLS);
        let decode_act = match std::env::var("RAYO_CUDA_DECODE").as_deref() {
            Ok("q8") => Some(ActFormat::Q8),
            Ok("f16") => Some(ActFormat::F16),
            Ok("f32") => Some(ActFormat::F32),
            _ => None,
        };
        Ok(Cuda {
            file,
            weights: HashMap::new(),
            context: None,
            spare: HashMap::new(),
            graph: None,
            graphs,
            ops: 0,
            capturing: false,
            gemm: None,
            tensor_cores,
            wgmma,
            x16: None,
            half: None,
            f16_kept: 0,
            f16_budget: (dev.info().total_memory / 4) as usize,
            sample_out: None,
            decode_act,
            dev,
        })
    }

    /// Whether a prompt's products and attention run on the tensor cores, with f16 operands
    /// (the default, unless `RAYO_CUDA_PREFILL=f32`), or on the exact fp32 kernels.
    pub fn with_tensor_cores(mut self, on: bool) -> Cuda {
        self.tensor_cores = on;
        self
    }

    /// Which of a prompt's tensor-core products run on Hopper's `wgmma` GEMM (only where the
    /// device has it: compute capability 9.0) rather than `mma.sync`: those whose inputs have
    /// at least `from_cols` values a row ([`WGMMA_MIN_COLS`] by default), or none.
    pub fn with_wgmma(mut self, from_cols: Option<usize>) -> Cuda {
        self.wgmma = from_cols.filter(|_| self.dev.has_wgmma());
        self
    }

    /// The activations a decoding step's products take, for any model width (by default: 8
    /// bits from [`Q8_MIN_WIDTH`] values a row on, f32 below, or as `RAYO_CUDA_DECODE` says).
    /// Takes effect when the KV cache is made.
    pub fn with_decode_activations(mut self, act: ActFormat) -> Cuda {
        self.decode_act = Some(act);
        self
    }

    /// The device the backend runs on.
    pub fn device(&self) -> &CudaDevice {
        &self.dev
    }

    fn context(&self) -> Result<&Context> {
        self.context.as_ref().ok_or_else(no_context)
    }

    fn inputs(&self) -> Result<&StepInputs> {
        Ok(&self.context()?.inputs)
    }

    /// A decoding step's products over `x` (RMS-normalized first with `norm`) on narrower
    /// activations: one launch narrows, one multiplies (`epi` as [`QMatvecKernel::fused`]).
    /// `false`, with nothing done, when they are off, `m` is a prompt's, or the matrices have
    /// no such kernel or differ in format or width.
    fn narrow_products(
        &mut self,
        x: &DeviceBuffer,
        norm: Option<(&DeviceBuffer, f32)>,
        m: usize,
        ws: &[&Arc<CudaWeight>],
        epi: Epilogue,
        outs: &mut [&mut DeviceBuffer],
    ) -> Result<bool> {
        let (fmt, cols) = (ws[0].fmt, ws[0].cols);
        let act = self.decode_act.unwrap_or(ActFormat::F32);
        let k = QMatvecKernel::fused(fmt, false, ws.len() as u32, epi).and_then(|k| k.with_activations(act));
        let same = ws.iter().all(|w| w.fmt == fmt && w.cols == cols);
        let Some(k) = k.filter(|_| act != ActFormat::F32 && m < GEMM_ROWS && same) else { return Ok(false) };
        let Some(narrow) = self.context.as_mut().and_then(|c| c.narrow.as_mut()) else { return Ok(false) };
        self.dev.narrow_activations(x, norm, cols, m, act, narrow)?;
        let mats: Vec<(&DeviceBytes, usize)> = ws.iter().map(|w| (&w.bytes, w.rows)).collect();
        self.dev.qmatvec_narrow(k, narrow, cols, m, &mats, outs)?;
        self.count(2);
        Ok(true)
    }

    /// Whether `w·x` for `m` rows takes the GEMM path.
    fn use_gemm(w: &CudaWeight, x: &DeviceBuffer, m: usize) -> bool {
        m >= GEMM_ROWS && x.len() >= m.next_multiple_of(128) * w.cols
    }

    /// Whether a prompt's product with `w` runs on the tensor cores.
    fn on_tensor_cores(&self, w: &CudaWeight) -> bool {
        self.tensor_cores && CudaDevice::half_gemm_fits(w.rows, w.cols)
    }

    /// Whether a prompt's products with `ws` (one input of `m` rows) run on `wgmma`.
    fn on_wgmma(&self, ws: &[&Arc<CudaWeight>], m: usize) -> bool {
        self.tensor_cores
            && self.wgmma.is_some_and(|from| ws[0].cols >= from)
            && m >= GEMM_ROWS
            && ws.iter().all(|w| w.cols == ws[0].cols && self.on_tensor_cores(w))
    }

    /// `outs[i] = x·ws[i]ᵀ` (`add`: `+=`) on `wgmma`: the `m` rows of `x` (RMS-normalized
    /// first with `norm`) rounded to f16 once, in one launch, then a GEMM per matrix.
    fn wgmma_products(
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
            self.x16 = Some((NarrowActivations::new(&self.dev, m, cols)?, need));
        }
        let (x16, _) = self.x16.as_mut().expect("made above");
        self.dev.narrow_activations(x, norm, cols, m, ActFormat::F16, x16)?;
        for (w, out) in ws.iter().zip(outs.iter_mut()) {
            let wh = f16_weights(&self.dev, w, (&mut self.f16_kept, self.f16_budget), &mut self.half)?;
            let x16 = &self.x16.as_ref().expect("made above").0;
            self.dev.gemm_half_wgmma(x16, wh, (w.rows, w.cols), m, out, add)?;
        }
        Ok(())
    }

    /// `out = x·wᵀ` (`add`: `out += x·wᵀ`) on the tensor cores: `wgmma` where the device has
    /// it and the rows are long enough ([`Cuda::on_wgmma`]), else `mma.sync`.
    fn half_matmul(&mut self, w: &Arc<CudaWeight>, x: &DeviceBuffer, m: usize, out: &mut DeviceBuffer, add: bool) -> Result<()> {
        if self.on_wgmma(&[w], m) {
            return self.wgmma_products(x, None, m, &[w], &mut [out], add);
        }
        let wh = f16_weights(&self.dev, w, (&mut self.f16_kept, self.f16_budget), &mut self.half)?;
        self.dev.gemm_half(x, wh, (w.rows, w.cols), m, out, add)
    }

    /// `out = x·wᵀ` through the fp32 GEMM (scratch grown as needed, as above).
    fn gemm_matmul(&mut self, w: &CudaWeight, x: &DeviceBuffer, m: usize, out: &mut DeviceBuffer) -> Result<()> {
        let (ld, m_pad) = (w.rows.next_multiple_of(128), m.next_multiple_of(128));
        let (need_wt, need_yp) = (w.cols * ld, m_pad * ld);
        let fits = matches!(&self.gemm, Some((wt, yp)) if wt.len() >= need_wt && yp.len() >= need_yp);
        if !fits {
            let (old_wt, old_yp) = self.gemm.as_ref().map_or((0, 0), |(a, b)| (a.len(), b.len()));
            self.gemm = Some((self.dev.zeros(need_wt.max(old_wt))?, self.dev.zeros(need_yp.max(old_yp))?));
        }
        let (wt, yp) = self.gemm.as_mut().expect("made above");
        self.dev.qmatmul_gemm(w.fmt, &w.bytes, (w.rows, w.cols), x, m, out, wt, yp)
    }

    /// Attention of `m` rows of `q` over a layer's caches (the new rows already stored).
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &self,
        cfg: &Config,
        shape: &AttentionShape,
        q: &DeviceBuffer,
        (kc, vc): (&DeviceBytes, &DeviceBytes),
        m: usize,
        pos0: usize,
        out: &mut DeviceBuffer,
    ) -> Result<()> {
        let scale = 1.0 / (cfg.head_dim as f32).sqrt();
        if self.tensor_cores && m >= GEMM_ROWS && CudaDevice::flash_attention_fits(shape) {
            return self.dev.flash_attention_rows(shape, q, (kc, vc), m, self.inputs()?, pos0, scale, out);
        }
        // as the CPU engine (llama.cpp's one-row flash-attention kernel): the query in f16
        let round_q = shape.f16 && m < 64;
        self.dev.attention_rows(shape, q, kc, vc, m, self.inputs()?, pos0, scale, round_q, out)
    }

    /// Counts `n` device operations of the step being recorded.
    fn count(&mut self, n: usize) {
        if self.capturing {
            self.ops += n;
        }
    }

    /// A spare buffer of `len` values.
    fn take_spare(&mut self, len: usize) -> Result<DeviceBuffer> {
        match self.spare.remove(&len) {
            Some(b) => Ok(b),
            None => self.dev.zeros(len),
        }
    }
}

/// `w` as f16 for a prompt's tensor-core products: its copy, made on first use and kept while
/// the copies stay within `budget` bytes (`kept` so far), else dequantized into `scratch` (never
/// inside a recorded step, whose products have one row).
fn f16_weights<'a>(
    dev: &CudaDevice,
    w: &'a CudaWeight,
    (kept, budget): (&mut usize, usize),
    scratch: &'a mut Option<DeviceBytes>,
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
        *scratch = Some(dev.zero_bytes(need)?);
    }
    let wh = scratch.as_mut().expect("made above");
    dev.dequantize_f16(w.fmt, &w.bytes, shape, wh)?;
    Ok(wh)
}

/// The rotated pairs of the model's RoPE.
fn pairs(cfg: &Config) -> RopePairs {
    match cfg.rope_style {
        RopeStyle::Adjacent => RopePairs::Adjacent,
        RopeStyle::HalfSplit => RopePairs::HalfSplit,
    }
}

/// The kernel format of a GGUF type, or `None` where the weights are dequantized at load.
fn kernel_format(ty: GgmlType) -> Option<QFormat> {
    Some(match ty {
        GgmlType::F32 => QFormat::F32,
        GgmlType::Q4_0 => QFormat::Q4_0,
        GgmlType::Q4_1 => QFormat::Q4_1,
        GgmlType::Q5_0 => QFormat::Q5_0,
        GgmlType::Q5_1 => QFormat::Q5_1,
        GgmlType::Q8_0 => QFormat::Q8_0,
        GgmlType::F16 => QFormat::F16,
        GgmlType::BF16 => QFormat::BF16,
        GgmlType::Q2_K => QFormat::Q2_K,
        GgmlType::Q3_K => QFormat::Q3_K,
        GgmlType::Q4_K => QFormat::Q4_K,
        GgmlType::Q5_K => QFormat::Q5_K,
        GgmlType::Q6_K => QFormat::Q6_K,
        _ => return None,
    })
}

impl Backend for Cuda {
    type Weight = Arc<CudaWeight>;
    type Vector = DeviceBuffer;
    type Buf = DeviceBuffer;
    type Kv = CudaKv;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn weight(&mut self, file: &GgufFile, w: &WeightRef) -> Result<Arc<CudaWeight>> {
        if !std::ptr::eq(file.as_bytes(), self.file.as_bytes()) {
            return Err(Error::Model { what: format!("tensor {} comes from another file than this backend's", w.name) });
        }
        if let Some(up) = self.weights.get(&w.name) {
            return Ok(Arc::clone(up));
        }
        let m = w.matrix(file)?;
        let (rows, cols) = (m.rows(), m.cols());
        if cols % 32 != 0 {
            return Err(Error::Model { what: format!("tensor {} has rows of {cols} values: the CUDA kernels take multiples of 32", w.name) });
        }
        let (fmt, bytes) = match kernel_format(m.ty()) {
            Some(f) => (f, self.dev.upload_bytes(m.bytes())?),
            None => {
                log::info!("cuda: {} ({:?}) dequantized to f32 on the device (no kernel for its format yet)", w.name, m.ty());
                let mut f = vec![0f32; rows * cols];
                quant::dequantize(m.ty(), m.bytes(), &mut f)?;
                (QFormat::F32, self.dev.upload_bytes(bytemuck::cast_slice(&f))?)
            }
        };
        let up = Arc::new(CudaWeight { fmt, rows, cols, bytes, f16: OnceLock::new() });
        self.weights.insert(w.name.clone(), Arc::clone(&up));
        Ok(up)
    }

    fn vector(&mut self, v: &[f32]) -> Result<DeviceBuffer> {
        self.dev.upload(v)
    }

    fn buffer(&mut self, len: usize) -> Result<DeviceBuffer> {
        self.dev.zeros(len)
    }

    fn kv_cache(&mut self, cfg: &Config, positions: usize, ty: KvType) -> Result<CudaKv> {
        let shape = AttentionShape { n_head: cfg.n_head, n_head_kv: cfg.n_head_kv, head_dim: cfg.head_dim, positions, f16: ty == KvType::F16 };
        let bytes = shape.layer_bytes().ok_or(Error::SizeOverflow { op: "cuda kv_cache", dims: vec![positions, cfg.kv_width()] })?;
        let mut k = Vec::with_capacity(cfg.n_layer);
        let mut v = Vec::with_capacity(cfg.n_layer);
        for _ in 0..cfg.n_layer {
            k.push(self.dev.zero_bytes(bytes)?);
            v.push(self.dev.zero_bytes(bytes)?);
        }
        self.context = Some(Context {
            rope: self.dev.upload(&crate::cpu::rope::table(cfg, positions))?,
            inputs: StepInputs::new(&self.dev, positions)?,
            scratch: self.dev.decode_attention_scratch(cfg.n_head, cfg.head_dim)?,
            narrow: None,
        });
        let act = self.decode_act.unwrap_or(if cfg.n_embd >= Q8_MIN_WIDTH { ActFormat::Q8 } else { ActFormat::F32 });
        if act != ActFormat::F32 {
            // the widest product input: the hidden state, the attention's output, the FFN's
            let width = cfg.n_embd.max(cfg.n_ff).max(cfg.n_head * cfg.head_dim);
            let narrow = NarrowActivations::new(&self.dev, GEMM_ROWS, width.next_multiple_of(32))?;
            self.context.as_mut().expect("made above").narrow = Some(narrow);
        }
        self.decode_act = Some(act);
        Ok(CudaKv { shape, k, v })
    }

    fn embed(&mut self, table: &Arc<CudaWeight>, tokens: &[u32], x: &mut DeviceBuffer) -> Result<()> {
        // the ids were written to the device by `step_inputs` (checked against the vocabulary)
        self.count(1);
        let inputs = self.inputs()?;
        self.dev.embed_rows(table.fmt, &table.bytes, table.rows, table.cols, inputs, tokens.len(), x)
    }

    fn rms_norm(&mut self, x: &DeviceBuffer, w: &DeviceBuffer, eps: f32, m: usize, out: &mut DeviceBuffer) -> Result<()> {
        self.count(1);
        self.dev.rms_norm_rows(x, w, m, w.len(), eps, out)
    }

    fn matmul(&mut self, w: &Arc<CudaWeight>, x: &DeviceBuffer, m: usize, out: &mut DeviceBuffer) -> Result<()> {
        if Self::use_gemm(w, x, m) {
            if self.on_tensor_cores(w) {
                return self.half_matmul(w, x, m, out, false);
            }
            return self.gemm_matmul(w, x, m, out);
        }
        if self.narrow_products(x, None, m, &[w], Epilogue::Store, &mut [out])? {
            return Ok(());
        }
        self.count(1);
        self.dev.qmatvec(w.fmt, &w.bytes, w.rows, w.cols, x, m, out)
    }

    fn add_bias(&mut self, x: &mut DeviceBuffer, b: &DeviceBuffer, m: usize) -> Result<()> {
        // (qwen2's q/k/v biases: through the host until a broadcast kernel lands)
        let width = b.len();
        let mut xs = vec![0f32; m * width];
        let mut bs = vec![0f32; width];
        self.dev.download_prefix(x, &mut xs)?;
        self.dev.download_prefix(b, &mut bs)?;
        for row in xs.chunks_exact_mut(width) {
            row.iter_mut().zip(&bs).for_each(|(v, b)| *v += b);
        }
        self.dev.write_at(x, 0, &xs)
    }

    fn add(&mut self, x: &mut DeviceBuffer, y: &DeviceBuffer, len: usize) -> Result<()> {
        self.count(1);
        let mut out = self.take_spare(x.len())?;
        let e = Expr::input(0).combine(BinaryOp::Add, Expr::input(1));
        self.dev.elementwise_n(&e, &[&*x, y], &mut out, len)?;
        std::mem::swap(x, &mut out);
        self.spare.insert(out.len(), out);
        Ok(())
    }

    fn swiglu(&mut self, gate: &mut DeviceBuffer, up: &DeviceBuffer, len: usize) -> Result<()> {
        self.count(1);
        let mut out = self.take_spare(gate.len())?;
        let e = Expr::input(0).apply(UnaryOp::Swish).combine(BinaryOp::Mul, Expr::input(1));
        self.dev.elementwise_n(&e, &[&*gate, up], &mut out, len)?;
        std::mem::swap(gate, &mut out);
        self.spare.insert(out.len(), out);
        Ok(())
    }

    fn rope(&mut self, cfg: &Config, q: &mut DeviceBuffer, k: &mut DeviceBuffer, m: usize, pos0: usize) -> Result<()> {
        self.count(1);
        let c = self.context()?;
        self.dev.rope_rows(pairs(cfg), q, k, &c.rope, &c.inputs, m, (cfg.n_head, cfg.n_head_kv), cfg.head_dim, cfg.n_rot, pos0)
    }

    fn attention(
        &mut self,
        cfg: &Config,
        kv: &mut CudaKv,
        layer: usize,
        q: &DeviceBuffer,
        k: &DeviceBuffer,
        v: &DeviceBuffer,
        m: usize,
        pos0: usize,
        out: &mut DeviceBuffer,
    ) -> Result<()> {
        let (shape, kc, vc) = kv.layer(layer)?;
        self.count(2);
        self.dev.kv_store(shape, k, v, m, self.inputs()?, pos0, kc, vc)?;
        self.attend(cfg, shape, q, (kc, vc), m, pos0, out)
    }

    fn copy_row(&mut self, x: &DeviceBuffer, row: usize, width: usize, out: &mut DeviceBuffer) -> Result<()> {
        self.count(1);
        self.dev.copy_within_device(x, row * width, out, 0, width)
    }

    fn read(&mut self, x: &DeviceBuffer, out: &mut [f32]) -> Result<()> {
        self.dev.download_prefix(x, out)
    }

    fn argmax(&mut self, x: &DeviceBuffer, n: usize) -> Result<u32> {
        if self.sample_out.is_none() {
            self.sample_out = Some(self.dev.zeros(3)?);
        }
        let r = self.dev.argmax(x, n, self.sample_out.as_mut().expect("made above"))?;
        let bad = r.first_bad.map(|(i, v)| (i as usize, v));
        crate::sample::greedy_verdict(n, r.index.unwrap_or(0) as usize, r.max, bad)
    }

    fn top_k(&mut self, x: &DeviceBuffer, n: usize, k: usize) -> Result<Vec<(u32, f32)>> {
        let need = 2 * k + 1;
        if self.sample_out.as_ref().is_none_or(|b| b.len() < need) {
            self.sample_out = Some(self.dev.zeros(need.max(3))?);
        }
        let r = self.dev.top_k(x, n, k, self.sample_out.as_mut().expect("made above"))?;
        let bad = r.first_bad.map(|(i, v)| (i as usize, v));
        // the greedy checks: no NaN or +inf, a finite best
        let (id, best) = r.best.first().copied().unwrap_or((0, f32::NEG_INFINITY));
        crate::sample::greedy_verdict(n, id as usize, best, bad)?;
        Ok(r.best)
    }

    fn step_inputs(&mut self, tokens: &[u32], pos0: usize) -> Result<()> {
        let c = self.context.as_mut().ok_or_else(no_context)?;
        c.inputs.write(&self.dev, tokens, pos0)
    }

    fn norm_matmuls(
        &mut self,
        x: &DeviceBuffer,
        norm: &DeviceBuffer,
        eps: f32,
        m: usize,
        ws: &[&Arc<CudaWeight>],
        tmp: &mut DeviceBuffer,
        outs: &mut [&mut DeviceBuffer],
    ) -> Result<()> {
        if self.narrow_products(x, Some((norm, eps)), m, ws, Epilogue::Store, outs)? {
            return Ok(());
        }
        if self.on_wgmma(ws, m) {
            return self.wgmma_products(x, Some((norm, eps)), m, ws, outs, false);
        }
        let fmt = ws[0].fmt;
        let same = ws.iter().all(|w| w.fmt == fmt && w.cols == ws[0].cols);
        let k = QMatvecKernel::fused(fmt, true, ws.len() as u32, Epilogue::Store).filter(|_| m < GEMM_ROWS);
        match k {
            // one launch: the norm computed by each warp, the matrices' rows as one range
            Some(k) if same => {
                self.count(1);
                let mats: Vec<(&DeviceBytes, usize)> = ws.iter().map(|w| (&w.bytes, w.rows)).collect();
                self.dev.qmatvec_fused(k, x, Some((norm, eps)), ws[0].cols, m, &mats, outs)
            }
            _ => {
                self.rms_norm(x, norm, eps, m, tmp)?;
                for (w, out) in ws.iter().zip(outs.iter_mut()) {
                    self.matmul(w, tmp, m, out)?;
                }
                Ok(())
            }
        }
    }

    fn matmul_add(
        &mut self,
        w: &Arc<CudaWeight>,
        x: &DeviceBuffer,
        m: usize,
        tmp: &mut DeviceBuffer,
        acc: &mut DeviceBuffer,
        len: usize,
    ) -> Result<()> {
        if Self::use_gemm(w, x, m) {
            // a prompt's rows: a GEMM (the matvec kernel would read the weights once per
            // row); the tensor cores' adds onto `acc` itself
            if self.on_tensor_cores(w) {
                return self.half_matmul(w, x, m, acc, true);
            }
            self.gemm_matmul(w, x, m, tmp)?;
            return self.add(acc, tmp, len);
        }
        if self.narrow_products(x, None, m, &[w], Epilogue::Add, &mut [acc])? {
            return Ok(());
        }
        let k = QMatvecKernel::fused(w.fmt, false, 1, Epilogue::Add).expect("one matrix, add");
        self.count(1);
        self.dev.qmatvec_fused(k, x, None, w.cols, m, &[(&w.bytes, w.rows)], &mut [acc])
    }

    fn norm_swiglu(
        &mut self,
        x: &DeviceBuffer,
        norm: &DeviceBuffer,
        eps: f32,
        m: usize,
        (gate, up): (&Arc<CudaWeight>, &Arc<CudaWeight>),
        tmp: &mut DeviceBuffer,
        out: &mut DeviceBuffer,
        up_out: &mut DeviceBuffer,
        len: usize,
    ) -> Result<()> {
        if gate.rows == up.rows && self.narrow_products(x, Some((norm, eps)), m, &[gate, up], Epilogue::Swiglu, &mut [out])? {
            return Ok(());
        }
        if gate.fmt == up.fmt && gate.rows == up.rows && gate.cols == up.cols && m < GEMM_ROWS {
            let k = QMatvecKernel::fused(gate.fmt, true, 2, Epilogue::Swiglu).expect("two matrices, swiglu");
            self.count(1);
            return self.dev.qmatvec_fused(k, x, Some((norm, eps)), gate.cols, m, &[(&gate.bytes, gate.rows), (&up.bytes, up.rows)], &mut [out]);
        }
        if self.on_wgmma(&[gate, up], m) {
            self.wgmma_products(x, Some((norm, eps)), m, &[gate, up], &mut [&mut *out, &mut *up_out], false)?;
            return self.swiglu(out, up_out, len);
        }
        self.rms_norm(x, norm, eps, m, tmp)?;
        self.matmul(gate, tmp, m, out)?;
        self.matmul(up, tmp, m, up_out)?;
        self.swiglu(out, up_out, len)
    }

    fn rope_attention(
        &mut self,
        cfg: &Config,
        kv: &mut CudaKv,
        layer: usize,
        (q, k, v): (&mut DeviceBuffer, &mut DeviceBuffer, &DeviceBuffer),
        m: usize,
        pos0: usize,
        out: &mut DeviceBuffer,
    ) -> Result<()> {
        let (shape, kc, vc) = kv.layer(layer)?;
        // a decoding step: RoPE, the KV store and attention (split over the positions) in one
        // launch (`RAYO_CUDA_FUSED_ROPE=0`: the two launches of a prompt's rows)
        let fused = m == 1 && cfg.n_rot == cfg.head_dim && std::env::var("RAYO_CUDA_FUSED_ROPE").map_or(true, |v| v != "0");
        self.count(if fused { 1 } else { 2 });
        let c = self.context.as_mut().ok_or_else(no_context)?;
        if fused {
            let scale = 1.0 / (cfg.head_dim as f32).sqrt();
            let step = (&c.rope, cfg.n_rot);
            return self.dev.rope_attention_step(
                pairs(cfg),
                shape,
                (q, k, v),
                (kc, vc),
                step,
                &c.inputs,
                pos0,
                (scale, shape.f16),
                &mut c.scratch,
                out,
            );
        }
        // one launch rotates Q and K and stores K and V; a second attends
        self.dev.rope_store_rows(pairs(cfg), q, k, v, (shape, kc, vc), &c.rope, &c.inputs, m, cfg.n_rot, pos0)?;
        self.attend(cfg, shape, q, (kc, vc), m, pos0, out)
    }

    fn step_ops(&self) -> usize {
        if self.graph.is_some() {
            self.ops
        } else {
            0
        }
    }

    fn step_graph_ready(&self) -> bool {
        self.graph.is_some()
    }

    fn begin_step_capture(&mut self) -> Result<bool> {
        if !self.graphs {
            return Ok(false);
        }
        self.dev.begin_capture()?;
        (self.ops, self.capturing) = (0, true);
        Ok(true)
    }

    fn end_step_capture(&mut self) -> Result<()> {
        self.capturing = false;
        self.graph = Some(self.dev.end_capture()?);
        Ok(())
    }

    fn replay_step(&mut self) -> Result<()> {
        let g = self.graph.as_ref().ok_or(Error::Model { what: "no recorded step to replay".into() })?;
        // SAFETY: the recorded step used the session's buffers, weights and cache and this
        // backend's spares, inputs and RoPE table: all live as long as this backend (a session
        // drops its backend, holding the graph, before its buffers), and none is reallocated
        // (spares are kept by length; the inputs and the cache are made once).
        unsafe { g.replay() }
    }
}
