//! `DeviceBuffer`: f32 data resident on the GPU.

use super::device::CudaDevice;
use super::ffi::drv;
use crate::error::{check_len, Error, Result};
use cudarc::driver::CudaSlice;

/// A device-resident f32 buffer (allocations are 256-byte aligned, as the vector kernels need).
/// It belongs to the [`CudaDevice`] that made it (its stream orders every use): any other
/// device value refuses it with [`Error::ForeignBuffer`].
pub struct DeviceBuffer {
    pub(crate) slice: CudaSlice<f32>,
    len: usize,
    device: u64,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({} f32 on device {})", self.len, self.device)
    }
}

impl DeviceBuffer {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The [`CudaDevice::id`] of the device that made it.
    pub fn device_id(&self) -> u64 {
        self.device
    }
}

impl CudaDevice {
    /// An error unless every buffer was made by this device.
    pub(crate) fn owns(&self, op: &'static str, bufs: &[&DeviceBuffer]) -> Result<()> {
        bufs.iter().try_for_each(|b| self.check_owner(op, b.device))
    }

    fn check_size(&self, op: &'static str, len: usize) -> Result<()> {
        self.check_not_capturing(op)?;
        let bytes = (len as u64).saturating_mul(4);
        if bytes > self.info().total_memory || len > u32::MAX as usize {
            let limit = self.info().total_memory.min(u32::MAX as u64 * 4);
            return Err(Error::BufferTooLarge { op, bytes, limit });
        }
        Ok(())
    }

    /// Copies `data` to a new device buffer.
    pub fn upload(&self, data: &[f32]) -> Result<DeviceBuffer> {
        self.check_size("cuda upload", data.len())?;
        if data.is_empty() {
            return self.zeros(0);
        }
        let slice = self.stream.clone_htod(data).map_err(drv)?;
        Ok(DeviceBuffer { slice, len: data.len(), device: self.id() })
    }

    /// A new buffer of `len` zeros.
    pub fn zeros(&self, len: usize) -> Result<DeviceBuffer> {
        self.check_size("cuda alloc", len)?;
        // cudarc cannot allocate 0 bytes; keep one element and remember the length.
        let slice = self.stream.alloc_zeros::<f32>(len.max(1)).map_err(drv)?;
        Ok(DeviceBuffer { slice, len, device: self.id() })
    }

    /// Overwrites `buf` with `data` (lengths must agree).
    pub fn write(&self, buf: &mut DeviceBuffer, data: &[f32]) -> Result<()> {
        self.owns("cuda write", &[buf])?;
        check_len("cuda write", buf.len, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        self.queued_other("a copy to the device");
        self.stream.memcpy_htod(data, &mut buf.slice).map_err(drv)
    }

    /// Copies the buffer back to the host (waits for queued work).
    pub fn download(&self, buf: &DeviceBuffer) -> Result<Vec<f32>> {
        let mut v = vec![0.0f32; buf.len];
        self.download_into(buf, &mut v)?;
        Ok(v)
    }

    pub fn download_into(&self, buf: &DeviceBuffer, out: &mut [f32]) -> Result<()> {
        self.owns("cuda download", &[buf])?;
        check_len("cuda download", buf.len, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        self.stream.memcpy_dtoh(&buf.slice.slice(0..buf.len), out).map_err(drv)?;
        self.synchronize()
    }
}

/// Device-resident bytes: quantized weights (GGUF blocks, uploaded as the file holds them) or
/// an f16 cache. Like [`DeviceBuffer`], it belongs to the device that made it.
pub struct DeviceBytes {
    pub(crate) slice: CudaSlice<u8>,
    len: usize,
    device: u64,
}

impl std::fmt::Debug for DeviceBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBytes({} bytes on device {})", self.len, self.device)
    }
}

impl DeviceBytes {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn device_id(&self) -> u64 {
        self.device
    }
}

impl CudaDevice {
    pub(crate) fn owns_bytes(&self, op: &'static str, bufs: &[&DeviceBytes]) -> Result<()> {
        bufs.iter().try_for_each(|b| self.check_owner(op, b.device))
    }

    fn check_bytes(&self, op: &'static str, len: usize) -> Result<()> {
        self.check_not_capturing(op)?;
        if len as u64 > self.info().total_memory {
            return Err(Error::BufferTooLarge { op, bytes: len as u64, limit: self.info().total_memory });
        }
        Ok(())
    }

    /// Copies `data` to new device bytes.
    pub fn upload_bytes(&self, data: &[u8]) -> Result<DeviceBytes> {
        self.check_bytes("cuda upload", data.len())?;
        if data.is_empty() {
            return self.zero_bytes(0);
        }
        let slice = self.stream.clone_htod(data).map_err(drv)?;
        Ok(DeviceBytes { slice, len: data.len(), device: self.id() })
    }

    /// Copies device bytes back to the host (waits for queued work).
    pub fn download_bytes(&self, buf: &DeviceBytes) -> Result<Vec<u8>> {
        self.owns_bytes("cuda download_bytes", &[buf])?;
        let mut v = vec![0u8; buf.len];
        if !v.is_empty() {
            self.stream.memcpy_dtoh(&buf.slice.slice(0..buf.len), &mut v).map_err(drv)?;
            self.synchronize()?;
        }
        Ok(v)
    }

    /// `len` zero bytes.
    pub fn zero_bytes(&self, len: usize) -> Result<DeviceBytes> {
        self.check_bytes("cuda alloc", len)?;
        let slice = self.stream.alloc_zeros::<u8>(len.max(1)).map_err(drv)?;
        Ok(DeviceBytes { slice, len, device: self.id() })
    }

    /// Writes `data` into `buf` from byte `at` on (`at + data.len() ≤ buf.len()`), queued on
    /// the device's stream (before the work queued after it).
    pub fn write_bytes_at(&self, buf: &mut DeviceBytes, at: usize, data: &[u8]) -> Result<()> {
        const OP: &str = "cuda write_bytes_at";
        self.owns_bytes(OP, &[buf])?;
        let end = at.checked_add(data.len()).filter(|&e| e <= buf.len).ok_or(Error::LengthMismatch {
            op: OP,
            expected: buf.len,
            actual: at.saturating_add(data.len()),
        })?;
        if data.is_empty() {
            return Ok(());
        }
        self.queued_other("a copy to the device");
        self.stream.memcpy_htod(data, &mut buf.slice.slice_mut(at..end)).map_err(drv)
    }

    /// Writes `data` into `buf` from element `at` on (`at + data.len() ≤ buf.len()`).
    pub fn write_at(&self, buf: &mut DeviceBuffer, at: usize, data: &[f32]) -> Result<()> {
        const OP: &str = "cuda write_at";
        self.owns(OP, &[buf])?;
        let end = at.checked_add(data.len()).filter(|&e| e <= buf.len).ok_or(Error::LengthMismatch {
            op: OP,
            expected: buf.len,
            actual: at.saturating_add(data.len()),
        })?;
        if data.is_empty() {
            return Ok(());
        }
        self.queued_other("a copy to the device");
        self.stream.memcpy_htod(data, &mut buf.slice.slice_mut(at..end)).map_err(drv)
    }

    /// Copies the first `out.len()` values of `buf` to the host (waits for queued work).
    pub fn download_prefix(&self, buf: &DeviceBuffer, out: &mut [f32]) -> Result<()> {
        const OP: &str = "cuda download_prefix";
        self.owns(OP, &[buf])?;
        if out.len() > buf.len {
            return Err(Error::LengthMismatch { op: OP, expected: buf.len, actual: out.len() });
        }
        if out.is_empty() {
            return Ok(());
        }
        self.stream.memcpy_dtoh(&buf.slice.slice(0..out.len()), out).map_err(drv)?;
        self.synchronize()
    }

    /// `dst[dst_at..dst_at + n] = src[src_at..src_at + n]` on the device.
    pub fn copy_within_device(&self, src: &DeviceBuffer, src_at: usize, dst: &mut DeviceBuffer, dst_at: usize, n: usize) -> Result<()> {
        const OP: &str = "cuda copy";
        self.owns(OP, &[src, dst])?;
        let s_end = src_at.checked_add(n).filter(|&e| e <= src.len).ok_or(Error::LengthMismatch {
            op: OP,
            expected: src.len,
            actual: src_at.saturating_add(n),
        })?;
        let d_end = dst_at.checked_add(n).filter(|&e| e <= dst.len).ok_or(Error::LengthMismatch {
            op: OP,
            expected: dst.len,
            actual: dst_at.saturating_add(n),
        })?;
        if n == 0 {
            return Ok(());
        }
        self.queued_other("a copy on the device");
        self.stream.memcpy_dtod(&src.slice.slice(src_at..s_end), &mut dst.slice.slice_mut(dst_at..d_end)).map_err(drv)
    }
}
