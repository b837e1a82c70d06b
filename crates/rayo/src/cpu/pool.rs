//! Reuse of large output buffers: off unless the program turns it on ([`set_buffer_reuse`]).
//!
//! A fresh 40 MB `Vec` costs ~10 K page faults before the op writes a byte, so an allocating
//! op (`v.add(&w)`) on large inputs can be slower than its `_into` twin, which writes into a
//! buffer the caller keeps. With reuse on, the buffers of dropped `Vector`s and `Matrix`es
//! (from 256 KiB up) are kept, up to the byte budget the program set, and handed to the next
//! allocating op of a similar size. The budget is process-wide memory the program chose to
//! spend; with the default (0) nothing is kept and every drop frees its memory.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Buffers smaller than this (in elements) are plain allocations.
const MIN_POOLED: usize = 1 << 16;
/// At most this many buffers are kept.
const MAX_BUFFERS: usize = 16;

/// The budget a process starts with: 0, reuse off. (Measured on a 2-core VM, 10M floats:
/// `add` allocating 29-47 ms with reuse off, 4.4-5.4 ms with it on, `add_into` 4.3-5.3 ms.)
const DEFAULT_BUDGET: usize = 0;

/// The byte budget: 0 turns reuse off.
static BUDGET: AtomicUsize = AtomicUsize::new(DEFAULT_BUDGET);
static POOL: Mutex<Vec<Vec<f32>>> = Mutex::new(Vec::new());

/// Lets rayo keep up to `bytes` of dropped output buffers (of 256 KiB and more) for reuse
/// by later allocating ops; 0 turns reuse off and frees what is kept. Off by default.
/// Returns the previous budget.
///
/// Worth it for a program that calls allocating ops (`add`, `matmul`, ...) on large inputs
/// in a loop and cannot use the `_into` forms; it trades that much resident memory for
/// fewer page faults.
pub fn set_buffer_reuse(bytes: usize) -> usize {
    let prev = BUDGET.swap(bytes, Ordering::Relaxed);
    if let Ok(mut pool) = POOL.lock() {
        let mut held: usize = pool.iter().map(|b| b.capacity() * 4).sum();
        while held > bytes {
            match pool.pop() {
                Some(b) => held -= b.capacity() * 4,
                None => break,
            }
        }
    }
    prev
}

/// The byte budget set by [`set_buffer_reuse`] (0: reuse is off).
pub fn buffer_reuse() -> usize {
    BUDGET.load(Ordering::Relaxed)
}

/// A buffer of `n` elements (contents unspecified: the caller overwrites every one). The
/// caller has checked that `n` floats fit in memory's address range.
pub(crate) fn take(n: usize) -> Vec<f32> {
    if n >= MIN_POOLED && BUDGET.load(Ordering::Relaxed) > 0 {
        if let Ok(mut pool) = POOL.lock() {
            if let Some(i) = pool.iter().position(|v| v.capacity() >= n && v.capacity() / 2 <= n) {
                let mut v = pool.swap_remove(i);
                v.resize(n, 0.0);
                return v;
            }
        }
    }
    vec![0.0; n]
}

/// Returns a buffer for reuse (dropped when reuse is off, it is small, or the budget is full).
pub(crate) fn give(v: Vec<f32>) {
    let budget = BUDGET.load(Ordering::Relaxed);
    if budget == 0 || v.capacity() < MIN_POOLED {
        return;
    }
    if let Ok(mut pool) = POOL.lock() {
        let held: usize = pool.iter().map(|b| b.capacity() * 4).sum();
        if held.saturating_add(v.capacity() * 4) <= budget && pool.len() < MAX_BUFFERS {
            pool.push(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuse_is_off_until_asked_for_and_bounded_by_its_budget() {
        // An odd size no other test of this binary allocates.
        let n = 3 * MIN_POOLED + 7;
        assert_eq!(buffer_reuse(), 0, "off by default");
        assert_eq!(DEFAULT_BUDGET, 0);
        give(vec![0.0; n]);
        assert!(POOL.lock().unwrap().is_empty(), "nothing kept while reuse is off");
        assert_eq!(set_buffer_reuse(n * 4), 0);
        let v = vec![1.0f32; n];
        let p = v.as_ptr();
        give(v);
        let w = take(n);
        assert_eq!((w.as_ptr(), w.len()), (p, n), "the dropped buffer comes back");
        give(vec![0.0; n + 1]);
        assert!(POOL.lock().unwrap().is_empty(), "over the budget: freed");
        give(w);
        assert_eq!(set_buffer_reuse(0), n * 4);
        assert!(POOL.lock().unwrap().is_empty(), "turning reuse off frees what was kept");
    }
}
