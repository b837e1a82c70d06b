//! The forward pass against an f64 reference written here from the definitions (RMSNorm, RoPE,
//! grouped-query causal attention, SwiGLU, tied LM head), on the small random models of
//! `tests/tiny`: `llama` (RoPE on adjacent pairs), `qwen2` (RoPE on pairs (i, i + n_rot/2),
//! biases on the q/k/v projections), `qwen3` (half-split pairs, a per-head RMSNorm of queries
//! and keys, a head size unrelated to the width) and `gemma3` (qwen3's attention, plus scaled
//! embeddings, norms after both sublayers, a GELU MLP, and a local layer with a sliding window
//! and its own RoPE base beside a global one), `phi3` (half-split pairs; Q, K, V in one tensor,
//! gate and up in one) and `llama` with Llama 3's RoPE divisors (`rope_freqs.weight`); and bad
//! models and inputs as errors naming what is wrong.
//! Runs without any downloaded file.

use rayo::quant::{Activations, GgmlType};
use rayo_llm::cpu::Cpu;
use rayo_llm::{KvType, Logits, Model, Session, SessionOptions};

mod tiny;

use tiny::*;

/// `y = W·x` in f64 (`W`: rows × cols, row-major).
fn matvec(w: &[f32], x: &[f64]) -> Vec<f64> {
    w.chunks_exact(x.len()).map(|r| r.iter().zip(x).map(|(&a, &b)| a as f64 * b).sum()).collect()
}

fn rms_norm(x: &[f64], g: &[f32]) -> Vec<f64> {
    let s = (x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64 + EPS).sqrt();
    x.iter().zip(g).map(|(v, &g)| v / s * g as f64).collect()
}

/// Whether layer `l` attends to a window (gemma3's layer 0).
fn local(arch: Arch, l: usize) -> bool {
    arch == Arch::Gemma3 && l == 0
}

/// Pair j of each head turns by pos·base^(−2j/HD), base `BASE` (gemma3's global layer:
/// `GLOBAL_BASE`): pairs (2j, 2j+1) in `llama`, (j, j + HD/2) in the others.
fn rope(arch: Arch, layer: usize, x: &mut [f64], pos: usize) {
    let hd = arch.hd();
    let base = if arch == Arch::Gemma3 && !local(arch, layer) { GLOBAL_BASE } else { BASE };
    for head in x.chunks_exact_mut(hd) {
        for j in 0..hd / 2 {
            let mut th = pos as f64 * base.powf(-2.0 * j as f64 / hd as f64);
            let (divisors, factor) = match arch {
                Arch::Llama3 => (&FREQS, 1.0),
                Arch::Phi3Long => (&LONG, ATTN_FACTOR as f64),
                Arch::Phi3Short => (&SHORT, ATTN_FACTOR as f64),
                _ => (&[1.0; 4], 1.0),
            };
            th /= divisors.get(j).copied().unwrap_or(1.0) as f64;
            let (i0, i1) = match arch {
                Arch::Llama | Arch::Llama3 => (2 * j, 2 * j + 1),
                Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3 | Arch::Phi3 | Arch::Phi3Long | Arch::Phi3Short => (j, j + hd / 2),
            };
            let (a, b) = (head[i0], head[i1]);
            let (c, s) = (factor * th.cos(), factor * th.sin());
            head[i0] = a * c - b * s;
            head[i1] = a * s + b * c;
        }
    }
}

/// `y = W·x + b` in f64, the bias `name` where the model has it.
fn project(w: &Weights, layer: usize, name: &str, x: &[f64]) -> Vec<f64> {
    let mut y = matvec(w.get(&format!("blk.{layer}.{name}.weight")), x);
    if w.arch == Arch::Qwen2 {
        y.iter_mut().zip(w.get(&format!("blk.{layer}.{name}.bias"))).for_each(|(y, &b)| *y += b as f64);
    }
    y
}

/// The f64 logits of every position of `tokens`.
fn reference(w: &Weights, tokens: &[u32]) -> Vec<Vec<f64>> {
    let hd = w.arch.hd();
    let mut keys: Vec<Vec<Vec<f64>>> = vec![vec![]; LAYERS];
    let mut vals: Vec<Vec<Vec<f64>>> = vec![vec![]; LAYERS];
    let embd = w.get("token_embd.weight");
    let mut out = vec![];
    for (pos, &t) in tokens.iter().enumerate() {
        let mut x: Vec<f64> = embd[t as usize * D..][..D].iter().map(|&v| v as f64).collect();
        if w.arch == Arch::Gemma3 {
            x.iter_mut().for_each(|v| *v *= (D as f64).sqrt());
        }
        for l in 0..LAYERS {
            let g = |n: &str| w.get(&format!("blk.{l}.{n}"));
            let xn = rms_norm(&x, g("attn_norm.weight"));
            let (mut q, mut k, v) = (project(w, l, "attn_q", &xn), project(w, l, "attn_k", &xn), project(w, l, "attn_v", &xn));
            if matches!(w.arch, Arch::Qwen3 | Arch::Gemma3) {
                let per_head = |x: &[f64], g: &[f32]| x.chunks_exact(hd).flat_map(|h| rms_norm(h, g)).collect::<Vec<f64>>();
                q = per_head(&q, g("attn_q_norm.weight"));
                k = per_head(&k, g("attn_k_norm.weight"));
            }
            rope(w.arch, l, &mut q, pos);
            rope(w.arch, l, &mut k, pos);
            keys[l].push(k);
            vals[l].push(v);
            let mut att = vec![0f64; HEADS * hd];
            for h in 0..HEADS {
                let kv = h / (HEADS / KV_HEADS);
                let qh = &q[h * hd..][..hd];
                // a local layer sees the last WINDOW positions, this one included
                let lo = if local(w.arch, l) { (pos + 1).saturating_sub(WINDOW) } else { 0 };
                let s: Vec<f64> =
                    keys[l][lo..].iter().map(|k| qh.iter().zip(&k[kv * hd..][..hd]).map(|(a, b)| a * b).sum::<f64>() / (hd as f64).sqrt()).collect();
                let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for (p, v) in e.iter().zip(&vals[l][lo..]) {
                    for d in 0..hd {
                        att[h * hd + d] += p / z * v[kv * hd + d];
                    }
                }
            }
            let gemma = w.arch == Arch::Gemma3;
            let mut a = matvec(g("attn_output.weight"), &att);
            if gemma {
                a = rms_norm(&a, g("post_attention_norm.weight"));
            }
            x.iter_mut().zip(a).for_each(|(a, b)| *a += b);
            let xn = rms_norm(&x, g("ffn_norm.weight"));
            let (gate, up) = (matvec(g("ffn_gate.weight"), &xn), matvec(g("ffn_up.weight"), &xn));
            let act = |g: f64| match gemma {
                // GELU, tanh form
                true => 0.5 * g * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (g + 0.044715 * g * g * g)).tanh()),
                false => g / (1.0 + (-g).exp()),
            };
            let hidden: Vec<f64> = gate.iter().zip(&up).map(|(&g, u)| act(g) * u).collect();
            let mut f = matvec(g("ffn_down.weight"), &hidden);
            if gemma {
                f = rms_norm(&f, g("post_ffw_norm.weight"));
            }
            x.iter_mut().zip(f).for_each(|(a, b)| *a += b);
        }
        out.push(matvec(embd, &rms_norm(&x, w.get("output_norm.weight"))));
    }
    out
}

fn session(m: &Model, act: Activations, kv: KvType, threads: usize, batch: usize) -> Session<Cpu> {
    session_of(m, 0, act, kv, threads, batch)
}

/// A session of `context` positions (0: the model's).
fn session_of(m: &Model, context: usize, act: Activations, kv: KvType, threads: usize, batch: usize) -> Session<Cpu> {
    Session::new(m, Cpu::new(m.file().clone(), threads).with_activations(act), SessionOptions { context, kv_type: kv, batch, logit_rows: 1 }).unwrap()
}

/// The session context each reference assumes (`Phi3Short`: LongRoPE's short divisors).
fn context_of(arch: Arch) -> usize {
    if arch == Arch::Phi3Short {
        LONG_ROPE_CONTEXT
    } else {
        0
    }
}

/// The largest difference from the reference over every position, relative to the largest
/// reference logit.
fn max_rel_diff(got: &[f32], want: &[Vec<f64>]) -> f64 {
    let scale = want.iter().flatten().fold(0f64, |a, &b| a.max(b.abs()));
    got.chunks_exact(VOCAB).zip(want).flat_map(|(g, w)| g.iter().zip(w).map(|(&g, &w)| (g as f64 - w).abs())).fold(0f64, f64::max) / scale
}

#[test]
fn f32_weights_match_the_f64_definition_batched_and_one_token_at_a_time() {
    for arch in [Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Gemma3, Arch::Phi3, Arch::Llama3, Arch::Phi3Long, Arch::Phi3Short] {
        let w = Weights::random_of(arch);
        let m = model_of(arch, GgmlType::F32);
        assert_eq!(m.config().arch.name, arch.name());
        assert_eq!(m.config().rope_freqs.as_deref(), (arch == Arch::Llama3).then_some(&FREQS[..]));
        let long_rope = matches!(arch, Arch::Phi3Long | Arch::Phi3Short);
        assert_eq!(
            m.config().long_rope.as_ref().map(|l| (&l.long[..], &l.short[..], l.original_context)),
            long_rope.then_some((&LONG[..], &SHORT[..], LONG_ROPE_CONTEXT))
        );
        let context = context_of(arch);
        // a session of LONG_ROPE_CONTEXT positions holds that many tokens
        let n = if context == 0 { CTX } else { context };
        let tokens: Vec<u32> = (0..n as u32).map(|i| (i * 37 + 5) % 256).collect();
        let want = reference(&w, &tokens);
        for (threads, batch) in [(1, 256), (2, 256), (2, 5)] {
            let mut s = session_of(&m, context, Activations::F32, KvType::F32, threads, batch);
            let all = s.forward(&tokens, Logits::All).unwrap();
            let e = max_rel_diff(&all, &want);
            assert!(e < 1e-5, "{arch:?}: threads {threads}, batch {batch}: {e}");
            let mut s = session_of(&m, context, Activations::F32, KvType::F32, threads, batch);
            let inc: Vec<f32> = tokens.iter().flat_map(|&t| s.forward(&[t], Logits::Last).unwrap()).collect();
            let e = max_rel_diff(&inc, &want);
            assert!(e < 1e-5, "{arch:?}: threads {threads}, one at a time: {e}");
        }
        // An f16 cache rounds keys and values (and the queries of small batches): 2^-11 relative.
        let mut s = session_of(&m, context, Activations::F32, KvType::F16, 1, 256);
        let e = max_rel_diff(&s.forward(&tokens, Logits::All).unwrap(), &want);
        assert!(e < 5e-3, "{arch:?}: f16 cache: {e}");
    }
}

/// The reference tells the two architectures apart: a `qwen2` model computed with `llama`'s
/// RoPE pairs, or without its biases, is far from what the engine computes (so the test above
/// fails on either mistake).
#[test]
fn qwen2_s_rope_pairs_and_biases_change_the_logits() {
    let w = Weights::random_of(Arch::Qwen2);
    let m = model_of(Arch::Qwen2, GgmlType::F32);
    let tokens: Vec<u32> = (0..CTX as u32).map(|i| (i * 37 + 5) % 256).collect();
    let got = session(&m, Activations::F32, KvType::F32, 1, 256).forward(&tokens, Logits::All).unwrap();
    let pairs = Weights { arch: Arch::Llama, tensors: w.tensors.clone() };
    let no_bias = w.edited(|n| n.ends_with(".bias").then(|| vec![0.0; w.get(n).len()]));
    for (what, wrong) in [("llama's RoPE pairs (and no biases)", &pairs), ("no biases", &no_bias)] {
        let e = max_rel_diff(&got, &reference(wrong, &tokens));
        assert!(e > 1e-2, "qwen2 computed with {what} is only {e} from the engine");
    }
}

/// Likewise `qwen3`: computed with the per-head norms' weights set to 1, the logits are far from
/// the engine's (so the test above fails if the engine ignored those weights).
#[test]
fn qwen3_s_qk_norm_weights_change_the_logits() {
    let w = Weights::random_of(Arch::Qwen3);
    let m = model_of(Arch::Qwen3, GgmlType::F32);
    let tokens: Vec<u32> = (0..CTX as u32).map(|i| (i * 37 + 5) % 256).collect();
    let got = session(&m, Activations::F32, KvType::F32, 1, 256).forward(&tokens, Logits::All).unwrap();
    let flat = w.edited(|n| (n.ends_with("_q_norm.weight") || n.ends_with("_k_norm.weight")).then(|| vec![1.0; w.get(n).len()]));
    let e = max_rel_diff(&got, &reference(&flat, &tokens));
    assert!(e > 1e-2, "qwen3 computed with unit QK-norm weights is only {e} from the engine");
}

/// And `gemma3`: computed without its window (every layer global), or with unit post-norm
/// weights, the logits are far from the engine's (so the test above fails if the engine left
/// either out); the window matters because the 24 positions run past it.
#[test]
fn gemma3_s_window_and_post_norms_change_the_logits() {
    let w = Weights::random_of(Arch::Gemma3);
    let m = model_of(Arch::Gemma3, GgmlType::F32);
    let c = m.config();
    assert_eq!((c.window(0), c.window(1), c.rope_of(0).0, c.rope_of(1).0), (Some(WINDOW), None, BASE as f32, GLOBAL_BASE as f32));
    let tokens: Vec<u32> = (0..CTX as u32).map(|i| (i * 37 + 5) % 256).collect();
    let got = session(&m, Activations::F32, KvType::F32, 1, 256).forward(&tokens, Logits::All).unwrap();
    let unit_post = w.edited(|n| n.contains(".post_").then(|| vec![1.0; w.get(n).len()]));
    let e = max_rel_diff(&got, &reference(&unit_post, &tokens));
    assert!(e > 1e-2, "gemma3 computed with unit post-norm weights is only {e} from the engine");
    // the engine with a window as long as the context (the same RoPE bases, nothing cut off)
    let global = Model::from_file(gguf(&w, GgmlType::F32, |g, _| {
        g.set("gemma3.attention.sliding_window", CTX as u32);
    }))
    .unwrap();
    assert_eq!(global.config().window(0), Some(CTX));
    let all_global = session(&global, Activations::F32, KvType::F32, 1, 256).forward(&tokens, Logits::All).unwrap();
    let e = max_rel_diff(&all_global, &reference(&w, &tokens));
    assert!(e > 1e-2, "gemma3 without its window is only {e} from the reference");
}

/// Llama 3's divisors change the logits (a reference without them is far from the engine), and
/// phi3's fused tensors are split in their order (a reference with gate and up swapped is far).
#[test]
fn rope_divisors_and_fused_halves_change_the_logits() {
    let tokens: Vec<u32> = (0..CTX as u32).map(|i| (i * 37 + 5) % 256).collect();
    let w = Weights::random_of(Arch::Llama3);
    let got = session(&model_of(Arch::Llama3, GgmlType::F32), Activations::F32, KvType::F32, 1, 256).forward(&tokens, Logits::All).unwrap();
    let e = max_rel_diff(&got, &reference(&Weights { arch: Arch::Llama, tensors: w.tensors.clone() }, &tokens));
    assert!(e > 1e-2, "llama computed without rope_freqs is only {e} from the engine");
    let w = Weights::random_of(Arch::Phi3);
    let got = session(&model_of(Arch::Phi3, GgmlType::F32), Activations::F32, KvType::F32, 1, 256).forward(&tokens, Logits::All).unwrap();
    // gate's values where up's go and the other way round
    let other = |n: &str| {
        if n.contains("ffn_gate") {
            Some(n.replace("ffn_gate", "ffn_up"))
        } else if n.contains("ffn_up") {
            Some(n.replace("ffn_up", "ffn_gate"))
        } else {
            None
        }
    };
    let swapped = w.edited(|n| other(n).map(|o| w.get(&o).to_vec()));
    let e = max_rel_diff(&got, &reference(&swapped, &tokens));
    assert!(e > 1e-2, "phi3 computed with gate and up swapped is only {e} from the engine");
    // LongRoPE: the long divisors past the switch (a reference with the short ones, or with
    // neither, is far), the short ones up to it
    let w = Weights::random_of(Arch::Phi3Long);
    let m = model_of(Arch::Phi3Long, GgmlType::F32);
    let got = session(&m, Activations::F32, KvType::F32, 1, 256).forward(&tokens, Logits::All).unwrap();
    for other in [Arch::Phi3Short, Arch::Phi3] {
        let e = max_rel_diff(&got, &reference(&Weights { arch: other, tensors: w.tensors.clone() }, &tokens));
        assert!(e > 1e-2, "a LongRoPE phi3 over {CTX} positions computed as {other:?} is only {e} from the engine");
    }
    let short = &tokens[..LONG_ROPE_CONTEXT];
    let got = session_of(&m, LONG_ROPE_CONTEXT, Activations::F32, KvType::F32, 1, 256).forward(short, Logits::All).unwrap();
    let e = max_rel_diff(&got, &reference(&w, short));
    assert!(e > 1e-2, "a LongRoPE phi3 of {LONG_ROPE_CONTEXT} positions computed with the long divisors is only {e} from the engine");
}

/// A tensor of the test files: name, rows, cols, values.
type Tensor = (String, usize, usize, Vec<f32>);

/// LongRoPE's tensors are checked as `rope_freqs.weight` is, and come in pairs.
#[test]
fn long_rope_tensors_are_checked() {
    let long_rope = |edit: fn(&mut Vec<Tensor>)| match Model::from_file(gguf(&Weights::random_of(Arch::Phi3Long), GgmlType::F32, |_, t| edit(t))) {
        Ok(_) => panic!("the model loaded"),
        Err(e) => e.to_string(),
    };
    let e = long_rope(|t| t.retain(|x| x.0 != "rope_factors_short.weight"));
    assert!(e.contains("rope_factors_short.weight is missing"), "{e}");
    let e = long_rope(|t| t.iter_mut().filter(|x| x.0 == "rope_factors_long.weight").for_each(|x| x.3[2] = 0.0));
    assert!(e.contains("rope_factors_long.weight holds 0"), "{e}");
}

#[test]
fn quantized_weights_match_the_definition_on_their_dequantized_values() {
    for (arch, ty) in [Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Gemma3, Arch::Phi3, Arch::Llama3]
        .into_iter()
        .flat_map(|a| [GgmlType::Q8_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::F16].map(|t| (a, t)))
    {
        let w = Weights::random_of(arch);
        let tokens: Vec<u32> = (0..12u32).map(|i| (i * 91 + 3) % 256).collect();
        let m = model_of(arch, ty);
        let want = reference(&w.as_stored(ty), &tokens);
        // Exact activations: only the f32 arithmetic differs.
        let mut s = session(&m, Activations::F32, KvType::F32, 2, 256);
        let e = max_rel_diff(&s.forward(&tokens, Logits::All).unwrap(), &want);
        assert!(e < 1e-4, "{arch:?} {ty:?}, f32 activations: {e}");
        // 8-bit activations (as llama.cpp): within their rounding.
        let mut s = session(&m, Activations::Quantized, KvType::F16, 2, 256);
        let e = max_rel_diff(&s.forward(&tokens, Logits::All).unwrap(), &want);
        assert!(e < 3e-2, "{arch:?} {ty:?}, quantized activations: {e}");
    }
}

#[test]
fn bad_models_are_errors_naming_what_is_wrong() {
    let e = model_error(|g, _| {
        g.set("general.architecture", "rwkv6");
    });
    assert!(e.contains("architecture `rwkv6` is not supported") && e.contains("llama"), "{e}");
    let e = model_error(|_, t| t.retain(|t| t.0 != "blk.1.ffn_up.weight"));
    assert!(e.contains("tensor blk.1.ffn_up.weight is missing"), "{e}");
    // A tensor the llama block does not use (qwen3's QK-norm): computing without it would be a
    // wrong answer, so the file is refused.
    let e = model_error(|_, t| t.push(("blk.0.attn_q_norm.weight".into(), 1, 8, vec![1.0; 8])));
    assert!(e.contains("tensor blk.0.attn_q_norm.weight is in the file") && e.contains("`llama` block"), "{e}");
    let e = model_error(|_, t| {
        let q = t.iter_mut().find(|t| t.0 == "blk.0.attn_k.weight").unwrap();
        q.1 = D; // 32 rows where 2 kv heads of 8 make 16
        q.3 = values(D * D, 9);
    });
    assert!(e.contains("blk.0.attn_k.weight") && e.contains("[32, 32]") && e.contains("[32, 16]"), "{e}");
    let e = model_error(|g, _| {
        g.set("llama.attention.head_count_kv", 3u32);
    });
    assert!(e.contains("4 query heads") && e.contains("3 key/value heads"), "{e}");
    let e = model_error(|g, _| {
        g.metadata_mut().remove("llama.block_count");
    });
    assert!(e.contains("llama.block_count is missing"), "{e}");
    let e = model_error(|g, _| {
        g.set("llama.rope.freq_base", f32::NAN);
    });
    assert!(e.contains("llama.rope.freq_base"), "{e}");
    let e = model_error(|_, t| t.push(("rope_freqs.weight".into(), 1, 4, vec![1.0, f32::NAN, 1.0, 1.0])));
    assert!(e.contains("rope_freqs.weight holds NaN"), "{e}");
    let e = model_error(|_, t| t.push(("rope_freqs.weight".into(), 1, 3, vec![1.0; 3])));
    assert!(e.contains("rope_freqs.weight has shape [3]"), "{e}");
    let e = model_error(|g, _| {
        g.set("llama.rope.scaling.type", "yarn");
    });
    assert!(e.contains("llama.rope.scaling.type is `yarn`") && e.contains("linear"), "{e}");
    // a window of no positions, or a pattern of 0 layers (which would divide by zero)
    for key in ["gemma3.attention.sliding_window", "gemma3.attention.sliding_window_pattern"] {
        let r = Model::from_file(gguf(&Weights::random_of(Arch::Gemma3), GgmlType::F32, |g, _| {
            g.set(key, 0u32);
        }));
        let e = r.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains(key) && e.contains("0"), "{key}: {e}");
    }
}

#[test]
fn inputs_past_the_context_or_the_vocabulary_are_errors() {
    let m = model(GgmlType::F32);
    let mut s = session(&m, Activations::Quantized, KvType::F16, 1, 8);
    let e = s.forward(&[1; CTX + 1], Logits::Last).unwrap_err().to_string();
    assert!(e.contains("25 tokens at position 0 do not fit the context of 24"), "{e}");
    assert_eq!(s.position(), 0, "nothing ran");
    s.forward(&[1; 20], Logits::Last).unwrap();
    let e = s.forward(&[1; 5], Logits::Last).unwrap_err().to_string();
    assert!(e.contains("5 tokens at position 20"), "{e}");
    let e = s.forward(&[VOCAB as u32], Logits::Last).unwrap_err().to_string();
    assert!(e.contains("token id 257 is past the vocabulary of 257"), "{e}");
    assert!(s.forward(&[], Logits::Last).is_err());
    // And through the tokenizer: text round-trips through the byte tokens.
    let ids = m.tokenizer().encode("héllo <|end|>", false, true).unwrap();
    assert_eq!(*ids.last().unwrap(), 256);
    assert_eq!(m.tokenizer().decode(&ids[..ids.len() - 1]).unwrap(), "héllo ");
}

/// `Logits::All` with the output head applied to several rows at once (`logit_rows`, as
/// `rayo perplexity` runs it): a batched product, so each row's logits are within the rounding
/// of a prompt's arithmetic of those the row gets alone (`logit_rows` 1), which stay its bits.
#[test]
fn logits_of_several_rows_at_once_are_each_row_s_within_rounding() {
    for arch in [Arch::Llama, Arch::Gemma3] {
        let m = model_of(arch, GgmlType::Q8_0);
        let tokens: Vec<u32> = (0..CTX as u32).map(|i| (i * 53 + 11) % 256).collect();
        let run = |logit_rows: usize| {
            let opts = SessionOptions { context: 0, kv_type: KvType::F16, batch: 16, logit_rows };
            Session::new(&m, Cpu::new(m.file().clone(), 2), opts).unwrap().forward(&tokens, Logits::All).unwrap()
        };
        let one = run(1);
        let last: Vec<f32> = {
            let mut s =
                Session::new(&m, Cpu::new(m.file().clone(), 2), SessionOptions { context: 0, kv_type: KvType::F16, batch: 16, logit_rows: 1 })
                    .unwrap();
            s.forward(&tokens[..CTX - 1], Logits::Last).unwrap();
            s.forward(&tokens[CTX - 1..], Logits::Last).unwrap()
        };
        assert!(one[(CTX - 1) * VOCAB..].iter().zip(&last).all(|(a, b)| a.to_bits() == b.to_bits()), "{arch:?}: logit_rows 1 is a row alone");
        let scale = one.iter().fold(0f32, |a, &b| a.max(b.abs()));
        for rows in [5, 16, 64] {
            let got = run(rows);
            let worst = one.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(worst <= 1e-5 * scale, "{arch:?}: logit_rows {rows}: {worst} from the rows alone (largest |logit| {scale})");
        }
    }
}
