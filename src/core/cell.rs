//! The task cell: what the holder of RUNNING alone touches — the task,
//! sync or async, with the back-off of a retry policy if it has one.
//!
//! # Ground rules
//!
//! Only the holder of the RUNNING bit calls into a [`TaskCell`] (see the
//! invariant on `Core::task`); the cell itself is plain single-threaded
//! code.

use crate::async_task::{AsyncBody, AsyncTask, TaskFuture};
use crate::jitter::RetryBackoff;
use crate::policy::PanicPolicy;
use crate::task::Task;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// What the RUNNING holder alone touches: the task, with the back-off of a
/// [`PanicPolicy::Retry`](crate::PanicPolicy::Retry) if it has one.
pub(crate) struct TaskCell {
    body: Box<dyn Body>,
}

/// A task that runs on the worker, or one whose iterations are futures,
/// with or without a retry back-off: one trait object, so a trigger pays
/// one fat pointer for any of them.
trait Body: Send {
    /// Calls the task, catching a panic.
    fn call(&mut self) -> Called;

    /// After an iteration's result: the delay before the next attempt if
    /// it panicked under a retry policy (which a normal return resets).
    fn settle(&mut self, _result: &std::thread::Result<Option<Duration>>) -> Option<Duration> {
        None
    }
}

/// A task under [`PanicPolicy::Retry`](crate::PanicPolicy::Retry): the
/// back-off lives beside it, in the same allocation.
struct Retrying<B> {
    body: B,
    backoff: RetryBackoff,
}

impl<B: Body> Body for Retrying<B> {
    fn call(&mut self) -> Called {
        self.body.call()
    }

    fn settle(&mut self, result: &std::thread::Result<Option<Duration>>) -> Option<Duration> {
        match result {
            Ok(_) => {
                self.backoff.reset();
                None
            }
            Err(_) => {
                let next = self.backoff.failed();
                if next.is_none() {
                    // Out of retries: the trigger stops until fired again,
                    // and that fire starts a fresh round of retries.
                    self.backoff.reset();
                }
                next
            }
        }
    }
}

/// A sync task.
struct SyncBody<T>(T);

impl<T: Task> Body for SyncBody<T> {
    fn call(&mut self) -> Called {
        Called::Returned(catch_unwind(AssertUnwindSafe(|| self.0.run())))
    }
}

impl<A: AsyncTask> Body for AsyncBody<A> {
    fn call(&mut self) -> Called {
        match catch_unwind(AssertUnwindSafe(|| self.task.start())) {
            Ok(future) => Called::Started(future),
            Err(payload) => Called::Returned(Err(payload)),
        }
    }
}

/// What calling the task gave.
pub(super) enum Called {
    /// A sync task returned (or panicked).
    Returned(std::thread::Result<Option<Duration>>),
    /// An async task returned this iteration's future, to spawn on its
    /// executor.
    Started(TaskFuture),
}

impl TaskCell {
    pub(crate) fn new<T: Task>(task: T, on_panic: PanicPolicy) -> Self {
        Self::with_body(SyncBody(task), on_panic)
    }

    #[cfg_attr(not(any(feature = "tokio", loom)), allow(dead_code))]
    pub(crate) fn new_async<A: AsyncTask>(body: AsyncBody<A>, on_panic: PanicPolicy) -> Self {
        Self::with_body(body, on_panic)
    }

    fn with_body<B: Body + 'static>(body: B, on_panic: PanicPolicy) -> Self {
        let body: Box<dyn Body> = match on_panic {
            PanicPolicy::Stop => Box::new(body),
            PanicPolicy::Retry(backoff) => Box::new(Retrying { body, backoff }),
        };
        Self { body }
    }

    /// Calls the task, catching a panic.
    pub(super) fn call(&mut self) -> Called {
        self.body.call()
    }

    /// After an iteration's result: the delay before the next attempt if
    /// it panicked under a retry policy (which a normal return resets).
    pub(super) fn settle(
        &mut self,
        result: &std::thread::Result<Option<Duration>>,
    ) -> Option<Duration> {
        self.body.settle(result)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::policy::Policies;

    #[test]
    fn async_support_costs_a_sync_trigger_no_bytes() {
        // One fat pointer for either kind of task (a retry back-off lives in
        // the task's own allocation), and the async task's cancel slot and
        // the name in the (usually absent) policy box.
        assert_eq!(std::mem::size_of::<TaskCell>(), 16);
        assert_eq!(std::mem::size_of::<Option<Box<Policies>>>(), 8);
    }
}
