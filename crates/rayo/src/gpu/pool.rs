//! Pooled device buffers: a buffer goes back to a free list when its [`Pooled`] handle drops
//! and is handed out again for the next request of the same size class and usage, so ops
//! allocate no device memory in steady state.
//!
//! Reuse is safe without fences: every use goes through the one queue, in order, and a buffer
//! is returned only after the command buffer that uses it was submitted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Free buffers kept per (size class, usage); more are dropped.
const KEEP_PER_CLASS: usize = 8;

/// Free buffers by (size class, usage bits).
type FreeLists = Arc<Mutex<HashMap<(u64, u32), Vec<wgpu::Buffer>>>>;

#[derive(Default)]
pub(crate) struct BufferPool {
    free: FreeLists,
}

/// Rounds `bytes` up to a size class: multiples of 1/16 of the enclosing power of two
/// (at most 12.5% waste), at least 256 bytes.
pub(crate) fn size_class(bytes: u64) -> u64 {
    let b = bytes.max(256);
    let p = b.next_power_of_two();
    let step = (p / 16).max(256);
    b.div_ceil(step) * step
}

/// A buffer on loan from the pool; returned to it on drop.
pub(crate) struct Pooled {
    buf: Option<wgpu::Buffer>,
    key: (u64, u32),
    free: FreeLists,
}

impl Pooled {
    pub fn buffer(&self) -> &wgpu::Buffer {
        // The option is only emptied in drop.
        self.buf.as_ref().expect("pooled buffer present until drop")
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            let mut f = self.free.lock().unwrap_or_else(|p| p.into_inner());
            let list = f.entry(self.key).or_default();
            if list.len() < KEEP_PER_CLASS {
                list.push(b);
            }
        }
    }
}

impl BufferPool {
    /// A buffer of at least `bytes` with `usage`, from the free list or newly created.
    /// `max_bytes` is the device's buffer limit: a class above it falls back to the exact size.
    pub fn get(&self, device: &wgpu::Device, bytes: u64, max_bytes: u64, usage: wgpu::BufferUsages) -> Pooled {
        let class = size_class(bytes);
        let class = if class > max_bytes { bytes.max(4).div_ceil(4) * 4 } else { class };
        let key = (class, usage.bits());
        let reused = self.free.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&key).and_then(|v| v.pop());
        let buf = reused.unwrap_or_else(|| {
            device.create_buffer(&wgpu::BufferDescriptor { label: Some("rayo pooled"), size: class, usage, mapped_at_creation: false })
        });
        Pooled { buf: Some(buf), key, free: self.free.clone() }
    }

    /// Bytes sitting in the free lists.
    pub fn free_bytes(&self) -> u64 {
        let f = self.free.lock().unwrap_or_else(|p| p.into_inner());
        f.iter().map(|(k, v)| k.0 * v.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes_cover_and_waste_little() {
        for b in [0u64, 1, 255, 256, 257, 1000, 4096, 4097, 1 << 20, (1 << 20) + 1, 400_000_000] {
            let c = size_class(b);
            assert!(c >= b && c >= 256, "{b} -> {c}");
            assert!(c <= (b.max(256) as f64 * 1.126) as u64 + 256, "{b} -> {c}");
        }
    }
}
