//! A trigger's policies: the public values a user sets, and the part a
//! trigger keeps out of line. A trigger without policies pays one null
//! pointer for them.

use crate::jitter::RetryBackoff;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// What a trigger does after its task panics. Either way the panic is
/// caught, counted and reported to the panic hook, as guarantee G8 promises.
///
/// # Examples
///
/// ```
/// use circulation_trigger::policy::{PanicPolicy, RetryBackoff, TriggerPolicies};
/// use circulation_trigger::{Scheduler, Trigger};
/// use std::time::Duration;
///
/// let sim = Scheduler::builder().build_virtual();
/// let mut calls = 0;
/// let retry = RetryBackoff::new(Duration::from_secs(1), Duration::from_secs(60));
/// let trigger = Trigger::builder(&sim)
///     .policies(TriggerPolicies::new().on_panic(PanicPolicy::Retry(retry)))
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
#[cfg_attr(feature = "serde", derive(serde::Deserialize))]
#[non_exhaustive]
pub enum PanicPolicy {
    /// Stop circulating, as if the task had returned `None`. This is the
    /// default. The trigger stays usable, and the next fire runs it.
    #[default]
    Stop,
    /// Keep circulating, and run again after the back-off's next delay from
    /// [`RetryBackoff::failed`]. Once its retry limit is reached, its `None`
    /// stops the trigger until it is fired again. That fire starts a fresh
    /// round of retries. A run that returns normally resets the back-off.
    Retry(RetryBackoff),
}

/// A trigger's policies, set with [`TriggerBuilder::policies`](crate::TriggerBuilder::policies).
/// They are a cooldown, a debounce, a stuck-run report and what a panic
/// does. Each is off until set. With the `serde` feature they also read
/// from a config file, with durations in human form.
///
/// # Examples
///
/// Set in code.
///
/// ```
/// use circulation_trigger::policy::{PanicPolicy, RetryBackoff, TriggerPolicies};
/// use circulation_trigger::{Scheduler, Trigger};
/// use std::time::Duration;
///
/// let sim = Scheduler::builder().build_virtual();
/// let trigger = Trigger::builder(&sim)
///     .name("config")
///     .policies(
///         TriggerPolicies::new()
///             .min_interval(Duration::from_millis(200))
///             .on_panic(PanicPolicy::Retry(RetryBackoff::new(
///                 Duration::from_secs(1),
///                 Duration::from_secs(60),
///             ))),
///     )
///     .bind(|| None);
/// # drop(trigger);
/// ```
///
/// Read from a config file.
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use circulation_trigger::{Scheduler, Trigger, policy::TriggerPolicies};
///
/// let policies: TriggerPolicies = serde_json::from_str(r#"{
///     "min_interval": "200ms",
///     "debounce": { "window": "50ms", "max_wait": "1s" },
///     "on_panic": { "Retry": { "initial": "1s", "max": "1m" } }
/// }"#).unwrap();
/// let sim = Scheduler::builder().build_virtual();
/// let trigger = Trigger::builder(&sim).policies(policies).bind(|| None);
/// # drop(trigger);
/// # }
/// ```
#[derive(Debug, Clone, Default)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
pub struct TriggerPolicies {
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    min_interval: Option<Duration>,
    debounce: Option<DebouncePolicy>,
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    stuck_after: Option<Duration>,
    on_panic: Option<PanicPolicy>,
}

impl TriggerPolicies {
    /// No policy set: no cooldown, no debounce, no stuck report, and a
    /// panic stops the trigger.
    pub const fn new() -> Self {
        Self {
            min_interval: None,
            debounce: None,
            stuck_after: None,
            on_panic: None,
        }
    }

    /// A cooldown. No iteration starts sooner than `interval` after the
    /// previous one started. A run due earlier waits for the cooldown's end.
    /// Such a run may come from a fire, a re-run after a reservation, or a
    /// shorter delay the task returned. All that come meanwhile coalesce
    /// into that one run. A `fire_after` beyond the cooldown is served at its
    /// deadline as usual, and the latest wins. A storm of "refresh now"
    /// messages then costs at most one run per `interval`. `Duration::ZERO`,
    /// the default, sets no cooldown. A refresher's trigger starts with a
    /// cooldown of one second instead (see
    /// [`RefreshBuilder::trigger`](crate::RefreshBuilder::trigger)).
    ///
    /// ```text
    /// run ──┐ fire fire fire            fire_after(30 s) ─┐
    ///       │  │    │    │                                 │
    ///       ●──┴────┴────┴──── ● (at +10 s: one run)       └─ ● (+30 s)
    ///       └─ min_interval(10 s) ─┘
    /// ```
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use circulation_trigger::policy::TriggerPolicies;
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::builder(&sim)
    ///     .policies(TriggerPolicies::new().min_interval(Duration::from_secs(10)))
    ///     .bind(|| None);
    /// trigger.fire()?; // runs at 0 s
    /// sim.advance(Duration::from_secs(1));
    /// for _ in 0..100 {
    ///     trigger.fire()?; // a storm at 1 s: one run, at 10 s
    /// }
    /// sim.advance(Duration::from_secs(20));
    /// assert_eq!(trigger.stats().iterations, 2);
    /// assert_eq!(trigger.stats().last_start, Some(Duration::from_secs(10)));
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn min_interval(mut self, interval: Duration) -> Self {
        self.min_interval = Some(interval);
        self
    }

    /// Debounces `fire` on the trailing edge. A burst of fires becomes one
    /// run `window` after its **last** fire, since each fire pushes the run
    /// back. The run comes no later than `max_wait` after the burst's
    /// **first** fire. So a steady stream of fires still runs every
    /// `max_wait`. A burst begins with the first fire after a worker claimed
    /// a run. The claim ends the burst before it, even one the run then finds
    /// superseded or holds for `min_interval`. Compare
    /// [`min_interval`](Self::min_interval), which runs the first fire at
    /// once and caps the rate after it.
    ///
    /// ```text
    /// fires:         f  f   f    f                 f
    /// debounce(w):   ───────────────┤w├● ─────────────┤w├●   one run, w after the last fire
    /// min_interval:  ●─────────┤d├● ─────────────────● ...   first at once, then one per d
    /// ```
    ///
    /// `suspend` and `pause` end a burst too, and the next fire begins a new
    /// one. Take a window of 200 milliseconds, a fire at 0, `suspend` at 0.1
    /// seconds and a fire at 10 seconds. The run comes at 10.2 seconds, not
    /// at once for a burst begun at 0.
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use circulation_trigger::policy::TriggerPolicies;
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::builder(&sim)
    ///     .policies(TriggerPolicies::new().debounce(Duration::from_millis(200), Duration::from_secs(2)))
    ///     .bind(|| None);
    /// trigger.fire()?;
    /// sim.advance(Duration::from_millis(100));
    /// trigger.suspend(); // the burst begun at 0 ends, unserved
    /// sim.advance(Duration::from_millis(9_900));
    /// trigger.fire()?; // at 10 s: a new burst
    /// sim.advance(Duration::from_secs(1));
    /// assert_eq!(trigger.stats().last_start, Some(Duration::from_millis(10_200)));
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    ///
    /// Only `fire` is debounced, with `fire_and_wait`, whose wait ends with
    /// that run. `fire_after`, `fire_at` and `fire_within` name their own
    /// time. Combined with `min_interval`, the debounced run also waits
    /// for the cooldown.
    ///
    /// # Edge cases
    ///
    /// A zero `window` turns debouncing off. A `max_wait` under `window`
    /// runs every burst `max_wait` after its first fire. Both are rounded
    /// up to the microsecond, and `Duration::MAX` saturates. A `max_wait`
    /// that long never caps. A window that puts the run past the clock's
    /// range, uncapped by `max_wait`, makes `fire` return
    /// [`FireError::DelayTooLong`](crate::FireError::DelayTooLong), as
    /// `fire_after` would. Nothing is requested then.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use circulation_trigger::policy::TriggerPolicies;
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::builder(&sim)
    ///     .policies(TriggerPolicies::new().debounce(Duration::from_millis(200), Duration::from_secs(2)))
    ///     .bind(|| None);
    /// for _ in 0..5 {
    ///     trigger.fire()?; // a paced burst: one fire every 100 ms
    ///     sim.advance(Duration::from_millis(100));
    /// }
    /// assert_eq!(trigger.stats().iterations, 0);
    /// sim.advance(Duration::from_millis(100)); // 200 ms after the last fire
    /// assert_eq!(trigger.stats().iterations, 1);
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn debounce(mut self, window: Duration, max_wait: Duration) -> Self {
        self.debounce = Some(DebouncePolicy { window, max_wait });
        self
    }

    /// Reports a run still in flight `after` it started, once per run. The
    /// report goes to the scheduler's [`stuck_hook`](crate::Builder::stuck_hook).
    /// With the `tracing` feature it is also a `tracing` warning.
    /// [`TriggerStats::stuck`](crate::report::TriggerStats::stuck) shows it until
    /// that run ends. The run is not interrupted, since a sync task cannot
    /// be. The scheduler's monitor checks every half
    /// [stall threshold](crate::Builder::stall_threshold), so a report
    /// comes within about that much after `after`. On a
    /// [`VirtualScheduler`](crate::testing::VirtualScheduler) time does not move
    /// during a run, so no run becomes stuck. `Duration::ZERO`, the default,
    /// never reports.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use circulation_trigger::policy::TriggerPolicies;
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let scheduler = Scheduler::builder()
    ///     .stuck_hook(move |stuck| tx.send(stuck.trigger().map(str::to_owned)).unwrap())
    ///     .build()?;
    /// let trigger = Trigger::builder(&scheduler)
    ///     .name("config-refresh")
    ///     .policies(TriggerPolicies::new().stuck_after(Duration::from_millis(20)))
    ///     .bind(|| {
    ///         std::thread::sleep(Duration::from_millis(200)); // an RPC that hangs
    ///         None
    ///     });
    /// trigger.fire().unwrap();
    /// let stuck = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    /// assert_eq!(stuck.as_deref(), Some("config-refresh"));
    /// # Ok::<(), circulation_trigger::BuildError>(())
    /// ```
    pub fn stuck_after(mut self, after: Duration) -> Self {
        self.stuck_after = Some(after);
        self
    }

    /// What a panic in the task does, as a [`PanicPolicy`]. By default the
    /// trigger stops circulating, as guarantee G8 says. It may instead retry
    /// after a back-off. The panic is caught, counted and reported either
    /// way.
    pub fn on_panic(mut self, policy: PanicPolicy) -> Self {
        self.on_panic = Some(policy);
        self
    }
}

impl TriggerPolicies {
    /// Takes every policy `newer` sets, and keeps the rest.
    pub(crate) fn merge(&mut self, newer: TriggerPolicies) {
        self.min_interval = newer.min_interval.or(self.min_interval);
        self.debounce = newer.debounce.or(self.debounce);
        self.stuck_after = newer.stuck_after.or(self.stuck_after);
        if newer.on_panic.is_some() {
            self.on_panic = newer.on_panic;
        }
    }

    /// Whether no stuck report was set.
    pub(crate) fn stuck_after_unset(&self) -> bool {
        self.stuck_after.map_or(true, |after| after.is_zero())
    }

    /// The parts the trigger keeps out of line, and the panic policy its task cell keeps.
    pub(crate) fn split(
        self,
        name: Option<Box<str>>,
        spawner: Option<std::sync::Arc<dyn crate::async_task::Spawn>>,
    ) -> (Option<Box<Policies>>, PanicPolicy) {
        let policies = Policies::new(
            name,
            self.min_interval.unwrap_or(Duration::ZERO),
            self.stuck_after.unwrap_or(Duration::ZERO),
            self.debounce.map(|d| (d.window, d.max_wait)),
            spawner,
        );
        (policies, self.on_panic.unwrap_or_default())
    }
}

/// The debounce of [`TriggerPolicies`]. See
/// [`TriggerPolicies::debounce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(deny_unknown_fields)
)]
pub struct DebouncePolicy {
    /// One run this long after a burst's last fire…
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub window: Duration,
    /// …and no later than this after its first.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub max_wait: Duration,
}

/// The rarely set parts of one trigger that has any. They are kept out of
/// line so a trigger with none pays one null pointer.
pub(crate) struct Policies {
    /// The trigger's name, for reports, hooks and tracing.
    pub(crate) name: Option<Box<str>>,
    /// No start sooner than this many microseconds after the previous start.
    /// Zero means no cooldown.
    pub(crate) min_interval_us: u64,
    /// Trailing-edge debounce of `fire`, if set.
    pub(crate) debounce: Option<Debounce>,
    /// A run longer than this many microseconds is reported stuck. Zero
    /// means never.
    pub(crate) stuck_after_us: u64,
    /// The run in flight was reported stuck. A run's start clears it.
    /// Relaxed: a report flag, ordering nothing.
    stuck: AtomicBool,
    /// When the iteration in flight started, in microseconds. It is
    /// [`NOT_RUNNING`] between iterations. The holder of RUNNING sets it once
    /// it really runs the task. So a due run that only takes RUNNING to find
    /// it too early, as under a cooldown, is never "in flight" here.
    /// Relaxed: the monitor only compares it with its clock, and a report
    /// orders nothing.
    running_since_us: AtomicU64,
    /// For an async task, the waker of its iteration in flight.
    /// `shutdown_now` wakes it to cancel that iteration. See
    /// `core/iteration.rs`.
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
    /// Policies from the builder's settings, or `None` if there are none.
    pub(crate) fn new(
        name: Option<Box<str>>,
        min_interval: Duration,
        stuck_after: Duration,
        debounce: Option<(Duration, Duration)>,
        spawner: Option<std::sync::Arc<dyn crate::async_task::Spawn>>,
    ) -> Option<Box<Self>> {
        let (min_interval_us, stuck_after_us) = (micros_up(min_interval), micros_up(stuck_after));
        let debounce =
            debounce
                .filter(|(window, _)| !window.is_zero())
                .map(|(window, max_wait)| Debounce {
                    window_us: micros_up(window),
                    max_wait_us: micros_up(max_wait),
                    burst_start_us: AtomicU64::new(NO_BURST),
                    closed_by: std::sync::atomic::AtomicU32::new(0),
                });
        let any = name.is_some() || min_interval_us > 0 || stuck_after_us > 0 || debounce.is_some();
        (any || spawner.is_some()).then(|| {
            Box::new(Self {
                name,
                min_interval_us,
                debounce,
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

    /// Marks the run in flight stuck and returns whether this call did. So a
    /// run is reported once.
    pub(crate) fn mark_stuck(&self) -> bool {
        !self.stuck.swap(true, Relaxed)
    }

    /// A run starts at `now_us`. It is in flight and not stuck.
    pub(crate) fn started(&self, now_us: u64) {
        self.stuck.store(false, Relaxed);
        self.running_since_us
            .store(now_us.min(NOT_RUNNING - 1), Relaxed);
    }

    /// The run in flight ended.
    pub(crate) fn ended(&self) {
        self.running_since_us.store(NOT_RUNNING, Relaxed);
    }

    /// When the run in flight started, in microseconds, if one is.
    pub(crate) fn running_since_us(&self) -> Option<u64> {
        let since = self.running_since_us.load(Relaxed);
        (since != NOT_RUNNING).then_some(since)
    }
}

/// `Policies::running_since_us` between iterations.
const NOT_RUNNING: u64 = u64::MAX;

/// `d` in whole microseconds, rounded up and saturating. Rounding up keeps a
/// policy's interval from being shorter than asked.
fn micros_up(d: Duration) -> u64 {
    let whole = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    whole.saturating_add(u64::from(d.subsec_nanos() % 1_000 != 0))
}

/// `Debounce::burst_start_us` when no burst is open.
const NO_BURST: u64 = u64::MAX;

/// Trailing-edge debounce, as `TriggerBuilder::debounce` describes it. A
/// burst of fires becomes one run `window` after its last fire, and no later
/// than `max_wait` after its first. A burst opens with the first fire after a
/// run was claimed. It closes when a worker claims the run serving it, or
/// when a suspend or pause cancels it.
///
/// This is timing, not safety, so every access is Relaxed. A fire that races
/// the claim of its burst's run may see the burst still open and get a
/// shorter delay. At worst, it runs right after that run. The claimed
/// version, kept here, tells a fire whether the run that closed its burst
/// already served it.
pub(crate) struct Debounce {
    window_us: u64,
    max_wait_us: u64,
    /// When the open burst's first fire came, in microseconds, or [`NO_BURST`].
    burst_start_us: AtomicU64,
    /// The version of the run that closed the last burst.
    closed_by: std::sync::atomic::AtomicU32,
}

impl Debounce {
    /// The delay in microseconds of a fire at `now_us`, the burst start it
    /// was computed from, and whether this fire opened that burst. A fire
    /// opens a burst if none is open.
    pub(crate) fn delay_us(&self, now_us: u64) -> (u64, u64, bool) {
        let mut start = self.burst_start_us.load(Relaxed);
        let mut opened = false;
        if start == NO_BURST {
            (start, opened) = match self
                .burst_start_us
                .compare_exchange(NO_BURST, now_us, Relaxed, Relaxed)
            {
                Ok(_) => (now_us, true),
                Err(open) => (open, false),
            };
        }
        let cap = start
            .saturating_add(self.max_wait_us)
            .saturating_sub(now_us);
        (self.window_us.min(cap), start, opened)
    }

    /// A fire that opened the burst starting at `start` was refused. Close
    /// the burst again, unless a later fire or a run moved on.
    pub(crate) fn unopen(&self, start: u64) {
        let _ = self
            .burst_start_us
            .compare_exchange(start, NO_BURST, Relaxed, Relaxed);
    }

    /// The version of the run that closed the last burst.
    pub(crate) fn closed_by(&self) -> u32 {
        self.closed_by.load(Relaxed)
    }

    /// A worker claimed the run of `version`, so the burst it serves is over.
    pub(crate) fn claimed(&self, version: u32) {
        self.closed_by.store(version, Relaxed);
        self.close();
    }

    /// Whether the burst that began at `start` is still the open one.
    pub(crate) fn is_open(&self, start: u64) -> bool {
        self.burst_start_us.load(Relaxed) == start
    }

    /// The burst is over, because its run was claimed or a suspend or pause
    /// cancelled it. The next fire opens a new one.
    pub(crate) fn close(&self) {
        self.burst_start_us.store(NO_BURST, Relaxed);
    }

    /// The window in microseconds, for a fire whose burst closed under it.
    pub(crate) fn window_us(&self) -> u64 {
        self.window_us
    }
}

/// A run that has been in flight longer than its trigger's
/// [`stuck_after`](crate::policy::TriggerPolicies::stuck_after), as handed to the
/// scheduler's [`stuck_hook`](crate::Builder::stuck_hook). It is reported
/// once per run. The run is not interrupted, since a sync task cannot be.
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
    use crate::policy::trigger::*;

    #[test]
    fn policy_durations_round_up_to_the_microsecond() {
        let policies = Policies::new(
            None,
            Duration::from_nanos(1),
            Duration::from_nanos(1_001),
            None,
            None,
        )
        .expect("some policy");
        assert_eq!((policies.min_interval_us, policies.stuck_after_us), (1, 2));
        let exact =
            Policies::new(None, Duration::from_micros(40), Duration::MAX, None, None).unwrap();
        assert_eq!(
            (exact.min_interval_us, exact.stuck_after_us),
            (40, u64::MAX)
        );
        assert!(Policies::new(None, Duration::ZERO, Duration::ZERO, None, None).is_none());
        // A zero window is no debounce.
        let zero = Some((Duration::ZERO, Duration::MAX));
        assert!(Policies::new(None, Duration::ZERO, Duration::ZERO, zero, None).is_none());
        struct Never;
        impl crate::async_task::Spawn for Never {
            fn spawn(&self, _job: crate::async_task::Job) {}
        }
        let spawner: std::sync::Arc<dyn crate::async_task::Spawn> = std::sync::Arc::new(Never);
        let async_only =
            Policies::new(None, Duration::ZERO, Duration::ZERO, None, Some(spawner)).unwrap();
        assert!(async_only.cancel.is_some());
    }
}
