//! The only door to the CUDA driver's unsafe surface: library presence, the driver version,
//! event tracking, and kernel launches. Everything else in `rayo::cuda` is safe code.

use crate::error::{Error, ErrorSource, Result};
use cudarc::driver::{sys, CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice, PushKernelArg};
use rayo_ptx::ptx::PtxType;
use std::sync::Arc;

/// A driver failure as [`Error::Driver`], the cudarc error as its `source()`.
pub(crate) fn drv(e: cudarc::driver::DriverError) -> Error {
    Error::Driver { api: "cuda", message: e.to_string(), source: ErrorSource::new(e) }
}

/// Whether `libcuda.so` (the driver library) can be loaded. Never panics.
pub(crate) fn driver_library_present() -> bool {
    // SAFETY: `is_culib_present` only tries to dlopen the driver library by its usual names and
    // drops the handle; it touches no CUDA state.
    unsafe { sys::is_culib_present() }
}

/// The driver's CUDA version as (major, minor), e.g. (13, 0).
pub(crate) fn driver_version() -> Result<(i32, i32)> {
    let mut v: i32 = 0;
    // SAFETY: called only after the driver library was found and `cuInit` succeeded (a context
    // exists); `v` is a valid out-pointer for the duration of the call.
    let r = unsafe { sys::cuDriverGetVersion(&mut v) };
    r.result().map_err(drv)?;
    Ok((v / 1000, (v % 1000) / 10))
}

/// Turns off cudarc's per-buffer event tracking.
pub(crate) fn single_stream_mode(ctx: &Arc<CudaContext>) {
    // SAFETY: rayo issues all work of a device on one stream, so stream order already gives
    // every read-after-write and write-after-read dependency that event tracking would add.
    unsafe { ctx.disable_event_tracking() };
}

/// A kernel parameter's slot: a scalar of a PTX type, or bytes passed by value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Scalar(PtxType),
    /// `.param .align 64 .b8 name[N]`
    Bytes(u32),
}

impl Slot {
    pub(crate) fn of(p: &rayo_ptx::ptx::Param) -> Slot {
        if p.bytes > 0 {
            Slot::Bytes(p.bytes)
        } else {
            Slot::Scalar(p.ty)
        }
    }
}

/// A TMA tensor map (`CUtensorMap`: 128 bytes, 64-byte aligned), passed to a kernel by value.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub(crate) struct TensorMap(sys::CUtensorMap);

// SAFETY: a tensor map is plain bytes that the driver copies into the kernel's parameter space;
// its layout (128 bytes, align 64) is the `.param .align 64 .b8 [128]` the kernels declare.
unsafe impl cudarc::driver::DeviceRepr for TensorMap {}

/// One kernel argument: a device buffer read or written (a `.u64` pointer parameter), a
/// scalar (`.u32` / `.f32`), or a tensor map by value.
pub(crate) enum Arg<'a> {
    In(&'a CudaSlice<f32>),
    Out(&'a mut CudaSlice<f32>),
    /// Bytes read (quantized weights, an f16 cache).
    BytesIn(&'a CudaSlice<u8>),
    /// Bytes written.
    BytesOut(&'a mut CudaSlice<u8>),
    /// Bytes read, from a byte offset into the buffer (the kernel gets that address).
    BytesInAt(&'a CudaSlice<u8>, usize),
    /// Bytes written, from a byte offset into the buffer.
    BytesOutAt(&'a mut CudaSlice<u8>, usize),
    U32(u32),
    F32(f32),
    Map(&'a TensorMap),
}

impl Arg<'_> {
    fn slot(&self) -> Slot {
        match self {
            Arg::In(_) | Arg::Out(_) | Arg::BytesIn(_) | Arg::BytesOut(_) | Arg::BytesInAt(..) | Arg::BytesOutAt(..) => Slot::Scalar(PtxType::U64),
            Arg::U32(_) => Slot::Scalar(PtxType::U32),
            Arg::F32(_) => Slot::Scalar(PtxType::F32),
            Arg::Map(_) => Slot::Bytes(std::mem::size_of::<TensorMap>() as u32),
        }
    }
}

/// A loaded kernel: the driver's function and the parameter list its PTX declares.
#[derive(Clone)]
pub(crate) struct Loaded {
    pub(crate) name: Arc<str>,
    pub(crate) func: CudaFunction,
    pub(crate) params: Arc<[Slot]>,
    /// The kernel as built (a persistent kernel calls it as a device function) and its PTX
    /// target.
    pub(crate) kernel: Arc<rayo_ptx::ptx::PtxKernel>,
    pub(crate) target: Arc<str>,
    /// Launched with programmatic stream serialization: the kernel waits for the previous
    /// grid's writes itself (`griddepcontrol.wait`), so it may start while that grid finishes.
    pub(crate) pdl: bool,
}

/// Launches `k` with `args`, after checking that their number and types are exactly the
/// kernel's declared parameters (a mismatch is an error, never a launch).
pub(crate) fn launch(stream: &Arc<CudaStream>, k: &Loaded, cfg: rayo_ptx::kernels::LaunchConfig, args: &mut [Arg]) -> Result<()> {
    const OP: &str = "cuda launch (kernel parameters)";
    if args.len() != k.params.len() {
        return Err(Error::LengthMismatch { op: OP, expected: k.params.len(), actual: args.len() });
    }
    if let Some(i) = args.iter().zip(k.params.iter()).position(|(a, &p)| a.slot() != p) {
        return Err(Error::Device {
            api: "cuda",
            message: format!("{}: parameter {i} is declared {:?}, the launch passes {:?}", k.name, k.params[i], args[i].slot()),
        });
    }
    // an address inside a buffer is passed as a raw value, which only that path does
    if k.pdl || args.iter().any(|a| matches!(a, Arg::BytesInAt(..) | Arg::BytesOutAt(..))) {
        return launch_ex(stream, k, cfg, args);
    }
    let cfg = LaunchConfig { grid_dim: cfg.grid, block_dim: cfg.block, shared_mem_bytes: cfg.shared_bytes };
    let mut b = stream.launch_builder(&k.func);
    for a in args.iter_mut() {
        match a {
            Arg::In(x) => b.arg(*x),
            Arg::Out(o) => b.arg(&mut **o),
            Arg::BytesIn(x) => b.arg(*x),
            Arg::BytesOut(o) => b.arg(&mut **o),
            Arg::BytesInAt(..) | Arg::BytesOutAt(..) => unreachable!("launched by launch_ex"),
            Arg::U32(v) => b.arg(&*v),
            Arg::F32(v) => b.arg(&*v),
            Arg::Map(m) => b.arg(*m),
        };
    }
    // SAFETY: the arguments match the kernel's declared parameter list in number and type
    // (checked above against the PTX it was loaded from); every caller checks each buffer's
    // length (and device) against the sizes the kernel indexes before it gets here: the ops of
    // this crate themselves, a typed launch (`CudaDevice::launch`) against the extents its
    // `KernelArgs` implementation vouches for.
    unsafe { b.launch(cfg) }.map_err(drv)?;
    Ok(())
}

/// [`launch`] (arguments already checked) through `cuLaunchKernelEx`: for a kernel that waits
/// for its dependencies before reading them ([`Loaded::pdl`]), with programmatic stream
/// serialization allowed: the grid may be scheduled before the previous one on the stream has
/// finished (Hopper's programmatic dependent launch; inside a graph capture, a programmatic
/// edge). Also the path of arguments that are addresses inside a buffer.
fn launch_ex(stream: &Arc<CudaStream>, k: &Loaded, cfg: rayo_ptx::kernels::LaunchConfig, args: &mut [Arg]) -> Result<()> {
    stream.context().bind_to_thread().map_err(drv)?;
    let (mut values, maps, _keep) = arg_values(stream, args);
    let mut params: Vec<*mut std::ffi::c_void> = values.iter_mut().map(|v| (v as *mut u64).cast()).collect();
    for (i, p) in maps {
        params[i] = p;
    }
    let attr = k.pdl.then_some(sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        pad: [0; 4],
        value: sys::CUlaunchAttributeValue { programmaticStreamSerializationAllowed: 1 },
    });
    // SAFETY: the arguments match the kernel's declared parameters in number and type (checked
    // by `launch`), each `params[i]` points to a live value of at least the parameter's size
    // (`values`, or a tensor map borrowed by `args`: alive until after the call), and the
    // callers checked every buffer's length (past an offset, the extent from there) against
    // what the kernel indexes. With the attribute on (`Loaded::pdl`), the kernel waits for the
    // previous grid before reading what it wrote.
    unsafe { launch_kernel_ex(stream, &k.func, cfg, &mut params, attr) }
}

/// `cuLaunchKernelEx` of `func` on `stream` with `params` and at most one launch attribute.
///
/// # Safety
/// `params` must point, one for each parameter `func` declares, to live values of at least the
/// parameter's size, that the kernel may use as it does (the caller's checks).
unsafe fn launch_kernel_ex(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    cfg: rayo_ptx::kernels::LaunchConfig,
    params: &mut [*mut std::ffi::c_void],
    attr: Option<sys::CUlaunchAttribute>,
) -> Result<()> {
    // (with no attribute the slot is unread: `numAttrs` is 0)
    let unread = sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
        pad: [0; 4],
        value: sys::CUlaunchAttributeValue { cooperative: 0 },
    };
    let mut slot = attr.unwrap_or(unread);
    let config = sys::CUlaunchConfig {
        gridDimX: cfg.grid.0,
        gridDimY: cfg.grid.1,
        gridDimZ: cfg.grid.2,
        blockDimX: cfg.block.0,
        blockDimY: cfg.block.1,
        blockDimZ: cfg.block.2,
        sharedMemBytes: cfg.shared_bytes,
        hStream: stream.cu_stream(),
        attrs: &mut slot,
        numAttrs: u32::from(attr.is_some()),
    };
    // SAFETY: `config` and `slot` outlive the call; `params` is the caller's promise.
    unsafe { sys::cuLaunchKernelEx(&config, func.cu_function(), params.as_mut_ptr(), std::ptr::null_mut()) }.result().map_err(drv)
}

/// Each argument's value as a kernel parameter slot holds it (pointers as u64, u32/f32 in the
/// low bytes: the driver reads as many bytes as the kernel declares; a tensor map's slot 0),
/// the tensor maps as (argument index, address), and cudarc's records of the buffers' use,
/// to be kept until the launch is queued.
pub(crate) fn arg_values<'a>(
    stream: &'a Arc<CudaStream>,
    args: &'a mut [Arg],
) -> (Vec<u64>, Vec<(usize, *mut std::ffi::c_void)>, Vec<cudarc::driver::SyncOnDrop<'a>>) {
    use cudarc::driver::{DevicePtr, DevicePtrMut};
    let mut _keep = Vec::new();
    let mut values: Vec<u64> = Vec::with_capacity(args.len());
    // tensor maps are passed from where they are: (argument index, address)
    let mut maps: Vec<(usize, *mut std::ffi::c_void)> = Vec::new();
    for (i, a) in args.iter_mut().enumerate() {
        values.push(match a {
            Arg::In(x) => {
                let (p, g) = x.device_ptr(stream);
                _keep.push(g);
                p
            }
            Arg::Out(o) => {
                let (p, g) = o.device_ptr_mut(stream);
                _keep.push(g);
                p
            }
            Arg::BytesIn(x) => {
                let (p, g) = x.device_ptr(stream);
                _keep.push(g);
                p
            }
            Arg::BytesOut(o) => {
                let (p, g) = o.device_ptr_mut(stream);
                _keep.push(g);
                p
            }
            // (the callers checked the offset and the extent past it against the length)
            Arg::BytesInAt(x, off) => {
                let (p, g) = x.device_ptr(stream);
                _keep.push(g);
                p + *off as u64
            }
            Arg::BytesOutAt(o, off) => {
                let (p, g) = o.device_ptr_mut(stream);
                _keep.push(g);
                p + *off as u64
            }
            Arg::U32(v) => *v as u64,
            Arg::F32(v) => v.to_bits() as u64,
            Arg::Map(m) => {
                maps.push((i, (*m as *const TensorMap).cast_mut().cast()));
                0
            }
        });
    }
    (values, maps, _keep)
}

/// Launches `func` with parameter values as [`arg_values`] makes them (no tensor map), as a
/// cooperative grid when `cooperative` (every block resident at once, or the driver refuses).
///
/// # Safety
/// `values` must be, in number and order, the parameters `func` declares, each pointer one
/// the kernel may use for as long as the launch runs (a recorded launch: memory that outlives
/// every replay), within the extents the kernel indexes.
pub(crate) unsafe fn launch_values(
    stream: &Arc<CudaStream>,
    func: &CudaFunction,
    cfg: rayo_ptx::kernels::LaunchConfig,
    values: &mut [u64],
    cooperative: bool,
) -> Result<()> {
    stream.context().bind_to_thread().map_err(drv)?;
    let mut params: Vec<*mut std::ffi::c_void> = values.iter_mut().map(|v| (v as *mut u64).cast()).collect();
    let attr = cooperative.then_some(sys::CUlaunchAttribute {
        id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
        pad: [0; 4],
        value: sys::CUlaunchAttributeValue { cooperative: 1 },
    });
    // SAFETY: each `params[i]` points to a live u64 (`values`, alive until after the call), of
    // at least the parameter's size; the values are the kernel's parameters (the caller's
    // promise).
    unsafe { launch_kernel_ex(stream, func, cfg, &mut params, attr) }
}

/// A page-locked host allocation of `len` floats, zero-filled before anyone can read it.
pub(crate) fn alloc_pinned_zeroed(ctx: &Arc<CudaContext>, len: usize) -> Result<PinnedHostSlice<f32>> {
    // SAFETY: flags 0 = plain page-locked memory (not write-combined, so host reads stay fast);
    // the memory is uninitialised only until the write_bytes below, and no reference to it exists
    // before then.
    let mut host = unsafe { ctx.alloc_pinned_with_flags::<f32>(len, 0) }.map_err(drv)?;
    let p = host.as_mut_ptr().map_err(drv)?;
    // SAFETY: `p` points to `len` f32s just allocated above (cudarc checked the size and
    // alignment); all-zero bytes are a valid f32.
    unsafe { std::ptr::write_bytes(p, 0, len) };
    Ok(host)
}

/// The device address of `slice` (for a tensor map, which holds it).
pub(crate) fn device_address<T>(stream: &Arc<CudaStream>, slice: &CudaSlice<T>) -> u64 {
    use cudarc::driver::DevicePtr;
    let (p, _guard) = slice.device_ptr(stream);
    p
}

/// The 128-byte tensor map (TMA, sm_90) of a row-major `rows × cols` matrix of `ty`'s values
/// (bf16, f16, or f32 for TF32) at device address `ptr`: tiles of `box_rows` rows × 128 bytes
/// (the 128-byte swizzle's span), zeros past the matrix's edges. A row's bytes must be a
/// multiple of 16, `box_rows` at most 256 (the caller checks; the driver refuses otherwise).
pub(crate) fn tensor_map_2d(ptr: u64, rows: u64, cols: u64, box_rows: u32, ty: rayo_ptx::ptx::WgmmaType) -> Result<TensorMap> {
    tensor_map(ptr, &[cols, rows], box_rows, ty)
}

/// [`tensor_map_2d`] for `planes` such matrices one after another (a 3-D map, tiles of one
/// plane each): a tile never reads past its plane's rows into the next.
pub(crate) fn tensor_map_3d(ptr: u64, (planes, rows, cols): (u64, u64, u64), box_rows: u32, ty: rayo_ptx::ptx::WgmmaType) -> Result<TensorMap> {
    tensor_map(ptr, &[cols, rows, planes], box_rows, ty)
}

/// The tensor map of `dims` (innermost first, rank 2 or 3), densely packed.
fn tensor_map(ptr: u64, dims: &[u64], box_rows: u32, ty: rayo_ptx::ptx::WgmmaType) -> Result<TensorMap> {
    use sys::{CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion, CUtensorMapSwizzle};
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    use rayo_ptx::ptx::WgmmaType;
    let bytes = ty.bytes();
    let ty = match ty {
        WgmmaType::BF16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        WgmmaType::F16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        WgmmaType::TF32 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    };
    let rank = dims.len();
    assert!(matches!(rank, 2 | 3), "tensor maps here are 2-D or 3-D");
    // byte strides of dimensions 1.. (dimension 0 is contiguous)
    let strides: [u64; 2] = [dims[0] * bytes as u64, dims[0] * dims[1] * bytes as u64];
    let boxes: [u32; 3] = [128 / bytes, box_rows, 1];
    let steps: [u32; 3] = [1, 1, 1];
    // SAFETY: `map` is a valid out-pointer for the 128-byte map; the dimension, stride, box and
    // element-stride arrays hold at least rank entries (strides rank − 1) and outlive the call;
    // the driver only encodes `ptr` into the map, it does not dereference it.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            ty,
            rank as u32,
            ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            steps.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    r.result().map_err(drv)?;
    Ok(TensorMap(map))
}

/// How many clusters of `k` (a kernel with compile-time cluster dimensions) can run at once
/// with `cfg`'s blocks and shared memory: the persistent grid's size.
pub(crate) fn max_active_clusters(stream: &Arc<CudaStream>, k: &Loaded, cfg: rayo_ptx::kernels::LaunchConfig) -> Result<u32> {
    let cfg = LaunchConfig { grid_dim: cfg.grid, block_dim: cfg.block, shared_mem_bytes: cfg.shared_bytes };
    k.func.occupancy_max_active_clusters(cfg, stream).map_err(drv)
}

/// Lets `f` use `bytes` of dynamic shared memory (past the default 48 KB).
pub(crate) fn allow_dynamic_shared(f: &CudaFunction, bytes: u32) -> Result<()> {
    f.set_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes as i32).map_err(drv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::CudaDevice;
    use rayo_ptx::kernels::GemmKernel;

    /// A launch whose arguments do not match the kernel's declared parameters is an error
    /// before anything reaches the driver.
    #[test]
    fn launch_checks_the_parameter_list() {
        let dev = match CudaDevice::global() {
            Ok(d) => d,
            Err(_) => {
                println!("SKIP cuda: launch_checks_the_parameter_list (no device)");
                return;
            }
        };
        let g = GemmKernel::naive(4, 4, 4);
        let k = dev.loaded(&g).unwrap();
        let (p, s) = (Slot::Scalar(PtxType::U64), Slot::Scalar(PtxType::U32));
        assert_eq!(&*k.params, &[p, p, p, s, s, s]);
        let (a, b) = (dev.upload(&[1.0; 16]).unwrap(), dev.upload(&[1.0; 16]).unwrap());
        let mut c = dev.zeros(16).unwrap();
        let cfg = g.launch();
        // one scalar missing
        let r = launch(&dev.stream, &k, cfg, &mut [Arg::In(&a.slice), Arg::In(&b.slice), Arg::Out(&mut c.slice), Arg::U32(4), Arg::U32(4)]);
        assert_eq!(r, Err(Error::LengthMismatch { op: "cuda launch (kernel parameters)", expected: 6, actual: 5 }));
        // an f32 where a u32 is declared
        let r = launch(
            &dev.stream,
            &k,
            cfg,
            &mut [Arg::In(&a.slice), Arg::In(&b.slice), Arg::Out(&mut c.slice), Arg::U32(4), Arg::F32(4.0), Arg::U32(4)],
        );
        assert!(matches!(r, Err(Error::Device { .. })), "{r:?}");
        launch(&dev.stream, &k, cfg, &mut [Arg::In(&a.slice), Arg::In(&b.slice), Arg::Out(&mut c.slice), Arg::U32(4), Arg::U32(4), Arg::U32(4)])
            .unwrap();
        assert_eq!(dev.download(&c).unwrap(), vec![4.0; 16]);
    }
}
