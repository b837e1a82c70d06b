//! Algebraic facts on random inputs (proptest): softmax sums to 1, relu is idempotent, dot is
//! within its documented bound of the f64 dot on every instruction set, norm_l2² = dot(a, a).

use proptest::prelude::*;
use rayo::Vector;

fn finite(len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<f32>> {
    prop::collection::vec(-1e3f32..1e3, len)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn softmax_sums_to_one(x in finite(1..3000)) {
        let s = Vector::from_slice(&x).softmax().unwrap();
        let total: f64 = s.as_slice().iter().map(|&v| v as f64).sum();
        prop_assert!((total - 1.0).abs() < 1e-5, "sum {}", total);
        prop_assert!(s.as_slice().iter().all(|&v| (0.0..=1.0).contains(&v)));
    }

    #[test]
    fn log_softmax_is_ln_of_softmax(x in prop::collection::vec(-20f32..20.0, 1..500)) {
        let v = Vector::from_slice(&x);
        let (s, l) = (v.softmax().unwrap(), v.log_softmax().unwrap());
        for (p, q) in s.as_slice().iter().zip(l.as_slice()) {
            prop_assert!(((*p as f64).ln() - *q as f64).abs() < 1e-4 * (1.0 + q.abs() as f64));
        }
    }

    #[test]
    fn relu_is_idempotent(x in finite(0..3000)) {
        let once = Vector::from_slice(&x).relu();
        let twice = once.relu();
        prop_assert_eq!(once.as_slice(), twice.as_slice());
    }

    // (Was "dot is symmetric", true by construction of the kernel: it could not fail.)
    #[test]
    fn dot_is_within_its_bound_of_the_f64_dot(a in finite(0..3000), seed in any::<u64>(), skip in 0usize..4) {
        let b: Vec<f32> = a.iter().enumerate().map(|(i, &v)| v * (((seed >> (i % 64)) & 1) as f32 - 0.5) + 0.25).collect();
        let (a, b) = (&a[skip.min(a.len())..], &b[skip.min(b.len())..]); // unaligned starts too
        let want: f64 = a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum();
        let scale: f64 = a.iter().zip(b).map(|(&x, &y)| (x as f64 * y as f64).abs()).sum();
        for backend in rayo::Backend::available() {
            let got = rayo::slice::dot(backend, a, b).unwrap() as f64;
            let bound = 64.0 * f32::EPSILON as f64 * scale + f32::EPSILON as f64 * want.abs();
            prop_assert!((got - want).abs() <= bound, "{}: {} vs {} (bound {})", backend, got, want, bound);
        }
    }

    #[test]
    fn norm_l2_squared_is_dot_with_itself(a in finite(0..3000)) {
        let v = Vector::from_slice(&a);
        let n = v.norm_l2() as f64;
        let d = v.dot(&v).unwrap() as f64;
        prop_assert!((n * n - d).abs() <= 1e-5 * d.max(1e-30), "{} vs {}", n * n, d);
    }

    #[test]
    fn add_then_sub_round_trips_exactly_for_small_integers(a in prop::collection::vec(-1000i32..1000, 0..500)) {
        let x: Vec<f32> = a.iter().map(|&v| v as f32).collect();
        let y: Vec<f32> = a.iter().map(|&v| (v / 3) as f32).collect();
        let (vx, vy) = (Vector::from_slice(&x), Vector::from_slice(&y));
        let back = vx.add(&vy).unwrap().sub(&vy).unwrap();
        prop_assert_eq!(back.as_slice(), &x[..]);
    }
}
