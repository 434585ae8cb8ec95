//! The statistics a user reads: what a trigger is doing, its counts, and
//! a whole scheduler's. Plain public data, built from the hot counters
//! beside this file.

use std::time::Duration;

/// What a trigger is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum TriggerState {
    /// Never fired, or stopped because its task returned `None` or panicked.
    Idle,
    /// The latest call was `suspend`.
    Suspended,
    /// Paused. No fire starts a run until `resume`, as guarantee G17 promises.
    Paused,
    /// The scheduler has shut down and no iteration is in flight, so nothing
    /// will run again.
    ShutDown,
    /// A run is due now and waits for a worker.
    Due,
    /// A run is armed for this time, counted from the scheduler's start.
    Armed(#[cfg_attr(feature = "serde", serde(with = "humantime_serde"))] Duration),
    /// An iteration is in flight.
    Running,
    /// An iteration is in flight and a fire asked for one more right after.
    RunningWithRerun,
}

/// A snapshot of one trigger's statistics. See [`Trigger::stats`](crate::Trigger::stats).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct TriggerStats {
    /// The trigger's name, if it has one.
    pub name: Option<String>,
    /// `fire`, `fire_after` and `fire_within` calls.
    pub fires: u64,
    /// Fires that got no iteration of their own. They were served together
    /// with others, or superseded because the latest fire wins.
    pub coalesced_fires: u64,
    /// Iterations run.
    pub iterations: u64,
    /// Iterations that panicked.
    pub panics: u64,
    /// When the last iteration started, counted from the scheduler's start.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub last_start: Option<Duration>,
    /// When the last iteration ended, counted from the scheduler's start.
    /// It is kept as that run's length, and while the next one runs, as the
    /// gap before its start. So it is exact to the microsecond when the run
    /// and that gap are each under about 8.9 minutes. Otherwise it is within
    /// a millisecond either way, or past about 6.2 days a second.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub last_end: Option<Duration>,
    /// Start minus deadline of the last timed run. A timed run is a delayed
    /// request, or the next run a task asked for. A zero delay counts from
    /// the task's return. Lateness is kept in 16 bits, like a float: exact
    /// below 4,096 microseconds, and above that rounded down to within a
    /// 2,048th of itself. One over about 71 minutes reads as that.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub last_lateness: Option<Duration>,
    /// The largest lateness seen, kept as `last_lateness` is.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub max_lateness: Option<Duration>,
    /// What the trigger is doing now.
    pub state: TriggerState,
    /// The trigger is paused by [`Trigger::pause`](crate::Trigger::pause).
    /// A run in flight as it paused still shows as
    /// [`TriggerState::Running`].
    pub paused: bool,
    /// The state word's version, which every fire moves on. It wraps at
    /// 2³⁰. See [`TriggerBuilder::start_version`](crate::TriggerBuilder::start_version).
    pub version: u32,
    /// The run in flight has been running longer than the trigger's
    /// [`stuck_after`](crate::policy::TriggerPolicies::stuck_after), and was reported.
    /// It is false again once that run ends.
    pub stuck: bool,
}

/// Statistics of a whole scheduler. See [`Scheduler::stats`](crate::Scheduler::stats).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SchedulerStats {
    /// Every live trigger, named ones first, by name.
    pub triggers: Vec<TriggerStats>,
    /// Sum of the triggers' fires.
    pub fires: u64,
    /// Sum of the triggers' coalesced fires.
    pub coalesced_fires: u64,
    /// Sum of the triggers' iterations.
    pub iterations: u64,
    /// Panics caught in tasks, including those of triggers since dropped.
    pub panics: u64,
    /// Fires refused because their trigger was paused, including those of
    /// triggers since dropped. Both `fire*` and `fire_and_wait*` count.
    pub refused_paused: u64,
    /// Worker threads now. They are the core workers plus extra ones started
    /// because every worker was busy. See [`Builder::max_workers`](crate::Builder::max_workers).
    pub workers: usize,
    /// The most worker threads there have been at once.
    pub peak_workers: usize,
    /// Times work had to wait because every worker was busy and the
    /// worker limit was reached. Each such episode counts once.
    pub worker_limit_hits: u64,
}

impl SchedulerStats {
    pub(crate) fn new(
        mut triggers: Vec<TriggerStats>,
        panics: u64,
        refused_paused: u64,
        (workers, peak_workers, worker_limit_hits): (usize, usize, u64),
    ) -> Self {
        triggers.sort_by(|a, b| match (&a.name, &b.name) {
            (Some(a), Some(b)) => a.cmp(b),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        Self {
            fires: triggers.iter().map(|t| t.fires).sum(),
            coalesced_fires: triggers.iter().map(|t| t.coalesced_fires).sum(),
            iterations: triggers.iter().map(|t| t.iterations).sum(),
            panics,
            refused_paused,
            triggers,
            workers,
            peak_workers,
            worker_limit_hits,
        }
    }
}
