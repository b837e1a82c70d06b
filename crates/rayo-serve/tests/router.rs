//! The router in process (no socket, no engine): 503 while loading and draining, /health open
//! without the key, 401 without it elsewhere, 400s in OpenAI's shape before anything is queued,
//! 429 when the queue is full, and before any prompt is tokenized. SmolLM2's tokenizer and template (skips with a `SKIP` line when
//! the file is absent; `RAYO_REQUIRE_SMOLLM2=1` fails instead).

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::smollm2;
use rayo_llm::chat::ChatTemplate;
use rayo_llm::Model;
use rayo_serve::router::{router, App};
use rayo_serve::{ServeOptions, Shared};
use std::sync::Arc;
use tower::ServiceExt;

/// (status, JSON body or text) of one request.
async fn call(r: &axum::Router, method: &str, path: &str, body: &str, key: Option<&str>) -> (StatusCode, serde_json::Value) {
    let mut b = Request::builder().method(method).uri(path).header("content-type", "application/json");
    if let Some(k) = key {
        b = b.header("authorization", format!("Bearer {k}"));
    }
    let resp = r.clone().oneshot(b.body(Body::from(body.to_string())).unwrap()).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap();
    let v = serde_json::from_slice(&bytes).unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    (status, v)
}

#[tokio::test]
async fn status_auth_validation_and_back_pressure() {
    let Some(path) = smollm2("rayo-serve router") else { return };
    let model = Arc::new(Model::open(&path).unwrap());
    let template = ChatTemplate::from_gguf(model.file().metadata()).unwrap().map(Arc::new);
    let shared = Arc::new(Shared::default());
    let (jobs, rx) = std::sync::mpsc::sync_channel(1);
    let opts = ServeOptions { model_id: "m".into(), api_key: Some("k".into()), queue: 1, ..ServeOptions::default() };
    let r = router(App { shared: Arc::clone(&shared), model, template, jobs, opts: Arc::new(opts) });
    let key = Some("k");
    let chat = r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}"#;

    // loading: /health and generation are 503, without and with the key
    assert_eq!(call(&r, "GET", "/health", "", None).await.0, StatusCode::SERVICE_UNAVAILABLE);
    let (s, v) = call(&r, "POST", "/v1/chat/completions", chat, key).await;
    assert_eq!((s, v["error"]["type"].as_str()), (StatusCode::SERVICE_UNAVAILABLE, Some("unavailable_error")), "{v}");
    shared.ready(64, 1);
    assert_eq!(call(&r, "GET", "/health", "", None).await.0, StatusCode::OK);

    // the key: everywhere but /health
    for (m, p) in [("GET", "/v1/models"), ("GET", "/metrics"), ("POST", "/v1/completions"), ("POST", "/tokenize")] {
        let (s, v) = call(&r, m, p, "{}", None).await;
        assert_eq!((s, v["error"]["type"].as_str()), (StatusCode::UNAUTHORIZED, Some("authentication_error")), "{p}: {v}");
    }
    let (s, v) = call(&r, "GET", "/v1/models", "", key).await;
    assert_eq!((s, v["data"][0]["id"].as_str()), (StatusCode::OK, Some("m")));

    // 400s before anything is queued
    let bad = [
        ("/v1/chat/completions", r#"{"messages": [{"role": "user", "content": "hi"}], "top_p": "x"}"#, Some("top_p")),
        ("/v1/completions", r#"{"prompt": [1, 999999]}"#, Some("prompt")),
        ("/v1/completions", &format!(r#"{{"prompt": "{}"}}"#, "word ".repeat(100)), Some("prompt")),
        ("/v1/completions", "{", None),
    ];
    for (p, body, param) in bad {
        let (s, v) = call(&r, "POST", p, body, key).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert_eq!(v["error"]["param"].as_str(), param, "{v}");
    }
    let (_, v) = call(&r, "POST", "/v1/completions", &format!(r#"{{"prompt": "{}"}}"#, "word ".repeat(100)), key).await;
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("the prompt is 101 tokens") && msg.contains("64 positions"), "{msg}");
    assert!(rx.try_recv().is_err(), "nothing was queued");

    // tokenize and detokenize
    let (s, v) = call(&r, "POST", "/tokenize", r#"{"content": "Hello world"}"#, key).await;
    assert_eq!(s, StatusCode::OK);
    let ids = v["tokens"].clone();
    let (_, v) = call(&r, "POST", "/detokenize", &serde_json::json!({ "tokens": ids }).to_string(), key).await;
    assert_eq!(v["content"], "Hello world");

    // the queue holds one (nothing takes from it here): the second is 429; when the engine
    // goes away, the first is answered 503
    let one = r#"{"prompt": "hi", "max_tokens": 1}"#;
    let first = tokio::spawn({
        let r = r.clone();
        async move { call(&r, "POST", "/v1/completions", one, Some("k")).await }
    });
    while shared.metrics.queued.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let (s, v) = call(&r, "POST", "/v1/completions", one, key).await;
    assert_eq!((s, v["error"]["type"].as_str()), (StatusCode::TOO_MANY_REQUESTS, Some("rate_limit_error")), "{v}");
    drop(rx);
    assert_eq!(first.await.unwrap().0, StatusCode::SERVICE_UNAVAILABLE);

    // draining: 503 again, /health included
    shared.drain();
    assert_eq!(call(&r, "GET", "/health", "", None).await.0, StatusCode::SERVICE_UNAVAILABLE);
    let (s, _) = call(&r, "POST", "/v1/chat/completions", chat, key).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
}

/// A burst of requests with 60 KB prompts against a queue of 2 that nothing empties: two are
/// queued, every other one is 429 at once. The context is 64 positions, so a prompt that had
/// been tokenized would be a 400 (too long): a 429 shows it was refused before that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_refused_before_any_tokenizing() {
    let Some(path) = smollm2("rayo-serve router: burst") else { return };
    let model = Arc::new(Model::open(&path).unwrap());
    let shared = Arc::new(Shared::default());
    shared.ready(64, 1);
    let (jobs, rx) = std::sync::mpsc::sync_channel(2);
    let opts = ServeOptions { model_id: "m".into(), queue: 2, ..ServeOptions::default() };
    let r = router(App { shared: Arc::clone(&shared), model, template: None, jobs, opts: Arc::new(opts) });
    // two that fit the context take the queue's places (they wait for an engine that never comes)
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let r = r.clone();
            tokio::spawn(async move { call(&r, "POST", "/v1/completions", r#"{"prompt": "hi", "max_tokens": 1}"#, None).await })
        })
        .collect();
    while shared.metrics.queued.load(std::sync::atomic::Ordering::SeqCst) < 2 {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let big = serde_json::json!({"prompt": "The quick brown fox jumps over the lazy dog. ".repeat(1400), "max_tokens": 4}).to_string();
    assert!(big.len() > 60_000);
    let t0 = std::time::Instant::now();
    let burst: Vec<_> = (0..300)
        .map(|_| {
            let (r, big) = (r.clone(), big.clone());
            tokio::spawn(async move { call(&r, "POST", "/v1/completions", &big, None).await })
        })
        .collect();
    for b in burst {
        let (s, v) = b.await.unwrap();
        assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{v}");
        assert!(v["error"]["message"].as_str().unwrap().contains("queue is full (2 requests"), "{v}");
    }
    let took = t0.elapsed();
    println!("300 requests of {} KB answered 429 in {took:?}", big.len() / 1000);
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
    assert_eq!(shared.metrics.queued.load(std::sync::atomic::Ordering::SeqCst), 2, "the burst took no place");
    // the engine goes away: the two waiting are answered, their places given back
    drop(rx);
    for w in waiting {
        assert_eq!(w.await.unwrap().0, StatusCode::SERVICE_UNAVAILABLE);
    }
}
