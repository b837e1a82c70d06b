//! The HTTP side: axum routes that speak the OpenAI API (JSON in, SSE out), the API key, the
//! body's size and time limits, one log line and one count per request. Owns nothing of the
//! model: requests are admitted ([`crate::admission`]), checked and tokenized here, then handed
//! to the scheduler.

use crate::admission::{self, check_ready};
use crate::api::{self, Endpoint, GenerateRequest, Input};
use crate::error::ApiError;
use crate::params;
use crate::scheduler::{Done, Event, Job, TokenLogprob};
use crate::sse::{self, Response as Chunks};
use crate::{ServeOptions, Shared};
use axum::body::{Body, BodyDataStream, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use futures_util::StreamExt;
use rayo_llm::chat::ChatTemplate;
use rayo_llm::Model;
use serde_json::json;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc::UnboundedReceiver;

/// What every handler sees.
#[derive(Clone)]
pub struct App {
    pub shared: Arc<Shared>,
    pub model: Arc<Model>,
    pub template: Option<Arc<ChatTemplate>>,
    pub jobs: SyncSender<Job>,
    pub opts: Arc<ServeOptions>,
}

/// Marks a response whose request the scheduler logs (at its end) instead of the router.
#[derive(Clone, Copy)]
struct LoggedByScheduler;

pub fn router(app: App) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/v1/health", get(health))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/apply-template", post(apply_template))
        .route("/v1/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .fallback(|req: Request| async move { ApiError::not_found(req.uri().path()) })
        .method_not_allowed_fallback(|req: Request| async move { ApiError::method_not_allowed(req.method().as_str(), req.uri().path()) })
        .layer(middleware::from_fn_with_state(app.clone(), around))
        .with_state(app)
}

/// The route label of a path in the metrics (a fixed set: no label per unknown path).
fn route_label(path: &str) -> &'static str {
    match path {
        "/health" | "/v1/health" => "/health",
        "/v1/models" => "/v1/models",
        "/metrics" => "/metrics",
        "/tokenize" => "/tokenize",
        "/detokenize" => "/detokenize",
        "/apply-template" => "/apply-template",
        "/v1/chat/completions" => "/v1/chat/completions",
        "/v1/completions" => "/v1/completions",
        _ => "other",
    }
}

/// Whether `headers` carry `key` (Authorization: Bearer, the scheme in any case, or X-Api-Key).
fn authorized(headers: &HeaderMap, key: &str) -> bool {
    let eq = |given: &str| given.len() == key.len() && given.bytes().zip(key.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .is_some_and(|(scheme, k)| scheme.eq_ignore_ascii_case("bearer") && eq(k.trim()));
    let x_key = headers.get("x-api-key").and_then(|v| v.to_str().ok()).is_some_and(|k| eq(k.trim()));
    bearer || x_key
}

/// Around every request: the API key (not on `/health`), the count by route and status, and
/// one log line (generation requests the scheduler accepted are logged by it, at their end).
async fn around(State(app): State<App>, req: Request, next: Next) -> Response {
    let t0 = Instant::now();
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    let route = route_label(&path);
    let resp = match &app.opts.api_key {
        Some(key) if route != "/health" && !authorized(req.headers(), key) => ApiError::unauthorized().into_response(),
        _ => next.run(req).await,
    };
    let status = resp.status().as_u16();
    app.shared.metrics.request(route, status);
    if resp.extensions().get::<LoggedByScheduler>().is_none() {
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        if status >= 500 {
            log::warn!("{method} {path} {status} {ms:.1} ms");
        } else {
            log::info!("{method} {path} {status} {ms:.1} ms");
        }
    }
    resp
}

/// The request's body: at most `--body-limit` bytes (else 413, before a byte is read when the
/// length is declared), all in within `--body-timeout` of the headers (else 408).
async fn read_body(app: &App, body: Body) -> Result<Bytes, ApiError> {
    let limit = app.opts.body_limit;
    let declared = body.size_hint().lower();
    let mut stream = body.into_data_stream();
    if declared > limit as u64 {
        discard(stream, app.opts.body_timeout);
        return Err(ApiError::too_large(declared, limit));
    }
    let got = AtomicUsize::new(0);
    let read = async {
        let mut buf = Vec::with_capacity(declared as usize);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?;
            if buf.len() + chunk.len() > limit {
                return Err(ApiError::too_large((buf.len() + chunk.len()) as u64, limit));
            }
            buf.extend_from_slice(&chunk);
            got.store(buf.len(), Ordering::Relaxed);
        }
        Ok(Bytes::from(buf))
    };
    let r = match app.opts.body_timeout {
        None => read.await,
        Some(t) => tokio::time::timeout(t, read).await.unwrap_or_else(|_| Err(ApiError::body_timeout(t, got.load(Ordering::Relaxed)))),
    };
    if r.as_ref().is_err_and(|e| e.status == StatusCode::PAYLOAD_TOO_LARGE) {
        discard(stream, app.opts.body_timeout);
    }
    r
}

/// Reads and drops the rest of a body refused as too large, in the background (64 MiB at most,
/// within the body's time limit), so that a client still sending it gets to read the 413 instead
/// of a reset connection (nginx's lingering close).
fn discard(mut stream: BodyDataStream, timeout: Option<Duration>) {
    tokio::spawn(async move {
        let mut left: usize = 64 << 20;
        let drain = async {
            while let Some(Ok(chunk)) = stream.next().await {
                left = left.saturating_sub(chunk.len());
                if left == 0 {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(timeout.unwrap_or(Duration::from_secs(30)), drain).await;
    });
}

async fn health(State(app): State<App>) -> Response {
    match check_ready(&app.shared) {
        Ok(()) => axum::Json(json!({"status": "ok"})).into_response(),
        Err(e) => e.into_response(),
    }
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

async fn models(State(app): State<App>) -> Response {
    let c = app.model.config();
    axum::Json(json!({"object": "list", "data": [{
        "id": app.opts.model_id, "object": "model", "created": now_s(), "owned_by": "rayo",
        "meta": {"n_vocab": c.vocab_size, "n_ctx_train": c.context_length, "n_ctx": app.shared.context()},
    }]}))
    .into_response()
}

async fn metrics(State(app): State<App>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], app.shared.metrics.render()).into_response()
}

async fn tokenize(State(app): State<App>, b: Body) -> Result<Response, ApiError> {
    let req = api::parse_tokenize(&read_body(&app, b).await?)?;
    tokio::task::spawn_blocking(move || tokenize_now(&app, &req)).await.map_err(|e| ApiError::internal(format!("tokenizing: {e}")))?
}

fn tokenize_now(app: &App, req: &api::TokenizeRequest) -> Result<Response, ApiError> {
    let tok = app.model.tokenizer();
    let ids = tok.encode(&req.content, req.add_special, true).map_err(|e| ApiError::field("content", e.to_string()))?;
    if !req.with_pieces {
        return Ok(axum::Json(json!({"tokens": ids})).into_response());
    }
    let pieces: Vec<_> = ids
        .iter()
        .map(|&id| {
            let b = tok.token_bytes(id).unwrap_or_default();
            match std::str::from_utf8(b) {
                Ok(s) => json!({"id": id, "piece": s}),
                Err(_) => json!({"id": id, "piece": b}),
            }
        })
        .collect();
    Ok(axum::Json(json!({"tokens": pieces})).into_response())
}

async fn detokenize(State(app): State<App>, b: Body) -> Result<Response, ApiError> {
    let ids = api::parse_detokenize(&read_body(&app, b).await?)?;
    let tok = app.model.tokenizer();
    if let Some(&bad) = ids.iter().find(|&&t| t as usize >= tok.vocab_size()) {
        return Err(ApiError::field("tokens", format!("token id {bad} is past the vocabulary of {}", tok.vocab_size())));
    }
    let text = tok.decode(&ids).map_err(|e| ApiError::field("tokens", e.to_string()))?;
    Ok(axum::Json(json!({"content": text})).into_response())
}

/// The prompt text a chat request's messages render to (llama-server's `/apply-template`).
async fn apply_template(State(app): State<App>, b: Body) -> Result<Response, ApiError> {
    let messages = api::parse_apply_template(&read_body(&app, b).await?)?;
    let t = app.template.as_ref().ok_or_else(|| ApiError::field("messages", "this model has no chat template (tokenizer.chat_template)"))?;
    let text = t.render(&messages, true).map_err(|e| ApiError::field("messages", e.to_string()))?;
    Ok(axum::Json(json!({"prompt": text})).into_response())
}

async fn chat(State(app): State<App>, b: Body) -> Result<Response, ApiError> {
    let b = read_body(&app, b).await?;
    generate(app, Endpoint::Chat, b).await
}

async fn completions(State(app): State<App>, b: Body) -> Result<Response, ApiError> {
    let b = read_body(&app, b).await?;
    generate(app, Endpoint::Completion, b).await
}

/// Request ids: a per-process counter after the start time, unique for the server's life.
fn request_id(endpoint: Endpoint) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let start = *START.get_or_init(|| SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64));
    let prefix = match endpoint {
        Endpoint::Chat => "chatcmpl",
        Endpoint::Completion => "cmpl",
    };
    format!("{prefix}-{start:x}{:06x}", N.fetch_add(1, Ordering::Relaxed))
}

/// The prompt's token ids (checked against the vocabulary and the context).
fn prompt_ids(app: &App, req: &GenerateRequest) -> Result<Vec<u32>, ApiError> {
    let tok = app.model.tokenizer();
    let (ids, param) = match &req.input {
        Input::Messages(m) => {
            let t = app
                .template
                .as_ref()
                .ok_or_else(|| ApiError::field("messages", "this model has no chat template (tokenizer.chat_template): use /v1/completions"))?;
            let text = t.render(m, true).map_err(|e| ApiError::field("messages", e.to_string()))?;
            (tok.encode(&text, true, true).map_err(|e| ApiError::field("messages", e.to_string()))?, "messages")
        }
        Input::Text(s) => (tok.encode(s, true, true).map_err(|e| ApiError::field("prompt", e.to_string()))?, "prompt"),
        Input::Tokens(ids) => {
            let vocab = app.model.config().vocab_size;
            if let Some(&bad) = ids.iter().find(|&&t| t as usize >= vocab) {
                return Err(ApiError::field("prompt", format!("token id {bad} is past the vocabulary of {vocab}")));
            }
            (ids.clone(), "prompt")
        }
    };
    if ids.is_empty() {
        return Err(ApiError::field(param, format!("'{param}' encodes to no tokens")));
    }
    let ctx = app.shared.context();
    if ids.len() > ctx {
        return Err(ApiError::context(
            param,
            format!("the prompt is {} tokens, longer than the context of {ctx} positions (--ctx sets it)", ids.len()),
        ));
    }
    Ok(ids)
}

/// The text `echo` puts before the completion: the prompt as given (token ids decoded).
fn echo_text(app: &App, req: &GenerateRequest, ids: &[u32]) -> Result<String, ApiError> {
    match &req.input {
        Input::Text(s) => Ok(s.clone()),
        _ => app.model.tokenizer().decode(ids).map_err(|e| ApiError::field("prompt", format!("'echo': the prompt's tokens do not decode: {e}"))),
    }
}

/// `/v1/chat/completions` and `/v1/completions`: admit, check, tokenize, queue, answer.
async fn generate(app: App, endpoint: Endpoint, body: Bytes) -> Result<Response, ApiError> {
    let received = Instant::now();
    check_ready(&app.shared)?;
    // A place in the queue before any work is done for the request: past the queue, 429 at once.
    let place = admission::reserve(&app.shared, app.opts.queue)?;
    let obj = api::object(&body)?;
    drop(body);
    params::refuse_unsupported(endpoint, &obj)?;
    let mut req = api::generate_request(endpoint, &obj)?;
    params::cap_max_tokens(&mut req, &obj, app.opts.max_tokens_limit)?;
    let unknown = params::unknown(endpoint, &obj);
    drop(obj);
    let vocab = app.model.config().vocab_size;
    if let Some(&(bad, _)) = req.sampling.logit_bias.iter().find(|&&(t, _)| t as usize >= vocab) {
        return Err(ApiError::field("logit_bias", format!("'logit_bias' names token {bad}, past the vocabulary of {vocab}")));
    }
    // Another model's name: this one answers (as llama-server and Ollama do; many clients send
    // a default name), unless --strict-model-name asks for vLLM's 404.
    let other_model = req.model.as_deref().filter(|m| !m.is_empty() && *m != app.opts.model_id).map(str::to_string);
    if let (Some(m), true) = (&other_model, app.opts.strict_model_name) {
        return Err(ApiError::model_not_found(m, &app.opts.model_id));
    }
    // Rendering and tokenizing a long prompt takes a while: off the async workers.
    let (prompt, echo) = {
        let (app, req) = (app.clone(), req.clone());
        tokio::task::spawn_blocking(move || {
            let ids = prompt_ids(&app, &req)?;
            let echo = if req.echo { Some(echo_text(&app, &req, &ids)?) } else { None };
            Ok::<_, ApiError>((ids, echo))
        })
        .await
        .map_err(|e| ApiError::internal(format!("tokenizing: {e}")))??
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let id = request_id(endpoint);
    if let Some(m) = &other_model {
        log::info!("{id}: the request names model {m:?}; {:?} answers it", app.opts.model_id);
    }
    if !unknown.is_empty() {
        log::warn!("{id}: fields this server does not know were ignored: {}", unknown.join(", "));
    }
    let prompt_tokens = prompt.len();
    let job = Job {
        id: id.clone(),
        endpoint,
        prompt,
        max_tokens: req.max_tokens,
        sampling: req.sampling.clone(),
        stop: req.stop.clone(),
        logprobs: req.logprobs,
        prompt_logprobs: req.echo && req.logprobs.is_some(),
        ignore_eos: req.ignore_eos,
        received,
        deadline: received + app.opts.timeout,
        events: tx,
    };
    match app.jobs.try_send(job) {
        Ok(()) => place.hand_over(),
        // (not expected: the channel holds as many as there are places)
        Err(TrySendError::Full(_)) => return Err(ApiError::queue_full(app.opts.queue)),
        Err(TrySendError::Disconnected(_)) => return Err(ApiError::unavailable("the engine has stopped")),
    }
    let ending = Ending { shared: Arc::clone(&app.shared), received, prompt_tokens, counted: false };
    let chunks = Chunks { endpoint, id, created: now_s(), model: app.opts.model_id.clone(), include_usage: req.include_usage };
    let logprobs_on = req.logprobs.is_some();
    let mut resp = if req.stream {
        stream(chunks, rx, logprobs_on, app.opts.keep_alive, echo, ending)
    } else {
        whole(chunks, rx, logprobs_on, echo, ending).await?
    };
    resp.extensions_mut().insert(LoggedByScheduler);
    Ok(resp)
}

/// Counts a generation request's end in the metrics: how it finished, or `cancelled` when its
/// response is dropped first (the client went away).
struct Ending {
    shared: Arc<Shared>,
    received: Instant,
    prompt_tokens: usize,
    counted: bool,
}

impl Ending {
    /// `reason`: one of [`crate::metrics::FINISH_REASONS`]; `generated`: when it ran to its end.
    fn count(&mut self, reason: &str, generated: Option<usize>) {
        if !std::mem::replace(&mut self.counted, true) {
            let tokens = generated.map(|g| (self.prompt_tokens, g));
            self.shared.metrics.finished(reason, self.received.elapsed().as_secs_f64(), tokens);
        }
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        self.count("cancelled", None);
    }
}

/// A non-streamed answer: every event collected, one JSON body.
async fn whole(
    chunks: Chunks,
    mut rx: UnboundedReceiver<Event>,
    logprobs_on: bool,
    echo: Option<String>,
    mut ending: Ending,
) -> Result<Response, ApiError> {
    let mut text = echo.unwrap_or_default();
    let mut lps: Vec<TokenLogprob> = Vec::new();
    loop {
        match rx.recv().await {
            Some(Event::Delta(d)) => {
                text += &d.text;
                lps.extend(d.logprobs);
            }
            Some(Event::Done(Done { finish, usage })) => {
                ending.count(finish.as_str(), Some(usage.completion_tokens));
                let body = chunks.body(&text, logprobs_on.then_some(&lps[..]), finish, &usage);
                return Ok(axum::Json(body).into_response());
            }
            Some(Event::Error(e)) => {
                ending.count("error", None);
                return Err(ApiError::internal(e));
            }
            None => {
                ending.count("error", None);
                return Err(ApiError::unavailable("the engine stopped before the request ended"));
            }
        }
    }
}

/// A streamed answer: SSE frames as events arrive, keep-alive comments while none do. When
/// the client goes away the body is dropped, and with it the receiver: the scheduler sees the
/// closed channel and frees the slot.
fn stream(
    chunks: Chunks,
    rx: UnboundedReceiver<Event>,
    logprobs_on: bool,
    keep_alive: std::time::Duration,
    echo: Option<String>,
    ending: Ending,
) -> Response {
    struct St {
        chunks: Chunks,
        rx: UnboundedReceiver<Event>,
        out: VecDeque<String>,
        done: bool,
        offset: usize,
        ending: Ending,
    }
    let mut out = VecDeque::new();
    out.extend(chunks.start());
    if let Some(e) = echo {
        out.push_back(chunks.delta(&e, &[], false, 0));
    }
    let st = St { chunks, rx, out, done: false, offset: 0, ending };
    let frames = futures_util::stream::unfold(st, move |mut st| async move {
        loop {
            if let Some(f) = st.out.pop_front() {
                return Some((Ok::<_, Infallible>(Bytes::from(f)), st));
            }
            if st.done {
                return None;
            }
            match tokio::time::timeout(keep_alive, st.rx.recv()).await {
                Err(_) => st.out.push_back(sse::KEEP_ALIVE.to_string()),
                Ok(Some(Event::Delta(d))) => {
                    st.out.push_back(st.chunks.delta(&d.text, &d.logprobs, logprobs_on, st.offset));
                    st.offset += d.logprobs.iter().map(|t| t.token.len()).sum::<usize>();
                }
                Ok(Some(Event::Done(Done { finish, usage }))) => {
                    st.ending.count(finish.as_str(), Some(usage.completion_tokens));
                    st.out.push_back(st.chunks.end(finish, &usage));
                    st.done = true;
                }
                Ok(Some(Event::Error(e))) => {
                    st.ending.count("error", None);
                    st.out.push_back(st.chunks.error(&e));
                    st.done = true;
                }
                Ok(None) => {
                    st.ending.count("error", None);
                    st.out.push_back(st.chunks.error("the engine stopped before the request ended"));
                    st.done = true;
                }
            }
        }
    });
    let mut resp = Response::new(Body::from_stream(frames));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_from_either_header() {
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, "k1"));
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer k1"));
        assert!(authorized(&h, "k1"));
        assert!(!authorized(&h, "k2"));
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static("k2"));
        assert!(authorized(&h, "k2"));
        assert!(!authorized(&h, "k"));
        // the scheme in any case (RFC 9110), the key exact
        for v in ["bearer k1", "BEARER k1", "Bearer  k1"] {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_static(v));
            assert!(authorized(&h, "k1"), "{v}");
        }
        for v in ["Bearer K1", "Basic k1", "Bearerk1", "k1"] {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_static(v));
            assert!(!authorized(&h, "k1"), "{v}");
        }
    }

    #[test]
    fn ids_are_unique_and_prefixed() {
        let a = request_id(Endpoint::Chat);
        let b = request_id(Endpoint::Chat);
        assert!(a.starts_with("chatcmpl-") && a != b);
        assert!(request_id(Endpoint::Completion).starts_with("cmpl-"));
    }
}
