//! Every op on every instruction set this CPU has, against the f64 reference: random inputs
//! with special values, every length in `LENGTHS`, input and output slices starting one
//! element past an aligned address, and through the `Vector` API.

mod common;
use common::*;
use rayo::{slice, Backend, Vector};

/// A 64-byte aligned buffer of `n + 1` elements; the test uses `[1..]`, one element past it.
fn unaligned(data: &[f32]) -> Vec<f32> {
    let mut v = Vec::with_capacity(data.len() + 16);
    let pad = (v.as_ptr() as usize / 4) % 16; // elements past a 64-byte boundary
    v.resize((16 - pad) % 16, 0.0);
    v.push(0.0); // the one-element offset
    v.extend_from_slice(data);
    v
}

fn start(v: &[f32], n: usize) -> usize {
    v.len() - n
}

type Unary = (&'static str, fn(Backend, &[f32], &mut [f32]) -> rayo::Result<()>, fn(f64) -> f64, f64);

fn unary_ops() -> Vec<Unary> {
    vec![
        ("relu", slice::relu, relu, 0.0),
        ("abs", slice::abs, f64::abs, 0.0),
        ("sqrt", slice::sqrt, f64::sqrt, 0.5),
        ("exp", slice::exp, f64::exp, 2.0),
        ("ln", slice::ln, f64::ln, 2.0),
        ("sigmoid", slice::sigmoid, sigmoid, 3.0),
        ("tanh", slice::tanh, f64::tanh, 2.0),
        ("swish", slice::swish, swish, 4.0),
        ("selu", slice::selu, selu, 3.0),
        ("hardswish", slice::hardswish, hardswish, 2.0),
        ("gelu", slice::gelu, gelu, 4.0),
        ("mish", slice::mish, mish, 4.0),
    ]
}

fn check_unary(b: Backend, name: &str, x: &[f32], got: &[f32], r: fn(f64) -> f64, ulp: f64) {
    for (i, (&xi, &g)) in x.iter().zip(got).enumerate() {
        let want = r(xi as f64);
        let ok = close(g, want, ulp) || ((want.abs() < 1e-30 || xi.abs() > 88.0) && (g as f64 - want).abs() <= 1.5e-37);
        assert!(ok, "{b} {name}[{i}] of n={}: f({xi:e}) = {g:e}, want {want:e}", x.len());
    }
}

#[test]
fn unary_ops_match_reference() {
    let mut rng = Rng::new(1);
    for b in backends("unary_ops_match_reference") {
        for &n in &LENGTHS {
            let x = unaligned(&rng.data_with_specials(n, -30.0, 30.0));
            let xs = &x[start(&x, n)..];
            let mut out = unaligned(&vec![f32::NAN; n]);
            let s = start(&out, n);
            for &(name, op, r, ulp) in &unary_ops() {
                out[s..].fill(12345.0); // poison: every element must be written
                op(b, xs, &mut out[s..]).unwrap();
                check_unary(b, name, xs, &out[s..], r, ulp);
            }
            slice::leaky_relu(b, xs, 0.1, &mut out[s..]).unwrap();
            check_unary(b, "leaky_relu", xs, &out[s..], |v| ((leaky_relu(v, 0.1f32 as f64)) as f32) as f64, 0.5);
            slice::elu(b, xs, 0.5, &mut out[s..]).unwrap();
            check_unary(b, "elu", xs, &out[s..], |v| elu(v, 0.5), 3.0);
            slice::scale(b, xs, -2.5, &mut out[s..]).unwrap();
            check_unary(b, "scale", xs, &out[s..], |v| v * -2.5, 0.5);
            slice::clip(b, xs, -1.5, 2.0, &mut out[s..]).unwrap();
            check_unary(b, "clip", xs, &out[s..], |v| if v.is_nan() { v } else { v.clamp(-1.5, 2.0) }, 0.0);
        }
    }
}

#[test]
fn binary_ops_match_reference() {
    let mut rng = Rng::new(2);
    type Bin = (&'static str, fn(Backend, &[f32], &[f32], &mut [f32]) -> rayo::Result<()>, fn(f64, f64) -> f64);
    let ops: [Bin; 4] =
        [("add", slice::add, |a, b| a + b), ("sub", slice::sub, |a, b| a - b), ("mul", slice::mul, |a, b| a * b), ("div", slice::div, |a, b| a / b)];
    for b in backends("binary_ops_match_reference") {
        for &n in &LENGTHS {
            let x = unaligned(&rng.data_with_specials(n, -1e3, 1e3));
            let y = unaligned(&rng.data_with_specials(n, -1e3, 1e3));
            let (xs, ys) = (&x[start(&x, n)..], &y[start(&y, n)..]);
            let mut out = unaligned(&vec![0.0; n]);
            let s = start(&out, n);
            for (name, op, r) in ops {
                out[s..].fill(12345.0);
                op(b, xs, ys, &mut out[s..]).unwrap();
                for i in 0..n {
                    let want = r(xs[i] as f64, ys[i] as f64);
                    // The f32 op is the correctly rounded f64 result (denormal flushes aside).
                    assert!(
                        close(out[s + i], want, 0.5) || (want.abs() < 1e-37 && out[s + i].abs() < 1e-37),
                        "{b} {name}({:e}, {:e}) = {:e}, want {want:e}",
                        xs[i],
                        ys[i],
                        out[s + i]
                    );
                }
            }
        }
    }
}

fn ref_sum(x: &[f32]) -> f64 {
    x.iter().map(|&v| v as f64).sum()
}

/// |got − want| within `k·ε·scale` (the documented blocked-sum bound).
fn near(got: f32, want: f64, scale: f64) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    if want.is_infinite() {
        return got as f64 == want;
    }
    (got as f64 - want).abs() <= 128.0 * f32::EPSILON as f64 * scale + 1e-30
}

#[test]
fn reductions_match_reference() {
    let mut rng = Rng::new(3);
    for b in backends("reductions_match_reference") {
        for &n in &LENGTHS {
            for with_specials in [false, true] {
                // Specials, but no finite value large enough to overflow an f32 partial sum:
                // f32 accumulation of 3e38-sized terms overflows where f64 does not.
                let raw: Vec<f32> = if with_specials { rng.data_with_specials(n, -100.0, 100.0) } else { rng.data(n, -100.0, 100.0) }
                    .into_iter()
                    .map(|v| if v.is_finite() { v.clamp(-1e6, 1e6) } else { v })
                    .collect();
                let raw2 = rng.data(n, -100.0, 100.0);
                let x = unaligned(&raw);
                let y = unaligned(&raw2);
                let (xs, ys) = (&x[start(&x, n)..], &y[start(&y, n)..]);
                let abs_sum: f64 = xs.iter().map(|&v| (v as f64).abs()).sum();
                let has_nan = xs.iter().any(|v| v.is_nan());

                let s = slice::sum(b, xs);
                assert!(near(s, ref_sum(xs), abs_sum), "{b} sum n={n}: {s} vs {}", ref_sum(xs));
                let l1 = slice::norm_l1(b, xs);
                assert!(near(l1, abs_sum, abs_sum), "{b} norm_l1 n={n}");
                let sq: f64 = xs.iter().map(|&v| (v as f64) * (v as f64)).sum();
                let l2 = slice::norm_l2(b, xs);
                assert!(near(l2, sq.sqrt(), sq.sqrt()), "{b} norm_l2 n={n}: {l2} vs {}", sq.sqrt());
                let d = slice::dot(b, xs, ys).unwrap();
                let want: f64 = xs.iter().zip(ys).map(|(&p, &q)| p as f64 * q as f64).sum();
                let scale: f64 = xs.iter().zip(ys).map(|(&p, &q)| (p as f64 * q as f64).abs()).sum();
                assert!(near(d, want, scale), "{b} dot n={n}: {d} vs {want}");

                let ni = slice::norm_inf(b, xs);
                if has_nan {
                    assert!(ni.is_nan(), "{b} norm_inf with NaN");
                } else {
                    assert_eq!(ni as f64, xs.iter().fold(0.0f64, |m, &v| m.max((v as f64).abs())), "{b} norm_inf n={n}");
                }
                if n == 0 {
                    assert!(slice::max(b, xs).is_err() && slice::argmin(b, xs).is_err());
                    continue;
                }
                let (mx, mn) = (slice::max(b, xs).unwrap(), slice::min(b, xs).unwrap());
                let (amx, amn) = (slice::argmax(b, xs).unwrap(), slice::argmin(b, xs).unwrap());
                if has_nan {
                    let first_nan = xs.iter().position(|v| v.is_nan()).unwrap();
                    assert!(mx.is_nan() && mn.is_nan(), "{b} max/min must propagate NaN");
                    assert_eq!((amx, amn), (first_nan, first_nan), "{b} arg* must point at the first NaN");
                } else {
                    let rmax = xs.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                    let rmin = xs.iter().cloned().fold(f32::INFINITY, f32::min);
                    assert_eq!((mx, mn), (rmax, rmin), "{b} max/min n={n}");
                    assert_eq!(amx, xs.iter().position(|&v| v == rmax).unwrap(), "{b} argmax n={n}");
                    assert_eq!(amn, xs.iter().position(|&v| v == rmin).unwrap(), "{b} argmin n={n}");
                }
            }
        }
    }
}

fn ref_softmax(x: &[f32]) -> Vec<f64> {
    let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| if v.is_nan() || m.is_nan() { f64::NAN } else { m.max(v as f64) });
    let e: Vec<f64> = x.iter().map(|&v| (v as f64 - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

#[test]
fn softmax_and_log_softmax_match_reference() {
    let mut rng = Rng::new(4);
    for b in backends("softmax_and_log_softmax_match_reference") {
        for &n in LENGTHS.iter().filter(|&&n| n > 0) {
            for (lo, hi) in [(-10.0, 10.0), (-80.0, 80.0), (1e4, 1e4 + 50.0)] {
                let x = unaligned(&rng.data(n, lo, hi));
                let xs = &x[start(&x, n)..];
                let mut out = unaligned(&vec![0.0; n]);
                let s = start(&out, n);
                slice::softmax(b, xs, &mut out[s..]).unwrap();
                let want = ref_softmax(xs);
                let m = xs.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                for i in 0..n {
                    let err = (out[s + i] as f64 - want[i]).abs();
                    // x − max is rounded to f32 before exp: a relative error of |x − max|·ε/2.
                    let rel = 2e-6 + 6e-8 * (xs[i] - m).abs() as f64;
                    assert!(err <= rel * want[i] + 1e-38, "{b} softmax n={n} [{i}] {} vs {}", out[s + i], want[i]);
                }
                slice::log_softmax(b, xs, &mut out[s..]).unwrap();
                for i in 0..n {
                    let w = want[i].ln();
                    let err = (out[s + i] as f64 - w).abs();
                    assert!(err <= 2e-6 * (1.0 + w.abs()), "{b} log_softmax n={n} [{i}] {} vs {w}", out[s + i]);
                }
            }
            // One NaN (or an infinite maximum) in: NaN out everywhere, never finite garbage.
            for poison in [f32::NAN, f32::INFINITY] {
                let mut raw = rng.data(n, -5.0, 5.0);
                raw[n / 2] = poison;
                let mut out = vec![0.0; n];
                slice::softmax(b, &raw, &mut out).unwrap();
                assert!(out.iter().all(|v| v.is_nan()), "{b} softmax with {poison} n={n}");
                slice::log_softmax(b, &raw, &mut out).unwrap();
                assert!(out.iter().all(|v| v.is_nan()), "{b} log_softmax with {poison} n={n}");
            }
        }
    }
}

#[test]
fn max_min_see_one_nan_anywhere_at_any_alignment() {
    // The kernels check two vectors per NaN compare in the aligned main loop, one in the head
    // and the tail: a lone NaN at every index, with the slice starting at every offset of a
    // 64-byte line, must reach the result of each (and ±0 or ±inf elsewhere must not).
    let mut rng = Rng::new(11);
    let base: Vec<f32> = rng.data(160 + 16, -100.0, 100.0);
    for b in backends("max_min_see_one_nan_anywhere_at_any_alignment") {
        for off in 0..16 {
            let mut x = base[off..off + 160].to_vec();
            x[3] = -0.0;
            x[100] = f32::INFINITY;
            let (rmax, rmin) = (x.iter().cloned().fold(f32::NEG_INFINITY, f32::max), x.iter().cloned().fold(f32::INFINITY, f32::min));
            let rinf = x.iter().fold(0.0f32, |m, &v| m.max(v.abs()));
            let mut raw = vec![0.0f32; off + 160];
            for i in 0..160 {
                raw[off..].copy_from_slice(&x);
                let xs = &mut raw[off..];
                assert_eq!((slice::max(b, xs).unwrap(), slice::min(b, xs).unwrap(), slice::norm_inf(b, xs)), (rmax, rmin, rinf), "{b} off={off}");
                xs[i] = f32::NAN;
                let (mx, mn, ni) = (slice::max(b, xs).unwrap(), slice::min(b, xs).unwrap(), slice::norm_inf(b, xs));
                assert!(mx.is_nan() && mn.is_nan() && ni.is_nan(), "{b} NaN at {i}, off={off}: {mx} {mn} {ni}");
            }
        }
    }
}

/// A sum's and a dot product's rounding does not depend on where the slice sits in memory: the
/// same values at every offset of a 64-byte line give the same bits (so a model's output does
/// not change with the heap's layout from one run to the next).
#[test]
fn sums_and_dots_do_not_depend_on_the_slice_s_address() {
    let mut rng = Rng::new(12);
    // Lengths around the vector widths, the 4-vector step and the 4096-element block (a
    // block's head and tail, and a block shorter than the head).
    for n in [1usize, 3, 7, 13, 64, 100, 1000, 4096, 4100, 5003, 8195] {
        let (a, c) = (rng.data(n, -1.0, 1.0), rng.data(n, -1.0, 1.0));
        for b in backends("sums_and_dots_do_not_depend_on_the_slice_s_address") {
            let mut first = None;
            // Every offset of the first slice in a 64-byte line, the second at offsets of its
            // own (the dot's main loop aligns on the first).
            for off in 0..16 {
                for off_c in [16 - off, (off * 7 + 3) % 16] {
                    let mut ra = vec![0.0f32; off + n];
                    let mut rc = vec![0.0f32; off_c + n];
                    ra[off..].copy_from_slice(&a);
                    rc[off_c..].copy_from_slice(&c);
                    let (xa, xc) = (&ra[off..], &rc[off_c..]);
                    let got = (slice::sum(b, xa).to_bits(), slice::dot(b, xa, xc).unwrap().to_bits(), slice::norm_l2(b, xa).to_bits());
                    match first {
                        None => first = Some(got),
                        Some(f) => assert_eq!(got, f, "{b} n={n} off={off} off_c={off_c}"),
                    }
                }
            }
        }
    }
}

#[test]
fn vector_api_uses_its_backend_and_agrees_with_slices() {
    let mut rng = Rng::new(5);
    let data = rng.data(1000, -5.0, 5.0);
    let other = rng.data(1000, -5.0, 5.0);
    for b in backends("vector_api_uses_its_backend_and_agrees_with_slices") {
        let v = Vector::with_backend(&data, b).unwrap();
        let w = Vector::with_backend(&other, b).unwrap();
        assert_eq!(v.backend(), b);
        let mut out = vec![0.0; 1000];
        slice::gelu(b, &data, &mut out).unwrap();
        assert_eq!(v.gelu().as_slice(), &out[..]);
        let mut into = vec![0.0; 1000];
        v.gelu_into(&mut into).unwrap();
        assert_eq!(into, out);
        slice::add(b, &data, &other, &mut out).unwrap();
        assert_eq!(v.add(&w).unwrap().as_slice(), &out[..]);
        // The vector holds a copy, elsewhere in memory: a dot's rounding does not depend on it.
        assert_eq!(v.dot(&w).unwrap().to_bits(), slice::dot(b, &data, &other).unwrap().to_bits());
        assert_eq!(v.softmax().unwrap().len(), 1000);
        assert_eq!(v.scale(2.0).as_slice()[7], data[7] * 2.0);
    }
}

#[test]
fn large_inputs_use_threads_and_agree_with_one_thread() {
    // 3M elements: above every grain, so the work is split over the cores.
    let mut rng = Rng::new(6);
    let x = rng.data(3_000_001, -20.0, 20.0);
    let y = rng.data(3_000_001, -20.0, 20.0);
    let b = Backend::detect();
    let run = || {
        let mut o1 = vec![0.0; x.len()];
        let mut o2 = vec![0.0; x.len()];
        slice::gelu(b, &x, &mut o1).unwrap();
        slice::add(b, &x, &y, &mut o2).unwrap();
        let mut o3 = vec![0.0; x.len()];
        slice::softmax(b, &x, &mut o3).unwrap();
        (o1, o2, o3, slice::max(b, &x).unwrap(), slice::argmax(b, &x).unwrap())
    };
    let many = run();
    let prev = rayo::set_max_threads(1);
    let one = run();
    rayo::set_max_threads(prev);
    assert_eq!(many.0, one.0);
    assert_eq!(many.1, one.1);
    assert_eq!((many.3, many.4), (one.3, one.4));
    for (p, q) in many.2.iter().zip(&one.2) {
        assert!((p - q).abs() <= 1e-6 * q.abs() + 1e-38);
    }
}

#[test]
fn dot_rows_is_dot_of_each_row_bit_for_bit() {
    // rows of awkward lengths and strides, starting one element past an aligned address, with
    // NaN and ±inf in some: each result the bits `slice::dot` gives that row
    for b in backends("dot_rows_is_dot_of_each_row_bit_for_bit") {
        for (n, stride, rows) in [(1, 1, 5), (7, 9, 13), (64, 192, 40), (65, 65, 3), (1000, 1003, 4)] {
            let a = unaligned(&(0..n).map(|i| (i as f32 * 0.37).sin()).collect::<Vec<_>>());
            let a = &a[start(&a, n)..];
            let mut data: Vec<f32> = (0..stride * rows).map(|i| ((i * 7919 % 1013) as f32 - 500.0) / 97.0).collect();
            let last = data.len() - 1;
            data[stride.min(last)] = f32::NAN;
            data[(2 * stride).min(last)] = f32::INFINITY;
            data[(3 * stride + n / 2).min(last)] = f32::NEG_INFINITY;
            data[0] = -0.0;
            let keys = unaligned(&data);
            let keys = &keys[start(&keys, data.len())..];
            let mut got = vec![0.0f32; rows];
            slice::dot_rows(b, a, keys, stride, &mut got).unwrap();
            for (j, g) in got.iter().enumerate() {
                let want = slice::dot(b, a, &keys[j * stride..][..n]).unwrap();
                assert_eq!(g.to_bits(), want.to_bits(), "{b:?} n {n} stride {stride}: row {j}");
            }
        }
        // the last row past the data, a stride below the row length: errors, nothing written
        let mut out = [7.0f32; 3];
        assert!(slice::dot_rows(b, &[1.0; 4], &[1.0; 11], 4, &mut out).is_err());
        assert!(slice::dot_rows(b, &[1.0; 4], &[1.0; 12], 3, &mut out).is_err());
        assert_eq!(out, [7.0; 3]);
        slice::dot_rows(b, &[1.0; 4], &[1.0; 12], 4, &mut out).unwrap();
        assert_eq!(out, [4.0; 3]);
    }
}
