//! Errors returned by the fire path and by the scheduler builder.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why a fire (`fire`, `fire_after`, `fire_at`, `fire_within`, …) or a
/// `resume` did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FireError {
    /// The scheduler has shut down: no run will ever start again.
    Shutdown,
    /// The deadline `delay` (or, for `fire_within`, the end of the window)
    /// from now lies past the clock's range, about 584 years after the
    /// scheduler started (e.g. `Duration::MAX`). The trigger was left
    /// untouched: a running chain keeps running.
    DelayTooLong(Duration),
    /// The trigger is paused ([`Trigger::pause`](crate::Trigger::pause)):
    /// nothing was requested; [`resume`](crate::Trigger::resume) it first.
    Paused,
}

impl fmt::Display for FireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FireError::Shutdown => f.write_str("the scheduler has shut down"),
            FireError::DelayTooLong(delay) => {
                write!(
                    f,
                    "a delay of {delay:?} puts the deadline beyond the clock's range"
                )
            }
            FireError::Paused => f.write_str("the trigger is paused: resume it first"),
        }
    }
}

impl std::error::Error for FireError {}

/// Why [`Trigger::fire_and_wait`](crate::Trigger::fire_and_wait) returned
/// without an iteration's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WaitError {
    /// No iteration serving the fire finished within the timeout (it may
    /// still run later: the fire stands).
    Timeout,
    /// A `suspend` (or a `pause`) superseded the fire before an iteration
    /// serving it started (one that started first runs to its end and
    /// answers).
    Suspended,
    /// The scheduler shut down before an iteration serving the fire
    /// started (or before the fire: it was refused).
    Shutdown,
    /// Called from inside the trigger's own task, which would wait for
    /// itself for ever.
    OwnTask,
    /// The trigger is paused: the fire was refused.
    Paused,
    /// The fire was refused as
    /// [`FireError::DelayTooLong`]: a debounce window past the clock's
    /// range (see [`TriggerBuilder::debounce`](crate::TriggerBuilder::debounce)).
    DelayTooLong(Duration),
    /// A blocking wait was called where a Tokio runtime is entered (a
    /// runtime's thread, or inside `block_on`): it could block the thread
    /// that would poll what it waits for. Await the async form instead.
    OnRuntime,
}

impl fmt::Display for WaitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WaitError::Timeout => "no iteration serving the fire finished in time",
            WaitError::Suspended => {
                "the trigger was suspended or paused before an iteration serving the fire started"
            }
            WaitError::Shutdown => {
                "the scheduler shut down before an iteration serving the fire started"
            }
            WaitError::OwnTask => "fire_and_wait was called from inside the trigger's own task",
            WaitError::Paused => "the trigger is paused: the fire was refused",
            WaitError::DelayTooLong(_) => {
                "the debounce window puts the run beyond the clock's range"
            }
            WaitError::OnRuntime => {
                "a blocking wait inside a Tokio runtime could wait for itself: await the async form"
            }
        })
    }
}

impl std::error::Error for WaitError {}

/// Why [`Builder::build`](crate::Builder::build) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `workers(0)`: a scheduler needs at least one worker thread.
    NoWorkers,
    /// `workers(requested)` asks for more worker threads than the
    /// scheduler starts (`max`).
    TooManyWorkers {
        /// The number asked for.
        requested: usize,
        /// The most a scheduler starts.
        max: usize,
    },
    /// The thread name prefix contains a NUL byte, which no thread name
    /// can hold.
    InvalidThreadName(String),
    /// The operating system refused to start a thread.
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoWorkers => f.write_str("a scheduler needs at least one worker thread"),
            BuildError::TooManyWorkers { requested, max } => write!(
                f,
                "{requested} worker threads asked for; a scheduler starts at most {max}"
            ),
            BuildError::InvalidThreadName(prefix) => {
                write!(f, "the thread name prefix {prefix:?} contains a NUL byte")
            }
            BuildError::Spawn(error) => write!(f, "could not start a scheduler thread: {error}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Spawn(error) => Some(error),
            _ => None,
        }
    }
}

/// Why [`Refresh::refresh_and_wait`](crate::Refresh::refresh_and_wait)
/// returned no fresh value. The last good value, if any, stays readable
/// through [`Refresh::get`](crate::Refresh::get) either way.
#[derive(Debug)]
#[non_exhaustive]
pub enum RefreshError<E> {
    /// No fetch served the call (see [`WaitError`]).
    Wait(WaitError),
    /// The fetch failed with this error (also in
    /// [`Refresh::last_error`](crate::Refresh::last_error)).
    Failed(Arc<E>),
    /// The fetch panicked (the panic was caught; see
    /// [`Refresh::panics`](crate::Refresh::panics)).
    Panicked,
    /// The async fetch panicked for want of a Tokio runtime around its
    /// poll (Tokio I/O or timers outside a runtime): counted as a panic,
    /// retried on the back-off. The message names the two fixes.
    NoRuntime,
    /// The async fetch was still running at its deadline
    /// ([`RefreshBuilder::fetch_timeout`](crate::RefreshBuilder::fetch_timeout)):
    /// dropped, counted as a timeout, retried on the back-off.
    TimedOut,
    /// The fetch answered "unchanged" with no value held: a failure,
    /// retried on the back-off.
    NothingHeld,
}

impl<E> RefreshError<E> {
    /// [`RefreshError::NoRuntime`]'s message: what to do about it.
    pub(crate) fn recipe(&self) -> &'static str {
        "the async fetch needs a Tokio runtime: on a VirtualScheduler, call `advance` \
         inside `#[tokio::test(start_paused = true)]` (it polls the fetch in that \
         runtime), or give the refresher one with `.trigger(|t| t.runtime(handle))`"
    }
}

impl<E> Clone for RefreshError<E> {
    fn clone(&self) -> Self {
        match self {
            RefreshError::Wait(error) => RefreshError::Wait(*error),
            RefreshError::Failed(error) => RefreshError::Failed(Arc::clone(error)),
            RefreshError::Panicked => RefreshError::Panicked,
            RefreshError::NoRuntime => RefreshError::NoRuntime,
            RefreshError::TimedOut => RefreshError::TimedOut,
            RefreshError::NothingHeld => RefreshError::NothingHeld,
        }
    }
}

/// Equal reasons: the same [`WaitError`], errors that compare equal, or
/// both panics.
impl<E: PartialEq> PartialEq for RefreshError<E> {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (RefreshError::Wait(a), RefreshError::Wait(b)) => a == b,
            (RefreshError::Failed(a), RefreshError::Failed(b)) => a == b,
            (RefreshError::Panicked, RefreshError::Panicked) => true,
            (RefreshError::NoRuntime, RefreshError::NoRuntime)
            | (RefreshError::TimedOut, RefreshError::TimedOut)
            | (RefreshError::NothingHeld, RefreshError::NothingHeld) => true,
            _ => false,
        }
    }
}

impl<E> From<WaitError> for RefreshError<E> {
    fn from(error: WaitError) -> Self {
        RefreshError::Wait(error)
    }
}

impl<E: fmt::Display> fmt::Display for RefreshError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefreshError::Wait(error) => write!(f, "no fetch served the refresh: {error}"),
            RefreshError::Failed(error) => write!(f, "the fetch failed: {error}"),
            RefreshError::Panicked => f.write_str("the fetch panicked"),
            RefreshError::NoRuntime => f.write_str(self.recipe()),
            RefreshError::TimedOut => f.write_str("the fetch did not finish by its deadline"),
            RefreshError::NothingHeld => {
                f.write_str("the fetch answered \"unchanged\" with no value held")
            }
        }
    }
}

/// The reason (a [`WaitError`], the fetch's error) is part of the message,
/// so [`source`](std::error::Error::source) is `None`: an error report
/// does not print it twice.
impl<E: fmt::Debug + fmt::Display> std::error::Error for RefreshError<E> {}
