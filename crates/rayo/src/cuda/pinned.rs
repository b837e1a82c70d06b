//! Pinned (page-locked) host buffers: the driver copies them by DMA at full link speed and
//! asynchronously. Writing one on the host first waits for the uploads queued from it (an event
//! recorded after each), so the DMA engine never reads memory the host is changing; downloads
//! into one wait before they return.

use super::buffer::DeviceBuffer;
use super::device::CudaDevice;
use super::ffi::{self, drv};
use crate::error::{check_len, Result};
use cudarc::driver::{CudaEvent, PinnedHostSlice};
use std::sync::Mutex;

/// A page-locked host buffer of f32.
pub struct PinnedBuffer {
    pub(crate) host: PinnedHostSlice<f32>,
    len: usize,
    /// Recorded after the last upload queued from this buffer.
    pending: Mutex<Option<CudaEvent>>,
    /// The [`CudaDevice::id`] that made it (its event belongs to that device's stream).
    device: u64,
}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuffer({} f32)", self.len)
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        // The DMA engine may still be reading this memory: wait before it is freed.
        if let Some(ev) = self.pending.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = ev.synchronize();
        }
    }
}

impl PinnedBuffer {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The contents (uploads still in flight only read it too).
    pub fn as_slice(&self) -> Result<&[f32]> {
        Ok(&self.host.as_slice().map_err(drv)?[..self.len])
    }
    /// The contents for writing, after every upload queued from this buffer has finished.
    pub fn as_mut_slice(&mut self) -> Result<&mut [f32]> {
        let pending = self.pending.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(ev) = pending {
            ev.synchronize().map_err(drv)?;
        }
        let len = self.len;
        Ok(&mut self.host.as_mut_slice().map_err(drv)?[..len])
    }
}

impl CudaDevice {
    /// A zero-filled pinned host buffer of `len` floats.
    pub fn alloc_pinned(&self, len: usize) -> Result<PinnedBuffer> {
        let host = ffi::alloc_pinned_zeroed(&self.ctx, len.max(1))?;
        Ok(PinnedBuffer { host, len, pending: Mutex::new(None), device: self.id() })
    }

    /// Queues a copy of `src` into `dst` (same length) and returns without waiting.
    pub fn write_pinned(&self, dst: &mut DeviceBuffer, src: &PinnedBuffer) -> Result<()> {
        self.owns("cuda write_pinned", &[dst])?;
        self.check_owner("cuda write_pinned", src.device)?;
        check_len("cuda write_pinned", dst.len(), src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.queued_other("a copy to the device");
        self.stream.memcpy_htod(&src.host, &mut dst.slice).map_err(drv)?;
        let ev = self.stream.record_event(None).map_err(drv)?;
        *src.pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(ev);
        Ok(())
    }

    /// A new device buffer holding a copy of `src` (queued, not waited for).
    pub fn upload_pinned(&self, src: &PinnedBuffer) -> Result<DeviceBuffer> {
        let mut d = self.zeros(src.len())?;
        self.write_pinned(&mut d, src)?;
        Ok(d)
    }

    /// Copies `src` into `dst` (same length) and waits for it.
    pub fn download_pinned(&self, src: &DeviceBuffer, dst: &mut PinnedBuffer) -> Result<()> {
        self.owns("cuda download_pinned", &[src])?;
        self.check_owner("cuda download_pinned", dst.device)?;
        check_len("cuda download_pinned", src.len(), dst.len())?;
        if src.is_empty() {
            return Ok(());
        }
        let len = src.len();
        self.queued_other("a copy to the host");
        self.stream.memcpy_dtoh(&src.slice.slice(0..len), &mut dst.host).map_err(drv)?;
        self.synchronize()
    }
}
