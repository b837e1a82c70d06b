//! The CUDA backend's memory: every activation buffer and vector lives in the backend's arena,
//! and callers hold handles ([`CudaBuf`]). A recorded step (a CUDA graph) holds device
//! addresses, not buffers; because nothing a handle names is freed while the backend lives,
//! and a handle of another backend is refused, no order of safe calls can replay a recording
//! over freed or foreign memory.

use crate::{Error, Result};
use rayo::cuda::DeviceBuffer;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_BACKEND: AtomicU64 = AtomicU64::new(1);

/// A process-unique id for a new backend (its handles carry it).
pub(super) fn next_backend_id() -> u64 {
    NEXT_BACKEND.fetch_add(1, Ordering::Relaxed)
}

/// An f32 buffer the CUDA backend owns (an activation, a norm weight, a bias): a handle, usable
/// only with the backend that made it. Not `Clone`: a `&mut CudaBuf` is the one writer.
#[derive(Debug)]
pub struct CudaBuf {
    owner: u64,
    slot: usize,
    len: usize,
}

impl CudaBuf {
    /// Values the buffer holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The buffers behind the handles. Slots are never removed: a buffer lives as long as the
/// backend (sessions make theirs once).
pub(super) struct Arena {
    owner: u64,
    slots: Vec<Option<DeviceBuffer>>,
}

const OP: &str = "cuda backend buffer";

impl Arena {
    pub(super) fn new(owner: u64) -> Arena {
        Arena { owner, slots: Vec::new() }
    }

    /// Keeps `b` and returns its handle.
    pub(super) fn add(&mut self, b: DeviceBuffer) -> CudaBuf {
        let len = b.len();
        self.slots.push(Some(b));
        CudaBuf { owner: self.owner, slot: self.slots.len() - 1, len }
    }

    fn check(&self, h: &CudaBuf) -> Result<usize> {
        if h.owner != self.owner {
            return Err(rayo::Error::ForeignBuffer { op: OP, owner: h.owner, user: self.owner }.into());
        }
        if h.slot >= self.slots.len() {
            return Err(rayo::Error::IndexOutOfBounds { index: h.slot, len: self.slots.len() }.into());
        }
        Ok(h.slot)
    }

    /// The buffer of `h`.
    pub(super) fn get(&self, h: &CudaBuf) -> Result<&DeviceBuffer> {
        let i = self.check(h)?;
        self.slots[i].as_ref().ok_or_else(|| in_use(i))
    }

    /// Takes the buffer of `h` out (an op holds it); [`Arena::put`] returns it.
    fn take(&mut self, h: &CudaBuf) -> Result<(usize, DeviceBuffer)> {
        let i = self.check(h)?;
        self.slots[i].take().map(|b| (i, b)).ok_or_else(|| in_use(i))
    }

    fn put(&mut self, held: Vec<(usize, DeviceBuffer)>) {
        for (i, b) in held {
            self.slots[i] = Some(b);
        }
    }

    /// Puts `b` in `h`'s slot and returns the buffer that was there (same length).
    pub(super) fn swap(&mut self, h: &CudaBuf, b: DeviceBuffer) -> Result<DeviceBuffer> {
        let i = self.check(h)?;
        let old = self.slots[i].as_mut().ok_or_else(|| in_use(i))?;
        if old.len() != b.len() {
            return Err(rayo::Error::LengthMismatch { op: OP, expected: old.len(), actual: b.len() }.into());
        }
        Ok(std::mem::replace(old, b))
    }
}

fn in_use(slot: usize) -> Error {
    rayo::Error::InvalidArgument { op: OP, name: "buffer", value: slot.into(), reason: "is already in use by this op (passed twice)" }.into()
}

/// The buffers of some handles, taken out of an arena for one op and returned by
/// [`Held::restore`]: `ins` read, `outs` written.
pub(super) struct Held {
    bufs: Vec<(usize, DeviceBuffer)>,
    ins: usize,
}

impl Held {
    /// Takes the buffers of `ins` then `outs` out of `arena`; on an error (a foreign or stale
    /// handle, one passed twice) nothing stays taken.
    pub(super) fn take(arena: &mut Arena, ins: &[&CudaBuf], outs: &[&CudaBuf]) -> Result<Held> {
        let mut bufs = Vec::with_capacity(ins.len() + outs.len());
        for h in ins.iter().chain(outs) {
            match arena.take(h) {
                Ok(b) => bufs.push(b),
                Err(e) => {
                    arena.put(bufs);
                    return Err(e);
                }
            }
        }
        Ok(Held { bufs, ins: ins.len() })
    }

    /// The inputs, then the outputs.
    pub(super) fn split(&mut self) -> (Vec<&DeviceBuffer>, Vec<&mut DeviceBuffer>) {
        let (ins, outs) = self.bufs.split_at_mut(self.ins);
        (ins.iter().map(|(_, b)| b).collect(), outs.iter_mut().map(|(_, b)| b).collect())
    }

    pub(super) fn restore(self, arena: &mut Arena) {
        arena.put(self.bufs);
    }
}
