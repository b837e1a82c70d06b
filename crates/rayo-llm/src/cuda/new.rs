//! Making a CUDA backend: the device, the defaults the environment sets (`RAYO_CUDA_*`), and
//! the options a caller changes (`with_*`).

use super::memory::{self, Arena};
use super::recording::Recordings;
use super::{Cuda, WGMMA_MIN_COLS};
use crate::Result;
use rayo::cuda::{ActFormat, CudaDevice};
use rayo::gguf::GgufFile;
use std::collections::HashMap;
use std::sync::Arc;

impl Cuda {
    /// A backend on CUDA device 0 for the weights of `file`. No driver or no device is an
    /// error that names the CPU backend as the alternative.
    pub fn new(file: Arc<GgufFile>) -> Result<Cuda> {
        Cuda::on_device(file, 0)
    }

    /// [`Cuda::new`] on device `ordinal`.
    pub fn on_device(file: Arc<GgufFile>, ordinal: usize) -> Result<Cuda> {
        let dev = CudaDevice::with_ordinal(ordinal).map_err(|e| match e {
            rayo::Error::NoDevice { reason, .. } => {
                rayo::Error::NoDevice { api: "cuda", reason: format!("{reason}; the CPU backend (--backend cpu) runs the model without a GPU") }
            }
            e => e,
        })?;
        let knobs = rayo::Config::get();
        let tensor_cores = knobs.cuda_prefill != rayo::CudaPrefill::F32;
        let wgmma = (dev.has_wgmma() && knobs.cuda_prefill == rayo::CudaPrefill::Auto).then_some(WGMMA_MIN_COLS);
        let decode_act = match knobs.cuda_decode {
            rayo::CudaDecode::Auto => None,
            rayo::CudaDecode::F32 => Some(ActFormat::F32),
            rayo::CudaDecode::F16 => Some(ActFormat::F16),
            rayo::CudaDecode::Q8 => Some(ActFormat::Q8),
        };
        let id = memory::next_backend_id();
        Ok(Cuda {
            file,
            id,
            weights: HashMap::new(),
            arena: Arena::new(id),
            context: None,
            generations: 0,
            spare: HashMap::new(),
            gathered: HashMap::new(),
            graph: Recordings::default(),
            graphs: knobs.cuda_graphs,
            stepped_once: false,
            rows_stepped: Default::default(),
            ops: 0,
            capturing: false,
            host_refused: false,
            gemm: None,
            tensor_cores,
            wgmma,
            x16: None,
            half: None,
            f16_kept: 0,
            f16_budget: (dev.info().total_memory / 4) as usize,
            sample_out: None,
            decode_act,
            fused_rope: knobs.cuda_fused_rope,
            deterministic: false,
            group: None,
            nccl: None,
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
    /// bits from [`Q8_MIN_WIDTH`](super::Q8_MIN_WIDTH) values a row on, f32 below, or as `RAYO_CUDA_DECODE` says).
    /// Takes effect when the KV cache is made.
    pub fn with_decode_activations(mut self, act: ActFormat) -> Cuda {
        self.decode_act = Some(act);
        self
    }

    /// Whether one-token steps are recorded once and replayed (the default, unless
    /// `RAYO_CUDA_GRAPHS=0`).
    pub fn with_graphs(mut self, on: bool) -> Cuda {
        self.graphs = on;
        self
    }

    /// Batch invariance (`rayo serve --deterministic`): every product through the quantized
    /// matvec kernels and every prompt's attention through the exact kernel, whatever the
    /// rows, so a sequence's logits are the same bits alone (a [`crate::Session`]) or beside
    /// any others (a [`crate::BatchSession`]) when its prompt runs in chunks of the same row
    /// classes (one row, 2–63, 64 and more: `rayo_serve::chunks`). Off by default: a step of
    /// 16 rows or more runs its products on the tensor cores, faster and not invariant.
    pub fn with_deterministic(mut self, on: bool) -> Cuda {
        self.deterministic = on;
        self
    }

    /// The device the backend runs on.
    pub fn device(&self) -> &CudaDevice {
        &self.dev
    }
}
