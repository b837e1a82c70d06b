//! Admission: the cheap checks a generation request passes before any work is done for it (its
//! JSON read, its chat template rendered, its prompt tokenized): the engine is up, and the queue
//! has a place. A burst past the queue is answered 429 at the cost of an atomic add each.

use crate::error::ApiError;
use crate::{Shared, DRAINING, FAILED, FAULTED, LOADING};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// 503 unless the engine is ready (the message says why, with the engine's error if it failed).
pub fn check_ready(shared: &Shared) -> Result<(), ApiError> {
    match shared.status() {
        LOADING => Err(ApiError::unavailable("the model is loading")),
        DRAINING => Err(ApiError::unavailable("the server is shutting down")),
        FAILED => Err(ApiError::unavailable(format!("the engine failed to start: {}", shared.failure().unwrap_or_default()))),
        FAULTED => Err(ApiError::unavailable(format!(
            "the engine failed and takes no new requests (the server needs a restart): {}",
            shared.failure().unwrap_or_default()
        ))),
        _ => Ok(()),
    }
}

/// A place in the queue, held from admission until the scheduler takes the request (it counts
/// the place off `metrics.queued` then) or, if the request never gets that far, until dropped.
pub struct Place {
    shared: Option<Arc<Shared>>,
}

/// Takes a place if fewer than `capacity` requests are queued or being prepared; else 429.
pub fn reserve(shared: &Arc<Shared>, capacity: usize) -> Result<Place, ApiError> {
    let queued = &shared.metrics.queued;
    match queued.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |q| (q < capacity).then_some(q + 1)) {
        Ok(_) => Ok(Place { shared: Some(Arc::clone(shared)) }),
        Err(_) => Err(ApiError::queue_full(capacity)),
    }
}

impl Place {
    /// The request is in the scheduler's channel: from now on the scheduler counts it.
    pub fn hand_over(mut self) {
        self.shared = None;
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(s) = self.shared.take() {
            s.metrics.queued.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_counted_and_given_back() {
        let shared = Arc::new(Shared::default());
        let a = reserve(&shared, 2).unwrap();
        let b = reserve(&shared, 2).unwrap();
        let e = reserve(&shared, 2).err().unwrap();
        assert_eq!(e.status.as_u16(), 429);
        assert!(e.message.contains("(2 requests"), "{}", e.message);
        drop(a);
        assert_eq!(shared.metrics.queued.load(Ordering::SeqCst), 1);
        // handed over: the scheduler takes it off the count, not the drop
        b.hand_over();
        assert_eq!(shared.metrics.queued.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_fault_is_named() {
        let shared = Shared::default();
        shared.ready(64, 1);
        assert!(check_ready(&shared).is_ok());
        shared.fault("engine step failed: CUDA error 700".into());
        let e = check_ready(&shared).unwrap_err();
        assert_eq!(e.status.as_u16(), 503);
        assert!(e.message.contains("CUDA error 700"), "{}", e.message);
        // draining after a fault keeps the fault's message
        shared.drain();
        assert!(check_ready(&shared).unwrap_err().message.contains("CUDA error 700"));
    }
}
