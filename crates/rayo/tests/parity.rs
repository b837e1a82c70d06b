//! Every op of the registry × every backend this machine has, against the op's f64 reference:
//! awkward lengths, unaligned slices, NaN, ±inf, ±0, denormals, huge and tiny values, and every
//! pair of special values for the binary ops. The bounds are the ones each op's definition
//! states (`rayo::ops`). GPU backends may flush denormal inputs and results to zero.
//!
//! Prints one line per backend with what ran, and a `SKIP` line for each backend missing here.

mod common;
use common::*;
use rayo::ops::{BinaryOp, Bound, UnaryOp};
use rayo::{slice, Backend};

/// Inputs for one length: specials first (every one, when the length allows), then values
/// spread over the range where the ops change behaviour.
fn inputs(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    let mut v: Vec<f32> = SPECIALS.iter().copied().chain([1.0, -1.0, 0.5, -3.0, 3.0, 20.5, -20.5, 89.0, -104.5]).take(n).collect();
    while v.len() < n {
        let r = rng.next_u64() % 4;
        v.push(match r {
            0 => rng.uniform(-4.0, 4.0),
            1 => rng.uniform(-30.0, 30.0),
            2 => rng.uniform(-100.0, 100.0),
            _ => rng.uniform(1e-6, 2.0) * if rng.next_u64() % 2 == 0 { 1.0 } else { -1.0 },
        });
    }
    v
}

/// The spacing of f32 values at |m| (the smallest denormal below the normal range).
fn ulp_at(m: f64) -> f64 {
    let a = (m.abs() as f32).min(f32::MAX);
    if a < f32::MIN_POSITIVE {
        return f32::from_bits(1) as f64;
    }
    (f32::from_bits(a.to_bits() + 1) - a) as f64
}

/// Whether `got` is within `bound` of `want`; NaN matches NaN, infinities and the sign of a
/// zero must match exactly.
fn within(got: f32, want: f64, magnitude: f64, bound: Bound) -> bool {
    if magnitude.is_infinite() && !want.is_nan() && (got.is_nan() || got.is_infinite()) {
        // An intermediate overflowed (axpy's α·x): unfused hardware gives the IEEE sum.
        return true;
    }
    if got.is_nan() || want.is_nan() {
        return got.is_nan() && want.is_nan();
    }
    let w = want as f32;
    if w.is_infinite() || got.is_infinite() {
        return got == w;
    }
    if want == 0.0 && got == 0.0 {
        return got.is_sign_negative() == want.is_sign_negative();
    }
    if bound == Bound::EXACT {
        return got == w;
    }

    (got as f64 - want).abs() <= bound.ulp * ulp_at(magnitude) + bound.abs
}

#[allow(dead_code)]
fn ftz(x: f32) -> f32 {
    if x != 0.0 && x.abs() < f32::MIN_POSITIVE {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// A GPU result: as the CPU's, or as if denormal inputs or results were flushed to zero.
#[allow(dead_code)]
fn within_gpu(got: f32, xs: &[f32], eval: &dyn Fn(&[f64]) -> (f64, f64), bound: Bound) -> bool {
    let exact: Vec<f64> = xs.iter().map(|&x| x as f64).collect();
    let (want, mag) = eval(&exact);
    if within(got, want, mag, bound) {
        return true;
    }
    let flushed: Vec<f64> = xs.iter().map(|&x| ftz(x) as f64).collect();
    let (want_f, mag_f) = eval(&flushed);
    if within(got, want_f, mag_f, bound) {
        return true;
    }
    // A denormal result flushed to (either) zero, or a denormal that a flushing GPU treats as
    // zero (an unflushed operand passed through max/min/select).
    if got == 0.0 && ((want as f32).abs() < f32::MIN_POSITIVE || (want_f as f32).abs() < f32::MIN_POSITIVE) {
        return true;
    }
    got != ftz(got) && within(ftz(got), want_f, mag_f, bound)
}

/// Collects mismatches of one op on one backend (the first few are reported).
struct Report {
    failures: Vec<String>,
    checked: usize,
}

impl Report {
    fn new() -> Report {
        Report { failures: vec![], checked: 0 }
    }
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        self.checked += 1;
        if !ok && self.failures.len() < 40 {
            self.failures.push(what());
        }
    }
    /// Adds this op's mismatches to `all` (reported together at the end of the test).
    fn finish(self, title: &str, all: &mut Vec<String>) -> usize {
        if !self.failures.is_empty() {
            all.push(format!("{title}: {} mismatches, first:\n  {}", self.failures.len(), self.failures[..self.failures.len().min(6)].join("\n  ")));
        }
        self.checked
    }
}

fn assert_none(failures: Vec<String>) {
    assert!(failures.is_empty(), "{} op/backend pairs failed:\n{}", failures.len(), failures.join("\n"));
}

/// Every special value paired with every special value and a few ordinary ones.
fn binary_inputs(n: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut pool: Vec<f32> = SPECIALS.to_vec();
    pool.extend([1.0, -1.0, 2.5, -7.0, 1e30, -1e-30]);
    let (mut a, mut b) = (vec![], vec![]);
    for &x in &pool {
        for &y in &pool {
            a.push(x);
            b.push(y);
        }
    }
    let mut rng = Rng::new(seed);
    while a.len() < n {
        a.push(rng.uniform(-100.0, 100.0));
        b.push(rng.uniform(-100.0, 100.0));
    }
    a.truncate(n.max(1).min(a.len()));
    b.truncate(a.len());
    (a, b)
}

/// The lengths each op runs at (a subset of `LENGTHS` keeps the GPU part quick).
const PARITY_LENGTHS: [usize; 10] = [0, 1, 3, 7, 8, 17, 33, 65, 1000, 4097];

#[test]
fn every_unary_op_on_every_cpu_backend_matches_f64() {
    let (mut total, mut fails) = (0, vec![]);
    for b in backends("parity cpu") {
        for op in UnaryOp::all() {
            let mut r = Report::new();
            for (li, &n) in PARITY_LENGTHS.iter().enumerate() {
                // One element more, used from index 1: the input is not 16-byte aligned.
                let buf = inputs(n + 1, li as u64 + 7);
                let x = &buf[1..];
                let mut out = vec![0.0f32; n + 1];
                slice::unary(b, op, x, &mut out[1..]).unwrap();
                for (i, (&xi, &got)) in x.iter().zip(&out[1..]).enumerate() {
                    let want = op.reference(xi as f64);
                    r.check(within(got, want, want, op.cpu_bound()), || format!("{}({xi:e}) = {got:e}, want {want:e} (n={n}, i={i})", op.name()));
                }
            }
            total += r.finish(&format!("{} on {b}", op.name()), &mut fails);
        }
        for op in BinaryOp::all() {
            let mut r = Report::new();
            for (li, &n) in PARITY_LENGTHS.iter().chain(&[400]).enumerate() {
                let (a, bb) = binary_inputs(n, li as u64);
                let mut out = vec![0.0f32; a.len()];
                slice::binary(b, op, &a, &bb, &mut out).unwrap();
                for i in 0..a.len() {
                    let (x, y) = (a[i] as f64, bb[i] as f64);
                    let want = op.reference(x, y);
                    let got = out[i];
                    r.check(within(got, want, op.magnitude(x, y), op.cpu_bound()), || {
                        format!("{}({x:e}, {y:e}) = {got:e}, want {want:e}", op.name())
                    });
                }
            }
            total += r.finish(&format!("{} on {b}", op.name()), &mut fails);
        }
    }
    println!("parity cpu: {} unary and {} binary ops, {total} values checked", UnaryOp::all().len(), BinaryOp::all().len());
    assert_none(fails);
}

/// A wrong number of reduction inputs is the same error on every backend (`check_args`).
#[test]
fn reduction_argument_errors_are_the_same_variant_on_the_cpu() {
    use rayo::ops::ReduceOp;
    let x = [1.0f32, 2.0];
    assert!(matches!(slice::reduce(Backend::Scalar, ReduceOp::Dot, &x, None), Err(rayo::Error::InvalidArgument { name: "y", .. })));
    assert!(matches!(slice::reduce(Backend::Scalar, ReduceOp::Sum, &x, Some(&x)), Err(rayo::Error::InvalidArgument { name: "y", .. })));
    assert!(matches!(
        slice::reduce(Backend::Scalar, ReduceOp::Dot, &x, Some(&x[..1])),
        Err(rayo::Error::LengthMismatch { expected: 2, actual: 1, .. })
    ));
}

#[test]
fn bad_parameters_are_errors_on_the_cpu() {
    let x = [1.0f32, 2.0];
    let mut out = [0.0f32; 2];
    for op in [UnaryOp::Clip(1.0, 0.0), UnaryOp::Clip(f32::NAN, 1.0), UnaryOp::Clip(0.0, f32::NAN)] {
        assert!(matches!(slice::unary(Backend::Scalar, op, &x, &mut out), Err(rayo::Error::InvalidParameter { .. })), "{op:?}");
    }
    assert!(slice::unary(Backend::Scalar, UnaryOp::Relu, &x, &mut out[..1]).is_err());
}

#[test]
fn the_registry_names_every_op_once() {
    // One namespace for benches and errors: element-wise and reduction names never collide.
    let mut names: Vec<&str> = UnaryOp::all().iter().map(|o| o.name()).chain(BinaryOp::all().iter().map(|o| o.name())).collect();
    names.extend(rayo::ops::ReduceOp::ALL.iter().map(|o| o.name()));
    let n = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), n, "duplicate op names");
    for op in UnaryOp::all() {
        assert_eq!(UnaryOp::from_name(op.name()), Some(op));
        assert!(op.validate().is_ok(), "sample parameters of {op:?}");
    }
    for op in BinaryOp::all() {
        assert_eq!(BinaryOp::from_name(op.name()), Some(op));
    }
}

/// Runs a unary op on a GPU backend: host input in, host output back.
#[allow(dead_code)]
type RunUnary<'a> = dyn Fn(UnaryOp, &[f32]) -> Vec<f32> + 'a;
/// Runs a binary op on a GPU backend.
#[allow(dead_code)]
type RunBinary<'a> = dyn Fn(BinaryOp, &[f32], &[f32]) -> Vec<f32> + 'a;

/// Every unary and binary op on one GPU backend (`unary`/`binary` run an op on host data and
/// return the output) against f64, with the GPU bounds; prints what ran, fails with every
/// mismatching op.
#[allow(dead_code)]
fn check_gpu_ops(backend: &str, unary: &RunUnary, binary: &RunBinary) {
    let (mut total, mut fails) = (0, vec![]);
    for op in UnaryOp::all() {
        let mut r = Report::new();
        for (li, &n) in PARITY_LENGTHS.iter().enumerate() {
            let x = inputs(n, li as u64 + 7);
            let out = unary(op, &x);
            for (i, (&xi, &got)) in x.iter().zip(&out).enumerate() {
                let eval = |v: &[f64]| {
                    let w = op.reference(v[0]);
                    (w, w)
                };
                r.check(within_gpu(got, &[xi], &eval, op.gpu_bound()), || {
                    format!("{}({xi:e}) = {got:e}, want {:e} (n={n}, i={i})", op.name(), op.reference(xi as f64))
                });
            }
        }
        total += r.finish(&format!("{} on {backend}", op.name()), &mut fails);
    }
    for op in BinaryOp::all() {
        let mut r = Report::new();
        for (li, &n) in PARITY_LENGTHS.iter().chain(&[400]).enumerate() {
            let (a, b) = binary_inputs(n, li as u64);
            let out = binary(op, &a, &b);
            for i in 0..a.len() {
                let eval = |v: &[f64]| (op.reference(v[0], v[1]), op.magnitude(v[0], v[1]));
                let got = out[i];
                r.check(within_gpu(got, &[a[i], b[i]], &eval, op.gpu_bound()), || {
                    format!("{}({:e}, {:e}) = {got:e}, want {:e}", op.name(), a[i], b[i], op.reference(a[i] as f64, b[i] as f64))
                });
            }
        }
        total += r.finish(&format!("{} on {backend}", op.name()), &mut fails);
    }
    println!("parity {backend}: {} unary and {} binary ops, {total} values checked", UnaryOp::all().len(), BinaryOp::all().len());
    assert_none(fails);
}

#[cfg(feature = "gpu")]
#[test]
fn every_op_on_wgpu_matches_f64() {
    use rayo::gpu::GpuDevice;
    if !GpuDevice::is_available() {
        assert!(std::env::var("RAYO_REQUIRE_GPU").is_err(), "RAYO_REQUIRE_GPU is set but no wgpu adapter was found");
        println!("SKIP wgpu: every_op_on_wgpu_matches_f64 (no adapter)");
        return;
    }
    let dev = GpuDevice::new().unwrap();
    let unary = |op: UnaryOp, x: &[f32]| {
        let mut out = vec![0.0f32; x.len()];
        dev.unary(op, x, &mut out).unwrap();
        out
    };
    let binary = |op: BinaryOp, a: &[f32], b: &[f32]| {
        let mut out = vec![0.0f32; a.len()];
        dev.binary(op, a, b, &mut out).unwrap();
        out
    };
    check_gpu_ops(&format!("wgpu ({})", dev.adapter_info().name), &unary, &binary);
}

#[cfg(feature = "cuda")]
#[test]
fn every_op_on_cuda_matches_f64() {
    use rayo::cuda::{CudaDevice, Expr};
    let dev = match CudaDevice::new() {
        Ok(d) => d,
        Err(e) => {
            assert!(std::env::var("RAYO_REQUIRE_CUDA").is_err(), "RAYO_REQUIRE_CUDA is set but: {e}");
            println!("SKIP cuda: every_op_on_cuda_matches_f64 ({e})");
            return;
        }
    };
    // Each op as the one-op fused kernel on device buffers.
    let run = |e: Expr, ins: &[&[f32]]| {
        let bufs: Vec<_> = ins.iter().map(|x| dev.upload(x).unwrap()).collect();
        let refs: Vec<_> = bufs.iter().collect();
        let mut out = dev.zeros(ins[0].len()).unwrap();
        dev.elementwise(&e, &refs, &mut out).unwrap();
        dev.download(&out).unwrap()
    };
    let unary = |op: UnaryOp, x: &[f32]| run(Expr::input(0).apply(op), &[x]);
    let binary = |op: BinaryOp, a: &[f32], b: &[f32]| run(Expr::input(0).combine(op, Expr::input(1)), &[a, b]);
    check_gpu_ops(&format!("cuda ({})", dev.info().name), &unary, &binary);
}

/// The fused element-wise kernel of every op passes rayo-ptx's checker and NVIDIA's `ptxas`
/// for sm_80 and sm_90 (`RAYO_PTXAS`, set by scripts/test.sh; `RAYO_REQUIRE_PTXAS=1` fails
/// without it). Runs without a GPU.
#[cfg(feature = "cuda")]
#[test]
fn every_fused_kernel_assembles_with_ptxas() {
    use rayo::cuda::{elementwise_variants, Kernel};
    let variants = elementwise_variants();
    assert_eq!(variants.len(), UnaryOp::all().len() + BinaryOp::all().len() + 1);
    for k in &variants {
        for sm in [80, 90] {
            k.check(sm).unwrap_or_else(|e| panic!("{}: checker: {e}", k.name()));
        }
    }
    let Some(ptxas) = std::env::var_os("RAYO_PTXAS") else {
        assert!(std::env::var("RAYO_REQUIRE_PTXAS").map(|v| v != "1").unwrap_or(true), "RAYO_REQUIRE_PTXAS=1 but RAYO_PTXAS is not set");
        println!("SKIP ptxas: every_fused_kernel_assembles_with_ptxas (RAYO_PTXAS not set)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("rayo-fused-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for k in &variants {
        for sm in [80, 90] {
            let file = dir.join(format!("{}_sm{sm}.ptx", k.name()));
            std::fs::write(&file, k.emit_ptx_for(sm)).unwrap();
            let out = std::process::Command::new(&ptxas)
                .arg(format!("-arch=sm_{sm}"))
                .arg(&file)
                .arg("-o")
                .arg(file.with_extension("cubin"))
                .output()
                .expect("run ptxas");
            assert!(out.status.success(), "ptxas rejected {} for sm_{sm}:\n{}", k.name(), String::from_utf8_lossy(&out.stderr));
        }
    }
    println!("ptxas: {} fused kernels assembled for sm_80 and sm_90", variants.len());
}

/// Shapes and constants are kernel arguments: 1,000 expressions with different constants and
/// parameters map to one kernel name per shape of expression (the module cache key).
#[cfg(feature = "cuda")]
#[test]
fn fused_kernel_names_do_not_depend_on_constants() {
    use rayo::cuda::{Expr, FusedKernel, Kernel};
    let mut names = std::collections::HashSet::new();
    for i in 0..1000 {
        let c = i as f32 * 0.37 - 100.0;
        let e = Expr::input(0).scale(c).add(Expr::constant(-c)).clip(c - 1.0, c + 1.0).leaky_relu(0.01 * i as f32);
        names.insert(FusedKernel::new(&e).unwrap().name());
        names.insert(FusedKernel::new(&Expr::input(0).elu(1.0 + i as f32)).unwrap().name());
    }
    assert_eq!(names.len(), 2, "{names:?}");
}

/// Whether a reduction result is right: NaN/inf exactly, max/min exactly, sums within
/// (n + 2)·ε·Σ|term| (f32 partial sums).
fn reduce_ok(op: rayo::ops::ReduceOp, got: f32, x: &[f32], y: Option<&[f32]>) -> bool {
    use rayo::ops::{ReduceCombine, ReduceLoad};
    let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    let yd: Option<Vec<f64>> = y.map(|y| y.iter().map(|&v| v as f64).collect());
    let Some(want) = op.reference(&xd, yd.as_deref()) else { return false };
    if want.is_nan() || got.is_nan() || want.is_infinite() || got.is_infinite() || op.combine() != ReduceCombine::Sum {
        return within(got, want, want, Bound::EXACT) || (want.is_nan() && got.is_nan());
    }
    let scale: f64 = (0..x.len())
        .map(|i| match op.load() {
            ReduceLoad::Plain | ReduceLoad::Abs => xd[i].abs(),
            ReduceLoad::Square => xd[i] * xd[i],
            ReduceLoad::Product => (xd[i] * yd.as_ref().unwrap()[i]).abs(),
        })
        .sum();
    let scale = op.finish(scale);
    (got as f64 - want).abs() <= (x.len() as f64 + 2.0) * f32::EPSILON as f64 * scale + 1e-38
}

#[test]
fn every_reduction_on_every_cpu_backend_matches_f64() {
    use rayo::ops::ReduceOp;
    let mut fails = vec![];
    for b in backends("parity reduce cpu") {
        for op in ReduceOp::ALL {
            for (li, &n) in PARITY_LENGTHS.iter().chain(&[100_003]).enumerate() {
                for specials in [false, true] {
                    let mut rng = Rng::new(li as u64 * 2 + specials as u64);
                    let x = if specials { rng.data_with_specials(n, -50.0, 50.0) } else { rng.data(n, -50.0, 50.0) };
                    let y = rng.data(n, -2.0, 2.0);
                    let yo = (op.arity() == 2).then_some(&y[..]);
                    match slice::reduce(b, op, &x, yo) {
                        Ok(got) if reduce_ok(op, got, &x, yo) => {}
                        Err(rayo::Error::EmptyInput { .. }) if n == 0 && op.empty_value().is_none() => {}
                        r => fails.push(format!("{} on {b}, n={n}, specials={specials}: {r:?}", op.name())),
                    }
                }
            }
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// The f64 softmax (or log-softmax) of a row: every output NaN when any input is NaN or the
/// maximum is infinite (as the CPU documents).
fn softmax_ref(x: &[f32], log: bool) -> Vec<f64> {
    let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| if v.is_nan() || m.is_nan() { f64::NAN } else { m.max(v as f64) });
    if !m.is_finite() {
        return vec![f64::NAN; x.len()];
    }
    let s: f64 = x.iter().map(|&v| (v as f64 - m).exp()).sum();
    x.iter().map(|&v| if log { (v as f64 - m) - s.ln() } else { (v as f64 - m).exp() / s }).collect()
}

/// Row inputs for the softmax checks: ordinary rows, rows with ±inf, −0, denormals, and a NaN.
fn softmax_rows() -> Vec<Vec<f32>> {
    let mut rng = Rng::new(99);
    let mut rows: Vec<Vec<f32>> = [1usize, 3, 17, 1000, 4097].iter().map(|&n| rng.data(n, -30.0, 30.0)).collect();
    rows.push(vec![-0.0, 0.0, 1e-40, -1e-45, 3.0]);
    rows.push(vec![1.0, f32::NEG_INFINITY, 2.0]);
    rows.push(vec![1.0, f32::INFINITY, 2.0]);
    rows.push(vec![1.0, f32::NAN, 2.0]);
    rows
}

/// `got` within `rel`·|want| + `abs` of the f64 softmax of `x`, NaN matching NaN.
fn softmax_ok(got: &[f32], x: &[f32], log: bool, rel: f64, abs: f64) -> Result<(), String> {
    let want = softmax_ref(x, log);
    for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
        let ok = if w.is_nan() || g.is_nan() {
            w.is_nan() && g.is_nan()
        } else if w.is_infinite() {
            g as f64 == w
        } else {
            (g as f64 - w).abs() <= rel * w.abs() + abs
        };
        if !ok {
            return Err(format!("n={} [{i}]: got {g:e}, want {w:e}", x.len()));
        }
    }
    Ok(())
}

#[test]
fn softmax_on_every_cpu_backend_matches_f64() {
    let mut fails = vec![];
    for b in backends("parity softmax cpu") {
        for x in softmax_rows() {
            for log in [false, true] {
                let mut out = vec![0.0f32; x.len()];
                if log { slice::log_softmax(b, &x, &mut out) } else { slice::softmax(b, &x, &mut out) }.unwrap();
                if let Err(e) = softmax_ok(&out, &x, log, 1e-6, 2e-6) {
                    fails.push(format!("{} on {b}: {e}", if log { "log_softmax" } else { "softmax" }));
                }
            }
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// Runs a reduction on a GPU backend (host data in, the value back).
#[allow(dead_code)]
type RunReduce<'a> = dyn Fn(rayo::ops::ReduceOp, &[f32], Option<&[f32]>) -> rayo::Result<f32> + 'a;
/// Runs softmax (or log_softmax, `true`) of one row on a GPU backend.
#[allow(dead_code)]
type RunSoftmax<'a> = dyn Fn(&[f32], bool) -> Vec<f32> + 'a;

/// Every reduction (with and without special values; the input flushed as a GPU may) and
/// softmax/log_softmax rows on one GPU backend against f64.
#[allow(dead_code)]
fn check_gpu_reductions(backend: &str, reduce: &RunReduce, softmax: &RunSoftmax) {
    use rayo::ops::ReduceOp;
    let mut fails = vec![];
    for op in ReduceOp::ALL {
        for (li, &n) in PARITY_LENGTHS.iter().chain(&[100_003]).enumerate() {
            for specials in [false, true] {
                let mut rng = Rng::new(li as u64 * 2 + specials as u64);
                let x = if specials { rng.data_with_specials(n, -50.0, 50.0) } else { rng.data(n, -50.0, 50.0) };
                let y = rng.data(n, -2.0, 2.0);
                let yo = (op.arity() == 2).then_some(&y[..]);
                let xf: Vec<f32> = x.iter().map(|&v| ftz(v)).collect();
                match reduce(op, &x, yo) {
                    Ok(got) if reduce_ok(op, got, &x, yo) || reduce_ok(op, got, &xf, yo) => {}
                    Err(rayo::Error::EmptyInput { .. }) if n == 0 && op.empty_value().is_none() => {}
                    r => fails.push(format!("{} on {backend}, n={n}, specials={specials}: {r:?}", op.name())),
                }
            }
        }
    }
    for x in softmax_rows() {
        for log in [false, true] {
            if let Err(e) = softmax_ok(&softmax(&x, log), &x, log, 4e-6, 4e-6) {
                fails.push(format!("{} on {backend}: {e}", if log { "log_softmax" } else { "softmax" }));
            }
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

#[cfg(feature = "cuda")]
#[test]
fn reductions_and_softmax_on_cuda_match_f64() {
    use rayo::cuda::CudaDevice;
    let dev = match CudaDevice::new() {
        Ok(d) => d,
        Err(e) => {
            assert!(std::env::var("RAYO_REQUIRE_CUDA").is_err(), "RAYO_REQUIRE_CUDA is set but: {e}");
            println!("SKIP cuda: reductions_and_softmax_on_cuda_match_f64 ({e})");
            return;
        }
    };
    let reduce = |op, x: &[f32], y: Option<&[f32]>| {
        let xd = dev.upload(x)?;
        let yd = y.map(|y| dev.upload(y)).transpose()?;
        dev.reduce(op, &xd, yd.as_ref())
    };
    let softmax = |x: &[f32], log: bool| {
        let xd = dev.upload(x).unwrap();
        let mut od = dev.zeros(x.len()).unwrap();
        if log { dev.log_softmax(&xd, &mut od) } else { dev.softmax(&xd, &mut od) }.unwrap();
        dev.download(&od).unwrap()
    };
    check_gpu_reductions("cuda", &reduce, &softmax);
}

#[cfg(feature = "gpu")]
#[test]
fn reductions_and_softmax_on_wgpu_match_f64() {
    use rayo::gpu::GpuDevice;
    if !GpuDevice::is_available() {
        assert!(std::env::var("RAYO_REQUIRE_GPU").is_err(), "RAYO_REQUIRE_GPU is set but no wgpu adapter was found");
        println!("SKIP wgpu: reductions_and_softmax_on_wgpu_match_f64 (no adapter)");
        return;
    }
    let dev = GpuDevice::new().unwrap();
    let reduce = |op, x: &[f32], y: Option<&[f32]>| dev.reduce(op, x, y);
    let softmax = |x: &[f32], log: bool| {
        let mut out = vec![0.0f32; x.len()];
        if log { dev.log_softmax(x, &mut out) } else { dev.softmax(x, &mut out) }.unwrap();
        out
    };
    check_gpu_reductions("wgpu", &reduce, &softmax);
}
