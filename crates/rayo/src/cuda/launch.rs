//! A typed, checked launch of a `rayo-ptx` kernel, for code outside this crate (rayo-llm's CUDA
//! ops): no raw pointers and no `unsafe` at the call site.
//!
//! Each kernel's parameter list is a Rust type (an "args" struct of the buffers and scalars it
//! takes) implementing [`KernelArgs`], whose [`Kernel`](KernelArgs::Kernel) is the `rayo-ptx`
//! kernel type that emits the PTX. [`CudaDevice::launch`] then:
//!
//! 1. asks the args for the launch ([`KernelArgs::bind`]): the grid, and every parameter in the
//!    PTX's order, each buffer with the extent the kernel may touch (computed from the scalars
//!    and the grid, after the args' own checks of shapes and 32-bit indices);
//! 2. checks every buffer is this device's and holds its extent;
//! 3. loads the kernel (generated from the same kernel value) and checks that the parameters
//!    are, in number and type, exactly what its PTX declares;
//! 4. launches.
//!
//! What the compiler and these checks cannot see is what a kernel *does* with its parameters:
//! that it indexes no buffer past the extent `bind` states. That is the one promise an
//! implementation makes, which is why [`KernelArgs`] is an `unsafe trait`: its `unsafe impl`
//! (next to the args type, one per kernel) is where a reader checks the kernel's indexing
//! against `bind`'s extents. A call of [`CudaDevice::launch`] cannot break it: the buffers are
//! borrowed (an output `&mut`, so never aliased by another parameter), checked for device and
//! length, and the parameter list is checked against the PTX.

use super::buffer::{DeviceBuffer, DeviceBytes};
use super::device::CudaDevice;
use super::ffi::Arg;
use crate::error::{Error, Result};
use rayo_ptx::kernels::{Kernel, LaunchConfig};

/// One kernel parameter of a typed launch. A buffer comes with its extent: how many of its
/// values (f32 for [`DeviceBuffer`], bytes for [`DeviceBytes`]) the kernel may read or write,
/// from its start.
pub enum Param<'a> {
    /// An f32 buffer the kernel reads (a `.u64` pointer parameter).
    In(&'a DeviceBuffer, usize),
    /// An f32 buffer the kernel writes (and may read).
    Out(&'a mut DeviceBuffer, usize),
    /// Bytes the kernel reads (quantized weights, an f16 cache, u32 ids).
    BytesIn(&'a DeviceBytes, usize),
    /// Bytes the kernel writes (and may read).
    BytesOut(&'a mut DeviceBytes, usize),
    /// Bytes the kernel reads from a byte offset on: the kernel gets the address at that offset
    /// and may read the extent's bytes from there.
    BytesInAt(&'a DeviceBytes, usize, usize),
    /// Bytes the kernel writes (and may read) from a byte offset on, within the extent.
    BytesOutAt(&'a mut DeviceBytes, usize, usize),
    /// A `.u32` parameter.
    U32(u32),
    /// A `.f32` parameter.
    F32(f32),
}

/// A launch as [`KernelArgs::bind`] makes it: the grid and the parameters in the PTX's order.
pub struct Bound<'a> {
    pub config: LaunchConfig,
    pub params: Vec<Param<'a>>,
}

/// The parameter list of one `rayo-ptx` kernel ([`KernelArgs::Kernel`]) as a Rust type: what
/// [`CudaDevice::launch`] takes.
///
/// # Safety
/// For every kernel value `k` and every `self`, when `self.bind(&k)` returns `Ok(Some(b))`,
/// launching the PTX that `k` builds ([`Kernel::build`]) with `b.config` and `b.params` reads
/// and writes device memory only inside the buffers of `b.params`, and inside each no further
/// than its stated extent, whatever the buffers hold — or, where the kernel reads indices
/// from a buffer, whatever values the implementing crate's own types can leave there (e.g. ids
/// and positions checked when written, in a buffer no other code can reach). `Ok(None)`
/// means: nothing to launch (an empty input), after the same checks.
///
/// The number and the PTX types of the parameters need not be trusted: the launch checks them
/// against the PTX and refuses a mismatch. The code launched is the one cached under the
/// kernel's type and [`Kernel::name`], so the kernel type must keep that method's promise (one
/// name, one code), as `rayo-ptx`'s kernels do.
pub unsafe trait KernelArgs {
    /// The kernel whose parameters these are.
    type Kernel: Kernel + 'static;

    /// Checks the shapes and returns the launch, or `None` when there is nothing to do.
    fn bind(&mut self, kernel: &Self::Kernel) -> Result<Option<Bound<'_>>>;
}

impl CudaDevice {
    /// Launches `kernel` with `args` (see [`KernelArgs`]) on this device's stream: an error,
    /// with nothing launched, for a shape the args refuse, a buffer of another device or
    /// shorter than its extent, or a parameter list that is not the one the kernel's PTX
    /// declares.
    pub fn launch<A: KernelArgs>(&self, kernel: &A::Kernel, args: &mut A) -> Result<()> {
        const OP: &str = "cuda launch";
        let Some(Bound { config, params }) = args.bind(kernel)? else { return Ok(()) };
        for p in &params {
            let (owner, len, extent) = match p {
                Param::In(b, n) => (b.device_id(), b.len(), *n),
                Param::Out(b, n) => (b.device_id(), b.len(), *n),
                Param::BytesIn(b, n) => (b.device_id(), b.len(), *n),
                Param::BytesOut(b, n) => (b.device_id(), b.len(), *n),
                Param::BytesInAt(b, at, n) => {
                    (b.device_id(), b.len(), at.checked_add(*n).ok_or_else(|| Error::SizeOverflow { op: OP, dims: vec![*at, *n] })?)
                }
                Param::BytesOutAt(b, at, n) => {
                    (b.device_id(), b.len(), at.checked_add(*n).ok_or_else(|| Error::SizeOverflow { op: OP, dims: vec![*at, *n] })?)
                }
                Param::U32(_) | Param::F32(_) => continue,
            };
            self.check_owner(OP, owner)?;
            if len < extent {
                return Err(Error::LengthMismatch { op: OP, expected: extent, actual: len });
            }
        }
        let f = self.loaded(kernel)?;
        let mut raw: Vec<Arg> = params
            .into_iter()
            .map(|p| match p {
                Param::In(b, _) => Arg::In(&b.slice),
                Param::Out(b, _) => Arg::Out(&mut b.slice),
                Param::BytesIn(b, _) => Arg::BytesIn(&b.slice),
                Param::BytesOut(b, _) => Arg::BytesOut(&mut b.slice),
                Param::BytesInAt(b, at, _) => Arg::BytesInAt(&b.slice, at),
                Param::BytesOutAt(b, at, _) => Arg::BytesOutAt(&mut b.slice, at),
                Param::U32(v) => Arg::U32(v),
                Param::F32(v) => Arg::F32(v),
            })
            .collect();
        self.queue(&f, config, &mut raw)
    }
}
