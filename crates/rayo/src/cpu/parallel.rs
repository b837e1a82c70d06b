//! Splitting large inputs over the cores (rayon), never for small ones.
//!
//! An op passes its *grain*: the fewest elements worth a thread of their own. Below two
//! grains the op runs on the calling thread and pays nothing.
//!
//! Two knobs say how many threads may be used: the process-wide [`set_max_threads`] (what
//! every op without a parallelism argument follows), and a [`Par`] passed to one call
//! ([`crate::gemm_par`]), which overrides it for that call only.

use core::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};

static MAX_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Limits the threads rayo's CPU kernels use, process-wide (0 = all of rayon's pool, the
/// default). Returns the previous setting. Every op that takes no [`Par`] follows it; it is
/// the one piece of global threading state rayo has, and it is only changed by this call.
pub fn set_max_threads(n: usize) -> usize {
    MAX_THREADS.swap(n, Ordering::Relaxed)
}

/// How much parallelism one call may use (as faer's `Par`): passed explicitly to the
/// functions that take it ([`crate::gemm_par`]), so that a caller does not have to change the
/// process-wide [`set_max_threads`] for one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Par {
    /// Only the calling thread.
    Seq,
    /// Up to this many threads of rayon's pool (more than the pool has means all of it).
    Rayon(NonZeroUsize),
}

impl Par {
    /// [`Par::Seq`] for 0 and 1, else [`Par::Rayon`] with `n` threads.
    pub fn threads(n: usize) -> Par {
        match NonZeroUsize::new(n) {
            Some(t) if n > 1 => Par::Rayon(t),
            _ => Par::Seq,
        }
    }

    /// What the process-wide setting ([`set_max_threads`]) allows now.
    pub fn global() -> Par {
        Par::threads(max_threads())
    }

    /// The number of threads this allows on this machine (at least 1).
    pub fn thread_count(self) -> usize {
        match self {
            Par::Seq => 1,
            Par::Rayon(n) => n.get().min(available()).max(1),
        }
    }
}

/// Threads the CPU kernels may use now (the process-wide setting, capped by rayon's pool).
pub fn max_threads() -> usize {
    let avail = available();
    match MAX_THREADS.load(Ordering::Relaxed) {
        0 => avail,
        n => n.min(avail),
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn available() -> usize {
    rayon::current_num_threads()
}
#[cfg(target_arch = "wasm32")]
fn available() -> usize {
    1
}

/// How many parts `n` elements split into for an op with this grain.
pub fn parts(n: usize, grain: usize) -> usize {
    (n / grain.max(1)).clamp(1, max_threads())
}

/// Split point for `parts` parts: a multiple of 1024 elements so no two threads share a line.
fn split_at(n: usize, parts: usize) -> usize {
    let left = parts / 2;
    ((n * left / parts) / 1024 * 1024).clamp(0, n)
}

#[cfg(not(target_arch = "wasm32"))]
pub fn both<A: Send, B: Send>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
    rayon::join(a, b)
}
#[cfg(target_arch = "wasm32")]
pub fn both<A: Send, B: Send>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
    (a(), b())
}

/// `f(x_part, out_part)` over matching parts of `x` and `out` (equal lengths).
pub fn zip_map(x: &[f32], out: &mut [f32], grain: usize, f: &(impl Fn(&[f32], &mut [f32]) + Sync)) {
    go2(x, out, parts(out.len(), grain), f)
}

fn go2(x: &[f32], out: &mut [f32], p: usize, f: &(impl Fn(&[f32], &mut [f32]) + Sync)) {
    if p <= 1 {
        return f(x, out);
    }
    let m = split_at(out.len(), p);
    let (x0, x1) = x.split_at(m);
    let (o0, o1) = out.split_at_mut(m);
    both(|| go2(x0, o0, p / 2, f), || go2(x1, o1, p - p / 2, f));
}

/// `f(a_part, b_part, out_part)` over matching parts (equal lengths).
pub fn zip_map2(a: &[f32], b: &[f32], out: &mut [f32], grain: usize, f: &(impl Fn(&[f32], &[f32], &mut [f32]) + Sync)) {
    go3(a, b, out, parts(out.len(), grain), f)
}

fn go3(a: &[f32], b: &[f32], out: &mut [f32], p: usize, f: &(impl Fn(&[f32], &[f32], &mut [f32]) + Sync)) {
    if p <= 1 {
        return f(a, b, out);
    }
    let m = split_at(out.len(), p);
    let (a0, a1) = a.split_at(m);
    let (b0, b1) = b.split_at(m);
    let (o0, o1) = out.split_at_mut(m);
    both(|| go3(a0, b0, o0, p / 2, f), || go3(a1, b1, o1, p - p / 2, f));
}

/// Maps parts of `x` with `f` and combines the results with `combine` (in order).
pub fn map_reduce<T: Send>(x: &[f32], grain: usize, f: &(impl Fn(&[f32]) -> T + Sync), combine: &(impl Fn(T, T) -> T + Sync)) -> T {
    reduce1(x, parts(x.len(), grain), f, combine)
}

fn reduce1<T: Send>(x: &[f32], p: usize, f: &(impl Fn(&[f32]) -> T + Sync), c: &(impl Fn(T, T) -> T + Sync)) -> T {
    if p <= 1 {
        return f(x);
    }
    let (x0, x1) = x.split_at(split_at(x.len(), p));
    let (l, r) = both(|| reduce1(x0, p / 2, f, c), || reduce1(x1, p - p / 2, f, c));
    c(l, r)
}

/// Two-input [`map_reduce`] (equal lengths).
pub fn map_reduce2<T: Send>(
    a: &[f32],
    b: &[f32],
    grain: usize,
    f: &(impl Fn(&[f32], &[f32]) -> T + Sync),
    combine: &(impl Fn(T, T) -> T + Sync),
) -> T {
    reduce2(a, b, parts(a.len(), grain), f, combine)
}

fn reduce2<T: Send>(a: &[f32], b: &[f32], p: usize, f: &(impl Fn(&[f32], &[f32]) -> T + Sync), c: &(impl Fn(T, T) -> T + Sync)) -> T {
    if p <= 1 {
        return f(a, b);
    }
    let m = split_at(a.len(), p);
    let (a0, a1) = a.split_at(m);
    let (b0, b1) = b.split_at(m);
    let (l, r) = both(|| reduce2(a0, b0, p / 2, f, c), || reduce2(a1, b1, p - p / 2, f, c));
    c(l, r)
}

/// `f(part)` over parts of `out`.
pub fn for_each_mut(out: &mut [f32], grain: usize, f: &(impl Fn(&mut [f32]) + Sync)) {
    go1(out, parts(out.len(), grain), f)
}

fn go1(out: &mut [f32], p: usize, f: &(impl Fn(&mut [f32]) + Sync)) {
    if p <= 1 {
        return f(out);
    }
    let (o0, o1) = out.split_at_mut(split_at(out.len(), p));
    both(|| go1(o0, p / 2, f), || go1(o1, p - p / 2, f));
}
