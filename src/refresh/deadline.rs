//! An async fetch's deadline. The fetch races against a sleep on the
//! scheduler's clock. That is virtual time on a virtual scheduler, and
//! Tokio's timer otherwise.

use crate::scheduler::local::{parked_on_virtual_time, parks_on_virtual_time};
use crate::scheduler::VirtualSleep;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// `fetch`, or `None` once `timeout` has passed since its first poll.
pub(super) struct Deadline<Fut> {
    fetch: Fut,
    timeout: Duration,
    clock: Option<VirtualSleep>,
    /// Made at the first poll, inside the fetch's panic catch. Tokio's
    /// timer panics outside a runtime, and that panic is the fetch's.
    sleep: Option<Sleep>,
}

impl<Fut> Deadline<Fut> {
    pub(super) fn new(fetch: Fut, timeout: Duration, clock: Option<VirtualSleep>) -> Self {
        Self {
            fetch,
            timeout,
            clock,
            sleep: None,
        }
    }
}

impl<Fut: Future + Unpin> Future for Deadline<Fut> {
    type Output = Option<Fut::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        // Whether the job waits on virtual time is the fetch's to say. A
        // fetch waiting on I/O must not let the deadline's sleep tell
        // `advance` to move time without it.
        let (fetched, fetch_parked) = parks_on_virtual_time(|| Pin::new(&mut this.fetch).poll(cx));
        if let Poll::Ready(output) = fetched {
            return Poll::Ready(Some(output));
        }
        let (timeout, clock) = (this.timeout, &this.clock);
        let sleep = this.sleep.get_or_insert_with(|| match clock {
            Some(sleep) => sleep(timeout),
            None => Box::pin(tokio::time::sleep(timeout)),
        });
        let (slept, _) = parks_on_virtual_time(|| sleep.as_mut().poll(cx));
        if fetch_parked {
            parked_on_virtual_time();
        }
        match slept {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}
