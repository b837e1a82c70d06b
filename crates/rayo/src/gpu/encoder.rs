//! Recording work: one command encoder, the pooled temporaries it uses (kept alive until the
//! submit), and the per-dispatch uniform block.

use super::device::GpuDevice;
use super::pipelines::Kernel;
use super::pool::Pooled;
use crate::{Error, Result};

/// Threads per workgroup of every 1-D kernel.
pub(crate) const WG: u32 = 256;

/// The uniform block every kernel declares as `Meta`: eight u32 slots (sizes, strides, flags)
/// and sixteen f32 parameters (alpha, clip bounds, fused-chain constants).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct Meta {
    pub u: [u32; 8],
    pub p: [f32; 16],
}
const _: () = assert!(core::mem::size_of::<Meta>() == 96);

/// A range of f32 in a device buffer.
#[derive(Clone, Debug)]
pub(crate) struct Span {
    pub buf: wgpu::Buffer,
    /// Offset in bytes (a multiple of the storage-offset alignment).
    pub offset: u64,
    /// Elements.
    pub len: usize,
}

impl Span {
    pub fn whole(buf: &wgpu::Buffer, len: usize) -> Span {
        Span { buf: buf.clone(), offset: 0, len }
    }
    pub fn bytes(&self) -> u64 {
        self.len as u64 * 4
    }
}

pub(crate) struct Encoder {
    pub dev: GpuDevice,
    pub enc: wgpu::CommandEncoder,
    keep: Vec<Pooled>,
}

impl Encoder {
    pub fn new(dev: &GpuDevice) -> Result<Encoder> {
        dev.check()?;
        let enc = dev.inner.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("rayo") });
        Ok(Encoder { dev: dev.clone(), enc, keep: Vec::new() })
    }

    /// A pooled storage buffer of `len` f32 that lives until the submit.
    pub fn temp(&mut self, len: usize) -> Result<Span> {
        let p = self.dev.storage(len)?;
        let s = Span::whole(p.buffer(), len);
        self.keep.push(p);
        Ok(s)
    }

    /// Keeps a pooled buffer alive until the submit.
    pub fn keep(&mut self, p: Pooled) {
        self.keep.push(p);
    }

    /// Records one dispatch of `kernel` with `meta` at binding 0 and `spans` at 1, 2, ...
    pub fn dispatch(&mut self, kernel: &Kernel, meta: &Meta, spans: &[&Span], groups: (u32, u32, u32)) -> Result<()> {
        let limit = self.dev.inner.limits.max_workgroups_per_dimension;
        if groups.0 > limit || groups.1 > limit || groups.2 > limit {
            return Err(Error::BufferTooLarge {
                op: "gpu dispatch",
                bytes: [groups.1, groups.2, WG, 4].iter().fold(groups.0 as u64, |a, &g| a.saturating_mul(g as u64)),
                limit: limit as u64 * WG as u64 * 4,
            });
        }
        let inner = &self.dev.inner;
        let ubuf = inner.pool.get(&inner.device, 96, u64::MAX, wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST);
        inner.queue.write_buffer(ubuf.buffer(), 0, bytemuck::bytes_of(meta));
        let mut entries = Vec::with_capacity(spans.len() + 1);
        entries.push(wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: ubuf.buffer(), offset: 0, size: wgpu::BufferSize::new(96) }),
        });
        for (i, s) in spans.iter().enumerate() {
            // An empty binding is not allowed: bind at least one element (never read).
            let size = wgpu::BufferSize::new(s.bytes().max(4));
            entries.push(wgpu::BindGroupEntry {
                binding: i as u32 + 1,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding { buffer: &s.buf, offset: s.offset, size }),
            });
        }
        let bg = inner.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &kernel.layout, entries: &entries });
        {
            let mut pass = self.enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
            pass.set_pipeline(&kernel.pipeline);
            pass.set_bind_group(0, &bg, &[]);
            pass.dispatch_workgroups(groups.0, groups.1, groups.2);
        }
        self.keep.push(ubuf);
        Ok(())
    }

    /// Submits the recorded work. The temporaries go back to the pool (safe: queue order).
    pub fn submit(self) -> Result<wgpu::SubmissionIndex> {
        let idx = self.dev.inner.queue.submit(Some(self.enc.finish()));
        drop(self.keep);
        self.dev.check()?;
        Ok(idx)
    }
}

/// Workgroup grid for `n` elements, 256 per workgroup: (x, y) with x ≤ the dimension limit.
/// Kernels compute the element index as `gid.x + gid.y * stride` with `stride = x * 256`.
pub(crate) fn grid_1d(dev: &GpuDevice, n: usize) -> (u32, u32, u32) {
    let groups = (n as u64).div_ceil(WG as u64).max(1);
    let lim = dev.inner.limits.max_workgroups_per_dimension.max(1) as u64;
    let x = groups.min(lim);
    let y = groups.div_ceil(x);
    (x as u32, y.min(u32::MAX as u64) as u32, 1)
}

impl GpuDevice {
    /// A pooled storage buffer for `len` f32, or [`Error::BufferTooLarge`] naming the limit.
    pub(crate) fn storage(&self, len: usize) -> Result<Pooled> {
        self.check()?;
        let bytes = (len as u64).saturating_mul(4);
        if bytes > self.binding_bytes {
            return Err(Error::BufferTooLarge { op: "gpu buffer", bytes, limit: self.binding_bytes });
        }
        let inner = &self.inner;
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC;
        Ok(inner.pool.get(&inner.device, bytes.max(4), inner.limits.max_buffer_bytes, usage))
    }

    /// A pooled storage buffer holding `data`.
    pub(crate) fn upload_pooled(&self, data: &[f32]) -> Result<Pooled> {
        let p = self.storage(data.len())?;
        if !data.is_empty() {
            self.inner.queue.write_buffer(p.buffer(), 0, bytemuck::cast_slice(data));
        }
        Ok(p)
    }
}
