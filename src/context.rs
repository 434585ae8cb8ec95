//! The task context.
//!
//! It is what code running inside a task may ask of the scheduler running it. That covers
//! [`is_cancelled`], [`scheduler_time`], and whether it is a given trigger's own task.
//! It also says how an iteration ended, as an [`Outcome`].
//!
//! The data are plain thread-locals. Whoever runs a task sets them, and the task reads
//! them. A worker sets them for its lifetime. The virtual driver sets them for a call, and
//! an async iteration for one poll. The module names no scheduler type, so both the
//! trigger core and the runtime build on it.

use crate::clock::Clock;
use crate::sync::{Arc, AtomicBool, Ordering};
use std::cell::{Cell, RefCell};
use std::time::Duration;

/// What became of an iteration that was running when shutdown began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum Outcome {
    /// It returned normally.
    Completed,
    /// It panicked. The panic was caught and reported.
    Panicked,
    /// It saw [`is_cancelled`] return `true` and returned.
    Cancelled,
    /// It had not returned when the report was taken. See
    /// [`Builder::shutdown_grace`](crate::Builder::shutdown_grace).
    StillRunning,
}

thread_local! {
    /// The scheduler whose tasks run on this thread, as its cancellation flag and its clock.
    static CONTEXT: RefCell<Option<Context>> = const { RefCell::new(None) };
    /// Whether the running task has seen `is_cancelled()` return `true`.
    static OBSERVED: Cell<bool> = const { Cell::new(false) };
}

/// Whether the scheduler running the current task was shut down with
/// [`Scheduler::shutdown_now`](crate::Scheduler::shutdown_now).
///
/// If so, a long task should return soon. The call is cheap enough to poll in a loop. It
/// returns `false` outside tasks.
///
/// It is a question answered now, not a future to await. That differs from tokio-util's
/// `CancellationToken::cancelled`. An async task asks it between its `.await`s. And
/// `shutdown_now` drops its future at the next `.await` anyway.
///
/// # Examples
///
/// ```
/// use circulation_trigger::{is_cancelled, Scheduler, Trigger};
///
/// let scheduler = Scheduler::new();
/// let trigger = Trigger::bind(&scheduler, || {
///     for _chunk in 0..1_000 {
///         if is_cancelled() {
///             return None; // stop early; the report says "Cancelled"
///         }
///         // ... process a chunk ...
///     }
///     None
/// });
/// trigger.fire().unwrap();
/// let report = scheduler.shutdown_now();
/// println!("{report}");
/// ```
pub fn is_cancelled() -> bool {
    let cancelled = CONTEXT.with(|cell| {
        cell.borrow()
            .as_ref()
            // Relaxed: see `Scheduler::shutdown_now`.
            .is_some_and(|context| context.cancel.load(Ordering::Relaxed))
    });
    if cancelled {
        OBSERVED.with(|seen| seen.set(true));
    }
    cancelled
}

/// The time of the scheduler running the current task, since it was built, on its clock.
///
/// That is real time on a [`Scheduler`](crate::Scheduler) and virtual time on a
/// [`VirtualScheduler`](crate::testing::VirtualScheduler). It is `None` outside tasks. Inside the
/// future of an async task or an async fetch, it answers at every poll. The times in
/// [`TriggerStats`](crate::report::TriggerStats) are on the same clock.
///
/// # Examples
///
/// ```
/// use circulation_trigger::{scheduler_time, Scheduler, Trigger};
/// use std::time::Duration;
///
/// let sim = Scheduler::builder().build_virtual();
/// let trigger = Trigger::bind(&sim, || {
///     assert_eq!(scheduler_time(), Some(Duration::from_secs(5)));
///     None
/// });
/// trigger.fire_after(Duration::from_secs(5))?;
/// sim.advance(Duration::from_secs(10));
/// assert_eq!(scheduler_time(), None); // not inside a task
/// # Ok::<(), circulation_trigger::FireError>(())
/// ```
pub fn scheduler_time() -> Option<Duration> {
    CONTEXT.with(|cell| {
        cell.borrow()
            .as_ref()
            .map(|context| Duration::from_nanos(context.clock.now_ns()))
    })
}

/// What a thread running a scheduler's tasks knows of it.
pub(crate) struct Context {
    cancel: Arc<AtomicBool>,
    clock: Clock,
}

/// Makes [`is_cancelled`] and [`scheduler_time`] answer, on this thread, for the
/// scheduler whose cancel flag and clock these are. Returns what it replaced.
///
/// Worker threads enter for their lifetime. The virtual driver and an async iteration's
/// poll enter for the length of a call.
pub(crate) fn enter_thread(cancel: &Arc<AtomicBool>, clock: &Clock) -> Option<Context> {
    let context = Context {
        cancel: Arc::clone(cancel),
        clock: clock.clone(),
    };
    CONTEXT.with(|cell| cell.replace(Some(context)))
}

/// Restores what [`enter_thread`] replaced.
pub(crate) fn leave_thread(previous: Option<Context>) {
    CONTEXT.with(|cell| *cell.borrow_mut() = previous);
}

/// Resets the "saw cancellation" mark before an iteration.
pub(crate) fn reset_observed() {
    OBSERVED.with(|seen| seen.set(false));
}

/// Whether the iteration just run saw cancellation.
pub(crate) fn observed() -> bool {
    OBSERVED.with(Cell::get)
}

thread_local! {
    /// The trigger whose task runs on this thread, as its core's address.
    ///
    /// With it, `fire_and_wait` from inside its own task fails instead of waiting for itself
    /// for ever.
    static RUNNING: Cell<usize> = const { Cell::new(0) };
}

/// Marks `core` as running its task on this thread until the guard drops.
pub(crate) fn running(core: usize) -> RunningGuard {
    RunningGuard(RUNNING.with(|cell| cell.replace(core)))
}

/// Whether `core`'s task is running on this thread.
pub(crate) fn is_running_here(core: usize) -> bool {
    RUNNING.with(Cell::get) == core
}

/// Restores the previous mark on drop.
///
/// A task may run another scheduler's virtual time, whose tasks then run nested on this
/// thread.
pub(crate) struct RunningGuard(usize);

impl Drop for RunningGuard {
    fn drop(&mut self) {
        RUNNING.with(|cell| cell.set(self.0));
    }
}

/// The span of one iteration, at DEBUG.
///
/// An INFO filter drops it and a DEBUG one shows it. It carries the trigger's name and the
/// version the iteration serves. `lateness_us` is a timed run's start minus its deadline.
/// It and `outcome` are recorded once known.
#[cfg(feature = "tracing")]
pub(crate) fn iteration_span(trigger: Option<&str>, version: u32) -> tracing::Span {
    tracing::debug_span!(
        "iteration",
        trigger = trigger.unwrap_or("<unnamed>"),
        version,
        lateness_us = tracing::field::Empty,
        outcome = tracing::field::Empty,
    )
}
