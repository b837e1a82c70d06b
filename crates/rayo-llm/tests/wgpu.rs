//! The wgpu engine: every WGSL kernel against an f64 reference on awkward shapes (every block
//! format, a matrix split over several bindings, RoPE's two pairings, attention over f16 and
//! f32 caches across its 64-position chunks), then greedy continuations of the committed
//! prompts against the CPU engine on SmolLM2. Without an adapter every test prints a `SKIP`
//! line (`RAYO_REQUIRE_GPU=1` makes that a failure). CI runs it on lavapipe.
#![cfg(feature = "wgpu")]

#[path = "engines/mod.rs"]
mod engines;
#[path = "llama_ref/mod.rs"]
mod llama_ref;

use engines::{greedy, greedy_equals_cpu, models};
use half::f16;
use rayo::gguf::GgufFile;
use rayo::gpu::GpuDevice;
use rayo::quant::{self, Activations, GgmlType, QuantMatrix};
use rayo_llm::backend::{Backend, KvType};
use rayo_llm::cpu::Cpu;
use rayo_llm::wgpu::{Wgpu, WgpuBuf};
use rayo_llm::{Config, RopeStyle, Session, SessionOptions};
use std::sync::Arc;

/// The shared device, or `None` after a SKIP line.
fn device(test: &str) -> Option<GpuDevice> {
    match GpuDevice::new() {
        Ok(d) => Some(d),
        Err(e) => {
            let required = std::env::var("RAYO_REQUIRE_GPU").map(|v| v == "1").unwrap_or(false);
            assert!(!required, "RAYO_REQUIRE_GPU=1 but no wgpu adapter: {e}");
            println!("SKIP wgpu: {test} ({e})");
            None
        }
    }
}

/// A backend with no model file (for the kernels alone): an empty GGUF.
fn backend(dev: GpuDevice) -> Wgpu {
    let mut empty = b"GGUF".to_vec();
    empty.extend_from_slice(&3u32.to_le_bytes());
    empty.extend_from_slice(&[0u8; 16]);
    Wgpu::with_device(dev, Arc::new(GgufFile::from_bytes(empty).unwrap()))
}

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn read(b: &mut Wgpu, x: &WgpuBuf, n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    b.read(x, &mut out).unwrap();
    out
}

const FORMATS: &[GgmlType] = &[
    GgmlType::F32,
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];

/// `y = x·Wᵀ` (and `y += x·Wᵀ`, and the embedding rows) for every format, on 37 rows of three
/// blocks (67 values for the float formats), 1, 5 and 9 activation rows, whole and split over
/// bindings of ten rows, against f64 products of the dequantized weights.
#[test]
fn quantized_products_match_f64() {
    let Some(dev) = device("quantized_products_match_f64") else { return };
    match dev.subgroup_min_size() {
        Some(s) => println!("subgroups of at least {s}: the shuffle reduction is tested with {s} threads per row"),
        None => println!("SKIP wgpu: the subgroup reduction (this adapter has no subgroups); the workgroup one is tested"),
    }
    for &ty in FORMATS {
        let qk = ty.block_size();
        let (rows, cols) = (37, if qk == 1 { 67 } else { 3 * qk });
        let w = values(rows * cols, ty.id() as u64);
        let bytes = quant::quantize_to_vec(ty, &w).unwrap();
        let mut wd = vec![0f32; rows * cols];
        quant::dequantize(ty, &bytes, &mut wd).unwrap();
        let qm = QuantMatrix::new(ty, rows, cols, &bytes).unwrap();
        // split: ten rows per binding (as the device holds them)
        let row_bytes = if rayo_llm::wgpu::WgslFormat::of(ty).is_some() { bytes.len() / rows } else { cols * 4 };
        // each product every way: a thread per row (CPU adapters), 16 threads per row reduced
        // in workgroup memory (GPUs without subgroups of 16: lavapipe's are 8), and the
        // subgroup smallest size's threads per row reduced by shuffles (where there are subgroups)
        let sg = dev.subgroup_min_size().map(|s| (s as usize).min(64));
        let split = 10 * row_bytes as u64 + 16;
        let ways =
            [(u64::MAX, 1), (u64::MAX, 16), (split, 1), (split, 16)].into_iter().chain(sg.into_iter().flat_map(|s| [(u64::MAX, s), (split, s)]));
        for (limit, lanes) in ways {
            let mut b = backend(dev.clone()).with_weight_binding_limit(limit).with_product_lanes(lanes).unwrap();
            let wt = b.upload_matrix("test.weight", &qm).unwrap();
            if limit != u64::MAX {
                assert!(wt.parts.len() > 1, "{ty:?}: {} bytes in one part under a {limit}-byte limit", bytes.len());
            }
            for m in [1usize, 5, 9] {
                let x = values(m * cols, 99 + m as u64);
                let xb = b.vector(&x).unwrap();
                let mut y = b.buffer(m * rows).unwrap();
                b.matmul(&wt, &xb, m, &mut y).unwrap();
                let got = read(&mut b, &y, m * rows);
                // y += x·Wᵀ again: twice the product
                let (mut tmp, len) = (b.buffer(1).unwrap(), m * rows);
                b.matmul_add(&wt, &xb, m, &mut tmp, &mut y, len).unwrap();
                let twice = read(&mut b, &y, m * rows);
                for i in 0..m {
                    for r in 0..rows {
                        let (xr, wr) = (&x[i * cols..][..cols], &wd[r * cols..][..cols]);
                        let want: f64 = xr.iter().zip(wr).map(|(&a, &b)| a as f64 * b as f64).sum();
                        let mag: f64 = xr.iter().zip(wr).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum();
                        let tol = 1e-5 * mag + 1e-6;
                        let g = got[i * rows + r] as f64;
                        assert!((g - want).abs() <= tol, "{ty:?} limit {limit} lanes {lanes} m {m} [{i},{r}]: {g} vs {want}");
                        let g2 = twice[i * rows + r] as f64;
                        assert!((g2 - 2.0 * want).abs() <= 2.0 * tol, "{ty:?} add [{i},{r}]: {g2} vs {}", 2.0 * want);
                    }
                }
            }
            // embedding rows (the first, the last, a repeated one), dequantized in place
            let cfg = tiny_config(RopeStyle::Adjacent, 4, 2, 8, 8);
            let _kv = b.kv_cache(&cfg, 8, KvType::F32).unwrap();
            let ids = [0u32, rows as u32 - 1, 5, 5];
            let mut e = b.buffer(ids.len() * cols).unwrap();
            b.embed(&wt, &ids, &mut e).unwrap();
            let got = read(&mut b, &e, ids.len() * cols);
            for (t, &id) in ids.iter().enumerate() {
                for c in 0..cols {
                    let (g, want) = (got[t * cols + c], wd[id as usize * cols + c]);
                    assert!((g - want).abs() <= 1e-6 * want.abs().max(1.0), "{ty:?} embed row {id} col {c}: {g} vs {want}");
                }
            }
        }
        println!(
            "{ty:?}: matmul, matmul_add, embed within tolerance (whole and split; 1, 16 and {sg:?} threads per row, the last by subgroup shuffles)"
        );
    }
    // a row past the binding limit: an error naming the tensor and the limit
    let ty = GgmlType::Q4_K;
    let bytes = quant::quantize_to_vec(ty, &values(2 * 768, 3)).unwrap();
    let mut b = backend(dev.clone()).with_weight_binding_limit(256);
    let e = b.upload_matrix("blk.0.ffn_up.weight", &QuantMatrix::new(ty, 2, 768, &bytes).unwrap()).err().expect("a row over the limit");
    let msg = e.to_string();
    assert!(msg.contains("blk.0.ffn_up.weight") && msg.contains("256"), "{msg}");
}

fn tiny_config(style: RopeStyle, n_head: usize, n_head_kv: usize, head_dim: usize, n_rot: usize) -> Config {
    Config {
        arch: "llama".into(),
        n_layer: 2,
        n_embd: n_head * head_dim,
        n_ff: 8,
        n_head,
        n_head_kv,
        head_dim,
        n_rot,
        rope_base: 10000.0,
        rope_style: style,
        eps: 1e-5,
        context_length: 160,
        vocab_size: 4,
        qkv_bias: false,
    }
}

/// RMSNorm, SwiGLU, add, bias and RoPE (both pairings, a partial rotation) against f64.
#[test]
fn norm_rope_and_elementwise_match_f64() {
    let Some(dev) = device("norm_rope_and_elementwise_match_f64") else { return };
    let mut b = backend(dev);
    let (m, d) = (3, 67);
    let x = values(m * d, 1);
    let g = values(d, 2);
    let (xb, gb) = (b.vector(&x).unwrap(), b.vector(&g).unwrap());
    let mut out = b.buffer(m * d).unwrap();
    b.rms_norm(&xb, &gb, 1e-5, m, &mut out).unwrap();
    let got = read(&mut b, &out, m * d);
    for i in 0..m {
        let r = &x[i * d..][..d];
        let ms: f64 = r.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / d as f64;
        for c in 0..d {
            let want = r[c] as f64 / (ms + 1e-5).sqrt() * g[c] as f64;
            assert!((got[i * d + c] as f64 - want).abs() < 1e-5 * want.abs().max(1.0), "rms_norm [{i},{c}]");
        }
    }
    // swiglu, add, bias over 1003 values (bias rows of 17)
    let n = 1003;
    let (a0, b0) = (values(n, 3).iter().map(|v| v * 8.0).collect::<Vec<_>>(), values(n, 4));
    let mut a = b.vector(&a0).unwrap();
    let bb = b.vector(&b0).unwrap();
    b.swiglu(&mut a, &bb, n).unwrap();
    let sw = read(&mut b, &a, n);
    b.add(&mut a, &bb, n).unwrap();
    let added = read(&mut b, &a, n);
    let bias = b.vector(&b0[..17]).unwrap();
    b.add_bias(&mut a, &bias, 59).unwrap();
    let biased = read(&mut b, &a, n);
    for i in 0..n {
        let (u, v) = (a0[i] as f64, b0[i] as f64);
        let want = u / (1.0 + (-u).exp()) * v;
        assert!((sw[i] as f64 - want).abs() < 1e-5 * want.abs().max(1.0), "swiglu {i}: {} vs {want}", sw[i]);
        assert!((added[i] as f64 - (sw[i] as f64 + v)).abs() < 1e-6 * want.abs().max(1.0), "add {i}");
        assert!((biased[i] - (added[i] + b0[i % 17])).abs() <= 1e-6 * added[i].abs().max(1.0), "add_bias {i}");
    }
    // RoPE: 3 rows at positions 5, 6, 7; 3 query heads, 1 key head of 10 values, 8 rotated
    for style in [RopeStyle::Adjacent, RopeStyle::HalfSplit] {
        let cfg = tiny_config(style, 3, 1, 10, 8);
        let _kv = b.kv_cache(&cfg, 16, KvType::F32).unwrap();
        let (q0, k0) = (values(m * 30, 5), values(m * 10, 6));
        let (mut q, mut k) = (b.vector(&q0).unwrap(), b.vector(&k0).unwrap());
        b.rope(&cfg, &mut q, &mut k, m, 5).unwrap();
        let (gq, gk) = (read(&mut b, &q, m * 30), read(&mut b, &k, m * 10));
        for (orig, got, heads) in [(&q0, &gq, 3), (&k0, &gk, 1)] {
            for i in 0..m {
                for h in 0..heads {
                    let base = (i * heads + h) * 10;
                    for j in 0..5 {
                        let (a, bi) = match (j < 4, style) {
                            (false, _) => (8, 9), // not rotated
                            (true, RopeStyle::Adjacent) => (2 * j, 2 * j + 1),
                            (true, RopeStyle::HalfSplit) => (j, j + 4),
                        };
                        let th = if j < 4 { (5 + i) as f64 * 10000f64.powf(-2.0 * j as f64 / 8.0) } else { 0.0 };
                        let (x0, x1) = (orig[base + a] as f64, orig[base + bi] as f64);
                        let (w0, w1) = (x0 * th.cos() - x1 * th.sin(), x0 * th.sin() + x1 * th.cos());
                        assert!(
                            (got[base + a] as f64 - w0).abs() < 1e-5 && (got[base + bi] as f64 - w1).abs() < 1e-5,
                            "{style:?} row {i} head {h} pair {j}"
                        );
                    }
                }
            }
        }
    }
}

/// Causal GQA attention against f64: a prompt of 3 rows, then 70 (crossing the kernel's
/// 64-position chunks), then one row, over f16 and f32 caches, heads of 12 and 130 values.
#[test]
fn attention_matches_f64() {
    let Some(dev) = device("attention_matches_f64") else { return };
    let mut b = backend(dev);
    for (head_dim, ty) in [(12, KvType::F16), (12, KvType::F32), (130, KvType::F16)] {
        let cfg = tiny_config(RopeStyle::Adjacent, 4, 2, head_dim, 8);
        let (qw, kw) = (cfg.q_width(), cfg.kv_width());
        let mut kv = b.kv_cache(&cfg, 80, ty).unwrap();
        let (mut keys, mut vals) = (Vec::<f64>::new(), Vec::<f64>::new());
        let round = |v: f32| if ty == KvType::F16 { f16::from_f32(v).to_f32() as f64 } else { v as f64 };
        let mut pos0 = 0;
        for (step, m) in [3usize, 70, 1].into_iter().enumerate() {
            let (q, k, v) = (values(m * qw, 10 + step as u64), values(m * kw, 20 + step as u64), values(m * kw, 30 + step as u64));
            let (qb, kb, vb) = (b.vector(&q).unwrap(), b.vector(&k).unwrap(), b.vector(&v).unwrap());
            let mut out = b.buffer(m * qw).unwrap();
            b.attention(&cfg, &mut kv, 1, &qb, &kb, &vb, m, pos0, &mut out).unwrap();
            let got = read(&mut b, &out, m * qw);
            keys.extend(k.iter().map(|&x| round(x)));
            vals.extend(v.iter().map(|&x| round(x)));
            let round_q = ty == KvType::F16 && m < 64;
            for i in 0..m {
                let n = pos0 + i + 1;
                for h in 0..cfg.n_head {
                    let g = h / cfg.group();
                    let qh: Vec<f64> =
                        q[(i * cfg.n_head + h) * head_dim..][..head_dim].iter().map(|&x| if round_q { round(x) } else { x as f64 }).collect();
                    let s: Vec<f64> = (0..n)
                        .map(|p| qh.iter().enumerate().map(|(d, &a)| a * keys[p * kw + g * head_dim + d]).sum::<f64>() / (head_dim as f64).sqrt())
                        .collect();
                    let mx = s.iter().cloned().fold(f64::MIN, f64::max);
                    let e: Vec<f64> = s.iter().map(|&v| (v - mx).exp()).collect();
                    let z: f64 = e.iter().sum();
                    for d in 0..head_dim {
                        let want: f64 = (0..n).map(|p| e[p] / z * vals[p * kw + g * head_dim + d]).sum();
                        let gv = got[(i * cfg.n_head + h) * head_dim + d] as f64;
                        assert!((gv - want).abs() < 2e-5, "head_dim {head_dim} {ty:?} m {m} row {i} head {h} dim {d}: {gv} vs {want}");
                    }
                }
            }
            pos0 += m;
        }
        println!("attention head_dim {head_dim} {ty:?}: 74 positions within 2e-5");
    }
}

/// Greedy continuations of the committed prompts: the wgpu engine's tokens equal the CPU
/// engine's with f32 activations (the same arithmetic up to summation order), 32 tokens each.
#[test]
fn greedy_text_equals_the_cpu_engine() {
    let Some(dev) = device("greedy_text_equals_the_cpu_engine") else { return };
    println!("wgpu adapter: {:?}", dev.adapter_info());
    for (ty, model) in models("greedy_text_equals_the_cpu_engine") {
        let opts = SessionOptions { context: 256, ..SessionOptions::default() };
        let mut g = Session::new(&model, Wgpu::with_device(dev.clone(), Arc::clone(model.file())), opts).unwrap();
        let mut c = Session::new(&model, Cpu::new(Arc::clone(model.file()), 2).with_activations(Activations::F32), opts).unwrap();
        greedy_equals_cpu(&ty, &model, &mut g, &mut c);
        // the weights split over bindings of 4 MiB (the tied 28 MiB embedding table and LM head
        // into 8): the same tokens on the first prompt
        let split = Wgpu::with_device(dev.clone(), Arc::clone(model.file())).with_weight_binding_limit(4 << 20);
        let mut s = Session::new(&model, split, opts).unwrap();
        let r = &llama_ref::greedy(&ty)[0];
        let (a, b) = (greedy(&mut s, &model, &r.prompt_ids, 16), greedy(&mut c, &model, &r.prompt_ids, 16));
        assert_eq!(a, b, "{ty}: weights split over 4 MiB bindings");
        println!("{ty}: 16 tokens equal with the weights split over 4 MiB bindings");
    }
}
