//! Virtual time: a scheduler whose clock moves only when the test says so,
//! for deterministic tests of periodic logic without sleeping.

use crate::clock::{ManualTime, HORIZON_US};
use crate::scheduler::ShutdownReport;
use crate::scheduler::{Builder, Driver, Scheduler};
use crate::stats::SchedulerStats;
use crate::sync::Arc;
use std::fmt;
use std::time::Duration;

impl Builder {
    /// Builds a scheduler on **virtual time** instead: no threads, a clock
    /// at zero that moves only in [`VirtualScheduler::advance`](crate::VirtualScheduler::advance), which runs
    /// the due iterations on the calling thread. `workers` and
    /// `thread_name_prefix` do not apply (so they are never refused here);
    /// `tick`, `coalesce_periodic`, `shutdown_grace`, `seed` and
    /// `panic_hook` do, exactly as in [`build`](Self::build).
    ///
    /// # Edge cases
    ///
    /// None: every setting that applies is accepted by both `build` and
    /// `build_virtual` (the tick is clamped, not refused), so this returns
    /// the scheduler itself rather than a `Result`.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let runs = Arc::new(AtomicU32::new(0));
    /// let r = runs.clone();
    /// let trigger = Trigger::bind(&sim, move || {
    ///     r.fetch_add(1, Ordering::Relaxed);
    ///     Some(Duration::from_secs(30))
    /// });
    /// trigger.fire().unwrap();
    /// sim.advance(Duration::from_secs(95)); // runs at 0, 30, 60, 90 s
    /// assert_eq!(runs.load(Ordering::Relaxed), 4);
    /// ```
    pub fn build_virtual(self) -> VirtualScheduler {
        let time = Arc::new(ManualTime::default());
        VirtualScheduler::new(self.build_threadless(&time), time)
    }
}

/// A scheduler on virtual time: no threads, and a clock that moves only in
/// [`advance`](Self::advance) / [`advance_to`](Self::advance_to), which run
/// every iteration due by then on the calling thread, in deadline order.
///
/// Triggers bind to it as to a [`Scheduler`] (it implements
/// `AsRef<Scheduler>`; [`scheduler`](Self::scheduler) gives the scheduler
/// itself) and run the same code as on the threaded scheduler — only the
/// clock and the threads differ. Build one with
/// [`Builder::build_virtual`](crate::Builder::build_virtual).
///
/// # Examples
///
/// A refresher that backs off exponentially while the config center is
/// down, tested in virtual time (this runs in microseconds, not minutes):
///
/// ```
/// use circulation_trigger::{Scheduler, Trigger};
/// use std::sync::{Arc, Mutex};
/// use std::time::Duration;
///
/// let sim = Scheduler::builder().build_virtual();
/// let log = Arc::new(Mutex::new(Vec::new()));
/// let (l, clock) = (log.clone(), sim.clock());
/// let mut failures = 0u32;
/// let trigger = Trigger::bind(&sim, move || {
///     let up = clock.now() >= Duration::from_secs(60); // down for a minute
///     l.lock().unwrap().push((clock.now().as_secs(), up));
///     if up {
///         failures = 0;
///         Some(Duration::from_secs(30)) // healthy: every 30 s
///     } else {
///         failures += 1;
///         Some(Duration::from_secs(1 << failures.min(6))) // 2, 4, 8, … s
///     }
/// });
/// trigger.fire()?;
/// sim.advance(Duration::from_secs(120));
/// let runs: Vec<u64> = log.lock().unwrap().iter().map(|&(t, _)| t).collect();
/// assert_eq!(runs, [0, 2, 6, 14, 30, 62, 92]);
/// # Ok::<(), circulation_trigger::FireError>(())
/// ```
pub struct VirtualScheduler {
    scheduler: Scheduler,
    driver: Driver,
}

impl VirtualScheduler {
    /// The latest virtual time: about 584 years (the clock counts
    /// nanoseconds in a `u64`). [`advance`](Self::advance) and
    /// [`advance_to`](Self::advance_to) stop there.
    pub const HORIZON: Duration = Duration::from_micros(HORIZON_US);

    pub(crate) fn new(scheduler: Scheduler, time: Arc<ManualTime>) -> Self {
        Self {
            scheduler,
            driver: Driver::new(time),
        }
    }

    /// Virtual time since the scheduler was built.
    pub fn now(&self) -> Duration {
        Duration::from_micros(self.driver.time.now_us())
    }

    /// A handle on this scheduler's clock, for tasks that need the time.
    pub fn clock(&self) -> VirtualClock {
        VirtualClock(Arc::clone(&self.driver.time))
    }

    /// Moves time forward by `delay` (rounded up to a microsecond), running
    /// every iteration due by then — also those `fire` queued — in deadline
    /// order; returns how many runs were dispatched (including ones found
    /// superseded).
    ///
    /// `advance(Duration::ZERO)` runs what is due now. Every iteration due
    /// runs, so advancing by N periods of a periodic trigger runs it N
    /// times: a long jump over a short period takes long.
    ///
    /// # Edge cases
    ///
    /// None: time saturates at [`HORIZON`](Self::HORIZON), so
    /// `advance(Duration::MAX)` moves to the horizon. There every
    /// `fire_after` but `fire_after(Duration::ZERO)` returns
    /// [`FireError::DelayTooLong`](crate::FireError::DelayTooLong) and a
    /// task's re-arm stops its chain, as for any deadline past the clock's
    /// range; `fire` still runs.
    ///
    /// # Panics
    ///
    /// If runs at one instant never stop (a million of them): a task that
    /// re-arms itself with a zero delay, fires itself, or panics every time
    /// under a zero `RetryBackoff` — time could never move on. No argument
    /// value panics.
    pub fn advance(&self, delay: Duration) -> usize {
        let target = self.driver.time.now_us().saturating_add(micros_up(delay));
        self.driver
            .advance_to(&self.scheduler.shared, target.min(HORIZON_US))
    }

    /// Moves time forward to `at` since the scheduler was built (a time in
    /// the past only runs what is due now); see [`advance`](Self::advance).
    ///
    /// # Edge cases
    ///
    /// None: as [`advance`](Self::advance), `at` saturates at
    /// [`HORIZON`](Self::HORIZON).
    ///
    /// # Panics
    ///
    /// As [`advance`](Self::advance).
    pub fn advance_to(&self, at: Duration) -> usize {
        self.driver
            .advance_to(&self.scheduler.shared, micros_up(at).min(HORIZON_US))
    }

    /// The next time an iteration is due, if any is: now, if a run is
    /// queued (a `fire`, or a re-run due at once); else the earliest armed
    /// deadline (never later than it). A deadline since superseded — its
    /// trigger suspended, re-armed or dropped, or the scheduler shut down —
    /// may still be named until it passes: advancing to it then runs
    /// nothing.
    pub fn next_deadline(&self) -> Option<Duration> {
        let now_us = self.driver.time.now_us();
        self.driver.turn(&self.scheduler.shared, now_us);
        if self.driver.queued(&self.scheduler.shared) {
            return Some(Duration::from_micros(now_us));
        }
        let next = self.driver.next_wake();
        (next != u64::MAX).then(|| Duration::from_micros(next))
    }
}

/// `duration` in microseconds, rounded up (never early), saturating.
fn micros_up(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX)
}

/// The scheduler side of a [`VirtualScheduler`]: lifecycle and statistics,
/// exactly as on [`Scheduler`] (whose docs each method links to).
impl VirtualScheduler {
    /// The underlying [`Scheduler`], for code written against it.
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// [`Scheduler::shutdown`].
    pub fn shutdown(&self) {
        self.scheduler.shutdown();
    }

    /// [`Scheduler::shutdown_now`] (no thread to wait for: returns at once).
    pub fn shutdown_now(&self) -> ShutdownReport {
        self.scheduler.shutdown_now()
    }

    /// [`Scheduler::shutdown_report`].
    pub fn shutdown_report(&self) -> Option<ShutdownReport> {
        self.scheduler.shutdown_report()
    }

    /// [`Scheduler::is_shutdown`].
    pub fn is_shutdown(&self) -> bool {
        self.scheduler.is_shutdown()
    }

    /// [`Scheduler::is_terminated`]: there are no threads, so `true` —
    /// unless an async trigger's future is in flight on its runtime (see
    /// `Trigger::bind_async`, with the `tokio` feature).
    pub fn is_terminated(&self) -> bool {
        self.scheduler.is_terminated()
    }

    /// [`Scheduler::await_termination`] (returns `true` at once).
    #[must_use = "`false` means some threads are still running"]
    pub fn await_termination(&self, timeout: Duration) -> bool {
        self.scheduler.await_termination(timeout)
    }

    /// [`Scheduler::stats`].
    pub fn stats(&self) -> SchedulerStats {
        self.scheduler.stats()
    }

    /// [`Scheduler::panic_count`].
    pub fn panic_count(&self) -> u64 {
        self.scheduler.panic_count()
    }
}

/// Triggers bind to a virtual scheduler as to a real one:
/// `Trigger::bind(&sim, task)`.
impl AsRef<Scheduler> for VirtualScheduler {
    fn as_ref(&self) -> &Scheduler {
        &self.scheduler
    }
}

impl fmt::Debug for VirtualScheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VirtualScheduler")
            .field("now", &self.now())
            .field("scheduler", &self.scheduler)
            .finish()
    }
}

/// Reads a [`VirtualScheduler`]'s time (cheap to clone; safe to move into
/// tasks).
#[derive(Clone)]
pub struct VirtualClock(Arc<ManualTime>);

impl VirtualClock {
    /// Virtual time since the scheduler was built.
    pub fn now(&self) -> Duration {
        Duration::from_micros(self.0.now_us())
    }
}

impl fmt::Debug for VirtualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("VirtualClock").field(&self.now()).finish()
    }
}
