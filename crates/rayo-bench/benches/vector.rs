//! Vector ops at 1K, 100K and 10M on every CPU backend this machine has.
//! `cargo bench -p rayo-bench --bench vector -- 'gelu/avx512'` to pick a few.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rayo::{slice, Backend, Vector};
use std::hint::black_box;

fn inputs(n: usize) -> (Vec<f32>, Vec<f32>) {
    let a = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0).collect();
    let b = (0..n).map(|i| ((i * 104_729) % 1000) as f32 / 250.0 + 0.5).collect();
    (a, b)
}

fn bench(c: &mut Criterion) {
    for n in [1_000usize, 100_000, 10_000_000] {
        let (a, b) = inputs(n);
        let mut out = vec![0.0f32; n];
        for backend in Backend::available() {
            let name = backend.name();
            let mut g = c.benchmark_group(format!("n{n}"));
            g.throughput(Throughput::Bytes(12 * n as u64));
            g.bench_function(BenchmarkId::new("add", name), |bch| bch.iter(|| slice::add(backend, black_box(&a), &b, &mut out)));
            g.throughput(Throughput::Bytes(8 * n as u64));
            g.bench_function(BenchmarkId::new("dot", name), |bch| bch.iter(|| slice::dot(backend, black_box(&a), &b)));
            g.throughput(Throughput::Bytes(4 * n as u64));
            g.bench_function(BenchmarkId::new("sum", name), |bch| bch.iter(|| slice::sum(backend, black_box(&a))));
            g.bench_function(BenchmarkId::new("max", name), |bch| bch.iter(|| slice::max(backend, black_box(&a))));
            g.throughput(Throughput::Bytes(8 * n as u64));
            type Unary = fn(Backend, &[f32], &mut [f32]) -> rayo::Result<()>;
            let ops: [(&str, Unary); 6] = [
                ("exp", slice::exp),
                ("sigmoid", slice::sigmoid),
                ("tanh", slice::tanh),
                ("gelu", slice::gelu),
                ("relu", slice::relu),
                ("softmax", slice::softmax),
            ];
            for (op, f) in ops {
                g.bench_function(BenchmarkId::new(op, name), |bch| bch.iter(|| f(backend, black_box(&a), &mut out)));
            }
            g.finish();
        }
        // Allocating form vs `_into`: the pool keeps them within a few percent at 10M.
        let (va, vb) = (Vector::from_slice(&a), Vector::from_slice(&b));
        let mut g = c.benchmark_group(format!("n{n}"));
        g.throughput(Throughput::Bytes(12 * n as u64));
        g.bench_function("add_alloc", |bch| bch.iter(|| va.add(black_box(&vb))));
        g.bench_function("add_into", |bch| bch.iter(|| va.add_into(black_box(&vb), &mut out)));
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
