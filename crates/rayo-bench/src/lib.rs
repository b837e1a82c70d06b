//! Criterion benchmarks for rayo: `cargo bench -p rayo-bench`. See `benches/`.
