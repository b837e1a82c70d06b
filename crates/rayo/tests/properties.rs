//! Algebraic facts on random inputs (proptest): softmax sums to 1, relu is idempotent, dot is
//! symmetric, norm_l2² = dot(a, a).

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

    #[test]
    fn dot_is_symmetric(a in finite(0..3000), seed in any::<u64>()) {
        let b: Vec<f32> = a.iter().enumerate().map(|(i, &v)| v * (((seed >> (i % 64)) & 1) as f32 - 0.5)).collect();
        let (va, vb) = (Vector::from_slice(&a), Vector::from_slice(&b));
        prop_assert_eq!(va.dot(&vb).unwrap(), vb.dot(&va).unwrap());
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
