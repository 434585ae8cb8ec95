//! `fire_and_wait_async`'s future.
//!
//! It is an async waiter on a trigger's [`Waiters`](crate::wait::Waiters). It resolves as
//! the blocking wait returns, without blocking.

use super::Counted;
use super::{Core, Runtime};
use crate::context::Outcome;
use crate::error::WaitError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The async side of a waiter. It has no deadline, since the caller adds one.
pub(crate) struct WaitFuture<R: Runtime> {
    core: Counted<Core<R>>,
    fired: u32,
    /// Its id among the waiters' wakers, once it has registered one.
    id: Option<u64>,
}

impl<R: Runtime> WaitFuture<R> {
    /// A waiter for the run serving the fire of version `fired`.
    pub(crate) fn new(core: Counted<Core<R>>, fired: u32) -> Self {
        Self {
            core,
            fired,
            id: None,
        }
    }
}

impl<R: Runtime> Drop for WaitFuture<R> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            self.core.waiters().forget(id);
        }
    }
}

impl<R: Runtime> Future for WaitFuture<R> {
    type Output = Result<Outcome, WaitError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.core
            .waiters()
            .poll_wait(this.fired, &mut this.id, cx.waker())
    }
}
