//! Per-trigger statistics, always on and off the fire path's critical
//! cost: fires are *derived* from the version counter (no counter bump per
//! fire); everything else is written by the one worker holding the RUNNING
//! bit, or by the timer, with Relaxed stores to trigger-local fields.

use crate::request::{Kind, Word};
use crate::state::{Snapshot, VERSION_MASK};
use crate::sync::{Ordering::Relaxed, StatU32 as AtomicU32, StatU64 as AtomicU64};
use std::time::Duration;

/// "No value" for the version-tagged fields.
const NONE: u32 = u32::MAX;

/// What a trigger is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum TriggerState {
    /// Never fired, or stopped (its task returned `None` or panicked).
    Idle,
    /// The latest call was `suspend`.
    Suspended,
    /// Paused: no fire starts a run until `resume` (G17).
    Paused,
    /// The scheduler has shut down and no iteration is in flight: nothing
    /// will run again.
    ShutDown,
    /// A run is due now and waits for a worker.
    Due,
    /// A run is armed for this time (since the scheduler started).
    Armed(#[cfg_attr(feature = "serde", serde(with = "humantime_serde"))] Duration),
    /// An iteration is in flight.
    Running,
    /// An iteration is in flight and a fire asked for one more right after.
    RunningWithRerun,
}

/// A snapshot of one trigger's statistics; see [`Trigger::stats`](crate::Trigger::stats).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct TriggerStats {
    /// The trigger's name, if it has one.
    pub name: Option<String>,
    /// `fire`, `fire_after` and `fire_within` calls.
    pub fires: u64,
    /// Fires that got no iteration of their own: served together with
    /// others, or superseded (latest wins).
    pub coalesced_fires: u64,
    /// Iterations run.
    pub iterations: u64,
    /// Iterations that panicked.
    pub panics: u64,
    /// When the last iteration started (since the scheduler started).
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub last_start: Option<Duration>,
    /// When the last iteration ended (since the scheduler started).
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub last_end: Option<Duration>,
    /// Start minus deadline of the last timed run — a delayed request, or
    /// the next run a task asked for, a zero delay counting from its
    /// return (kept in whole microseconds up to about 71 minutes; a larger
    /// lateness reads as that).
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub last_lateness: Option<Duration>,
    /// The largest lateness seen (as `last_lateness`).
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub max_lateness: Option<Duration>,
    /// What the trigger is doing now.
    pub state: TriggerState,
    /// The run in flight has been running longer than the trigger's
    /// [`stuck_after`](crate::TriggerBuilder::stuck_after) (and was
    /// reported); false again once that run ends.
    pub stuck: bool,
}

/// The counters of one trigger. In a fixed order (`repr(C)`), the timer's
/// `due_*` pair first: the core puts it in its hot cache line.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Counters {
    /// The deadline of the run last marked due (by the timer, or a
    /// zero-delay re-arm), and for which version (`NONE` once the worker
    /// consumed it). The only
    /// statistics the loom models see (loom atomics under `--cfg loom`):
    /// the timer hands them to the worker through `Request::expire`'s
    /// Release, and `loom_dispatch`'s lateness model checks that edge.
    due_at_us: crate::sync::AtomicU64,
    due_version: crate::sync::AtomicU32,
    /// Worker side (the holder of RUNNING) from here on; this one beside
    /// `due_version`, which a run's start reads with it (and no padding).
    last_version: AtomicU32,
    /// What the `metrics` counters were last told (worker side).
    #[cfg(feature = "metrics")]
    reported_fires: AtomicU64,
    #[cfg(feature = "metrics")]
    reported_coalesced: AtomicU64,
    iterations: AtomicU64,
    served_fires: AtomicU64,
    last_start_us: AtomicU64,
    last_end_us: AtomicU64,
    /// Lateness in µs, saturating at `LATENESS_MAX`; `NONE` if unknown.
    last_lateness_us: AtomicU32,
    max_lateness_us: AtomicU32,
}

/// Units of an encoded delay, by the top two bits: µs, ms, s.
const DELAY_UNITS_NS: [u64; 3] = [1_000, 1_000_000, 1_000_000_000];
const DELAY_VALUE_BITS: u32 = 30;

/// A delay in 32 bits, rounded **up** (a resumed run is never early,
/// G15): the top two bits pick the unit — µs below about 17.9 minutes, ms
/// below about 12.4 days, s up to about 34 years — and the low 30 bits
/// count them. `NONE` (all ones) is no delay; a longer delay encodes as
/// `NONE` too (shortening it would make the resumed run early): such a
/// trigger resumes idle, as one that returned `None`.
fn encode_delay(delay: Duration) -> u32 {
    // In 64 bits (every run's end encodes its delay: no 128-bit division);
    // a delay past 584 years saturates, and encodes as `NONE` either way.
    let nanos = delay
        .as_secs()
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(u64::from(delay.subsec_nanos())))
        .unwrap_or(u64::MAX);
    for (unit, &unit_ns) in DELAY_UNITS_NS.iter().enumerate() {
        let count = nanos.div_ceil(unit_ns);
        if count < 1 << DELAY_VALUE_BITS {
            return ((unit as u32) << DELAY_VALUE_BITS) | count as u32;
        }
    }
    NONE
}

/// See [`encode_delay`].
fn decode_delay(encoded: u32) -> Option<Duration> {
    if encoded == NONE {
        return None;
    }
    let unit_ns = DELAY_UNITS_NS[(encoded >> DELAY_VALUE_BITS).min(2) as usize];
    let count = u64::from(encoded & ((1 << DELAY_VALUE_BITS) - 1));
    Some(Duration::from_nanos(count * unit_ns))
}

/// The delay the last iteration returned, in 32 bits (see
/// [`encode_delay`]): what `resume` re-arms. Worker side (the holder of
/// RUNNING writes it); Relaxed: `resume` reads it after an Acquire RMW of
/// the state word that read the iteration's Release `exit`. A loom atomic
/// under `--cfg loom`, unlike the other statistics, so that a model sees
/// that edge (`loom_pause`'s resume during an iteration).
#[derive(Debug)]
pub(crate) struct LastDelay(crate::sync::AtomicU32);

impl LastDelay {
    pub(crate) fn new() -> Self {
        Self(crate::sync::AtomicU32::new(NONE))
    }

    /// The iteration that just ended returned `next`.
    pub(crate) fn returned(&self, next: Option<Duration>) {
        let encoded = next.map_or(NONE, encode_delay);
        // Most tasks return the same delay every time: no store then.
        if self.0.load(Relaxed) != encoded {
            self.0.store(encoded, Relaxed);
        }
    }

    /// The delay the last iteration returned.
    pub(crate) fn get(&self) -> Option<Duration> {
        decode_delay(self.0.load(Relaxed))
    }
}

/// The counters most triggers never move — suspends, pauses and resumes,
/// panics, version wraps — kept apart from [`Counters`], in a block the
/// core allocates on first use (absent: all zero, start version 0).
#[derive(Debug)]
pub(crate) struct RareCounters {
    /// Times the 30-bit version wrapped to 0 (fire side).
    wraps: AtomicU32,
    /// The version the last `suspend` installed. A loom atomic under
    /// `--cfg loom`, unlike the other statistics: a pause reads it after
    /// its Acquire install replaced the suspend's IDLE word (G6), and
    /// `loom_pause`'s suspend-against-pause models check that edge.
    suspend_version: crate::sync::AtomicU32,
    /// Advances that are not fires (suspend, pause, resume), plus the
    /// version the trigger started at: fires are the advances less these.
    suspends: AtomicU64,
    /// Saturates at `u32::MAX` (a trigger panicking a thousand times a
    /// second would need seven weeks to get there).
    panics: AtomicU32,
}

// Relaxed, as every statistic (see `Counters`).
impl RareCounters {
    pub(crate) fn new(start_version: u32) -> Self {
        Self {
            wraps: AtomicU32::new(0),
            suspend_version: crate::sync::AtomicU32::new(NONE),
            suspends: AtomicU64::new(u64::from(start_version)),
            panics: AtomicU32::new(0),
        }
    }

    /// The version wrapped to 0 (fire side).
    pub(crate) fn wrapped(&self) {
        self.wraps.fetch_add(1, Relaxed);
    }

    /// An advance that is not a fire (a resume's): not counted as one.
    pub(crate) fn not_a_fire(&self) {
        self.suspends.fetch_add(1, Relaxed);
    }

    /// A suspend installed `version`.
    pub(crate) fn suspended(&self, version: u32) {
        self.suspends.fetch_add(1, Relaxed);
        self.suspend_version.store(version, Relaxed);
    }

    /// Whether the IDLE request of `version` is a suspend's (nothing fired
    /// since).
    pub(crate) fn is_suspend(&self, version: u32) -> bool {
        self.suspend_version.load(Relaxed) == version
    }

    /// Whether a suspend (or a pause) advanced past `version` — the last
    /// one recorded is newer.
    pub(crate) fn suspended_since(&self, version: u32) -> bool {
        crate::request::is_newer(self.suspend_version.load(Relaxed), version)
    }

    /// A resume left a suspended trigger idle at `version`: still
    /// suspended (the advance itself was counted by `not_a_fire`).
    pub(crate) fn still_suspended(&self, version: u32) {
        self.suspend_version.store(version, Relaxed);
    }

    /// An iteration panicked (worker side, the holder of RUNNING: the only
    /// writer, so a load and a store do).
    pub(crate) fn panicked(&self) {
        let panics = self.panics.load(Relaxed);
        self.panics.store(panics.saturating_add(1), Relaxed);
    }
}

/// The largest lateness the statistics keep, in µs (about 71.6 minutes).
const LATENESS_MAX: u32 = u32::MAX - 1;

// Every access below is Relaxed: these are statistics. Each field has one
// writer at a time (the firer for `wraps`/`suspends`, the timer for `due_*`
// before its Release expire — or an ending iteration re-arming with zero
// delay, before its Release install —, the RUNNING holder for the rest),
// and readers only want a recent value. (The one overlap: a `fire_after`
// between a zero-delay re-arm's `exit` and its mark, found due by the timer
// at once, may see its lateness measured from the re-arm's mark; the
// re-arm's own run is then stale.) The `due_*` pair is handed from timer to worker
// by the expire → take_due Release/Acquire edge on the request word.
impl Counters {
    pub(crate) fn new(start_version: u32) -> Self {
        Self {
            #[cfg(feature = "metrics")]
            reported_fires: AtomicU64::new(0),
            #[cfg(feature = "metrics")]
            reported_coalesced: AtomicU64::new(0),
            due_at_us: crate::sync::AtomicU64::new(0),
            due_version: crate::sync::AtomicU32::new(NONE),
            iterations: AtomicU64::new(0),
            served_fires: AtomicU64::new(0),
            last_version: AtomicU32::new(start_version),
            last_start_us: AtomicU64::new(u64::MAX),
            last_end_us: AtomicU64::new(u64::MAX),
            last_lateness_us: AtomicU32::new(NONE),
            max_lateness_us: AtomicU32::new(NONE),
        }
    }

    /// Fires so far, derived from the version counter: every advance to
    /// `version` (the state word's now, wraps counted) that was not a
    /// suspend, pause or resume, less the start version (`rare`: the
    /// trigger's rare counters, if it has any).
    fn fires(version: u32, rare: Option<&RareCounters>) -> u64 {
        let Some(rare) = rare else {
            return u64::from(version);
        };
        let advances = u64::from(rare.wraps.load(Relaxed)) * (u64::from(VERSION_MASK) + 1)
            + u64::from(version);
        advances.saturating_sub(rare.suspends.load(Relaxed))
    }

    /// The version of the last iteration that started (the start version
    /// before any).
    pub(crate) fn last_started_version(&self) -> u32 {
        self.last_version.load(Relaxed)
    }

    /// Whether an iteration ever started.
    pub(crate) fn ran(&self) -> bool {
        self.iterations.load(Relaxed) > 0
    }

    /// The run of `version` was due at `due_at_us`: the timer found it
    /// due, or an iteration re-armed with zero delay.
    pub(crate) fn marked_due(&self, version: u32, due_at_us: u64) {
        self.due_at_us.store(due_at_us, Relaxed);
        self.due_version.store(version, Relaxed);
    }

    /// Whether the last run marked due is `version`'s and has not
    /// started (the shutdown scan, telling a fresh claim of a periodic
    /// run from what an ended iteration leaves: see
    /// `Core::claim_unstarted`). Relaxed: the scan's Acquire close orders it.
    pub(crate) fn is_marked_due(&self, version: u32) -> bool {
        self.due_version.load(Relaxed) == version
    }

    /// Worker side: an iteration of `version` starts at `now_us`. The
    /// worker holding RUNNING is these fields' only writer, so a load and a
    /// store do what an RMW would, cheaper.
    /// Returns this run's lateness (µs, saturating) if it was a timed run.
    pub(crate) fn started(&self, version: u32, now_us: u64) -> Option<u32> {
        bump(&self.iterations);
        if self.last_version.load(Relaxed) != version {
            self.last_version.store(version, Relaxed);
            bump(&self.served_fires);
        }
        self.last_start_us.store(now_us, Relaxed);
        if self.due_version.swap(NONE, Relaxed) == version {
            let late = now_us.saturating_sub(self.due_at_us.load(Relaxed));
            let late = u32::try_from(late).map_or(LATENESS_MAX, |us| us.min(LATENESS_MAX));
            self.last_lateness_us.store(late, Relaxed);
            let max = self.max_lateness_us.load(Relaxed);
            if max == NONE || late > max {
                self.max_lateness_us.store(late, Relaxed);
            }
            return Some(late);
        }
        None
    }

    /// Worker side: the iteration ended at `now_us` (a panic is counted
    /// in [`RareCounters`]). Returns how long it ran (µs).
    pub(crate) fn ended(&self, now_us: u64) -> u64 {
        self.last_end_us.store(now_us, Relaxed);
        now_us.saturating_sub(self.last_start_us.load(Relaxed))
    }

    /// Fires and coalesced fires since the last call (worker side, at the
    /// end of an iteration; `version` is the state word's now, `pending`
    /// whether a request newer than this iteration's still waits for its
    /// run), for the `metrics` counters, which only go up.
    ///
    /// A fire still waiting for its run is not coalesced (yet): it is one
    /// of the fires not served, so it is taken off — counted as coalesced
    /// at once, it would be counted again when its run, serving it, brings
    /// the difference back down. So counted, fires less served less
    /// pending only grows: a fire into a pending request, or a suspend
    /// that drops one, adds one; a fire that makes one pending, or the run
    /// serving it, leaves it. Both totals are reported as the largest
    /// value seen, so a reading torn by a concurrent fire (the version and
    /// the rare counters are read apart) never makes a later one count
    /// twice.
    #[cfg(feature = "metrics")]
    pub(crate) fn fires_since_reported(
        &self,
        version: u32,
        rare: Option<&RareCounters>,
        pending: bool,
    ) -> (u64, u64) {
        let fires = Self::fires(version, rare);
        let coalesced = fires
            .saturating_sub(self.served_fires.load(Relaxed))
            .saturating_sub(u64::from(pending));
        // The holder of RUNNING is the only writer: a load and a store do.
        let raise = |reported: &AtomicU64, now: u64| {
            let before = reported.load(Relaxed);
            if now > before {
                reported.store(now, Relaxed);
            }
            now.saturating_sub(before)
        };
        (
            raise(&self.reported_fires, fires),
            raise(&self.reported_coalesced, coalesced),
        )
    }

    /// When the last iteration started (µs), if one has.
    pub(crate) fn last_start_us(&self) -> Option<u64> {
        let start = self.last_start_us.load(Relaxed);
        (start != u64::MAX).then_some(start)
    }

    /// How long the last finished iteration ran (µs; 0 while one is in
    /// flight, `None` if none has finished): the timer role holder's
    /// estimate of a due run.
    pub(crate) fn last_run_us(&self) -> Option<u64> {
        let (start, end) = (
            self.last_start_us.load(Relaxed),
            self.last_end_us.load(Relaxed),
        );
        if start == u64::MAX || end == u64::MAX {
            return None;
        }
        Some(end.saturating_sub(start))
    }

    /// A snapshot, given the state and request words read just before
    /// (and the trigger's rare counters, if it has any).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn snapshot(
        &self,
        rare: Option<&RareCounters>,
        name: Option<&str>,
        state: Snapshot,
        request: Word,
        now_us: u64,
        stuck: bool,
        closed: bool,
    ) -> TriggerStats {
        let fires = Self::fires(state.version(), rare);
        let served = self.served_fires.load(Relaxed);
        let micros = |value: u64| (value != u64::MAX).then(|| Duration::from_micros(value));
        TriggerStats {
            name: name.map(str::to_owned),
            fires,
            coalesced_fires: fires.saturating_sub(served),
            iterations: self.iterations.load(Relaxed),
            panics: rare.map_or(0, |rare| u64::from(rare.panics.load(Relaxed))),
            last_start: micros(self.last_start_us.load(Relaxed)),
            last_end: micros(self.last_end_us.load(Relaxed)),
            last_lateness: lateness(&self.last_lateness_us),
            max_lateness: lateness(&self.max_lateness_us),
            state: Self::state(rare, state, request, now_us, closed),
            stuck: stuck && state.is_running(),
        }
    }

    fn state(
        rare: Option<&RareCounters>,
        state: Snapshot,
        request: Word,
        now_us: u64,
        closed: bool,
    ) -> TriggerState {
        if closed && !state.is_running() {
            return TriggerState::ShutDown;
        }
        if state.is_running() {
            // A follow-up is pending once a due run found it busy (RESERVED)
            // or is queued for a worker (DUE).
            return if state.is_reserved() || request.kind() == Kind::Due {
                TriggerState::RunningWithRerun
            } else {
                TriggerState::Running
            };
        }
        match request.kind() {
            Kind::At { .. } => TriggerState::Armed(Duration::from_micros(
                request.kind().deadline(now_us).unwrap_or(u64::MAX),
            )),
            Kind::Due => TriggerState::Due,
            // Claimed by a worker that is about to enter, or left by the
            // iteration that just ended: not running either way.
            Kind::Taken => TriggerState::Idle,
            Kind::Idle
                if rare.is_some_and(|rare| {
                    request.version() == rare.suspend_version.load(Relaxed)
                }) =>
            {
                TriggerState::Suspended
            }
            Kind::Idle => TriggerState::Idle,
            Kind::Paused => TriggerState::Paused,
            Kind::Resuming => TriggerState::Idle,
            // Closed by the shutdown scan, which set `closed` first.
            Kind::Closed { .. } => TriggerState::ShutDown,
        }
    }
}

/// A lateness field as a duration, if known.
fn lateness(field: &AtomicU32) -> Option<Duration> {
    let us = field.load(Relaxed);
    (us != NONE).then(|| Duration::from_micros(u64::from(us)))
}

/// Adds one to a counter whose only writer is the caller (see `started`).
#[inline]
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
}

/// Statistics of a whole scheduler; see [`Scheduler::stats`](crate::Scheduler::stats).
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
    /// Panics caught in tasks (including triggers since dropped).
    pub panics: u64,
    /// Fires (`fire*`, `fire_and_wait*`) refused because their trigger was
    /// paused (including triggers since dropped).
    pub refused_paused: u64,
    /// Worker threads now (the core workers plus extra ones started
    /// because every worker was busy; see [`Builder::max_workers`](crate::Builder::max_workers)).
    pub workers: usize,
    /// The most worker threads there have been at once.
    pub peak_workers: usize,
    /// Times work had to wait because every worker was busy and the
    /// worker limit was reached (one count per such episode).
    pub worker_limit_hits: u64,
}

impl SchedulerStats {
    pub(crate) fn new(
        mut triggers: Vec<TriggerStats>,
        panics: u64,
        refused_paused: u64,
        workers: WorkerCounts,
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
            workers: workers.current,
            peak_workers: workers.peak,
            worker_limit_hits: workers.limit_hits,
        }
    }
}

/// Worker counts, for statistics. `current` changes only through
/// [`started`](Self::started) and [`gone`](Self::gone), which move the
/// `metrics` gauge of workers with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WorkerCounts {
    current: usize,
    pub(crate) peak: usize,
    pub(crate) limit_hits: u64,
}

impl WorkerCounts {
    /// The workers counted now.
    pub(crate) fn current(&self) -> usize {
        self.current
    }

    /// A worker is counted (started, or about to be).
    pub(crate) fn started(&mut self) {
        self.current += 1;
        self.peak = self.peak.max(self.current);
        crate::metrics::workers(1.0);
    }

    /// A counted worker is gone (exited, retired, or never started).
    pub(crate) fn gone(&mut self) {
        if self.current > 0 {
            self.current -= 1;
            crate::metrics::workers(-1.0);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
