//! Timing: the median of several samples, each long enough to swamp the clock's resolution.

use std::time::{Duration, Instant};

/// How long each sample runs, and how many samples.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub sample: Duration,
    pub samples: usize,
    /// `--quick`: a call that alone takes longer than all samples together is timed once more
    /// instead of `samples` times (a 1024³ matmul on a software GPU must not take a minute).
    pub quick: bool,
}

impl Plan {
    /// The method: median of 7 samples of at least 0.2 s.
    pub const FULL: Plan = Plan { sample: Duration::from_millis(200), samples: 7, quick: false };
    /// A short run for the README: a few seconds for the whole table.
    pub const QUICK: Plan = Plan { sample: Duration::from_millis(10), samples: 3, quick: true };

    /// Samples to take after one call took `one`: all of them, or under `--quick` one when a
    /// single call outlasts the whole budget.
    pub fn samples_after(&self, one: Duration) -> usize {
        if self.quick && one > self.sample * self.samples as u32 {
            1
        } else {
            self.samples
        }
    }
}

/// Median wall time of one call of `f`, in nanoseconds.
pub fn median_ns(plan: Plan, mut f: impl FnMut()) -> f64 {
    // Warm up (page faults, caches, pools) and estimate the cost of one call.
    let t = Instant::now();
    f();
    let one = t.elapsed().max(Duration::from_nanos(20));
    let per_sample = ((plan.sample.as_secs_f64() / one.as_secs_f64()) as u64).max(1);
    let mut samples: Vec<f64> = (0..plan.samples_after(one))
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_sample {
                f();
            }
            t.elapsed().as_nanos() as f64 / per_sample as f64
        })
        .collect();
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_takes_one_sample_of_a_long_call_and_full_takes_all() {
        assert_eq!(Plan::QUICK.samples_after(Duration::from_secs(1)), 1);
        assert_eq!(Plan::QUICK.samples_after(Duration::from_millis(1)), Plan::QUICK.samples);
        assert_eq!(Plan::FULL.samples_after(Duration::from_secs(10)), Plan::FULL.samples);
    }

    #[test]
    fn a_long_call_under_quick_runs_twice() {
        let mut calls = 0;
        let plan = Plan { sample: Duration::from_micros(100), samples: 3, quick: true };
        let ns = median_ns(plan, || {
            calls += 1;
            std::thread::sleep(Duration::from_millis(2));
        });
        assert_eq!(calls, 2);
        assert!(ns >= 2e6, "{ns}");
    }
}
