//! Errors returned by the fire path and by the scheduler builder.

use std::fmt;
use std::time::Duration;

/// Why `fire`, `fire_after` or `fire_within` did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FireError {
    /// The scheduler has shut down: no run will ever start again.
    Shutdown,
    /// The deadline `delay` from now does not fit the clock's range
    /// (e.g. `Duration::MAX`). The trigger was left untouched: a running
    /// chain keeps running.
    DelayTooLong(Duration),
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
        }
    }
}

impl std::error::Error for FireError {}

/// Why [`Builder::build`](crate::Builder::build) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// `workers(0)`: a scheduler needs at least one worker thread.
    NoWorkers,
    /// `tick(Duration::ZERO)` or a tick below one microsecond.
    TickTooSmall(Duration),
    /// The operating system refused to start a thread.
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::NoWorkers => f.write_str("a scheduler needs at least one worker thread"),
            BuildError::TickTooSmall(tick) => {
                write!(f, "the tick must be at least 1 µs (got {tick:?})")
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
