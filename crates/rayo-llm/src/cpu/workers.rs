//! The CPU backend's own threads. A decode step runs ~200 products of 10–100 µs each; a
//! thread woken from sleep for each (rayon's join from outside its pool: two wake-ups per
//! product) costs as much as the product. These workers spin between tasks, as ggml's do, and
//! fall asleep only after a millisecond without work (between tokens of a slow reader, in a
//! chat waiting for input).

use rayo::Result;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A task for one worker: it computes a part of a product into its own vector.
pub type Task = Box<dyn FnOnce() -> Result<Vec<f32>> + Send>;

const IDLE: u8 = 0;
const READY: u8 = 1;
const DONE: u8 = 2;
const QUIT: u8 = 3;

/// How long a worker spins for its next task before it sleeps.
const SPIN: Duration = Duration::from_millis(1);

/// After this long a spinning thread yields its core between polls: when the machine has fewer
/// free cores than threads (a build running beside), a spinning worker would otherwise take the
/// core the thread it waits for needs, and every product would cost a time slice.
const SPIN_ALONE: Duration = Duration::from_micros(50);

struct Slot {
    state: AtomicU8,
    task: Mutex<Option<Task>>,
    result: Mutex<Option<Result<Vec<f32>>>>,
    /// Guards sleeping on `wake` against a missed notification.
    lock: Mutex<()>,
    wake: Condvar,
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
                    task: Mutex::new(None),
                    result: Mutex::new(None),
                    lock: Mutex::new(()),
                    wake: Condvar::new(),
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
    /// thread; returns `main`'s result and the tasks' results in order once all are done.
    pub fn run<R>(&self, tasks: Vec<Task>, main: impl FnOnce() -> R) -> (R, Vec<Result<Vec<f32>>>) {
        assert!(tasks.len() <= self.slots.len(), "more tasks than workers");
        let n = tasks.len();
        for (slot, task) in self.slots.iter().zip(tasks) {
            *lock(&slot.task) = Some(task);
            let _g = lock(&slot.lock);
            slot.state.store(READY, Ordering::Release);
            slot.wake.notify_one();
        }
        let r = main();
        let results = self.slots[..n]
            .iter()
            .map(|slot| {
                let t = Instant::now();
                while slot.state.load(Ordering::Acquire) != DONE {
                    if t.elapsed() < SPIN_ALONE {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                slot.state.store(IDLE, Ordering::Relaxed);
                lock(&slot.result).take().unwrap_or_else(|| Ok(Vec::new()))
            })
            .collect();
        (r, results)
    }
}

/// A poisoned lock (a task panicked) still holds valid data here: take it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn work(slot: &Slot) {
    loop {
        let t = Instant::now();
        let mut spins = 0u32;
        loop {
            spins = spins.wrapping_add(1);
            match slot.state.load(Ordering::Acquire) {
                READY => break,
                QUIT => return,
                // The clock is read once per 256 spins (a read costs as much as the spins).
                _ if spins % 256 != 0 => std::hint::spin_loop(),
                _ if t.elapsed() < SPIN_ALONE => {}
                _ if t.elapsed() < SPIN => std::thread::yield_now(),
                _ => {
                    let mut g = lock(&slot.lock);
                    while !matches!(slot.state.load(Ordering::Acquire), READY | QUIT) {
                        g = slot.wake.wait(g).unwrap_or_else(|e| e.into_inner());
                    }
                }
            }
        }
        let task = lock(&slot.task).take();
        let result = match task {
            Some(f) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                .unwrap_or_else(|_| Err(rayo::Error::Model { what: "a CPU worker's task panicked".into() })),
            None => Ok(Vec::new()),
        };
        *lock(&slot.result) = Some(result);
        slot.state.store(DONE, Ordering::Release);
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for slot in &self.slots {
            let _g = lock(&slot.lock);
            slot.state.store(QUIT, Ordering::Release);
            slot.wake.notify_one();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_every_task_and_the_caller_s_part_many_times() {
        let w = Workers::new(3);
        assert_eq!(w.len(), 3);
        for round in 0..2000 {
            let tasks: Vec<Task> = (0..3).map(|i| Box::new(move || Ok(vec![(round * 10 + i) as f32])) as Task).collect();
            let (mine, theirs) = w.run(tasks, || round);
            assert_eq!(mine, round);
            let got: Vec<f32> = theirs.into_iter().map(|r| r.unwrap()[0]).collect();
            assert_eq!(got, [(round * 10) as f32, (round * 10 + 1) as f32, (round * 10 + 2) as f32]);
            if round == 1000 {
                // Long enough for the workers to fall asleep: they must wake for the next task.
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let (_, r) = w.run(vec![Box::new(|| Err(rayo::Error::EmptyInput { op: "t" })) as Task], || ());
        assert!(r[0].is_err());
    }
}
