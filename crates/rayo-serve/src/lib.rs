//! `rayo serve`: an OpenAI-compatible HTTP server over a [`rayo_llm::BatchForward`] engine.
//!
//! Three parts, each with one job: the router ([`router`]: axum, JSON in, SSE out, owns nothing
//! of the model), the scheduler ([`scheduler`]: one thread that owns the engine and runs one
//! step at a time over every active sequence, continuous batching with chunked prefill and
//! prefix reuse), and the engine, built on the scheduler's thread by a factory (an engine need
//! not be `Send`: CUDA graphs stay on the thread that recorded them). Requests reach the
//! scheduler through a bounded channel (full: 429) and tokens return through one channel per
//! request (closed: the request is cancelled and its slot freed).
//!
//! Against slow, huge and hostile clients: a connection's headers and idle time are limited
//! ([`http`]), a body's size and time too, and the queue's places are taken before any work is
//! done for a request ([`admission`]). An engine step that fails marks the server faulted:
//! `/health` and new requests answer 503 with the error, and by default the server drains and
//! returns the error (the process exits non-zero, for an orchestrator to restart it).

pub mod admission;
pub mod api;
pub mod chunks;
pub mod error;
pub mod fault;
pub mod http;
pub mod metrics;
pub mod params;
pub mod router;
pub mod sampling;
pub mod scheduler;
pub mod sse;
pub mod stop;

pub use scheduler::EngineFactory;

use metrics::Metrics;
use rayo_llm::chat::ChatTemplate;
use rayo_llm::Model;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the server runs (the command line's flags).
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub host: String,
    /// 0: any free port (the address is printed on stderr).
    pub port: u16,
    /// The name `/v1/models` gives the model, and every response's `model`.
    pub model_id: String,
    /// A request naming another model: 404 (vLLM's way) instead of an answer from this one.
    pub strict_model_name: bool,
    /// Required on every route but `/health` when set (Bearer or X-Api-Key).
    pub api_key: Option<String>,
    /// Requests that may wait for a slot (queued, or being read and tokenized); past it, 429.
    pub queue: usize,
    /// The largest request body; past it, 413.
    pub body_limit: usize,
    /// From a request's first byte to the end of its headers (then the connection is closed).
    pub header_timeout: Option<Duration>,
    /// From the end of a request's headers to the end of its body (then 408).
    pub body_timeout: Option<Duration>,
    /// How long a keep-alive connection with no request in flight stays open.
    pub idle_timeout: Option<Duration>,
    /// The most tokens a request may ask for (`max_tokens`; more is a 400); None: the context.
    pub max_tokens_limit: Option<usize>,
    /// A request's time limit from its arrival (then it ends with finish_reason `length`).
    pub timeout: Duration,
    /// After SIGINT/SIGTERM, how long running requests may take to finish.
    pub grace: Duration,
    /// SSE keep-alive comments while a streamed request has nothing to send.
    pub keep_alive: Duration,
    /// The most tokens one engine step runs (decode tokens, then prompt chunks).
    pub step_tokens: usize,
    /// What the server does when an engine step fails.
    pub on_engine_error: OnEngineError,
}

/// What the server does once an engine step has failed (a CUDA fault is sticky: every later
/// step would fail too). Either way `/health` and new requests answer 503 with the error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnEngineError {
    /// Drain (running requests get the grace period) and return the error: the process exits
    /// non-zero and an orchestrator restarts it.
    Exit,
    /// Stay up, unhealthy, until stopped (for a look at /metrics and the logs first).
    Stay,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            host: "127.0.0.1".into(),
            port: 8080,
            model_id: "model".into(),
            strict_model_name: false,
            api_key: None,
            queue: 64,
            body_limit: 4 << 20,
            header_timeout: Some(Duration::from_secs(10)),
            body_timeout: Some(Duration::from_secs(30)),
            idle_timeout: Some(Duration::from_secs(75)),
            max_tokens_limit: None,
            timeout: Duration::from_secs(600),
            grace: Duration::from_secs(30),
            keep_alive: Duration::from_secs(10),
            step_tokens: 256,
            on_engine_error: OnEngineError::Exit,
        }
    }
}

/// The server's state, shared by the router and the scheduler.
pub struct Shared {
    /// [`LOADING`], [`READY`], [`DRAINING`], [`FAILED`] or [`FAULTED`].
    status: AtomicU8,
    /// Positions per slot (known once the engine is built).
    context: AtomicUsize,
    failure: Mutex<Option<String>>,
    /// Set when the scheduler must end every request and return.
    stop: AtomicBool,
    /// Wakes the server when the engine could not be built.
    fatal: tokio::sync::Notify,
    /// Wakes the server when an engine step failed.
    faulted: tokio::sync::Notify,
    pub metrics: Metrics,
}

pub const LOADING: u8 = 0;
pub const READY: u8 = 1;
pub const DRAINING: u8 = 2;
pub const FAILED: u8 = 3;
/// An engine step failed: no new requests (sticky).
pub const FAULTED: u8 = 4;

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            status: AtomicU8::new(LOADING),
            context: AtomicUsize::new(0),
            failure: Mutex::new(None),
            stop: AtomicBool::new(false),
            fatal: tokio::sync::Notify::new(),
            faulted: tokio::sync::Notify::new(),
            metrics: Metrics::default(),
        }
    }
}

impl Shared {
    pub fn status(&self) -> u8 {
        self.status.load(Ordering::SeqCst)
    }

    pub fn context(&self) -> usize {
        self.context.load(Ordering::SeqCst)
    }

    /// The engine is built: `context` positions in each of `slots`.
    pub fn ready(&self, context: usize, slots: usize) {
        self.context.store(context, Ordering::SeqCst);
        self.metrics.slots.store(slots, Ordering::Relaxed);
        self.metrics.kv_capacity.store(slots * context, Ordering::Relaxed);
        let _ = self.status.compare_exchange(LOADING, READY, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The engine could not be built: the server stops.
    pub fn fail(&self, why: String) {
        log::error!("{why}");
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        self.status.store(FAILED, Ordering::SeqCst);
        self.fatal.notify_one();
    }

    /// An engine step failed (the scheduler's hook): `/health` and new requests answer 503 with
    /// `why` from now on, and the server acts as `--on-engine-error` says. The first fault's
    /// error is the one kept.
    pub fn fault(&self, why: String) {
        self.metrics.engine_errors.fetch_add(1, Ordering::Relaxed);
        if self.status.swap(FAULTED, Ordering::SeqCst) == FAULTED {
            return;
        }
        log::error!("{why}: the server takes no new requests");
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        self.faulted.notify_one();
    }

    /// The engine's error, if it failed to start or failed since.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Draining for shutdown: new requests get 503 (a failure's 503 stays).
    pub fn drain(&self) {
        let _ = self.status.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| (s != FAILED && s != FAULTED).then_some(DRAINING));
    }

    /// Tells the scheduler to end every request and return (the server does this after the
    /// grace period).
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// Runs the server until SIGINT or SIGTERM (then drains: no new requests, running ones get
/// `opts.grace` to finish) and returns; a second signal while it drains returns at once, with an
/// error. `factory` builds the engine on the scheduler's thread; `/health` answers 503 until it
/// has. Errors: the address cannot be bound, the engine cannot be built or failed (see
/// [`OnEngineError`]), a second signal.
pub fn serve(opts: ServeOptions, model: Arc<Model>, factory: EngineFactory) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("rayo-http")
        .enable_all()
        .build()
        .map_err(|e| format!("the async runtime: {e}"))?;
    let result = rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind((opts.host.as_str(), opts.port))
            .await
            .map_err(|e| format!("cannot listen on {}:{}: {e}", opts.host, opts.port))?;
        let (tx, signals) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(forward_signals(tx));
        serve_on(listener, opts, model, factory, signals).await
    });
    // After a second signal the scheduler may still be mid-step: not waited for.
    rt.shutdown_background();
    result
}

/// [`serve`] on a bound listener; `signals` carries the names of the signals that stop it (the
/// first drains, a second returns at once). For tests and for a caller with its own signals.
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    opts: ServeOptions,
    model: Arc<Model>,
    factory: EngineFactory,
    mut signals: tokio::sync::mpsc::UnboundedReceiver<String>,
) -> Result<(), String> {
    let template = ChatTemplate::from_gguf(model.file().metadata()).map_err(|e| e.to_string())?.map(Arc::new);
    if template.is_none() {
        log::warn!("the model has no chat template: /v1/chat/completions will answer 400");
    }
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    eprintln!("rayo serve: listening on http://{addr} (model {:?}); /health is 503 until the model is loaded", opts.model_id);
    let shared = Arc::new(Shared::default());
    let (jobs, rx) = std::sync::mpsc::sync_channel(opts.queue.max(1));
    let sched = {
        let (model, shared) = (Arc::clone(&model), Arc::clone(&shared));
        let sopts = scheduler::SchedulerOptions { step_tokens: opts.step_tokens.max(2), ..Default::default() };
        std::thread::Builder::new()
            .name("rayo-scheduler".into())
            .spawn(move || {
                // A bug in the scheduler must not leave a server that answers 200 to /health
                // and 503 to everything else: it stops the server (exit 1).
                let s = Arc::clone(&shared);
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scheduler::run(factory, model, rx, s, sopts))).is_err() {
                    shared.fail("the scheduler panicked (see above); stopping".into());
                }
            })
            .map_err(|e| format!("cannot start the scheduler thread: {e}"))?
    };
    let (grace, on_engine_error) = (opts.grace, opts.on_engine_error);
    let limits = http::Limits { header: opts.header_timeout, idle: opts.idle_timeout };
    let app = router::router(router::App { shared: Arc::clone(&shared), model, template, jobs, opts: Arc::new(opts) });
    let (drain_tx, mut drain_rx) = tokio::sync::watch::channel(false);
    let server = http::serve(listener, app, limits, async move {
        let _ = drain_rx.wait_for(|d| *d).await;
    });
    let mut server = std::pin::pin!(server);
    // Serving, until a signal or a failure starts the drain.
    let mut closed = false;
    tokio::select! {
        () = &mut server => closed = true,
        s = next_signal(&mut signals) => log::warn!("{s}: draining (no new requests; running ones have {} s)", grace.as_secs_f64()),
        _ = shared.fatal.notified() => {}
        _ = shared.faulted.notified(), if on_engine_error == OnEngineError::Exit => {
            log::error!("the engine failed: draining (running requests have {} s), then exiting with the error", grace.as_secs_f64());
        }
    }
    shared.drain();
    let _ = drain_tx.send(true);
    // Draining, until every connection has closed, the grace period is over, or a second signal.
    if !closed {
        tokio::select! {
            () = &mut server => {}
            _ = tokio::time::sleep(grace) => log::warn!("the grace period is over: ending the requests still running"),
            s = next_signal(&mut signals) => {
                shared.request_stop();
                let m = &shared.metrics;
                let (running, queued) = (m.active_slots.load(Ordering::Relaxed), m.queued.load(Ordering::Relaxed));
                return Err(format!("{s} again while draining: stopped at once (cut off: {running} running, {queued} queued)"));
            }
        }
    }
    shared.request_stop();
    let _ = tokio::task::spawn_blocking(move || sched.join()).await;
    // The streams just ended by the scheduler get a moment to send their last event.
    tokio::time::sleep(Duration::from_millis(200)).await;
    match shared.failure() {
        Some(f) => Err(f),
        None => {
            eprintln!("rayo serve: stopped");
            Ok(())
        }
    }
}

/// The next signal's name; never, once no more can come.
async fn next_signal(signals: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    match signals.recv().await {
        Some(s) => s,
        None => std::future::pending().await,
    }
}

/// Sends the name of each SIGINT or SIGTERM that comes, until the receiver is gone.
async fn forward_signals(tx: tokio::sync::mpsc::UnboundedSender<String>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
            log::error!("cannot listen for SIGINT and SIGTERM: the server stops only when killed");
            return;
        };
        loop {
            let s = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            if tx.send(s.into()).is_err() {
                return;
            }
        }
    }
    #[cfg(not(unix))]
    while tokio::signal::ctrl_c().await.is_ok() {
        if tx.send("Ctrl-C".into()).is_err() {
            return;
        }
    }
}
