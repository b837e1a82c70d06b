//! Hostile input over the public API: sizes near `usize::MAX`, 2^32 and 2^33, empty shapes
//! with huge outer dimensions, NaN parameters, bad strides, and every error's `Display`.
//! Each must give an error (or a defined answer), never a panic or a wrapped size.
//!
//! Run it in a debug build too (`cargo test -p rayo --test hostile`): overflow checks are
//! live there, so an unchecked `*` or `-` on a size panics instead of wrapping.
// The sizes below (2^32, 2^33, 2^62, ...) are 64-bit sizes; 32-bit targets (wasm32) have
// their own limits and run the rest of the suite.
#![cfg(target_pointer_width = "64")]

use rayo::{gemm, gemm_par, ArgValue, Backend, Config, Error, MatMut, MatRef, Matrix, Par, Tensor, Vector};

const MAX: usize = usize::MAX;
const P32: usize = 1 << 32;
const P33: usize = 1 << 33;

/// The error, after checking that its `Display` works and names the operation's numbers.
fn err<T: std::fmt::Debug>(r: rayo::Result<T>) -> Error {
    let e = r.expect_err("hostile input must be an error");
    let msg = e.to_string();
    assert!(!msg.is_empty());
    e
}

fn overflow<T: std::fmt::Debug>(r: rayo::Result<T>) -> Vec<usize> {
    match err(r) {
        Error::SizeOverflow { dims, .. } => dims,
        e => panic!("expected SizeOverflow, got {e:?}"),
    }
}

#[test]
fn matrix_sizes_that_overflow_are_errors() {
    assert_eq!(overflow(Matrix::zeros(P32, P32)), vec![P32, P32], "2^64 elements wrapped to 0 in release");
    assert_eq!(overflow(Matrix::zeros(MAX, 2)), vec![MAX, 2]);
    // 2^62 elements fit in usize, their 2^64 bytes do not.
    assert_eq!(overflow(Matrix::zeros(1 << 31, 1 << 31)), vec![1 << 31, 1 << 31]);
    assert_eq!(overflow(Matrix::identity(P32)), vec![P32, P32]);
    // 2^62 bytes fit in isize but in no machine's memory: an error, not an abort.
    assert!(matches!(err(Matrix::zeros(1 << 30, 1 << 30)), Error::OutOfMemory { bytes, .. } if bytes == 1 << 62));
    assert!(matches!(err(Vector::zeros(1 << 60)), Error::OutOfMemory { .. }));
    assert!(matches!(err(Vector::zeros(MAX)), Error::SizeOverflow { .. }));
    assert!(matches!(err(Tensor::zeros(vec![1 << 20, 1 << 20, 1 << 20])), Error::OutOfMemory { .. }));
    let e = err(Matrix::from_vec(P32, P32, vec![]));
    assert!(e.to_string().contains("overflows usize"), "{e}");
    let e = err(Matrix::from_slice(MAX, MAX, &[1.0]));
    assert!(matches!(e, Error::SizeMismatch { len: 1, .. }));
    // Empty and zero-sized matrices are fine.
    assert_eq!(Matrix::zeros(0, MAX).unwrap().shape(), (0, MAX));
    assert_eq!(Matrix::identity(0).unwrap().as_slice(), &[] as &[f32]);
}

#[test]
fn empty_products_with_huge_outer_dimensions() {
    // [2^33 × 0] · [0 × 2^33] is a 2^66-element result: an error, not a panic.
    let a = Matrix::from_vec(P33, 0, vec![]).unwrap();
    let b = Matrix::from_vec(0, P33, vec![]).unwrap();
    assert!(matches!(err(a.matmul(&b)), Error::SizeOverflow { .. }));
    let mut out = Matrix::zeros(0, 0).unwrap();
    assert!(matches!(err(a.matmul_into(&b, &mut out)), Error::ShapeMismatch { .. }));
    // An empty result of huge dimensions is fine: [0 × 2^33] · [2^33 × 0] = [0 × 0].
    let c = b.matmul(&a).unwrap();
    assert_eq!((c.shape(), c.as_slice().len()), ((0, 0), 0));
    assert_eq!(a.transpose().shape(), (0, P33), "an empty transpose does not walk 2^33 rows");
    let tall = Matrix::from_vec(1 << 62, 0, vec![]).unwrap();
    assert_eq!(tall.transpose().shape(), (0, 1 << 62));
    assert_eq!(tall.scale(f32::NAN).shape(), (1 << 62, 0));
    assert!(tall.add(&tall).unwrap().as_slice().is_empty());
    assert!(matches!(err(tall.matvec(&Vector::from_slice(&[]))), Error::SizeOverflow { .. }));
    assert!(matches!(err(tall.convolve2d(&Matrix::zeros(1, 1).unwrap())), Error::ShapeMismatch { .. }));
    // Tensors: the same product, batched and not.
    let ta = Tensor::from_vec(vec![P33, 0], vec![]).unwrap();
    let tb = Tensor::from_vec(vec![0, P33], vec![]).unwrap();
    assert!(matches!(err(ta.matmul(&tb)), Error::SizeOverflow { .. }));
    // Leading dimensions whose product overflows (the tensor itself is empty).
    let tc = Tensor::from_vec(vec![1 << 40, 1 << 40, 0, 3], vec![]).unwrap();
    assert!(matches!(err(tc.matmul(&tc)), Error::SizeOverflow { .. }), "the batch count 2^80 is not a usize");
    let td = Tensor::from_vec(vec![1 << 40, 1 << 40, 3, 0], vec![]).unwrap();
    let te = Tensor::from_vec(vec![0, 4], vec![]).unwrap();
    assert!(matches!(err(td.matmul(&te)), Error::SizeOverflow { .. }));
    assert!(err(tc.matrix(0)).to_string().contains("overflows"));
    assert_eq!(tc.get(&[1, 1, 0, 0]), None);
    assert_eq!(tc.offset(&[MAX, MAX, MAX, MAX]), None);
    // Convolution with no input channels over a huge empty image.
    let img = Tensor::from_vec(vec![0, 1 << 40, 1 << 40], vec![]).unwrap();
    let ker = Tensor::from_vec(vec![1 << 40, 0, 1, 1], vec![]).unwrap();
    assert!(matches!(err(img.conv2d(&ker)), Error::SizeOverflow { .. }));
    let ker = Tensor::from_vec(vec![2, 0, 1, 1], vec![]).unwrap();
    let small = Tensor::from_vec(vec![0, 3, 4], vec![]).unwrap();
    assert_eq!(small.conv2d(&ker).unwrap().as_slice(), &[0.0; 24], "an empty sum is 0");
}

#[test]
fn tensor_errors_display_without_panicking() {
    let e = err(Tensor::zeros(vec![MAX, 2]));
    assert_eq!(e, Error::SizeOverflow { op: "Tensor::zeros", dims: vec![MAX, 2] });
    assert!(e.to_string().contains("overflows usize"), "{e}");
    let e = err(Tensor::from_vec(vec![MAX, 2], vec![1.0]));
    assert!(e.to_string().contains("overflows usize"), "SizeMismatch's Display multiplied the shape: {e}");
    let e = err(Tensor::from_vec(vec![P32, P32], vec![]));
    assert!(e.to_string().contains("overflows usize"), "{e}");
    let t = Tensor::from_vec(vec![2, 3], vec![0.0; 6]).unwrap();
    assert!(matches!(err(t.clone().reshape(vec![MAX, MAX])), Error::ShapeMismatch { .. }));
    assert!(matches!(err(t.clone().reshape(vec![P32, P32, 0, 6])), Error::ShapeMismatch { .. }));
    assert!(matches!(err(t.matrix(MAX)), Error::IndexOutOfBounds { index: MAX, len: 1 }));
    assert!(matches!(err(Tensor::from_vec(vec![], vec![])), Error::SizeMismatch { .. }));
    assert_eq!(t.get(&[MAX, MAX]), None);
    assert_eq!(t.get(&[1, 2, 0]), None);
}

#[test]
fn indices_far_out_of_range() {
    let mut m = Matrix::zeros(2, 3).unwrap();
    assert_eq!(err(m.set(MAX, 1, 1.0)), Error::MatrixIndexOutOfBounds { row: MAX, col: 1, rows: 2, cols: 3 });
    assert_eq!(err(m.set(1, MAX, 1.0)), Error::MatrixIndexOutOfBounds { row: 1, col: MAX, rows: 2, cols: 3 });
    assert_eq!(err(m.set(MAX, MAX, 1.0)).to_string(), format!("index ({MAX}, {MAX}) out of bounds for a 2x3 matrix"));
    assert_eq!(m.get(MAX, MAX), None);
    assert_eq!(m.get(1, MAX), None);
    assert_eq!(m.get_row(MAX), None);
    assert_eq!(m.get_row(1), Some(&[0.0; 3][..]));
    let v = Vector::from_slice(&[1.0]);
    assert_eq!(v.get(MAX), None);
    let view = m.view();
    assert_eq!(view.get(MAX, 0), None);
}

#[test]
fn bad_strides_and_empty_views() {
    let d = [0.0f32; 12];
    let mut w = [0.0f32; 12];
    for (rows, cols, rs, cs) in [(MAX, MAX, MAX, MAX), (2, 2, MAX, 1), (2, 2, 1, MAX), (P32, P32, P32, 1), (MAX, 1, 1, 0), (13, 1, 1, 0)] {
        assert!(matches!(err(MatRef::new(&d, rows, cols, rs, cs)), Error::ViewOutOfBounds { .. }), "{rows} {cols} {rs} {cs}");
        assert!(matches!(err(MatMut::new(&mut w, rows, cols, rs, cs)), Error::ViewOutOfBounds { .. }), "{rows} {cols} {rs} {cs}");
    }
    assert!(matches!(err(MatMut::new(&mut w, 3, 4, 1, 1)), Error::OverlappingView { .. }));
    assert!(matches!(err(MatMut::new(&mut w, 2, 2, 0, 0)), Error::OverlappingView { .. }));
    // Empty views: any strides, no (0 - 1) anywhere.
    for (rows, cols, rs, cs) in [(0, 0, 0, 0), (0, MAX, MAX, MAX), (MAX, 0, MAX, MAX), (0, 5, 0, 0), (5, 0, 0, 0)] {
        assert!(MatRef::new(&[], rows, cols, rs, cs).is_ok());
        assert!(MatMut::new(&mut [], rows, cols, rs, cs).is_ok(), "{rows} {cols} {rs} {cs}");
    }
    assert!(matches!(err(MatRef::row_major(&d, P32, P32)), Error::SizeMismatch { .. }));
    assert!(matches!(err(MatMut::col_major(&mut w, MAX, 2)), Error::SizeMismatch { .. }));
    assert!(err(MatRef::row_major(&d, MAX, 2)).to_string().contains("overflows usize"));
}

#[test]
fn gemm_checks_shapes_and_work() {
    // What `rayo::cpu::gemm::gemm` (no longer public) multiplied silently.
    let (a, b) = ([1.0f32; 6], [1.0f32; 20]);
    let mut c = [0.0f32; 8];
    let e = err(gemm(1.0, MatRef::row_major(&a, 2, 3).unwrap(), MatRef::row_major(&b, 5, 4).unwrap(), 0.0, MatMut::row_major(&mut c, 2, 4).unwrap()));
    assert_eq!(e, Error::ShapeMismatch { op: "gemm (A·B)", left: vec![2, 3], right: vec![5, 4] });
    assert_eq!(c, [0.0; 8], "C untouched");
    let mut c3 = [0.0f32; 9];
    let e =
        err(gemm(1.0, MatRef::row_major(&a, 2, 3).unwrap(), MatRef::row_major(&a, 3, 2).unwrap(), 0.0, MatMut::row_major(&mut c3, 3, 3).unwrap()));
    assert!(matches!(e, Error::ShapeMismatch { op: "gemm (C)", .. }));
    // Stride-0 views claim any size over one element: m·k·n past usize is an error.
    let one = [1.0f32];
    let mut c2 = [0.0f32; 2];
    let wide = MatRef::new(&one, 2, MAX, 0, 0).unwrap();
    let tall = MatRef::new(&one, MAX, 1, 0, 0).unwrap();
    assert!(matches!(err(gemm(1.0, wide, tall, 0.0, MatMut::row_major(&mut c2, 2, 1).unwrap())), Error::SizeOverflow { .. }));
    let deep = 1usize << 63;
    let (wide, tall) = (MatRef::new(&one, 1, deep, 0, 0).unwrap(), MatRef::new(&one, deep, 1, 0, 0).unwrap());
    assert!(matches!(
        err(gemm_par(Backend::Scalar, Par::Seq, 1.0, wide, tall, 0.0, MatMut::row_major(&mut c2[..1], 1, 1).unwrap())),
        Error::SizeOverflow { .. }
    ));
    // k = 0 with NaN alpha and beta = 0: C is zeroed, nothing read.
    let empty = MatRef::new(&[], 2, 0, 0, 0).unwrap();
    let empty_t = MatRef::new(&[], 0, 1, 0, 0).unwrap();
    let mut c2 = [f32::NAN; 2];
    gemm(f32::NAN, empty, empty_t, 0.0, MatMut::row_major(&mut c2, 2, 1).unwrap()).unwrap();
    assert_eq!(c2, [0.0; 2]);
}

#[test]
fn nan_and_infinite_parameters() {
    let v = Vector::from_slice(&[1.0, -2.0, f32::NAN, f32::INFINITY]);
    for (lo, hi) in [(f32::NAN, 1.0), (0.0, f32::NAN), (f32::NAN, f32::NAN), (1.0, 0.0), (f32::INFINITY, f32::NEG_INFINITY)] {
        assert!(matches!(err(v.clip(lo, hi)), Error::InvalidParameter { op: "clip", .. }), "clip({lo}, {hi})");
    }
    // Parameters that are not errors give IEEE answers, not panics.
    assert_eq!(v.clip(f32::NEG_INFINITY, f32::INFINITY).unwrap().len(), 4);
    assert!(v.scale(f32::NAN).as_slice().iter().all(|x| x.is_nan()));
    let _ = (v.leaky_relu(f32::NAN), v.elu(f32::INFINITY), v.softmax().unwrap(), v.log_softmax().unwrap());
    let m = Matrix::from_vec(1, 2, vec![f32::NAN, 1.0]).unwrap();
    assert!(m.scale(f32::INFINITY).as_slice()[0].is_nan());
    let e = Vector::from_slice(&[]);
    assert!(matches!(err(e.softmax()), Error::EmptyInput { .. }));
    assert!(matches!(err(e.argmax()), Error::EmptyInput { .. }));
}

#[test]
fn bad_environment_values_are_reported_not_fatal() {
    let values = ["", "-1", "99999999999999999999999999", "0x10", "nan", "\u{0}", "avx512,avx2", "🦀", " 2 "];
    for var in Config::VARS {
        for value in values {
            let (config, problems) = Config::from_lookup(|k| (k == var.name).then(|| value.to_string()));
            for p in &problems {
                assert!(matches!(p, Error::InvalidEnv { .. } | Error::UnsupportedBackend { .. }), "{p:?}");
                assert!(p.to_string().contains(var.name) || matches!(p, Error::UnsupportedBackend { .. }), "{p}");
            }
            if !problems.is_empty() {
                // A bad value leaves the default.
                assert_eq!(config, Config::default(), "{}={value:?}", var.name);
            }
        }
    }
    assert_eq!(Config::from_lookup(|_| Some(" 2 ".into())).0.wgpu_ew_items, 2, "surrounding blanks are trimmed");
    assert!(matches!(Backend::parse_env_value("\u{0}"), Err(Error::InvalidEnv { .. })));
}

#[test]
fn every_error_displays_with_extreme_numbers() {
    let all = [
        Error::LengthMismatch { op: "op", expected: MAX, actual: 0 },
        Error::ShapeMismatch { op: "op", left: vec![MAX; 4], right: vec![] },
        Error::SizeMismatch { op: "op", shape: vec![MAX, MAX, MAX], len: MAX },
        Error::SizeMismatch { op: "op", shape: vec![], len: 0 },
        Error::SizeMismatch { op: "op", shape: vec![0, MAX, MAX], len: 1 },
        Error::EmptyInput { op: "op" },
        Error::InvalidParameter { op: "op", name: "x", value: f64::NAN, reason: "r" },
        Error::InvalidParameter { op: "op", name: "x", value: f64::NEG_INFINITY, reason: "r" },
        Error::IndexOutOfBounds { index: MAX, len: 0 },
        Error::ViewOutOfBounds { op: "op", rows: MAX, cols: MAX, row_stride: MAX, col_stride: MAX, len: 0 },
        Error::OverlappingView { op: "op", rows: MAX, cols: MAX, row_stride: 0, col_stride: 0 },
        Error::BufferTooLarge { op: "op", bytes: u64::MAX, limit: 0 },
        Error::UnsupportedBackend { backend: "neon" },
        Error::InvalidEnv { var: "RAYO_BACKEND", value: "\u{0}\n\"".into(), expected: "x" },
        Error::NoDevice { api: "wgpu", reason: String::new() },
        Error::Device { api: "cuda", message: "m".into() },
        Error::SizeOverflow { op: "op", dims: vec![MAX, MAX] },
        Error::MatrixIndexOutOfBounds { row: MAX, col: MAX, rows: 0, cols: 0 },
        Error::InvalidArgument { op: "op", name: "rows", value: ArgValue::Usize(MAX), reason: "r" },
        Error::InvalidArgument { op: "op", name: "y given", value: ArgValue::Bool(true), reason: "r" },
        Error::OutOfMemory { op: "op", bytes: u64::MAX },
    ];
    for e in all {
        let msg = e.to_string();
        assert!(msg.len() > 5, "{e:?}: {msg}");
        let _ = format!("{e:?}");
        let _: &dyn std::error::Error = &e;
    }
    let e = Error::InvalidArgument { op: "dot", name: "rows", value: 7usize.into(), reason: "too many" };
    assert_eq!(e.to_string(), "dot: invalid rows = 7: too many");
    let e = Error::InvalidArgument { op: "reduce", name: "y given", value: false.into(), reason: "dot needs y" };
    assert_eq!(e.to_string(), "reduce: invalid y given = false: dot needs y");
}
