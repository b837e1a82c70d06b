//! The server runs a prompt in chunks of whatever size a step's token budget leaves, and a
//! request that shares a prefix with a slot's history runs only the rest: greedy output equals
//! `rayo generate`'s only if the CPU engine's logits do not depend on how a prompt is cut. This
//! checks that, bit for bit, on SmolLM2 (skips with a `SKIP` line when the file is absent;
//! `RAYO_REQUIRE_SMOLLM2=1` makes that a failure).

use rayo_llm::cpu::Cpu;
use rayo_llm::{BatchForward, Logits, Model, Session, SessionOptions, SessionPool, SlotWork};
use std::path::{Path, PathBuf};

fn smollm2(test: &str) -> Option<PathBuf> {
    let path = match std::env::var_os("RAYO_SMOLLM2") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    };
    if path.exists() {
        return Some(path);
    }
    let required = std::env::var_os("RAYO_REQUIRE_SMOLLM2").is_some_and(|v| v != "0");
    assert!(!required, "RAYO_REQUIRE_SMOLLM2 is set but {} is absent (scripts/fetch-smollm2.sh fetches it)", path.display());
    println!("SKIP {test}: {} is absent (scripts/fetch-smollm2.sh fetches it)", path.display());
    None
}

fn session(m: &Model, threads: usize) -> Session<Cpu> {
    Session::new(m, Cpu::new(m.file().clone(), threads), SessionOptions { context: 512, ..SessionOptions::default() }).unwrap()
}

fn first_diff(a: &[f32], b: &[f32]) -> Option<(usize, f32, f32)> {
    a.iter().zip(b).enumerate().find(|(_, (x, y))| x.to_bits() != y.to_bits()).map(|(i, (x, y))| (i, *x, *y))
}

#[test]
fn cpu_logits_do_not_depend_on_how_the_prompt_is_cut() {
    let Some(path) = smollm2("rayo-serve chunking") else { return };
    let m = Model::open(&path).unwrap();
    let text = "The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away, there lived a \
                king who had three daughters, each more curious than the last, and a garden full of";
    let ids = m.tokenizer().encode(text, true, true).unwrap();
    assert!(ids.len() > 40, "{}", ids.len());
    let mut whole = session(&m, 2);
    let want = whole.forward(&ids, Logits::Last).unwrap();
    // Chunks of 2 or more tokens (the scheduler never runs a prompt chunk of 1: see below).
    let cuts: &[&[usize]] = &[&[2], &[7], &[13, 2], &[ids.len() - 2], &[32], &[5, 17, 3], &[3, 2, 2, 2, 2]];
    for cut in cuts {
        let mut s = session(&m, 2);
        let mut at = 0;
        let mut got = Vec::new();
        for &c in cut.iter().cycle() {
            let end = (at + c).min(ids.len());
            got = s.forward(&ids[at..end], Logits::Last).unwrap();
            at = end;
            if at == ids.len() {
                break;
            }
        }
        if let Some((i, x, y)) = first_diff(&want, &got) {
            panic!("prompt of {} tokens cut in chunks of {cut:?}: logit {i} is {y} against {x} in one pass", ids.len());
        }
    }
    // A prompt whose last chunk is 1 token takes the decode path (`one_token_step`) for it, and
    // its logits differ from one pass (by about 0.4 here): recorded, not hidden, and the reason
    // `rayo_serve::scheduler::prefill_chunk` never cuts a 1-token chunk.
    let mut s = session(&m, 2);
    s.forward(&ids[..ids.len() - 1], Logits::Last).unwrap();
    let got = s.forward(&ids[ids.len() - 1..], Logits::Last).unwrap();
    let d = want.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    println!("note: the last prompt token run alone (the decode path): max |logit difference| {d:e} against one pass");
    // a pool step beside another slot's work, and 1 thread against 2
    let sessions: Vec<Box<dyn rayo_llm::Forward>> = vec![Box::new(session(&m, 2)), Box::new(session(&m, 2))];
    let mut pool = SessionPool::new(sessions).unwrap();
    pool.step(&[SlotWork { slot: 1, tokens: &ids[..9] }]).unwrap();
    let out = pool.step(&[SlotWork { slot: 1, tokens: &ids[9..11] }, SlotWork { slot: 0, tokens: &ids }]).unwrap();
    assert!(first_diff(&want, &out[1]).is_none(), "a pool slot's logits differ from a session's");
    let got = session(&m, 1).forward(&ids, Logits::Last).unwrap();
    if let Some((i, x, y)) = first_diff(&want, &got) {
        panic!("1 thread against 2: logit {i} is {y} against {x}");
    }
}
