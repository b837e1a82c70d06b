//! The server's counters, gauges and histograms, written as Prometheus text (`GET /metrics`).
//! Names are prefixed `rayo_`; where vLLM has the same measure its name follows vLLM's
//! (`vllm:e2e_request_latency_seconds` here is `rayo_e2e_request_latency_seconds`).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// A Prometheus histogram with fixed upper bounds (seconds).
#[derive(Clone, Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram { bounds, counts: vec![0; bounds.len()], sum: 0.0, count: 0 }
    }

    pub fn observe(&mut self, x: f64) {
        for (b, c) in self.bounds.iter().zip(&mut self.counts) {
            if x <= *b {
                *c += 1;
            }
        }
        self.sum += x;
        self.count += 1;
    }

    fn write(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {c}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}\n{name}_sum {}\n{name}_count {}", self.count, self.sum, self.count);
    }
}

const TTFT_BOUNDS: &[f64] = &[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
const TPOT_BOUNDS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5];
/// vLLM's request-latency buckets.
const E2E_BOUNDS: &[f64] = &[0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0];
const QUEUE_BOUNDS: &[f64] = &[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];
/// Token counts (vLLM's 1-2-5 steps).
const TOKEN_BOUNDS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 20000.0, 50000.0, 100000.0];

/// How a generation request ended, for `rayo_request_finished_total{finished_reason}`.
pub const FINISH_REASONS: [&str; 4] = ["stop", "length", "error", "cancelled"];

/// Everything `/metrics` shows.
pub struct Metrics {
    /// (route, status) → requests answered.
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    pub prompt_tokens: AtomicU64,
    pub cached_tokens: AtomicU64,
    pub completion_tokens: AtomicU64,
    /// Requests that ended because their client went away.
    pub cancelled: AtomicU64,
    /// Engine steps that failed.
    pub engine_errors: AtomicU64,
    /// Generation requests ended, by [`FINISH_REASONS`] (in that order).
    finished: [AtomicU64; 4],
    pub steps: AtomicU64,
    /// Requests accepted and waiting for a slot.
    pub queued: AtomicUsize,
    pub active_slots: AtomicUsize,
    pub slots: AtomicUsize,
    /// Positions held in the KV caches (active and cached prefixes) and the total.
    pub kv_used: AtomicUsize,
    pub kv_capacity: AtomicUsize,
    ttft: Mutex<Histogram>,
    tpot: Mutex<Histogram>,
    e2e: Mutex<Histogram>,
    queue_time: Mutex<Histogram>,
    prompt_len: Mutex<Histogram>,
    generation_len: Mutex<Histogram>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            requests: Mutex::new(BTreeMap::new()),
            prompt_tokens: AtomicU64::new(0),
            cached_tokens: AtomicU64::new(0),
            completion_tokens: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            engine_errors: AtomicU64::new(0),
            finished: Default::default(),
            steps: AtomicU64::new(0),
            queued: AtomicUsize::new(0),
            active_slots: AtomicUsize::new(0),
            slots: AtomicUsize::new(0),
            kv_used: AtomicUsize::new(0),
            kv_capacity: AtomicUsize::new(0),
            ttft: Mutex::new(Histogram::new(TTFT_BOUNDS)),
            tpot: Mutex::new(Histogram::new(TPOT_BOUNDS)),
            e2e: Mutex::new(Histogram::new(E2E_BOUNDS)),
            queue_time: Mutex::new(Histogram::new(QUEUE_BOUNDS)),
            prompt_len: Mutex::new(Histogram::new(TOKEN_BOUNDS)),
            generation_len: Mutex::new(Histogram::new(TOKEN_BOUNDS)),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Metrics {
    pub fn request(&self, route: &'static str, status: u16) {
        *lock(&self.requests).entry((route, status)).or_insert(0) += 1;
    }

    pub fn time_to_first_token(&self, s: f64) {
        lock(&self.ttft).observe(s);
    }

    pub fn time_per_output_token(&self, s: f64) {
        lock(&self.tpot).observe(s);
    }

    /// From a request's arrival to its taking a slot.
    pub fn queue_time(&self, s: f64) {
        lock(&self.queue_time).observe(s);
    }

    /// A generation request ended (`reason`: one of [`FINISH_REASONS`]) `e2e` seconds after it
    /// arrived; `tokens`: its prompt and generated tokens, when it ran to its end.
    pub fn finished(&self, reason: &str, e2e: f64, tokens: Option<(usize, usize)>) {
        if let Some(i) = FINISH_REASONS.iter().position(|&r| r == reason) {
            self.finished[i].fetch_add(1, Ordering::Relaxed);
        }
        lock(&self.e2e).observe(e2e);
        if let Some((prompt, generated)) = tokens {
            lock(&self.prompt_len).observe(prompt as f64);
            lock(&self.generation_len).observe(generated as f64);
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# HELP rayo_requests_total HTTP requests answered, by route and status.\n# TYPE rayo_requests_total counter");
        for ((route, status), n) in lock(&self.requests).iter() {
            let _ = writeln!(out, "rayo_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}");
        }
        let counter = |out: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        };
        let gauge = |out: &mut String, name: &str, help: &str, v: usize| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let g = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        counter(&mut out, "rayo_prompt_tokens_total", "Prompt tokens of the requests run.", get(&self.prompt_tokens));
        counter(&mut out, "rayo_prompt_tokens_cached_total", "Prompt tokens found in a slot's cache (not run again).", get(&self.cached_tokens));
        counter(&mut out, "rayo_completion_tokens_total", "Tokens generated.", get(&self.completion_tokens));
        counter(&mut out, "rayo_requests_cancelled_total", "Requests whose client went away before the end.", get(&self.cancelled));
        counter(&mut out, "rayo_steps_total", "Engine steps run.", get(&self.steps));
        counter(&mut out, "rayo_engine_errors_total", "Engine steps that failed (the first one faults the server).", get(&self.engine_errors));
        let _ = writeln!(
            out,
            "# HELP rayo_request_finished_total Generation requests ended, by finish reason.\n# TYPE rayo_request_finished_total counter"
        );
        for (reason, n) in FINISH_REASONS.iter().zip(&self.finished) {
            let _ = writeln!(out, "rayo_request_finished_total{{finished_reason=\"{reason}\"}} {}", get(n));
        }
        gauge(&mut out, "rayo_queue_length", "Requests waiting for a slot.", g(&self.queued));
        gauge(&mut out, "rayo_active_slots", "Slots running a request.", g(&self.active_slots));
        gauge(&mut out, "rayo_slots", "Slots (--parallel).", g(&self.slots));
        gauge(
            &mut out,
            "rayo_kv_cache_used_positions",
            "KV-cache positions holding tokens (running requests and cached prefixes).",
            g(&self.kv_used),
        );
        gauge(&mut out, "rayo_kv_cache_capacity_positions", "KV-cache positions in all slots.", g(&self.kv_capacity));
        let cap = g(&self.kv_capacity);
        let _ = writeln!(
            out,
            "# HELP rayo_kv_cache_usage_ratio Used over capacity.\n# TYPE rayo_kv_cache_usage_ratio gauge\nrayo_kv_cache_usage_ratio {}",
            if cap == 0 { 0.0 } else { g(&self.kv_used) as f64 / cap as f64 }
        );
        lock(&self.ttft).write(&mut out, "rayo_time_to_first_token_seconds", "From a request's arrival to its first token.");
        lock(&self.tpot).write(&mut out, "rayo_time_per_output_token_seconds", "Between a request's consecutive tokens.");
        lock(&self.e2e).write(&mut out, "rayo_e2e_request_latency_seconds", "From a generation request's arrival to its end, however it ended.");
        lock(&self.queue_time).write(&mut out, "rayo_request_queue_time_seconds", "From a request's arrival to its taking a slot.");
        lock(&self.prompt_len).write(&mut out, "rayo_request_prompt_tokens", "Prompt tokens of each request that ran to its end.");
        lock(&self.generation_len).write(&mut out, "rayo_request_generation_tokens", "Generated tokens of each request that ran to its end.");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_exposition() {
        let m = Metrics::default();
        m.request("/v1/completions", 200);
        m.request("/v1/completions", 200);
        m.request("/v1/completions", 429);
        m.completion_tokens.fetch_add(5, Ordering::Relaxed);
        m.time_to_first_token(0.2);
        m.time_to_first_token(3.0);
        let t = m.render();
        assert!(t.contains("rayo_requests_total{route=\"/v1/completions\",status=\"200\"} 2\n"), "{t}");
        assert!(t.contains("rayo_requests_total{route=\"/v1/completions\",status=\"429\"} 1\n"));
        assert!(t.contains("rayo_completion_tokens_total 5\n"));
        assert!(t.contains("rayo_time_to_first_token_seconds_bucket{le=\"0.25\"} 1\n"));
        assert!(t.contains("rayo_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(t.contains("rayo_time_to_first_token_seconds_count 2\n"));
        assert!(t.contains("# TYPE rayo_queue_length gauge\nrayo_queue_length 0\n"));
    }

    #[test]
    fn request_ends_are_counted_by_reason() {
        let m = Metrics::default();
        m.finished("stop", 0.4, Some((12, 30)));
        m.finished("length", 2.0, Some((3, 16)));
        m.finished("cancelled", 1.0, None);
        m.engine_errors.fetch_add(1, Ordering::Relaxed);
        m.queue_time(0.002);
        let t = m.render();
        for line in [
            "rayo_request_finished_total{finished_reason=\"stop\"} 1\n",
            "rayo_request_finished_total{finished_reason=\"error\"} 0\n",
            "rayo_request_finished_total{finished_reason=\"cancelled\"} 1\n",
            "rayo_engine_errors_total 1\n",
            "rayo_e2e_request_latency_seconds_bucket{le=\"0.5\"} 1\n",
            "rayo_e2e_request_latency_seconds_count 3\n",
            "rayo_request_queue_time_seconds_bucket{le=\"0.005\"} 1\n",
            "rayo_request_prompt_tokens_bucket{le=\"5\"} 1\n",
            "rayo_request_prompt_tokens_count 2\n",
            "rayo_request_generation_tokens_bucket{le=\"20\"} 1\n",
            "rayo_request_generation_tokens_sum 46\n",
        ] {
            assert!(t.contains(line), "{line:?} is not in\n{t}");
        }
    }
}
