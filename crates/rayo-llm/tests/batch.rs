//! Many sequences in one step ([`BatchSession`]) against each sequence alone ([`Session`]) on
//! the CPU: every slot's logits are the same bits whether it runs alone or beside others, its
//! prompt and decode rows mixed with theirs in any order (batch invariance: a server's
//! requests get what `rayo generate` gives them). On SmolLM2 Q4_1 and on Qwen2.5-Coder-0.5B
//! (Q5_0, Q8_0, Q6_K and Q4_K products); each skips with a line when its file is absent.
//! Also the checks of a step's work.

mod llama_ref;

use rayo_llm::cpu::Cpu;
use rayo_llm::{BatchForward, BatchOptions, BatchSession, KvType, Logits, Model, Session, SessionOptions, SlotWork};
use std::path::Path;

/// Three prompts of different lengths (token ids below 1000, in both vocabularies).
fn prompts() -> Vec<Vec<u32>> {
    let ids = |n: u32, seed: u32| (0..n).map(|i| (i * 97 + seed * 31 + 7) % 1000).collect::<Vec<u32>>();
    vec![ids(5, 1), ids(19, 2), ids(11, 3)]
}

/// The logits after each prompt alone, then after each of `decode` greedy tokens: one session
/// per prompt, the prompt in one batch.
fn alone(model: &Model, prompt: &[u32], decode: usize) -> (Vec<Vec<f32>>, Vec<u32>) {
    let opts = SessionOptions { context: 64, kv_type: KvType::F16, batch: 64, logit_rows: 1 };
    let mut s = Session::new(model, Cpu::new(model.file().clone(), 2), opts).unwrap();
    let mut logits = vec![s.forward(prompt, Logits::Last).unwrap()];
    let mut drawn = Vec::new();
    for _ in 0..decode {
        let next = argmax(logits.last().unwrap());
        drawn.push(next);
        logits.push(s.forward(&[next], Logits::Last).unwrap());
    }
    (logits, drawn)
}

fn argmax(l: &[f32]) -> u32 {
    llama_ref::top2(l).0 as u32
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Slots 3, 0 and 1 run prompts 0, 1 and 2: prompt 0 alone, then prompt 1 beside prompt 0's
/// decoding, prompt 2 beside both, every slot decoding until each has drawn `DECODE` tokens;
/// every logit vector equals the one the sequence gets alone.
fn interleaved_equals_alone(path: &Path, what: &str) {
    const DECODE: usize = 4;
    let model = Model::open(path).unwrap();
    let ps = prompts();
    let want: Vec<_> = ps.iter().map(|p| alone(&model, p, DECODE)).collect();
    let opts = BatchOptions { slots: 4, context: 64, kv_type: KvType::F16, rows: 64 };
    let mut b = BatchSession::new(&model, Cpu::new(model.file().clone(), 2), opts).unwrap();
    let slot = [3, 0, 1];
    // per prompt: the step at which its prompt runs; then it decodes one token per step
    let start = [0, 1, 2];
    let mut got: Vec<Vec<Vec<f32>>> = vec![Vec::new(); 3];
    for step in 0..start[2] + DECODE + 1 {
        let mut inputs: Vec<(usize, Vec<u32>)> = Vec::new();
        for p in 0..3 {
            if step == start[p] {
                inputs.push((p, ps[p].clone()));
            } else if step > start[p] && got[p].len() <= DECODE {
                inputs.push((p, vec![want[p].1[got[p].len() - 1]]));
            }
        }
        // on odd steps the newest prompt first (its rows from 0, the decode rows after), on even
        // steps last (a prompt copied out of the middle rows for its attention)
        if step % 2 == 1 {
            inputs.reverse();
        }
        let work: Vec<SlotWork> = inputs.iter().map(|(p, t)| SlotWork { slot: slot[*p], tokens: t }).collect();
        for ((p, _), l) in inputs.iter().zip(b.step(&work).unwrap()) {
            got[*p].push(l);
        }
    }
    for p in 0..3 {
        assert_eq!(got[p].len(), DECODE + 1, "{what}: prompt {p}");
        for (i, (g, w)) in got[p].iter().zip(&want[p].0).enumerate() {
            assert!(bits(g) == bits(w), "{what}: prompt {p}, logits {i} differ from the sequence alone (argmax {} vs {})", argmax(g), argmax(w));
        }
        assert_eq!(b.position(slot[p]), ps[p].len() + DECODE, "{what}: prompt {p}");
    }
    println!("{what}: 3 sequences interleaved, {} logit vectors bit-identical to each alone", 3 * (DECODE + 1));
}

/// Six sequences, each prompt in a step of its own, then decoding together (six one-token rows
/// a step, in slots of the reverse order): every logit vector equals the one the sequence gets
/// alone.
fn decoding_together_equals_alone(path: &Path, what: &str) {
    const DECODE: usize = 3;
    let model = Model::open(path).unwrap();
    let ps: Vec<Vec<u32>> = (0..6u32).map(|s| (0..2 + s * 3).map(|i| (i * 89 + s * 37 + 5) % 1000).collect()).collect();
    let want: Vec<_> = ps.iter().map(|p| alone(&model, p, DECODE)).collect();
    let opts = BatchOptions { slots: 6, context: 64, kv_type: KvType::F16, rows: 64 };
    let mut b = BatchSession::new(&model, Cpu::new(model.file().clone(), 2), opts).unwrap();
    let mut got: Vec<Vec<Vec<f32>>> = ps.iter().enumerate().map(|(p, t)| b.step(&[SlotWork { slot: 5 - p, tokens: t }]).unwrap()).collect();
    for d in 0..DECODE {
        let next: Vec<[u32; 1]> = (0..6).map(|p| [want[p].1[d]]).collect();
        let work: Vec<SlotWork> = (0..6).map(|p| SlotWork { slot: 5 - p, tokens: &next[p] }).collect();
        for (p, l) in b.step(&work).unwrap().into_iter().enumerate() {
            got[p].push(l);
        }
    }
    for p in 0..6 {
        for (i, (g, w)) in got[p].iter().zip(&want[p].0).enumerate() {
            assert!(bits(g) == bits(w), "{what}: sequence {p}, logits {i} differ from the sequence alone");
        }
    }
    println!("{what}: 6 sequences decoding together, {} logit vectors bit-identical to each alone", 6 * (DECODE + 1));
}

#[test]
fn smollm2_sequences_decoding_together_equal_each_alone() {
    let Some(path) = llama_ref::smollm2("smollm2_sequences_decoding_together_equal_each_alone") else { return };
    decoding_together_equals_alone(&path, "SmolLM2 Q4_1");
}

#[test]
fn smollm2_sequences_in_one_step_equal_each_alone() {
    let Some(path) = llama_ref::smollm2("smollm2_sequences_in_one_step_equal_each_alone") else { return };
    interleaved_equals_alone(&path, "SmolLM2 Q4_1");
}

#[test]
fn qwen2_sequences_in_one_step_equal_each_alone() {
    let Some(path) = llama_ref::qwen2("qwen2_sequences_in_one_step_equal_each_alone") else { return };
    interleaved_equals_alone(&path, "Qwen2.5-Coder-0.5B");
}

/// Gemma 3 270M (post-norms, GELU, per-layer RoPE bases and windows): the same bits batched.
#[test]
fn gemma3_sequences_in_one_step_equal_each_alone() {
    let Some(path) = llama_ref::GEMMA3_MODEL.path("gemma3_sequences_in_one_step_equal_each_alone") else { return };
    interleaved_equals_alone(&path, "Gemma 3 270M");
    decoding_together_equals_alone(&path, "Gemma 3 270M");
}

#[test]
fn a_steps_work_is_checked_and_a_slot_rewinds() {
    let Some(path) = llama_ref::smollm2("a_steps_work_is_checked_and_a_slot_rewinds") else { return };
    let model = Model::open(&path).unwrap();
    let opts = BatchOptions { slots: 2, context: 16, kv_type: KvType::F16, rows: 8 };
    let mut b = BatchSession::new(&model, Cpu::new(model.file().clone(), 1), opts).unwrap();
    let err = |b: &mut BatchSession<Cpu>, work: &[SlotWork]| b.step(work).unwrap_err().to_string();
    assert!(err(&mut b, &[SlotWork { slot: 0, tokens: &[1; 9] }]).contains("a step of 9 tokens, past the 8"));
    assert!(err(&mut b, &[SlotWork { slot: 2, tokens: &[1] }]).contains("slot 2 named, the batch has 2 slots"));
    assert!(err(&mut b, &[SlotWork { slot: 1, tokens: &[49152] }]).contains("past the vocabulary"));
    assert_eq!((b.position(0), b.position(1)), (0, 0), "nothing ran");
    let first = b.step(&[SlotWork { slot: 1, tokens: &[1, 2, 3] }]).unwrap();
    b.step(&[SlotWork { slot: 1, tokens: &[4, 5] }]).unwrap();
    assert_eq!(b.position(1), 5);
    // back to position 2: the third token again gives the same logits
    b.rewind(1, 2);
    let again = b.step(&[SlotWork { slot: 1, tokens: &[3] }]).unwrap();
    assert_eq!(bits(&again[0]), bits(&first[0]));
    assert!(err(&mut b, &[SlotWork { slot: 0, tokens: &[1; 8] }, SlotWork { slot: 1, tokens: &[1; 8] }]).contains("a step of 16 tokens"));
    // a context of 16: 14 more tokens do not fit slot 1 at position 3
    assert!(err(&mut b, &[SlotWork { slot: 1, tokens: &[1; 14] }]).contains("do not fit"));
}

/// A prompt's logits row by row ([`BatchForward::prompt_logits`], passes of as many rows as
/// there are slots) against a session's `Logits::All` over the same prompt in one batch: the
/// same argmax at every position and logits within the prompt arithmetic's rounding; the slot's
/// position moves past the prompt, and a decode step after it gives the session's next logits.
#[test]
fn smollm2_prompt_logits_are_a_sessions_every_row() {
    let Some(path) = llama_ref::smollm2("smollm2_prompt_logits_are_a_sessions_every_row") else { return };
    let model = Model::open(&path).unwrap();
    let prompt = &prompts()[1];
    let vocab = model.config().vocab_size;
    let opts = SessionOptions { context: 64, kv_type: KvType::F16, batch: 64, logit_rows: 64 };
    let mut s = Session::new(&model, Cpu::new(model.file().clone(), 2), opts).unwrap();
    let all = s.forward(prompt, Logits::All).unwrap();
    let opts = BatchOptions { slots: 4, context: 64, kv_type: KvType::F16, rows: 64 };
    let mut b = BatchSession::new(&model, Cpu::new(model.file().clone(), 2), opts).unwrap();
    let rows = b.prompt_logits(2, prompt).unwrap();
    assert_eq!(rows.len(), prompt.len());
    assert_eq!(b.position(2), prompt.len());
    for (i, (got, want)) in rows.iter().zip(all.chunks_exact(vocab)).enumerate() {
        assert_eq!(argmax(got), argmax(want), "position {i}");
        let worst = got.iter().zip(want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 0.05, "position {i}: a logit {worst} away from the session's");
    }
    // the cache holds the prompt: the next token's logits follow on
    let next = argmax(&rows[prompt.len() - 1]);
    let after = b.step(&[SlotWork { slot: 2, tokens: &[next] }]).unwrap();
    let want = s.forward(&[next], Logits::Last).unwrap();
    assert_eq!(argmax(&after[0]), argmax(&want));
    // the work is checked: a slot out of range, tokens past the vocabulary
    assert!(b.prompt_logits(4, &[1]).is_err());
    assert!(b.prompt_logits(0, &[vocab as u32]).is_err());
}
