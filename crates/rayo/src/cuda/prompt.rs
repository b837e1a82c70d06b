//! Products on the tensor cores (f16 operands, f32 accumulation, `mma.sync`): the weights
//! dequantized to f16, then one GEMM ([`HalfGemmKernel`]) over the input's rows — the same two
//! steps as llama.cpp's f16 path for batches. The activations are rounded to f16 on their way
//! in, so the result differs from the f32 path by about 2⁻¹¹ of Σ|x·w|.

use super::buffer::{DeviceBuffer, DeviceBytes};
use super::device::CudaDevice;
use super::ffi::Arg;
use super::rows::{prod, room, u32_of};
use crate::error::{Error, Result};
use rayo_ptx::kernels::{DequantF16Kernel, HalfEpilogue, HalfGemmKernel, QFormat};

impl CudaDevice {
    /// Whether [`qmatmul_half`](Self::qmatmul_half) takes a `rows × cols` matrix (`cols` a
    /// multiple of 32, `rows` even).
    pub fn half_gemm_fits(rows: usize, cols: usize) -> bool {
        cols > 0 && cols.is_multiple_of(HalfGemmKernel::K_STEP as usize) && rows.is_multiple_of(2)
    }

    /// `y = x·wᵀ` (`add`: `y += x·wᵀ`) for the first `m` rows of `x` (`cols` values each);
    /// `w` is `rows × cols` values in `fmt`, `y` gets `rows` values per row. The weights are
    /// dequantized into `wh` (scratch of at least `rows·cols·2` bytes) first:
    /// [`dequantize_f16`](Self::dequantize_f16), then [`gemm_half`](Self::gemm_half).
    #[allow(clippy::too_many_arguments)]
    pub fn qmatmul_half(
        &self,
        fmt: QFormat,
        w: &DeviceBytes,
        (rows, cols): (usize, usize),
        x: &DeviceBuffer,
        m: usize,
        y: &mut DeviceBuffer,
        wh: &mut DeviceBytes,
        add: bool,
    ) -> Result<()> {
        half_kernel("cuda qmatmul_half", (rows, cols), add)?;
        self.dequantize_f16(fmt, w, (rows, cols), wh)?;
        self.gemm_half(x, wh, (rows, cols), m, y, add)
    }

    /// `w` (`rows × cols` values in `fmt`) as f16 in the same layout, into `wh` (at least
    /// `rows·cols·2` bytes).
    pub fn dequantize_f16(&self, fmt: QFormat, w: &DeviceBytes, (rows, cols): (usize, usize), wh: &mut DeviceBytes) -> Result<()> {
        const OP: &str = "cuda dequantize_f16";
        self.owns_bytes(OP, &[w, wh])?;
        let bv = fmt.block_values() as usize;
        if !cols.is_multiple_of(bv) {
            return Err(Error::NotBlockMultiple { format: OP, len: cols, block: bv });
        }
        if !cols.is_multiple_of(2) {
            return Err(Error::InvalidArgument { op: OP, name: "cols", value: cols.into(), reason: "must be even (values are written in pairs)" });
        }
        room(OP, w.len(), prod(OP, &[rows, cols / bv, fmt.block_bytes() as usize])?)?;
        room(OP, wh.len(), prod(OP, &[rows, cols, 2])?)?;
        u32_of(OP, "w", prod(OP, &[rows, cols])?)?;
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let u = |v: usize| Arg::U32(v as u32);
        let dq = DequantF16Kernel::new(fmt);
        let f = self.loaded(&dq)?;
        self.queue(&f, dq.launch(rows as u32, cols as u32), &mut [Arg::BytesIn(&w.slice), Arg::BytesOut(&mut wh.slice), u(rows), u(cols)])
    }

    /// `y = x·whᵀ` (`add`: `y += x·whᵀ`) for the first `m` rows of `x` on the tensor cores:
    /// `wh` is `rows × cols` f16 values ([`dequantize_f16`](Self::dequantize_f16)), `x` is
    /// rounded to f16 on its way in, f32 accumulation.
    pub fn gemm_half(
        &self,
        x: &DeviceBuffer,
        wh: &DeviceBytes,
        (rows, cols): (usize, usize),
        m: usize,
        y: &mut DeviceBuffer,
        add: bool,
    ) -> Result<()> {
        const OP: &str = "cuda gemm_half";
        self.owns(OP, &[x, y])?;
        self.owns_bytes(OP, &[wh])?;
        let g = half_kernel(OP, (rows, cols), add)?;
        room(OP, wh.len(), prod(OP, &[rows, cols, 2])?)?;
        room(OP, x.len(), prod(OP, &[m, cols])?)?;
        room(OP, y.len(), prod(OP, &[m, rows])?)?;
        for (name, v) in [("w", prod(OP, &[rows, cols])?), ("x", prod(OP, &[m, cols])?), ("y", prod(OP, &[m, rows])?)] {
            u32_of(OP, name, v)?;
        }
        if m == 0 || rows == 0 {
            return Ok(());
        }
        let f = self.loaded(&g)?;
        let u = |v: usize| Arg::U32(v as u32);
        let mut args = [Arg::In(&x.slice), Arg::BytesIn(&wh.slice), Arg::Out(&mut y.slice), u(m), u(cols), u(rows)];
        self.queue(&f, g.launch(m as u32, rows as u32), &mut args)
    }
}

/// The f16 GEMM for a `rows × cols` weight matrix, or the error saying why there is none.
fn half_kernel(op: &'static str, (rows, cols): (usize, usize), add: bool) -> Result<HalfGemmKernel> {
    let epilogue = if add { HalfEpilogue::Add } else { HalfEpilogue::Store };
    let kernel = HalfGemmKernel::new(epilogue, u32::try_from(cols).unwrap_or(0)).filter(|_| CudaDevice::half_gemm_fits(rows, cols));
    kernel.ok_or(Error::InvalidArgument {
        op,
        name: "rows x cols",
        value: rows.saturating_mul(cols).into(),
        reason: "the f16 GEMM needs a multiple of 32 columns and an even number of rows",
    })
}
