//! wgpu command batches (recording, fusion, one submit), ownership of buffers and batch ids,
//! bad and hostile input, and device loss, run for real (CI: Mesa's lavapipe). Without an
//! adapter every test prints one `SKIP wgpu: <test> (no adapter)` line; with
//! RAYO_REQUIRE_GPU=1 it fails instead.
#![cfg(feature = "gpu")]

mod gpu_support;
use gpu_support::*;
use rayo::gpu::{BinaryOp, GpuCommandBatch, GpuDevice, ReduceOp, UnaryOp};
use rayo::Error;

fn chain_by_op(d: &GpuDevice, x: &[f32], y: &[f32]) -> Vec<f32> {
    let n = x.len();
    let (mut a, mut b, mut c, mut e) = (vec![0.0; n], vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    d.relu(x, &mut a).unwrap();
    d.scale(&a, 2.0, &mut b).unwrap();
    d.vec_add(&b, x, &mut c).unwrap();
    d.vec_mul(&c, y, &mut e).unwrap();
    e
}

#[test]
fn batch_equals_op_by_op_and_fused_equals_unfused() {
    let Some(d) = device("batch_equals_op_by_op_and_fused_equals_unfused") else { return };
    for &n in &[1usize, 257, 4096, 65537] {
        let (x, y) = (data(n, 61, 4.0), data(n, 62, 4.0));
        let want = chain_by_op(&d, &x, &y);
        let mut results = Vec::new();
        for fuse in [true, false] {
            let mut batch = GpuCommandBatch::new(d.clone());
            batch.set_fusion(fuse);
            let input = batch.upload(&x);
            let yy = batch.upload(&y);
            let a = batch.relu(input);
            let b = batch.scale(a, 2.0);
            let c = batch.add(b, input);
            let e = batch.mul(c, yy);
            let s = batch.sum(e);
            let g = batch.gelu(e);
            let mx = batch.max(g);
            block_on(batch.execute()).unwrap();
            let st = batch.stats();
            assert_eq!(st.submits, 1);
            assert_eq!(st.elementwise_ops, 5);
            // relu·scale·add·mul fuse into one kernel; the sum ends the run; gelu is a second.
            assert_eq!(st.elementwise_kernels, if fuse { 2 } else { 5 }, "fuse={fuse}");
            let got = block_on(batch.read(e)).unwrap();
            assert_eq!(got, want, "batch (fuse={fuse}) vs op by op, n={n}");
            // A value fused away inside the kernel is still readable.
            let mid = block_on(batch.read(b)).unwrap();
            let mut b_ref = vec![0.0; n];
            d.relu(&x, &mut b_ref).unwrap();
            let b_ref2: Vec<f32> = b_ref.iter().map(|v| v * 2.0).collect();
            assert_eq!(mid, b_ref2);
            let sum = block_on(batch.read(s)).unwrap();
            let mut gl = vec![0.0; n];
            d.gelu(&want, &mut gl).unwrap();
            assert_eq!(block_on(batch.read(g)).unwrap(), gl);
            assert_eq!(block_on(batch.read(mx)).unwrap()[0], d.max(&gl).unwrap());
            results.push((got, sum));
        }
        assert_eq!(results[0], results[1], "fused == unfused, n={n}");
    }
}

#[test]
fn batch_runs_softmax_matmul_dot() {
    let Some(d) = device("batch_runs_softmax_matmul_dot") else { return };
    let x = data(6 * 4, 71, 2.0);
    let w = data(4 * 5, 72, 2.0);
    let mut batch = GpuCommandBatch::new(d.clone());
    let bx = batch.upload(&x);
    let bw = batch.upload(&w);
    let h = batch.matmul(bx, bw, 6, 4, 5);
    let r = batch.relu(h);
    let p = batch.softmax(r);
    let lp = batch.log_softmax(r);
    let dt = batch.dot(p, r);
    let mn = batch.min(r);
    batch.execute_blocking().unwrap();
    let mut hh = vec![0.0; 30];
    d.matmul(&x, &w, &mut hh, 6, 4, 5).unwrap();
    // (a, b, m, k, n): the host and resident forms' order, checked against f64.
    let (want, mag) = matmul_ref(&x, &w, 6, 4, 5);
    let got = batch.read_blocking(h).unwrap();
    for i in 0..30 {
        assert!((got[i] as f64 - want[i]).abs() <= 1e-6 * mag[i] + 1e-6, "batch matmul [{i}]: {} vs {}", got[i], want[i]);
    }
    let mut rr = vec![0.0; 30];
    d.relu(&hh, &mut rr).unwrap();
    let mut pp = vec![0.0; 30];
    d.softmax(&rr, &mut pp).unwrap();
    assert_eq!(batch.read_blocking(p).unwrap(), pp);
    d.log_softmax(&rr, &mut pp).unwrap();
    assert_eq!(batch.read_blocking(lp).unwrap(), pp);
    d.softmax(&rr, &mut pp).unwrap();
    assert!((batch.read_blocking(dt).unwrap()[0] - d.dot(&pp, &rr).unwrap()).abs() < 1e-5);
    assert_eq!(batch.read_blocking(mn).unwrap()[0], d.min(&rr).unwrap());
}

#[test]
fn bad_input_is_an_error_never_a_panic() {
    let Some(d) = device("bad_input_is_an_error_never_a_panic") else { return };
    let mut out = vec![0.0; 3];
    assert_eq!(d.relu(&[1.0; 4], &mut out), Err(Error::LengthMismatch { op: "relu", expected: 4, actual: 3 }));
    assert_eq!(d.vec_add(&[1.0; 3], &[1.0; 2], &mut out), Err(Error::LengthMismatch { op: "add", expected: 3, actual: 2 }));
    assert!(matches!(d.clip(&[1.0; 3], 2.0, 1.0, &mut out), Err(Error::InvalidParameter { op: "clip", .. })));
    // A NaN alpha is not an error (IEEE products, as on the CPU and in PyTorch): NaN for x ≤ 0.
    d.elu(&[1.0, -1.0, 0.5], f32::NAN, &mut out).unwrap();
    assert!(out[0] == 1.0 && out[1].is_nan() && out[2] == 0.5, "{out:?}");
    assert_eq!(d.dot(&[1.0; 3], &[1.0; 2]), Err(Error::LengthMismatch { op: "dot", expected: 3, actual: 2 }));
    assert_eq!(d.max(&[]), Err(Error::EmptyInput { op: "max" }));
    assert_eq!(d.min(&[]), Err(Error::EmptyInput { op: "min" }));
    assert_eq!(d.softmax(&[], &mut []), Err(Error::EmptyInput { op: "softmax" }));
    assert_eq!(d.log_softmax(&[], &mut []), Err(Error::EmptyInput { op: "log_softmax" }));
    assert_eq!(d.softmax(&[1.0; 2], &mut out), Err(Error::LengthMismatch { op: "softmax", expected: 2, actual: 3 }));
    let mut c = vec![0.0; 6];
    assert_eq!(d.matmul(&[1.0; 5], &[1.0; 6], &mut c, 2, 3, 2), Err(Error::SizeMismatch { op: "matmul", shape: vec![2, 3], len: 5 }));
    assert_eq!(d.matmul(&[1.0; 6], &[1.0; 6], &mut c, 2, 3, 2), Err(Error::SizeMismatch { op: "matmul", shape: vec![2, 2], len: 6 }));
    assert!(matches!(d.matmul(&[], &[], &mut c, usize::MAX, 2, 2), Err(Error::SizeOverflow { op: "matmul", .. })));
    let mut o = vec![0.0; 4];
    assert_eq!(
        d.convolve2d(&[1.0; 4], &[1.0; 9], &mut o, 2, 2, 3, 3),
        Err(Error::ShapeMismatch { op: "convolve2d", left: vec![2, 2], right: vec![3, 3] })
    );
    assert_eq!(d.convolve2d(&[1.0; 4], &[], &mut o, 2, 2, 0, 1), Err(Error::ShapeMismatch { op: "convolve2d", left: vec![2, 2], right: vec![0, 1] }));
    assert_eq!(d.convolve2d(&[1.0; 9], &[1.0; 4], &mut o, 3, 3, 2, 2), Ok(()));
    assert_eq!(o, vec![4.0; 4]);
    assert_eq!(d.convolve2d(&[1.0; 9], &[1.0; 4], &mut out, 3, 3, 2, 2), Err(Error::SizeMismatch { op: "convolve2d", shape: vec![2, 2], len: 3 }));
    // Device-resident shapes.
    let a = d.upload(&[1.0; 4]).unwrap();
    let mut b = d.zeros(3).unwrap();
    assert_eq!(d.apply(UnaryOp::Relu, &a, &mut b), Err(Error::LengthMismatch { op: "relu", expected: 4, actual: 3 }));
    assert!(matches!(d.reduce_resident(ReduceOp::Max, &d.zeros(0).unwrap(), None), Err(Error::EmptyInput { op: "max" })));
    let mut buf = vec![0.0; 2];
    assert!(block_on(a.read_into_async(&mut buf)).is_err());
    // Batches report recording errors at execute, and reads before execute.
    let mut batch = GpuCommandBatch::new(d.clone());
    let p = batch.upload(&[1.0; 3]);
    let q = batch.upload(&[1.0; 4]);
    let r = batch.add(p, q);
    // A read in a batch that failed to record reports that failure.
    assert_eq!(block_on(batch.read(r)), Err(Error::LengthMismatch { op: "add", expected: 3, actual: 4 }));
    assert_eq!(block_on(batch.execute()), Err(Error::LengthMismatch { op: "add", expected: 3, actual: 4 }));
    let mut fine = GpuCommandBatch::new(d.clone());
    let f = fine.upload(&[1.0]);
    assert!(matches!(block_on(fine.read(f)), Err(Error::InvalidArgument { op: "GpuCommandBatch::read", .. })));
    let mut batch = GpuCommandBatch::new(d.clone());
    let e = batch.upload(&[]);
    let _ = batch.max(e);
    assert_eq!(block_on(batch.execute()), Err(Error::EmptyInput { op: "max" }));
    let mut other = GpuCommandBatch::new(d);
    let _ = other.relu(r); // an id this batch never issued
    assert!(matches!(block_on(other.execute()), Err(Error::ForeignBuffer { op: "relu", .. })));
}

/// An id from another batch names a node there too (both batches number their nodes from 0):
/// before ids carried their batch, batch B silently computed on its own node 0.
#[test]
fn a_buffer_id_from_another_batch_is_an_error() {
    let Some(d) = device("a_buffer_id_from_another_batch_is_an_error") else { return };
    let mut a = GpuCommandBatch::new(d.clone());
    let mut b = GpuCommandBatch::new(d.clone());
    assert_ne!(a.id(), b.id());
    let xa = a.upload(&[1.0, -2.0, 3.0]);
    let xb = b.upload(&[10.0, -20.0, 30.0]);
    assert_eq!((xa.batch(), xb.batch()), (a.id(), b.id()));
    let (a_id, b_id) = (a.id(), b.id());
    let foreign = |op| Error::ForeignBuffer { op, user: b_id, owner: a_id };
    assert_eq!(b.len_of(xa), Err(foreign("GpuCommandBatch::len_of")));
    assert_eq!(b.len_of(xb), Ok(3));
    let _ = b.relu(xb);
    b.execute_blocking().unwrap();
    // A read of a foreign id after a good execute.
    assert_eq!(b.read_blocking(xa), Err(foreign("GpuCommandBatch::read")));
    // Every kind of op records the foreign id as the batch's error.
    type Rec = fn(&mut GpuCommandBatch, rayo::gpu::BufferId, rayo::gpu::BufferId) -> rayo::gpu::BufferId;
    let cases: [(&str, Rec); 7] = [
        ("relu", |b, x, _| b.relu(x)),
        ("add", |b, x, y| b.add(y, x)),
        ("sum", |b, x, _| b.sum(x)),
        ("dot", |b, x, y| b.dot(y, x)),
        ("norm_l2", |b, x, _| b.norm_l2(x)),
        ("softmax", |b, x, _| b.softmax_rows(x, 1, 3)),
        ("matmul", |b, x, y| b.matmul(y, x, 1, 3, 1)),
    ];
    for (op, rec) in cases {
        let mut b2 = GpuCommandBatch::new(d.clone());
        let own = b2.upload(&[1.0, 2.0, 3.0]);
        let r = rec(&mut b2, xa, own);
        let want = Error::ForeignBuffer { op, user: b2.id(), owner: a.id() };
        assert_eq!(b2.execute_blocking(), Err(want.clone()), "{op}");
        assert_eq!(b2.read_blocking(r), Err(want), "{op}");
    }
    assert!(foreign("relu").to_string().contains(&a.id().to_string()));
}

/// A device-resident buffer of one device used with another: an error naming both.
#[test]
fn a_buffer_of_another_device_is_an_error() {
    let Some(d) = device("a_buffer_of_another_device_is_an_error") else { return };
    let d2 = block_on(GpuDevice::new_dedicated_async()).unwrap();
    assert_ne!(d.id(), d2.id());
    let x = d2.upload(&[1.0, -1.0]).unwrap();
    let mut out = d.zeros(2).unwrap();
    let foreign = |op| Err(Error::ForeignBuffer { op, user: d.id(), owner: d2.id() });
    assert_eq!(d.apply(UnaryOp::Relu, &x, &mut out), foreign("relu"));
    assert_eq!(d.apply_binary(BinaryOp::Add, &out, &x, &mut d.zeros(2).unwrap()), foreign("add"));
    assert_eq!(d.reduce_resident(ReduceOp::NormL1, &x, None).map(drop), foreign("norm_l1"));
    assert_eq!(d.dot_resident(&out, &x).map(drop), foreign("dot"));
    assert_eq!(d.softmax_rows_resident(&x, 1, 2, &mut out), foreign("softmax"));
    assert_eq!(d.matmul_resident(&x, &d.zeros(2).unwrap(), &mut d.zeros(1).unwrap(), 1, 2, 1), foreign("matmul"));
    // Its own device still takes it.
    let mut o2 = d2.zeros(2).unwrap();
    d2.apply(UnaryOp::Relu, &x, &mut o2).unwrap();
    assert_eq!(o2.read().unwrap(), vec![1.0, 0.0]);
}

/// Sizes near usize::MAX: errors with their numbers, never a panic or a wrapped size (run it in
/// a debug build too, where overflow checks are live).
#[test]
fn hostile_sizes_are_errors_never_panics() {
    let Some(d) = device("hostile_sizes_are_errors_never_panics") else { return };
    let limit = d.max_binding_bytes();
    assert_eq!(d.zeros(1 << 40).unwrap_err(), Error::BufferTooLarge { op: "gpu buffer", bytes: 1 << 42, limit });
    assert!(matches!(d.zeros(usize::MAX), Err(Error::BufferTooLarge { op: "gpu buffer", limit: l, .. }) if l == limit));
    assert!(matches!(d.matmul(&[], &[], &mut [], usize::MAX, 0, usize::MAX), Err(Error::SizeOverflow { op: "matmul", .. })));
    assert_eq!(
        d.softmax_rows(&[], usize::MAX, usize::MAX, &mut []),
        Err(Error::SizeMismatch { op: "softmax", shape: vec![usize::MAX, usize::MAX], len: 0 })
    );
    assert_eq!(
        d.convolve2d(&[], &[1.0], &mut [], usize::MAX, usize::MAX, 1, 1),
        Err(Error::SizeMismatch { op: "convolve2d", shape: vec![usize::MAX, usize::MAX], len: 0 })
    );
    let mut batch = GpuCommandBatch::new(d.clone());
    let e = batch.upload(&[]);
    let _ = batch.matmul(e, e, usize::MAX, 0, usize::MAX);
    assert!(matches!(batch.execute_blocking(), Err(Error::SizeOverflow { op: "matmul", .. })));
    let mut batch = GpuCommandBatch::new(d.clone());
    let e = batch.upload(&[1.0; 4]);
    let _ = batch.softmax_rows(e, usize::MAX, 3);
    assert_eq!(batch.execute_blocking(), Err(Error::SizeMismatch { op: "softmax", shape: vec![usize::MAX, 3], len: 4 }));
    assert!(!rayo::gpu::dispatch::matmul_prefers_gpu(usize::MAX, usize::MAX, usize::MAX));
    assert!(rayo::gpu::dispatch::try_matmul(&[], &[], &mut [], usize::MAX, 2, usize::MAX).is_err());
}

#[test]
fn auto_dispatch_keeps_small_and_software_work_on_the_cpu() {
    use rayo::gpu::dispatch::{matmul_prefers_gpu, try_matmul, MATMUL_CROSSOVER_N};
    let mut c = vec![0.0; 4];
    // Below the crossover: never the GPU.
    assert!(!matmul_prefers_gpu(2, 2, 2));
    assert_eq!(try_matmul(&[1.0; 4], &[1.0; 4], &mut c, 2, 2, 2), Ok(false));
    // Shape errors are errors whatever the size.
    assert!(try_matmul(&[1.0; 3], &[1.0; 4], &mut c, 2, 2, 2).is_err());
    let n = MATMUL_CROSSOVER_N as usize;
    let software = GpuDevice::new().map(|d| d.adapter_info().device_type == "cpu").unwrap_or(true);
    if software {
        // lavapipe (or no adapter): rayo's CPU code is faster, so nothing is offloaded.
        assert!(!matmul_prefers_gpu(n, n, n));
    } else {
        let (a, b) = (data(n * n, 81, 1.0), data(n * n, 82, 1.0));
        let mut c = vec![f32::NAN; n * n];
        assert_eq!(try_matmul(&a, &b, &mut c, n, n, n), Ok(true));
        let mut c2 = vec![0.0; n * n];
        GpuDevice::new().unwrap().matmul(&a, &b, &mut c2, n, n, n).unwrap();
        assert_eq!(c, c2);
    }
}

#[test]
fn a_lost_device_is_an_error_and_the_shared_one_survives() {
    let Some(_) = device("a_lost_device_is_an_error_and_the_shared_one_survives") else { return };
    let d = block_on(GpuDevice::new_dedicated_async()).unwrap();
    let x = d.upload(&[1.0, -1.0]).unwrap();
    d.destroy();
    assert!(d.is_lost());
    let mut out = vec![0.0; 2];
    assert!(matches!(d.relu(&[1.0, -1.0], &mut out), Err(Error::Device { api: "wgpu", .. })));
    assert!(matches!(d.sum(&[1.0]), Err(Error::Device { .. })));
    assert!(matches!(x.read(), Err(Error::Device { .. })));
    assert!(matches!(d.upload(&[1.0]), Err(Error::Device { .. })));
    let mut batch = GpuCommandBatch::new(d.clone());
    let i = batch.upload(&[1.0]);
    let _ = batch.relu(i);
    assert!(matches!(block_on(batch.execute()), Err(Error::Device { .. })));
    // The process's shared device is another device and still works.
    let shared = GpuDevice::new().unwrap();
    assert!(!shared.is_lost());
    assert_eq!(shared.sum(&[1.0, 2.0]).unwrap(), 3.0);
}
