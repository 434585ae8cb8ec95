//! The async fetch's state, lent to one fetch at a time. The refresher owns
//! the state; each fetch's future borrows it from a [`Lease`] that puts it
//! back when the future completes or is dropped, so a fetch cut short (by
//! `shutdown_now`, or its runtime shutting down) loses nothing, and the
//! next fetch starts from the state as the cut one left it.

use super::{Ended, FetchFuture, Latest, Pace};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

/// What a fetch borrows: the user's state and fetch, and the pace (whose
/// back-off state is per refresher, like the user's).
pub(super) struct Parts<S, F> {
    pub(super) state: S,
    fetch: F,
    pace: Pace,
}

/// The parts, in their slot between fetches. The lock is taken twice per
/// fetch and never contended: fetches never overlap (G1), and the slot is
/// refilled before the iteration that borrowed it ends.
pub(super) struct Lent<S, F>(Mutex<Option<Parts<S, F>>>);

impl<S, F> Lent<S, F> {
    pub(super) fn new(state: S, fetch: F, pace: Pace) -> Arc<Self> {
        Arc::new(Self(Mutex::new(Some(Parts { state, fetch, pace }))))
    }

    pub(super) fn slot(&self) -> std::sync::MutexGuard<'_, Option<Parts<S, F>>> {
        // Nothing user-written runs under the lock: poison is moot.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The parts on loan to one fetch; dropped, it puts them back.
struct Lease<S, F> {
    parts: Option<Parts<S, F>>,
    lent: Arc<Lent<S, F>>,
}

impl<S, F> Drop for Lease<S, F> {
    fn drop(&mut self) {
        let parts = self.parts.take();
        *self.lent.slot() = parts;
    }
}

/// One iteration of an async refresher: borrow the parts, run the fetch,
/// settle its outcome. Catches a panic in the fetch (building its future
/// or polling it) as a failure, as the blocking refresher does.
pub(super) async fn fetch_once<S, F, T, E>(
    lent: Arc<Lent<S, F>>,
    latest: Arc<Latest<T, E>>,
) -> Option<Duration>
where
    F: for<'s> FnMut(&'s mut S) -> FetchFuture<'s, T, E>,
{
    let parts = lent.slot().take();
    let mut lease = Lease { parts, lent };
    let fetching = latest.fetching();
    let Some(parts) = lease.parts.as_mut() else {
        // Only a future leaked while it held the lease (`mem::forget` by
        // an executor) leaves the slot empty: no fetch can run.
        let payload =
            Box::new("the async fetch's state was not given back: a fetch's future leaked");
        return latest.settle(
            Ended::Panic(payload),
            &mut Pace::new(Duration::MAX, None),
            fetching,
        );
    };
    let Parts { state, fetch, pace } = parts;
    // `state` moves into the closure (FnOnce): the future borrows it
    // for the whole fetch, not for the call.
    let build = move || {
        let state = state;
        fetch(state)
    };
    let ended = match catch_unwind(AssertUnwindSafe(build)) {
        Ok(future) => match (CatchUnwind { future }).await {
            Ok(Ok(value)) => Ended::Value(value, pace.every()),
            Ok(Err(error)) => Ended::Error(error),
            Err(payload) => Ended::Panic(payload),
        },
        Err(payload) => Ended::Panic(payload),
    };
    latest.settle(ended, pace, fetching)
}

/// Polls `future`, catching a panic as an `Err` with its payload.
struct CatchUnwind<Fut> {
    future: Fut,
}

impl<Fut: Future + Unpin> Future for CatchUnwind<Fut> {
    type Output = std::thread::Result<Fut::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let future = &mut self.future;
        match catch_unwind(AssertUnwindSafe(|| Pin::new(future).poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}
