//! Quantized matrix products (rayo::quant::matmul*) for every weight format on every ISA,
//! against f64 products of the dequantized weights with (a) the exact f32 activations for the
//! f32-activation path, (b) the dequantized 8-bit activations for the integer path. The
//! tolerance is derived: f32 rounding of each per-block term plus the f32 accumulation, times
//! a bound on the terms' magnitude.

mod common;

use common::{backends, Rng};
use rayo::quant::{self, activation_type, Activations, GgmlType, QuantMatrix};
use rayo::{Backend, Error, Par};

/// Columns for a shape: one block, or several.
fn cols_for(ty: GgmlType, many: bool) -> usize {
    match (ty.block_size(), many) {
        (1, false) => 33,
        (1, true) => 300,
        (b, false) => b,
        (b, true) => 3 * b.max(128),
    }
}

/// Quantized weights (rows × cols) at byte offset 1 of their buffer (unaligned for every
/// block with f16 fields), with their dequantized values.
fn weights(rng: &mut Rng, ty: GgmlType, rows: usize, cols: usize) -> (Vec<u8>, Vec<f32>) {
    let mut buf = vec![0u8];
    for _ in 0..rows {
        // Rows of different scales and a shift, so mins and offsets matter.
        let scale = rng.uniform(0.1, 3.0);
        let shift = rng.uniform(-0.5, 0.5);
        let row: Vec<f32> = (0..cols).map(|_| scale * (rng.uniform(-1.0, 1.0) + shift)).collect();
        buf.extend(quant::quantize_to_vec(ty, &row).unwrap());
    }
    let mut deq = vec![0f32; rows * cols];
    quant::dequantize(ty, &buf[1..], &mut deq).unwrap();
    (buf, deq)
}

/// The activations the product sees: exact, or quantized to the paired format and back.
fn seen_activations(backend: Backend, ty: GgmlType, act: Activations, x: &[f32], cols: usize) -> Vec<f32> {
    match (act, activation_type(ty)) {
        (Activations::Quantized, Some(at)) => {
            let mut out = vec![0f32; x.len()];
            for (xr, or) in x.chunks_exact(cols).zip(out.chunks_exact_mut(cols)) {
                let bytes = quant::quantize_activations_with(backend, at, xr).unwrap();
                quant::dequantize(at, &bytes, or).unwrap();
            }
            out
        }
        _ => x.to_vec(),
    }
}

/// Checks `y` (m × rows) against the f64 product; returns the largest error / tolerance.
/// `s_f16`: the activations are Q8_1 blocks, whose `s` (Σq·d, which multiplies the weights'
/// min) the block stores in f16 from the unrounded `d`, as llama.cpp does and uses: two f16
/// roundings, 2⁻¹⁰ of it, more per block.
fn check(y: &[f32], w: &[f32], a: &[f32], rows: usize, cols: usize, s_f16: bool, what: &str) -> f64 {
    let m = a.len() / cols;
    let mut worst = 0f64;
    for j in 0..rows {
        let wr = &w[j * cols..(j + 1) * cols];
        let wmax = wr.iter().fold(0f64, |m, v| m.max(v.abs() as f64));
        for i in 0..m {
            let ar = &a[i * cols..(i + 1) * cols];
            let exact: f64 = wr.iter().zip(ar).map(|(&w, &a)| w as f64 * a as f64).sum();
            // Every f32 term (d·d_y·Σq·y, m·s, offsets) is bounded by Σ(|w| + max|w|)·|a|;
            // each carries a few roundings and the accumulation adds one per term.
            let mag: f64 = wr.iter().zip(ar).map(|(&w, &a)| (w.abs() as f64 + wmax) * a.abs() as f64).sum();
            let mut tol = (cols as f64 + 8.0) * f32::EPSILON as f64 * mag + 1e-30;
            if s_f16 {
                let sums: f64 = ar.chunks(32).map(|b| b.iter().map(|&v| v as f64).sum::<f64>().abs()).sum();
                tol += wmax * sums * 1.01 * 2f64.powi(-10);
            }
            let err = (y[i * rows + j] as f64 - exact).abs();
            assert!(err <= tol, "{what}: y[{i}][{j}] = {} vs {exact} (err {err:e} > tol {tol:e})", y[i * rows + j]);
            worst = worst.max(err / tol);
        }
    }
    worst
}

#[test]
fn every_format_every_isa_against_f64() {
    let mut rng = Rng::new(10);
    let mut ran = 0;
    for backend in backends("quant_matmul") {
        for ty in GgmlType::ALL {
            let mut worst = [0f64; 2];
            for (rows, many) in [(1, false), (3, true), (5, false)] {
                let cols = cols_for(ty, many);
                let (buf, wdeq) = weights(&mut rng, ty, rows, cols);
                let w = QuantMatrix::new(ty, rows, cols, &buf[1..]).unwrap();
                for m in [1, 7, 64, 65] {
                    if m > 7 && !many {
                        continue;
                    }
                    let x = rng.data(m * cols, -2.0, 2.0);
                    for (k, act) in [Activations::Quantized, Activations::F32].into_iter().enumerate() {
                        let a = seen_activations(backend, ty, act, &x, cols);
                        let mut first: Option<Vec<f32>> = None;
                        for threads in [1, 2] {
                            let mut y = vec![f32::NAN; m * rows];
                            quant::matmul_with(backend, act, &w, &x, &mut y, Par::threads(threads)).unwrap();
                            let what = format!("{backend} {ty} {act:?} rows {rows} cols {cols} m {m} threads {threads}");
                            let s_f16 = act == Activations::Quantized && activation_type(ty) == Some(GgmlType::Q8_1);
                            worst[k] = worst[k].max(check(&y, &wdeq, &a, rows, cols, s_f16, &what));
                            // Rows are independent of the split: threads give the same bits.
                            match &first {
                                None => first = Some(y),
                                Some(f) => assert_eq!(
                                    f.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                                    y.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                                    "{what}"
                                ),
                            }
                            ran += 1;
                        }
                    }
                }
            }
            println!("{backend} {ty}: worst err/tol quantized {:.3}, f32 {:.3}", worst[0], worst[1]);
        }
    }
    println!("{ran} products checked");
}

#[test]
fn large_products_split_over_threads() {
    // Enough work for the thread split (≥ 2^18 weight bytes × rows): the parallel path, several
    // blocks of weight rows (the last one partial) against several tiles of activation rows.
    let mut rng = Rng::new(11);
    for ty in [GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K] {
        let (rows, cols) = (67, 2048);
        let (buf, wdeq) = weights(&mut rng, ty, rows, cols);
        let w = QuantMatrix::new(ty, rows, cols, &buf[1..]).unwrap();
        for m in [1, 9, 64] {
            let x = rng.data(m * cols, -1.0, 1.0);
            let a = seen_activations(Backend::selected(), ty, Activations::Quantized, &x, cols);
            let mut y1 = vec![0f32; m * rows];
            let mut y2 = vec![0f32; m * rows];
            quant::matmul(&w, &x, &mut y1, Par::Seq).unwrap();
            quant::matmul(&w, &x, &mut y2, Par::threads(2)).unwrap();
            assert_eq!(y1, y2);
            check(&y1, &wdeq, &a, rows, cols, activation_type(ty) == Some(GgmlType::Q8_1), &format!("{ty} m {m}"));
            if m == 1 {
                let mut yv = vec![0f32; rows];
                quant::matvec(&w, &x, &mut yv, Par::threads(2)).unwrap();
                assert_eq!(yv, y1);
                quant::matvec_f32act(&w, &x, &mut yv, Par::Seq).unwrap();
                check(&yv, &wdeq, &x, rows, cols, false, &format!("{ty} f32act"));
            }
        }
    }
}

#[test]
fn activation_quantizers_equal_the_reference() {
    let mut rng = Rng::new(12);
    for backend in backends("quant_matmul activations") {
        for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
            for case in 0..20 {
                let n = ty.block_size() * (1 + case % 3);
                let mut x = rng.data(n, -3.0, 3.0);
                match case {
                    // Ties: amax 127 makes d = 1, so k + 0.5 lands exactly on a half.
                    0 => x.iter_mut().enumerate().for_each(|(i, v)| *v = if i % 32 == 0 { 127.0 } else { (i % 40) as f32 - 19.5 }),
                    1 => x.fill(0.0),
                    // The largest magnitude twice, with both signs (Q8_K keeps the first).
                    2 => {
                        x[5] = -4.0;
                        x[9] = 4.0;
                    }
                    _ => {}
                }
                let got = quant::quantize_activations_with(backend, ty, &x).unwrap();
                let want = quant::quantize_to_vec(ty, &x).unwrap();
                assert_eq!(got, want, "{backend} {ty} case {case}");
            }
        }
    }
}

#[test]
fn shape_errors_carry_their_numbers() {
    let bytes = vec![0u8; 2 * 18];
    assert!(matches!(QuantMatrix::new(GgmlType::Q4_0, 2, 33, &bytes), Err(Error::NotBlockMultiple { len: 33, block: 32, .. })));
    assert!(matches!(QuantMatrix::new(GgmlType::Q4_0, 3, 32, &bytes), Err(Error::LengthMismatch { expected: 54, actual: 36, .. })));
    assert!(matches!(QuantMatrix::new(GgmlType::Q4_K, usize::MAX / 2, 256, &bytes), Err(Error::SizeOverflow { .. })));
    let w = QuantMatrix::new(GgmlType::Q4_0, 2, 32, &bytes).unwrap();
    let mut y = vec![0f32; 2];
    assert!(matches!(quant::matvec(&w, &[0.0; 31], &mut y, Par::Seq), Err(Error::LengthMismatch { expected: 32, actual: 31, .. })));
    assert!(matches!(quant::matvec(&w, &[0.0; 32], &mut y[..1], Par::Seq), Err(Error::LengthMismatch { expected: 2, actual: 1, .. })));
    assert!(matches!(quant::matmul(&w, &[0.0; 70], &mut y, Par::Seq), Err(Error::SizeMismatch { len: 70, .. })));
    assert!(matches!(quant::matmul(&w, &[0.0; 64], &mut y, Par::Seq), Err(Error::LengthMismatch { expected: 4, actual: 2, .. })));
    let e = QuantMatrix::new(GgmlType::F32, 2, 0, &[]).unwrap();
    assert!(matches!(quant::matmul(&e, &[], &mut [], Par::Seq), Err(Error::EmptyInput { .. })));
    // m = 0 rows is an empty product, not an error.
    quant::matmul(&w, &[], &mut [], Par::Seq).unwrap();
    assert!(matches!(quant::quantize_activations_with(Backend::Scalar, GgmlType::Q4_0, &[0.0; 32]), Err(Error::UnsupportedType { id: 2, .. })));
}

/// Activations prepared once ([`quant::PreparedActs`]) and shared by matrices of formats that
/// pair with the same activation format, each multiplied in row ranges (as an engine's threads
/// take chunks): the same bits as the whole product of each matrix.
#[test]
fn prepared_activations_in_row_ranges_equal_the_whole_product() {
    let mut rng = Rng::new(12);
    let cols = 512;
    for backend in backends("quant_matmul prepared") {
        // Q4_K and Q6_K share Q8_K rows; Q4_0 and Q8_0 share Q8_0 rows; F16 takes f32 rows.
        for tys in
            [[GgmlType::Q4_K, GgmlType::Q6_K], [GgmlType::Q4_0, GgmlType::Q8_0], [GgmlType::Q4_1, GgmlType::Q5_1], [GgmlType::F16, GgmlType::F32]]
        {
            for act in [Activations::Quantized, Activations::F32] {
                for m in [1, 8, 13, 64] {
                    let x = rng.data(m * cols, -1.5, 1.5);
                    let p = quant::PreparedActs::new(backend, act, tys[0], &x, cols).unwrap();
                    assert_eq!((p.rows(), p.cols()), (m, cols));
                    for ty in tys {
                        assert!(p.serves(ty), "{ty} {act:?}");
                        let rows = 37;
                        let (buf, _) = weights(&mut rng, ty, rows, cols);
                        let w = QuantMatrix::new(ty, rows, cols, &buf[1..]).unwrap();
                        let mut whole = vec![0f32; m * rows];
                        quant::matmul_with(backend, act, &w, &x, &mut whole, Par::Seq).unwrap();
                        for (r0, r1) in [(0, 16), (16, 32), (32, 37), (5, 5)] {
                            let mut part = vec![f32::NAN; m * (r1 - r0)];
                            quant::matmul_rows(backend, &w, &p, r0, r1, &mut part).unwrap();
                            for i in 0..m {
                                let want: Vec<u32> = whole[i * rows + r0..i * rows + r1].iter().map(|v| v.to_bits()).collect();
                                let got: Vec<u32> = part[i * (r1 - r0)..(i + 1) * (r1 - r0)].iter().map(|v| v.to_bits()).collect();
                                assert_eq!(got, want, "{backend} {ty} {act:?} m {m} rows {r0}..{r1} activation row {i}");
                            }
                        }
                    }
                }
            }
        }
    }
    // Errors, not panics: another pairing, another width, a range past the rows, a short output.
    let x = rng.data(2 * cols, -1.0, 1.0);
    let p = quant::PreparedActs::new(Backend::selected(), Activations::Quantized, GgmlType::Q4_K, &x, cols).unwrap();
    assert!(!p.serves(GgmlType::Q4_0));
    let (buf, _) = weights(&mut rng, GgmlType::Q4_0, 4, cols);
    let w = QuantMatrix::new(GgmlType::Q4_0, 4, cols, &buf[1..]).unwrap();
    assert!(matches!(quant::matmul_rows(Backend::selected(), &w, &p, 0, 4, &mut [0.0; 8]), Err(Error::InvalidArgument { .. })));
    let (buf, _) = weights(&mut rng, GgmlType::Q4_K, 4, 256);
    let narrow = QuantMatrix::new(GgmlType::Q4_K, 4, 256, &buf[1..]).unwrap();
    assert!(matches!(quant::matmul_rows(Backend::selected(), &narrow, &p, 0, 4, &mut [0.0; 8]), Err(Error::LengthMismatch { .. })));
    let (buf, _) = weights(&mut rng, GgmlType::Q4_K, 4, cols);
    let w = QuantMatrix::new(GgmlType::Q4_K, 4, cols, &buf[1..]).unwrap();
    assert!(matches!(quant::matmul_rows(Backend::selected(), &w, &p, 2, 5, &mut [0.0; 6]), Err(Error::InvalidArgument { .. })));
    assert!(matches!(quant::matmul_rows(Backend::selected(), &w, &p, 3, 2, &mut [0.0; 0]), Err(Error::InvalidArgument { .. })));
    assert!(matches!(quant::matmul_rows(Backend::selected(), &w, &p, 0, 4, &mut [0.0; 7]), Err(Error::LengthMismatch { .. })));
    assert!(matches!(
        quant::PreparedActs::new(Backend::selected(), Activations::Quantized, GgmlType::Q4_K, &x[..700], 512),
        Err(Error::SizeMismatch { .. })
    ));
    assert!(matches!(
        quant::PreparedActs::new(Backend::selected(), Activations::Quantized, GgmlType::Q4_K, &x[..600], 300),
        Err(Error::NotBlockMultiple { .. })
    ));
    assert!(matches!(quant::PreparedActs::new(Backend::selected(), Activations::Quantized, GgmlType::Q4_K, &x, 0), Err(Error::EmptyInput { .. })));
}

/// Batch invariance, what a server needs to give a request the same tokens alone or beside
/// others: a one-token row's products are the bits of that row alone (decoding), whatever the
/// batch; a prompt row's are the same bits at any place in any batch of prompt rows (inside a
/// full tile of eight or in the padded last one).
#[test]
fn a_rows_products_do_not_depend_on_its_batch() {
    let mut rng = Rng::new(13);
    let mut failures = Vec::new();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for backend in backends("quant_matmul batch invariance") {
        for ty in GgmlType::ALL {
            let cols = cols_for(ty, true);
            let rows = 21;
            let (buf, _) = weights(&mut rng, ty, rows, cols);
            let w = QuantMatrix::new(ty, rows, cols, &buf[1..]).unwrap();
            for act in [Activations::Quantized, Activations::F32] {
                // 15 one-token rows: groups of 8, 4, 2 and 1
                let (m, single) = (19, 15);
                let x = rng.data(m * cols, -2.0, 2.0);
                let product = |x: &[f32], single: usize| {
                    let p = quant::PreparedActs::new(backend, act, ty, x, cols).unwrap().with_single_rows(single).unwrap();
                    let mut y = vec![0f32; p.rows() * rows];
                    quant::matmul_rows(backend, &w, &p, 0, rows, &mut y).unwrap();
                    y
                };
                let batch = product(&x, single);
                let row = |i: usize| &x[i * cols..(i + 1) * cols];
                let got = |i: usize| &batch[i * rows..(i + 1) * rows];
                for i in 0..single {
                    // alone: one row is a one-token row by default
                    let mut alone = vec![0f32; rows];
                    quant::matmul_with(backend, act, &w, row(i), &mut alone, Par::Seq).unwrap();
                    if bits(&alone) != bits(got(i)) {
                        failures.push(format!("{backend} {ty} {act:?} one-token row {i} differs from the row alone"));
                    }
                }
                // the prompt rows reversed (other places, other tiles), and each beside a copy
                let reversed: Vec<f32> = (single..m).rev().flat_map(|i| row(i).to_vec()).collect();
                let other = product(&reversed, 0);
                for i in single..m {
                    let k = m - 1 - i;
                    let pair: Vec<f32> = [row(i), row(0)].concat();
                    if bits(&other[k * rows..(k + 1) * rows]) != bits(got(i)) || bits(&product(&pair, 0)[..rows]) != bits(got(i)) {
                        failures.push(format!("{backend} {ty} {act:?} prompt row {i} differs in another batch"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} differ:\n{}", failures.len(), failures.join("\n"));
}

/// Q4_K rows repacked for decoding (AVX-512 VNNI and AVX2, each where the CPU has it): the
/// one-token rows against f64, the same bits on both ISAs, the same
/// bits alone, batched in groups of 1–4 and beside prompt rows, in any range of weight rows
/// (a last group of fewer than 16 rows, ranges across groups), and over threads; prompt rows
/// (whose panels are built from the copy) the same bits as from the file's layout, in any range
/// of weight rows; a copy made from another matrix refused; no copy for other formats or ISAs.
#[test]
fn repacked_q4k_rows_against_f64_and_their_own_bits() {
    let ty = GgmlType::Q4_K;
    let mut rng = Rng::new(29);
    let (rows, cols) = (37, 3 * 256);
    let (buf, deq) = weights(&mut rng, ty, rows, cols);
    let w = QuantMatrix::new(ty, rows, cols, &buf[1..]).unwrap();
    assert!(quant::Repacked::new(Backend::Scalar, &w).is_none() && quant::Repacked::new(Backend::Sse2, &w).is_none());
    let (q8buf, _) = weights(&mut rng, GgmlType::Q8_0, rows, cols);
    let (other, _) = weights(&mut rng, ty, rows, cols);
    let (m, single) = (12, 9);
    let x = rng.data(m * cols, -2.0, 2.0);
    let xp = rng.data(19 * cols, -3.0, 3.0);
    // the one-token rows' bits on each ISA
    let mut seen: Vec<(Backend, Vec<u32>)> = Vec::new();
    for backend in [Backend::Avx512, Backend::Avx2] {
        assert!(quant::Repacked::new(backend, &QuantMatrix::new(GgmlType::Q8_0, rows, cols, &q8buf[1..]).unwrap()).is_none());
        let Some(rp) = quant::Repacked::new(backend, &w) else {
            println!("SKIP quant_matmul repacked Q4_K on {backend:?}: this CPU has no kernel for it");
            continue;
        };
        assert_eq!((rp.rows(), rp.cols(), rp.bytes()), (rows, cols, 3 * 3 * 2368));
        let e = QuantMatrix::new(ty, rows, cols, &other[1..]).unwrap().with_repacked(&rp).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument { .. }), "{e}");
        let wr = w.with_repacked(&rp).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let row = |i: usize| &x[i * cols..(i + 1) * cols];
        let p = quant::PreparedActs::new(backend, Activations::Quantized, ty, &x, cols).unwrap().with_single_rows(single).unwrap();
        let (mut with, mut without) = (vec![0f32; m * rows], vec![0f32; m * rows]);
        quant::matmul_rows(backend, &wr, &p, 0, rows, &mut with).unwrap();
        quant::matmul_rows(backend, &w, &p, 0, rows, &mut without).unwrap();
        let a = seen_activations(backend, ty, Activations::Quantized, &x, cols);
        let worst = check(&with, &deq, &a, rows, cols, false, "repacked Q4_K");
        println!("repacked Q4_K on {backend:?}: worst error / tolerance {worst:.3}");
        // prompt rows: the same bits as from the file's layout
        assert_eq!(bits(&with[single * rows..]), bits(&without[single * rows..]));
        // a prompt alone (three tiles, the last padded), in ranges within and across groups
        let pp = quant::PreparedActs::new(backend, Activations::Quantized, ty, &xp, cols).unwrap();
        for (r0, r1) in [(0, 37), (3, 9), (5, 21), (16, 32), (20, 37)] {
            let (mut a, mut b) = (vec![0f32; 19 * (r1 - r0)], vec![0f32; 19 * (r1 - r0)]);
            quant::matmul_rows(backend, &wr, &pp, r0, r1, &mut a).unwrap();
            quant::matmul_rows(backend, &w, &pp, r0, r1, &mut b).unwrap();
            assert_eq!(bits(&a), bits(&b), "prompt rows, weight rows {r0}..{r1}");
        }
        let (mut a, mut b) = (vec![0f32; 19 * rows], vec![0f32; 19 * rows]);
        quant::matmul_with(backend, Activations::Quantized, &wr, &xp, &mut a, Par::threads(2)).unwrap();
        quant::matmul_with(backend, Activations::Quantized, &w, &xp, &mut b, Par::Seq).unwrap();
        assert_eq!(bits(&a), bits(&b), "a prompt over two threads");
        let ad = seen_activations(backend, ty, Activations::Quantized, &xp, cols);
        println!(
            "repacked Q4_K prompt on {backend:?}: worst error / tolerance {:.3}",
            check(&a, &deq, &ad, rows, cols, false, "repacked Q4_K prompt")
        );
        for i in 0..single {
            let got = &with[i * rows..(i + 1) * rows];
            let mut alone = vec![0f32; rows];
            quant::matmul_with(backend, Activations::Quantized, &wr, row(i), &mut alone, Par::Seq).unwrap();
            assert_eq!(bits(&alone), bits(got), "one-token row {i} alone");
            quant::matmul_with(backend, Activations::Quantized, &wr, row(i), &mut alone, Par::threads(2)).unwrap();
            assert_eq!(bits(&alone), bits(got), "one-token row {i} alone over two threads");
        }
        for (r0, r1) in [(0, 5), (5, 21), (16, 32), (31, 37), (0, 37)] {
            let mut part = vec![0f32; m * (r1 - r0)];
            quant::matmul_rows(backend, &wr, &p, r0, r1, &mut part).unwrap();
            for i in 0..m {
                assert_eq!(
                    bits(&part[i * (r1 - r0)..(i + 1) * (r1 - r0)]),
                    bits(&with[i * rows + r0..i * rows + r1]),
                    "rows {r0}..{r1}, activation row {i}"
                );
            }
        }
        seen.push((backend, bits(&with[..single * rows])));
    }
    if let [(a, x), (b, y)] = &seen[..] {
        assert_eq!(x, y, "one-token rows: {a:?} and {b:?} differ");
    }
}
