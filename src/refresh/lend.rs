//! The async fetch's state, lent to one fetch at a time. The refresher owns
//! the state. Each fetch's future borrows it from a [`Lease`] that puts it
//! back when the future completes or is dropped. So a fetch cut short by
//! `shutdown_now`, or by its runtime shutting down, loses nothing. The next
//! fetch starts from the state as the cut one left it.

use super::deadline::Deadline;
use super::{Course, Ended, FetchFuture, Fetched, Latest, Pace, Validator};
use crate::scheduler::VirtualSleep;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

/// What a fetch borrows. It holds the user's state and fetch, and the
/// fetch-side course with the back-off and the validator. The course is per
/// refresher, like the user's state.
pub(super) struct Parts<S, F> {
    pub(super) state: S,
    fetch: F,
    course: Course,
}

/// The parts, in their slot between fetches. The lock is taken twice per
/// fetch and never contended. Fetches never overlap, by guarantee G1, and
/// the slot is refilled before the iteration that borrowed it ends.
pub(super) struct Lent<S, F>(Mutex<Option<Parts<S, F>>>);

impl<S, F> Lent<S, F> {
    pub(super) fn new(state: S, fetch: F, course: Course) -> Arc<Self> {
        Arc::new(Self(Mutex::new(Some(Parts {
            state,
            fetch,
            course,
        }))))
    }

    pub(super) fn slot(&self) -> std::sync::MutexGuard<'_, Option<Parts<S, F>>> {
        // Nothing user-written runs under the lock, so poison is moot.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The parts on loan to one fetch. Dropping it puts them back.
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

/// One iteration of an async refresher. It borrows the parts, runs the fetch
/// against its deadline if it has one, and settles its outcome. It catches a
/// panic in the fetch as a failure, as the blocking refresher does. The
/// panic may come from building the fetch's future or from polling it.
pub(super) async fn fetch_once<S, F, T, E>(
    lent: Arc<Lent<S, F>>,
    latest: Arc<Latest<T, E>>,
    clock: Option<VirtualSleep>,
) -> Option<Duration>
where
    F: for<'s> FnMut(&'s mut S, Option<Validator>) -> FetchFuture<'s, Fetched<T>, E>,
{
    let parts = lent.slot().take();
    let mut lease = Lease { parts, lent };
    let Some(parts) = lease.parts.as_mut() else {
        // Only a future leaked while it held the lease leaves the slot
        // empty, as an executor's `mem::forget` would. Then no fetch can run.
        let payload =
            Box::new("the async fetch's state was not given back: a fetch's future leaked");
        return latest.settle(
            Ended::Panic(payload),
            &mut Course::new(Pace::new(Duration::MAX, None), None),
            latest.fetching(),
        );
    };
    let Parts {
        state,
        fetch,
        course,
    } = parts;
    if let Some(wait) = latest.held_back(course) {
        return Some(wait);
    }
    if let Some(wait) = latest.over_budget(course) {
        return Some(wait);
    }
    let fetching = latest.fetching();
    let validator = latest.validator_for(course);
    // `state` moves into the `FnOnce` closure, so the future borrows it
    // for the whole fetch, not for the call.
    let build = move || {
        let state = state;
        fetch(state, validator)
    };
    let ended = match (catch_unwind(AssertUnwindSafe(build)), course.timeout) {
        (Ok(future), None) => ended(CatchUnwind { future }.await),
        (Ok(future), Some(timeout)) => {
            let future = Deadline::new(future, timeout, clock);
            match (CatchUnwind { future }).await {
                Ok(Some(output)) => ended(Ok(output)),
                Ok(None) => Ended::TimedOut,
                Err(payload) => Ended::Panic(payload),
            }
        }
        (Err(payload), _) => Ended::Panic(payload),
    };
    latest.settle(ended, course, fetching)
}

/// How a fetch's future ended.
fn ended<T, E>(polled: std::thread::Result<Result<Fetched<T>, E>>) -> Ended<T, E> {
    match polled {
        Ok(Ok(answer)) => Ended::Answered(answer),
        Ok(Err(error)) => Ended::Error(error),
        Err(payload) => Ended::Panic(payload),
    }
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
