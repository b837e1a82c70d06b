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
//! Q4_1, Q5_0, Q5_1, Q8_0, Q4_K and Q6_K weights); the output head ([`Q8_MIN_ROWS`]) takes
//! 8-bit ones on every model. `RAYO_CUDA_DECODE=f32|q8|f16` picks one for any model
//! (f16: the inputs rounded to f16 by that extra launch, for every format; measured slower
//! than both, kept for the comparison).

mod context;
mod memory;
mod new;
pub mod ops;
mod products;
mod ranks;
mod recording;

pub use context::CudaKv;
pub use memory::CudaBuf;

use crate::backend::{Backend, KvType};
use crate::collective::Collective;
use crate::config::{Config, RopeStyle};
use crate::shard::Shard;
use crate::weights::WeightRef;
use crate::{Error, Result};
use context::{no_context, Context};
use memory::{Arena, Held};
use ops::{AttentionShape, Rope, RopePairs};
use products::attend;
use rayo::cuda::{ActFormat, CudaDevice, DeviceBuffer, DeviceBytes, Epilogue, Expr, NarrowActivations, QFormat};
use rayo::gguf::GgufFile;
use rayo::ops::{BinaryOp, UnaryOp};
use rayo::quant::{self, GgmlType};
use recording::Recordings;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// A weight matrix on the device (kept by the backend that uploaded it for as long as it
/// lives; usable only with that backend).
pub struct CudaWeight {
    owner: u64,
    fmt: QFormat,
    rows: usize,
    cols: usize,
    bytes: DeviceBytes,
    /// The matrix dequantized to f16 for a prompt's products on the tensor cores, made by the
    /// first one (while the copies fit [`Cuda`]'s budget; past it, into a scratch per product).
    f16: OnceLock<DeviceBytes>,
}

/// The CUDA backend of one model file.
///
/// It owns every byte a pass touches: weights (kept by name), activation buffers and vectors
/// (an arena; callers hold [`CudaBuf`] handles), the KV cache (a [`CudaKv`] handle) and its
/// own scratch. A recorded one-token step is dropped before any memory it may reference is
/// freed or replaced, and nothing is allocated while a step records.
pub struct Cuda {
    dev: CudaDevice,
    id: u64,
    file: Arc<GgufFile>,
    /// Uploaded weights by tensor name (a tied LM head is the embedding table, uploaded once).
    weights: HashMap<String, Arc<CudaWeight>>,
    /// Activation buffers and vectors, by handle.
    arena: Arena,
    /// The KV cache and what the passes over it use on the device (made by `kv_cache`).
    context: Option<Context>,
    generations: u64,
    /// Spare buffers by length: an op writing `x` from `x` computes into a spare and swaps it
    /// into `x`'s slot (never freed: a recording may hold either address).
    spare: HashMap<usize, Vec<DeviceBuffer>>,
    /// A tensor-parallel rank's gathers of several rows through NCCL: the ranks' parts, one
    /// after another, by length (made by the first gather of a length, never freed: a
    /// recording may hold it).
    gathered: HashMap<usize, DeviceBuffer>,
    /// The recorded steps, and whether recording is on (`RAYO_CUDA_GRAPHS=0`: off).
    graph: Recordings,
    graphs: bool,
    /// Whether a one-token step has run (the next may be recorded: the first loads the kernels
    /// and makes the scratch, which a recording cannot); the same for steps of that many
    /// one-token rows.
    stepped_once: bool,
    rows_stepped: std::collections::HashSet<usize>,
    /// Device operations (kernels and copies) queued since the recording began: after it, the
    /// recorded step's count.
    ops: usize,
    capturing: bool,
    /// Whether the step being recorded asked for a collective through the host (refused while
    /// recording): that step runs unrecorded from then on, where any other refusal is an error.
    host_refused: bool,
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
    /// A decoding step's RoPE, KV store and attention in one launch (`RAYO_CUDA_FUSED_ROPE=0`:
    /// two).
    fused_rope: bool,
    /// Every row through the kernels a decoding row takes (no GEMM, no tensor cores), so a
    /// row's logits do not depend on the rows beside it ([`Cuda::with_deterministic`]).
    deterministic: bool,
    /// The tensor-parallel world this backend runs a rank of ([`Cuda::with_group`]), else
    /// `None`.
    group: Option<Box<dyn Collective>>,
    /// The group's collectives on the device, where every rank could make a communicator.
    nccl: Option<rayo::cuda::nccl::Communicator>,
}

/// From this many values per activation row on, a decoding step's products take 8-bit
/// activations by default: there the products are bound by the f32 path's unpacking (a
/// 1B-class model); below, by launches, which the quantizing adds.
pub const Q8_MIN_WIDTH: usize = 1024;

/// A decoding product of at least this many rows (an output head) takes 8-bit activations
/// below [`Q8_MIN_WIDTH`] too, unless `RAYO_CUDA_DECODE` or
/// [`Cuda::with_decode_activations`] chose: its rows are bound by the f32 path's unpacking, not
/// by launches (Qwen2.5-0.5B's 151,936 × 896 Q5_0 head read 94 MB at ~700 GB/s).
pub const Q8_MIN_ROWS: usize = 32_768;

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
    fn context(&self) -> Result<&Context> {
        self.context.as_ref().ok_or_else(no_context)
    }

    /// The context of the cache `kv` names: an error for a handle of another backend or of a
    /// cache since replaced.
    fn context_of(&mut self, kv: &CudaKv) -> Result<&mut Context> {
        if kv.owner != self.id {
            return Err(rayo::Error::ForeignBuffer { op: "cuda kv cache", owner: kv.owner, user: self.id }.into());
        }
        match self.context.as_mut() {
            Some(c) if c.generation == kv.generation => Ok(c),
            _ => Err(Error::backend("cuda", "this KV cache was replaced by a later kv_cache call of its backend")),
        }
    }

    /// An error unless every weight was uploaded by this backend.
    fn owns(&self, ws: &[&CudaWeight]) -> Result<()> {
        match ws.iter().find(|w| w.owner != self.id) {
            Some(w) => Err(rayo::Error::ForeignBuffer { op: "cuda weight", owner: w.owner, user: self.id }.into()),
            None => Ok(()),
        }
    }

    /// Runs `f` on the buffers of `ins` (read) and `outs` (written), taken out of the arena
    /// for the call.
    fn with<R>(
        &mut self,
        ins: &[&CudaBuf],
        outs: &[&CudaBuf],
        f: impl FnOnce(&mut Cuda, &[&DeviceBuffer], &mut [&mut DeviceBuffer]) -> Result<R>,
    ) -> Result<R> {
        let mut held = Held::take(&mut self.arena, ins, outs)?;
        let r = {
            let (ins, mut outs) = held.split();
            f(self, &ins, &mut outs)
        };
        held.restore(&mut self.arena);
        r
    }

    /// Drops the recorded step: memory it may reference is about to be replaced.
    fn drop_recording(&mut self) {
        self.graph.clear();
    }

    /// Counts `n` device operations of the step being recorded.
    fn count(&mut self, n: usize) {
        if self.capturing {
            self.ops += n;
        }
    }

    /// [`Backend::norm_swiglu`] or [`Backend::norm_geglu`], as `epi` says: the norm, both
    /// products and the activation in one launch where a decoding kernel has them, else the
    /// products and then the element-wise activation.
    fn norm_gated(
        &mut self,
        epi: Epilogue,
        (x, norm, eps): (&CudaBuf, &CudaBuf, f32),
        m: usize,
        (gate, up): (&Arc<CudaWeight>, &Arc<CudaWeight>),
        (tmp, out, up_out): (&mut CudaBuf, &mut CudaBuf, &mut CudaBuf),
        len: usize,
    ) -> Result<()> {
        self.owns(&[gate, up])?;
        let fused = self.with(&[x, norm], &[out], |s, ins, outs| s.fused_gated(epi, ins[0], (ins[1], eps), m, (gate, up), outs[0]))?;
        if fused {
            return Ok(());
        }
        self.with(&[x, norm], &[tmp, out, up_out], |s, ins, outs| {
            let [tmp, out, up_out] = outs else { unreachable!("three outputs") };
            if s.on_wgmma(&[gate, up], m) {
                return s.wgmma_products(ins[0], Some((ins[1], eps)), m, &[gate, up], &mut [&mut **out, &mut **up_out], false);
            }
            s.count(1);
            s.dev.rms_norm_rows(ins[0], ins[1], m, ins[1].len(), eps, tmp)?;
            s.product(gate, tmp, m, out)?;
            s.product(up, tmp, m, up_out)
        })?;
        match epi {
            Epilogue::Geglu => self.geglu(out, up_out, len),
            _ => self.swiglu(out, up_out, len),
        }
    }

    /// `x = f(x, y)` element-wise over the first `len` values: computed into a spare of `x`'s
    /// length, which then takes `x`'s slot (the old buffer becomes the spare).
    fn combine_into(&mut self, e: &Expr, x: &CudaBuf, y: &CudaBuf, len: usize) -> Result<()> {
        self.map_into(e, &[x, y], len)
    }

    /// `x = f(x, …)` element-wise over the first `len` values, `x` the first of `ins` (input 0
    /// of `e`): as [`Cuda::combine_into`].
    fn map_into(&mut self, e: &Expr, ins: &[&CudaBuf], len: usize) -> Result<()> {
        let x = ins.first().ok_or_else(|| Error::backend("cuda", "an element-wise op without inputs"))?;
        self.count(1);
        let mut out = match self.spare.get_mut(&x.len()).and_then(Vec::pop) {
            Some(b) => b,
            None => self.dev.zeros(x.len())?,
        };
        let ran = self.with(ins, &[], |s, ins, _| Ok(s.dev.elementwise_n(e, ins, &mut out, len)?));
        let old = match ran {
            Ok(()) => self.arena.swap(x, out)?,
            Err(e) => {
                self.spare.entry(out.len()).or_default().push(out);
                return Err(e);
            }
        };
        self.spare.entry(old.len()).or_default().push(old);
        Ok(())
    }
}

/// The rotated pairs of the model's RoPE.
fn pairs(cfg: &Config) -> RopePairs {
    match cfg.arch.rope {
        RopeStyle::Adjacent => RopePairs::Adjacent,
        RopeStyle::HalfSplit => RopePairs::HalfSplit,
    }
}

/// The kernel format of a GGUF type, or `None` where the weights are dequantized at load.
fn kernel_format(ty: GgmlType) -> Option<QFormat> {
    QFormat::of_id(ty.id())
}

impl Backend for Cuda {
    type Weight = Arc<CudaWeight>;
    type Vector = CudaBuf;
    type Buf = CudaBuf;
    type Kv = CudaKv;

    fn name(&self) -> &'static str {
        "cuda"
    }

    fn shard(&self) -> Shard {
        self.group.as_ref().map_or(Shard::ALONE, |g| g.shard())
    }

    fn all_reduce(&mut self, buf: &mut CudaBuf, len: usize) -> Result<()> {
        self.sum(buf, len)
    }

    fn all_gather_rows(&mut self, part: &CudaBuf, m: usize, width: usize, out: &mut CudaBuf) -> Result<()> {
        self.gather(part, m, width, out)
    }

    fn check_config(&self, cfg: &Config, context: usize) -> Result<()> {
        let refuse = |what: String| Err(Error::backend("cuda", format!("{what}: the CUDA backend cannot run this model (--backend cpu can)")));
        // every matrix's rows: the kernels read blocks of 32 values
        for (name, cols) in
            [("the embedding length", cfg.n_embd), ("the query width (heads × head size)", cfg.q_width()), ("the feed-forward length", cfg.n_ff)]
        {
            if cols % 32 != 0 {
                return refuse(format!("{name} {cols} is not a multiple of 32"));
            }
        }
        let shape =
            AttentionShape { n_head: cfg.n_head, n_head_kv: cfg.n_head_kv, head_dim: cfg.head_dim, positions: context, f16: true, window: None };
        let fused = (cfg.n_rot == cfg.head_dim && self.fused_rope).then(|| pairs(cfg));
        shape.check(fused).or_else(|e| refuse(format!("{} heads of {} values over {context} positions ({e})", cfg.n_head, cfg.head_dim)))
    }

    fn weight(&mut self, file: &GgufFile, w: &WeightRef) -> Result<Arc<CudaWeight>> {
        if !std::ptr::eq(file.as_bytes(), self.file.as_bytes()) {
            return Err(Error::backend("cuda", format!("tensor {} comes from another file than this backend's", w.name)));
        }
        if let Some(up) = self.weights.get(&w.name) {
            return Ok(Arc::clone(up));
        }
        let m = w.matrix(file)?;
        let (rows, cols) = (m.rows(), m.cols());
        if cols % 32 != 0 {
            return Err(Error::backend("cuda", format!("tensor {} has rows of {cols} values: the CUDA kernels take multiples of 32", w.name)));
        }
        let (fmt, bytes) = match kernel_format(m.ty()) {
            Some(f) => (f, self.dev.upload_bytes(m.bytes())?),
            None => {
                log::info!("cuda: {} ({:?}) dequantized to f32 on the device (no kernel for its format yet)", w.name, m.ty());
                let n = rows.checked_mul(cols).ok_or(rayo::Error::SizeOverflow { op: "cuda weight", dims: vec![rows, cols] })?;
                let mut f = vec![0f32; n];
                quant::dequantize(m.ty(), m.bytes(), &mut f)?;
                (QFormat::F32, self.dev.upload_bytes(bytemuck::cast_slice(&f))?)
            }
        };
        let up = Arc::new(CudaWeight { owner: self.id, fmt, rows, cols, bytes, f16: OnceLock::new() });
        self.weights.insert(w.name.clone(), Arc::clone(&up));
        Ok(up)
    }

    fn vector(&mut self, v: &[f32]) -> Result<CudaBuf> {
        let b = self.dev.upload(v)?;
        Ok(self.arena.add(b))
    }

    fn buffer(&mut self, len: usize) -> Result<CudaBuf> {
        let b = self.dev.zeros(len)?;
        Ok(self.arena.add(b))
    }

    fn kv_cache(&mut self, cfg: &Config, positions: usize, ty: KvType) -> Result<CudaKv> {
        let mut one = self.kv_caches(cfg, positions, ty, 1)?;
        Ok(one.pop().expect("one cache made"))
    }

    fn kv_caches(&mut self, cfg: &Config, positions: usize, ty: KvType, slots: usize) -> Result<Vec<CudaKv>> {
        // the recording and the old cache go first (it may hold their addresses; and the
        // memory is needed for the new one)
        self.drop_recording();
        self.context = None;
        let act = self.decode_act.unwrap_or(if cfg.n_embd >= Q8_MIN_WIDTH { ActFormat::Q8 } else { ActFormat::F32 });
        self.generations += 1;
        self.context = Some(Context::new(&self.dev, cfg, (positions, ty, slots), act, self.generations)?);
        Ok((0..slots).map(|slot| CudaKv { owner: self.id, generation: self.generations, slot }).collect())
    }

    fn embed(&mut self, table: &Arc<CudaWeight>, tokens: &[u32], x: &mut CudaBuf) -> Result<()> {
        // the ids were written to the device by `step_inputs` (checked against the vocabulary)
        self.owns(&[table])?;
        self.count(1);
        self.with(&[], &[x], |s, _, outs| {
            let st = s.context()?.inputs.step(&s.dev)?;
            if st.m() != tokens.len() {
                return Err(rayo::Error::LengthMismatch { op: "cuda embed_rows", expected: st.m(), actual: tokens.len() }.into());
            }
            Ok(st.embed(table.fmt, &table.bytes, (table.rows, table.cols), outs[0])?)
        })
    }

    fn rms_norm(&mut self, x: &CudaBuf, w: &CudaBuf, eps: f32, m: usize, out: &mut CudaBuf) -> Result<()> {
        self.count(1);
        self.with(&[x, w], &[out], |s, ins, outs| Ok(s.dev.rms_norm_rows(ins[0], ins[1], m, ins[1].len(), eps, outs[0])?))
    }

    fn matmul(&mut self, w: &Arc<CudaWeight>, x: &CudaBuf, m: usize, out: &mut CudaBuf) -> Result<()> {
        self.owns(&[w])?;
        self.with(&[x], &[out], |s, ins, outs| s.product(w, ins[0], m, outs[0]))
    }

    fn add_bias(&mut self, x: &mut CudaBuf, b: &CudaBuf, m: usize) -> Result<()> {
        self.count(1);
        self.with(&[b], &[x], |s, ins, outs| Ok(s.dev.add_rows(outs[0], ins[0], m)?))
    }

    fn add(&mut self, x: &mut CudaBuf, y: &CudaBuf, len: usize) -> Result<()> {
        self.combine_into(&Expr::input(0).combine(BinaryOp::Add, Expr::input(1)), x, y, len)
    }

    fn swiglu(&mut self, gate: &mut CudaBuf, up: &CudaBuf, len: usize) -> Result<()> {
        self.combine_into(&Expr::input(0).apply(UnaryOp::Swish).combine(BinaryOp::Mul, Expr::input(1)), gate, up, len)
    }

    fn geglu(&mut self, gate: &mut CudaBuf, up: &CudaBuf, len: usize) -> Result<()> {
        // GELU's tanh form, x·(1 + tanh a)/2 with a = √(2/π)·x·(1 + 0.044715·x²), as
        // x / (1 + e^{−2a}) (the same value: the decoding kernels' epilogue, `Epilogue::Geglu`)
        let x = Expr::input(0);
        let arg = x.clone().scale(0.797_884_6).mul(Expr::constant(1.0).add(x.clone().scale(0.044_715).mul(x.clone())));
        let gelu = x.div(Expr::constant(1.0).add(arg.scale(-2.0).exp()));
        self.combine_into(&gelu.mul(Expr::input(1)), gate, up, len)
    }

    fn scale(&mut self, x: &mut CudaBuf, s: f32, len: usize) -> Result<()> {
        self.map_into(&Expr::input(0).scale(s), &[x], len)
    }

    fn rope(&mut self, cfg: &Config, layer: usize, q: &mut CudaBuf, k: &mut CudaBuf, m: usize, pos0: usize) -> Result<()> {
        self.count(1);
        self.with(&[], &[q, k], |s, _, outs| {
            let p = s.context.as_mut().ok_or_else(no_context)?.layer(layer)?;
            let [q, k] = outs else { unreachable!("two outputs") };
            let rope = Rope { pairs: pairs(cfg), table: p.rope, n_rot: cfg.n_rot };
            Ok(p.inputs.step_at(&s.dev, pos0, m)?.rope(&rope, &p.cache.shape, q, k)?)
        })
    }

    fn attention(
        &mut self,
        cfg: &Config,
        kv: &mut CudaKv,
        layer: usize,
        q: &CudaBuf,
        k: &CudaBuf,
        v: &CudaBuf,
        m: usize,
        pos0: usize,
        out: &mut CudaBuf,
    ) -> Result<()> {
        self.context_of(kv)?;
        self.count(2);
        let slot = kv.slot;
        self.with(&[q, k, v], &[out], |s, ins, outs| {
            let tensor_cores = s.tensor_cores && !s.deterministic;
            let mut p = s.context.as_mut().ok_or_else(no_context)?.layer(layer)?;
            let st = p.inputs.segment(&s.dev, slot, pos0, m)?;
            p.cache.store(&st, ins[1], ins[2])?;
            attend(tensor_cores, cfg, &st, &p.cache, ins[0], outs[0])
        })
    }

    fn copy_rows(&mut self, x: &CudaBuf, from: usize, out: &mut CudaBuf, to: usize, rows: usize, width: usize) -> Result<()> {
        self.count(1);
        let overflow = || rayo::Error::SizeOverflow { op: "cuda copy_rows", dims: vec![from, to, rows, width] };
        let (src, dst, len) = (
            from.checked_mul(width).ok_or_else(overflow)?,
            to.checked_mul(width).ok_or_else(overflow)?,
            rows.checked_mul(width).ok_or_else(overflow)?,
        );
        self.with(&[x], &[out], |s, ins, outs| Ok(s.dev.copy_within_device(ins[0], src, outs[0], dst, len)?))
    }

    fn read(&mut self, x: &CudaBuf, out: &mut [f32]) -> Result<()> {
        self.dev.download_prefix(self.arena.get(x)?, out).map_err(crate::Error::from)
    }

    fn argmax(&mut self, x: &CudaBuf, n: usize) -> Result<u32> {
        if self.sample_out.is_none() {
            self.sample_out = Some(self.dev.zeros(3)?);
        }
        let (logits, sample) = (self.arena.get(x)?, self.sample_out.as_mut().expect("made above"));
        let r = ops::argmax(&self.dev, logits, n, sample)?;
        let bad = r.first_bad.map(|(i, v)| (i as usize, v));
        crate::sample::greedy_verdict(n, r.index.unwrap_or(0) as usize, r.max, bad)
    }

    fn top_k(&mut self, x: &CudaBuf, n: usize, k: usize) -> Result<Vec<(u32, f32)>> {
        let need = k.checked_mul(2).and_then(|v| v.checked_add(1)).ok_or(rayo::Error::SizeOverflow { op: "cuda top_k", dims: vec![k, 2] })?;
        if self.sample_out.as_ref().is_none_or(|b| b.len() < need) {
            let grown = self.dev.zeros(need.max(3))?;
            self.drop_recording();
            self.sample_out = Some(grown);
        }
        let (logits, sample) = (self.arena.get(x)?, self.sample_out.as_mut().expect("made above"));
        let r = ops::top_k(&self.dev, logits, n, k, sample)?;
        let bad = r.first_bad.map(|(i, v)| (i as usize, v));
        // the greedy checks: no NaN or +inf, a finite best
        let (id, best) = r.best.first().copied().unwrap_or((0, f32::NEG_INFINITY));
        crate::sample::greedy_verdict(n, id as usize, best, bad)?;
        Ok(r.best)
    }

    fn top_k_rows(&mut self, x: &CudaBuf, n: usize, rows: usize, k: usize) -> Result<Vec<crate::backend::RowBest>> {
        let need = k.checked_mul(2).and_then(|v| v.checked_add(1)).and_then(|v| v.checked_mul(rows));
        let need = need.ok_or(rayo::Error::SizeOverflow { op: "cuda top_k_rows", dims: vec![k, rows] })?;
        if self.sample_out.as_ref().is_none_or(|b| b.len() < need) {
            let grown = self.dev.zeros(need.max(3))?;
            self.drop_recording();
            self.sample_out = Some(grown);
        }
        let (logits, sample) = (self.arena.get(x)?, self.sample_out.as_mut().expect("made above"));
        let all = ops::top_k_rows(&self.dev, logits, n, rows, k, sample)?;
        Ok(all
            .into_iter()
            .map(|r| {
                // the greedy checks: no NaN or +inf, a finite best
                let bad = r.first_bad.map(|(i, v)| (i as usize, v));
                let (id, best) = r.best.first().copied().unwrap_or((0, f32::NEG_INFINITY));
                crate::sample::greedy_verdict(n, id as usize, best, bad).map(|_| r.best)
            })
            .collect())
    }

    fn step_inputs(&mut self, tokens: &[u32], pos0: usize) -> Result<()> {
        let c = self.context.as_mut().ok_or_else(no_context)?;
        c.inputs.write(&self.dev, tokens, pos0).map_err(crate::Error::from)
    }

    fn batch_inputs(&mut self, tokens: &[u32], segments: &[(&CudaKv, usize, usize)]) -> Result<()> {
        let mut segs = Vec::with_capacity(segments.len());
        for &(kv, pos0, rows) in segments {
            self.context_of(kv)?;
            segs.push((kv.slot, pos0, rows));
        }
        let c = self.context.as_mut().ok_or_else(no_context)?;
        c.inputs.write_segments(&self.dev, tokens, &segs).map_err(crate::Error::from)
    }

    fn rope_attention_one_token_rows(
        &mut self,
        cfg: &Config,
        layer: usize,
        (_, rows): (&mut [CudaKv], &[(usize, usize)]),
        (q, k, v): (&mut CudaBuf, &mut CudaBuf, &CudaBuf),
        out: &mut CudaBuf,
    ) -> Result<bool> {
        // (the caches and positions are the pass's inputs on the device, written and bounded
        // by `batch_inputs`)
        let n = rows.len();
        // the one-launch step rotates whole heads; other models run the rows one by one
        if cfg.n_rot != cfg.head_dim || !self.fused_rope {
            return Ok(false);
        }
        self.count(1);
        self.with(&[q, k, v], &[out], |s, ins, outs| {
            let mut p = s.context.as_mut().ok_or_else(no_context)?.layer(layer)?;
            let round_q = p.cache.shape.f16;
            let rows = p.inputs.one_token_rows(&s.dev, n)?;
            let rope = Rope { pairs: pairs(cfg), table: p.rope, n_rot: cfg.n_rot };
            let scale = 1.0 / (cfg.head_dim as f32).sqrt();
            p.cache.decode_rows(&rows, &rope, (ins[0], ins[1], ins[2]), (scale, round_q), p.scratch, outs[0])?;
            Ok(true)
        })
    }

    fn norm_matmuls(
        &mut self,
        x: &CudaBuf,
        norm: &CudaBuf,
        eps: f32,
        m: usize,
        ws: &[&Arc<CudaWeight>],
        tmp: &mut CudaBuf,
        outs: &mut [&mut CudaBuf],
    ) -> Result<()> {
        self.norm_matmuls_bias(x, norm, eps, m, ws, &[], tmp, outs)
    }

    fn norm_matmuls_bias(
        &mut self,
        x: &CudaBuf,
        norm: &CudaBuf,
        eps: f32,
        m: usize,
        ws: &[&Arc<CudaWeight>],
        biases: &[&CudaBuf],
        tmp: &mut CudaBuf,
        outs: &mut [&mut CudaBuf],
    ) -> Result<()> {
        let ws_plain: Vec<&CudaWeight> = ws.iter().map(|w| &***w).collect();
        self.owns(&ws_plain)?;
        let mut handles: Vec<&CudaBuf> = vec![tmp];
        handles.extend(outs.iter().map(|o| &**o));
        let mut ins = vec![x, norm];
        ins.extend(biases);
        self.with(&ins, &handles, |s, ins, bufs| {
            let (x, norm) = (ins[0], ins[1]);
            let (tmp, outs) = bufs.split_first_mut().expect("tmp first");
            s.norm_products(x, norm, eps, m, (ws, &ins[2..]), tmp, outs)
        })
    }

    fn norm_add(&mut self, x: &mut CudaBuf, y: &CudaBuf, w: &CudaBuf, eps: f32, m: usize, _tmp: &mut CudaBuf, _len: usize) -> Result<()> {
        self.count(1);
        self.with(&[y, w], &[x], |s, ins, outs| Ok(s.dev.rms_norm_add_rows(ins[0], ins[1], m, ins[1].len(), eps, outs[0])?))
    }

    fn matmul_add(&mut self, w: &Arc<CudaWeight>, x: &CudaBuf, m: usize, tmp: &mut CudaBuf, acc: &mut CudaBuf, len: usize) -> Result<()> {
        self.owns(&[w])?;
        if self.use_gemm(w, self.arena.get(x)?, m) && !self.on_tensor_cores(w) {
            // the fp32 GEMM writes a fresh product: then added onto `acc`
            self.with(&[x], &[tmp], |s, ins, outs| s.gemm_matmul(w, ins[0], m, outs[0]))?;
            return self.add(acc, tmp, len);
        }
        self.with(&[x], &[acc], |s, ins, outs| s.product_add(w, ins[0], m, outs[0]))
    }

    fn norm_swiglu(
        &mut self,
        x: &CudaBuf,
        norm: &CudaBuf,
        eps: f32,
        m: usize,
        gate_up: (&Arc<CudaWeight>, &Arc<CudaWeight>),
        tmp: &mut CudaBuf,
        out: &mut CudaBuf,
        up_out: &mut CudaBuf,
        len: usize,
    ) -> Result<()> {
        self.norm_gated(Epilogue::Swiglu, (x, norm, eps), m, gate_up, (tmp, out, up_out), len)
    }

    fn norm_geglu(
        &mut self,
        x: &CudaBuf,
        norm: &CudaBuf,
        eps: f32,
        m: usize,
        gate_up: (&Arc<CudaWeight>, &Arc<CudaWeight>),
        tmp: &mut CudaBuf,
        out: &mut CudaBuf,
        up_out: &mut CudaBuf,
        len: usize,
    ) -> Result<()> {
        self.norm_gated(Epilogue::Geglu, (x, norm, eps), m, gate_up, (tmp, out, up_out), len)
    }

    fn rope_attention(
        &mut self,
        cfg: &Config,
        kv: &mut CudaKv,
        layer: usize,
        (q, k, v): (&mut CudaBuf, &mut CudaBuf, &CudaBuf),
        m: usize,
        pos0: usize,
        out: &mut CudaBuf,
    ) -> Result<()> {
        self.context_of(kv)?;
        // a decoding step: RoPE, the KV store and attention (split over the positions) in one
        // launch (`RAYO_CUDA_FUSED_ROPE=0`: the two launches of a prompt's rows)
        let fused = m == 1 && cfg.n_rot == cfg.head_dim && self.fused_rope;
        self.count(if fused { 1 } else { 2 });
        let slot = kv.slot;
        self.with(&[v], &[q, k, out], |s, ins, outs| {
            let [q, k, out] = outs else { unreachable!("three outputs") };
            let tensor_cores = s.tensor_cores && !s.deterministic;
            let mut p = s.context.as_mut().ok_or_else(no_context)?.layer(layer)?;
            let st = p.inputs.segment(&s.dev, slot, pos0, m)?;
            let rope = Rope { pairs: pairs(cfg), table: p.rope, n_rot: cfg.n_rot };
            if fused {
                let scale = 1.0 / (cfg.head_dim as f32).sqrt();
                let round_q = p.cache.shape.f16;
                return Ok(p.cache.decode(&st, &rope, (q, k, ins[0]), (scale, round_q), p.scratch, out)?);
            }
            // one launch rotates Q and K and stores K and V; a second attends
            p.cache.rope_store(&st, &rope, q, k, ins[0])?;
            attend(tensor_cores, cfg, &st, &p.cache, q, out)
        })
    }

    fn qk_norm_rope_attention(
        &mut self,
        cfg: &Config,
        kv: &mut CudaKv,
        layer: usize,
        (q, k, v): (&CudaBuf, &CudaBuf, &CudaBuf),
        (nq, nk): (&CudaBuf, &CudaBuf),
        normed: (&mut CudaBuf, &mut CudaBuf),
        (m, pos0): (usize, usize),
        out: &mut CudaBuf,
    ) -> Result<()> {
        // a decoding step: the norms in the one launch of RoPE, the KV store and attention
        if !(m == 1 && cfg.n_rot == cfg.head_dim && self.fused_rope) {
            return crate::backend::qk_norm_then_rope_attention(self, cfg, kv, layer, (q, k, v), (nq, nk), normed, (m, pos0), out);
        }
        self.context_of(kv)?;
        self.count(1);
        let slot = kv.slot;
        self.with(&[q, k, v, nq, nk], &[out], |s, ins, outs| {
            let mut p = s.context.as_mut().ok_or_else(no_context)?.layer(layer)?;
            let st = p.inputs.segment(&s.dev, slot, pos0, m)?;
            let rope = Rope { pairs: pairs(cfg), table: p.rope, n_rot: cfg.n_rot };
            let scale = 1.0 / (cfg.head_dim as f32).sqrt();
            let round_q = p.cache.shape.f16;
            let norms = (ins[3], ins[4], cfg.eps);
            Ok(p.cache.decode_qk_normed(&st, &rope, norms, (ins[0], ins[1], ins[2]), (scale, round_q), p.scratch, outs[0])?)
        })
    }

    fn one_token_step(&mut self, ops: &mut dyn FnMut(&mut Self) -> Result<()>) -> Result<()> {
        self.recorded_step(ops)
    }

    fn one_token_rows_step(&mut self, rows: usize, ops: &mut dyn FnMut(&mut Self) -> Result<()>) -> Result<()> {
        self.recorded_rows_step(rows, ops)
    }

    fn step_ops(&self) -> usize {
        if self.graph.one.is_some() {
            self.ops
        } else {
            0
        }
    }
}
