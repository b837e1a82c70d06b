//! Pinned (page-locked) host buffers: the driver copies them by DMA at full link speed and
//! asynchronously. Reading or writing one on the host waits for the copies queued on it first,
//! so the DMA engine and the host never touch it at the same time.

use super::buffer::DeviceBuffer;
use super::device::CudaDevice;
use super::ffi::{self, drv};
use crate::error::{check_len, Result};
use cudarc::driver::PinnedHostSlice;

/// A page-locked host buffer of f32.
pub struct PinnedBuffer {
    pub(crate) host: PinnedHostSlice<f32>,
    len: usize,
}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuffer({} f32)", self.len)
    }
}

impl PinnedBuffer {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The contents, after every copy queued on this buffer has finished.
    pub fn as_slice(&self) -> Result<&[f32]> {
        Ok(&self.host.as_slice().map_err(drv)?[..self.len])
    }
    /// The contents for writing, after every copy queued on this buffer has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [f32]> {
        let len = self.len;
        Ok(&mut self.host.as_mut_slice().map_err(drv)?[..len])
    }
}

impl CudaDevice {
    /// A zero-filled pinned host buffer of `len` floats.
    pub fn alloc_pinned(&self, len: usize) -> Result<PinnedBuffer> {
        let host = ffi::alloc_pinned_zeroed(&self.ctx, len.max(1))?;
        Ok(PinnedBuffer { host, len })
    }

    /// Queues a copy of `src` into `dst` (same length) and returns without waiting.
    pub fn write_pinned(&self, dst: &mut DeviceBuffer, src: &PinnedBuffer) -> Result<()> {
        check_len("cuda write_pinned", dst.len(), src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.stream.memcpy_htod(&src.host, &mut dst.slice).map_err(drv)
    }

    /// A new device buffer holding a copy of `src` (queued, not waited for).
    pub fn upload_pinned(&self, src: &PinnedBuffer) -> Result<DeviceBuffer> {
        let mut d = self.zeros(src.len())?;
        self.write_pinned(&mut d, src)?;
        Ok(d)
    }

    /// Copies `src` into `dst` (same length) and waits for it.
    pub fn download_pinned(&self, src: &DeviceBuffer, dst: &mut PinnedBuffer) -> Result<()> {
        check_len("cuda download_pinned", src.len(), dst.len())?;
        if src.is_empty() {
            return Ok(());
        }
        let len = src.len();
        self.stream.memcpy_dtoh(&src.slice.slice(0..len), &mut dst.host).map_err(drv)?;
        self.synchronize()
    }
}
