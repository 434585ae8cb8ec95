//! Async iterations.
//!
//! A task returns a future, and an executor polls it. That is tokio's executor, behind the
//! `tokio` feature, or the loom models' own. The scheduler keeps deciding *when* it runs.
//!
//! # The hand-over
//!
//! A worker enters an iteration of an async trigger, so it now holds RUNNING. See
//! `state.rs`. It calls the task, which returns a future. It spawns an [`Iteration`]
//! owning that future on the trigger's executor. RUNNING stays set, because the iteration
//! *is* the future. Whichever thread polls the future to completion ends the iteration.
//! It ends it exactly as a worker ends a sync one, in `Core::end`. That covers the
//! statistics, the waiters, the shutdown report, `exit` on the state word, and the re-run
//! or the re-arm. So G1 to G13 hold unchanged, for three reasons.
//!
//! * Only a worker holding RUNNING calls the task closure. The future's completion
//!   `exit`s with Release after everything the future did. The next holder's Acquire
//!   `enter` sees it all. That gives G1 and G2.
//! * Fires during an `.await` reserve the follow-up on the state word, just as during a
//!   sync run. That gives G4 and G5.
//! * A panic while polling is caught and reported. That gives G8.
//!
//! A re-run may be due at once when a future completes. A fire came during its `.await`,
//! or the task asked for no delay. That re-run does not go back through the worker pool.
//! The completing poll serves it on the spot. It calls `enter` and then the task. The
//! same executor task polls the new future next. It does so up to a budget of iterations
//! per poll, then yields. There is no worker wake-up and no new spawn per re-run.
//!
//! # Cancellation
//!
//! [`Scheduler::shutdown_now`](crate::Scheduler::shutdown_now) sets the scheduler's
//! cancel flag. It then wakes every in-flight iteration through the waker the iteration
//! left in its trigger's [`CancelSlot`](crate::async_task::CancelSlot). A poll stores its waker and reads the flag under
//! the slot's lock. The lock orders the two. So either the poll sees the flag, or
//! `shutdown_now` finds the waker. The future is then dropped at its next `.await` and
//! listed `Cancelled`. An executor may drop an iteration before it completed, when a
//! runtime shuts down or a task is aborted. That iteration also ends as `Cancelled`.
//! [`Iteration`]'s `Drop` ends it, so RUNNING is never leaked.
//!
//! In flight, an iteration counts as alive for
//! [`await_termination`](crate::Scheduler::await_termination). So graceful shutdown and
//! drop wait for it, up to the grace period.

use super::Counted;
use super::{Alive, Core, Runtime};
use crate::async_task::TaskFuture;
use crate::context::{self, Outcome};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// One async iteration in flight.
///
/// It owns the task's future and, through `core`, the RUNNING bit of `version`.
pub(crate) struct Iteration<R: Runtime> {
    core: Counted<Core<R>>,
    version: u32,
    /// `None` once the iteration ended.
    future: Option<TaskFuture>,
    /// Whether the future saw [`is_cancelled`](crate::is_cancelled) return `true`.
    observed: bool,
    /// The span of the iteration of `version`, entered at every poll. See
    /// `context::iteration_span`. So the future's own events nest in it across its
    /// `.await`s.
    #[cfg(feature = "tracing")]
    span: Option<(u32, tracing::Span)>,
    /// The lateness of the run of `version`, until its span records it. It is a timed run's
    /// lateness, in µs.
    #[cfg(feature = "tracing")]
    late: Option<u32>,
}

impl<R: Runtime> Iteration<R> {
    /// The iteration of `version`, about to be spawned. It counts as alive until it ends.
    pub(crate) fn new(core: Counted<Core<R>>, started: Started) -> Self {
        core.runtime.async_alive(Alive::Started);
        Self::counted(core, started)
    }

    /// As [`new`](Self::new), for a caller that counted it alive already.
    fn counted(core: Counted<Core<R>>, started: Started) -> Self {
        Self {
            core,
            version: started.version,
            future: Some(started.future),
            observed: false,
            #[cfg(feature = "tracing")]
            span: None,
            #[cfg(feature = "tracing")]
            late: started.late,
        }
    }

    /// Ends the iteration. It drops the future first, so its resources go before the next
    /// iteration may start. Then it hands the trigger on.
    ///
    /// When it ends in a poll, `in_poll` is set. A re-run due at once is then served on the
    /// spot and adopted. This task goes on with it, still counted alive, instead of spawning
    /// another, and the call returns `true`.
    fn end(
        &mut self,
        result: std::thread::Result<Option<Duration>>,
        outcome: Outcome,
        in_poll: bool,
    ) -> bool {
        // A future may panic as it is dropped, in a guard's `Drop`. That is this
        // iteration's panic, reported like one from a poll. It is never an unwind
        // that would skip handing RUNNING on.
        let future = self.future.take();
        let (result, outcome) = match catch_unwind(AssertUnwindSafe(|| drop(future))) {
            Ok(()) => (result, outcome),
            Err(payload) => {
                if let Err(earlier) = result {
                    crate::sync::drop_payload(earlier);
                }
                (Err(payload), Outcome::Panicked)
            }
        };
        if let Some(slot) = self.core.cancel_slot() {
            slot.clear();
        }
        #[cfg(feature = "tracing")]
        if let Some((_, span)) = &self.span {
            span.record("outcome", tracing::field::debug(outcome));
        }
        let mut next = None;
        let adopt = if in_poll { Some(&mut next) } else { None };
        self.core.end_async(self.version, result, outcome, adopt);
        if let Some(started) = next {
            self.version = started.version;
            self.future = Some(started.future);
            self.observed = false;
            #[cfg(feature = "tracing")]
            {
                self.late = started.late;
            }
            return true;
        }
        self.core.runtime.async_alive(Alive::Ended);
        false
    }

    /// One poll of the current future.
    fn poll_once(&mut self, cx: &mut Context<'_>) -> Step {
        let Some(future) = self.future.as_mut() else {
            return Step::Ended;
        };
        let cancelled = self.core.cancel_slot().is_some_and(|slot| {
            slot.register(cx.waker(), || self.core.runtime.ledger().is_cancelled())
        });
        if cancelled {
            // Dropped at this `.await`, as `shutdown_now` promises.
            self.end(Ok(None), Outcome::Cancelled, true);
            return Step::Ended;
        }
        // While polling, `is_cancelled()`, `scheduler_time()` and the "own
        // task" check of `fire_and_wait` answer for this trigger.
        let previous = enter_context(&*self.core.runtime);
        let running = crate::context::running(self.core.address());
        context::reset_observed();
        let polled = catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)));
        self.observed |= context::observed();
        drop(running);
        let (result, outcome) = match polled {
            Ok(Poll::Pending) => {
                context::leave_thread(previous);
                return Step::Pending;
            }
            Ok(Poll::Ready(next)) if self.observed => (Ok(next), Outcome::Cancelled),
            Ok(Poll::Ready(next)) => (Ok(next), Outcome::Completed),
            Err(payload) => (Err(payload), Outcome::Panicked),
        };
        // Still entered, since a re-run adopted here calls the task for its next
        // future. That call may ask `scheduler_time()` or `is_cancelled()`.
        let adopted = self.end(result, outcome, true);
        context::leave_thread(previous);
        if adopted {
            Step::Adopted
        } else {
            Step::Ended
        }
    }
}

/// What one poll of an iteration's future came to.
enum Step {
    Pending,
    /// The iteration ended. A re-run due at once is now this task's future.
    Adopted,
    Ended,
}

/// An async iteration as its run started.
///
/// It holds the version it serves, its future, and a timed run's lateness in µs, for the
/// span its future makes.
pub(crate) struct Started {
    pub(crate) version: u32,
    pub(crate) future: TaskFuture,
    #[cfg_attr(not(feature = "tracing"), allow(dead_code))]
    pub(crate) late: Option<u32>,
}

/// Iterations that one executor task runs back to back, as re-runs adopted in one poll,
/// before it yields to the executor's other tasks.
const ADOPT_BUDGET: usize = 16;

#[cfg(feature = "tracing")]
impl<R: Runtime> Iteration<R> {
    /// The span of the iteration now in hand. After adopting a re-run of another version, it
    /// is a new one.
    fn span(&mut self) -> tracing::Span {
        match &self.span {
            Some((version, span)) if *version == self.version => span.clone(),
            _ => {
                let span = crate::context::iteration_span(self.core.name(), self.version);
                if let Some(late) = self.late.take() {
                    span.record("lateness_us", late);
                }
                self.span = Some((self.version, span.clone()));
                span
            }
        }
    }
}

impl<R: Runtime> Future for Iteration<R> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        for _ in 0..ADOPT_BUDGET {
            #[cfg(feature = "tracing")]
            let span = self.span();
            #[cfg(feature = "tracing")]
            let _entered = span.enter();
            match self.poll_once(cx) {
                Step::Pending => return Poll::Pending,
                Step::Ended => return Poll::Ready(()),
                Step::Adopted => {}
            }
        }
        // Budget spent with a re-run still due, so yield, then go on.
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl<R: Runtime> Drop for Iteration<R> {
    /// Dropped unfinished by its executor, the iteration ends as cancelled. So RUNNING is
    /// handed on and nothing waits for it for ever.
    fn drop(&mut self) {
        if self.future.is_some() {
            // Not in a poll, so nothing adopts a re-run here. It goes through the run
            // queue.
            self.end(Ok(None), Outcome::Cancelled, false);
        }
    }
}

/// A firer's dispatch of an async trigger, run on its executor.
///
/// It serves the due request. If that starts an iteration, it polls the iteration in this
/// same task.
pub(crate) struct DispatchJob<R: Runtime> {
    core: Option<Counted<Core<R>>>,
    iteration: Option<Iteration<R>>,
}

impl<R: Runtime> DispatchJob<R> {
    pub(crate) fn new(core: Counted<Core<R>>) -> Self {
        Self {
            core: Some(core),
            iteration: None,
        }
    }
}

impl<R: Runtime> Future for DispatchJob<R> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(core) = self.core.take() {
            // Counted alive from here, not from the future's spawn. The task may take a
            // while to build its future, and shutdown waits for that as for any
            // iteration in flight.
            core.runtime.async_alive(Alive::Started);
            let mut adopted = None;
            // Entered, as a worker is. The task, called here for its future, may ask
            // `scheduler_time()` or `is_cancelled()`.
            let previous = enter_context(&*core.runtime);
            let push = core.dispatch_here(&mut adopted);
            context::leave_thread(previous);
            if let Some(push) = push {
                push.deliver(&core);
            }
            match adopted {
                Some(started) => {
                    self.iteration = Some(Iteration::counted(core, started));
                }
                None => {
                    core.runtime.async_alive(Alive::Ended);
                    return Poll::Ready(());
                }
            }
        }
        match self.iteration.as_mut() {
            Some(iteration) => Pin::new(iteration).poll(cx),
            None => Poll::Ready(()),
        }
    }
}

impl<R: Runtime> Drop for DispatchJob<R> {
    /// Dropped unpolled, because its executor shut down.
    ///
    /// The dispatch then goes to the worker pool instead. Its worker meets the dead executor
    /// itself, and ends the iteration as cancelled.
    fn drop(&mut self) {
        if let Some(core) = self.core.take() {
            core.push_to_pool(true);
        }
    }
}

/// Makes the task context, `cancelled` and `scheduler_time`, answer for `runtime` on this
/// thread. Returns what it replaced, for `context::leave_thread`.
fn enter_context<R: Runtime>(runtime: &R) -> Option<context::Context> {
    context::enter_thread(&runtime.ledger().cancel, &runtime.timing().clock)
}
