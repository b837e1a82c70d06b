use super::*;

fn cfg(temperature: f32) -> SamplerConfig {
    SamplerConfig { temperature, top_k: 0, top_p: 1.0, min_p: 0.0, repeat_penalty: 1.0, repeat_last_n: 0, seed: 7 }
}

/// The ids the filters keep, sorted.
fn kept(c: SamplerConfig, logits: &[f32], history: &[u32]) -> Vec<u32> {
    let mut s = Sampler::new(c).unwrap();
    s.prepare(logits, history).unwrap();
    s.top_k();
    s.filter();
    let mut ids: Vec<u32> = s.cand.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    ids
}

/// Logits whose softmax is `p` (up to a shift).
fn logits_of(p: &[f64]) -> Vec<f32> {
    p.iter().map(|p| p.ln() as f32).collect()
}

/// A few pseudo-random logit rows (a small LCG: the test needs variety, not quality).
fn rows() -> Vec<Vec<f32>> {
    let mut x = 12345u64;
    (0..20)
        .map(|r| {
            (0..50 + r)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    ((x >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
                })
                .collect()
        })
        .collect()
}

fn argmax(x: &[f32]) -> u32 {
    let mut b = 0;
    for i in 1..x.len() {
        if x[i] > x[b] {
            b = i;
        }
    }
    b as u32
}

#[test]
fn greedy_is_argmax_first_max_on_ties() {
    let mut s = Sampler::new(SamplerConfig::greedy()).unwrap();
    for row in rows() {
        assert_eq!(s.sample(&row, &[]).unwrap(), argmax(&row));
    }
    assert_eq!(s.sample(&[1.0, 3.0, -2.0, 3.0], &[]).unwrap(), 1);
    assert_eq!(s.sample(&[f32::NEG_INFINITY, -5.0, f32::NEG_INFINITY], &[]).unwrap(), 1);
}

#[test]
fn top_k_1_is_greedy_at_any_temperature() {
    for t in [0.1, 1.0, 5.0, 100.0] {
        let mut s = Sampler::new(SamplerConfig { top_k: 1, ..cfg(t) }).unwrap();
        for row in rows() {
            assert_eq!(s.sample(&row, &[]).unwrap(), argmax(&row), "temperature {t}");
        }
        // Ties: the lower id, as argmax.
        assert_eq!(s.sample(&[0.0, 2.0, 2.0, 1.0], &[]).unwrap(), 1);
    }
}

#[test]
fn frequencies_match_softmax_over_temperature() {
    let logits = [1.0f32, 2.0, 0.5, -1.0, 1.5];
    for t in [0.7f32, 1.0, 2.5] {
        let mut s = Sampler::new(cfg(t)).unwrap();
        let n = 200_000;
        let mut count = [0usize; 5];
        for _ in 0..n {
            count[s.sample(&logits, &[]).unwrap() as usize] += 1;
        }
        let e: Vec<f64> = logits.iter().map(|&l| (l as f64 / t as f64).exp()).collect();
        let z: f64 = e.iter().sum();
        for i in 0..5 {
            let (want, got) = (e[i] / z, count[i] as f64 / n as f64);
            // 5 standard deviations of a frequency over n draws.
            let tol = 5.0 * (want * (1.0 - want) / n as f64).sqrt();
            assert!((want - got).abs() < tol, "T {t} token {i}: frequency {got}, softmax {want}, tol {tol}");
        }
    }
}

#[test]
fn same_seed_same_tokens_other_seed_other_tokens() {
    let logits = [0.3f32, 0.1, 0.2, 0.0, 0.25, 0.15];
    let run = |seed| {
        let mut s = Sampler::new(SamplerConfig { seed, ..cfg(1.0) }).unwrap();
        (0..64).map(|_| s.sample(&logits, &[]).unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn top_k_keeps_the_k_largest() {
    let logits = [0.5f32, 3.0, -1.0, 2.0, 1.0, 2.5];
    assert_eq!(kept(SamplerConfig { top_k: 3, ..cfg(1.0) }, &logits, &[]), vec![1, 3, 5]);
    assert_eq!(kept(SamplerConfig { top_k: 100, ..cfg(1.0) }, &logits, &[]), vec![0, 1, 2, 3, 4, 5]);
}

#[test]
fn top_p_keeps_the_shortest_prefix_reaching_p() {
    // Sorted probabilities 0.5, 0.3, 0.15, 0.05 (ids 2, 0, 3, 1).
    let logits = logits_of(&[0.3, 0.05, 0.5, 0.15]);
    let at = |p| kept(SamplerConfig { top_p: p, ..cfg(1.0) }, &logits, &[]);
    assert_eq!(at(0.4), vec![2]);
    assert_eq!(at(0.75), vec![0, 2]);
    assert_eq!(at(0.9), vec![0, 2, 3]);
    assert_eq!(at(0.99), vec![0, 1, 2, 3]);
    // Temperature comes after: a hot draw still never leaves the kept set.
    let mut s = Sampler::new(SamplerConfig { top_p: 0.75, ..cfg(50.0) }).unwrap();
    let mut seen = [false; 4];
    for _ in 0..2000 {
        seen[s.sample(&logits, &[]).unwrap() as usize] = true;
    }
    assert_eq!(seen, [true, false, true, false]);
}

#[test]
fn min_p_keeps_tokens_above_a_fraction_of_the_best() {
    // Probabilities 0.6, 0.3, 0.06, 0.04: min_p 0.08 puts the floor at 0.048.
    let logits = logits_of(&[0.06, 0.6, 0.04, 0.3]);
    let at = |m| kept(SamplerConfig { min_p: m, ..cfg(1.0) }, &logits, &[]);
    assert_eq!(at(0.08), vec![0, 1, 3]);
    assert_eq!(at(0.4), vec![1, 3]);
    assert_eq!(at(0.9), vec![1]);
    assert_eq!(at(0.01), vec![0, 1, 2, 3]);
}

#[test]
fn repetition_penalty_lowers_recent_tokens_only() {
    let logits = [2.0f32, 1.9, -1.0, -1.2, 0.5];
    let c = SamplerConfig { repeat_penalty: 2.0, repeat_last_n: 2, ..SamplerConfig::greedy() };
    let mut s = Sampler::new(c.clone()).unwrap();
    // Token 0 in the window (twice: penalized once): 2.0 / 2 = 1.0 < 1.9.
    assert_eq!(s.sample(&logits, &[4, 0, 0]).unwrap(), 1);
    // Token 0 outside the last 2: no change.
    assert_eq!(s.sample(&logits, &[0, 4, 4]).unwrap(), 0);
    // Negative logits are multiplied: -1.0 * 2 = -2.0 < -1.2.
    s.prepare(&logits, &[2, 0]).unwrap();
    let got: Vec<f32> = s.cand.iter().map(|c| c.logit).collect();
    assert_eq!(got, vec![1.0, 1.9, -2.0, -1.2, 0.5]);
    // Off (1.0 or last_n 0): the history is not read.
    let mut off = Sampler::new(SamplerConfig { repeat_last_n: 0, ..c }).unwrap();
    assert_eq!(off.sample(&logits, &[0, 0]).unwrap(), 0);
}

#[test]
fn bad_parameters_are_errors_with_their_value() {
    let bad = |c: SamplerConfig, name: &str| match Sampler::new(c) {
        Err(Error::Rayo(rayo::Error::InvalidParameter { name: n, .. })) => assert_eq!(n, name),
        other => panic!("{name}: expected InvalidParameter, got {other:?}"),
    };
    bad(SamplerConfig { temperature: f32::NAN, ..cfg(1.0) }, "temperature");
    bad(SamplerConfig { temperature: -0.5, ..cfg(1.0) }, "temperature");
    bad(SamplerConfig { temperature: f32::INFINITY, ..cfg(1.0) }, "temperature");
    bad(SamplerConfig { top_p: 0.0, ..cfg(1.0) }, "top_p");
    bad(SamplerConfig { top_p: 1.5, ..cfg(1.0) }, "top_p");
    bad(SamplerConfig { top_p: f32::NAN, ..cfg(1.0) }, "top_p");
    bad(SamplerConfig { min_p: -0.1, ..cfg(1.0) }, "min_p");
    bad(SamplerConfig { min_p: 1.1, ..cfg(1.0) }, "min_p");
    bad(SamplerConfig { repeat_penalty: 0.0, ..cfg(1.0) }, "repeat_penalty");
    bad(SamplerConfig { repeat_penalty: f32::NAN, ..cfg(1.0) }, "repeat_penalty");
    let e = Sampler::new(SamplerConfig { temperature: -0.5, ..cfg(1.0) }).unwrap_err();
    assert!(e.to_string().contains("-0.5"), "{e}");
    assert!(Sampler::new(SamplerConfig::default()).is_ok());
    assert!(Sampler::new(SamplerConfig::greedy()).is_ok());
}

#[test]
fn bad_logits_and_history_are_errors() {
    for t in [0.0, 1.0] {
        let mut s = Sampler::new(SamplerConfig { repeat_penalty: 1.1, repeat_last_n: 8, ..cfg(t) }).unwrap();
        assert!(matches!(s.sample(&[], &[]), Err(Error::Rayo(rayo::Error::EmptyInput { .. }))));
        let e = s.sample(&[0.0, f32::NAN, 1.0], &[]).unwrap_err();
        assert!(matches!(&e, Error::Logits { what } if what.contains("logit 1 of 3")), "{e}");
        assert!(matches!(s.sample(&[0.0, f32::INFINITY], &[]), Err(Error::Logits { .. })));
        assert!(matches!(s.sample(&[f32::NEG_INFINITY; 3], &[]), Err(Error::Logits { .. })));
        assert!(matches!(s.sample(&[0.0, 1.0], &[0, 5]), Err(Error::Rayo(rayo::Error::IndexOutOfBounds { index: 5, len: 2 }))));
    }
}

#[test]
fn masked_tokens_are_never_drawn() {
    let logits = [f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY, 0.0];
    let mut s = Sampler::new(cfg(3.0)).unwrap();
    for _ in 0..500 {
        let id = s.sample(&logits, &[]).unwrap();
        assert!(id == 1 || id == 3, "{id}");
    }
}

#[test]
fn tiny_temperature_is_near_greedy_without_overflow() {
    let mut s = Sampler::new(cfg(1e-30)).unwrap();
    for row in rows() {
        assert_eq!(s.sample(&row, &[]).unwrap(), argmax(&row));
    }
}

/// top-k, top-p and min-p written the obvious way (full sort), for comparison.
fn naive_kept(c: &SamplerConfig, logits: &[f32]) -> Vec<u32> {
    let mut v: Vec<(f32, u32)> = logits.iter().enumerate().map(|(i, &l)| (l, i as u32)).collect();
    v.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    if c.top_k > 0 {
        v.truncate(c.top_k);
    }
    let max = v[0].0 as f64;
    let z: f64 = v.iter().map(|x| (x.0 as f64 - max).exp()).sum();
    let mut cum = 0.0;
    let keep = v.iter().position(|x| {
        cum += (x.0 as f64 - max).exp() / z;
        cum >= c.top_p as f64
    });
    if c.top_p < 1.0 {
        v.truncate(keep.map_or(v.len(), |i| i + 1));
    }
    v.retain(|x| (x.0 as f64 - max).exp() >= c.min_p as f64);
    let mut ids: Vec<u32> = v.iter().map(|x| x.1).collect();
    ids.sort_unstable();
    ids
}

#[test]
fn filters_match_a_naive_reference() {
    // 3000 nearly flat logits: a nucleus past 256 tokens makes top-p grow its sorted head.
    let mut x = 99u64;
    let mut rnd = || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 40) as f32 / (1u64 << 24) as f32
    };
    let flat: Vec<f32> = (0..3000).map(|_| rnd() * 0.5).collect();
    let peaked: Vec<f32> = (0..3000).map(|_| rnd() * 20.0).collect();
    for logits in [&flat, &peaked] {
        for (top_k, top_p, min_p) in
            [(0, 0.9, 0.0), (0, 0.5, 0.0), (40, 1.0, 0.0), (500, 1.0, 0.0), (500, 0.95, 0.05), (0, 1.0, 0.7), (129, 0.8, 0.0)]
        {
            let c = SamplerConfig { top_k, top_p, min_p, ..cfg(1.0) };
            let got = kept(c.clone(), logits, &[]);
            assert_eq!(got, naive_kept(&c, logits), "top_k {top_k} top_p {top_p} min_p {min_p}");
            assert!(!got.is_empty());
        }
    }
    // The top-k scan straight from the logits (no penalty, temperature > 0) keeps the same set.
    let mut s = Sampler::new(SamplerConfig { top_k: 40, ..cfg(1.0) }).unwrap();
    s.sample(&peaked, &[]).unwrap();
    let mut ids: Vec<u32> = s.cand.iter().map(|c| c.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, naive_kept(&SamplerConfig { top_k: 40, ..cfg(1.0) }, &peaked));
}

/// A draw from the k largest logits (what a device backend hands over, `top_k_of`'s order)
/// is the draw `sample` makes from the whole row: the same tokens for the same seed, with ties,
/// −0/+0 and masked logits in the rows; `top_k_only` says when that holds.
#[test]
fn drawing_from_the_top_k_equals_sampling_the_row() {
    let mut rows = rows();
    rows[3][7] = rows[3][9]; // a tie
    rows[4][0] = -0.0;
    rows[4][1] = 0.0;
    rows[5][2] = f32::NEG_INFINITY;
    for (i, row) in rows.iter().enumerate() {
        for (k, top_p, min_p, t) in [(40, 0.95, 0.05, 0.8), (1, 1.0, 0.0, 1.0), (5, 0.5, 0.0, 2.0), (20, 1.0, 0.1, 0.3)] {
            let c = SamplerConfig { top_k: k, top_p, min_p, seed: 11 + i as u64, ..cfg(t) };
            assert_eq!(Sampler::new(c.clone()).unwrap().top_k_only(row.len()), Some(k));
            let (mut a, mut b) = (Sampler::new(c.clone()).unwrap(), Sampler::new(c).unwrap());
            let top = top_k_of(row, k).unwrap();
            assert_eq!(top.len(), k);
            for _ in 0..50 {
                assert_eq!(a.sample(row, &[]).unwrap(), b.sample_top(&top), "row {i}, k {k}");
            }
        }
    }
    // not when the whole row matters: greedy, a penalty, no top-k, k past 128 or the row
    let n = 1000;
    for c in [
        cfg(0.0),
        SamplerConfig { top_k: 40, repeat_penalty: 1.1, repeat_last_n: 64, ..cfg(0.8) },
        SamplerConfig { top_k: 0, ..cfg(0.8) },
        SamplerConfig { top_k: 129, ..cfg(0.8) },
    ] {
        assert_eq!(Sampler::new(c).unwrap().top_k_only(n), None);
    }
    assert_eq!(Sampler::new(SamplerConfig { top_k: 40, ..cfg(0.8) }).unwrap().top_k_only(40), None);
    assert!(top_k_of(&[1.0, f32::NAN, 2.0], 2).is_err());
}

/// The chi-square statistic's quantile for `df` degrees of freedom at a tail of about 10⁻⁶
/// (Wilson–Hilferty, z = 4.75): a test that fails only when the frequencies are wrong.
fn chi_square_bound(df: usize) -> f64 {
    let d = df.max(1) as f64;
    let a = 2.0 / (9.0 * d);
    d * (1.0 - a + 4.75 * a.sqrt()).powi(3)
}

/// Draws `n` tokens with `draw` and checks their frequencies against `want` (a distribution
/// over the ids; a draw outside its support fails at once) with a chi-square test.
fn chi_square(what: &str, want: &[(u32, f64)], n: usize, mut draw: impl FnMut() -> u32) {
    let mut count = vec![0usize; want.len()];
    for _ in 0..n {
        let id = draw();
        let i = want.iter().position(|w| w.0 == id).unwrap_or_else(|| panic!("{what}: drew {id}, outside the filtered set {want:?}"));
        count[i] += 1;
    }
    let stat: f64 = want.iter().zip(&count).map(|(w, &c)| (c as f64 - n as f64 * w.1).powi(2) / (n as f64 * w.1)).sum();
    let bound = chi_square_bound(want.len() - 1);
    assert!(stat < bound, "{what}: chi-square {stat:.1} over {} tokens, bound {bound:.1}; counts {count:?}", want.len());
}

/// The exact distribution the sampler draws from: softmax(logits / T) over the ids the naive
/// filters keep.
fn filtered_softmax(c: &SamplerConfig, logits: &[f32]) -> Vec<(u32, f64)> {
    let ids = naive_kept(c, logits);
    let max = ids.iter().map(|&i| logits[i as usize] as f64).fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = ids.iter().map(|&i| ((logits[i as usize] as f64 - max) / c.temperature as f64).exp()).collect();
    let z: f64 = e.iter().sum();
    ids.iter().zip(e).map(|(&i, e)| (i, e / z)).collect()
}

/// ≥ 10⁵ draws for fixed logits under each filter (top-k, top-p, min-p, temperature, and all of
/// them at llama-server's defaults) match the exact filtered softmax, from the whole row and from
/// its top k (the pairs a device hands over).
#[test]
fn frequencies_match_the_filtered_softmax() {
    let logits: Vec<f32> = [2.0, 1.5, 1.4, 1.0, 0.7, 0.2, -0.5, -1.0, 0.9, 1.8, -3.0, 0.0].to_vec();
    let n = 100_000;
    for (k, p, m, t) in [(0, 1.0, 0.0, 1.0), (4, 1.0, 0.0, 0.7), (0, 0.8, 0.0, 1.3), (0, 1.0, 0.3, 0.9), (40, 0.95, 0.05, 0.8), (6, 0.9, 0.1, 2.0)] {
        let c = SamplerConfig { top_k: k, top_p: p, min_p: m, seed: 1000 + k as u64, ..cfg(t) };
        let want = filtered_softmax(&c, &logits);
        let what = format!("top_k {k} top_p {p} min_p {m} T {t}");
        let mut s = Sampler::new(c.clone()).unwrap();
        chi_square(&what, &want, n, || s.sample(&logits, &[]).unwrap());
        if k > 0 && k < logits.len() {
            let top = top_k_of(&logits, k).unwrap();
            let mut s = Sampler::new(SamplerConfig { seed: 77, ..c }).unwrap();
            chi_square(&format!("{what}, from the top k"), &want, n, || s.sample_top(&top));
        }
    }
}

#[test]
fn edge_cases_of_the_filters() {
    let draws = |c: SamplerConfig, logits: &[f32]| {
        let mut s = Sampler::new(c).unwrap();
        let mut ids: Vec<u32> = (0..2000).map(|_| s.sample(logits, &[]).unwrap()).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    };
    // ties at top-k's edge: the lower ids stay, as argmax takes the first maximum
    assert_eq!(draws(SamplerConfig { top_k: 2, ..cfg(1.0) }, &[1.0, 2.0, 2.0, 2.0, 0.0]), [1, 2]);
    // k above the vocabulary: every token
    assert_eq!(draws(SamplerConfig { top_k: 100, ..cfg(5.0) }, &[0.0, 0.1, 0.2]), [0, 1, 2]);
    // p = 1: no token cut, however unlikely
    assert_eq!(draws(SamplerConfig { top_p: 1.0, ..cfg(50.0) }, &[0.0, -3.0, -6.0]), [0, 1, 2]);
    // min-p with a single survivor
    assert_eq!(draws(SamplerConfig { min_p: 0.5, ..cfg(2.0) }, &[5.0, 1.0, 0.0, 4.0]), [0]);
    // every logit -inf but one, at any temperature and with every filter
    let one = [f32::NEG_INFINITY, f32::NEG_INFINITY, -7.0, f32::NEG_INFINITY];
    for c in [cfg(0.0), cfg(1.0), SamplerConfig { top_k: 3, top_p: 0.5, min_p: 0.9, ..cfg(0.3) }] {
        assert_eq!(draws(c, &one), [2]);
    }
    // NaN: an error that names the logit, at every temperature
    for t in [0.0, 0.8] {
        let e = Sampler::new(SamplerConfig { top_k: 40, ..cfg(t) }).unwrap().sample(&[1.0, 2.0, f32::NAN], &[]).unwrap_err();
        assert!(e.to_string().contains("logit 2 of 3 is NaN"), "{e}");
    }
}

/// The counter-based draws: the n-th uniform number depends only on (seed, n); they are
/// uniform enough (a chi-square over 16 bins) and differ between seeds.
#[test]
fn uniform_numbers_are_counter_based() {
    assert_eq!(uniform(5, 9), uniform(5, 9));
    assert_ne!(uniform(5, 9), uniform(6, 9));
    assert_ne!(uniform(5, 9), uniform(5, 10));
    let n = 160_000u64;
    let mut bins = [0usize; 16];
    for i in 0..n {
        let u = uniform(42, i);
        assert!((0.0..1.0).contains(&u));
        bins[(u * 16.0) as usize] += 1;
    }
    let want = n as f64 / 16.0;
    let stat: f64 = bins.iter().map(|&c| (c as f64 - want).powi(2) / want).sum();
    assert!(stat < chi_square_bound(15), "chi-square {stat:.1}: {bins:?}");
}
