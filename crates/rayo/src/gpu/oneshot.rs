//! A one-value channel whose receiver is a future: how wgpu's callbacks (buffer mapped, work
//! done) wake an `async fn`, on native and in a browser alike. No executor dependency.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

struct Slot<T> {
    value: Option<T>,
    /// The sender was dropped without sending.
    closed: bool,
    waker: Option<Waker>,
}

pub(crate) struct Sender<T>(Arc<Mutex<Slot<T>>>);
pub(crate) struct Receiver<T>(Arc<Mutex<Slot<T>>>);

pub(crate) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let s = Arc::new(Mutex::new(Slot { value: None, closed: false, waker: None }));
    (Sender(s.clone()), Receiver(s))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T> Sender<T> {
    pub fn send(self, v: T) {
        let w = {
            let mut s = lock(&self.0);
            s.value = Some(v);
            s.waker.take()
        };
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let w = {
            let mut s = lock(&self.0);
            s.closed = true;
            s.waker.take()
        };
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// Whether awaiting would complete now (a value was sent, or the sender is gone).
    #[cfg_attr(target_arch = "wasm32", allow(dead_code))]
    pub fn is_ready(&self) -> bool {
        let s = lock(&self.0);
        s.value.is_some() || s.closed
    }
}

/// Resolves to `Some(value)`, or `None` if the sender was dropped unsent.
impl<T> Future for Receiver<T> {
    type Output = Option<T>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = lock(&self.0);
        if let Some(v) = s.value.take() {
            return Poll::Ready(Some(v));
        }
        if s.closed {
            return Poll::Ready(None);
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
