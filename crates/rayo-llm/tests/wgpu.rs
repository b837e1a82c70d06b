//! The wgpu engine: every WGSL kernel against an f64 reference on awkward shapes (every block
//! format, a matrix split over several bindings, RoPE's two pairings, attention over f16 and
//! f32 caches across its 64-position chunks), then greedy continuations of the committed
//! prompts against the CPU engine on SmolLM2, and a short one on Qwen2.5-Coder-0.5B (`qwen2`:
//! half-split RoPE, q/k/v biases, a 145 MB LM head over several bindings). Without an adapter
//! every test prints a `SKIP` line (`RAYO_REQUIRE_GPU=1` makes that a failure). CI runs it on
//! lavapipe.
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

/// Every format of the table: those with a WGSL kernel read in place, the others (Q8_1, Q8_K)
/// dequantized to f32 at load.
fn formats() -> Vec<GgmlType> {
    let all: Vec<GgmlType> = quant::formats::FORMATS.iter().map(|f| GgmlType::from_id(f.id).unwrap()).collect();
    for &ty in &all {
        assert_eq!(rayo_llm::wgpu::WgslFormat::of(ty).is_some(), ty.format().kernels.wgsl, "{ty}");
    }
    all
}

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
    for ty in formats() {
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
        arch: rayo_llm::arch::with_rope(style),
        n_layer: 2,
        n_embd: n_head * head_dim,
        n_ff: 8,
        n_head,
        n_head_kv,
        head_dim,
        n_rot,
        rope_base: 10000.0,
        eps: 1e-5,
        context_length: 160,
        vocab_size: 4,
        rope_scale: 1.0,
        sliding_window: None,
        rope_freqs: None,
        long_rope: None,
        rope_attn_factor: 1.0,
        shard: rayo_llm::shard::Shard::ALONE,
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
    // geglu (GELU's tanh form; inputs past ±10 too) and scale
    let g0: Vec<f32> = a0.iter().enumerate().map(|(i, v)| if i % 50 == 0 { v * 3.0 } else { *v }).collect();
    let mut gb = b.vector(&g0).unwrap();
    b.geglu(&mut gb, &bb, n).unwrap();
    let ge = read(&mut b, &gb, n);
    b.scale(&mut gb, 25.3, n).unwrap();
    let scaled = read(&mut b, &gb, n);
    for i in 0..n {
        let (u, v) = (g0[i] as f64, b0[i] as f64);
        let want = if u <= -10.0 { 0.0 } else { 0.5 * u * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (u + 0.044715 * u * u * u)).tanh()) * v };
        assert!((ge[i] as f64 - want).abs() < 1e-5 * want.abs().max(1.0), "geglu {i} ({u}): {} vs {want}", ge[i]);
        assert_eq!(scaled[i], ge[i] * 25.3, "scale {i}");
    }
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
        b.rope(&cfg, 0, &mut q, &mut k, m, 5).unwrap();
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

/// The f16 modes to test: the f32 fallback always, `f16` kernels where the adapter has
/// shader-f16 (a SKIP line otherwise).
fn f16_modes(dev: &GpuDevice) -> Vec<bool> {
    if dev.has_shader_f16() {
        vec![false, true]
    } else {
        println!("SKIP wgpu: the f16 kernels (this adapter has no shader-f16); the f32 fallback is tested");
        vec![false]
    }
}

/// The error allowed in attention of f16 queries and keys (`q`, `keys`, f16 values) when its
/// q·k runs in f16 math: each pair of products and their sum within 2⁻¹⁰ of Σ|q·k| (two f16
/// roundings), so each score within Δ = 2⁻¹⁰·Σ_d|q_d·k_d|/√d, the softmax weights within a
/// factor e^(±2Δ), and the output within (e^(2Δ) − 1)·max|v|; plus the f32 path's 2e-5.
fn half_math_tol(cfg: &Config, q: &[f64], keys: &[f64], vals: &[f64]) -> f64 {
    let (hd, kw) = (cfg.head_dim, cfg.kv_width());
    let mut ds: f64 = 0.0;
    for qh in q.chunks(hd) {
        for kp in keys.chunks(kw) {
            for kh in kp.chunks(hd) {
                ds = ds.max(qh.iter().zip(kh).map(|(a, b)| (a * b).abs()).sum::<f64>());
            }
        }
    }
    let ds = ds * 2f64.powi(-10) / (hd as f64).sqrt();
    let vmax = vals.iter().fold(0f64, |a, v| a.max(v.abs()));
    ((2.0 * ds).exp() - 1.0) * vmax + 2e-5
}

/// Causal GQA attention against f64: a prompt of 3 rows, then 70 (crossing the kernel's
/// 64-position chunks), then one row, over f16 and f32 caches, heads of 12 and 130 values; with
/// an f16 cache also through the `f16` kernels (the cache read as f16, q·k in f16 math: the
/// query rounded to f16 at every length, tolerance [`half_math_tol`]).
#[test]
fn attention_matches_f64() {
    let Some(dev) = device("attention_matches_f64") else { return };
    for half in f16_modes(&dev) {
        let mut b = backend(dev.clone()).with_f16(half);
        // (the last: layer 1 a local layer of a 5-position window)
        for (head_dim, ty, window) in [(12, KvType::F16, None), (12, KvType::F32, None), (130, KvType::F16, None), (12, KvType::F32, Some(5))] {
            let mut cfg = tiny_config(RopeStyle::Adjacent, 4, 2, head_dim, 8);
            cfg.sliding_window = window.map(|window| rayo_llm::SlidingWindow { window, pattern: 3, rope_base: 10000.0 });
            let (qw, kw) = (cfg.q_width(), cfg.kv_width());
            let mut kv = b.kv_cache(&cfg, 80, ty).unwrap();
            let (mut keys, mut vals) = (Vec::<f64>::new(), Vec::<f64>::new());
            let round = |v: f32| if ty == KvType::F16 { f16::from_f32(v).to_f32() as f64 } else { v as f64 };
            let half_math = half && ty == KvType::F16;
            let mut pos0 = 0;
            let mut worst: f64 = 0.0;
            for (step, m) in [3usize, 70, 1].into_iter().enumerate() {
                let (q, k, v) = (values(m * qw, 10 + step as u64), values(m * kw, 20 + step as u64), values(m * kw, 30 + step as u64));
                let (qb, kb, vb) = (b.vector(&q).unwrap(), b.vector(&k).unwrap(), b.vector(&v).unwrap());
                let mut out = b.buffer(m * qw).unwrap();
                b.attention(&cfg, &mut kv, 1, &qb, &kb, &vb, m, pos0, &mut out).unwrap();
                let got = read(&mut b, &out, m * qw);
                keys.extend(k.iter().map(|&x| round(x)));
                vals.extend(v.iter().map(|&x| round(x)));
                let round_q = ty == KvType::F16 && (m < 64 || half_math);
                let qd: Vec<f64> = q.iter().map(|&x| if round_q { round(x) } else { x as f64 }).collect();
                let want = attention_ref(&cfg, &qd, &keys, &vals, m, pos0, cfg.window(1));
                let tol = if half_math { half_math_tol(&cfg, &qd, &keys, &vals) } else { 2e-5 };
                for (e, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    worst = worst.max((g as f64 - w).abs());
                    assert!((g as f64 - w).abs() < tol, "f16 {half} head_dim {head_dim} {ty:?} m {m} value {e}: {g} vs {w} (tolerance {tol:e})");
                }
                pos0 += m;
            }
            println!("attention f16 kernels {half}, head_dim {head_dim} {ty:?}, window {window:?}: 74 positions, largest error {worst:.1e}");
        }
    }
}

/// Causal GQA attention in f64 of `m` query rows (`q`, rows of `cfg.q_width()`) at positions
/// `pos0..`, over `keys` and `vals` (rows of `cfg.kv_width()` for positions `0..pos0 + m`), each
/// row over the last `window` of its positions where given.
fn attention_ref(cfg: &Config, q: &[f64], keys: &[f64], vals: &[f64], m: usize, pos0: usize, window: Option<usize>) -> Vec<f64> {
    let (hd, kw) = (cfg.head_dim, cfg.kv_width());
    let mut out = vec![0.0; m * cfg.q_width()];
    for i in 0..m {
        let n = pos0 + i + 1;
        let lo = window.map_or(0, |w| n.saturating_sub(w));
        for h in 0..cfg.n_head {
            let g = h / cfg.group();
            let qh = &q[(i * cfg.n_head + h) * hd..][..hd];
            let s: Vec<f64> =
                (lo..n).map(|p| qh.iter().enumerate().map(|(d, &a)| a * keys[p * kw + g * hd + d]).sum::<f64>() / (hd as f64).sqrt()).collect();
            let mx = s.iter().cloned().fold(f64::MIN, f64::max);
            let e: Vec<f64> = s.iter().map(|&v| (v - mx).exp()).collect();
            let z: f64 = e.iter().sum();
            for d in 0..hd {
                out[(i * cfg.n_head + h) * hd + d] = (lo..n).map(|p| e[p - lo] / z * vals[p * kw + g * hd + d]).sum();
            }
        }
    }
    out
}

/// Greedy continuations of the committed prompts: the wgpu engine's tokens equal the CPU
/// engine's with f32 activations (the same arithmetic up to summation order), 16 tokens each
/// on a software adapter (each token is the same step; RAYO_TEST_FULL_SIZES=1: 32), else 32.
#[test]
fn greedy_text_equals_the_cpu_engine() {
    let Some(dev) = device("greedy_text_equals_the_cpu_engine") else { return };
    println!("wgpu adapter: {:?}", dev.adapter_info());
    for (ty, model) in models("greedy_text_equals_the_cpu_engine") {
        let opts = SessionOptions { context: 256, ..SessionOptions::default() };
        let mut g = Session::new(&model, Wgpu::with_device(dev.clone(), Arc::clone(model.file())), opts).unwrap();
        let mut c = Session::new(&model, Cpu::new(Arc::clone(model.file()), 2).with_activations(Activations::F32), opts).unwrap();
        let software = dev.adapter_info().device_type == "cpu";
        let n = if software && std::env::var_os("RAYO_TEST_FULL_SIZES").is_none() { 16 } else { 32 };
        greedy_equals_cpu(&ty, &model, &mut g, &mut c, n);
        // the weights split over bindings of 4 MiB (the tied 28 MiB embedding table and LM head
        // into 8): the same tokens on the first prompt
        let split = Wgpu::with_device(dev.clone(), Arc::clone(model.file())).with_weight_binding_limit(4 << 20);
        let mut s = Session::new(&model, split, opts).unwrap();
        let r = &llama_ref::greedy(&ty)[0];
        let (a, b) = (greedy(&mut s, &model, &r.prompt_ids, 16), greedy(&mut c, &model, &r.prompt_ids, 16));
        assert_eq!(a, b, "{ty}: weights split over 4 MiB bindings");
        println!("{ty}: 16 tokens equal with the weights split over 4 MiB bindings");
        // the f16 kernels (the cache read as f16, q·k in f16 math), where the adapter has them
        if dev.has_shader_f16() {
            let mut h = Session::new(&model, Wgpu::with_device(dev.clone(), Arc::clone(model.file())).with_f16(true), opts).unwrap();
            let (a, b) = (greedy(&mut h, &model, &r.prompt_ids, 16), greedy(&mut c, &model, &r.prompt_ids, 16));
            assert_eq!(a, b, "{ty}: f16 kernels");
            println!("{ty}: 16 tokens equal with the f16 kernels");
        }
    }
}

/// Qwen2.5-Coder-0.5B (`qwen2`): after a short prompt (prompts.txt's "Question: ...", 15 tokens,
/// whose first 8 greedy steps have no near tie in llama.cpp's logits), the logits are within
/// 0.05 of the CPU engine's with f32 activations (the whole vocabulary), and 8 greedy tokens (the
/// backend's own pick, `forward_greedy`) equal the CPU's. Short: lavapipe runs the 0.5 GB model
/// at about a token a second.
#[test]
fn qwen2_greedy_tokens_equal_the_cpu_engine() {
    real_model_greedy_equals_the_cpu_engine(&llama_ref::QWEN2_MODEL, "Question:", 0.05);
}

/// Gemma 3 270M (`gemma3`: scaled embeddings, post-norms, a GELU MLP, per-layer RoPE bases, a
/// 262,144-row output head split over bindings) after prompts.txt's "def fibonacci" (no gap under
/// 0.22 in llama.cpp's first 8 steps), as qwen2's test (the sliding window is tested
/// in `attention_matches_f64`: the prompt is shorter than it).
#[test]
fn gemma3_greedy_tokens_equal_the_cpu_engine() {
    real_model_greedy_equals_the_cpu_engine(&llama_ref::GEMMA3_MODEL, "def fibonacci", 0.05);
}

/// `rm`'s logits after the prompt of prompts.txt that starts with `prompt`, against the CPU
/// engine's with f32 activations (within `tol`), then 8 greedy tokens equal to the CPU's.
fn real_model_greedy_equals_the_cpu_engine(rm: &llama_ref::RealModel, prompt: &str, tol: f32) {
    let test = format!("wgpu {}_greedy_tokens_equal_the_cpu_engine", rm.name);
    let Some(dev) = device(&test) else { return };
    let Some(path) = rm.path(&test) else { return };
    let t0 = std::time::Instant::now();
    let model = rayo_llm::Model::open(&path).unwrap();
    let opts = SessionOptions { context: 64, ..SessionOptions::default() };
    let mut g = Session::new(&model, Wgpu::with_device(dev.clone(), Arc::clone(model.file())), opts).unwrap();
    let mut c = Session::new(&model, Cpu::new(Arc::clone(model.file()), 2).with_activations(Activations::F32), opts).unwrap();
    let r = llama_ref::greedy(rm.name).into_iter().find(|r| r.prompt.starts_with(prompt)).unwrap();
    let (lg, lc) = (g.forward(&r.prompt_ids, rayo_llm::Logits::Last).unwrap(), c.forward(&r.prompt_ids, rayo_llm::Logits::Last).unwrap());
    let worst = lg.iter().zip(&lc).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    let name = rm.name;
    println!(
        "{name}: {} prompt tokens, max |Δlogit| wgpu vs CPU (f32 activations) {worst:.4} ({:.1} s)",
        r.prompt_ids.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(worst < tol, "{name}: max |Δlogit| {worst} after the prompt");
    let (mut a, mut b) = (vec![engines::argmax(&lg) as u32], vec![engines::argmax(&lc) as u32]);
    while a.len() < 8 {
        a.push(g.forward_greedy(&[*a.last().unwrap()]).unwrap());
        b.push(c.forward_greedy(&[*b.last().unwrap()]).unwrap());
    }
    assert_eq!(a, b, "{name}: greedy tokens differ");
    // and llama.cpp's (the CPU test holds the CPU engine to them)
    let text = model.tokenizer().decode(&a).unwrap();
    println!(
        "{name}: 8 greedy tokens equal the CPU engine's ({text:?}; llama.cpp's first 8 equal: {}) in {:.1} s",
        r.gen_ids.len() >= 8 && r.gen_ids[..8] == a[..],
        t0.elapsed().as_secs_f64()
    );
}

/// RMSNorm of each row of `x` (`cols` values) by `g`, in f64.
fn norm_ref(x: &[f32], g: &[f32], cols: usize, eps: f64) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|r| {
            let ms = r.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / cols as f64;
            let s = 1.0 / (ms + eps).sqrt();
            r.iter().zip(g).map(move |(&v, &w)| v as f64 * s * w as f64)
        })
        .collect()
}

/// A quantized matrix: its bytes and its dequantized values.
fn quantized(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> (Vec<u8>, Vec<f32>) {
    let bytes = quant::quantize_to_vec(ty, &values(rows * cols, seed)).unwrap();
    let mut wd = vec![0f32; rows * cols];
    quant::dequantize(ty, &bytes, &mut wd).unwrap();
    (bytes, wd)
}

/// `n·Wᵀ` in f64 for rows of `n`, and Σ|n·w| (the scale of f32 rounding) per value.
fn product_ref(n: &[f64], wd: &[f32], rows: usize, cols: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut y, mut mag) = (vec![], vec![]);
    for xr in n.chunks(cols) {
        for wr in wd.chunks(cols).take(rows) {
            y.push(xr.iter().zip(wr).map(|(&a, &b)| a * b as f64).sum());
            mag.push(xr.iter().zip(wr).map(|(&a, &b)| (a * b as f64).abs()).sum());
        }
    }
    (y, mag)
}

/// The fused products against f64: RMSNorm folded into one to three products in one dispatch
/// (Q, K, V of one format; of three formats: Q4_K, Q6_K, Q8_0 as a Q4_K_M file mixes them),
/// rows that are not a multiple of a workgroup's (70, 11, 37), 1, 5 and 9 activation rows, a
/// thread and 16 (and the subgroup's) threads per row; one matrix split over bindings (the LM
/// head's path); and gate·up with SwiGLU in one dispatch.
#[test]
fn fused_norm_products_match_f64() {
    let Some(dev) = device("fused_norm_products_match_f64") else { return };
    let cols = 512;
    let g = values(cols, 7).iter().map(|v| 1.0 + v).collect::<Vec<_>>();
    let sg = dev.subgroup_min_size().map(|s| (s as usize).min(64));
    for lanes in [1, 16].into_iter().chain(sg) {
        for tys in [[GgmlType::Q4_1; 3], [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0]] {
            let rows = [70, 11, 37];
            let mut b = backend(dev.clone()).with_product_lanes(lanes).unwrap();
            let mats: Vec<_> = tys.iter().zip(rows).enumerate().map(|(i, (&ty, r))| quantized(ty, r, cols, 40 + i as u64)).collect();
            let ws: Vec<_> = mats
                .iter()
                .zip(tys.iter().zip(rows))
                .map(|((bytes, _), (&ty, r))| b.upload_matrix("w", &QuantMatrix::new(ty, r, cols, bytes).unwrap()).unwrap())
                .collect();
            let gb = b.vector(&g).unwrap();
            for m in [1usize, 5, 9] {
                // large activations: the norm matters
                let x: Vec<f32> = values(m * cols, 50 + m as u64).iter().map(|v| v * 30.0).collect();
                let xb = b.vector(&x).unwrap();
                let mut tmp = b.buffer(m * cols).unwrap();
                let mut outs: Vec<WgpuBuf> = rows.iter().map(|r| b.buffer(m * r).unwrap()).collect();
                let before = b.ops();
                let mut refs: Vec<&mut WgpuBuf> = outs.iter_mut().collect();
                b.norm_matmuls(&xb, &gb, 1e-5, m, &[&ws[0], &ws[1], &ws[2]], &mut tmp, &mut refs).unwrap();
                // a CPU adapter's thread per row runs the norm on its own (no barriers in products)
                let norm_ops = if lanes == 1 { 2 } else { 1 };
                assert_eq!(b.ops() - before, norm_ops, "three products (and their norm) in one dispatch");
                let n = norm_ref(&x, &g, cols, 1e-5);
                for (k, out) in outs.iter().enumerate() {
                    let got = read(&mut b, out, m * rows[k]);
                    let (want, mag) = product_ref(&n, &mats[k].1, rows[k], cols);
                    for e in 0..got.len() {
                        let tol = 1e-5 * mag[e] + 1e-6;
                        assert!(
                            (got[e] as f64 - want[e]).abs() <= tol,
                            "{tys:?} lanes {lanes} m {m} weight {k} value {e}: {} vs {}",
                            got[e],
                            want[e]
                        );
                    }
                }
                // gate (weight 0's format) and up (weight 2's) of 70 rows each, SwiGLU'd
                let (gate_q, up_q) = (quantized(tys[0], 70, cols, 60), quantized(tys[2], 70, cols, 61));
                let gate = b.upload_matrix("gate", &QuantMatrix::new(tys[0], 70, cols, &gate_q.0).unwrap()).unwrap();
                let up = b.upload_matrix("up", &QuantMatrix::new(tys[2], 70, cols, &up_q.0).unwrap()).unwrap();
                let (mut out, mut up_out) = (b.buffer(m * 70).unwrap(), b.buffer(m * 70).unwrap());
                let before = b.ops();
                b.norm_swiglu(&xb, &gb, 1e-5, m, (&gate, &up), &mut tmp, &mut out, &mut up_out, m * 70).unwrap();
                assert_eq!(b.ops() - before, norm_ops, "gate, up, SwiGLU (and the norm) in one dispatch");
                let got = read(&mut b, &out, m * 70);
                let ((gw, gm), (uw, um)) = (product_ref(&n, &gate_q.1, 70, cols), product_ref(&n, &up_q.1, 70, cols));
                for e in 0..got.len() {
                    let silu = |v: f64| v / (1.0 + (-v).exp());
                    let want = silu(gw[e]) * uw[e];
                    // each product within 1e-5·Σ|n·w|; silu' is at most 1.1
                    let tol = 1.1 * (1e-5 * gm[e] + 1e-6) * uw[e].abs() + silu(gw[e]).abs() * (1e-5 * um[e] + 1e-6) + 1e-6;
                    assert!((got[e] as f64 - want).abs() <= tol, "swiglu {tys:?} lanes {lanes} m {m} value {e}: {} vs {want}", got[e]);
                }
            }
        }
        // one matrix over bindings of ten rows: a dispatch per part, each folding the norm
        let (bytes, wd) = quantized(GgmlType::Q8_0, 45, cols, 70);
        let row_bytes = bytes.len() / 45;
        let mut b = backend(dev.clone()).with_product_lanes(lanes).unwrap().with_weight_binding_limit(10 * row_bytes as u64 + 16);
        let w = b.upload_matrix("output.weight", &QuantMatrix::new(GgmlType::Q8_0, 45, cols, &bytes).unwrap()).unwrap();
        assert!(w.parts.len() == 5);
        let x = values(cols, 80);
        let (xb, gb) = (b.vector(&x).unwrap(), b.vector(&g).unwrap());
        let (mut tmp, mut y) = (b.buffer(cols).unwrap(), b.buffer(45).unwrap());
        b.norm_matmuls(&xb, &gb, 1e-5, 1, &[&w], &mut tmp, &mut [&mut y]).unwrap();
        let got = read(&mut b, &y, 45);
        let (want, mag) = product_ref(&norm_ref(&x, &g, cols, 1e-5), &wd, 45, cols);
        for e in 0..45 {
            assert!((got[e] as f64 - want[e]).abs() <= 1e-5 * mag[e] + 1e-6, "split lanes {lanes} row {e}: {} vs {}", got[e], want[e]);
        }
        println!("lanes {lanes}: norm + Q/K/V (one format and three), norm + gate·up SwiGLU, a split matrix: within tolerance of f64");
    }
}

/// RoPE, the KV store and attention as the session runs them ([`Backend::rope_attention`]: RoPE
/// and the store in one dispatch, the keys rotated as they are stored) against f64, both
/// pairings, f16 and f32 caches, 3 + 70 + 1 rows. Tolerance: 2e-5 with an f32 cache; with an
/// f16 one, 1e-3: a rotated key or query element rounded to f16 on the device (from f32) and in
/// the reference (from f64) may land one f16 step (2⁻¹¹ relative) apart.
#[test]
fn rope_attention_matches_f64() {
    let Some(dev) = device("rope_attention_matches_f64") else { return };
    for half in f16_modes(&dev) {
        let mut b = backend(dev.clone()).with_f16(half);
        for (style, head_dim, n_rot, ty) in [
            (RopeStyle::Adjacent, 12, 8, KvType::F32),
            (RopeStyle::HalfSplit, 12, 12, KvType::F32),
            (RopeStyle::HalfSplit, 130, 64, KvType::F16),
            (RopeStyle::Adjacent, 12, 8, KvType::F16),
        ] {
            let cfg = tiny_config(style, 4, 2, head_dim, n_rot);
            let (qw, kw) = (cfg.q_width(), cfg.kv_width());
            let mut kv = b.kv_cache(&cfg, 80, ty).unwrap();
            let round = |v: f64| if ty == KvType::F16 { f16::from_f64(v).to_f64() } else { v };
            let (mut keys, mut vals) = (Vec::<f64>::new(), Vec::<f64>::new());
            let mut pos0 = 0;
            for (step, m) in [3usize, 70, 1].into_iter().enumerate() {
                let (q, k, v) = (values(m * qw, 110 + step as u64), values(m * kw, 120 + step as u64), values(m * kw, 130 + step as u64));
                let (mut qb, mut kb, vb) = (b.vector(&q).unwrap(), b.vector(&k).unwrap(), b.vector(&v).unwrap());
                let mut out = b.buffer(m * qw).unwrap();
                let before = b.ops();
                b.rope_attention(&cfg, &mut kv, 0, (&mut qb, &mut kb, &vb), m, pos0, &mut out).unwrap();
                assert_eq!(b.ops() - before, 2, "RoPE and the store in one dispatch, attention in the other");
                let got = read(&mut b, &out, m * qw);
                let rq = rope_ref(&q, cfg.n_head, &cfg, pos0);
                keys.extend(rope_ref(&k, cfg.n_head_kv, &cfg, pos0).iter().map(|&x| round(x)));
                vals.extend(v.iter().map(|&x| round(x as f64)));
                let half_math = half && ty == KvType::F16;
                let round_q = ty == KvType::F16 && (m < 64 || half_math);
                let qd: Vec<f64> = rq.iter().map(|&x| if round_q { round(x) } else { x }).collect();
                let want = attention_ref(&cfg, &qd, &keys, &vals, m, pos0, cfg.window(1));
                let tol = match (ty, half_math) {
                    (KvType::F32, _) => 2e-5,
                    (_, false) => 1e-3,
                    (_, true) => 1e-3 + half_math_tol(&cfg, &qd, &keys, &vals),
                };
                for (e, (&g, &w)) in got.iter().zip(&want).enumerate() {
                    assert!((g as f64 - w).abs() < tol, "{style:?} head_dim {head_dim} {ty:?} m {m} value {e}: {g} vs {w}");
                }
                pos0 += m;
            }
            println!("rope_attention f16 kernels {half}, {style:?} head_dim {head_dim} n_rot {n_rot} {ty:?}: 74 positions within tolerance");
        }
    }
}

/// RoPE in f64 of rows of `heads` heads at positions `pos0..`.
fn rope_ref(x: &[f32], heads: usize, cfg: &Config, pos0: usize) -> Vec<f64> {
    let (hd, nr) = (cfg.head_dim, cfg.n_rot);
    let mut out: Vec<f64> = x.iter().map(|&v| v as f64).collect();
    for (r, row) in out.chunks_mut(heads * hd).enumerate() {
        for head in row.chunks_mut(hd) {
            for j in 0..nr / 2 {
                let (a, b) = match cfg.arch.rope {
                    RopeStyle::Adjacent => (2 * j, 2 * j + 1),
                    RopeStyle::HalfSplit => (j, j + nr / 2),
                };
                let th = (pos0 + r) as f64 * (cfg.rope_base as f64).powf(-2.0 * j as f64 / nr as f64);
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * th.cos() - x1 * th.sin();
                head[b] = x0 * th.sin() + x1 * th.cos();
            }
        }
    }
    out
}

/// The device argmax (a greedy step reads 4 bytes): the first maximum on awkward lengths, ties,
/// −inf; NaN and +inf are the sampler's errors, as on the host.
#[test]
fn device_argmax_matches_the_host() {
    let Some(dev) = device("device_argmax_matches_the_host") else { return };
    let mut b = backend(dev);
    for n in [1usize, 7, 255, 257, 49155] {
        let mut v = values(n, n as u64);
        // a tie for the maximum, the later one must lose; −inf values
        let top = n / 3;
        v[top] = 2.0;
        if n > 2 {
            v[n - 1] = 2.0;
            v[1] = f32::NEG_INFINITY;
        }
        let x = b.vector(&v).unwrap();
        assert_eq!(b.argmax(&x, n).unwrap() as usize, if n > 2 { top } else { 0 }, "n {n}");
        for (bad, val) in [(n / 2, f32::NAN), (n - 1, f32::INFINITY)] {
            let mut w = v.clone();
            w[bad] = val;
            // a later NaN: the first bad value is named
            if bad + 1 < n {
                w[bad + 1] = f32::NAN;
            }
            let wb = b.vector(&w).unwrap();
            let e = b.argmax(&wb, n).expect_err("NaN or +inf");
            assert!(e.to_string().contains(&format!("logit {bad} of {n}")), "n {n}: {e}");
        }
    }
    let x = b.vector(&[f32::NEG_INFINITY; 300]).unwrap();
    assert!(b.argmax(&x, 300).unwrap_err().to_string().contains("-inf"));
    // the first n of a longer buffer
    let x = b.vector(&[0.0, 1.0, 3.0, 9.0]).unwrap();
    assert_eq!(b.argmax(&x, 3).unwrap(), 2);
    println!("device argmax: first maximum, ties, -inf, NaN and +inf as the host's sampler");
}

/// Dispatches of one decoding step (greedy) with the fused kernels as a GPU runs them (16
/// threads per weight row: 1 + 6 per layer + 2), as a CPU adapter does (a thread per row, the
/// norms on their own: 1 + 8 per layer + 3) and without fusion (1 + 13 per layer + 3); the same
/// token each way.
#[test]
fn fused_step_dispatch_count() {
    let Some(dev) = device("fused_step_dispatch_count") else { return };
    let Some((_, model)) = models("fused_step_dispatch_count").into_iter().next() else { return };
    let layers = model.config().n_layer;
    let opts = SessionOptions { context: 64, ..SessionOptions::default() };
    let mut tokens = vec![];
    for (fuse, lanes, want) in [(true, 16, 1 + 6 * layers + 2), (true, 1, 1 + 8 * layers + 3), (false, 1, 1 + 13 * layers + 3)] {
        let b = Wgpu::with_device(dev.clone(), Arc::clone(model.file())).with_fusion(fuse).with_product_lanes(lanes).unwrap();
        let mut s = Session::new(&model, b, opts).unwrap();
        let t = s.forward_greedy(&[1, 2, 3]).unwrap();
        let before = s.backend().ops();
        let t2 = s.forward_greedy(&[t]).unwrap();
        let ops = s.backend().ops() - before;
        println!("fused {fuse}, {lanes} threads per row: {ops} dispatches per decoding step ({layers} layers)");
        assert_eq!(ops, want, "fused {fuse} lanes {lanes}");
        tokens.push((t, t2));
    }
    assert!(tokens.iter().all(|&t| t == tokens[0]), "the same picks each way: {tokens:?}");
}
