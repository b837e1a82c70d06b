//! Reuse of large output buffers.
//!
//! A fresh 40 MB `Vec` costs ~10 K page faults (~20 ms here) before the op writes a byte, which
//! would make `v.add(&w)` several times slower than `v.add_into(&w, &mut out)`. Large buffers
//! of dropped `Vector`s are kept here and handed to the next allocating op of a similar size.

use std::sync::Mutex;

/// Buffers smaller than this (in elements) are plain allocations.
const MIN_POOLED: usize = 1 << 16;
/// At most this many bytes are kept.
const MAX_POOLED_BYTES: usize = 1 << 30;

static POOL: Mutex<Vec<Vec<f32>>> = Mutex::new(Vec::new());

/// A buffer of `n` elements (contents unspecified: the caller overwrites every one).
pub fn take(n: usize) -> Vec<f32> {
    if n >= MIN_POOLED {
        if let Ok(mut pool) = POOL.lock() {
            if let Some(i) = pool.iter().position(|v| v.capacity() >= n && v.capacity() <= 2 * n) {
                let mut v = pool.swap_remove(i);
                v.resize(n, 0.0);
                return v;
            }
        }
    }
    vec![0.0; n]
}

/// Returns a buffer for reuse (dropped when it is small or the pool is full).
pub fn give(v: Vec<f32>) {
    if v.capacity() < MIN_POOLED {
        return;
    }
    if let Ok(mut pool) = POOL.lock() {
        let held: usize = pool.iter().map(|b| b.capacity() * 4).sum();
        if held + v.capacity() * 4 <= MAX_POOLED_BYTES && pool.len() < 16 {
            pool.push(v);
        }
    }
}
