//! The CPU backend's own threads. A decode step runs ~200 products of 10–100 µs each; a
//! thread woken from sleep for each (rayon's join from outside its pool: two wake-ups per
//! product) costs as much as the product. These workers spin between tasks, as ggml's do, but
//! only briefly: then they yield their core, and after [`SPIN`] without work they sleep (between
//! tokens of a slow reader, in a chat waiting for input).
//!
//! When the machine has fewer free cores than threads (a build running beside), a worker may
//! not run for a whole time slice. The caller then does not wait for it: a task its worker has
//! not started by the time the caller's own share is done is taken back and run by the caller
//! (a worker only runs a task it claimed), and a caller waiting for a task that is running
//! sleeps after a while instead of spinning on the core the worker needs.
//!
//! A panic in any share (the caller's or a worker's) is an error of that call; every task is
//! finished or taken back before [`Workers::run`] returns, so the pool is ready for the next.

use crate::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A task for one worker: it computes a part of a product into its own vector.
pub type Task = Box<dyn FnOnce() -> Result<Vec<f32>> + Send>;

/// No task: the slot is the caller's to fill.
const IDLE: u8 = 0;
/// A task waits in the slot: the worker (or, taking it back, the caller) claims it.
const READY: u8 = 1;
/// The worker claimed the task and runs it.
const RUNNING: u8 = 2;
/// The worker's result waits in the slot.
const DONE: u8 = 3;

/// How long an idle worker polls for its next task (spinning, then yielding) before it sleeps.
const SPIN: Duration = Duration::from_micros(500);

/// After this long a polling thread yields its core between polls: when the machine has fewer
/// free cores than threads, a spinning thread would otherwise take the core the thread it waits
/// for needs.
const SPIN_ALONE: Duration = Duration::from_micros(50);

/// How long the caller polls for a running task's result before it sleeps until the worker
/// wakes it.
const WAIT: Duration = Duration::from_micros(500);

struct Slot {
    state: AtomicU8,
    quit: AtomicBool,
    /// The worker sleeps on `wake` (the caller must notify it).
    sleeping: AtomicBool,
    /// The caller sleeps on `done` (the worker must notify it).
    waiting: AtomicBool,
    task: Mutex<Option<Task>>,
    result: Mutex<Option<Result<Vec<f32>>>>,
    /// Guards sleeping on `wake` and `done` against a missed notification.
    lock: Mutex<()>,
    wake: Condvar,
    done: Condvar,
}

/// Worker threads, each with one task slot.
pub struct Workers {
    slots: Vec<Arc<Slot>>,
    threads: Vec<JoinHandle<()>>,
}

impl Workers {
    /// `n` worker threads (besides the caller's).
    pub fn new(n: usize) -> Workers {
        let slots: Vec<Arc<Slot>> = (0..n)
            .map(|_| {
                Arc::new(Slot {
                    state: AtomicU8::new(IDLE),
                    quit: AtomicBool::new(false),
                    sleeping: AtomicBool::new(false),
                    waiting: AtomicBool::new(false),
                    task: Mutex::new(None),
                    result: Mutex::new(None),
                    lock: Mutex::new(()),
                    wake: Condvar::new(),
                    done: Condvar::new(),
                })
            })
            .collect();
        let threads = slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let s = Arc::clone(s);
                // A worker that cannot be started leaves its slot unused: `len` says how many run.
                std::thread::Builder::new().name(format!("rayo-llm-{i}")).spawn(move || work(&s)).ok()
            })
            .collect::<Vec<_>>();
        let slots = slots.into_iter().take(threads.len()).collect();
        Workers { slots, threads }
    }

    /// Worker threads running.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Runs `tasks[i]` on worker `i` (at most [`Workers::len`] tasks) and `main` on the calling
    /// thread; returns `main`'s result and the tasks' results in order once all are done. A task
    /// that panicked is an `Err` in its place; a panic in `main` is this call's `Err` (after every
    /// task has finished), as is passing more tasks than workers.
    pub fn run<R>(&self, tasks: Vec<Task>, main: impl FnOnce() -> R) -> Result<(R, Vec<Result<Vec<f32>>>)> {
        if tasks.len() > self.slots.len() {
            return Err(Error::Worker { what: format!("{} tasks for {} CPU workers", tasks.len(), self.slots.len()) });
        }
        let n = tasks.len();
        for (slot, task) in self.slots.iter().zip(tasks) {
            *lock(&slot.task) = Some(task);
            slot.state.store(READY, Ordering::SeqCst);
            // Paired with the worker's store of `sleeping` and load of `state` (both SeqCst):
            // either it sees READY or this sees it asleep.
            if slot.sleeping.load(Ordering::SeqCst) {
                let _g = lock(&slot.lock);
                slot.wake.notify_one();
            }
        }
        let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(main));
        let results = self.slots[..n].iter().map(collect).collect();
        match mine {
            Ok(r) => Ok((r, results)),
            Err(p) => Err(Error::Worker { what: format!("the calling thread's share of a CPU job panicked: {}", panic_text(&*p)) }),
        }
    }
}

/// A task that borrows from its caller's stack, for [`Workers::run_borrowed`].
pub type BorrowedTask<'a> = Box<dyn FnOnce() -> Result<Vec<f32>> + Send + 'a>;

impl Workers {
    /// [`Workers::run`] for tasks that borrow what outlives this call (a layer's caches and
    /// rows): as `std::thread::scope`, on the pool's threads.
    pub fn run_borrowed<'a, R>(&self, tasks: Vec<BorrowedTask<'a>>, main: impl FnOnce() -> R) -> Result<(R, Vec<Result<Vec<f32>>>)> {
        let tasks = tasks
            .into_iter()
            // SAFETY: `run` returns only after every task it was given has run to its end (or
            // panicked, caught) or was taken back and dropped: `collect` waits for each slot
            // whatever `main` did, and tasks past the workers are dropped before any runs. So
            // no task, nor anything it borrows for `'a`, is used after this call returns, and
            // `'a` outlives the call.
            .map(|t| unsafe { std::mem::transmute::<BorrowedTask<'a>, Task>(t) })
            .collect();
        self.run(tasks, main)
    }
}

/// The result of `slot`'s task: run here when its worker has not claimed it, else waited for.
fn collect(slot: &Arc<Slot>) -> Result<Vec<f32>> {
    if slot.state.compare_exchange(READY, IDLE, Ordering::AcqRel, Ordering::Acquire).is_ok() {
        return run_task(lock(&slot.task).take());
    }
    let t = Instant::now();
    let mut polls = 0u32;
    while slot.state.load(Ordering::Acquire) != DONE {
        polls = polls.wrapping_add(1);
        if polls % 64 != 0 || t.elapsed() < SPIN_ALONE {
            std::hint::spin_loop();
        } else if t.elapsed() < WAIT {
            std::thread::yield_now();
        } else {
            let mut g = lock(&slot.lock);
            slot.waiting.store(true, Ordering::SeqCst);
            while slot.state.load(Ordering::SeqCst) != DONE {
                g = slot.done.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            slot.waiting.store(false, Ordering::SeqCst);
        }
    }
    let r = lock(&slot.result).take();
    slot.state.store(IDLE, Ordering::Release);
    r.unwrap_or_else(|| Err(Error::Worker { what: "a CPU worker finished without a result".into() }))
}

/// A poisoned lock (a task panicked) still holds valid data here: take it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A panic's message, where it is a string.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "(no message)".into())
}

/// Runs a task, a panic in it an error.
fn run_task(task: Option<Task>) -> Result<Vec<f32>> {
    match task {
        Some(f) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .unwrap_or_else(|p| Err(Error::Worker { what: format!("a CPU worker's task panicked: {}", panic_text(&*p)) })),
        None => Err(Error::Worker { what: "a CPU worker's slot was READY without a task".into() }),
    }
}

/// Waits for a task (`true`) or the pool's end (`false`): spins, then yields, then sleeps.
fn wait_ready(slot: &Slot) -> bool {
    let t = Instant::now();
    let mut spins = 0u32;
    loop {
        if slot.quit.load(Ordering::Acquire) {
            return false;
        }
        if slot.state.load(Ordering::Acquire) == READY {
            return true;
        }
        spins = spins.wrapping_add(1);
        // The clock is read once per 256 spins (a read costs as much as the spins).
        if spins % 256 != 0 {
            std::hint::spin_loop();
            continue;
        }
        let e = t.elapsed();
        if e < SPIN_ALONE {
            continue;
        }
        if e < SPIN {
            std::thread::yield_now();
            continue;
        }
        let mut g = lock(&slot.lock);
        slot.sleeping.store(true, Ordering::SeqCst);
        while slot.state.load(Ordering::SeqCst) != READY && !slot.quit.load(Ordering::SeqCst) {
            g = slot.wake.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        slot.sleeping.store(false, Ordering::SeqCst);
    }
}

fn work(slot: &Slot) {
    while wait_ready(slot) {
        // The caller may have taken the task back (it finished its share first).
        if slot.state.compare_exchange(READY, RUNNING, Ordering::AcqRel, Ordering::Acquire).is_err() {
            continue;
        }
        let result = run_task(lock(&slot.task).take());
        *lock(&slot.result) = Some(result);
        slot.state.store(DONE, Ordering::SeqCst);
        // Paired with the caller's store of `waiting` and load of `state` (both SeqCst).
        if slot.waiting.load(Ordering::SeqCst) {
            let _g = lock(&slot.lock);
            slot.done.notify_one();
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for slot in &self.slots {
            let _g = lock(&slot.lock);
            slot.quit.store(true, Ordering::SeqCst);
            slot.wake.notify_one();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
#[path = "workers_tests.rs"]
mod tests;
