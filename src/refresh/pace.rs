//! A refresher's fetch-side course. It decides when the next fetch comes,
//! by the period, the back-off or a retry-after. It keeps the validator
//! handed to that fetch.

use super::{Budget, Validator};
use crate::jitter::RetryBackoff;
use crate::phase::PhaseKeeper;
use std::time::Duration;

/// When the next fetch comes. It is the period after a success, and the
/// back-off after a failure.
pub(crate) struct Pace {
    pub(super) every: Duration,
    pub(super) retry: Option<RetryBackoff>,
    /// A grid of slots the fetches keep to, if any.
    pub(super) phase: Option<PhaseKeeper>,
}

impl Pace {
    pub(super) fn new(every: Duration, retry: Option<RetryBackoff>) -> Self {
        Self {
            every,
            retry,
            phase: None,
        }
    }

    /// The delay after a good fetch, unless it named one. It runs to the
    /// next slot of the phase, or else it is the period.
    pub(super) fn period(&self) -> Duration {
        self.phase.map_or(self.every, |phase| phase.next_delay())
    }

    /// The delay after a good fetch. It is the one the fetch named, or else
    /// the period, spread by the back-off's jitter if any. On a phase it
    /// runs to the next slot as it is, since the grid is the spread.
    pub(super) fn succeeded(&mut self, named: Option<Duration>) -> Option<Duration> {
        if let (None, Some(phase)) = (named, self.phase) {
            if let Some(backoff) = &mut self.retry {
                backoff.reset();
            }
            return Some(phase.next_delay());
        }
        let next = named.unwrap_or(self.every);
        match &mut self.retry {
            Some(backoff) => backoff.succeeded(next),
            None => Some(next),
        }
    }

    /// The delay before the next fetch after a failure. It is the
    /// back-off's, or the period with no back-off. A back-off past its
    /// retry limit stops the refresh until it is fired again. That fire
    /// starts a fresh round.
    pub(super) fn failed(&mut self) -> Option<Duration> {
        let Some(backoff) = &mut self.retry else {
            return Some(self.period());
        };
        let next = backoff.failed();
        if next.is_none() {
            backoff.reset();
        }
        // A retry never waits past the next slot of the phase. Once the
        // back-off has climbed to the period, it retries on the slots
        // only. A retry between them would add a fetch per period while the
        // store is down, and a second fetch in the period it returns.
        match (next, self.phase) {
            (Some(_), Some(phase)) if backoff.last_nominal() >= phase.period() => {
                Some(phase.next_slot_delay())
            }
            (Some(next), Some(phase)) => Some(next.min(phase.next_slot_delay())),
            _ => next,
        }
    }

    /// The delay after the store asked for `wait`. It is at least `wait`,
    /// capped at the back-off's maximum, and spread upward. With no
    /// back-off the cap is the period.
    pub(super) fn told_to_wait(&mut self, wait: Duration) -> Duration {
        let period = self.period();
        match &mut self.retry {
            Some(backoff) => backoff.told_to_wait(wait),
            None => crate::jitter::with_rng(|rng| {
                crate::jitter::after_at_least(wait.min(period), 0.0, rng.f64())
            }),
        }
    }
}

/// One refresher's fetch-side state. Only its fetch touches it, and the
/// fetch never runs twice at once, by guarantee G1.
pub(crate) struct Course {
    pub(super) pace: Pace,
    /// The validator the last answer gave, handed to the next fetch.
    pub(super) validator: Option<Validator>,
    /// The clock's time in ns before which no fetch starts, which is the end
    /// of a retry-after.
    pub(super) not_before_ns: u64,
    /// The fetch's deadline, if any.
    pub(super) timeout: Option<Duration>,
    /// A fetch has run, so the local copy's validator was taken.
    pub(super) started: bool,
    /// The budget the fetches share with other refreshers, if any.
    pub(super) budget: Option<Budget>,
    /// The run at `not_before_ns` holds a slot of the budget.
    pub(super) reserved: bool,
}

impl Course {
    pub(super) fn new(pace: Pace, timeout: Option<Duration>) -> Self {
        Self {
            pace,
            validator: None,
            not_before_ns: 0,
            timeout,
            started: false,
            budget: None,
            reserved: false,
        }
    }

    /// How long a run at `now_ns` must wait before it may fetch, in a
    /// retry-after's window. It is `None` if the run may fetch now.
    pub(super) fn holding(&self, now_ns: u64) -> Option<Duration> {
        (now_ns < self.not_before_ns).then(|| Duration::from_nanos(self.not_before_ns - now_ns))
    }
}
