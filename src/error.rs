//! Errors returned by the fire path and by the scheduler builder.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Why a fire or a `resume` did nothing. The fires are `fire`, `fire_after`,
/// `fire_at`, `fire_within` and their kin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FireError {
    /// The scheduler has shut down, so no run will ever start again.
    Shutdown,
    /// The deadline `delay` from now lies past the clock's range. For
    /// `fire_within`, the end of the window is what lies past it. The range
    /// ends about 584 years after the scheduler started, so `Duration::MAX`
    /// is always too long. The trigger was left untouched, so a running chain
    /// keeps running.
    DelayTooLong(Duration),
    /// The trigger is paused by [`Trigger::pause`](crate::Trigger::pause).
    /// Nothing was requested. [`resume`](crate::Trigger::resume) it first.
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
    /// No iteration serving the fire finished within the timeout. The fire
    /// stands, so such an iteration may still run later.
    Timeout,
    /// A `suspend` or a `pause` superseded the fire before an iteration
    /// serving it started. An iteration that started first runs to its end
    /// and answers.
    Suspended,
    /// The scheduler shut down before an iteration serving the fire
    /// started. A shutdown before the fire itself refused the fire.
    Shutdown,
    /// Called from inside the trigger's own task, which would wait for
    /// itself for ever.
    OwnTask,
    /// The trigger is paused, so the fire was refused.
    Paused,
    /// The fire was refused as [`FireError::DelayTooLong`]. Its debounce
    /// window ends past the clock's range. See
    /// [`TriggerBuilder::debounce`](crate::policy::TriggerPolicies::debounce).
    DelayTooLong(Duration),
    /// A blocking wait was called where a Tokio runtime is entered, such as
    /// on a runtime's thread or inside `block_on`. There it could block the
    /// thread that would poll what it waits for. Await the async form instead.
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
    /// `workers(0)` was asked for, but a scheduler needs at least one worker
    /// thread.
    NoWorkers,
    /// `workers(requested)` asks for more worker threads than the `max` a
    /// scheduler starts.
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
    /// No fetch served the call. The [`WaitError`] says why.
    Wait(WaitError),
    /// The fetch failed with this error.
    /// [`Refresh::last_error`](crate::Refresh::last_error) holds it too.
    Failed(Arc<E>),
    /// The fetch panicked. The panic was caught and counted in
    /// [`Refresh::panics`](crate::Refresh::panics).
    Panicked,
    /// The async fetch panicked for want of a Tokio runtime around its
    /// poll. Tokio I/O and timers panic outside a runtime. The panic is
    /// counted as one and the fetch is retried on the back-off. The message
    /// names the two fixes.
    NoRuntime,
    /// The async fetch was still running at the deadline that
    /// [`RefreshBuilder::fetch_timeout`](crate::RefreshBuilder::fetch_timeout)
    /// sets. It was dropped, counted as a timeout and retried on the back-off.
    TimedOut,
    /// The fetch answered "unchanged" with no value held. That is a failure,
    /// retried on the back-off.
    NothingHeld,
}

impl<E> RefreshError<E> {
    /// [`RefreshError::NoRuntime`]'s message, which says what to do about it.
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

/// Two reasons are equal when both are the same [`WaitError`], both hold
/// errors that compare equal, or both are the same variant without data.
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

/// The reason, such as a [`WaitError`] or the fetch's error, is part of the
/// message. So [`source`](std::error::Error::source) is `None`, and an error
/// report does not print the reason twice.
impl<E: fmt::Debug + fmt::Display> std::error::Error for RefreshError<E> {}
