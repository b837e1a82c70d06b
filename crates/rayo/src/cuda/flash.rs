//! Flash attention's forward pass on Hopper's tensor cores (`rayo_ptx`'s
//! `WgmmaAttentionKernel`: wgmma, TMA, warp-specialized), f16 or bf16, on sm_90 only.

use super::buffer::DeviceBytes;
use super::device::CudaDevice;
use super::ffi::{allow_dynamic_shared, device_address, tensor_map_3d, Arg};
use super::rows::{prod, room, u32_of};
use crate::error::{Error, Result};
use rayo_ptx::kernels::WgmmaAttentionKernel;
use rayo_ptx::ptx::WgmmaType;

/// The tensors of one attention call, PyTorch SDPA's layout: queries and output
/// `[batch, heads, n, head_dim]`, keys and values `[batch, kv_heads, n, head_dim]` (query head
/// `h` reads key/value head `h / (heads / kv_heads)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashShape {
    pub batch: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub n: usize,
    pub head_dim: usize,
}

impl FlashShape {
    /// Values of the queries (and of the output).
    pub fn q_len(&self) -> Option<usize> {
        self.batch.checked_mul(self.heads)?.checked_mul(self.n)?.checked_mul(self.head_dim)
    }
    /// Values of the keys (and of the values).
    pub fn kv_len(&self) -> Option<usize> {
        self.batch.checked_mul(self.kv_heads)?.checked_mul(self.n)?.checked_mul(self.head_dim)
    }
}

impl CudaDevice {
    /// `out = softmax(scale · q·kᵀ [+ causal mask]) · v` per head, in `ty` (f16 or bf16: 2-byte
    /// values, little-endian), f32 accumulation and softmax (`P` rounded to `ty` for its
    /// product with `v`, as flash attention does). Causal: query `i` sees keys `0..=i`.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_wgmma(
        &self,
        ty: WgmmaType,
        q: &DeviceBytes,
        k: &DeviceBytes,
        v: &DeviceBytes,
        shape: FlashShape,
        causal: bool,
        scale: f32,
        out: &mut DeviceBytes,
    ) -> Result<()> {
        const OP: &str = "cuda attention_wgmma";
        self.owns_bytes(OP, &[q, k, v, &*out])?;
        if !self.has_wgmma() {
            let (major, minor) = self.info().compute_capability;
            return Err(Error::Device {
                api: "cuda",
                message: format!("{OP} needs compute capability 9.0 (wgmma), this device has {major}.{minor}"),
            });
        }
        let FlashShape { batch, heads, kv_heads, n, head_dim } = shape;
        let kern = WgmmaAttentionKernel::new(ty, head_dim as u32, causal).ok_or(Error::InvalidArgument {
            op: OP,
            name: "head_dim",
            value: head_dim.into(),
            reason: "must be 64 or 128, with f16 or bf16 values",
        })?;
        if kv_heads == 0 || heads % kv_heads != 0 {
            return Err(Error::InvalidArgument { op: OP, name: "kv_heads", value: kv_heads.into(), reason: "must divide heads" });
        }
        if !scale.is_finite() {
            return Err(Error::InvalidParameter { op: OP, name: "scale", value: scale as f64, reason: "must be finite" });
        }
        let (ql, kvl) = (prod(OP, &[batch, heads, n, head_dim])?, prod(OP, &[batch, kv_heads, n, head_dim])?);
        for (have, need) in [(q.len(), ql), (k.len(), kvl), (v.len(), kvl), (out.len(), ql)] {
            room(OP, have, prod(OP, &[need, 2])?)?;
        }
        // the kernel indexes the output with 32-bit values; the grid's y and z reach 65535
        u32_of(OP, "batch·heads·n·head_dim", ql)?;
        for (name, v) in [("heads", heads), ("batch", batch)] {
            if v > 65_535 {
                return Err(Error::InvalidArgument {
                    op: OP,
                    name,
                    value: v.into(),
                    reason: "past the 65535 blocks a grid's y and z dimensions hold",
                });
            }
        }
        if ql == 0 {
            return Ok(());
        }
        let planes = |h: usize| (batch * h) as u64;
        let (pq, pk, pv) = (device_address(&self.stream, &q.slice), device_address(&self.stream, &k.slice), device_address(&self.stream, &v.slice));
        let rows = WgmmaAttentionKernel::BR;
        let q_map = tensor_map_3d(pq, (planes(heads), n as u64, head_dim as u64), rows, ty)?;
        let k_map = tensor_map_3d(pk, (planes(kv_heads), n as u64, head_dim as u64), WgmmaAttentionKernel::BC, ty)?;
        let v_map = tensor_map_3d(pv, (planes(kv_heads), n as u64, head_dim as u64), WgmmaAttentionKernel::BC, ty)?;
        let f = self.loaded(&kern)?;
        allow_dynamic_shared(&f.func, kern.shared_bytes())?;
        let mut args = [
            Arg::Map(&q_map),
            Arg::Map(&k_map),
            Arg::Map(&v_map),
            Arg::BytesOut(&mut out.slice),
            Arg::U32(n as u32),
            Arg::U32(heads as u32),
            Arg::U32(kv_heads as u32),
            Arg::F32(scale),
        ];
        self.queue(&f, kern.launch(n as u32, heads as u32, batch as u32), &mut args)
    }
}
