//! The HTTP/1 connections: the accept loop, and per connection the two limits that keep a slow
//! or idle client from holding a socket forever. A request's headers must arrive within
//! `header` of their first byte; a connection with no request in flight and no bytes moving is
//! closed after `idle`. (The body has its own limit, in the router: it is read there.)
//!
//! hyper's own `header_read_timeout` is not used: it counts from the moment a connection is ready
//! for its next request, so it would also close every idle keep-alive connection at the header
//! limit, and a load balancer that keeps connections open longer than that would reuse closed
//! ones. Here the two limits are separate.

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::response::Response;
use axum::Router;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tower_service::Service;

/// The connection limits (None: no limit).
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// From a request's first byte to the end of its headers.
    pub header: Option<Duration>,
    /// With no request in flight and no bytes read or written.
    pub idle: Option<Duration>,
}

/// What a connection is doing, as its socket and its requests show it.
#[derive(Debug)]
struct State {
    /// Requests called and whose response body has not ended.
    in_flight: usize,
    /// The last byte read or written (or the last response's end).
    last_io: Instant,
    /// When the first byte of a request whose headers are not all in yet arrived.
    head_since: Option<Instant>,
}

/// A connection's state, and a wake-up for its watchdog when a request's first byte moves
/// its deadline earlier.
struct Conn {
    state: Mutex<State>,
    head_started: tokio::sync::Notify,
}

type Shared = Arc<Conn>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, State> {
    s.state.lock().unwrap_or_else(|p| p.into_inner())
}

impl State {
    /// When the connection must be looked at next, and why it is over if that time has passed.
    fn deadline(&self, limits: Limits) -> (Option<Instant>, &'static str) {
        if self.in_flight > 0 {
            // a request runs: nothing to time here (the router times its body)
            return (None, "");
        }
        match self.head_since {
            Some(t) => (limits.header.map(|h| t + h), "the request's headers took too long"),
            None => (limits.idle.map(|i| self.last_io + i), "idle"),
        }
    }
}

/// The socket, with every byte read or written noted in the connection's state.
struct Watched {
    inner: TcpStream,
    state: Shared,
}

impl Watched {
    fn saw(&self, read: bool) {
        let mut s = lock(&self.state);
        let now = Instant::now();
        s.last_io = now;
        if read && s.in_flight == 0 && s.head_since.is_none() {
            s.head_since = Some(now);
            self.state.head_started.notify_one();
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.saw(true);
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, data);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.saw(false);
        }
        r
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.saw(false);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// A request in flight from its call to its response body's end (or drop).
struct InFlight(Shared);

impl InFlight {
    fn start(state: &Shared) -> InFlight {
        let mut s = lock(state);
        s.in_flight += 1;
        s.head_since = None;
        InFlight(Arc::clone(state))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = lock(&self.0);
        s.in_flight = s.in_flight.saturating_sub(1);
        s.last_io = Instant::now();
    }
}

/// A response body that holds its request's [`InFlight`] until it ends.
struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then stops accepting, lets every
/// connection finish the request it is on (idle ones close at once) and returns when all have
/// closed.
pub async fn serve(listener: TcpListener, app: Router, limits: Limits, shutdown: impl Future<Output = ()>) {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // every connection task holds a receiver: `closed()` resolves when the last one ends
    let (open_tx, open_rx) = tokio::sync::watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // out of file descriptors and the like: wait rather than spin
                    log::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (app, stop_rx, open_rx) = (app.clone(), stop_rx.clone(), open_rx.clone());
        tokio::spawn(async move {
            connection(stream, app, limits, stop_rx).await;
            log::debug!("connection from {peer} closed");
            drop(open_rx);
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(open_rx);
    open_tx.closed().await;
}

/// One connection, until the client closes it, a limit ends it, or the server stops.
async fn connection(stream: TcpStream, app: Router, limits: Limits, mut stop: tokio::sync::watch::Receiver<bool>) {
    let state: Shared = Arc::new(Conn {
        state: Mutex::new(State { in_flight: 0, last_io: Instant::now(), head_since: None }),
        head_started: tokio::sync::Notify::new(),
    });
    let io = TokioIo::new(Watched { inner: stream, state: Arc::clone(&state) });
    let service = {
        let state = Arc::clone(&state);
        hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
            let in_flight = InFlight::start(&state);
            let mut app = app.clone();
            async move {
                let resp: Response = match app.call(req.map(Body::new)).await {
                    Ok(r) => r,
                    Err(e) => match e {},
                };
                Ok::<_, Infallible>(resp.map(|body| Tracked { body, _in_flight: in_flight }))
            }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new().keep_alive(true).header_read_timeout(None).serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        let (deadline, _) = lock(&state).deadline(limits);
        // nothing to time while a request runs: look again after a while
        let wake = deadline.unwrap_or_else(|| Instant::now() + limits.idle.or(limits.header).unwrap_or(Duration::from_secs(3600)));
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    log::debug!("connection: {e}");
                }
                return;
            }
            // the server stops (or is gone): finish the request in flight, then close
            _ = stop.changed(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = state.head_started.notified() => {}
            _ = tokio::time::sleep_until(wake.into()) => {
                let (deadline, why) = lock(&state).deadline(limits);
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    log::debug!("closing a connection: {why}");
                    return;
                }
            }
        }
    }
}
