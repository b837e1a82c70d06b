//! The wgpu backend (feature `wgpu`): Vulkan, Metal, DX12 natively and WebGPU in a browser.
//! Weights are uploaded once as the file holds them and multiplied in place by WGSL kernels
//! ([`weights::WgslFormat`]: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K;
//! Q2_K, Q3_K are dequantized to f32 at load, logged). Activations, the KV cache and RoPE's
//! angle table stay on the device; a pass is recorded into one command encoder and submitted
//! when the logits are read, the only read of a step (greedy: the device argmax, 16 bytes).
//! The trait's fused ops are fused kernels (`products.rs`: the norm folded into Q/K/V or into
//! gate·up with SwiGLU, one dispatch each; RoPE with the KV store): 183 dispatches per
//! SmolLM2-135M step, 394 op by op (`RAYO_WGPU_FUSE=0`). Where the adapter has shader-f16 (on
//! GPUs; `RAYO_WGPU_F16=0|1`), attention reads the f16 cache as `f16` and takes q·k in f16.
//!
//! A browser cannot block on a read: there, run [`crate::Session::forward_queued`] and then
//! [`Wgpu::read_async`] on [`crate::Session::logits_buffer`].

mod products;
mod record;
pub mod weights;

use crate::backend::{Backend, KvType};
use crate::config::{Config, RopeStyle};
use crate::weights::WeightRef;
use crate::{Error, Result};
use products::Output;
use rayo::gguf::GgufFile;
use rayo::gpu::{wgpu, GpuDevice};
use rayo::quant::QuantMatrix;
use record::{grid, Recorder};
use std::collections::HashMap;
use std::sync::Arc;
pub use weights::{WgpuWeight, WgslFormat};

/// An f32 buffer on the device.
pub struct WgpuBuf {
    buf: wgpu::Buffer,
    len: usize,
}

impl WgpuBuf {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The KV cache of every layer (keys and values: `positions × width` values each, f16 packed
/// two to a word or f32).
pub struct WgpuKv {
    f16: bool,
    positions: usize,
    width: usize,
    k: Vec<wgpu::Buffer>,
    v: Vec<wgpu::Buffer>,
}

/// The wgpu backend of one model file.
pub struct Wgpu {
    dev: GpuDevice,
    file: Arc<GgufFile>,
    rec: Recorder,
    /// Uploaded weights by tensor name (a tied LM head is the embedding table, uploaded once).
    weights: HashMap<String, Arc<WgpuWeight>>,
    /// RoPE's `(cos, sin)` per position and pair, made with the cache (the CPU's bits).
    /// RoPE's tables (one per distinct base and scale), and each layer's.
    rope: Option<(Vec<wgpu::Buffer>, Vec<usize>)>,
    /// The pass's token ids.
    ids: Option<wgpu::Buffer>,
    /// Largest buffer one binding may cover.
    limit: u64,
    /// Weights are split into parts of at most this many bytes (at most `limit`).
    weight_limit: u64,
    /// Threads per weight row of the products: 16 on a GPU, 1 on a CPU adapter (`RAYO_WGPU_LANES`
    /// sets it: 1, 2, 4, ... 64).
    lanes: usize,
    /// Whether the fused ops run as fused kernels (`RAYO_WGPU_FUSE=0`, [`Wgpu::with_fusion`]:
    /// the trait's defaults, op by op, for comparison).
    fuse: bool,
    /// Whether kernels use `f16` (by default where a GPU has shader-f16; `RAYO_WGPU_F16=0|1`,
    /// [`Wgpu::with_f16`]): the f16 KV cache read as f16, attention's q·k in f16 math.
    f16: bool,
    /// The device argmax's result (4 words).
    sample: Option<wgpu::Buffer>,
}

const EMBED: &str = include_str!("shaders/embed.wgsl");

impl Wgpu {
    /// A backend on the process's shared wgpu device. Native only; see [`Self::with_device`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new(file: Arc<GgufFile>) -> Result<Wgpu> {
        let dev = GpuDevice::new().map_err(|e| match e {
            rayo::Error::NoDevice { reason, .. } => {
                rayo::Error::NoDevice { api: "wgpu", reason: format!("{reason}; the CPU backend (--backend cpu) runs the model without a GPU") }
            }
            e => e,
        })?;
        Ok(Wgpu::with_device(dev, file))
    }

    /// A backend on `dev` (its [`GpuDevice::max_binding_bytes`] is the largest binding used:
    /// [`GpuDevice::with_binding_limit`] lowers it).
    pub fn with_device(dev: GpuDevice, file: Arc<GgufFile>) -> Wgpu {
        let limit = dev.max_binding_bytes();
        let knobs = rayo::Config::get();
        let lanes = match knobs.wgpu_lanes {
            Some(n) => n,
            None if dev.adapter_info().device_type == "cpu" => 1,
            None => 16,
        };
        let fuse = knobs.wgpu_fuse;
        // f16 kernels on GPUs with shader-f16; not on CPU adapters, where it is emulated (lavapipe
        // decodes 12 times slower with it); RAYO_WGPU_F16=1 or 0 decides instead
        let f16 = dev.has_shader_f16() && knobs.wgpu_f16.unwrap_or(dev.adapter_info().device_type != "cpu");
        Wgpu {
            rec: Recorder::new(dev.clone()),
            dev,
            file,
            weights: HashMap::new(),
            rope: None,
            ids: None,
            limit,
            weight_limit: limit,
            lanes,
            fuse,
            f16,
            sample: None,
        }
    }

    /// Splits weight matrices into bindings of at most `bytes` (tests; a browser's default
    /// 128 MiB tried natively). Activations keep the device's limit.
    pub fn with_weight_binding_limit(mut self, bytes: u64) -> Wgpu {
        self.weight_limit = bytes.min(self.limit);
        self
    }

    /// Takes each weight row of the products with `lanes` threads (a power of two up to 64; 1:
    /// a thread per row, no workgroup reduction) instead of the adapter's default.
    pub fn with_product_lanes(mut self, lanes: usize) -> Result<Wgpu> {
        if !lanes.is_power_of_two() || lanes > 64 {
            return Err(rayo::Error::InvalidArgument {
                op: "Wgpu::with_product_lanes",
                name: "lanes",
                value: lanes.into(),
                reason: "must be a power of two up to 64",
            }
            .into());
        }
        self.lanes = lanes;
        Ok(self)
    }

    /// Runs the fused ops ([`Backend::norm_matmuls`], [`Backend::norm_swiglu`],
    /// [`Backend::rope_attention`]) as fused kernels (`true`, the default) or op by op.
    pub fn with_fusion(mut self, fuse: bool) -> Wgpu {
        self.fuse = fuse;
        self
    }

    /// Uses `f16` in kernels where the adapter has shader-f16 (`true`; the default on GPUs) or
    /// never (the f32 fallback, which adapters without the feature take).
    pub fn with_f16(mut self, on: bool) -> Wgpu {
        self.f16 = on && self.dev.has_shader_f16();
        self
    }

    /// Whether kernels use `f16` ([`Wgpu::with_f16`]).
    pub fn f16(&self) -> bool {
        self.f16
    }

    /// The device the backend runs on.
    pub fn device(&self) -> &GpuDevice {
        &self.dev
    }

    /// Device operations (dispatches and copies) recorded so far.
    pub fn ops(&self) -> usize {
        self.rec.ops
    }

    /// Bytes of weights on the device.
    pub fn weight_bytes(&self) -> u64 {
        self.weights.values().map(|w| w.bytes()).sum()
    }

    /// Reads the first `out.len()` values of `x` after the submitted work (the one await of a
    /// pass in a browser: [`crate::Session::forward_queued`] submits, then this reads).
    pub async fn read_async(&self, x: &WgpuBuf, out: &mut [f32]) -> Result<()> {
        check_len("read", x.len, out.len())?;
        self.dev.read_raw_async(&x.buf, out).await.map_err(crate::Error::from)
    }

    /// Uploads a matrix (named `name` in errors) as [`Backend::weight`] does, from any bytes.
    pub fn upload_matrix(&mut self, name: &str, m: &QuantMatrix<'_>) -> Result<Arc<WgpuWeight>> {
        // on wasm32 wgpu's handles are neither Send nor Sync (one thread): the Arc is not shared there
        #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
        let up = Arc::new(weights::upload(&self.dev, name, m, self.weight_limit)?);
        self.dev.check_errors().map_err(|e| Error::backend("wgpu", format!("tensor {name} ({} bytes): {e}", m.bytes().len())))?;
        Ok(up)
    }

    fn storage(&self, what: &str, bytes: u64) -> Result<wgpu::Buffer> {
        if bytes > self.limit {
            return Err(Error::backend("wgpu", format!("{what}: {bytes} bytes, past the adapter's storage-binding limit of {} bytes", self.limit)));
        }
        Ok(self.dev.raw_device().create_buffer(&wgpu::BufferDescriptor {
            label: Some(what),
            // whole vec4s (the products read activations four at a time)
            size: bytes.next_multiple_of(16).max(16),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }))
    }

    fn ids(&self) -> Result<&wgpu::Buffer> {
        self.ids.as_ref().ok_or(Error::backend("wgpu", "a pass before the KV cache was made"))
    }

    fn elementwise(&mut self, op: u32, a: &WgpuBuf, b: &WgpuBuf, n: usize, width: usize) -> Result<()> {
        let k = self.rec.kernel("elementwise", || include_str!("shaders/elementwise.wgsl").to_string());
        let (groups, stride) = grid(&self.dev, n);
        self.rec.dispatch(&k, &[n as u32, op, width as u32, stride], &[&a.buf, &b.buf], groups)
    }

    /// RoPE's table of `layer`, checked to hold positions `pos0..pos0 + m`.
    fn rope_table(&self, cfg: &Config, layer: usize, m: usize, pos0: usize) -> Result<wgpu::Buffer> {
        let (tables, of_layer) = self.rope.as_ref().ok_or(Error::backend("wgpu", "rope before the KV cache was made"))?;
        let table =
            of_layer.get(layer).map(|&t| tables[t].clone()).ok_or_else(|| Error::backend("wgpu", format!("no RoPE table for layer {layer}")))?;
        if (pos0 + m) as u64 * cfg.n_rot as u64 * 4 > table.size() {
            return Err(Error::backend("wgpu", format!("positions up to {} are past the RoPE table", pos0 + m)));
        }
        Ok(table)
    }

    /// The checks of [`Backend::attention`]; the layer's key and value caches.
    #[allow(clippy::too_many_arguments)]
    fn check_attention(
        &self,
        cfg: &Config,
        kv: &WgpuKv,
        layer: usize,
        q: &WgpuBuf,
        k: &WgpuBuf,
        v: &WgpuBuf,
        m: usize,
        pos0: usize,
        out: &WgpuBuf,
    ) -> Result<(wgpu::Buffer, wgpu::Buffer)> {
        check_len("attention", q.len.min(out.len), m * cfg.q_width())?;
        check_len("attention", k.len.min(v.len), m * kv.width)?;
        if pos0 + m > kv.positions {
            return Err(Error::backend("wgpu", format!("position {} is past the KV cache's {} positions", pos0 + m - 1, kv.positions)));
        }
        match (kv.k.get(layer), kv.v.get(layer)) {
            (Some(kc), Some(vc)) => Ok((kc.clone(), vc.clone())),
            _ => Err(Error::backend("wgpu", format!("layer {layer} is past the cache's {} layers", kv.k.len()))),
        }
    }

    /// Causal attention of `m` query rows over the cache's positions `0..=pos0 + i` (stored).
    #[allow(clippy::too_many_arguments)]
    #[allow(clippy::too_many_arguments)]
    fn attend(
        &mut self,
        cfg: &Config,
        layer: usize,
        f16: bool,
        kc: &wgpu::Buffer,
        vc: &wgpu::Buffer,
        q: &WgpuBuf,
        m: usize,
        pos0: usize,
        out: &WgpuBuf,
    ) -> Result<()> {
        let att = self.kv_kernel(f16, include_str!("shaders/attention.wgsl"), "attention", Some(cfg.head_dim % 2 == 0));
        let scale = 1.0 / (cfg.head_dim as f32).sqrt();
        // as the CPU engine (llama.cpp's one-row flash-attention kernel): the query in f16
        let round_q = f16 && m < 64;
        let kw = cfg.kv_width() as u32;
        let window = cfg.window(layer).map_or(0, |w| w.min(u32::MAX as usize) as u32);
        let params = [cfg.head_dim as u32, cfg.n_head as u32, cfg.group() as u32, kw, pos0 as u32, scale.to_bits(), round_q as u32, window];
        self.rec.dispatch(&att, &params, &[&q.buf, &out.buf, kc, vc], (cfg.n_head as u32, m as u32, 1))
    }

    /// A kernel over a cache of f16 (`f16`) or f32 values: an f16 cache is read and written
    /// as `f16` where the adapter has shader-f16 (and [`Wgpu::with_f16`] allows it), as packed
    /// pairs otherwise. `scores` (attention's): q·k in f16 math where `Some(true)` (only with
    /// shader-f16), in f32 otherwise.
    fn kv_kernel(&mut self, f16: bool, body: &'static str, name: &str, scores: Option<bool>) -> Arc<record::Kernel> {
        let native = f16 && self.f16;
        let half_scores = native && scores == Some(true);
        let ty = match (f16, native) {
            (true, true) => include_str!("shaders/kv_f16_native.wgsl"),
            (true, false) => include_str!("shaders/kv_f16.wgsl"),
            _ => include_str!("shaders/kv_f32.wgsl"),
        };
        let score = match scores {
            None => "",
            Some(_) if half_scores => include_str!("shaders/score_f16.wgsl"),
            Some(_) => include_str!("shaders/score_f32.wgsl"),
        };
        self.rec.kernel(&format!("{name} f16={f16} native={native} half_scores={half_scores}"), || format!("{ty}\n{score}\n{body}"))
    }
}

fn check_len(op: &'static str, have: usize, need: usize) -> Result<()> {
    if have < need {
        return Err(rayo::Error::LengthMismatch { op, expected: need, actual: have }.into());
    }
    Ok(())
}

impl Backend for Wgpu {
    type Weight = Arc<WgpuWeight>;
    type Vector = WgpuBuf;
    type Buf = WgpuBuf;
    type Kv = WgpuKv;

    fn name(&self) -> &'static str {
        "wgpu"
    }

    /// The kernels' limits: an even key/value width, heads of at most 256 values, a workgroup
    /// per query head (at most the adapter's per-dimension count), the logits in one binding.
    fn check_config(&self, cfg: &Config, _context: usize) -> Result<()> {
        let width = cfg.kv_width();
        if width % 2 != 0 || cfg.head_dim > 256 {
            return Err(Error::backend(
                "wgpu",
                format!("the wgpu kernels take an even key/value width and heads of at most 256 values (have {width}, {})", cfg.head_dim),
            ));
        }
        let groups = self.dev.limits().max_workgroups_per_dimension as usize;
        if cfg.n_head > groups {
            return Err(Error::backend("wgpu", format!("{} query heads are past the adapter's {groups} workgroups per dimension", cfg.n_head)));
        }
        let logits = cfg.vocab_size as u64 * 4;
        if logits > self.limit {
            return Err(Error::backend(
                "wgpu",
                format!(
                    "the logits of {} tokens ({logits} bytes) are past the adapter's storage-binding limit of {} bytes",
                    cfg.vocab_size, self.limit
                ),
            ));
        }
        Ok(())
    }

    fn weight(&mut self, file: &GgufFile, w: &WeightRef) -> Result<Arc<WgpuWeight>> {
        if !std::ptr::eq(file.as_bytes(), self.file.as_bytes()) {
            return Err(Error::backend("wgpu", format!("tensor {} comes from another file than this backend's", w.name)));
        }
        if let Some(up) = self.weights.get(&w.name) {
            return Ok(Arc::clone(up));
        }
        let up = self.upload_matrix(&w.name, &w.matrix(file)?)?;
        self.weights.insert(w.name.clone(), Arc::clone(&up));
        Ok(up)
    }

    fn vector(&mut self, v: &[f32]) -> Result<WgpuBuf> {
        let buf = weights::upload_bytes(&self.dev, "vector", bytemuck::cast_slice(v))?;
        Ok(WgpuBuf { buf, len: v.len() })
    }

    fn buffer(&mut self, len: usize) -> Result<WgpuBuf> {
        let buf = self.storage("activation buffer", len as u64 * 4)?;
        Ok(WgpuBuf { buf, len })
    }

    fn kv_cache(&mut self, cfg: &Config, positions: usize, ty: KvType) -> Result<WgpuKv> {
        let width = cfg.kv_width();
        if width % 2 != 0 || cfg.head_dim > 256 {
            return Err(Error::backend(
                "wgpu",
                format!("the wgpu kernels take an even key/value width and heads of at most 256 values (have {width}, {})", cfg.head_dim),
            ));
        }
        let f16 = ty == KvType::F16;
        let bytes = (positions as u64).saturating_mul(width as u64).saturating_mul(if f16 { 2 } else { 4 });
        let mut k = Vec::with_capacity(cfg.n_layer);
        let mut v = Vec::with_capacity(cfg.n_layer);
        for _ in 0..cfg.n_layer {
            k.push(self.storage("KV cache (one layer's keys; fewer positions make it smaller)", bytes)?);
            v.push(self.storage("KV cache (one layer's values)", bytes)?);
        }
        let (mut tables, mut of_layer, mut seen) = (Vec::new(), Vec::new(), Vec::new());
        for layer in 0..cfg.n_layer {
            let key = cfg.rope_of(layer);
            let t = match seen.iter().position(|&k| k == key) {
                Some(t) => t,
                None => {
                    let table = crate::cpu::rope::table(cfg, layer, positions);
                    tables.push(weights::upload_bytes(&self.dev, "rope table", bytemuck::cast_slice(&table))?);
                    seen.push(key);
                    tables.len() - 1
                }
            };
            of_layer.push(t);
        }
        self.rope = Some((tables, of_layer));
        self.ids = Some(self.storage("token ids", positions as u64 * 4)?);
        self.dev.check_errors()?;
        Ok(WgpuKv { f16, positions, width, k, v })
    }

    fn embed(&mut self, table: &Arc<WgpuWeight>, tokens: &[u32], x: &mut WgpuBuf) -> Result<()> {
        check_len("embed", x.len, tokens.len() * table.cols)?;
        if let Some(&t) = tokens.iter().find(|&&t| t as usize >= table.rows) {
            return Err(Error::TokenPastVocab { id: t, vocab: table.rows });
        }
        // the ids reach the device with the next submit: the work recorded before goes first
        self.rec.flush()?;
        let ids = self.ids()?.clone();
        if tokens.len() as u64 * 4 > ids.size() {
            return Err(Error::backend("wgpu", format!("{} tokens in one pass, the cache holds {}", tokens.len(), ids.size() / 4)));
        }
        self.dev.raw_queue().write_buffer(&ids, 0, bytemuck::cast_slice(tokens));
        let k = self.rec.kernel(&format!("embed {:?}", table.fmt), || weights::format_kernel(table.fmt, EMBED));
        let n = tokens.len() * table.cols;
        let (groups, stride) = grid(&self.dev, n);
        for part in &table.parts {
            let params = [table.cols as u32, tokens.len() as u32, part.row0 as u32, part.rows as u32, stride, 0, 0, 0];
            self.rec.dispatch(&k, &params, &[&part.buf, &ids, &x.buf], groups)?;
        }
        Ok(())
    }

    fn rms_norm(&mut self, x: &WgpuBuf, w: &WgpuBuf, eps: f32, m: usize, out: &mut WgpuBuf) -> Result<()> {
        check_len("rms_norm", x.len.min(out.len), m * w.len)?;
        let k = self.rec.kernel("rms_norm", || include_str!("shaders/rms_norm.wgsl").to_string());
        self.rec.dispatch(&k, &[w.len as u32, eps.to_bits()], &[&x.buf, &w.buf, &out.buf], (m as u32, 1, 1))
    }

    fn matmul(&mut self, w: &Arc<WgpuWeight>, x: &WgpuBuf, m: usize, out: &mut WgpuBuf) -> Result<()> {
        self.product(w, x, None, m, out, false)
    }

    fn add_bias(&mut self, x: &mut WgpuBuf, b: &WgpuBuf, m: usize) -> Result<()> {
        check_len("add_bias", x.len, m * b.len)?;
        self.elementwise(2, x, b, m * b.len, b.len)
    }

    fn add(&mut self, x: &mut WgpuBuf, y: &WgpuBuf, len: usize) -> Result<()> {
        check_len("add", x.len.min(y.len), len)?;
        self.elementwise(0, x, y, len, 1)
    }

    fn swiglu(&mut self, gate: &mut WgpuBuf, up: &WgpuBuf, len: usize) -> Result<()> {
        check_len("swiglu", gate.len.min(up.len), len)?;
        self.elementwise(1, gate, up, len, 1)
    }

    fn geglu(&mut self, gate: &mut WgpuBuf, up: &WgpuBuf, len: usize) -> Result<()> {
        check_len("geglu", gate.len.min(up.len), len)?;
        self.elementwise(3, gate, up, len, 1)
    }

    fn scale(&mut self, x: &mut WgpuBuf, s: f32, len: usize) -> Result<()> {
        check_len("scale", x.len, len)?;
        let k = self.rec.kernel("scale", || include_str!("shaders/scale.wgsl").to_string());
        let (groups, stride) = grid(&self.dev, len);
        self.rec.dispatch(&k, &[len as u32, s.to_bits(), stride], &[&x.buf], groups)
    }

    fn rope(&mut self, cfg: &Config, layer: usize, q: &mut WgpuBuf, k: &mut WgpuBuf, m: usize, pos0: usize) -> Result<()> {
        check_len("rope", q.len, m * cfg.q_width())?;
        check_len("rope", k.len, m * cfg.kv_width())?;
        let table = self.rope_table(cfg, layer, m, pos0)?;
        let kern = self.rec.kernel("rope", || include_str!("shaders/rope.wgsl").to_string());
        let n = m * (cfg.n_head + cfg.n_head_kv) * cfg.n_rot / 2;
        let (groups, stride) = grid(&self.dev, n);
        let params = [m as u32, cfg.n_head as u32, cfg.n_head_kv as u32, cfg.head_dim as u32, cfg.n_rot as u32, pos0 as u32, rope_style(cfg), stride];
        self.rec.dispatch(&kern, &params, &[&q.buf, &k.buf, &table], groups)
    }

    fn attention(
        &mut self,
        cfg: &Config,
        kv: &mut WgpuKv,
        layer: usize,
        q: &WgpuBuf,
        k: &WgpuBuf,
        v: &WgpuBuf,
        m: usize,
        pos0: usize,
        out: &mut WgpuBuf,
    ) -> Result<()> {
        let (kc, vc) = self.check_attention(cfg, kv, layer, q, k, v, m, pos0, out)?;
        let store = self.kv_kernel(kv.f16, include_str!("shaders/kv_store.wgsl"), "kv_store", None);
        let (groups, stride) = grid(&self.dev, m * kv.width / 2);
        self.rec.dispatch(&store, &[m as u32, kv.width as u32, pos0 as u32, stride], &[&k.buf, &v.buf, &kc, &vc], groups)?;
        self.attend(cfg, layer, kv.f16, &kc, &vc, q, m, pos0, out)
    }

    fn copy_rows(&mut self, x: &WgpuBuf, from: usize, out: &mut WgpuBuf, to: usize, rows: usize, width: usize) -> Result<()> {
        let overflow = || crate::Error::from(rayo::Error::SizeOverflow { op: "wgpu copy_rows", dims: vec![from, to, rows, width] });
        let end = |r: usize| r.checked_add(rows).and_then(|e| e.checked_mul(width)).ok_or_else(overflow);
        check_len("copy_rows", x.len, end(from)?)?;
        check_len("copy_rows", out.len, end(to)?)?;
        // (within the lengths checked above, which are f32 counts of real buffers)
        self.rec.copy(&x.buf, (from * width * 4) as u64, &out.buf, (to * width * 4) as u64, (rows * width * 4) as u64);
        Ok(())
    }

    fn read(&mut self, x: &WgpuBuf, out: &mut [f32]) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            check_len("read", x.len, out.len())?;
            self.rec.flush()?;
            self.dev.read_raw(&x.buf, out).map_err(crate::Error::from)
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = (x, out);
            Err(Error::backend("wgpu", "a browser cannot wait for a read: use Session::forward_queued and Wgpu::read_async"))
        }
    }

    fn matmul_add(&mut self, w: &Arc<WgpuWeight>, x: &WgpuBuf, m: usize, _tmp: &mut WgpuBuf, acc: &mut WgpuBuf, _len: usize) -> Result<()> {
        self.product(w, x, None, m, acc, true)
    }

    fn norm_matmuls(
        &mut self,
        x: &WgpuBuf,
        norm: &WgpuBuf,
        eps: f32,
        m: usize,
        ws: &[&Arc<WgpuWeight>],
        tmp: &mut WgpuBuf,
        outs: &mut [&mut WgpuBuf],
    ) -> Result<()> {
        check_len("norm_matmuls", outs.len(), ws.len())?;
        if !self.fuse {
            self.rms_norm(x, norm, eps, m, tmp)?;
            for (w, out) in ws.iter().zip(outs.iter()) {
                self.product(w, tmp, None, m, out, false)?;
            }
            return Ok(());
        }
        // a CPU adapter (a thread per weight row) runs the norm on its own: folded in, it
        // puts workgroup barriers into every product, which llvmpipe runs as coroutine switches
        let (x, norm) = if self.lanes == 1 {
            self.rms_norm(x, norm, eps, m, tmp)?;
            (&*tmp, None)
        } else {
            (x, Some((norm, eps)))
        };
        let one_dispatch = ws.len() <= 3 && ws.iter().all(|w| w.parts.len() == 1 && w.cols == ws[0].cols);
        if one_dispatch {
            let parts: Vec<_> = ws.iter().map(|w| (&***w, &w.parts[0])).collect();
            let ys: Vec<&WgpuBuf> = outs.iter().map(|o| &**o).collect();
            return self.products(&parts, x, norm, m, &ys, false, Output::Each);
        }
        // the norm folded into each product (each part finds 1/rms again)
        for (w, out) in ws.iter().zip(outs.iter()) {
            self.product(w, x, norm, m, out, false)?;
        }
        Ok(())
    }

    fn norm_swiglu(
        &mut self,
        x: &WgpuBuf,
        norm: &WgpuBuf,
        eps: f32,
        m: usize,
        (gate, up): (&Arc<WgpuWeight>, &Arc<WgpuWeight>),
        tmp: &mut WgpuBuf,
        out: &mut WgpuBuf,
        up_out: &mut WgpuBuf,
        len: usize,
    ) -> Result<()> {
        check_len("norm_swiglu", len, m * gate.rows)?;
        if !self.fuse {
            self.rms_norm(x, norm, eps, m, tmp)?;
            self.product(gate, tmp, None, m, out, false)?;
            self.product(up, tmp, None, m, up_out, false)?;
            return self.swiglu(out, up_out, len);
        }
        // as in norm_matmuls: the norm on its own on a CPU adapter
        let (x, norm) = if self.lanes == 1 {
            self.rms_norm(x, norm, eps, m, tmp)?;
            (&*tmp, None)
        } else {
            (x, Some((norm, eps)))
        };
        if gate.parts.len() == 1 && up.parts.len() == 1 && gate.rows == up.rows && gate.cols == up.cols {
            return self.products(&[(gate, &gate.parts[0]), (up, &up.parts[0])], x, norm, m, &[out], false, Output::Swiglu);
        }
        self.product(gate, x, norm, m, out, false)?;
        self.product(up, x, norm, m, up_out, false)?;
        self.swiglu(out, up_out, len)
    }

    fn rope_attention(
        &mut self,
        cfg: &Config,
        kv: &mut WgpuKv,
        layer: usize,
        (q, k, v): (&mut WgpuBuf, &mut WgpuBuf, &WgpuBuf),
        m: usize,
        pos0: usize,
        out: &mut WgpuBuf,
    ) -> Result<()> {
        if !self.fuse {
            self.rope(cfg, layer, q, k, m, pos0)?;
            return self.attention(cfg, kv, layer, q, k, v, m, pos0, out);
        }
        let (kc, vc) = self.check_attention(cfg, kv, layer, q, k, v, m, pos0, out)?;
        let table = self.rope_table(cfg, layer, m, pos0)?;
        let kern = self.kv_kernel(kv.f16, include_str!("shaders/rope_store.wgsl"), "rope_store", None);
        let (groups, stride) = grid(&self.dev, m * (cfg.n_head * cfg.n_rot + kv.width) / 2);
        let params = [m as u32, cfg.n_head as u32, cfg.head_dim as u32, cfg.n_rot as u32, pos0 as u32, rope_style(cfg), stride, kv.width as u32];
        self.rec.dispatch(&kern, &params, &[&q.buf, &k.buf, &kc, &vc, &v.buf, &table], groups)?;
        self.attend(cfg, layer, kv.f16, &kc, &vc, q, m, pos0, out)
    }

    fn argmax(&mut self, x: &WgpuBuf, n: usize) -> Result<u32> {
        check_len("argmax", x.len, n)?;
        if n == 0 || n > u32::MAX as usize - 1 || cfg!(target_arch = "wasm32") {
            // the sampler's own errors (and a browser, which cannot wait for a read)
            let mut v = vec![0.0; n];
            self.read(x, &mut v)?;
            return crate::sample::check(&v);
        }
        if self.sample.is_none() {
            self.sample = Some(self.storage("argmax result", 16)?);
        }
        let out = self.sample.clone().expect("made above");
        let k = self.rec.kernel("argmax", || include_str!("shaders/argmax.wgsl").to_string());
        self.rec.dispatch(&k, &[n as u32], &[&x.buf, &out], (1, 1, 1))?;
        let mut r = [0f32; 4];
        self.read(&WgpuBuf { buf: out, len: 4 }, &mut r)?;
        let [best, max, bad, bad_v] = r.map(f32::to_bits);
        let bad = (bad != u32::MAX).then(|| (bad as usize, f32::from_bits(bad_v)));
        crate::sample::greedy_verdict(n, best as usize, f32::from_bits(max), bad)
    }

    fn flush(&mut self) -> Result<()> {
        self.rec.flush()
    }
}

fn rope_style(cfg: &Config) -> u32 {
    match cfg.arch.rope {
        RopeStyle::Adjacent => 0,
        RopeStyle::HalfSplit => 1,
    }
}
