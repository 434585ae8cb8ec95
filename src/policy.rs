//! Per-trigger policies set on [`TriggerBuilder`](crate::TriggerBuilder):
//! a minimum interval between starts (cooldown), what a panic does, and
//! when a run counts as stuck. Kept out of the trigger's hot words: a
//! trigger without policies pays one null pointer.

use crate::jitter::RetryBackoff;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// What a trigger does after its task panics. Either way the panic is
/// caught, counted and reported to the panic hook (G8).
///
/// # Examples
///
/// ```
/// use circulation_trigger::{PanicPolicy, RetryBackoff, Scheduler, Trigger};
/// use std::time::Duration;
///
/// let sim = Scheduler::builder().build_virtual();
/// let mut calls = 0;
/// let trigger = Trigger::builder(&sim)
///     .on_panic(PanicPolicy::Retry(RetryBackoff::new(
///         Duration::from_secs(1),
///         Duration::from_secs(60),
///     )))
///     .bind(move || {
///         calls += 1;
///         assert!(calls > 2, "flaky start"); // panics twice
///         None
///     });
/// trigger.fire()?;
/// sim.advance(Duration::from_secs(10)); // runs at 0 s (panic), 1 s (panic), 3 s
/// let stats = trigger.stats();
/// assert_eq!((stats.iterations, stats.panics), (3, 2));
/// # Ok::<(), circulation_trigger::FireError>(())
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum PanicPolicy {
    /// Stop circulating, as if the task had returned `None` (the default;
    /// the trigger stays usable: the next fire runs it).
    #[default]
    Stop,
    /// Keep circulating: run again after the back-off's next delay
    /// ([`RetryBackoff::failed`]; `None` once its retry limit is reached
    /// stops until fired again, and that fire starts a fresh round of
    /// retries). A run that returns normally resets the back-off.
    Retry(RetryBackoff),
}

/// The rarely set parts of one trigger that has any: kept out of line so
/// a trigger with none pays one null pointer.
pub(crate) struct Policies {
    /// The trigger's name (for reports, hooks and tracing).
    pub(crate) name: Option<Box<str>>,
    /// No start sooner than this after the previous start (µs; 0: none).
    pub(crate) min_interval_us: u64,
    /// A run longer than this is reported stuck (µs; 0: never).
    pub(crate) stuck_after_us: u64,
    /// The run in flight was reported stuck; cleared when a run starts.
    /// Relaxed: a report flag, ordering nothing.
    stuck: AtomicBool,
    /// When the iteration in flight started (µs), [`NOT_RUNNING`] between
    /// iterations: set by the holder of RUNNING once it really runs the
    /// task, so a due run that only takes RUNNING to find it too early
    /// (a cooldown) is never "in flight" here. Relaxed: the monitor only
    /// compares it with its clock, and a report orders nothing.
    running_since_us: AtomicU64,
    /// For an async task: the waker of its iteration in flight, which
    /// `shutdown_now` wakes to cancel it (see `core/iteration.rs`).
    pub(crate) cancel: Option<crate::async_task::CancelSlot>,
}

impl fmt::Debug for Policies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policies")
            .field("name", &self.name)
            .field("min_interval_us", &self.min_interval_us)
            .field("stuck_after_us", &self.stuck_after_us)
            .finish_non_exhaustive()
    }
}

impl Policies {
    /// Policies from the builder's settings; `None` if there are none.
    pub(crate) fn new(
        name: Option<Box<str>>,
        min_interval: Duration,
        stuck_after: Duration,
        spawner: Option<std::sync::Arc<dyn crate::async_task::Spawn>>,
    ) -> Option<Box<Self>> {
        // Rounded up: a cooldown is never shorter than asked, and a stuck
        // report never comes before `stuck_after`.
        let micros = |d: Duration| {
            let whole = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
            whole.saturating_add(u64::from(d.subsec_nanos() % 1_000 != 0))
        };
        let (min_interval_us, stuck_after_us) = (micros(min_interval), micros(stuck_after));
        let any = name.is_some() || min_interval_us > 0 || stuck_after_us > 0;
        (any || spawner.is_some()).then(|| {
            Box::new(Self {
                name,
                min_interval_us,
                stuck_after_us,
                stuck: AtomicBool::new(false),
                running_since_us: AtomicU64::new(NOT_RUNNING),
                cancel: spawner.map(crate::async_task::CancelSlot::new),
            })
        })
    }

    /// Whether the run in flight has been reported stuck.
    pub(crate) fn is_stuck(&self) -> bool {
        self.stuck.load(Relaxed)
    }

    /// Marks the run in flight stuck; returns whether this call did (a run
    /// is reported once).
    pub(crate) fn mark_stuck(&self) -> bool {
        !self.stuck.swap(true, Relaxed)
    }

    /// A run starts at `now_us`: in flight, not stuck.
    pub(crate) fn started(&self, now_us: u64) {
        self.stuck.store(false, Relaxed);
        self.running_since_us
            .store(now_us.min(NOT_RUNNING - 1), Relaxed);
    }

    /// The run in flight ended.
    pub(crate) fn ended(&self) {
        self.running_since_us.store(NOT_RUNNING, Relaxed);
    }

    /// When the run in flight started (µs), if one is.
    pub(crate) fn running_since_us(&self) -> Option<u64> {
        let since = self.running_since_us.load(Relaxed);
        (since != NOT_RUNNING).then_some(since)
    }
}

/// `Policies::running_since_us` between iterations.
const NOT_RUNNING: u64 = u64::MAX;

/// A run that has been in flight longer than its trigger's
/// [`stuck_after`](crate::TriggerBuilder::stuck_after), as handed to the
/// scheduler's [`stuck_hook`](crate::Builder::stuck_hook). Reported once per
/// run; the run is not interrupted (a sync task cannot be).
#[derive(Debug, Clone)]
pub struct StuckRun {
    pub(crate) trigger: Option<String>,
    pub(crate) running_for: Duration,
}

impl StuckRun {
    /// The trigger's name, if it has one.
    pub fn trigger(&self) -> Option<&str> {
        self.trigger.as_deref()
    }

    /// How long the run had been in flight when it was reported.
    pub fn running_for(&self) -> Duration {
        self.running_for
    }
}

impl fmt::Display for StuckRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a run of trigger `{}` has been in flight for {:?}",
            self.trigger().unwrap_or("<unnamed>"),
            self.running_for
        )
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn policy_durations_round_up_to_the_microsecond() {
        let policies = Policies::new(
            None,
            Duration::from_nanos(1),
            Duration::from_nanos(1_001),
            None,
        )
        .expect("some policy");
        assert_eq!((policies.min_interval_us, policies.stuck_after_us), (1, 2));
        let exact = Policies::new(None, Duration::from_micros(40), Duration::MAX, None).unwrap();
        assert_eq!(
            (exact.min_interval_us, exact.stuck_after_us),
            (40, u64::MAX)
        );
        assert!(Policies::new(None, Duration::ZERO, Duration::ZERO, None).is_none());
        struct Never;
        impl crate::async_task::Spawn for Never {
            fn spawn(&self, _job: crate::async_task::Job) {}
        }
        let spawner: std::sync::Arc<dyn crate::async_task::Spawn> = std::sync::Arc::new(Never);
        let async_only =
            Policies::new(None, Duration::ZERO, Duration::ZERO, Some(spawner)).unwrap();
        assert!(async_only.cancel.is_some());
    }
}
