//! The row ops an engine builds on (quantized matvec for every GGUF format, its fused variants
//! and narrow activations, the products through the fp32 GEMM and on the tensor cores, a bias
//! over rows) against f64 on awkward shapes, outputs poisoned with NaN. The LLM's own ops
//! (embedding, RoPE, KV store, attention, sampling) are tested with them, in rayo-llm's
//! `tests/cuda_ops.rs`. `RAYO_REQUIRE_CUDA=1` turns "no device" into a failure;
//! without it each test prints one `SKIP cuda: <test> (no device)` line.
#![cfg(feature = "cuda")]

mod cuda_support;
use cuda_support::*;
use rayo::Error;

/// The rows of `x` (each `gamma.len()` values) RMS-normalized and scaled by `gamma`, in f64.
fn rms_rows(x: &[f32], gamma: &[f32], eps: f32) -> Vec<f64> {
    x.chunks(gamma.len())
        .flat_map(|row| {
            let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / row.len() as f64;
            let s = 1.0 / (ms + eps as f64).sqrt();
            row.iter().zip(gamma).map(move |(&v, &g)| v as f64 * s * g as f64).collect::<Vec<_>>()
        })
        .collect()
}

/// Every weight format of the engine: the table's entries with a PTX kernel, as the kernels
/// and the CPU's quantizer name them.
fn every_format() -> Vec<(rayo::cuda::QFormat, rayo::quant::GgmlType)> {
    let table = rayo::quant::formats::FORMATS.iter().filter(|f| f.kernels.ptx);
    let all: Vec<_> = table.map(|f| with_type(rayo::cuda::QFormat::of_id(f.id).expect("the table's PTX column"))).collect();
    assert_eq!(all.len(), rayo::cuda::QFormat::ALL.len());
    all
}

/// A kernel format with its GGUF type (the same id).
fn with_type(fmt: rayo::cuda::QFormat) -> (rayo::cuda::QFormat, rayo::quant::GgmlType) {
    (fmt, rayo::quant::GgmlType::from_id(fmt.id()).expect("a QFormat is a GGUF type"))
}

#[test]
fn quantized_matvec_matches_f64_for_every_format() {
    use rayo::cuda::QFormat;
    use rayo::quant;
    let Some(dev) = device("quantized_matvec_matches_f64_for_every_format") else { return };
    let mut rng = Rng(0x5eed_0a11);
    let pairs = every_format();
    for (fmt, ty) in pairs {
        // the k-quants' rows are whole 256-value blocks
        let shapes: &[(usize, usize, usize)] = if fmt.block_values() == 256 {
            &[(1, 256, 1), (67, 768, 1), (13, 512, 3), (130, 1536, 2)]
        } else {
            &[(1, 32, 1), (67, 96, 1), (13, 576, 3), (130, 1536, 2)]
        };
        for &(rows, cols, m) in shapes {
            let wf = rng.vec(rows * cols, -1.0, 1.0);
            let bytes = quant::quantize_to_vec(ty, &wf).unwrap();
            let mut wd = vec![0f32; rows * cols];
            quant::dequantize(ty, &bytes, &mut wd).unwrap();
            let x = rng.vec(m * cols, -2.0, 2.0);
            let want: Vec<f64> = (0..m)
                .flat_map(|r| {
                    let (x, wd) = (&x, &wd);
                    (0..rows).map(move |j| (0..cols).map(|c| wd[j * cols + c] as f64 * x[r * cols + c] as f64).sum())
                })
                .collect();
            let w = dev.upload_bytes(&bytes).unwrap();
            let xb = dev.upload(&x).unwrap();
            // one row more than needed, poisoned: the kernel must not write past m rows
            let mut y = poisoned(dev, (m + 1) * rows);
            dev.qmatvec(fmt, &w, rows, cols, &xb, m, &mut y).unwrap();
            let got = dev.download(&y).unwrap();
            close(&format!("qmatvec {fmt:?} {rows}x{cols} m {m}"), &got[..m * rows], &want, 1e-4, 1e-3 * (cols as f64).sqrt());
            assert!(got[m * rows..].iter().all(|v| v.is_nan()), "qmatvec {fmt:?} wrote past its rows");
        }
    }
    // hostile sizes are errors before any launch
    let w = dev.upload_bytes(&[0u8; 18]).unwrap();
    let x = dev.upload(&[0.0; 32]).unwrap();
    let mut y = dev.zeros(1).unwrap();
    assert!(dev.qmatvec(QFormat::Q4_0, &w, 1, 31, &x, 1, &mut y).is_err());
    assert!(dev.qmatvec(QFormat::Q4_0, &w, 2, 32, &x, 1, &mut y).is_err());
    assert!(dev.qmatvec(QFormat::Q4_0, &w, 1, 32, &x, 2, &mut y).is_err());
    assert!(dev.qmatvec(QFormat::Q4_0, &w, usize::MAX, 32, &x, 1, &mut y).is_err());
}

#[test]
fn fused_quantized_products_match_f64() {
    use rayo::cuda::{Epilogue, QFormat, QMatvecKernel};
    use rayo::quant;
    let Some(dev) = device("fused_quantized_products_match_f64") else { return };
    let mut rng = Rng(0xf00d_cafe);
    let (m, eps) = (3usize, 1e-5f32);
    for (fmt, ty) in [QFormat::Q4_1, QFormat::Q5_0, QFormat::Q8_0, QFormat::Q4_K, QFormat::Q5_K].map(with_type) {
        let cols = if fmt.block_values() == 256 { 512usize } else { 96 };
        let rows = [37usize, 11, 11];
        let mut mats = vec![];
        for &r in &rows {
            let bytes = quant::quantize_to_vec(ty, &rng.vec(r * cols, -1.0, 1.0)).unwrap();
            let mut wd = vec![0f32; r * cols];
            quant::dequantize(ty, &bytes, &mut wd).unwrap();
            mats.push((dev.upload_bytes(&bytes).unwrap(), wd, r));
        }
        let x = rng.vec(m * cols, -2.0, 2.0);
        let gamma = rng.vec(cols, 0.5, 1.5);
        let xn = rms_rows(&x, &gamma, eps);
        let prod = |wd: &[f32], r: usize, a: &[f64]| -> Vec<f64> {
            (0..m)
                .flat_map(|i| (0..r).map(move |j| (0..cols).map(|c| wd[j * cols + c] as f64 * a[i * cols + c]).sum::<f64>()).collect::<Vec<_>>())
                .collect()
        };
        let (xb, gb) = (dev.upload(&x).unwrap(), dev.upload(&gamma).unwrap());
        let tol = 1e-3 * (cols as f64).sqrt();
        // norm + three matrices
        let k = QMatvecKernel::fused(fmt, true, 3, Epilogue::Store).unwrap();
        let mut ys: Vec<_> = rows.iter().map(|&r| poisoned(dev, m * r)).collect();
        let ws: Vec<_> = mats.iter().map(|(b, _, r)| (b, *r)).collect();
        let mut refs: Vec<&mut _> = ys.iter_mut().collect();
        dev.qmatvec_fused(k, &xb, Some((&gb, eps)), cols, m, &ws, &mut refs).unwrap();
        for (i, y) in ys.iter().enumerate() {
            close(&format!("{fmt:?} norm x3 [{i}]"), &dev.download(y).unwrap(), &prod(&mats[i].1, rows[i], &xn), 1e-4, tol);
        }
        // ... with a bias per matrix: the products' bits plus the bias, as an add after them
        let bias: Vec<Vec<f32>> = rows.iter().map(|&r| rng.vec(r, -1.0, 1.0)).collect();
        let bias_dev: Vec<_> = bias.iter().map(|b| dev.upload(b).unwrap()).collect();
        let bias_refs: Vec<&_> = bias_dev.iter().collect();
        let mut yb: Vec<_> = rows.iter().map(|&r| poisoned(dev, m * r)).collect();
        let mut refs: Vec<&mut _> = yb.iter_mut().collect();
        dev.qmatvec_fused_bias(k.with_bias().unwrap(), &xb, Some((&gb, eps)), cols, m, &ws, &bias_refs, &mut refs).unwrap();
        for (i, (y, plain)) in yb.iter().zip(&ys).enumerate() {
            let want: Vec<u32> = dev.download(plain).unwrap().iter().enumerate().map(|(j, v)| (v + bias[i][j % rows[i]]).to_bits()).collect();
            assert_eq!(dev.download(y).unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want, "{fmt:?} norm x3 [{i}] + bias");
        }
        // a bias variant without its biases, or biases for a plain kernel, are errors
        let mut refs: Vec<&mut _> = yb.iter_mut().collect();
        assert!(dev.qmatvec_fused_bias(k.with_bias().unwrap(), &xb, Some((&gb, eps)), cols, m, &ws, &[], &mut refs).is_err());
        assert!(dev.qmatvec_fused_bias(k, &xb, Some((&gb, eps)), cols, m, &ws, &bias_refs, &mut refs).is_err());
        assert!(QMatvecKernel::fused(fmt, true, 2, Epilogue::Swiglu).unwrap().with_bias().is_none());
        // residual add
        let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let acc0 = rng.vec(m * rows[0], -1.0, 1.0);
        let mut acc = dev.upload(&acc0).unwrap();
        let k = QMatvecKernel::fused(fmt, false, 1, Epilogue::Add).unwrap();
        dev.qmatvec_fused(k, &xb, None, cols, m, &[(&mats[0].0, rows[0])], &mut [&mut acc]).unwrap();
        let want: Vec<f64> = prod(&mats[0].1, rows[0], &xd).iter().zip(&acc0).map(|(p, &a)| p + a as f64).collect();
        close(&format!("{fmt:?} add"), &dev.download(&acc).unwrap(), &want, 1e-4, tol);
        // norm + gate/up + silu·up
        let k = QMatvecKernel::fused(fmt, true, 2, Epilogue::Swiglu).unwrap();
        let mut out = poisoned(dev, m * rows[1]);
        dev.qmatvec_fused(k, &xb, Some((&gb, eps)), cols, m, &[(&mats[1].0, rows[1]), (&mats[2].0, rows[2])], &mut [&mut out]).unwrap();
        let (g, u) = (prod(&mats[1].1, rows[1], &xn), prod(&mats[2].1, rows[2], &xn));
        let want: Vec<f64> = g.iter().zip(&u).map(|(&g, &u)| g / (1.0 + (-g).exp()) * u).collect();
        close(&format!("{fmt:?} swiglu"), &dev.download(&out).unwrap(), &want, 1e-3, tol);
        // norm + gate/up + gelu·up (GELU's tanh form)
        let k = QMatvecKernel::fused(fmt, true, 2, Epilogue::Geglu).unwrap();
        let mut out = poisoned(dev, m * rows[1]);
        dev.qmatvec_fused(k, &xb, Some((&gb, eps)), cols, m, &[(&mats[1].0, rows[1]), (&mats[2].0, rows[2])], &mut [&mut out]).unwrap();
        let want: Vec<f64> = g.iter().zip(&u).map(|(&g, &u)| gelu_tanh(g) * u).collect();
        close(&format!("{fmt:?} geglu"), &dev.download(&out).unwrap(), &want, 1e-3, tol);
    }
}

/// GELU's tanh form in f64: `x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))/2`.
fn gelu_tanh(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * x * (1.0 + 0.044715 * x * x)).tanh())
}

/// A sublayer's RMSNorm added to the residual stream in one launch equals the norm and then the
/// add, bit for bit, and f64 within f32 rounding; rows past `m` are untouched.
#[test]
fn rms_norm_add_rows_is_the_norm_then_the_add() {
    let Some(dev) = device("rms_norm_add_rows_is_the_norm_then_the_add") else { return };
    let mut rng = Rng(0x4a0d_0add);
    let eps = 1e-6f32;
    for (m, cols) in [(1usize, 640usize), (5, 7), (3, 1024), (2, 33)] {
        let (x, gamma, acc0) = (rng.vec(m * cols, -3.0, 3.0), rng.vec(cols, 0.5, 1.5), rng.vec((m + 1) * cols, -1.0, 1.0));
        let (xb, gb) = (dev.upload(&x).unwrap(), dev.upload(&gamma).unwrap());
        let mut acc = dev.upload(&acc0).unwrap();
        dev.rms_norm_add_rows(&xb, &gb, m, cols, eps, &mut acc).unwrap();
        let got = dev.download(&acc).unwrap();
        // the two launches
        let mut normed = poisoned(dev, m * cols);
        dev.rms_norm_rows(&xb, &gb, m, cols, eps, &mut normed).unwrap();
        let two: Vec<f32> = dev.download(&normed).unwrap().iter().zip(&acc0).map(|(n, a)| a + n).collect();
        let what = format!("rms_norm_add_rows {m}x{cols}");
        assert_eq!(got[..m * cols].iter().map(|v| v.to_bits()).collect::<Vec<_>>(), two.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{what}");
        assert_eq!(&got[m * cols..], &acc0[m * cols..], "{what}: a row past m");
        let want: Vec<f64> = rms_rows(&x, &gamma, eps).iter().zip(&acc0).map(|(n, &a)| n + a as f64).collect();
        close(&what, &got[..m * cols], &want, 1e-5, 1e-5);
    }
}

/// A decoding step's products on narrower activations, 8 bits (`dp4a`) and f16: every format
/// that has them, the narrowing with and without the RMSNorm, every epilogue. The bound of each
/// output is the activations' rounding (8 bits: half a step, `max|x| / 254` per 32 values;
/// f16: `|x|·2⁻¹¹`) times `|w|`, over f64 of the unrounded activations, so a misplaced nibble
/// or scale fails.
#[test]
fn products_on_narrow_activations_match_f64() {
    use rayo::cuda::{ActFormat, Epilogue, NarrowActivations, QFormat, QMatvecKernel};
    use rayo::quant;
    let Some(dev) = device("products_on_narrow_activations_match_f64") else { return };
    let mut rng = Rng(0x0d94_a8a8);
    let eps = 1e-5f32;
    let pairs = every_format();
    for (fmt, ty) in pairs {
        let dp4a = matches!(fmt, QFormat::Q4_0 | QFormat::Q4_1 | QFormat::Q5_0 | QFormat::Q5_1 | QFormat::Q8_0 | QFormat::Q4_K | QFormat::Q6_K);
        assert_eq!(QMatvecKernel::new(fmt).with_activations(ActFormat::Q8).is_some(), dp4a, "{fmt:?}: which formats have 8 bits");
        let acts: &[ActFormat] = if dp4a { &[ActFormat::Q8, ActFormat::F16] } else { &[ActFormat::F16] };
        let colss: &[usize] = if fmt.block_values() == 256 { &[256, 1280] } else { &[32, 96, 1568] };
        for (&act, &cols, m) in acts.iter().flat_map(|a| colss.iter().flat_map(move |c| [1usize, 3].map(|m| (a, c, m)))) {
            let rows = [37usize, 11, 11];
            let mut mats = vec![];
            for &r in &rows {
                let bytes = quant::quantize_to_vec(ty, &rng.vec(r * cols, -1.0, 1.0)).unwrap();
                let mut wd = vec![0f32; r * cols];
                quant::dequantize(ty, &bytes, &mut wd).unwrap();
                mats.push((dev.upload_bytes(&bytes).unwrap(), wd, r));
            }
            // one value in 41 much larger than the rest: its block's 8-bit scale is coarse
            let mut x = rng.vec(m * cols, -2.0, 2.0);
            x.iter_mut().step_by(41).for_each(|v| *v *= 30.0);
            let gamma = rng.vec(cols, 0.5, 1.5);
            let xn = rms_rows(&x, &gamma, eps);
            let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            // f64 products and each one's bound
            let prod = |wd: &[f32], r: usize, a: &[f64]| -> (Vec<f64>, Vec<f64>) {
                let step: Vec<f64> = a.chunks(32).map(|b| b.iter().fold(0f64, |mx, v| mx.max(v.abs())) / 254.0).collect();
                let err = |i: usize| if act == ActFormat::Q8 { step[i / 32] * 1.001 + (a[i] * 1e-6).abs() } else { a[i].abs() * 2f64.powi(-11) };
                let mut p = vec![];
                let mut bound = vec![];
                for i in 0..m {
                    for j in 0..r {
                        let w = &wd[j * cols..][..cols];
                        p.push((0..cols).map(|c| w[c] as f64 * a[i * cols + c]).sum::<f64>());
                        bound.push((0..cols).map(|c| (w[c] as f64).abs() * err(i * cols + c)).sum::<f64>() + 1e-5);
                    }
                }
                (p, bound)
            };
            let check = |what: &str, got: &[f32], want: &[f64], bound: &[f64]| {
                for (i, ((&g, &w), &b)) in got.iter().zip(want).zip(bound).enumerate() {
                    assert!((g as f64 - w).abs() <= b, "{what}: element {i}: got {g}, want {w} (bound {b:e})");
                }
            };
            let what = format!("{fmt:?} {act:?} cols {cols} m {m}");
            let (xb, gb) = (dev.upload(&x).unwrap(), dev.upload(&gamma).unwrap());
            let mut narrow = NarrowActivations::new(dev, m, cols).unwrap();
            let ws: Vec<_> = mats.iter().map(|(b, _, r)| (b, *r)).collect();
            let kernel = |mats, epi| QMatvecKernel::fused(fmt, false, mats, epi).and_then(|k| k.with_activations(act)).unwrap();
            // norm + three matrices
            dev.narrow_activations(&xb, Some((&gb, eps)), cols, m, act, &mut narrow).unwrap();
            let mut ys: Vec<_> = rows.iter().map(|&r| poisoned(dev, m * r + 1)).collect();
            let mut refs: Vec<&mut _> = ys.iter_mut().collect();
            dev.qmatvec_narrow(kernel(3, Epilogue::Store), &narrow, cols, m, &ws, &mut refs).unwrap();
            for (i, y) in ys.iter().enumerate() {
                let got = dev.download(y).unwrap();
                let (want, bound) = prod(&mats[i].1, rows[i], &xn);
                check(&format!("{what} norm x3 [{i}]"), &got[..m * rows[i]], &want, &bound);
                assert!(got[m * rows[i]].is_nan(), "{what}: wrote past its rows");
            }
            // ... with a bias per matrix: the same bits plus the bias
            let bias: Vec<Vec<f32>> = rows.iter().map(|&r| rng.vec(r, -1.0, 1.0)).collect();
            let bias_dev: Vec<_> = bias.iter().map(|b| dev.upload(b).unwrap()).collect();
            let bias_refs: Vec<&_> = bias_dev.iter().collect();
            let mut yb: Vec<_> = rows.iter().map(|&r| poisoned(dev, m * r + 1)).collect();
            let mut refs: Vec<&mut _> = yb.iter_mut().collect();
            dev.qmatvec_narrow_bias(kernel(3, Epilogue::Store).with_bias().unwrap(), &narrow, cols, m, &ws, &bias_refs, &mut refs).unwrap();
            for (i, (y, plain)) in yb.iter().zip(&ys).enumerate() {
                let (got, plain) = (dev.download(y).unwrap(), dev.download(plain).unwrap());
                let want: Vec<u32> = plain[..m * rows[i]].iter().enumerate().map(|(j, v)| (v + bias[i][j % rows[i]]).to_bits()).collect();
                assert_eq!(got[..m * rows[i]].iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want, "{what} norm x3 [{i}] + bias");
                assert!(got[m * rows[i]].is_nan(), "{what}: bias variant wrote past its rows");
            }
            // norm + gate/up + silu·up (the bound through silu: |silu'| ≤ 1.1)
            let mut out = poisoned(dev, m * rows[1]);
            dev.qmatvec_narrow(kernel(2, Epilogue::Swiglu), &narrow, cols, m, &ws[1..], &mut [&mut out]).unwrap();
            let ((g, bg), (u, bu)) = (prod(&mats[1].1, rows[1], &xn), prod(&mats[2].1, rows[2], &xn));
            let silu = |g: f64| g / (1.0 + (-g).exp());
            let want: Vec<f64> = g.iter().zip(&u).map(|(&g, &u)| silu(g) * u).collect();
            let bound: Vec<f64> = (0..g.len()).map(|i| 1.1 * bg[i] * (u[i].abs() + bu[i]) + silu(g[i]).abs() * bu[i] + 1e-5).collect();
            check(&format!("{what} swiglu"), &dev.download(&out).unwrap(), &want, &bound);
            // ... and gelu·up (|gelu'| ≤ 1.13)
            dev.qmatvec_narrow(kernel(2, Epilogue::Geglu), &narrow, cols, m, &ws[1..], &mut [&mut out]).unwrap();
            let want: Vec<f64> = g.iter().zip(&u).map(|(&g, &u)| gelu_tanh(g) * u).collect();
            let bound: Vec<f64> = (0..g.len()).map(|i| 1.2 * bg[i] * (u[i].abs() + bu[i]) + gelu_tanh(g[i]).abs() * bu[i] + 1e-5).collect();
            check(&format!("{what} geglu"), &dev.download(&out).unwrap(), &want, &bound);
            // no norm: the residual add
            dev.narrow_activations(&xb, None, cols, m, act, &mut narrow).unwrap();
            let acc0 = rng.vec(m * rows[0], -1.0, 1.0);
            let mut acc = dev.upload(&acc0).unwrap();
            dev.qmatvec_narrow(kernel(1, Epilogue::Add), &narrow, cols, m, &ws[..1], &mut [&mut acc]).unwrap();
            let (p, bound) = prod(&mats[0].1, rows[0], &xd);
            let want: Vec<f64> = p.iter().zip(&acc0).map(|(p, &a)| p + a as f64).collect();
            check(&format!("{what} add"), &dev.download(&acc).unwrap(), &want, &bound);
        }
    }
    // misuse is an error before any launch
    let x = dev.upload(&[1.0; 64]).unwrap();
    let mut narrow = NarrowActivations::new(dev, 1, 64).unwrap();
    assert!(dev.narrow_activations(&x, None, 48, 1, ActFormat::Q8, &mut narrow).is_err(), "cols not a multiple of 32");
    assert!(dev.narrow_activations(&x, None, 64, 2, ActFormat::Q8, &mut narrow).is_err(), "rows past x");
    assert!(dev.narrow_activations(&x, None, 64, 1, ActFormat::F32, &mut narrow).is_err(), "nothing to narrow");
    dev.narrow_activations(&x, None, 64, 1, ActFormat::Q8, &mut narrow).unwrap();
    let w = dev.upload_bytes(&[0u8; 40]).unwrap();
    let mut y = dev.zeros(1).unwrap();
    let k8 = QMatvecKernel::new(QFormat::Q4_1).with_activations(ActFormat::Q8).unwrap();
    assert!(dev.qmatvec_narrow(k8, &narrow, 32, 1, &[(&w, 1)], &mut [&mut y]).is_err(), "cols other than narrowed");
    dev.qmatvec_narrow(k8, &narrow, 64, 1, &[(&w, 1)], &mut [&mut y]).unwrap();
    let k16 = QMatvecKernel::new(QFormat::Q4_1).with_activations(ActFormat::F16).unwrap();
    assert!(dev.qmatvec_narrow(k16, &narrow, 64, 1, &[(&w, 1)], &mut [&mut y]).is_err(), "8-bit activations to an f16 kernel");
    assert!(dev.qmatvec_narrow(QMatvecKernel::new(QFormat::Q4_1), &narrow, 64, 1, &[(&w, 1)], &mut [&mut y]).is_err(), "an f32 kernel");
    assert!(QMatvecKernel::fused(QFormat::Q4_1, true, 1, Epilogue::Store).unwrap().with_activations(ActFormat::Q8).is_none());
}

#[test]
fn quantized_products_through_the_gemm_match_f64() {
    use rayo::cuda::QFormat;
    use rayo::quant;
    let Some(dev) = device("quantized_products_through_the_gemm_match_f64") else { return };
    let mut rng = Rng(0x6e33_0001);
    for (fmt, ty) in [QFormat::Q4_1, QFormat::Q5_0, QFormat::Q8_0, QFormat::Q4_K, QFormat::Q6_K].map(with_type) {
        let shapes: &[(usize, usize, usize)] =
            if fmt.block_values() == 256 { &[(130, 256, 40), (192, 512, 200)] } else { &[(130, 96, 40), (256, 576, 128), (192, 64, 200)] };
        for &(rows, cols, m) in shapes {
            let bytes = quant::quantize_to_vec(ty, &rng.vec(rows * cols, -1.0, 1.0)).unwrap();
            let mut wd = vec![0f32; rows * cols];
            quant::dequantize(ty, &bytes, &mut wd).unwrap();
            let m_pad = m.next_multiple_of(128);
            // the activation buffer holds the padded rows (garbage past m must not matter)
            let mut x = rng.vec(m_pad * cols, -2.0, 2.0);
            x[m * cols..].iter_mut().for_each(|v| *v = f32::NAN);
            let want: Vec<f64> = (0..m)
                .flat_map(|i| (0..rows).map(|j| (0..cols).map(|c| wd[j * cols + c] as f64 * x[i * cols + c] as f64).sum::<f64>()).collect::<Vec<_>>())
                .collect();
            let (w, xb) = (dev.upload_bytes(&bytes).unwrap(), dev.upload(&x).unwrap());
            let ld = rows.next_multiple_of(128);
            let (mut wt, mut yp) = (dev.zeros(cols * ld).unwrap(), dev.zeros(m_pad * ld).unwrap());
            let mut y = poisoned(dev, m * rows + 1);
            dev.qmatmul_gemm(fmt, &w, (rows, cols), &xb, m, &mut y, &mut wt, &mut yp).unwrap();
            let got = dev.download(&y).unwrap();
            close(&format!("gemm {fmt:?} {rows}x{cols} m {m}"), &got[..m * rows], &want, 1e-4, 1e-3 * (cols as f64).sqrt());
            assert!(got[m * rows].is_nan(), "wrote past m rows");
            // an activation buffer without the padded rows is an error, not a read past it
            let short = dev.upload(&x[..m * cols]).unwrap();
            if m % 128 != 0 {
                assert!(dev.qmatmul_gemm(fmt, &w, (rows, cols), &short, m, &mut y, &mut wt, &mut yp).is_err());
            }
        }
    }
}

/// The tensor-core path of a prompt's products: the weights dequantized to f16, the
/// activations rounded to f16, f32 accumulation. Against f64 of the f16-rounded operands (so
/// the tolerance is the accumulation's), on shapes that are not tile multiples, both epilogues.
#[test]
fn quantized_products_on_the_tensor_cores_match_f64() {
    use half::f16;
    use rayo::cuda::{CudaDevice, QFormat};
    use rayo::quant;
    let Some(dev) = device("quantized_products_on_the_tensor_cores_match_f64") else { return };
    use rayo::cuda::{ActFormat, NarrowActivations};
    let mut rng = Rng(0x6e33_f016);
    let mut wgmma_ran = 0;
    let h = |v: f32| f16::from_f32(v).to_f64();
    for (fmt, ty) in
        [QFormat::F32, QFormat::F16, QFormat::BF16, QFormat::Q4_1, QFormat::Q5_0, QFormat::Q8_0, QFormat::Q2_K, QFormat::Q4_K, QFormat::Q6_K]
            .map(with_type)
    {
        let shapes: &[(usize, usize, usize)] =
            if fmt.block_values() == 256 { &[(130, 256, 40), (66, 512, 200)] } else { &[(2, 32, 1), (130, 96, 40), (576, 576, 128), (70, 1536, 65)] };
        for &(rows, cols, m) in shapes {
            let bytes = quant::quantize_to_vec(ty, &rng.vec(rows * cols, -1.0, 1.0)).unwrap();
            let mut wd = vec![0f32; rows * cols];
            quant::dequantize(ty, &bytes, &mut wd).unwrap();
            let x = rng.vec(m * cols, -2.0, 2.0);
            let y0 = rng.vec(m * rows, -1.0, 1.0);
            let dot = |i: usize, j: usize| (0..cols).map(|c| h(wd[j * cols + c]) * h(x[i * cols + c])).sum::<f64>();
            let want: Vec<f64> = (0..m).flat_map(|i| (0..rows).map(move |j| (i, j))).map(|(i, j)| dot(i, j)).collect();
            let (w, xb) = (dev.upload_bytes(&bytes).unwrap(), dev.upload(&x).unwrap());
            let mut wh = dev.zero_bytes(rows * cols * 2).unwrap();
            let tol = 1e-5 * (cols as f64).sqrt();
            let what = format!("f16 gemm {fmt:?} {rows}x{cols} m {m}");
            let mut y = poisoned(dev, m * rows + 1);
            dev.qmatmul_half(fmt, &w, (rows, cols), &xb, m, &mut y, &mut wh, false).unwrap();
            let got = dev.download(&y).unwrap();
            close(&what, &got[..m * rows], &want, 1e-5, tol);
            assert!(got[m * rows].is_nan(), "{what}: wrote past m rows");
            // the residual epilogue adds onto what y holds
            let mut y = dev.upload(&[&y0[..], &[f32::NAN]].concat()).unwrap();
            dev.qmatmul_half(fmt, &w, (rows, cols), &xb, m, &mut y, &mut wh, true).unwrap();
            let got = dev.download(&y).unwrap();
            let want_add: Vec<f64> = want.iter().zip(&y0).map(|(&p, &a)| p + a as f64).collect();
            close(&format!("{what} add"), &got[..m * rows], &want_add, 1e-5, tol);
            assert!(got[m * rows].is_nan(), "{what}: the add wrote past m rows");
            // Hopper's path: the activations narrowed to f16 once, then wgmma over `wh`
            let mut x16 = NarrowActivations::new(dev, m, cols).unwrap();
            dev.narrow_activations(&xb, None, cols, m, ActFormat::F16, &mut x16).unwrap();
            if !dev.has_wgmma() {
                assert!(dev.gemm_half_wgmma(&x16, &wh, (rows, cols), m, &mut y, false).is_err(), "{what}: wgmma off sm_90");
                continue;
            }
            wgmma_ran += 1;
            let mut y = poisoned(dev, m * rows + 1);
            dev.gemm_half_wgmma(&x16, &wh, (rows, cols), m, &mut y, false).unwrap();
            let got = dev.download(&y).unwrap();
            close(&format!("{what} wgmma"), &got[..m * rows], &want, 1e-5, tol);
            assert!(got[m * rows].is_nan(), "{what}: wgmma wrote past m rows");
            let mut y = dev.upload(&[&y0[..], &[f32::NAN]].concat()).unwrap();
            dev.gemm_half_wgmma(&x16, &wh, (rows, cols), m, &mut y, true).unwrap();
            let got = dev.download(&y).unwrap();
            close(&format!("{what} wgmma add"), &got[..m * rows], &want_add, 1e-5, tol);
            assert!(got[m * rows].is_nan(), "{what}: the wgmma add wrote past m rows");
            // activations narrowed for another shape are refused
            assert!(dev.gemm_half_wgmma(&x16, &wh, (rows, cols), m + 1, &mut y, true).is_err(), "{what}: rows not narrowed");
        }
    }
    if !dev.has_wgmma() {
        println!(
            "SKIP cuda: quantized_products_on_the_tensor_cores_match_f64's wgmma part on compute capability {:?} (sm_90 only; refused with an error)",
            dev.info().compute_capability
        );
    } else {
        assert!(wgmma_ran > 0);
    }
    // sizes it cannot take are errors before any launch
    let w = dev.upload_bytes(&[0u8; 4 * 64]).unwrap();
    let x = dev.upload(&[0.0; 64]).unwrap();
    let (mut y, mut wh) = (dev.zeros(4).unwrap(), dev.zero_bytes(256).unwrap());
    assert!(!CudaDevice::half_gemm_fits(3, 32) && !CudaDevice::half_gemm_fits(2, 48));
    assert!(dev.qmatmul_half(QFormat::F32, &w, (3, 16), &x, 1, &mut y, &mut wh, false).is_err(), "16 columns");
    assert!(dev.qmatmul_half(QFormat::F32, &w, (2, 32), &x, 3, &mut y, &mut wh, false).is_err(), "x too short");
    let mut small = dev.zero_bytes(64).unwrap();
    assert!(dev.qmatmul_half(QFormat::F32, &w, (2, 32), &x, 1, &mut y, &mut small, false).is_err(), "wh too short");
    assert!(dev.qmatmul_half(QFormat::F32, &w, (4, 32), &x, 1, &mut y, &mut wh, false).is_err(), "w too short");
    assert!(dev.qmatmul_half(QFormat::F32, &w, (usize::MAX - 1, 32), &x, 1, &mut y, &mut wh, false).is_err(), "overflow");
}

#[test]
fn add_rows_adds_a_bias_to_every_row_and_no_further() {
    let Some(dev) = device("add_rows_adds_a_bias_to_every_row_and_no_further") else { return };
    let mut rng = Rng(0xb1a5);
    for (m, n) in [(1, 32), (3, 896), (17, 128), (5, 7)] {
        let x = rng.vec(m * n, -2.0, 2.0);
        let b = rng.vec(n, -1.0, 1.0);
        // one row more than m, poisoned: the kernel must leave it alone
        let mut xb = poisoned(dev, (m + 1) * n);
        dev.write_at(&mut xb, 0, &x).unwrap();
        dev.add_rows(&mut xb, &dev.upload(&b).unwrap(), m).unwrap();
        let got = dev.download(&xb).unwrap();
        for (i, (&g, &v)) in got.iter().zip(&x).enumerate() {
            assert_eq!(g, v + b[i % n], "add_rows {m}x{n} at {i}");
        }
        assert!(got[m * n..].iter().all(|v| v.is_nan()), "add_rows {m}x{n} wrote past its rows");
    }
    // a bias wider than the buffer's rows allow: an error, nothing launched
    let mut small = dev.zeros(10).unwrap();
    let e = dev.add_rows(&mut small, &dev.upload(&[1.0; 4]).unwrap(), 3).unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { expected: 12, actual: 10, .. }), "{e}");
}
