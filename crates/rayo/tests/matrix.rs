//! GEMM, matvec, transpose and conv2d on every instruction set against f64 references:
//! every size 1..=70 in each dimension, tile edges, large and non-square shapes, transposed
//! and strided operands, alpha/beta; shape errors.

mod common;

use common::{backends, Rng};
use rayo::{gemm_par, gemm_with, Backend, Error, MatMut, MatRef, Matrix, Par, Tensor, Vector};

/// C = alpha·A·B + beta·C0 in f64, and the scale Σ|a||b| of each element (for the bound).
#[allow(clippy::too_many_arguments)]
fn reference(alpha: f64, a: &MatRef, b: &MatRef, beta: f64, c0: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let (m, n, k) = (a.rows(), b.cols(), a.cols());
    let mut out = vec![0.0; m * n];
    let mut mag = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut g) = (0.0f64, 0.0f64);
            for p in 0..k {
                let x = a.get(i, p).unwrap() as f64 * b.get(p, j).unwrap() as f64;
                s += x;
                g += x.abs();
            }
            let prev = if beta == 0.0 { 0.0 } else { beta * c0[i * n + j] };
            out[i * n + j] = alpha * s + prev;
            mag[i * n + j] = (alpha * g).abs() + prev.abs();
        }
    }
    (out, mag)
}

/// Checks `got` (m×n, read through `at`) against the reference within (k+2)·ε·magnitude.
fn check(what: &str, got: impl Fn(usize, usize) -> f32, want: &[f64], mag: &[f64], m: usize, n: usize, k: usize) {
    let eps = f32::EPSILON as f64;
    for i in 0..m {
        for j in 0..n {
            let (g, w) = (got(i, j) as f64, want[i * n + j]);
            let tol = (k as f64 + 2.0) * eps * mag[i * n + j] + 1e-30;
            assert!((g - w).abs() <= tol, "{what}: C[{i}][{j}] = {g}, want {w} (tol {tol:e})");
        }
    }
}

/// A dense row-major m×n product on `backend`, with random C and beta.
fn run_dense(backend: Backend, rng: &mut Rng, m: usize, n: usize, k: usize, alpha: f32, beta: f32) {
    let a = rng.data(m * k, -1.0, 1.0);
    let b = rng.data(k * n, -1.0, 1.0);
    let mut c: Vec<f32> = if beta == 0.0 { vec![f32::NAN; m * n] } else { rng.data(m * n, -1.0, 1.0) };
    let c0: Vec<f64> = c.iter().map(|&x| x as f64).collect();
    let (av, bv) = (MatRef::row_major(&a, m, k).unwrap(), MatRef::row_major(&b, k, n).unwrap());
    let (want, mag) = reference(alpha as f64, &av, &bv, beta as f64, &c0);
    gemm_with(backend, alpha, av, bv, beta, MatMut::row_major(&mut c, m, n).unwrap()).unwrap();
    check(&format!("{backend} {m}x{k}x{n} alpha {alpha} beta {beta}"), |i, j| c[i * n + j], &want, &mag, m, n, k);
}

#[test]
fn gemm_every_small_size() {
    let mut rng = Rng::new(1);
    for backend in backends("gemm_every_small_size") {
        for d in 1..=70 {
            run_dense(backend, &mut rng, d, d, d, 1.0, 0.0);
            run_dense(backend, &mut rng, d, 37, 19, 1.0, 0.0);
            run_dense(backend, &mut rng, 23, d, 41, 0.5, 2.0);
            run_dense(backend, &mut rng, 29, 17, d, -1.5, 1.0);
        }
    }
}

#[test]
fn gemm_tile_edges_and_large() {
    let mut rng = Rng::new(2);
    for backend in backends("gemm_tile_edges_and_large") {
        for d in [127, 128, 129] {
            run_dense(backend, &mut rng, d, d, d, 1.0, 0.0);
            run_dense(backend, &mut rng, d, 129 - d + 64, 300, 1.0, 0.5);
        }
    }
    // The big ones once, on the best instruction set (the blocking and threads, not the ISA).
    // Under emulation (scripts/test.sh's aarch64 section sets RAYO_TEST_EMULATED) sizes that
    // still span several blocks of k and m (KC ≤ 512, MC ≤ 256 values) stand in for them, at a
    // fifth of the work; RAYO_TEST_FULL_SIZES=1 runs the native sizes there too.
    let best = Backend::detect();
    let emulated = std::env::var_os("RAYO_TEST_EMULATED").is_some() && std::env::var_os("RAYO_TEST_FULL_SIZES").is_none();
    let big: &[(usize, usize, usize, f32)] = if emulated {
        println!("gemm_tile_edges_and_large: emulated, the large sizes at 520-600 (RAYO_TEST_FULL_SIZES=1: 1000-1500)");
        &[(600, 520, 600, 0.0), (544, 288, 520, 1.0), (600, 333, 560, 0.0)]
    } else {
        &[(1000, 1000, 1000, 0.0), (1024, 1024, 1024, 1.0), (1500, 333, 700, 0.0)]
    };
    for &(m, n, k, beta) in big {
        run_dense(best, &mut rng, m, n, k, 1.0, beta);
    }
    run_dense(best, &mut rng, 1, 1000, 700, 1.0, 0.0);
    run_dense(best, &mut rng, 1000, 1, 700, 1.0, 0.0);
}

#[test]
fn gemm_transposed_and_strided_views() {
    let mut rng = Rng::new(3);
    for backend in backends("gemm_transposed_and_strided_views") {
        for &(m, n, k) in &[(1, 1, 1), (5, 7, 3), (33, 17, 65), (70, 45, 129), (13, 1, 40), (1, 29, 31), (31, 1, 1)] {
            for ta in [false, true] {
                for tb in [false, true] {
                    for tc in [false, true] {
                        // A stored with padding: as m×k (row stride k+3) or, transposed, as k×m.
                        let (ar, ac) = if ta { (k, m) } else { (m, k) };
                        let a = rng.data(ar * (ac + 3), -1.0, 1.0);
                        let mut av = MatRef::new(&a, ar, ac, ac + 3, 1).unwrap();
                        if ta {
                            av = av.t();
                        }
                        // B with a column stride of 2.
                        let (br, bc) = if tb { (n, k) } else { (k, n) };
                        let b = rng.data(br * bc * 2, -1.0, 1.0);
                        let mut bv = MatRef::new(&b, br, bc, bc * 2, 2).unwrap();
                        if tb {
                            bv = bv.t();
                        }
                        let mut c = rng.data(m * n + 5, -1.0, 1.0);
                        let pad: Vec<f32> = c[m * n..].to_vec();
                        let c0: Vec<f64> = (0..m * n).map(|i| if tc { c[(i % n) * m + i / n] } else { c[i] } as f64).collect();
                        let (want, mag) = reference(0.75, &av, &bv, -0.5, &c0);
                        let cv = if tc { MatMut::new(&mut c, m, n, 1, m).unwrap() } else { MatMut::new(&mut c, m, n, n, 1).unwrap() };
                        gemm_with(backend, 0.75, av, bv, -0.5, cv).unwrap();
                        let at = |i: usize, j: usize| if tc { c[j * m + i] } else { c[i * n + j] };
                        check(&format!("{backend} {m}x{k}x{n} ta {ta} tb {tb} tc {tc}"), at, &want, &mag, m, n, k);
                        assert_eq!(&c[m * n..], &pad[..], "padding untouched");
                    }
                }
            }
        }
    }
}

#[test]
fn gemm_special_values_and_degenerate_shapes() {
    let best = Backend::detect();
    // k = 0: C = beta·C.
    let (a, b) = ([0.0f32; 0], [0.0f32; 0]);
    let mut c = vec![2.0f32; 6];
    gemm_with(best, 1.0, MatRef::new(&a, 2, 0, 0, 1).unwrap(), MatRef::new(&b, 0, 3, 3, 1).unwrap(), 0.5, MatMut::row_major(&mut c, 2, 3).unwrap())
        .unwrap();
    assert_eq!(c, vec![1.0; 6]);
    // NaN and inf in A reach exactly the rows they are in.
    let mut a = vec![1.0f32; 4 * 3];
    a[3] = f32::NAN; // row 1
    a[6] = f32::INFINITY; // row 2
    let b = vec![1.0f32; 3 * 5];
    let mut c = vec![0.0f32; 4 * 5];
    gemm_with(best, 1.0, MatRef::row_major(&a, 4, 3).unwrap(), MatRef::row_major(&b, 3, 5).unwrap(), 0.0, MatMut::row_major(&mut c, 4, 5).unwrap())
        .unwrap();
    assert!(c[..5].iter().all(|&x| x == 3.0));
    assert!(c[5..10].iter().all(|x| x.is_nan()));
    assert!(c[10..15].iter().all(|&x| x == f32::INFINITY));
    assert!(c[15..].iter().all(|&x| x == 3.0));
}

#[test]
fn gemm_shape_errors() {
    let d = vec![0.0f32; 12];
    let mut c = vec![0.0f32; 12];
    let a = MatRef::row_major(&d, 3, 4).unwrap();
    let e = gemm_with(Backend::Scalar, 1.0, a, a, 0.0, MatMut::row_major(&mut c, 3, 4).unwrap()).unwrap_err();
    assert_eq!(e, Error::ShapeMismatch { op: "gemm (A·B)", left: vec![3, 4], right: vec![3, 4] });
    let e = gemm_with(Backend::Scalar, 1.0, a, a.t(), 0.0, MatMut::row_major(&mut c, 3, 4).unwrap()).unwrap_err();
    assert_eq!(e, Error::ShapeMismatch { op: "gemm (C)", left: vec![3, 3], right: vec![3, 4] });
    assert!(matches!(MatRef::new(&d, 4, 4, 4, 1), Err(Error::ViewOutOfBounds { rows: 4, cols: 4, len: 12, .. })));
}

#[test]
fn matrix_api() {
    let w = Matrix::from_slice(2, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let x = Matrix::from_slice(1, 2, &[1.0, -1.0]).unwrap();
    let y = x.matmul(&w).unwrap();
    assert_eq!(y.as_slice(), &[-3.0, -3.0, -3.0]);
    assert_eq!(w.matmul(&x).unwrap_err(), Error::ShapeMismatch { op: "Matrix::matmul", left: vec![2, 3], right: vec![1, 2] });
    assert_eq!(w.transpose().as_slice(), &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!((w.rows(), w.cols(), w[(1, 2)], w.get(2, 0)), (2, 3, 6.0, None));
    let v = w.matvec(&Vector::from_slice(&[1.0, 0.0, -1.0])).unwrap();
    assert_eq!(v.as_slice(), &[-2.0, -2.0]);
    assert!(w.matvec(&Vector::from_slice(&[1.0])).is_err());
    assert!(Matrix::from_slice(2, 2, &[1.0]).is_err());
    let i3 = Matrix::identity(3).unwrap();
    assert_eq!(w.matmul(&i3).unwrap(), w);
    assert_eq!(w.add(&w).unwrap().as_slice(), w.scale(2.0).as_slice());
    assert!(w.add(&i3).is_err());
    let mut z = Matrix::zeros(2, 2).unwrap();
    z.set(1, 1, 5.0).unwrap();
    assert_eq!(z.set(2, 0, 1.0), Err(Error::MatrixIndexOutOfBounds { row: 2, col: 0, rows: 2, cols: 2 }));
    assert_eq!(z.as_slice(), &[0.0, 0.0, 0.0, 5.0]);
}

#[test]
fn matvec_and_transpose_all_backends() {
    let mut rng = Rng::new(4);
    for backend in backends("matvec_and_transpose_all_backends") {
        for &(r, c) in &[(1, 1), (1, 17), (17, 1), (7, 33), (64, 64), (65, 129), (300, 1000), (1000, 300)] {
            let data = rng.data(r * c, -1.0, 1.0);
            let m = Matrix::from_slice(r, c, &data).unwrap().with_backend(backend).unwrap();
            let x = rng.data(c, -1.0, 1.0);
            let y = m.matvec(&Vector::from_slice(&x)).unwrap();
            for i in 0..r {
                let want: f64 = (0..c).map(|j| data[i * c + j] as f64 * x[j] as f64).sum();
                let mag: f64 = (0..c).map(|j| (data[i * c + j] as f64 * x[j] as f64).abs()).sum();
                assert!((y[i] as f64 - want).abs() <= (c as f64 + 2.0) * 1.2e-7 * mag + 1e-30, "{backend} matvec {r}x{c} row {i}");
            }
            let t = m.transpose();
            assert_eq!((t.rows(), t.cols()), (c, r));
            for i in 0..r {
                for j in 0..c {
                    assert_eq!(t[(j, i)], m[(i, j)], "{backend} transpose {r}x{c}");
                }
            }
        }
    }
}

fn conv_reference(img: &[f32], h: usize, w: usize, k: &[f32], kh: usize, kw: usize) -> Vec<f64> {
    let (oh, ow) = (h - kh + 1, w - kw + 1);
    let mut out = vec![0.0; oh * ow];
    for i in 0..oh {
        for j in 0..ow {
            out[i * ow + j] =
                (0..kh).flat_map(|u| (0..kw).map(move |v| (u, v))).map(|(u, v)| img[(i + u) * w + j + v] as f64 * k[u * kw + v] as f64).sum();
        }
    }
    out
}

#[test]
fn convolve2d_all_backends() {
    let mut rng = Rng::new(5);
    for backend in backends("convolve2d_all_backends") {
        for &(h, w, kh, kw) in &[(1, 1, 1, 1), (5, 5, 3, 3), (7, 70, 3, 3), (33, 65, 7, 7), (20, 130, 1, 5), (9, 9, 9, 9), (64, 200, 5, 2)] {
            let img = rng.data(h * w, -1.0, 1.0);
            let ker = rng.data(kh * kw, -1.0, 1.0);
            let im = Matrix::from_slice(h, w, &img).unwrap().with_backend(backend).unwrap();
            let out = im.convolve2d(&Matrix::from_slice(kh, kw, &ker).unwrap()).unwrap();
            let want = conv_reference(&img, h, w, &ker, kh, kw);
            assert_eq!((out.rows(), out.cols()), (h - kh + 1, w - kw + 1));
            for (i, (&g, &r)) in out.as_slice().iter().zip(&want).enumerate() {
                assert!((g as f64 - r).abs() <= 1e-5 * (kh * kw) as f64, "{backend} conv {h}x{w} k{kh}x{kw} at {i}: {g} vs {r}");
            }
        }
    }
    let im = Matrix::zeros(3, 3).unwrap();
    assert!(im.convolve2d(&Matrix::zeros(4, 1).unwrap()).is_err());
    assert!(im.convolve2d(&Matrix::zeros(0, 1).unwrap()).is_err());
}

#[test]
fn multichannel_conv2d() {
    let mut rng = Rng::new(6);
    // Depth c_in·kh·kw 45 goes through im2col + GEMM, 18 through the direct kernel.
    for (ci, h, w, co, kh, kw) in [(3, 17, 40, 4, 3, 5), (2, 9, 33, 3, 3, 3), (1, 8, 8, 1, 2, 2)] {
        multichannel_case(&mut rng, ci, h, w, co, kh, kw);
    }
}

#[allow(clippy::too_many_arguments)]
fn multichannel_case(rng: &mut Rng, ci: usize, h: usize, w: usize, co: usize, kh: usize, kw: usize) {
    let img = rng.data(ci * h * w, -1.0, 1.0);
    let ker = rng.data(co * ci * kh * kw, -1.0, 1.0);
    let out = Tensor::from_vec(vec![ci, h, w], img.clone()).unwrap().conv2d(&Tensor::from_vec(vec![co, ci, kh, kw], ker.clone()).unwrap()).unwrap();
    let (oh, ow) = (h - kh + 1, w - kw + 1);
    assert_eq!(out.shape(), &[co, oh, ow]);
    for o in 0..co {
        let mut want = vec![0.0f64; oh * ow];
        for c in 0..ci {
            let part = conv_reference(&img[c * h * w..(c + 1) * h * w], h, w, &ker[(o * ci + c) * kh * kw..][..kh * kw], kh, kw);
            for (x, p) in want.iter_mut().zip(part) {
                *x += p;
            }
        }
        for (i, &r) in want.iter().enumerate() {
            let g = out.as_slice()[o * oh * ow + i] as f64;
            assert!((g - r).abs() <= 1e-4, "channel {o} at {i}: {g} vs {r}");
        }
    }
    let bad = Tensor::from_vec(vec![co, ci + 1, kh, kw], vec![0.0; co * (ci + 1) * kh * kw]).unwrap();
    assert!(Tensor::from_vec(vec![ci, h, w], img).unwrap().conv2d(&bad).is_err());
}

#[test]
fn batched_tensor_matmul() {
    let mut rng = Rng::new(7);
    for &(batch, m, k, n) in &[(1, 1, 1, 1), (3, 5, 7, 9), (4, 33, 17, 65), (2, 128, 64, 96), (0, 3, 4, 5)] {
        let a = rng.data(batch * m * k, -1.0, 1.0);
        let b = rng.data(batch * k * n, -1.0, 1.0);
        let w = rng.data(k * n, -1.0, 1.0);
        let ta = Tensor::from_vec(vec![batch, m, k], a.clone()).unwrap();
        let per = ta.matmul(&Tensor::from_vec(vec![batch, k, n], b.clone()).unwrap()).unwrap();
        let shared = ta.matmul(&Tensor::from_vec(vec![k, n], w.clone()).unwrap()).unwrap();
        assert_eq!(per.shape(), &[batch, m, n]);
        for i in 0..batch {
            let av = MatRef::row_major(&a[i * m * k..(i + 1) * m * k], m, k).unwrap();
            for (bs, got) in [(&b[i * k * n..(i + 1) * k * n], &per), (&w[..], &shared)] {
                let (want, mag) = reference(1.0, &av, &MatRef::row_major(bs, k, n).unwrap(), 0.0, &[]);
                let g = got.matrix(i).unwrap();
                check(&format!("batch {i} of {batch}x{m}x{k}x{n}"), |r, c| g.get(r, c).unwrap(), &want, &mag, m, n, k);
            }
        }
    }
    let t = Tensor::from_vec(vec![2, 3, 4], vec![0.0; 24]).unwrap();
    assert!(t.matmul(&Tensor::from_vec(vec![3, 4, 2], vec![0.0; 24]).unwrap()).is_err(), "batch dims differ");
    assert!(t.matmul(&Tensor::from_vec(vec![5, 2], vec![0.0; 10]).unwrap()).is_err(), "inner dims differ");
    assert!(t.matmul(&Tensor::from_vec(vec![4], vec![0.0; 4]).unwrap()).is_err(), "rank 1");
    assert!(t.as_matrix().is_err());
    assert!(t.matrix(2).is_err());
    assert_eq!(Tensor::from_vec(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap().as_matrix().unwrap().get(1, 0), Some(3.0));
}

#[test]
fn equality_compares_values_not_the_instruction_set() {
    let data = [1.0, -2.0, 3.5, 0.0, 7.0, 9.0];
    let best = Backend::detect();
    let m1 = Matrix::from_slice(2, 3, &data).unwrap().with_backend(Backend::Scalar).unwrap();
    let m2 = Matrix::from_slice(2, 3, &data).unwrap().with_backend(best).unwrap();
    assert_eq!(m1, m2, "same values on {} and scalar", best);
    assert_ne!(m1, Matrix::from_slice(3, 2, &data).unwrap(), "same values, another shape");
    assert_ne!(m1, Matrix::from_slice(2, 3, &[1.0, -2.0, 3.5, 0.0, 7.0, 9.5]).unwrap());
    let v1 = Vector::with_backend(&data, Backend::Scalar).unwrap();
    let v2 = Vector::with_backend(&data, best).unwrap();
    assert_eq!(v1, v2);
    assert_ne!(v1, Vector::from_slice(&data[..5]));
    // f32 equality: NaN is unequal to itself, -0 equals +0.
    assert_ne!(Vector::from_slice(&[f32::NAN]), Vector::from_slice(&[f32::NAN]));
    assert_eq!(Vector::from_slice(&[-0.0]), Vector::from_slice(&[0.0]));
}

#[test]
fn gemm_par_takes_its_parallelism_per_call() {
    let mut rng = Rng::new(11);
    let (m, k, n) = (150, 130, 170);
    let a = rng.data(m * k, -1.0, 1.0);
    let b = rng.data(k * n, -1.0, 1.0);
    let run = |par: Par| {
        let mut c = vec![0.0f32; m * n];
        gemm_par(
            Backend::detect(),
            par,
            1.0,
            MatRef::row_major(&a, m, k).unwrap(),
            MatRef::row_major(&b, k, n).unwrap(),
            0.0,
            MatMut::row_major(&mut c, m, n).unwrap(),
        )
        .unwrap();
        c
    };
    let seq = run(Par::Seq);
    // Threads split rows: each element is the same sum in the same order.
    assert_eq!(seq, run(Par::threads(2)));
    assert_eq!(seq, run(Par::threads(64)));
    assert_eq!(Par::threads(0), Par::Seq);
    assert_eq!(Par::threads(1), Par::Seq);
    assert_eq!(Par::Seq.thread_count(), 1);
    assert!(Par::threads(64).thread_count() >= 1 && Par::threads(64).thread_count() <= 64);
    let want = dense_reference(&a, &b, m, k, n);
    for (g, r) in seq.iter().zip(&want) {
        assert!((*g as f64 - r).abs() <= 1e-4 * (1.0 + r.abs()), "{g} vs {r}");
    }
}

fn dense_reference(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0f64; m * n];
    for i in 0..m {
        for p in 0..k {
            for j in 0..n {
                c[i * n + j] += a[i * k + p] as f64 * b[p * n + j] as f64;
            }
        }
    }
    c
}
