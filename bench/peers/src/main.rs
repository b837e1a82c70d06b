//! The peers of `rayo bench`'s vector rows, timed the way `rayo bench` times (median of 7 samples
//! of >= 0.2 s, or 3 of 10 ms with --quick) on the same data, printed as the same JSON lines with
//! `backend` = the peer:
//!
//! - `trueno-<isa>`: trueno's kernels per instruction set (`trueno::backends::*Backend`, called
//!   directly: the `Vector` API would add an allocation to `add` and, for `max`, sends AVX-512
//!   to the AVX2 kernel);
//! - `faer`: faer's dot (`inner_prod`) and sum (`ColRef::sum`), through its own SIMD dispatch;
//! - `stream`: the STREAM triad `a[i] = b[i] + q*c[i]` as STREAM writes it (a plain loop, ordinary
//!   stores), compiled with `-C target-cpu=native` (see README.md) — the memory's ceiling.
//!
//! GB/s counts bytes as rayo does: inputs read + outputs written (dot 8, sum/max 4, add and
//! the triad 12 bytes per element).
//!
//! Usage: rayo-peers [--quick] [--size N]... [--op dot|max|sum|add|stream_triad]...

use std::hint::black_box;
use std::time::{Duration, Instant};
use trueno::backends::VectorBackend;

/// Median wall time of one call of `f`, in nanoseconds (rayo-cli's `bench::timer::median_ns`).
fn median_ns(sample: Duration, samples: usize, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    f();
    let one = t.elapsed().max(Duration::from_nanos(20));
    let per_sample = ((sample.as_secs_f64() / one.as_secs_f64()) as u64).max(1);
    let mut v: Vec<f64> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per_sample {
                f();
            }
            t.elapsed().as_nanos() as f64 / per_sample as f64
        })
        .collect();
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The STREAM triad, as STREAM's C source writes it.
#[inline(never)]
fn stream_triad(a: &mut [f32], b: &[f32], c: &[f32], q: f32) {
    for ((a, &b), &c) in a.iter_mut().zip(b).zip(c) {
        *a = b + q * c;
    }
}

fn bytes_per(op: &str) -> usize {
    match op {
        "dot" => 8,
        "add" | "stream_triad" => 12,
        _ => 4,
    }
}

/// One kernel of trueno's, for one ISA.
trait Trueno {
    const NAME: &'static str;
    fn available() -> bool;
    fn dot(a: &[f32], b: &[f32]) -> f32;
    fn sum(a: &[f32]) -> f32;
    fn max(a: &[f32]) -> f32;
    fn add(a: &[f32], b: &[f32], out: &mut [f32]);
}

macro_rules! trueno_isa {
    ($ty:ident, $backend:path, $name:literal, $($feat:tt),*) => {
        struct $ty;
        impl Trueno for $ty {
            const NAME: &'static str = $name;
            fn available() -> bool {
                true $(&& std::arch::is_x86_feature_detected!($feat))*
            }
            // SAFETY (all four): `available()` was checked before any call; the slices have
            // equal lengths and are not empty, trueno's preconditions.
            fn dot(a: &[f32], b: &[f32]) -> f32 {
                unsafe { <$backend>::dot(a, b) }
            }
            fn sum(a: &[f32]) -> f32 {
                unsafe { <$backend>::sum(a) }
            }
            fn max(a: &[f32]) -> f32 {
                unsafe { <$backend>::max(a) }
            }
            fn add(a: &[f32], b: &[f32], out: &mut [f32]) {
                unsafe { <$backend>::add(a, b, out) }
            }
        }
    };
}

trueno_isa!(Scalar, trueno::backends::scalar::ScalarBackend, "trueno-scalar",);
trueno_isa!(Sse2, trueno::backends::sse2::Sse2Backend, "trueno-sse2", "sse2");
trueno_isa!(Avx2, trueno::backends::avx2::Avx2Backend, "trueno-avx2", "avx2", "fma");
trueno_isa!(Avx512, trueno::backends::avx512::Avx512Backend, "trueno-avx512", "avx512f");

struct Bench {
    sample: Duration,
    samples: usize,
    n: usize,
}

impl Bench {
    fn row(&self, op: &str, backend: &str, ns: f64) {
        let gbps = (bytes_per(op) * self.n) as f64 / ns;
        println!("{{\"op\":\"{op}\",\"n\":{},\"backend\":\"{backend}\",\"threads\":1,\"ns\":{ns:.1},\"gbps\":{gbps:.3}}}", self.n);
    }

    fn time(&self, f: impl FnMut()) -> f64 {
        median_ns(self.sample, self.samples, f)
    }

    fn trueno<T: Trueno>(&self, op: &str, a: &[f32], b: &[f32], out: &mut [f32]) {
        if !T::available() {
            eprintln!("skip {}: the CPU lacks it", T::NAME);
            return;
        }
        let ns = match op {
            "dot" => self.time(|| {
                black_box(T::dot(black_box(a), black_box(b)));
            }),
            "sum" => self.time(|| {
                black_box(T::sum(black_box(a)));
            }),
            "max" => self.time(|| {
                black_box(T::max(black_box(a)));
            }),
            "add" => self.time(|| T::add(black_box(a), black_box(b), black_box(&mut *out))),
            _ => return,
        };
        self.row(op, T::NAME, ns);
    }

    fn faer(&self, op: &str, a: &[f32], b: &[f32]) {
        use faer::{linalg::matmul::dot::inner_prod, ColRef, Conj, RowRef};
        let ns = match op {
            "dot" => self.time(|| {
                let (x, y) = (RowRef::from_slice(black_box(a)), ColRef::from_slice(black_box(b)));
                black_box(inner_prod(x, Conj::No, y, Conj::No));
            }),
            "sum" => self.time(|| {
                black_box(ColRef::from_slice(black_box(a)).sum());
            }),
            _ => return,
        };
        self.row(op, "faer", ns);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let values = |flag: &str| -> Vec<String> { args.windows(2).filter(|w| w[0] == flag).map(|w| w[1].clone()).collect() };
    let mut sizes: Vec<usize> = values("--size").iter().map(|s| s.parse::<f64>().expect("--size N") as usize).collect();
    if sizes.is_empty() {
        sizes = vec![100_000, 10_000_000];
    }
    let mut ops = values("--op");
    if ops.is_empty() {
        ops = ["dot", "max", "sum", "add", "stream_triad"].map(String::from).to_vec();
    }
    let (sample, samples) = if quick { (Duration::from_millis(10), 3) } else { (Duration::from_millis(200), 7) };
    for &n in &sizes {
        // rayo bench's data (crates/rayo-cli/src/bench/cpu.rs).
        let a: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0).collect();
        let b: Vec<f32> = (0..n).map(|i| ((i * 104_729) % 1000) as f32 / 250.0 + 0.5).collect();
        // The output aligned to 64 bytes: trueno's AVX-512 add (non-temporal stores from 8192
        // elements on) faults on an output that is not, and its AVX2 add streams only into
        // one that is; rayo's bench writes into a plain Vec (rayo aligns its stores itself).
        let mut buf = vec![0.0f32; n + 16];
        let skip = (16 - (buf.as_ptr() as usize / 4) % 16) % 16;
        let out = &mut buf[skip..skip + n];
        let bench = Bench { sample, samples, n };
        for op in &ops {
            if op == "stream_triad" {
                let ns = bench.time(|| stream_triad(black_box(&mut *out), black_box(&b), black_box(&a), 3.0));
                bench.row(op, "stream", ns);
                continue;
            }
            bench.trueno::<Scalar>(op, &a, &b, out);
            bench.trueno::<Sse2>(op, &a, &b, out);
            bench.trueno::<Avx2>(op, &a, &b, out);
            bench.trueno::<Avx512>(op, &a, &b, out);
            bench.faer(op, &a, &b);
        }
    }
}
