//! The CUDA backend's KV caches and what the passes over them use on the device: a buffer per
//! layer holding every slot's cache (one slot per sequence), RoPE's table, the pass's inputs and
//! the decoding step's scratch ([`Context`]), and the handles callers hold ([`CudaKv`]).

use super::ops::{AttentionShape, DecodeScratch, LayerCache, StepInputs};
use super::GEMM_ROWS;
use crate::backend::KvType;
use crate::config::Config;
use crate::{Error, Result};
use rayo::cuda::{ActFormat, CudaDevice, DeviceBuffer, DeviceBytes, NarrowActivations};

/// A handle to one of the backend's KV caches (the caches of every layer live in the backend,
/// one slot per sequence). A later [`crate::Backend::kv_cache`] or [`crate::Backend::kv_caches`] replaces
/// them: the older handles are then refused.
#[derive(Debug)]
pub struct CudaKv {
    pub(super) owner: u64,
    pub(super) generation: u64,
    pub(super) slot: usize,
}

/// The device state of the passes over the KV caches: the caches (a slot per sequence, each of
/// `shape.positions` positions), and what their passes use.
pub(super) struct Context {
    pub(super) generation: u64,
    pub(super) shape: AttentionShape,
    /// Every slot's cache of a layer, one after another.
    pub(super) k: Vec<DeviceBytes>,
    pub(super) v: Vec<DeviceBytes>,
    /// RoPE's `(cos, sin)` table for the cache's positions.
    pub(super) rope: DeviceBuffer,
    /// The sliding-window layers' table, where their RoPE is not the others' (Gemma 3's local
    /// base).
    pub(super) rope_local: Option<DeviceBuffer>,
    /// Each layer's window ([`Config::window`]).
    pub(super) windows: Vec<Option<usize>>,
    /// The pass's token ids and first position.
    pub(super) inputs: StepInputs,
    /// Scratch of a decoding step's attention (split over the positions), for a row per slot.
    pub(super) scratch: DecodeScratch,
    /// A decoding product's input in 8 bits or f16 (with f32 activations, the output head's:
    /// [`super::Q8_MIN_ROWS`]).
    pub(super) narrow: NarrowActivations,
    /// The decoding steps' product inputs (the backend's choice for this model).
    pub(super) act: ActFormat,
    /// The rows and values a row `narrow` has room for.
    pub(super) narrow_rows: usize,
    pub(super) narrow_cols: usize,
}

/// What a layer's attention uses of a [`Context`]: its caches, RoPE's table, the pass's inputs
/// and the decoding step's scratch.
pub(super) struct Layer<'a> {
    pub(super) cache: LayerCache<'a>,
    pub(super) rope: &'a DeviceBuffer,
    pub(super) inputs: &'a StepInputs,
    pub(super) scratch: &'a mut DecodeScratch,
}

impl Context {
    /// The caches of `slots` sequences of `positions` positions each (`ty` values), for the
    /// model `cfg` on `dev`, with product inputs of `act` for the decoding steps.
    pub(super) fn new(
        dev: &CudaDevice,
        cfg: &Config,
        (positions, ty, slots): (usize, KvType, usize),
        act: ActFormat,
        generation: u64,
    ) -> Result<Context> {
        let shape =
            AttentionShape { n_head: cfg.n_head, n_head_kv: cfg.n_head_kv, head_dim: cfg.head_dim, positions, f16: ty == KvType::F16, window: None };
        let overflow = || rayo::Error::SizeOverflow { op: "cuda kv_cache", dims: vec![slots, positions, cfg.kv_width()] };
        let bytes = shape.layer_bytes().and_then(|b| b.checked_mul(slots)).ok_or_else(overflow)?;
        let rows = positions.checked_mul(slots).ok_or_else(overflow)?;
        let mut k = Vec::with_capacity(cfg.n_layer);
        let mut v = Vec::with_capacity(cfg.n_layer);
        for _ in 0..cfg.n_layer {
            k.push(dev.zero_bytes(bytes)?);
            v.push(dev.zero_bytes(bytes)?);
        }
        // the widest product input: the hidden state, the attention's output, the FFN's
        let narrow_cols = cfg.n_embd.max(cfg.n_ff).max(cfg.q_width()).next_multiple_of(32);
        let narrow = NarrowActivations::new(dev, GEMM_ROWS, narrow_cols)?;
        // one table per RoPE the layers use: a global layer's, and a local one's where it differs
        let windows: Vec<Option<usize>> = (0..cfg.n_layer).map(|l| cfg.window(l)).collect();
        let global = windows.iter().position(Option::is_none);
        let local = windows.iter().position(Option::is_some).filter(|&l| global.is_none_or(|g| cfg.rope_of(l) != cfg.rope_of(g)));
        let table = |layer: usize| dev.upload(&crate::cpu::rope::table(cfg, layer, positions));
        Ok(Context {
            generation,
            shape,
            k,
            v,
            rope: table(global.unwrap_or(0))?,
            rope_local: local.map(table).transpose()?,
            windows,
            inputs: StepInputs::with_slots(dev, rows, positions, slots, cfg.vocab_size)?.for_shard(cfg.shard),
            scratch: DecodeScratch::rows(dev, slots, cfg.n_head, cfg.head_dim)?,
            narrow,
            act,
            narrow_rows: GEMM_ROWS,
            narrow_cols,
        })
    }

    /// Layer `layer`'s caches (and its window), its RoPE table, the pass's inputs and scratch.
    pub(super) fn layer(&mut self, layer: usize) -> Result<Layer<'_>> {
        let layers = self.k.len();
        match (self.k.get_mut(layer), self.v.get_mut(layer), self.windows.get(layer)) {
            (Some(k), Some(v), Some(&window)) => {
                let rope = match (window, &self.rope_local) {
                    (Some(_), Some(local)) => local,
                    _ => &self.rope,
                };
                let shape = AttentionShape { window, ..self.shape };
                Ok(Layer { cache: LayerCache { shape, k, v }, rope, inputs: &self.inputs, scratch: &mut self.scratch })
            }
            _ => Err(Error::backend("cuda", format!("layer {layer} is past the cache's {layers} layers"))),
        }
    }
}

pub(super) fn no_context() -> Error {
    Error::backend("cuda", "a pass before the KV cache was made")
}
