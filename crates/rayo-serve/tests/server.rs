//! The whole server on a loopback socket (`rayo_serve::serve_on`), over raw TCP, with a fake
//! engine: clients that trickle their headers or their body, an idle keep-alive connection, a
//! request naming another model, `echo`, the request metrics, an engine step that fails (503 on
//! `/health` with the error, then exit or stay), and a second signal while draining. SmolLM2's
//! tokenizer (skips with a `SKIP` line when the file is absent; `RAYO_REQUIRE_SMOLLM2=1` fails
//! instead).

mod common;

use common::smollm2;
use rayo_llm::batch::check_work;
use rayo_llm::{BatchForward, Model, SlotWork};
use rayo_serve::{EngineFactory, OnEngineError, ServeOptions};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedSender;

/// Slots that always say the same token, each step taking `delay`; the `fail_at`-th step (from
/// 1) and every one after it fails, as a CUDA fault would.
struct Fake {
    pos: Vec<usize>,
    context: usize,
    vocab: usize,
    token: u32,
    delay: Duration,
    steps: usize,
    fail_at: Option<usize>,
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
        self.pos[slot] = self.pos[slot].min(pos);
    }
    fn step(&mut self, work: &[SlotWork]) -> rayo_llm::Result<Vec<Vec<f32>>> {
        check_work(work, self.pos.len(), self.context, self.vocab, |s| self.pos[s])?;
        self.steps += 1;
        if self.fail_at.is_some_and(|n| self.steps >= n) {
            return Err(rayo_llm::Error::Batch("injected fault: an illegal memory access was encountered".into()));
        }
        std::thread::sleep(self.delay);
        let mut out = Vec::new();
        for w in work {
            self.pos[w.slot] += w.tokens.len();
            let mut l = vec![0.0f32; self.vocab];
            // far above the rest: sampled or greedy, this token comes
            l[self.token as usize] = 100.0;
            out.push(l);
        }
        Ok(out)
    }
    fn backend_name(&self) -> &'static str {
        "fake"
    }
}

/// A running server: its address, its signals, and its end.
struct Server {
    addr: SocketAddr,
    signals: UnboundedSender<String>,
    end: tokio::task::JoinHandle<Result<(), String>>,
    /// The text of one fake token.
    piece: String,
}

/// Starts a server with `slots` slots of a fake engine (`delay` a step, failing from step
/// `fail_at`) and waits until `/health` is 200.
async fn start(path: &std::path::Path, opts: ServeOptions, slots: usize, delay: Duration, fail_at: Option<usize>) -> Server {
    let model = Arc::new(Model::open(path).unwrap());
    let tok = model.tokenizer();
    let token = tok.encode(" cat", false, false).unwrap()[0];
    let piece = tok.decode(&[token]).unwrap();
    let fake = Fake { pos: vec![0; slots], context: 4096, vocab: model.config().vocab_size, token, delay, steps: 0, fail_at };
    let factory: EngineFactory = Box::new(move || Ok(Box::new(fake) as Box<dyn BatchForward>));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (signals, rx) = tokio::sync::mpsc::unbounded_channel();
    let end = tokio::spawn(rayo_serve::serve_on(listener, ServeOptions { model_id: "served".into(), ..opts }, model, factory, rx));
    let deadline = Instant::now() + Duration::from_secs(5);
    while request(addr, "GET", "/health", "").await.0 != 200 {
        assert!(Instant::now() < deadline, "not ready after 5 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Server { addr, signals, end, piece }
}

/// One request on its own connection (`Connection: close`): the status and the body (a
/// chunked body's chunk sizes left in).
async fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let Ok(mut s) = TcpStream::connect(addr).await else { return (0, "refused".into()) };
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    if s.write_all(format!("{head}{body}").as_bytes()).await.is_err() {
        return (0, "closed".into());
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    parse(&out)
}

fn parse(raw: &[u8]) -> (u16, String) {
    let text = String::from_utf8_lossy(raw);
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string();
    (status, body)
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// Reads until the peer closes the connection; how long that took (None: not within `limit`).
async fn closed_within(s: &mut TcpStream, limit: Duration) -> Option<(Duration, Vec<u8>)> {
    let t0 = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(limit.saturating_sub(t0.elapsed()), s.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some((t0.elapsed(), got)),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_sent_a_byte_a_second_are_cut_off_at_the_limit() {
    let Some(path) = smollm2("rayo-serve server: slow headers") else { return };
    let opts = ServeOptions { header_timeout: Some(Duration::from_secs(1)), ..ServeOptions::default() };
    let srv = start(&path, opts, 1, Duration::ZERO, None).await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let head = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
    let (mut rd, mut wr) = s.split();
    let t0 = Instant::now();
    let writer = async {
        for &b in head {
            if wr.write_all(&[b]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    let mut got = Vec::new();
    let reader = async {
        let mut buf = [0u8; 256];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::select! {
        _ = reader => {}
        _ = writer => panic!("the whole head went through, a byte a second"),
    }
    let took = t0.elapsed();
    assert!(got.is_empty(), "an answer came: {}", String::from_utf8_lossy(&got));
    assert!(took >= Duration::from_millis(900) && took < Duration::from_millis(2500), "closed after {took:?}; the limit is 1 s");
    // the server still answers others
    assert_eq!(request(srv.addr, "GET", "/health", "").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed_and_a_busy_one_is_not() {
    let Some(path) = smollm2("rayo-serve server: idle") else { return };
    let opts = ServeOptions { idle_timeout: Some(Duration::from_millis(500)), ..ServeOptions::default() };
    let srv = start(&path, opts, 1, Duration::from_millis(50), None).await;
    // keep-alive: a request, its answer, then nothing
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
    let (took, rest) = closed_within(&mut s, Duration::from_secs(3)).await.expect("the idle connection stayed open");
    assert!(rest.is_empty() && took >= Duration::from_millis(400) && took < Duration::from_millis(1500), "closed after {took:?}");
    // a request that runs 20 steps of 50 ms without sending a byte is not idle
    let (status, body) = request(srv.addr, "POST", "/v1/completions", r#"{"prompt": "Hi", "max_tokens": 20, "temperature": 0}"#).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(json(&body)["usage"]["completion_tokens"], 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_too_slow_is_408_and_one_too_large_413() {
    let Some(path) = smollm2("rayo-serve server: slow body") else { return };
    let opts = ServeOptions { body_timeout: Some(Duration::from_secs(1)), body_limit: 1000, ..ServeOptions::default() };
    let srv = start(&path, opts, 1, Duration::ZERO, None).await;
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let t0 = Instant::now();
    s.write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\":").await.unwrap();
    let (took, got) = closed_within(&mut s, Duration::from_secs(4)).await.expect("no answer to a stalled body");
    let (status, body) = parse(&got);
    assert_eq!(status, 408, "{body}");
    assert!(body.contains("within 1 s (10 bytes came"), "{body}");
    assert!(took < Duration::from_millis(2000) && t0.elapsed() >= Duration::from_millis(900), "{took:?}");
    // a declared length over the limit: 413 with both numbers, before the body is sent
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    s.write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n\r\n").await.unwrap();
    let (_, got) = closed_within(&mut s, Duration::from_secs(2)).await.expect("no answer to a large body");
    let (status, body) = parse(&got);
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("5000000 bytes or more, over the limit of 1000 bytes"), "{body}");
    // a client that sends it all anyway reads the 413, not a reset connection
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let big = format!("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 32000000\r\n\r\n{}", "a".repeat(32_000_000));
    s.write_all(big.as_bytes()).await.expect("the body was taken in");
    let mut head = [0u8; 12];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 413");
    // and one without a declared length (chunked) is cut at the limit
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let chunk = "a".repeat(600);
    let msg = format!("POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n{chunk}\r\n258\r\n{chunk}\r\n0\r\n\r\n");
    s.write_all(msg.as_bytes()).await.unwrap();
    let (_, got) = closed_within(&mut s, Duration::from_secs(2)).await.expect("no answer to a large chunked body");
    let (status, body) = parse(&got);
    assert_eq!(status, 413, "{body}");
    assert!(body.contains("bytes or more, over the limit of 1000 bytes"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_models_name_echo_and_the_request_metrics() {
    let Some(path) = smollm2("rayo-serve server: model names") else { return };
    let srv = start(&path, ServeOptions::default(), 2, Duration::ZERO, None).await;
    let (status, body) = request(srv.addr, "POST", "/v1/completions", r#"{"model": "gpt-4", "prompt": "Hi", "max_tokens": 3}"#).await;
    assert_eq!(status, 200, "{body}");
    let v = json(&body);
    assert_eq!(v["model"], "served", "the model that answered");
    assert_eq!(v["choices"][0]["text"], srv.piece.repeat(3));
    // echo: the prompt first, streamed or not
    let (_, body) = request(srv.addr, "POST", "/v1/completions", r#"{"prompt": "Once upon", "max_tokens": 2, "echo": true}"#).await;
    assert_eq!(json(&body)["choices"][0]["text"], format!("Once upon{}", srv.piece.repeat(2)));
    let (_, body) = request(srv.addr, "POST", "/v1/completions", r#"{"prompt": "Once upon", "max_tokens": 2, "echo": true, "stream": true}"#).await;
    let first = body.lines().find(|l| l.starts_with("data: ")).unwrap();
    assert_eq!(json(&first[6..])["choices"][0]["text"], "Once upon", "{body}");
    // echo with logprobs and max_tokens 0: the prompt scored (the first token has nothing before it)
    let (status, body) =
        request(srv.addr, "POST", "/v1/completions", r#"{"prompt": "Once upon", "echo": true, "logprobs": 1, "max_tokens": 0}"#).await;
    assert_eq!(status, 200, "{body}");
    let c = &json(&body)["choices"][0];
    assert_eq!((c["text"].as_str(), c["finish_reason"].as_str()), (Some("Once upon"), Some("length")), "{body}");
    let lps = c["logprobs"]["token_logprobs"].as_array().unwrap();
    assert!(lps.len() >= 2 && lps[0].is_null() && lps[1..].iter().all(|l| l.as_f64().is_some_and(|l| l <= 0.0)), "{body}");
    // the request metrics: four ended with length, one never ran
    let (_, m) = request(srv.addr, "GET", "/metrics", "").await;
    for line in [
        "rayo_request_finished_total{finished_reason=\"length\"} 4\n",
        "rayo_request_finished_total{finished_reason=\"error\"} 0\n",
        "rayo_e2e_request_latency_seconds_count 4\n",
        "rayo_request_queue_time_seconds_count 4\n",
        "rayo_request_generation_tokens_sum 7\n",
        "rayo_request_prompt_tokens_count 4\n",
    ] {
        assert!(m.contains(line), "{line:?} is not in\n{m}");
    }
    // --strict-model-name: vLLM's 404
    let strict = start(&path, ServeOptions { strict_model_name: true, ..ServeOptions::default() }, 1, Duration::ZERO, None).await;
    let (status, body) = request(strict.addr, "POST", "/v1/completions", r#"{"model": "gpt-4", "prompt": "Hi", "max_tokens": 3}"#).await;
    assert_eq!(status, 404, "{body}");
    let e = &json(&body)["error"];
    assert_eq!((e["code"].as_str(), e["param"].as_str()), (Some("model_not_found"), Some("model")), "{body}");
    assert!(e["message"].as_str().unwrap().contains("\"served\""), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_fault_turns_health_to_503_and_the_server_exits_with_it() {
    let Some(path) = smollm2("rayo-serve server: engine fault, exit") else { return };
    let opts = ServeOptions { grace: Duration::from_secs(5), ..ServeOptions::default() };
    let srv = start(&path, opts, 2, Duration::ZERO, Some(3)).await;
    // a keep-alive connection left open does not hold the exit back
    let mut idle = TcpStream::connect(srv.addr).await.unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let t0 = Instant::now();
    let (status, body) = request(srv.addr, "POST", "/v1/completions", r#"{"prompt": "Hi", "max_tokens": 10}"#).await;
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("injected fault"), "{body}");
    let end = tokio::time::timeout(Duration::from_secs(3), srv.end).await.expect("the server did not exit").unwrap();
    let err = end.unwrap_err();
    assert!(err.contains("engine step failed") && err.contains("injected fault"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert!(closed_within(&mut idle, Duration::from_secs(1)).await.is_some(), "the kept-alive connection is closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_fault_with_stay_keeps_answering_503_with_the_error() {
    let Some(path) = smollm2("rayo-serve server: engine fault, stay") else { return };
    let opts = ServeOptions { on_engine_error: OnEngineError::Stay, ..ServeOptions::default() };
    let srv = start(&path, opts, 1, Duration::ZERO, Some(3)).await;
    let (status, _) = request(srv.addr, "POST", "/v1/completions", r#"{"prompt": "Hi", "max_tokens": 10, "stream": true}"#).await;
    assert_eq!(status, 200, "a stream's error comes inside it");
    let (status, body) = request(srv.addr, "GET", "/health", "").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("injected fault"), "{body}");
    let (status, body) = request(srv.addr, "POST", "/v1/chat/completions", r#"{"messages": [{"role": "user", "content": "Hi"}]}"#).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("takes no new requests") && body.contains("injected fault"), "{body}");
    let (_, m) = request(srv.addr, "GET", "/metrics", "").await;
    assert!(m.contains("rayo_engine_errors_total 1\n") && m.contains("rayo_request_finished_total{finished_reason=\"error\"} 1\n"), "{m}");
    // still up; a signal stops it, with the error
    srv.signals.send("SIGTERM".into()).unwrap();
    let end = tokio::time::timeout(Duration::from_secs(3), srv.end).await.expect("the server did not stop").unwrap();
    assert!(end.unwrap_err().contains("injected fault"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_while_draining_stops_at_once() {
    let Some(path) = smollm2("rayo-serve server: second signal") else { return };
    let opts = ServeOptions { grace: Duration::from_secs(60), ..ServeOptions::default() };
    let srv = start(&path, opts, 1, Duration::from_millis(20), None).await;
    // a stream of 2,000 tokens at 20 ms each: 40 s, far past this test
    let mut s = TcpStream::connect(srv.addr).await.unwrap();
    let body = r#"{"prompt": "Hi", "max_tokens": 2000, "stream": true, "ignore_eos": true}"#;
    let head = format!("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}", body.len());
    s.write_all(head.as_bytes()).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
    srv.signals.send("SIGTERM".into()).unwrap();
    // draining: new connections are refused, the stream goes on
    let deadline = Instant::now() + Duration::from_secs(2);
    while request(srv.addr, "GET", "/health", "").await.0 != 0 {
        assert!(Instant::now() < deadline, "still accepting 2 s after the signal");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(s.read(&mut buf).await.unwrap() > 0, "the stream goes on while draining");
    let t0 = Instant::now();
    srv.signals.send("SIGTERM".into()).unwrap();
    let end = tokio::time::timeout(Duration::from_secs(2), srv.end).await.expect("the second signal did not stop it").unwrap();
    let err = end.unwrap_err();
    assert!(err.contains("SIGTERM again while draining") && err.contains("cut off: 1 running"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
}
