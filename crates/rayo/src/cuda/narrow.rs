//! A decoding step's product inputs narrower than f32 (`rayo_ptx`'s `NarrowKernel`): one launch
//! narrows (and optionally RMS-normalizes) the rows, to f16 or to 8 bits with a scale per 32
//! values, then every product over them reads 2 bytes or 1 per value instead of 4 (the 8-bit
//! products multiply with `dp4a`, as llama.cpp's `mmvq`).

use super::buffer::{DeviceBuffer, DeviceBytes};
use super::device::CudaDevice;
use super::ffi::Arg;
use super::rows::{prod, room, u32_of};
use crate::error::{Error, Result};
use rayo_ptx::kernels::{ActFormat, NarrowKernel, QMatvecKernel};

/// Rows of activations in f16 or 8 bits. The host remembers the format, rows and columns last
/// written, and a product checks them.
pub struct NarrowActivations {
    values: DeviceBytes,
    /// The 8-bit scales, one per 32 values.
    scales: DeviceBuffer,
    /// `(format, m, cols)` of the last [`CudaDevice::narrow_activations`].
    written: Option<(ActFormat, usize, usize)>,
    device: u64,
}

impl NarrowActivations {
    /// Room for `max_rows` rows of `max_cols` values (in either format).
    pub fn new(dev: &CudaDevice, max_rows: usize, max_cols: usize) -> Result<NarrowActivations> {
        const OP: &str = "cuda NarrowActivations";
        let n = prod(OP, &[max_rows.max(1), max_cols.max(32)])?;
        Ok(NarrowActivations { values: dev.zero_bytes(prod(OP, &[n, 2])?)?, scales: dev.zeros(n / 32 + 1)?, written: None, device: dev.id() })
    }
}

impl NarrowActivations {
    /// The values, when the last [`CudaDevice::narrow_activations`] wrote `m` rows of `cols`
    /// in `fmt`.
    pub(super) fn written_as(&self, fmt: ActFormat, m: usize, cols: usize) -> Option<&DeviceBytes> {
        (self.written == Some((fmt, m, cols))).then_some(&self.values)
    }
    pub(super) fn device(&self) -> u64 {
        self.device
    }
}

impl CudaDevice {
    /// The first `m` rows of `x` (`cols` values each, a multiple of 32), RMS-normalized first
    /// when `norm` is `(gamma, eps)`, into `out` as `to` (f16 or 8 bits).
    pub fn narrow_activations(
        &self,
        x: &DeviceBuffer,
        norm: Option<(&DeviceBuffer, f32)>,
        cols: usize,
        m: usize,
        to: ActFormat,
        out: &mut NarrowActivations,
    ) -> Result<()> {
        const OP: &str = "cuda narrow_activations";
        self.owns(OP, &[x])?;
        self.check_owner(OP, out.device)?;
        let k = NarrowKernel::new(norm.is_some(), to).ok_or(Error::InvalidArgument {
            op: OP,
            name: "to",
            value: 32usize.into(),
            reason: "f32 is not narrower than f32",
        })?;
        if cols % 32 != 0 {
            return Err(Error::NotBlockMultiple { format: "cuda narrow_activations", len: cols, block: 32 });
        }
        let n = prod(OP, &[m, cols])?;
        room(OP, x.len(), n)?;
        room(OP, out.values.len(), prod(OP, &[n, to.value_bytes() as usize])?)?;
        u32_of(OP, "x", prod(OP, &[n, 4])?)?;
        if let Some((g, eps)) = norm {
            self.owns(OP, &[g])?;
            room(OP, g.len(), cols)?;
            super::ops::check_eps(OP, eps)?;
        }
        out.written = Some((to, m, cols));
        if n == 0 {
            return Ok(());
        }
        let f = self.loaded(&k)?;
        let mut args = vec![Arg::In(&x.slice)];
        if let Some((g, eps)) = norm {
            args.push(Arg::In(&g.slice));
            args.push(Arg::F32(eps));
        }
        args.extend([Arg::U32(cols as u32), Arg::BytesOut(&mut out.values.slice)]);
        if to == ActFormat::Q8 {
            args.push(Arg::Out(&mut out.scales.slice));
        }
        self.queue(&f, k.launch(m as u32), &mut args)
    }

    /// [`CudaDevice::qmatvec_fused`] on activations [`CudaDevice::narrow_activations`] wrote (`m`
    /// rows of `cols`, in `k`'s format: [`QMatvecKernel::with_activations`]).
    pub fn qmatvec_narrow(
        &self,
        k: QMatvecKernel,
        x: &NarrowActivations,
        cols: usize,
        m: usize,
        mats: &[(&DeviceBytes, usize)],
        ys: &mut [&mut DeviceBuffer],
    ) -> Result<()> {
        self.qmatvec_narrow_bias(k, x, cols, m, mats, &[], ys)
    }

    /// [`CudaDevice::qmatvec_narrow`] adding a bias per matrix, as
    /// [`CudaDevice::qmatvec_fused_bias`].
    #[allow(clippy::too_many_arguments)]
    pub fn qmatvec_narrow_bias(
        &self,
        k: QMatvecKernel,
        x: &NarrowActivations,
        cols: usize,
        m: usize,
        mats: &[(&DeviceBytes, usize)],
        biases: &[&DeviceBuffer],
        ys: &mut [&mut DeviceBuffer],
    ) -> Result<()> {
        const OP: &str = "cuda qmatvec_narrow";
        self.check_owner(OP, x.device)?;
        if x.written != Some((k.activations(), m, cols)) {
            return Err(Error::InvalidArgument {
                op: OP,
                name: "cols",
                value: cols.into(),
                reason: "not the format, rows and columns the activations were narrowed to",
            });
        }
        let mut args = vec![Arg::BytesIn(&x.values.slice)];
        if k.activations() == ActFormat::Q8 {
            args.push(Arg::In(&x.scales.slice));
        }
        self.qmatvec_launch(OP, k, args, cols, m, (mats, biases), ys)
    }
}
