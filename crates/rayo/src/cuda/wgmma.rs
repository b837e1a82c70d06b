//! Hopper's tensor-core GEMM (`rayo_ptx`'s `WgmmaGemmKernel`: wgmma, TMA, warp-specialized):
//! `C = A·Bᵀ` for f16, bf16 or (TF32) f32 `A` (m × k) and `B` (n × k), f32 `C` (m × n), on
//! sm_90 only.

use super::buffer::{DeviceBuffer, DeviceBytes};
use super::device::CudaDevice;
use super::ffi::{allow_dynamic_shared, device_address, max_active_clusters, tensor_map_2d, Arg};
use super::narrow::NarrowActivations;
use super::rows::{prod, room, u32_of};
use crate::error::{Error, Result};
use rayo_ptx::kernels::{ActFormat, WgmmaGemmKernel};
use rayo_ptx::ptx::WgmmaType;

impl CudaDevice {
    /// Whether this device runs [`CudaDevice::gemm_wgmma`] (compute capability 9.0).
    pub fn has_wgmma(&self) -> bool {
        self.info().compute_capability == (9, 0)
    }

    /// `c = a·bᵀ`: `a` holds `m × k` and `b` `n × k` values of `ty` (row-major: 2 bytes each for
    /// f16 and bf16, f32 for TF32), `c` receives `m × n` f32. A row of `k` values must be a
    /// multiple of 16 bytes (the copies'); `bn` (128 or 256) is the kernel's tile width. f16 and
    /// bf16 run in clusters of two blocks ([`WgmmaGemmKernel::clustered`]);
    /// [`CudaDevice::gemm_wgmma_with`] takes any variant.
    pub fn gemm_wgmma(
        &self,
        ty: WgmmaType,
        bn: u32,
        a: &DeviceBytes,
        b: &DeviceBytes,
        dims: (usize, usize, usize),
        c: &mut DeviceBuffer,
    ) -> Result<()> {
        // clusters of two sharing B (by TMA multicast) for f16/bf16: at or above single blocks
        // in the medians of six same-call rounds on an H100 (docs/perf/issue14-hopper.md)
        let kern = kernel("cuda gemm_wgmma", ty, bn)?;
        self.gemm_wgmma_with(if ty == WgmmaType::TF32 { kern } else { kern.clustered() }, a, b, dims, c)
    }

    /// [`CudaDevice::gemm_wgmma`] with a chosen kernel (e.g. [`WgmmaGemmKernel::clustered`]).
    pub fn gemm_wgmma_with(
        &self,
        kern: WgmmaGemmKernel,
        a: &DeviceBytes,
        b: &DeviceBytes,
        dims: (usize, usize, usize),
        c: &mut DeviceBuffer,
    ) -> Result<()> {
        const OP: &str = "cuda gemm_wgmma";
        let p = self.byte_operands(OP, kern, a, b, dims)?;
        self.wgmma_launch(OP, kern, p, dims, COut::F32(c))
    }

    /// [`CudaDevice::gemm_wgmma_with`] for a kernel that writes C in the operands' type
    /// ([`WgmmaGemmKernel::narrow_c`]): `c` receives `m × n` f16 or bf16 values (2 bytes each).
    pub fn gemm_wgmma_narrow(
        &self,
        kern: WgmmaGemmKernel,
        a: &DeviceBytes,
        b: &DeviceBytes,
        dims: (usize, usize, usize),
        c: &mut DeviceBytes,
    ) -> Result<()> {
        const OP: &str = "cuda gemm_wgmma_narrow";
        let p = self.byte_operands(OP, kern, a, b, dims)?;
        self.wgmma_launch(OP, kern, p, dims, COut::Narrow(c))
    }

    /// A prompt's product on Hopper's tensor cores, the sm_90 counterpart of
    /// [`CudaDevice::gemm_half`]: `y = x·whᵀ` (`add`: `y += x·whᵀ`) for `m` rows of f16
    /// activations `x` ([`CudaDevice::narrow_activations`] to [`ActFormat::F16`], `cols` values a
    /// row) and `wh`, `rows × cols` f16 weights ([`CudaDevice::dequantize_f16`]); `y` gets `m ×
    /// rows` f32. Tiles 128 wide when 256 would leave multiprocessors idle, and to add.
    pub fn gemm_half_wgmma(
        &self,
        x: &NarrowActivations,
        wh: &DeviceBytes,
        (rows, cols): (usize, usize),
        m: usize,
        y: &mut DeviceBuffer,
        add: bool,
    ) -> Result<()> {
        const OP: &str = "cuda gemm_half_wgmma";
        self.check_owner(OP, x.device())?;
        let Some(xv) = x.written_as(ActFormat::F16, m, cols) else {
            return Err(Error::InvalidArgument {
                op: OP,
                name: "cols",
                value: cols.into(),
                reason: "the activations were not last narrowed to f16 with these rows and columns",
            });
        };
        let sms = self.info().multiprocessors;
        let wide = kernel(OP, WgmmaType::F16, 256)?;
        let fill = wide.tiles(m.min(u32::MAX as usize) as u32, rows.min(u32::MAX as usize) as u32) >= sms;
        let bn = if fill && !add { 256 } else { 128 };
        let kern = kernel(OP, WgmmaType::F16, bn)?.clustered();
        let kern = if add { kern.accumulating().expect("f32 C accumulates") } else { kern };
        let p = self.byte_operands(OP, kern, xv, wh, (m, rows, cols))?;
        self.wgmma_launch(OP, kern, p, (m, rows, cols), COut::F32(y))
    }

    /// The device addresses of A and B given as bytes, their owner and lengths checked.
    fn byte_operands(
        &self,
        op: &'static str,
        kern: WgmmaGemmKernel,
        a: &DeviceBytes,
        b: &DeviceBytes,
        (m, n, k): (usize, usize, usize),
    ) -> Result<(u64, u64)> {
        self.owns_bytes(op, &[a, b])?;
        let esz = kern.ty().bytes() as usize;
        room(op, a.len(), prod(op, &[m, k, esz])?)?;
        room(op, b.len(), prod(op, &[n, k, esz])?)?;
        Ok((device_address(&self.stream, &a.slice), device_address(&self.stream, &b.slice)))
    }

    /// `c = a·bᵀ` for f32 `a` (`m × k`) and `b` (`n × k`) on the tensor cores in TF32 (each
    /// operand's top 19 bits: 10 bits of mantissa), f32 accumulation: the f32 GEMM a caller asks
    /// for when that precision will do (`gemm` stays exact f32). `k` a multiple of 4.
    pub fn gemm_tf32(&self, a: &DeviceBuffer, b: &DeviceBuffer, (m, n, k): (usize, usize, usize), c: &mut DeviceBuffer) -> Result<()> {
        const OP: &str = "cuda gemm_tf32";
        self.owns(OP, &[a, b])?;
        room(OP, a.len(), prod(OP, &[m, k])?)?;
        room(OP, b.len(), prod(OP, &[n, k])?)?;
        let (pa, pb) = (device_address(&self.stream, &a.slice), device_address(&self.stream, &b.slice));
        self.wgmma_launch(OP, kernel(OP, WgmmaType::TF32, 256)?, (pa, pb), (m, n, k), COut::F32(c))
    }

    /// The checks and the launch shared by [`CudaDevice::gemm_wgmma`] and
    /// [`CudaDevice::gemm_tf32`], the operands' device addresses given (their lengths checked).
    fn wgmma_launch(
        &self,
        op: &'static str,
        kern: WgmmaGemmKernel,
        (pa, pb): (u64, u64),
        (m, n, k): (usize, usize, usize),
        mut c: COut,
    ) -> Result<()> {
        match &c {
            COut::F32(c) => self.owns(op, &[&**c])?,
            COut::Narrow(c) => self.owns_bytes(op, &[&**c])?,
        }
        if matches!(c, COut::Narrow(_)) != (kern.c_bytes() == 2) {
            return Err(Error::InvalidArgument {
                op,
                name: "c",
                value: (kern.c_bytes() as usize).into(),
                reason: "the kernel's C bytes per value must match the output: 4 for an f32 buffer, 2 (narrow_c) for bytes",
            });
        }
        if !self.has_wgmma() {
            let (major, minor) = self.info().compute_capability;
            return Err(Error::Device {
                api: "cuda",
                message: format!("{op} needs compute capability 9.0 (wgmma), this device has {major}.{minor}"),
            });
        }
        let ty = kern.ty();
        let per_row = 16 / ty.bytes() as usize;
        if k % per_row != 0 {
            return Err(Error::NotBlockMultiple { format: "cuda gemm_wgmma (k: rows of 16-byte multiples)", len: k, block: per_row });
        }
        let c_len = match &c {
            COut::F32(c) => c.len(),
            COut::Narrow(c) => c.len() / 2,
        };
        room(op, c_len, prod(op, &[m, n])?)?;
        u32_of(op, "c", prod(op, &[m, n])?)?;
        // tensor-map coordinates are signed 32-bit
        for (name, v) in [("m", m), ("n", n), ("k", k)] {
            if v > i32::MAX as usize {
                return Err(Error::InvalidArgument { op, name, value: v.into(), reason: "past the 2³¹ a tensor map's coordinates reach" });
            }
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        if k == 0 {
            // no products: C is zero (the kernel needs at least one slice)
            return match c {
                COut::F32(c) => self.stream.memset_zeros(&mut c.slice.slice_mut(0..m * n)),
                COut::Narrow(c) => self.stream.memset_zeros(&mut c.slice.slice_mut(0..2 * m * n)),
            }
            .map_err(super::ffi::drv);
        }
        let a_map = tensor_map_2d(pa, m as u64, k as u64, kern.bm(), ty)?;
        let b_map = tensor_map_2d(pb, n as u64, k as u64, kern.b_box_rows(), ty)?;
        let f = self.loaded(&kern)?;
        allow_dynamic_shared(&f.func, kern.shared_bytes())?;
        let mut args = [
            Arg::Map(&a_map),
            Arg::Map(&b_map),
            match &mut c {
                COut::F32(c) => Arg::Out(&mut c.slice),
                COut::Narrow(c) => Arg::BytesOut(&mut c.slice),
            },
            Arg::U32(m as u32),
            Arg::U32(n as u32),
            Arg::U32(k as u32),
        ];
        let mut cfg = kern.launch(m as u32, n as u32, self.info().multiprocessors);
        if kern.cluster() > 1 {
            // clusters need their blocks' multiprocessors in one GPC: the persistent grid is as
            // many clusters as fit at once, never a second wave
            let fit = max_active_clusters(&self.stream, &f, cfg)?.max(1);
            cfg.grid.0 = cfg.grid.0.min(fit * kern.cluster());
        }
        self.queue(&f, cfg, &mut args)
    }
}

/// The kernel of `ty` and tile width `bn`, or an error naming the widths there are.
fn kernel(op: &'static str, ty: WgmmaType, bn: u32) -> Result<WgmmaGemmKernel> {
    WgmmaGemmKernel::new(ty, bn).ok_or(Error::InvalidArgument { op, name: "bn", value: (bn as usize).into(), reason: "must be 128 or 256" })
}

/// Where a GEMM writes C: f32 values, or the operands' 2-byte type.
enum COut<'a> {
    F32(&'a mut DeviceBuffer),
    Narrow(&'a mut DeviceBytes),
}
