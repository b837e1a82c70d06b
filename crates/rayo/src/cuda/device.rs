//! `CudaDevice`: a context on one GPU, its stream, what it is, and a cache of loaded kernels.

use super::ffi::{self, drv, Loaded};
use crate::error::{Error, Result};
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaFunction, CudaStream};
use rayo_ptx::kernels::Kernel;
use std::any::TypeId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Ids of `CudaDevice` values (each has its own stream), starting at 1.
static NEXT_DEVICE: AtomicU64 = AtomicU64::new(1);

/// What the device is.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub multiprocessors: u32,
    pub total_memory: u64,
    pub l2_bytes: u64,
    /// The CUDA version the driver supports, e.g. (13, 0).
    pub driver_version: (i32, i32),
}

impl std::fmt::Display for DeviceInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (sm_{}{}, {} SMs, {:.1} GiB, L2 {} MiB, driver CUDA {}.{})",
            self.name,
            self.compute_capability.0,
            self.compute_capability.1,
            self.multiprocessors,
            self.total_memory as f64 / (1u64 << 30) as f64,
            self.l2_bytes >> 20,
            self.driver_version.0,
            self.driver_version.1
        )
    }
}

/// One GPU: a context, one stream all work goes through, and loaded kernels by kernel type and
/// name. Every buffer it makes remembers the device's [`id`](CudaDevice::id); giving one to
/// another `CudaDevice` (another stream: its work would race this one's) is
/// [`Error::ForeignBuffer`].
pub struct CudaDevice {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    id: u64,
    info: DeviceInfo,
    sm: u32,
    /// Kernels that wait for their programmatic dependencies are launched so that they may
    /// overlap the previous kernel (Hopper; `RAYO_CUDA_PDL=0` turns it off).
    pdl: bool,
    cache: Mutex<HashMap<(TypeId, String), Loaded>>,
    /// Whether the stream is recording a graph: allocations are refused meanwhile (a stream-
    /// ordered allocation inside a capture hands out an address that is not backed until the
    /// graph is launched).
    pub(crate) capturing: AtomicBool,
    /// While the stream records: the launches queued, or why the recording cannot be one
    /// persistent kernel (work other than kernels). See [`super::persistent`].
    pub(crate) observed: Mutex<Option<std::result::Result<Vec<super::persistent::Observed>, String>>>,
}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice").field("id", &self.id).field("info", &self.info).field("ptx_target", &self.sm).finish()
    }
}

/// Whether a CUDA device can be opened (driver library present and at least one device).
pub fn is_available() -> bool {
    CudaDevice::global().is_ok()
}

/// CUDA devices present: 0 without a driver library or when the driver fails.
pub fn device_count() -> usize {
    if !ffi::driver_library_present() {
        return 0;
    }
    CudaContext::device_count().map_or(0, |n| n.max(0) as usize)
}

impl CudaDevice {
    /// Opens device 0. No driver library, no device, or a failing driver: an error, never a panic.
    pub fn new() -> Result<CudaDevice> {
        Self::with_ordinal(0)
    }

    pub fn with_ordinal(ordinal: usize) -> Result<CudaDevice> {
        if !ffi::driver_library_present() {
            return Err(Error::NoDevice { api: "cuda", reason: "the CUDA driver library (libcuda.so) is not installed".into() });
        }
        let count = CudaContext::device_count().map_err(|e| Error::NoDevice { api: "cuda", reason: format!("driver initialisation failed: {e}") })?;
        if ordinal >= count.max(0) as usize {
            return Err(Error::NoDevice { api: "cuda", reason: format!("device {ordinal} requested, {count} present") });
        }
        let ctx = CudaContext::new(ordinal).map_err(drv)?;
        ffi::single_stream_mode(&ctx);
        // A stream of our own: the legacy default stream cannot be captured into a graph.
        let stream = ctx.new_stream().map_err(drv)?;
        let attr = |a| ctx.attribute(a).map_err(drv);
        let cc = ctx.compute_capability().map_err(drv)?;
        let info = DeviceInfo {
            ordinal,
            name: ctx.name().map_err(drv)?,
            compute_capability: cc,
            multiprocessors: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            total_memory: ctx.total_mem().map_err(drv)? as u64,
            l2_bytes: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u64,
            driver_version: ffi::driver_version()?,
        };
        // PTX for sm_90 runs (JIT-compiled) on every later chip; earlier chips get their own.
        let sm = ((cc.0 * 10 + cc.1) as u32).min(90);
        let id = NEXT_DEVICE.fetch_add(1, Ordering::Relaxed);
        let pdl = sm >= 90 && crate::Config::get().cuda_pdl;
        Ok(CudaDevice {
            ctx,
            stream,
            id,
            info,
            sm,
            pdl,
            cache: Mutex::new(HashMap::new()),
            capturing: AtomicBool::new(false),
            observed: Mutex::new(None),
        })
    }

    /// The process-wide device 0, opened once (lazily). The error is remembered too.
    pub fn global() -> Result<&'static CudaDevice> {
        static DEV: OnceLock<Result<CudaDevice>> = OnceLock::new();
        DEV.get_or_init(CudaDevice::new).as_ref().map_err(Clone::clone)
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// This value's id, unique in the process (two `CudaDevice::new()` on one GPU differ: each
    /// has its own stream). Buffers carry it; [`Error::ForeignBuffer`] reports both.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// An error while the stream records a graph (see [`CudaDevice::begin_capture`]): `op`
    /// would allocate, which a recording cannot hold.
    pub(crate) fn check_not_capturing(&self, op: &'static str) -> Result<()> {
        if self.capturing.load(Ordering::Acquire) {
            return Err(Error::Device { api: "cuda", message: format!("{op}: no allocation while the device's stream records a graph") });
        }
        Ok(())
    }

    /// An error unless `owner` (a buffer's device id) is this device.
    pub(crate) fn check_owner(&self, op: &'static str, owner: u64) -> Result<()> {
        if owner == self.id {
            Ok(())
        } else {
            Err(Error::ForeignBuffer { op, owner, user: self.id })
        }
    }

    /// The `sm_NN` the kernels are generated for.
    pub fn ptx_target(&self) -> u32 {
        self.sm
    }

    /// Waits for all queued work.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(drv)
    }

    /// The loaded function for `kernel`: generated, checked and loaded on first use, then cached
    /// by the kernel's type and name (a kernel of another type with the same name is another
    /// entry: it cannot replace a built-in one).
    pub fn function<K: Kernel + 'static>(&self, kernel: &K) -> Result<CudaFunction> {
        Ok(self.loaded(kernel)?.func)
    }

    /// The loaded kernel and the parameter list its PTX declares (what a launch is checked
    /// against).
    pub(crate) fn loaded<K: Kernel + 'static>(&self, kernel: &K) -> Result<Loaded> {
        let name = kernel.name();
        let key = (TypeId::of::<K>(), name);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = cache.get(&key) {
            return Ok(f.clone());
        }
        let name = &key.1;
        let module = kernel.module(self.sm);
        let ptx = module.emit_checked().map_err(|e| Error::Device { api: "cuda", message: format!("PTX checker rejected {name}: {e}") })?;
        let entry = module
            .kernels()
            .iter()
            .find(|k| k.name() == name.as_str())
            .ok_or_else(|| Error::Device { api: "cuda", message: format!("the module of kernel {name} has no entry of that name") })?;
        let params: Arc<[super::ffi::Slot]> = entry.params().iter().map(super::ffi::Slot::of).collect();
        let m = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .map_err(|e| Error::Device { api: "cuda", message: format!("loading {name}: {e}") })?;
        let func = m.load_function(name).map_err(drv)?;
        let pdl = self.pdl && entry.waits_for_dependencies();
        let loaded =
            Loaded { name: Arc::from(name.as_str()), func, params, pdl, kernel: Arc::new(entry.clone()), target: Arc::from(module.get_target()) };
        cache.insert(key, loaded.clone());
        Ok(loaded)
    }

    /// Number of kernels loaded so far.
    pub fn cached_kernels(&self) -> usize {
        self.cache.lock().map(|c| c.len()).unwrap_or(0)
    }

    /// Runs `f` `reps` times between two device events; the mean device time of one run, in ms.
    pub fn time_ms(&self, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
        let flags = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let start: CudaEvent = self.stream.record_event(flags).map_err(drv)?;
        for _ in 0..reps.max(1) {
            f()?;
        }
        let end: CudaEvent = self.stream.record_event(flags).map_err(drv)?;
        end.synchronize().map_err(drv)?;
        let ms = start.elapsed_ms(&end).map_err(drv)?;
        Ok(ms as f64 / reps.max(1) as f64)
    }
}
