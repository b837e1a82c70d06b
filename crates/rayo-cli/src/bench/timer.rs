//! Timing: the median of several samples, each long enough to swamp the clock's resolution.

use std::time::{Duration, Instant};

/// How long each sample runs, and how many samples.
#[derive(Clone, Copy)]
pub struct Plan {
    pub sample: Duration,
    pub samples: usize,
}

impl Plan {
    /// The method: median of 7 samples of at least 0.2 s.
    pub const FULL: Plan = Plan { sample: Duration::from_millis(200), samples: 7 };
    /// A short run for the README.
    pub const QUICK: Plan = Plan { sample: Duration::from_millis(20), samples: 5 };
}

/// Median wall time of one call of `f`, in nanoseconds.
pub fn median_ns(plan: Plan, mut f: impl FnMut()) -> f64 {
    // Warm up (page faults, caches, pools) and estimate the cost of one call.
    let t = Instant::now();
    f();
    let mut reps = 1u64;
    let one = t.elapsed().max(Duration::from_nanos(20));
    let per_sample = ((plan.sample.as_secs_f64() / one.as_secs_f64()) as u64).max(1);
    let mut samples: Vec<f64> = (0..plan.samples)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_sample {
                f();
            }
            reps += per_sample;
            t.elapsed().as_nanos() as f64 / per_sample as f64
        })
        .collect();
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}
