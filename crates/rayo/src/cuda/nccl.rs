//! NCCL, loaded at run time: no toolkit or NCCL at build time. The library is found as
//! `RAYO_NCCL_LIBRARY` names it, else as `libnccl.so.2` (the name NCCL's packages and PyTorch's
//! wheels give it) or `libnccl.so` on the loader's path; a missing library is
//! [`Error::NoDevice`] naming what was tried. A [`Communicator`] is one rank of a world on one
//! [`CudaDevice`]: its all-reduce and all-gather run on that device's stream, on its buffers.
//!
//! This file is the only door to NCCL's C surface; its types are safe to use.

use super::buffer::DeviceBuffer;
use super::device::CudaDevice;
use crate::error::{Error, Result};
use cudarc::driver::{DevicePtr, DevicePtrMut};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

/// `ncclUniqueId`: what every rank of a world passes to [`Communicator::new`] (rank 0 makes it
/// with [`unique_id`] and sends it to the others: a rendezvous's work).
#[derive(Clone, Copy)]
pub struct NcclId(pub [u8; 128]);

impl std::fmt::Debug for NcclId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NcclId(..)")
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
struct RawId {
    internal: [c_char; 128],
}

type Comm = *mut c_void;
// ncclResult_t, ncclDataType_t, ncclRedOp_t are C enums: ints.
type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;
type GetUniqueId = unsafe extern "C" fn(*mut RawId) -> c_int;
type CommInitRank = unsafe extern "C" fn(*mut Comm, c_int, RawId, c_int) -> c_int;
type AllReduce = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, *mut c_void) -> c_int;
type AllGather = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, Comm, *mut c_void) -> c_int;
type CommDestroy = unsafe extern "C" fn(Comm) -> c_int;
type GetErrorString = unsafe extern "C" fn(c_int) -> *const c_char;

const NCCL_FLOAT32: c_int = 7;
const NCCL_SUM: c_int = 0;

/// The library and the entry points rayo calls.
struct Nccl {
    _lib: libloading::Library,
    path: String,
    get_version: GetVersion,
    get_unique_id: GetUniqueId,
    comm_init_rank: CommInitRank,
    all_reduce: AllReduce,
    all_gather: AllGather,
    comm_destroy: CommDestroy,
    get_error_string: GetErrorString,
}

/// The names tried, in order.
fn candidates() -> Vec<String> {
    match &crate::config::Config::get().nccl_library {
        Some(p) => vec![p.clone()],
        None => vec!["libnccl.so.2".into(), "libnccl.so".into()],
    }
}

fn load() -> std::result::Result<Nccl, String> {
    let mut tried = Vec::new();
    for name in candidates() {
        // SAFETY: loading NCCL runs its initializers, which only set up NCCL's own state; the
        // library stays loaded for the process's life (it is kept in a static).
        match unsafe { libloading::Library::new(&name) } {
            Ok(lib) => {
                // SAFETY: each symbol is NCCL's public C function of the signature its type
                // gives (nccl.h, stable since NCCL 2.0); the pointers live as long as `lib`,
                // which the returned struct owns.
                let got = unsafe {
                    (|| -> std::result::Result<Nccl, libloading::Error> {
                        Ok(Nccl {
                            get_version: *lib.get(b"ncclGetVersion\0")?,
                            get_unique_id: *lib.get(b"ncclGetUniqueId\0")?,
                            comm_init_rank: *lib.get(b"ncclCommInitRank\0")?,
                            all_reduce: *lib.get(b"ncclAllReduce\0")?,
                            all_gather: *lib.get(b"ncclAllGather\0")?,
                            comm_destroy: *lib.get(b"ncclCommDestroy\0")?,
                            get_error_string: *lib.get(b"ncclGetErrorString\0")?,
                            path: name.clone(),
                            _lib: lib,
                        })
                    })()
                };
                return got.map_err(|e| format!("{name} is not NCCL's library: {e}"));
            }
            Err(e) => tried.push(format!("{name} ({e})")),
        }
    }
    Err(format!(
        "NCCL's library was not found (tried {}): install NCCL, or point RAYO_NCCL_LIBRARY at libnccl.so.2 (PyTorch's wheel ships one under nvidia/nccl/lib)",
        tried.join(", ")
    ))
}

fn nccl() -> Result<&'static Nccl> {
    static LIB: OnceLock<std::result::Result<Nccl, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(|reason| Error::NoDevice { api: "nccl", reason: reason.clone() })
}

impl Nccl {
    /// `r` as an error of `call`, with NCCL's own words for it.
    fn check(&self, call: &str, r: c_int) -> Result<()> {
        if r == 0 {
            return Ok(());
        }
        // SAFETY: ncclGetErrorString takes any result code and returns a static C string.
        let text = unsafe { (self.get_error_string)(r) };
        let text = if text.is_null() {
            "no description".into()
        } else {
            // SAFETY: non-null, NUL-terminated, static (NCCL's string table).
            unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
        };
        Err(Error::Device { api: "nccl", message: format!("{call} returned {r}: {text}") })
    }
}

/// Whether NCCL's library can be loaded, and from where (or why not).
pub fn library() -> std::result::Result<String, String> {
    nccl().map(|n| n.path.clone()).map_err(|e| e.to_string())
}

/// NCCL's version, e.g. 22703 for 2.27.3.
pub fn version() -> Result<i32> {
    let n = nccl()?;
    let mut v: c_int = 0;
    // SAFETY: `v` is a valid out-pointer for the call.
    n.check("ncclGetVersion", unsafe { (n.get_version)(&mut v) })?;
    Ok(v)
}

/// A new world's id (rank 0 makes it; every rank passes it to [`Communicator::new`]).
pub fn unique_id() -> Result<NcclId> {
    let n = nccl()?;
    let mut id = RawId { internal: [0; 128] };
    // SAFETY: `id` is a valid out-pointer to an ncclUniqueId (128 bytes).
    n.check("ncclGetUniqueId", unsafe { (n.get_unique_id)(&mut id) })?;
    Ok(NcclId(id.internal.map(|c| c as u8)))
}

/// One rank of a world of NCCL ranks, on one device.
pub struct Communicator {
    comm: Comm,
    nccl: &'static Nccl,
    device: u64,
    rank: usize,
    world: usize,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time; `&mut self`
// on every collective gives that (the type is Send, not Sync).
unsafe impl Send for Communicator {}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator").field("rank", &self.rank).field("world", &self.world).field("device", &self.device).finish()
    }
}

impl Communicator {
    /// Rank `rank` of a world of `world` on `dev`: blocks until every rank of the world has
    /// called it with the same `id` (each on its own GPU: NCCL refuses two ranks on one).
    pub fn new(dev: &CudaDevice, id: &NcclId, rank: usize, world: usize) -> Result<Communicator> {
        let n = nccl()?;
        // NVLink multicast (NCCL's NVLS) can take a shared host's GPUs out of service: rayo
        // never lets NCCL use it (the `rayo` binary sets this itself at start)
        if std::env::var("NCCL_NVLS_ENABLE").as_deref() != Ok("0") {
            return Err(Error::Device {
                api: "nccl",
                message: "NCCL_NVLS_ENABLE is not 0: set NCCL_NVLS_ENABLE=0 (rayo never uses NVLink multicast) before the first communicator".into(),
            });
        }
        if world == 0 || rank >= world || world > c_int::MAX as usize {
            return Err(Error::Device { api: "nccl", message: format!("rank {rank} of a world of {world}") });
        }
        // NCCL takes the thread's current context as the rank's device
        dev.ctx.bind_to_thread().map_err(super::ffi::drv)?;
        let raw = RawId { internal: id.0.map(|b| b as c_char) };
        let mut comm: Comm = std::ptr::null_mut();
        // SAFETY: `comm` is a valid out-pointer; the id is passed by value as nccl.h declares.
        n.check("ncclCommInitRank", unsafe { (n.comm_init_rank)(&mut comm, world as c_int, raw, rank as c_int) })?;
        Ok(Communicator { comm, nccl: n, device: dev.id(), rank, world })
    }

    fn check_device(&self, dev: &CudaDevice, op: &'static str) -> Result<()> {
        if dev.id() != self.device {
            return Err(Error::ForeignBuffer { op, owner: self.device, user: dev.id() });
        }
        // (while the stream records, a collective is recorded with the kernels: NCCL's calls
        // can be captured, and a replay runs them; the communicator must outlive the replays,
        // as `Replay::replay`'s contract says)
        Ok(())
    }

    /// The first `len` values of `buf` summed over every rank, into every rank's `buf`
    /// (queued on `dev`'s stream, as its kernels are).
    pub fn all_reduce_sum(&mut self, dev: &CudaDevice, buf: &mut DeviceBuffer, len: usize) -> Result<()> {
        const OP: &str = "nccl all_reduce_sum";
        self.check_device(dev, OP)?;
        dev.owns(OP, &[buf])?;
        if len > buf.len() {
            return Err(Error::LengthMismatch { op: OP, expected: buf.len(), actual: len });
        }
        dev.queued_other("a collective");
        let stream = dev.stream.cu_stream() as *mut c_void;
        let (ptr, _sync) = buf.slice.device_ptr_mut(&dev.stream);
        // SAFETY: `ptr` holds at least `len` f32 values on this communicator's device (checked
        // above); in place (send = receive) is allowed; the call only queues work on `stream`,
        // which orders it after and before the device's other work on these buffers.
        let r = unsafe { (self.nccl.all_reduce)(ptr as *const c_void, ptr as *mut c_void, len, NCCL_FLOAT32, NCCL_SUM, self.comm, stream) };
        self.nccl.check("ncclAllReduce", r)
    }

    /// Every rank's first `len` values of `part`, in rank order, into the first `world · len`
    /// values of `out`.
    pub fn all_gather(&mut self, dev: &CudaDevice, part: &DeviceBuffer, len: usize, out: &mut DeviceBuffer) -> Result<()> {
        const OP: &str = "nccl all_gather";
        self.check_device(dev, OP)?;
        dev.owns(OP, &[part, out])?;
        let total = len.checked_mul(self.world).ok_or(Error::SizeOverflow { op: OP, dims: vec![len, self.world] })?;
        if len > part.len() || total > out.len() {
            return Err(Error::LengthMismatch { op: OP, expected: out.len(), actual: total });
        }
        dev.queued_other("a collective");
        let stream = dev.stream.cu_stream() as *mut c_void;
        let (src, _s) = part.slice.device_ptr(&dev.stream);
        let (dst, _d) = out.slice.device_ptr_mut(&dev.stream);
        // SAFETY: `src` holds `len` values and `dst` `world · len` (checked above), both on this
        // communicator's device and distinct buffers (one is borrowed shared, one mutably); the
        // call only queues work on `stream`.
        let r = unsafe { (self.nccl.all_gather)(src as *const c_void, dst as *mut c_void, len, NCCL_FLOAT32, self.comm, stream) };
        self.nccl.check("ncclAllGather", r)
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn world(&self) -> usize {
        self.world
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        // SAFETY: `comm` came from ncclCommInitRank and is destroyed once, here.
        let r = unsafe { (self.nccl.comm_destroy)(self.comm) };
        if let Err(e) = self.nccl.check("ncclCommDestroy", r) {
            log::warn!("{e}");
        }
    }
}
