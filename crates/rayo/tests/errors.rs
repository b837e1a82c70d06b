//! Every fallible op's error: mismatched lengths, empty input, bad parameters, bad backends.

use rayo::{slice, Backend, Config, Error, Vector};

fn v(x: &[f32]) -> Vector {
    Vector::from_slice(x)
}

#[test]
fn mismatched_lengths_are_errors_with_both_lengths() {
    let (a, b) = (v(&[1.0, 2.0, 3.0]), v(&[1.0, 2.0]));
    for (op, r) in [("add", a.add(&b)), ("sub", a.sub(&b)), ("mul", a.mul(&b)), ("div", a.div(&b))] {
        assert_eq!(r.unwrap_err(), Error::LengthMismatch { op, expected: 3, actual: 2 });
    }
    assert_eq!(a.dot(&b).unwrap_err(), Error::LengthMismatch { op: "dot", expected: 3, actual: 2 });
    let mut short = [0.0; 2];
    assert_eq!(a.relu_into(&mut short).unwrap_err(), Error::LengthMismatch { op: "relu", expected: 3, actual: 2 });
    assert_eq!(a.gelu_into(&mut short).unwrap_err(), Error::LengthMismatch { op: "gelu", expected: 3, actual: 2 });
    assert_eq!(a.softmax_into(&mut short).unwrap_err(), Error::LengthMismatch { op: "softmax", expected: 3, actual: 2 });
    assert_eq!(a.log_softmax_into(&mut short).unwrap_err(), Error::LengthMismatch { op: "log_softmax", expected: 3, actual: 2 });
    assert_eq!(a.scale_into(2.0, &mut short).unwrap_err(), Error::LengthMismatch { op: "scale", expected: 3, actual: 2 });
    assert_eq!(a.add_into(&a, &mut short).unwrap_err(), Error::LengthMismatch { op: "add", expected: 3, actual: 2 });
    assert_eq!(a.leaky_relu_into(0.1, &mut short).unwrap_err(), Error::LengthMismatch { op: "leaky_relu", expected: 3, actual: 2 });
    assert_eq!(a.elu_into(1.0, &mut short).unwrap_err(), Error::LengthMismatch { op: "elu", expected: 3, actual: 2 });
    assert_eq!(a.clip_into(0.0, 1.0, &mut short).unwrap_err(), Error::LengthMismatch { op: "clip", expected: 3, actual: 2 });
    let msg = a.add(&b).unwrap_err().to_string();
    assert!(msg.contains('3') && msg.contains('2'), "{msg}");
    // A mismatch leaves the output untouched.
    let mut out = [7.0; 2];
    assert!(slice::add(Backend::Scalar, &[1.0, 2.0], &[1.0], &mut out).is_err());
    assert_eq!(out, [7.0; 2]);
}

#[test]
fn empty_inputs_where_the_result_is_undefined() {
    let e = v(&[]);
    assert_eq!(e.max().unwrap_err(), Error::EmptyInput { op: "max" });
    assert_eq!(e.min().unwrap_err(), Error::EmptyInput { op: "min" });
    assert_eq!(e.argmax().unwrap_err(), Error::EmptyInput { op: "argmax" });
    assert_eq!(e.argmin().unwrap_err(), Error::EmptyInput { op: "argmin" });
    assert_eq!(e.softmax().unwrap_err(), Error::EmptyInput { op: "softmax" });
    assert_eq!(e.log_softmax().unwrap_err(), Error::EmptyInput { op: "log_softmax" });
    // Defined for empty input: sums and norms are 0, element-wise ops give empty vectors.
    assert_eq!((e.sum(), e.norm_l1(), e.norm_l2(), e.norm_inf()), (0.0, 0.0, 0.0, 0.0));
    assert_eq!(e.dot(&e).unwrap(), 0.0);
    assert!(e.gelu().is_empty() && e.add(&e).unwrap().is_empty());
}

#[test]
fn bad_parameters() {
    let a = v(&[1.0, 2.0]);
    assert!(matches!(a.clip(1.0, 0.0).unwrap_err(), Error::InvalidParameter { op: "clip", name: "max", .. }));
    assert!(matches!(a.clip(f32::NAN, 0.0).unwrap_err(), Error::InvalidParameter { op: "clip", name: "min", .. }));
    assert!(matches!(a.clip(0.0, f32::NAN).unwrap_err(), Error::InvalidParameter { op: "clip", name: "max", .. }));
    assert!(a.clip(1.0, 1.0).is_ok());
    let msg = a.clip(1.0, 0.0).unwrap_err().to_string();
    assert!(msg.contains("clip") && msg.contains('0'), "{msg}");
}

#[test]
fn unsupported_backend_is_an_error() {
    for b in Backend::ALL {
        let r = Vector::with_backend(&[1.0], b);
        if b.is_supported() {
            assert_eq!(r.unwrap().backend(), b);
        } else {
            assert_eq!(r.unwrap_err(), Error::UnsupportedBackend { backend: b.name() });
        }
    }
    assert_eq!(Backend::from_name("AVX512"), Some(Backend::Avx512));
    assert_eq!(Backend::from_name("mmx"), None);
    assert!(Backend::detect().is_supported());
    assert!(Backend::available().contains(&Backend::Scalar));
}

#[test]
fn rayo_backend_values() {
    // Parsed from a string: no test sets the process environment (set_var races the other
    // tests' threads, which read it).
    assert!(matches!(Backend::parse_env_value("not-an-isa"), Err(Error::InvalidEnv { var: "RAYO_BACKEND", .. })));
    let msg = Backend::parse_env_value("not-an-isa").unwrap_err().to_string();
    assert!(msg.contains("RAYO_BACKEND") && msg.contains("not-an-isa") && msg.contains("avx2"), "{msg}");
    assert_eq!(Backend::parse_env_value("scalar").unwrap(), Some(Backend::Scalar));
    assert_eq!(Backend::parse_env_value(" Scalar ").unwrap(), Some(Backend::Scalar));
    let missing = Backend::ALL.into_iter().find(|b| !b.is_supported()).unwrap();
    assert_eq!(Backend::parse_env_value(missing.name()).unwrap_err(), Error::UnsupportedBackend { backend: missing.name() });
    for none in ["", "  ", "auto", "AUTO"] {
        assert_eq!(Backend::parse_env_value(none).unwrap(), None, "{none:?}");
    }
    // The process configuration comes from the same parser.
    let (c, problems) = Config::from_lookup(|k| (k == "RAYO_BACKEND").then(|| "mmx".to_string()));
    assert_eq!((c.backend, problems.len()), (None, 1));
    let (c, problems) = Config::from_lookup(|k| (k == "RAYO_BACKEND").then(|| "scalar".to_string()));
    assert_eq!((c.backend, problems.len()), (Some(Backend::Scalar), 0));
    // This process's configuration, as parsed once: every variable is shown.
    let shown = Config::get().to_string();
    for var in Config::VARS {
        assert!(shown.contains(&format!("{}=", var.name)), "{shown}");
    }
    assert!(Config::problems().iter().all(|e| matches!(e, Error::InvalidEnv { .. } | Error::UnsupportedBackend { .. })));
}

#[test]
fn seed_examples() {
    let a = v(&[1.0, 2.0, 3.0, 4.0]);
    let b = v(&[5.0, 6.0, 7.0, 8.0]);
    assert_eq!(a.add(&b).unwrap().as_slice(), &[6.0, 8.0, 10.0, 12.0]);
    assert_eq!(a.mul(&b).unwrap().as_slice(), &[5.0, 12.0, 21.0, 32.0]);
    assert_eq!(a.dot(&b).unwrap(), 70.0);
    assert!((a.norm_l2() - 5.477_226).abs() < 1e-6);
    assert_eq!(a.norm_l1(), 10.0);
    assert_eq!(a.sum(), 10.0);
    assert_eq!(a.max().unwrap(), 4.0);
    assert_eq!(a.argmin().unwrap(), 0);
    assert_eq!(a[2], 3.0);
    let logits = v(&[0.1, -0.5, 0.3, 1.2]);
    assert_eq!(logits.relu().as_slice(), &[0.1, 0.0, 0.3, 1.2]);
    assert!((logits.gelu()[3] - 1.061_916_4).abs() < 1e-6);
    assert_eq!(logits.leaky_relu(0.01)[1], -0.005);
}
