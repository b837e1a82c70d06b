//! The CUDA backend driven through the public `Backend` trait in orders a `Session` never uses:
//! a recorded step replayed after its handles were dropped, the KV cache replaced under a
//! recording, step inputs past the cache or the vocabulary, handles and weights of another
//! backend, allocating or recording again while a step records, a host read inside a
//! recording. Each is an error, or a replay over memory the backend still owns: never device
//! UB. On the GPU machine this runs under compute-sanitizer (docs/perf/issue27-sanitizer.sh).
//! Without a device every test prints a `SKIP` line (`RAYO_REQUIRE_CUDA=1` makes that a
//! failure).
#![cfg(feature = "cuda")]

#[path = "llama_ref/mod.rs"]
mod llama_ref;

use rayo_llm::cuda::Cuda;
use rayo_llm::{Backend, KvType, Model};
use std::sync::Arc;

/// SmolLM2 and a CUDA backend for it, or `None` after a SKIP line.
fn setup(test: &str) -> Option<(Model, Cuda)> {
    let path = llama_ref::smollm2(test)?;
    let model = Model::open(path).unwrap();
    match Cuda::new(Arc::clone(model.file())) {
        Ok(c) => Some((model, c)),
        Err(e) => {
            let required = std::env::var("RAYO_REQUIRE_CUDA").map(|v| v == "1").unwrap_or(false);
            assert!(!required, "RAYO_REQUIRE_CUDA=1 but no CUDA device: {e}");
            println!("SKIP cuda: {test} ({e})");
            None
        }
    }
}

fn err_text<T: std::fmt::Debug>(r: rayo_llm::Result<T>) -> String {
    r.expect_err("an error").to_string()
}

#[test]
fn a_recording_outlives_the_handles_it_used() {
    let Some((model, mut b)) = setup("a_recording_outlives_the_handles_it_used") else { return };
    let cfg = model.config().clone();
    let d = cfg.n_embd;
    let _kv = b.kv_cache(&cfg, 8, KvType::F16).unwrap();
    let x = b.vector(&vec![1.5; d]).unwrap();
    let w = b.vector(&vec![2.0; d]).unwrap();
    let mut got = vec![0.0; d];
    {
        let mut out = b.buffer(d).unwrap();
        // plain, recorded (and replayed), replayed
        for _ in 0..3 {
            b.one_token_step(&mut |b| b.rms_norm(&x, &w, 1e-5, 1, &mut out)).unwrap();
        }
        assert!(b.step_ops() > 0, "the step was recorded");
        b.read(&out, &mut got).unwrap();
        assert!(got.iter().all(|&v| (v - 2.0).abs() < 1e-4), "{:?}", &got[..4]);
    }
    // the handle is gone: the memory stays the backend's, so a replay touches only live memory
    let mut other = b.buffer(d).unwrap();
    b.one_token_step(&mut |_| panic!("a recorded step replays, it does not call its ops again")).unwrap();
    b.read(&other, &mut got).unwrap();
    assert!(got.iter().all(|&v| v == 0.0), "the replay wrote only where it recorded");
    // a new KV cache drops the recording (it may reference the old context)
    let _kv2 = b.kv_cache(&cfg, 8, KvType::F16).unwrap();
    assert_eq!(b.step_ops(), 0, "replacing the cache drops the recording");
    let mut called = 0;
    b.one_token_step(&mut |b| {
        called += 1;
        b.rms_norm(&x, &w, 1e-5, 1, &mut other)
    })
    .unwrap();
    assert_eq!(called, 1, "without a recording the ops run (and are recorded)");
}

#[test]
fn step_inputs_are_bounded_by_the_cache_and_the_vocabulary() {
    let Some((model, mut b)) = setup("step_inputs_are_bounded_by_the_cache_and_the_vocabulary") else { return };
    let cfg = model.config().clone();
    let vocab = cfg.vocab_size as u32;
    assert!(err_text(b.step_inputs(&[1], 0)).contains("KV cache"), "inputs before a cache");
    let _kv = b.kv_cache(&cfg, 8, KvType::F16).unwrap();
    b.step_inputs(&[1], 7).unwrap();
    b.step_inputs(&[1; 8], 0).unwrap();
    // (no tokens still name a position, which a recorded one-token step would read)
    for (tokens, pos0) in [(vec![1], 8), (vec![1, 2], 7), (vec![1; 9], 0), (vec![1], usize::MAX), (vec![], 8)] {
        let e = err_text(b.step_inputs(&tokens, pos0));
        println!("{} tokens at {pos0}: {e}", tokens.len());
    }
    let e = err_text(b.step_inputs(&[vocab], 0));
    assert!(e.contains(&vocab.to_string()) && e.contains("vocabulary"), "{e}");
    b.step_inputs(&[vocab - 1], 0).unwrap();
}

#[test]
fn handles_and_weights_of_another_backend_are_refused() {
    let Some((model, mut a)) = setup("handles_and_weights_of_another_backend_are_refused") else { return };
    let mut b = Cuda::new(Arc::clone(model.file())).unwrap();
    let cfg = model.config().clone();
    let d = cfg.n_embd;
    let xa = a.vector(&vec![1.0; d]).unwrap();
    let xb = b.vector(&vec![1.0; d]).unwrap();
    let mut out_b = b.buffer(d).unwrap();
    let foreign = |e: rayo_llm::Error| assert!(matches!(e, rayo_llm::Error::Rayo(rayo::Error::ForeignBuffer { .. })), "{e}");
    foreign(b.rms_norm(&xa, &xb, 1e-5, 1, &mut out_b).unwrap_err());
    let wq = &model.weights().layers[0].wq;
    let w_a = a.weight(model.file(), wq).unwrap();
    let mut q = b.buffer(cfg.q_width()).unwrap();
    foreign(b.matmul(&w_a, &xb, 1, &mut q).unwrap_err());
    let mut kv_a = a.kv_cache(&cfg, 8, KvType::F16).unwrap();
    let _kv_b = b.kv_cache(&cfg, 8, KvType::F16).unwrap();
    b.step_inputs(&[1], 0).unwrap();
    let (mut qb, mut kb, vb, mut att) =
        (b.buffer(cfg.q_width()).unwrap(), b.buffer(cfg.kv_width()).unwrap(), b.buffer(cfg.kv_width()).unwrap(), b.buffer(cfg.q_width()).unwrap());
    foreign(b.rope_attention(&cfg, &mut kv_a, 0, (&mut qb, &mut kb, &vb), 1, 0, &mut att).unwrap_err());
}

#[test]
fn a_recording_refuses_allocations_reads_and_nesting() {
    let Some((model, mut b)) = setup("a_recording_refuses_allocations_reads_and_nesting") else { return };
    let cfg = model.config().clone();
    let d = cfg.n_embd;
    let _kv = b.kv_cache(&cfg, 8, KvType::F16).unwrap();
    let (x, w) = (b.vector(&vec![1.0; d]).unwrap(), b.vector(&vec![1.0; d]).unwrap());
    let mut out = b.buffer(d).unwrap();
    b.one_token_step(&mut |b| b.rms_norm(&x, &w, 1e-5, 1, &mut out)).unwrap();
    // recording now: an allocation is refused, and the recording with it
    let e = err_text(b.one_token_step(&mut |b| {
        b.rms_norm(&x, &w, 1e-5, 1, &mut out)?;
        b.buffer(16).map(drop)
    }));
    assert!(e.contains("records"), "{e}");
    assert_eq!(b.step_ops(), 0);
    // a host read inside a recording: an error from the driver, not a hang or a bad graph
    let mut host = vec![0.0; d];
    let r = b.one_token_step(&mut |b| b.read(&x, &mut host));
    println!("a read while recording: {r:?}");
    assert!(r.is_err());
    // a second recording inside the first
    let e = err_text(b.one_token_step(&mut |b| b.one_token_step(&mut |b| b.rms_norm(&x, &w, 1e-5, 1, &mut out))));
    assert!(e.contains("already recording"), "{e}");
    // and the backend still works: a good step records and replays
    for _ in 0..2 {
        b.one_token_step(&mut |b| b.rms_norm(&x, &w, 1e-5, 1, &mut out)).unwrap();
    }
    assert!(b.step_ops() > 0);
    b.read(&out, &mut host).unwrap();
    assert!(host.iter().all(|&v| (v - 1.0).abs() < 1e-4), "{:?}", &host[..4]);
}

#[test]
fn shapes_the_kernels_cannot_take_are_refused_before_upload() {
    let Some((model, b)) = setup("shapes_the_kernels_cannot_take_are_refused_before_upload") else { return };
    let cfg = model.config().clone();
    b.check_config(&cfg, 4096).unwrap();
    // the attention kernels take heads of 32 to 256 values in steps of 32, up to 10240 positions
    let wide_heads = rayo_llm::Config { head_dim: 512, n_rot: 512, ..cfg.clone() };
    let long = 1 << 20;
    let odd_width = rayo_llm::Config { n_ff: 1000, ..cfg.clone() };
    for (what, c, context) in [("head size 512", &wide_heads, 4096), ("2^20 positions", &cfg, long), ("a width of 1000", &odd_width, 4096)] {
        let e = err_text(b.check_config(c, context));
        println!("{what}: {e}");
        assert!(e.contains("--backend cpu"), "{what}: {e}");
    }
}
