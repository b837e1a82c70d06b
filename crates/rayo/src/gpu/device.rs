//! [`GpuDevice`]: one wgpu device and queue per process (lazily), with its buffer pool,
//! pipeline cache and readback staging buffer.

use super::pipelines::PipelineCache;
use super::pool::BufferPool;
use crate::{Error, Result};
use std::sync::{Arc, Mutex};

/// What wgpu says about an adapter (name, backend, type, driver).
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterInfo {
    pub name: String,
    /// "vulkan", "metal", "dx12", "gl", "webgpu".
    pub backend: String,
    /// "discrete", "integrated", "virtual", "cpu", "other".
    pub device_type: String,
    pub driver: String,
    pub driver_info: String,
}

impl AdapterInfo {
    fn from_wgpu(i: &wgpu::AdapterInfo) -> AdapterInfo {
        AdapterInfo {
            name: i.name.clone(),
            backend: format!("{:?}", i.backend).to_ascii_lowercase(),
            device_type: match i.device_type {
                wgpu::DeviceType::DiscreteGpu => "discrete",
                wgpu::DeviceType::IntegratedGpu => "integrated",
                wgpu::DeviceType::VirtualGpu => "virtual",
                wgpu::DeviceType::Cpu => "cpu",
                wgpu::DeviceType::Other => "other",
            }
            .to_string(),
            driver: i.driver.clone(),
            driver_info: i.driver_info.clone(),
        }
    }
}

/// The device limits rayo uses (read from the adapter, never assumed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuLimits {
    /// Largest range one storage binding may cover, in bytes.
    pub max_storage_binding_bytes: u64,
    /// Largest buffer, in bytes.
    pub max_buffer_bytes: u64,
    /// Workgroups per dispatch dimension.
    pub max_workgroups_per_dimension: u32,
    /// Workgroup memory, bytes.
    pub max_workgroup_storage_bytes: u32,
    pub max_storage_buffers_per_stage: u32,
}

pub(crate) struct Inner {
    /// Process-unique owner number (shared with batches), named by [`Error::ForeignBuffer`].
    pub id: u64,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: AdapterInfo,
    pub limits: GpuLimits,
    /// The smallest subgroup the device runs, where it has subgroups (the feature is on).
    pub subgroup_min_size: Option<u32>,
    pub pool: BufferPool,
    pub pipelines: PipelineCache,
    /// The reused readback buffer (taken out while in use; a concurrent reader makes its own).
    pub staging: Mutex<Option<wgpu::Buffer>>,
    /// Set by wgpu's device-lost callback.
    pub lost: Arc<Mutex<Option<String>>>,
    /// The first uncaptured wgpu error since the last check (validation, out of memory).
    pub error: Arc<Mutex<Option<String>>>,
}

/// A handle on a wgpu device. Cloning is cheap; [`GpuDevice::new`] returns the process's one
/// shared device, created on first use.
#[derive(Clone)]
pub struct GpuDevice {
    pub(crate) inner: Arc<Inner>,
    /// Largest storage binding this handle uses (≤ the device's): inputs above it are chunked.
    pub(crate) binding_bytes: u64,
}

impl std::fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuDevice").field("adapter", &self.inner.info.name).field("binding_bytes", &self.binding_bytes).finish()
    }
}

// The process's shared device. On wasm32 wgpu's objects are not Send (one thread anyway).
#[cfg(not(target_arch = "wasm32"))]
static SHARED: Mutex<Option<GpuDevice>> = Mutex::new(None);
#[cfg(target_arch = "wasm32")]
thread_local! {
    static SHARED: std::cell::RefCell<Option<GpuDevice>> = const { std::cell::RefCell::new(None) };
}

fn shared_get() -> Option<GpuDevice> {
    #[cfg(not(target_arch = "wasm32"))]
    return lock(&SHARED).clone();
    #[cfg(target_arch = "wasm32")]
    return SHARED.with(|s| s.borrow().clone());
}

/// Stores `d` unless another caller stored a live one first; returns the stored one.
fn shared_set(d: GpuDevice) -> GpuDevice {
    let keep = |slot: &mut Option<GpuDevice>| {
        if slot.as_ref().is_none_or(|s| s.is_lost()) {
            *slot = Some(d);
        }
        slot.clone().expect("slot was just filled")
    };
    #[cfg(not(target_arch = "wasm32"))]
    return keep(&mut lock(&SHARED));
    #[cfg(target_arch = "wasm32")]
    return SHARED.with(|s| keep(&mut s.borrow_mut()));
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn instance() -> wgpu::Instance {
    // WGPU_BACKEND (e.g. vulkan) chooses the backends probed, as wgpu documents. Without it, the
    // primary ones (Vulkan, Metal, DX12, WebGPU): wgpu's GL backend serialises every call on one
    // EGL context, and tests running on several threads deadlock on it.
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    if wgpu::Backends::from_env().is_none() {
        desc.backends = wgpu::Backends::PRIMARY;
    }
    wgpu::Instance::new(desc)
}

impl GpuDevice {
    /// The process's shared device (created on first call). Native only; see [`Self::new_async`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new() -> Result<GpuDevice> {
        pollster::block_on(Self::new_async())
    }

    /// The process's shared device, created on first call.
    pub async fn new_async() -> Result<GpuDevice> {
        // A lost shared device is replaced, not handed out again.
        if let Some(d) = shared_get().filter(|d| !d.is_lost()) {
            return Ok(d);
        }
        let d = Self::new_dedicated_async().await?;
        // Another thread may have won the race: keep the first.
        Ok(shared_set(d))
    }

    /// A device of its own (not the shared one): its own queue, pool and pipeline cache.
    pub async fn new_dedicated_async() -> Result<GpuDevice> {
        let instance = instance();
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::NoDevice { api: "wgpu", reason: e.to_string() })?;
        // Ask for everything the adapter offers (storage-binding size, workgroup memory, ...),
        // and subgroups and f16 in shaders where it has them (kernels check before they use them).
        let required_limits = adapter.limits();
        let required_features = adapter.features() & (wgpu::Features::SUBGROUP | wgpu::Features::SHADER_F16);
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("rayo"),
                required_features,
                required_limits,
                memory_hints: wgpu::MemoryHints::Performance,
                ..Default::default()
            })
            .await
            .map_err(|e| Error::NoDevice { api: "wgpu", reason: e.to_string() })?;
        let lost = Arc::new(Mutex::new(None));
        let error = Arc::new(Mutex::new(None));
        {
            let lost = lost.clone();
            device.set_device_lost_callback(move |reason, msg| {
                *lock(&lost) = Some(format!("device lost ({reason:?}): {msg}"));
            });
            let error = error.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                lock(&error).get_or_insert_with(|| e.to_string());
            }));
        }
        let l = device.limits();
        let limits = GpuLimits {
            max_storage_binding_bytes: l.max_storage_buffer_binding_size,
            max_buffer_bytes: l.max_buffer_size,
            max_workgroups_per_dimension: l.max_compute_workgroups_per_dimension,
            max_workgroup_storage_bytes: l.max_compute_workgroup_storage_size,
            max_storage_buffers_per_stage: l.max_storage_buffers_per_shader_stage,
        };
        // Bindings of the largest size a pooled buffer class can round to must stay in range.
        let binding_bytes = limits.max_storage_binding_bytes.min(limits.max_buffer_bytes) & !255;
        let wgpu_info = adapter.get_info();
        let inner = Inner {
            id: super::next_owner_id(),
            info: AdapterInfo::from_wgpu(&wgpu_info),
            subgroup_min_size: required_features.contains(wgpu::Features::SUBGROUP).then_some(wgpu_info.subgroup_min_size),
            limits,
            pool: BufferPool::default(),
            pipelines: PipelineCache::default(),
            staging: Mutex::new(None),
            lost,
            error,
            device,
            queue,
        };
        // On wasm32 wgpu's handles are not Send/Sync (one thread); the Arc is only shared there.
        #[cfg_attr(target_arch = "wasm32", allow(clippy::arc_with_non_send_sync))]
        let inner = Arc::new(inner);
        Ok(GpuDevice { inner, binding_bytes })
    }

    /// True when an adapter and device can be had (creates the shared device).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn is_available() -> bool {
        Self::new().is_ok()
    }

    /// True when an adapter and device can be had (creates the shared device).
    pub async fn is_available_async() -> bool {
        Self::new_async().await.is_ok()
    }

    /// Every adapter wgpu finds (all backends allowed by `WGPU_BACKEND`).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn list_adapters() -> Vec<AdapterInfo> {
        pollster::block_on(Self::list_adapters_async())
    }

    /// Every adapter wgpu finds.
    pub async fn list_adapters_async() -> Vec<AdapterInfo> {
        let inst = instance();
        let adapters = inst.enumerate_adapters(wgpu::Backends::all()).await;
        adapters.iter().map(|a| AdapterInfo::from_wgpu(&a.get_info())).collect()
    }

    /// This device's process-unique number (a [`GpuBuffer`](super::GpuBuffer) of another
    /// device is refused with [`Error::ForeignBuffer`] naming both).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// The adapter this device runs on.
    pub fn adapter_info(&self) -> &AdapterInfo {
        &self.inner.info
    }

    /// The device's limits.
    pub fn limits(&self) -> GpuLimits {
        self.inner.limits
    }

    /// Whether shaders may use `f16` (the adapter has `shader-f16`; the device asks for it).
    pub fn has_shader_f16(&self) -> bool {
        self.inner.device.features().contains(wgpu::Features::SHADER_F16)
    }

    /// The storage-binding size this handle works with: inputs larger than it are processed in
    /// chunks (element-wise ops, reductions) or refused with [`Error::BufferTooLarge`].
    pub fn max_binding_bytes(&self) -> u64 {
        self.binding_bytes
    }

    /// A handle on the same device that treats `bytes` (rounded down to 256, at least 256,
    /// at most the device's limit) as the storage-binding limit. For memory caps and tests.
    pub fn with_binding_limit(&self, bytes: u64) -> GpuDevice {
        let b = (bytes & !255).clamp(256, self.inner.limits.max_storage_binding_bytes.min(self.inner.limits.max_buffer_bytes) & !255);
        GpuDevice { inner: self.inner.clone(), binding_bytes: b }
    }

    /// Number of pipelines compiled so far (each kernel is compiled once).
    pub fn pipelines_compiled(&self) -> usize {
        self.inner.pipelines.len()
    }

    /// Bytes held in the buffer pool's free lists.
    pub fn pooled_bytes(&self) -> u64 {
        self.inner.pool.free_bytes()
    }

    /// Whether the device was lost (driver reset, [`Self::destroy`]): every op then returns
    /// [`Error::Device`]; [`Self::new`] replaces a lost shared device.
    pub fn is_lost(&self) -> bool {
        lock(&self.inner.lost).is_some()
    }

    /// Releases the GPU device now (for every handle on it). Later ops return [`Error::Device`].
    pub fn destroy(&self) {
        lock(&self.inner.lost).get_or_insert_with(|| "device destroyed by GpuDevice::destroy".into());
        self.inner.device.destroy();
    }

    /// An error if the device was lost or wgpu reported an error since the last check.
    pub(crate) fn check(&self) -> Result<()> {
        if let Some(m) = lock(&self.inner.lost).clone() {
            return Err(Error::Device { api: "wgpu", message: m });
        }
        if let Some(m) = lock(&self.inner.error).take() {
            return Err(Error::Device { api: "wgpu", message: m });
        }
        Ok(())
    }

    /// Waits until all submitted work has finished (native: blocks).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn synchronize(&self) -> Result<()> {
        pollster::block_on(self.synchronize_async())
    }

    /// Waits until all submitted work has finished.
    pub async fn synchronize_async(&self) -> Result<()> {
        let (tx, rx) = super::oneshot::channel();
        self.inner.queue.on_submitted_work_done(move || tx.send(()));
        #[cfg(not(target_arch = "wasm32"))]
        super::readback::wait_for(&self.inner.device, || rx.is_ready())?;
        rx.await.ok_or_else(|| Error::Device { api: "wgpu", message: "work-done callback dropped".into() })?;
        self.check()
    }
}
