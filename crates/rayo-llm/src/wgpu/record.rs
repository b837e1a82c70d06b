//! Recording a pass: the backend's kernels (compiled once per source), and one command encoder
//! with one compute pass that collects every dispatch until the next read. Each dispatch's
//! parameters take a 256-byte slot of one uniform buffer, written once per submit; its bind
//! group is kept for the next time the same kernel, slot and buffers come (every decoding step
//! after the first).

use crate::Result;
use rayo::gpu::{wgpu, GpuDevice};
use std::collections::HashMap;
use std::sync::Arc;

/// Parameter words a dispatch may have (u32, or f32 bits, as the kernel's `struct P` lists
/// them): a 64-byte uniform binding.
pub(crate) const PARAM_WORDS: usize = 16;

/// A compiled kernel and the layout of its bind group 0.
pub(crate) struct Kernel {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

/// Dispatches one submit holds at most (then it is submitted and a new one begun).
const SLOTS: u64 = 1024;

pub(crate) struct Recorder {
    dev: GpuDevice,
    kernels: HashMap<String, Arc<Kernel>>,
    enc: Option<wgpu::CommandEncoder>,
    /// The open compute pass of `enc` (ended for copies and at the submit).
    pass: Option<wgpu::ComputePass<'static>>,
    /// Bind groups by (kernel, parameter slot, buffers).
    groups: HashMap<(wgpu::ComputePipeline, u64, Vec<wgpu::Buffer>), wgpu::BindGroup>,
    uniforms: Vec<u8>,
    ubuf: wgpu::Buffer,
    stride: u64,
    slots: u64,
    /// Dispatches and copies recorded since the backend was made.
    pub ops: usize,
}

impl Recorder {
    pub fn new(dev: GpuDevice) -> Recorder {
        let stride = (dev.raw_device().limits().min_uniform_buffer_offset_alignment as u64).max(4 * PARAM_WORDS as u64);
        let ubuf = dev.raw_device().create_buffer(&wgpu::BufferDescriptor {
            label: Some("rayo-llm params"),
            size: stride * SLOTS,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Recorder { dev, kernels: HashMap::new(), enc: None, pass: None, groups: HashMap::new(), uniforms: Vec::new(), ubuf, stride, slots: 0, ops: 0 }
    }

    /// The kernel `key`, compiled from `source()` on first use (an error in it surfaces as
    /// [`rayo::Error::Device`] at the next submit).
    pub fn kernel(&mut self, key: &str, source: impl FnOnce() -> String) -> Arc<Kernel> {
        if let Some(k) = self.kernels.get(key) {
            return Arc::clone(k);
        }
        let device = self.dev.raw_device();
        let module =
            device.create_shader_module(wgpu::ShaderModuleDescriptor { label: Some(key), source: wgpu::ShaderSource::Wgsl(source().into()) });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(key),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let layout = pipeline.get_bind_group_layout(0);
        let k = Arc::new(Kernel { pipeline, layout });
        self.kernels.insert(key.to_string(), Arc::clone(&k));
        k
    }

    fn encoder(&mut self) -> &mut wgpu::CommandEncoder {
        // a pass holds the encoder: end it first
        self.pass = None;
        let dev = &self.dev;
        self.enc.get_or_insert_with(|| dev.raw_device().create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("rayo-llm pass") }))
    }

    fn pass(&mut self) -> &mut wgpu::ComputePass<'static> {
        if self.pass.is_none() {
            let pass = self.encoder().begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None }).forget_lifetime();
            self.pass = Some(pass);
        }
        self.pass.as_mut().expect("made above")
    }

    /// Records `kernel` over `groups` workgroups with `params` (at most [`PARAM_WORDS`]) at
    /// binding 0 and `bufs` (whole buffers) at 1, 2, ...
    pub fn dispatch(&mut self, kernel: &Kernel, params: &[u32], bufs: &[&wgpu::Buffer], groups: (u32, u32, u32)) -> Result<()> {
        debug_assert!(params.len() <= PARAM_WORDS);
        let limit = self.dev.limits().max_workgroups_per_dimension;
        if groups.0 > limit || groups.1 > limit || groups.2 > limit {
            return Err(rayo::Error::Device {
                api: "wgpu",
                message: format!("a dispatch of {groups:?} workgroups is past the adapter's {limit} per dimension"),
            }
            .into());
        }
        if self.slots == SLOTS {
            self.flush()?;
        }
        let offset = self.slots * self.stride;
        self.uniforms.resize(offset as usize, 0);
        self.uniforms.extend_from_slice(bytemuck::cast_slice(&params[..params.len().min(PARAM_WORDS)]));
        self.uniforms.resize((offset + 4 * PARAM_WORDS as u64) as usize, 0);
        let key = (kernel.pipeline.clone(), self.slots, bufs.iter().map(|b| (*b).clone()).collect::<Vec<_>>());
        if !self.groups.contains_key(&key) {
            // bounded: a session's steps repeat the same few hundred; tests make many buffers
            if self.groups.len() >= 4096 {
                self.groups.clear();
            }
            let mut entries = vec![wgpu::BindGroupEntry {
                binding: 0,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &self.ubuf,
                    offset,
                    size: wgpu::BufferSize::new(4 * PARAM_WORDS as u64),
                }),
            }];
            for (i, b) in bufs.iter().enumerate() {
                entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: b.as_entire_binding() });
            }
            let bg = self.dev.raw_device().create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &kernel.layout, entries: &entries });
            self.groups.insert(key.clone(), bg);
        }
        let bg = self.groups[&key].clone();
        self.slots += 1;
        let pass = self.pass();
        pass.set_pipeline(&kernel.pipeline);
        pass.set_bind_group(0, &bg, &[]);
        pass.dispatch_workgroups(groups.0, groups.1, groups.2);
        self.ops += 1;
        Ok(())
    }

    /// Records a copy of `bytes` bytes between buffers.
    pub fn copy(&mut self, src: &wgpu::Buffer, src_off: u64, dst: &wgpu::Buffer, dst_off: u64, bytes: u64) {
        self.encoder().copy_buffer_to_buffer(src, src_off, dst, dst_off, bytes);
        self.ops += 1;
    }

    /// Submits what was recorded (the parameters first), then reports any wgpu error.
    pub fn flush(&mut self) -> Result<()> {
        self.pass = None;
        if let Some(enc) = self.enc.take() {
            let queue = self.dev.raw_queue();
            if !self.uniforms.is_empty() {
                queue.write_buffer(&self.ubuf, 0, &self.uniforms);
            }
            queue.submit(Some(enc.finish()));
            self.uniforms.clear();
            self.slots = 0;
        }
        self.dev.check_errors().map_err(crate::Error::from)
    }
}

/// Workgroups for `n` threads of 256: `(x, y)` with `x` within the dimension limit; kernels
/// index `gid.x + gid.y · stride` with `stride = 256·x` (returned).
pub(crate) fn grid(dev: &GpuDevice, n: usize) -> ((u32, u32, u32), u32) {
    let groups = n.div_ceil(256).max(1) as u64;
    let x = groups.min(dev.limits().max_workgroups_per_dimension.max(1) as u64);
    let y = groups.div_ceil(x);
    ((x as u32, y.min(u32::MAX as u64) as u32, 1), (x * 256) as u32)
}
