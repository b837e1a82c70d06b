//! The scheduler against a fake engine that records every step: chunked prefill under the
//! token budget beside running decodes, a cancelled request gone within a step, prefix reuse,
//! stop strings, end-of-generation, max_tokens and a full context. The fake's next token is a
//! function of the slot's position, so the text is known. SmolLM2's tokenizer gives the text
//! (skips with a `SKIP` line when the file is absent; `RAYO_REQUIRE_SMOLLM2=1` fails instead).

mod common;

use common::smollm2;
use rayo_llm::batch::check_work;
use rayo_llm::{BatchForward, Model, SlotWork};
use rayo_serve::api::Sampling;
use rayo_serve::scheduler::{self, Event, Finish, Job, SchedulerOptions};
use rayo_serve::Shared;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the fake saw: each step's (slot, tokens) and each rewind (slot, position).
#[derive(Default)]
struct Record {
    steps: Vec<Vec<(usize, usize)>>,
    rewinds: Vec<(usize, usize)>,
}

/// Slots with positions and no model: after a slot's position `p` the next token is
/// `script[p % script.len()]`, or `eog` once position `eog_at` is reached by a prompt that
/// starts with `trigger`.
struct Fake {
    pos: Vec<usize>,
    first: Vec<Option<u32>>,
    context: usize,
    vocab: usize,
    script: Vec<u32>,
    trigger: u32,
    eog: u32,
    eog_at: usize,
    record: Arc<Mutex<Record>>,
    /// Each step takes this long (so a test can act between steps).
    delay: Duration,
}

impl BatchForward for Fake {
    fn slots(&self) -> usize {
        self.pos.len()
    }
    fn context(&self) -> usize {
        self.context
    }
    fn vocab(&self) -> usize {
        self.vocab
    }
    fn position(&self, slot: usize) -> usize {
        self.pos[slot]
    }
    fn rewind(&mut self, slot: usize, pos: usize) {
        self.record.lock().unwrap().rewinds.push((slot, pos));
        self.pos[slot] = self.pos[slot].min(pos);
    }
    fn step(&mut self, work: &[SlotWork]) -> rayo_llm::Result<Vec<Vec<f32>>> {
        check_work(work, self.pos.len(), self.context, self.vocab, |s| self.pos[s])?;
        std::thread::sleep(self.delay);
        self.record.lock().unwrap().steps.push(work.iter().map(|w| (w.slot, w.tokens.len())).collect());
        let mut out = Vec::new();
        for w in work {
            if self.pos[w.slot] == 0 {
                self.first[w.slot] = Some(w.tokens[0]);
            }
            self.pos[w.slot] += w.tokens.len();
            let p = self.pos[w.slot];
            let next = if self.first[w.slot] == Some(self.trigger) && p >= self.eog_at { self.eog } else { self.script[p % self.script.len()] };
            let mut l = vec![0.0f32; self.vocab];
            l[next as usize] = 1.0;
            out.push(l);
        }
        Ok(out)
    }
    fn backend_name(&self) -> &'static str {
        "fake"
    }
}

struct Harness {
    model: Arc<Model>,
    shared: Arc<Shared>,
    jobs: std::sync::mpsc::SyncSender<Job>,
    record: Arc<Mutex<Record>>,
    thread: Option<std::thread::JoinHandle<()>>,
    script: Vec<u32>,
}

impl Harness {
    fn new(path: &Path, slots: usize, context: usize, step_tokens: usize, delay: Duration) -> Harness {
        let model = Arc::new(Model::open(path).unwrap());
        let tok = model.tokenizer();
        let script = tok.encode(" the cat sat on the mat and the dog sat on the log", false, false).unwrap();
        let record = Arc::new(Mutex::new(Record::default()));
        let fake = Fake {
            pos: vec![0; slots],
            first: vec![None; slots],
            context,
            vocab: model.config().vocab_size,
            script: script.clone(),
            trigger: tok.encode("!", false, false).unwrap()[0],
            eog: tok.eos().unwrap(),
            eog_at: 10,
            record: Arc::clone(&record),
            delay,
        };
        let shared = Arc::new(Shared::default());
        let (jobs, rx) = std::sync::mpsc::sync_channel(16);
        let thread = {
            let (model, shared) = (Arc::clone(&model), Arc::clone(&shared));
            let factory: scheduler::EngineFactory = Box::new(move || Ok(Box::new(fake) as Box<dyn BatchForward>));
            std::thread::spawn(move || scheduler::run(factory, model, rx, shared, SchedulerOptions { step_tokens, ..Default::default() }))
        };
        Harness { model, shared, jobs, record, thread: Some(thread), script }
    }

    /// Queues a greedy request; returns its event channel.
    fn send(&self, prompt: Vec<u32>, max_tokens: Option<usize>, stop: &[&str]) -> tokio::sync::mpsc::UnboundedReceiver<Event> {
        self.send_within(prompt, max_tokens, stop, Duration::from_secs(60))
    }

    /// [`Harness::send`] with a time limit.
    fn send_within(
        &self,
        prompt: Vec<u32>,
        max_tokens: Option<usize>,
        stop: &[&str],
        limit: Duration,
    ) -> tokio::sync::mpsc::UnboundedReceiver<Event> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let now = Instant::now();
        let job = Job {
            id: "test".into(),
            endpoint: rayo_serve::api::Endpoint::Completion,
            prompt,
            max_tokens,
            sampling: Sampling { temperature: 0.0, ..Sampling::default() },
            stop: stop.iter().map(|s| s.to_string()).collect(),
            logprobs: None,
            prompt_logprobs: false,
            ignore_eos: false,
            received: now,
            deadline: now + limit,
            events: tx,
        };
        self.shared.metrics.queued.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.jobs.send(job).unwrap();
        rx
    }

    /// The text the fake generates after a prompt of `p` tokens, `n` tokens of it.
    fn script_text(&self, p: usize, n: usize) -> String {
        let ids: Vec<u32> = (p..p + n).map(|i| self.script[i % self.script.len()]).collect();
        self.model.tokenizer().decode(&ids).unwrap()
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.shared.request_stop();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// Every event of a request: its text, finish and usage (or its error).
fn collect(mut rx: tokio::sync::mpsc::UnboundedReceiver<Event>) -> (String, Result<scheduler::Done, String>) {
    let mut text = String::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        match rx.try_recv() {
            Ok(Event::Delta(d)) => text += &d.text,
            Ok(Event::Done(d)) => return (text, Ok(d)),
            Ok(Event::Error(e)) => return (text, Err(e)),
            Err(tokio::sync::mpsc::error::TryRecvError::Empty) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => return (text, Err(e.to_string())),
        }
    }
    panic!("no end after 30 s");
}

#[test]
fn prompts_are_chunked_under_the_budget_beside_running_decodes() {
    let Some(path) = smollm2("rayo-serve scheduler: chunked prefill") else { return };
    let h = Harness::new(&path, 2, 256, 8, Duration::from_millis(2));
    let a = h.send(vec![1, 2, 3], Some(40), &[]);
    // let the first request reach its decode steps
    std::thread::sleep(Duration::from_millis(20));
    let long: Vec<u32> = (100..140).collect();
    let b = h.send(long, Some(5), &[]);
    let (ta, da) = collect(a);
    let (tb, db) = collect(b);
    let (da, db) = (da.unwrap(), db.unwrap());
    assert_eq!((da.finish, da.usage.completion_tokens), (Finish::Length, 40));
    assert_eq!((db.finish, db.usage.completion_tokens, db.usage.prompt_tokens), (Finish::Length, 5, 40));
    assert_eq!(ta, h.script_text(3, 40));
    assert_eq!(tb, h.script_text(40, 5));
    let r = h.record.lock().unwrap();
    let mut prefill_steps = 0;
    for s in &r.steps {
        let total: usize = s.iter().map(|w| w.1).sum();
        assert!(total <= 8 + 1, "a step of {total} tokens over a budget of 8: {s:?}");
        if s.iter().any(|&(slot, n)| slot == 1 && n > 1) {
            prefill_steps += 1;
            assert!(s.contains(&(0, 1)), "slot 0's decode ran beside slot 1's prompt chunk: {s:?}");
        }
    }
    assert!(prefill_steps >= 5, "40 prompt tokens under a budget of 8 took {prefill_steps} steps");
}

#[test]
fn a_cancelled_request_frees_its_slot_within_a_step() {
    let Some(path) = smollm2("rayo-serve scheduler: cancel") else { return };
    let h = Harness::new(&path, 1, 256, 64, Duration::from_millis(5));
    let mut rx = h.send(vec![1, 2, 3], Some(200), &[]);
    while !matches!(rx.blocking_recv(), Some(Event::Delta(_))) {}
    drop(rx);
    let steps_then = h.record.lock().unwrap().steps.len();
    // the next request gets the only slot
    let (_, d) = collect(h.send(vec![5, 6, 7], Some(3), &[]));
    assert_eq!(d.unwrap().usage.completion_tokens, 3);
    let r = h.record.lock().unwrap();
    let more_for_first = r.steps[steps_then..].iter().take_while(|s| s.contains(&(0, 1)) && !s.iter().any(|w| w.1 > 1)).count();
    assert!(more_for_first <= 1, "the cancelled request ran {more_for_first} more steps");
    assert_eq!(h.shared.metrics.cancelled.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn a_shared_prefix_is_not_run_again() {
    let Some(path) = smollm2("rayo-serve scheduler: prefix reuse") else { return };
    let h = Harness::new(&path, 2, 256, 64, Duration::ZERO);
    let p: Vec<u32> = (200..230).collect();
    let (t1, d1) = collect(h.send(p.clone(), Some(4), &[]));
    let mut q = p.clone();
    q.extend([7, 8, 9]);
    let (t2, d2) = collect(h.send(q, Some(4), &[]));
    let (d1, d2) = (d1.unwrap(), d2.unwrap());
    assert_eq!(d1.usage.cached_tokens, 0);
    assert_eq!(d2.usage.cached_tokens, 30, "the first request's prompt is in slot 0");
    assert_eq!(t1, h.script_text(30, 4));
    assert_eq!(t2, h.script_text(33, 4));
    // the same prompt again: all but the last two tokens are reused (never a 1-token chunk)
    let (t3, d3) = collect(h.send(p, Some(4), &[]));
    assert_eq!(d3.unwrap().usage.cached_tokens, 28);
    assert_eq!(t3, t1);
    let r = h.record.lock().unwrap();
    assert!(r.rewinds.contains(&(0, 30)) && r.rewinds.contains(&(0, 28)), "{:?}", r.rewinds);
}

#[test]
fn stop_strings_end_of_generation_and_a_full_context() {
    let Some(path) = smollm2("rayo-serve scheduler: endings") else { return };
    let h = Harness::new(&path, 2, 32, 64, Duration::ZERO);
    // the script says " the cat sat on the mat and the dog ...": stop at " dog"
    let (t, d) = collect(h.send(vec![1, 2], Some(30), &[" dog"]));
    let full = h.script_text(2, 30);
    assert_eq!(t, full[..full.find(" dog").unwrap()]);
    assert_eq!(d.unwrap().finish, Finish::Stop);
    // a prompt that starts with the trigger gets end-of-generation at position 10
    let trigger = h.model.tokenizer().encode("!", false, false).unwrap()[0];
    let (_, d) = collect(h.send(vec![trigger, 5, 6, 7], None, &[]));
    let d = d.unwrap();
    assert_eq!((d.finish, d.usage.completion_tokens), (Finish::Stop, 6));
    // no max_tokens: up to the context's end (32 positions: 32 - 20 + 1 tokens)
    let (_, d) = collect(h.send((300..320).collect(), None, &[]));
    let d = d.unwrap();
    assert_eq!((d.finish, d.usage.completion_tokens), (Finish::Length, 13));
}

#[test]
fn a_request_past_its_time_limit_ends_with_length() {
    let Some(path) = smollm2("rayo-serve scheduler: time limit") else { return };
    let h = Harness::new(&path, 1, 256, 64, Duration::from_millis(10));
    let (t, d) = collect(h.send_within(vec![1, 2, 3], Some(200), &[], Duration::from_millis(100)));
    let d = d.unwrap();
    assert_eq!(d.finish, Finish::Length);
    assert!(d.usage.completion_tokens > 0 && d.usage.completion_tokens < 50, "{d:?}");
    assert_eq!(t, h.script_text(3, d.usage.completion_tokens));
    // the slot is free again
    let (_, d) = collect(h.send(vec![4, 5], Some(2), &[]));
    assert_eq!(d.unwrap().usage.completion_tokens, 2);
}
