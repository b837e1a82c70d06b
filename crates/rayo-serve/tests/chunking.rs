//! The server runs a prompt in chunks of whatever size a step's token budget leaves, and a
//! request that shares a prefix with a slot's history runs only the rest: greedy output equals
//! `rayo generate`'s only where the CPU engine's logits do not depend on the cut. They do, by
//! the class of a chunk's row count (1; 2 to 63; 64 or more: `rayo_serve::chunks`), and not
//! otherwise. This checks both, bit for bit, on SmolLM2, and that the scheduler's cuts give
//! one pass's logits (skips with a `SKIP` line when the file is absent; `RAYO_REQUIRE_SMOLLM2=1`
//! makes that a failure).

mod common;

use common::smollm2;
use rayo_llm::cpu::Cpu;
use rayo_llm::{BatchForward, Logits, Model, Session, SessionOptions, SessionPool, SlotWork};
use rayo_serve::chunks::ChunkRule;

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
    // A 42-token prompt (one pass: 2 to 63 rows) cut in chunks of 2 to 63 rows.
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
    // `rayo_serve::chunks::ChunkRule` never cuts a prompt token into a class `rayo generate`
    // does not run it in.
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

/// The scheduler's cut ([`ChunkRule`]) of prompts of both classes, from the start and after a
/// reused prefix, under many step budgets: the last logits bit-identical to one pass (as
/// `rayo generate` runs a prompt of up to 256 tokens).
#[test]
fn the_schedulers_cuts_give_one_passs_logits() {
    let Some(path) = smollm2("rayo-serve chunking: the scheduler's cuts") else { return };
    let m = Model::open(&path).unwrap();
    let rule = ChunkRule::default();
    let text = "The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away, there lived a \
                king who had three daughters, each more curious than the last, and a garden full of roses.";
    for reps in [1, 3] {
        let ids = m.tokenizer().encode(&vec![text; reps].join(" "), true, true).unwrap();
        let p = ids.len();
        let want = session(&m, 2).forward(&ids, Logits::Last).unwrap();
        for budget in [2, 7, 63, 64, 100] {
            for usable in [0, p / 3, p - 1] {
                let mut s = session(&m, 2);
                let start = rule.start(usable, p);
                // an earlier request with this prompt ran it all; this one keeps `start` tokens
                let mut at = 0;
                while at < p {
                    let n = rule.chunk(at, p, budget);
                    s.forward(&ids[at..at + n], Logits::Last).unwrap();
                    at += n;
                }
                s.rewind(start);
                at = start;
                let mut got = Vec::new();
                while at < p {
                    let n = rule.chunk(at, p, budget);
                    got = s.forward(&ids[at..at + n], Logits::Last).unwrap();
                    at += n;
                }
                if let Some((i, x, y)) = first_diff(&want, &got) {
                    panic!("{p} tokens, budget {budget}, from {start}: logit {i} is {y} against {x} in one pass");
                }
            }
        }
    }
}

/// The CPU `BatchSession` (the server's default engine) cut as the scheduler cuts, beside
/// another slot's decode rows in the same steps: the last logits equal one `Session` pass.
#[test]
fn a_batch_sessions_slot_beside_others_gives_one_passs_logits() {
    let Some(path) = smollm2("rayo-serve chunking: BatchSession") else { return };
    let m = Model::open(&path).unwrap();
    let rule = ChunkRule::default();
    let text = "The quick brown fox jumps over the lazy dog. Once upon a time, in a land far away, there lived a \
                king who had three daughters, each more curious than the last, and a garden full of roses.";
    for reps in [1, 3] {
        let ids = m.tokenizer().encode(&vec![text; reps].join(" "), true, true).unwrap();
        let p = ids.len();
        let want = session(&m, 2).forward(&ids, Logits::Last).unwrap();
        for budget in [7, 100] {
            let opts = rayo_llm::BatchOptions { slots: 2, context: 512, rows: 512, ..rayo_llm::BatchOptions::default() };
            let mut b = rayo_llm::BatchSession::new(&m, Cpu::new(m.file().clone(), 2), opts).unwrap();
            b.step(&[SlotWork { slot: 0, tokens: &ids[..5] }]).unwrap();
            let (mut at, mut got) = (0, Vec::new());
            while at < p {
                let n = rule.chunk(at, p, budget);
                let tok = [ids[at % 7]];
                let out = b.step(&[SlotWork { slot: 0, tokens: &tok }, SlotWork { slot: 1, tokens: &ids[at..at + n] }]).unwrap();
                got = out[1].clone();
                at += n;
            }
            if let Some((i, x, y)) = first_diff(&want, &got) {
                panic!("BatchSession, {p} tokens, budget {budget}: logit {i} is {y} against {x} in one Session pass");
            }
        }
    }
}
