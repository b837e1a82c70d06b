//! The device underneath, for crates that bring their own WGSL kernels (the LLM engine's wgpu
//! backend): wgpu's device and queue, the error check, and reads of any storage buffer through
//! the device's staging buffer (the one await of a browser's pass).

use super::device::GpuDevice;
use super::encoder::{Encoder, Span};
use super::readback::submit_and_read;
use crate::{Error, Result};

impl GpuDevice {
    /// wgpu's device.
    pub fn raw_device(&self) -> &wgpu::Device {
        &self.inner.device
    }

    /// wgpu's queue.
    pub fn raw_queue(&self) -> &wgpu::Queue {
        &self.inner.queue
    }

    /// The features the device was created with.
    pub fn raw_features(&self) -> wgpu::Features {
        self.inner.device.features()
    }

    /// The smallest subgroup size of the device when it has subgroups (wgpu's `SUBGROUP`
    /// feature, requested where the adapter offers it), else `None`.
    pub fn subgroup_min_size(&self) -> Option<u32> {
        self.inner.subgroup_min_size
    }

    /// [`Error::Device`] if the device was lost or wgpu reported an error (a WGSL or
    /// validation error, out of memory) since the last check.
    pub fn check_errors(&self) -> Result<()> {
        self.check()
    }

    /// Copies the first `out.len()` f32 of `buf` (a `STORAGE | COPY_SRC` buffer) to `out`,
    /// after the work submitted before.
    pub async fn read_raw_async(&self, buf: &wgpu::Buffer, out: &mut [f32]) -> Result<()> {
        let bytes = out.len() as u64 * 4;
        if bytes > buf.size() {
            return Err(Error::LengthMismatch { op: "read_raw", expected: out.len(), actual: (buf.size() / 4) as usize });
        }
        let enc = Encoder::new(self)?;
        submit_and_read(enc, &Span::whole(buf, out.len()), out).await
    }

    /// [`Self::read_raw_async`], blocking. Native only.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_raw(&self, buf: &wgpu::Buffer, out: &mut [f32]) -> Result<()> {
        pollster::block_on(self.read_raw_async(buf, out))
    }
}
