//! Hopper's tensor-core GEMM (`rayo_ptx`'s `WgmmaGemmKernel`: wgmma, TMA, warp-specialized):
//! `C = A·Bᵀ` for f16 or bf16 `A` (m × k) and `B` (n × k), f32 `C` (m × n), on sm_90 only.

use super::buffer::{DeviceBuffer, DeviceBytes};
use super::device::CudaDevice;
use super::ffi::{allow_dynamic_shared, device_address, launch, tensor_map_2d, Arg};
use super::llm::{prod, room, u32_of};
use crate::error::{Error, Result};
use rayo_ptx::kernels::WgmmaGemmKernel;
use rayo_ptx::ptx::WgmmaType;

impl CudaDevice {
    /// Whether this device runs [`CudaDevice::gemm_wgmma`] (compute capability 9.0).
    pub fn has_wgmma(&self) -> bool {
        self.info().compute_capability == (9, 0)
    }

    /// `c = a·bᵀ`: `a` holds `m × k` and `b` `n × k` values of `ty` (2 bytes each, row-major),
    /// `c` receives `m × n` f32. `k` must be a multiple of 8 (the copies' 16-byte rows); `bn`
    /// (128 or 256) is the kernel's tile width.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_wgmma(
        &self,
        ty: WgmmaType,
        bn: u32,
        a: &DeviceBytes,
        b: &DeviceBytes,
        (m, n, k): (usize, usize, usize),
        c: &mut DeviceBuffer,
    ) -> Result<()> {
        const OP: &str = "cuda gemm_wgmma";
        self.owns_bytes(OP, &[a, b])?;
        self.owns(OP, &[&*c])?;
        if !self.has_wgmma() {
            let (major, minor) = self.info().compute_capability;
            return Err(Error::Device {
                api: "cuda",
                message: format!("{OP} needs compute capability 9.0 (wgmma), this device has {major}.{minor}"),
            });
        }
        let kern = WgmmaGemmKernel::new(ty, bn).ok_or(Error::InvalidArgument {
            op: OP,
            name: "bn",
            value: (bn as usize).into(),
            reason: "must be 128 or 256",
        })?;
        if k % 8 != 0 {
            return Err(Error::NotBlockMultiple { format: "cuda gemm_wgmma (k)", len: k, block: 8 });
        }
        room(OP, a.len(), prod(OP, &[m, k, 2])?)?;
        room(OP, b.len(), prod(OP, &[n, k, 2])?)?;
        room(OP, c.len(), prod(OP, &[m, n])?)?;
        u32_of(OP, "c", prod(OP, &[m, n])?)?;
        // tensor-map coordinates are signed 32-bit
        for (name, v) in [("m", m), ("n", n), ("k", k)] {
            if v > i32::MAX as usize {
                return Err(Error::InvalidArgument { op: OP, name, value: v.into(), reason: "past the 2³¹ a tensor map's coordinates reach" });
            }
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        if k == 0 {
            // no products: C is zero (the kernel needs at least one slice)
            return self.stream.memset_zeros(&mut c.slice.slice_mut(0..m * n)).map_err(super::ffi::drv);
        }
        let bf16 = ty == WgmmaType::BF16;
        let a_map = tensor_map_2d(device_address(&self.stream, &a.slice), m as u64, k as u64, WgmmaGemmKernel::BM, bf16)?;
        let b_map = tensor_map_2d(device_address(&self.stream, &b.slice), n as u64, k as u64, bn, bf16)?;
        // the maps in device memory (freed in stream order, after the launch)
        let (a_map, b_map) = (self.upload_bytes(&a_map)?, self.upload_bytes(&b_map)?);
        let f = self.loaded(&kern)?;
        allow_dynamic_shared(&f.func, kern.shared_bytes())?;
        let mut args = [
            Arg::BytesIn(&a_map.slice),
            Arg::BytesIn(&b_map.slice),
            Arg::Out(&mut c.slice),
            Arg::U32(m as u32),
            Arg::U32(n as u32),
            Arg::U32(k as u32),
        ];
        launch(&self.stream, &f, kern.launch(m as u32, n as u32, self.info().multiprocessors), &mut args)
    }
}
