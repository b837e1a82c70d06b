//! `rayo serve`: an OpenAI-compatible HTTP server over a [`rayo_llm::BatchForward`] engine.
//!
//! Three parts, each with one job: the router ([`router`]: axum, JSON in, SSE out, owns nothing
//! of the model), the scheduler ([`scheduler`]: one thread that owns the engine and runs one
//! step at a time over every active sequence, continuous batching with chunked prefill and
//! prefix reuse), and the engine, built on the scheduler's thread by a factory (an engine need
//! not be `Send`: CUDA graphs stay on the thread that recorded them). Requests reach the
//! scheduler through a bounded channel (full: 429) and tokens return through one channel per
//! request (closed: the request is cancelled and its slot freed).

pub mod api;
pub mod chunks;
pub mod error;
pub mod metrics;
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
    /// The name `/v1/models` gives the model (requests may name it, or leave `model` out).
    pub model_id: String,
    /// Required on every route but `/health` when set (Bearer or X-Api-Key).
    pub api_key: Option<String>,
    /// Requests that may wait for a slot; past it, 429.
    pub queue: usize,
    /// The largest request body; past it, 413.
    pub body_limit: usize,
    /// A request's time limit from its arrival (then it ends with finish_reason `length`).
    pub timeout: Duration,
    /// After SIGINT/SIGTERM, how long running requests may take to finish.
    pub grace: Duration,
    /// SSE keep-alive comments while a streamed request has nothing to send.
    pub keep_alive: Duration,
    /// The most tokens one engine step runs (decode tokens, then prompt chunks).
    pub step_tokens: usize,
}

impl Default for ServeOptions {
    fn default() -> ServeOptions {
        ServeOptions {
            host: "127.0.0.1".into(),
            port: 8080,
            model_id: "model".into(),
            api_key: None,
            queue: 64,
            body_limit: 4 << 20,
            timeout: Duration::from_secs(600),
            grace: Duration::from_secs(30),
            keep_alive: Duration::from_secs(10),
            step_tokens: 256,
        }
    }
}

/// The server's state, shared by the router and the scheduler.
pub struct Shared {
    /// [`LOADING`], [`READY`], [`DRAINING`] or [`FAILED`].
    status: AtomicU8,
    /// Positions per slot (known once the engine is built).
    context: AtomicUsize,
    failure: Mutex<Option<String>>,
    /// Set when the scheduler must end every request and return.
    stop: AtomicBool,
    /// Wakes the server when the engine could not be built.
    fatal: tokio::sync::Notify,
    pub metrics: Metrics,
}

pub const LOADING: u8 = 0;
pub const READY: u8 = 1;
pub const DRAINING: u8 = 2;
pub const FAILED: u8 = 3;

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            status: AtomicU8::new(LOADING),
            context: AtomicUsize::new(0),
            failure: Mutex::new(None),
            stop: AtomicBool::new(false),
            fatal: tokio::sync::Notify::new(),
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

    /// Draining for shutdown: new requests get 503.
    pub fn drain(&self) {
        if self.status() != FAILED {
            self.status.store(DRAINING, Ordering::SeqCst);
        }
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
/// `opts.grace` to finish) and returns. `factory` builds the engine on the scheduler's thread;
/// `/health` answers 503 until it has. Errors: the address cannot be bound, the engine cannot be
/// built.
pub fn serve(opts: ServeOptions, model: Arc<Model>, factory: EngineFactory) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("rayo-http")
        .enable_all()
        .build()
        .map_err(|e| format!("the async runtime: {e}"))?;
    rt.block_on(run(opts, model, factory))
}

async fn run(opts: ServeOptions, model: Arc<Model>, factory: EngineFactory) -> Result<(), String> {
    let template = ChatTemplate::from_gguf(model.file().metadata()).map_err(|e| e.to_string())?.map(Arc::new);
    if template.is_none() {
        log::warn!("the model has no chat template: /v1/chat/completions will answer 400");
    }
    let listener = tokio::net::TcpListener::bind((opts.host.as_str(), opts.port))
        .await
        .map_err(|e| format!("cannot listen on {}:{}: {e}", opts.host, opts.port))?;
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
    let grace = opts.grace;
    let app = router::router(router::App { shared: Arc::clone(&shared), model, template, jobs, opts: Arc::new(opts) });
    let (drain_tx, mut drain_rx) = tokio::sync::watch::channel(false);
    let signal = {
        let shared = Arc::clone(&shared);
        async move {
            tokio::select! {
                s = shutdown_signal() => log::warn!("{s}: draining (no new requests; running ones have {} s)", grace.as_secs_f64()),
                _ = shared.fatal.notified() => {}
            }
            shared.drain();
            let _ = drain_tx.send(true);
        }
    };
    let server = axum::serve(listener, app).with_graceful_shutdown(signal);
    let deadline = async move {
        if drain_rx.wait_for(|d| *d).await.is_err() {
            std::future::pending::<()>().await;
        }
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        r = server => r.map_err(|e| format!("the server: {e}"))?,
        _ = deadline => log::warn!("the grace period is over: ending the requests still running"),
    }
    shared.request_stop();
    let _ = tokio::task::spawn_blocking(move || sched.join()).await;
    // The streams just ended by the scheduler get a moment to send their last event.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let failure = shared.failure.lock().unwrap_or_else(|p| p.into_inner()).take();
    match failure {
        Some(f) => Err(f),
        None => {
            eprintln!("rayo serve: stopped");
            Ok(())
        }
    }
}

/// SIGINT (Ctrl-C) or SIGTERM: which one came.
async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            return "SIGINT";
        };
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = tokio::signal::ctrl_c() => "SIGINT",
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}
