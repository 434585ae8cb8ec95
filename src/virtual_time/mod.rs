//! Virtual time, a scheduler whose clock moves only when the test says so.
//! It serves deterministic tests of periodic logic without sleeping.

use crate::clock::{ManualTime, HORIZON_US};
use crate::scheduler::LocalJobs;
use crate::scheduler::{Builder, Driver, Scheduler};
use crate::sync::Arc;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Locks a sleepers' list. It is a std lock even under loom, because no model sleeps.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Builder {
    /// Builds a scheduler on **virtual time** instead. It has no threads,
    /// and a clock at zero that moves only in
    /// [`VirtualScheduler::advance`](crate::testing::VirtualScheduler::advance).
    /// That call runs the due iterations on the calling thread. `workers`
    /// and `thread_name_prefix` do not apply, so they are never refused
    /// here. `tick`, `coalesce_periodic`, `shutdown_grace`, `seed` and
    /// `panic_hook` apply exactly as in [`build`](Self::build).
    ///
    /// # Edge cases
    ///
    /// Every setting that applies is accepted by both `build` and
    /// `build_virtual`. The tick is clamped, not refused. So this returns
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

/// A scheduler on virtual time. It has no threads, and a clock that moves
/// only in [`advance`](Self::advance) and [`advance_to`](Self::advance_to).
/// Those run every iteration due by then on the calling thread, in deadline
/// order.
///
/// Triggers bind to it as to a [`Scheduler`], because it implements
/// `AsRef<Scheduler>`. It dereferences to the [`Scheduler`] itself, so its
/// shutdowns and statistics are the real scheduler's methods. Triggers run
/// the same code as on the threaded scheduler. Only the clock and the
/// threads differ. Build one with
/// [`Builder::build_virtual`](crate::Builder::build_virtual).
///
/// # Examples
///
/// A refresher that backs off exponentially while the config center is
/// down, tested in virtual time. The test runs in microseconds, not
/// minutes.
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
///
/// # A run waits for the next advance
///
/// No thread serves this scheduler. A run queued by a fire holds its
/// trigger, task and all, until an advance serves it, or until the
/// scheduler shuts down or drops. Take a task that owns the scheduler it
/// runs on, as an `Arc<VirtualScheduler>` moved into it. That task keeps
/// the scheduler alive while its run waits, even after every handle is
/// dropped. Call [`shutdown`](Scheduler::shutdown) on it, or give the task a
/// [`Weak`](std::sync::Weak) instead.
pub struct VirtualScheduler {
    scheduler: Scheduler,
    driver: Driver,
    /// The executor of async triggers bound here without a runtime.
    jobs: Arc<LocalJobs>,
    /// Futures waiting in [`VirtualClock::sleep`].
    sleepers: Arc<Sleepers>,
}

impl VirtualScheduler {
    /// The latest virtual time, about 584 years. The clock counts
    /// nanoseconds in a `u64`. [`advance`](Self::advance) and
    /// [`advance_to`](Self::advance_to) stop there.
    pub const HORIZON: Duration = Duration::from_micros(HORIZON_US);

    pub(crate) fn new(mut scheduler: Scheduler, time: Arc<ManualTime>) -> Self {
        let jobs = Arc::new(LocalJobs::default());
        scheduler.local = Some(Arc::clone(&jobs));
        let driver = Driver::new(time);
        driver.hold_role_of(&scheduler.shared);
        let mut this = Self {
            scheduler,
            driver,
            jobs,
            sleepers: Arc::default(),
        };
        let clock = this.clock();
        this.scheduler.virtual_sleep = Some(Arc::new(move |delay| Box::pin(clock.sleep(delay))));
        this
    }

    /// Virtual time since the scheduler was built.
    pub fn now(&self) -> Duration {
        Duration::from_micros(self.driver.time.now_us())
    }

    /// Sets the wall-clock time at which this scheduler's virtual time read
    /// zero. By default it is the wall clock when the scheduler was built.
    /// [`PhaseKeeper::keyed`](crate::policy::PhaseKeeper::keyed) and a refresher's
    /// confirmation times count from it. Set it before building them,
    /// because they read it once.
    pub fn set_wall_epoch(&self, epoch: std::time::SystemTime) {
        self.scheduler.shared.set_wall_epoch(epoch);
    }

    /// A handle on this scheduler's clock, for tasks that need the time.
    pub fn clock(&self) -> VirtualClock {
        VirtualClock {
            time: Arc::clone(&self.driver.time),
            sleepers: Arc::clone(&self.sleepers),
        }
    }

    /// Moves time forward by `delay`, rounded up to a microsecond. It runs
    /// every iteration due by then in deadline order, including those
    /// `fire` queued. Returns how many runs were dispatched, including ones
    /// found superseded.
    ///
    /// `advance(Duration::ZERO)` runs what is due now. Every iteration due
    /// runs, so advancing by N periods of a periodic trigger runs it N
    /// times. So a long jump over a short period takes long.
    ///
    /// Async triggers' iterations are polled here too, on the calling
    /// thread. At each instant the due runs start, and the
    /// [`VirtualClock::sleep`]s due end. Then the woken futures are polled
    /// until none is woken. So an iteration ends at the virtual time its
    /// future completes, and its re-arm counts from that time. A future may
    /// be pending on something other than virtual time, such as I/O like a
    /// `tokio::fs` read on Tokio's blocking pool. It is waited for in real
    /// time before the clock moves past it. So I/O takes no virtual time,
    /// and each run starts at its exact instant. Polls happen on the
    /// calling thread, inside its Tokio runtime if it has one. Call
    /// `advance` from `#[tokio::test]` for a task that does Tokio I/O.
    ///
    /// # Edge cases
    ///
    /// Time saturates at [`HORIZON`](Self::HORIZON), so
    /// `advance(Duration::MAX)` moves to the horizon. There every
    /// `fire_after` but `fire_after(Duration::ZERO)` returns
    /// [`FireError::DelayTooLong`](crate::FireError::DelayTooLong). A
    /// task's re-arm stops its chain there, as for any deadline past the
    /// clock's range. `fire` still runs.
    ///
    /// # Panics
    ///
    /// If runs or polls at one instant never stop, after a million of them.
    /// Time could never move on then. Such runs come from a task that
    /// re-arms itself with a zero delay, fires itself, or panics every time
    /// under a zero `RetryBackoff`. Such polls come from a future that
    /// wakes itself for ever. It also panics if an async iteration waits
    /// ten seconds of real time on something other than virtual time. A
    /// Tokio timer on the test's own runtime does that, because this thread
    /// would have to drive it. Use [`VirtualClock::sleep`] instead. No
    /// argument value panics.
    pub fn advance(&self, delay: Duration) -> usize {
        let target = self.driver.time.now_us().saturating_add(micros_up(delay));
        self.step_to(target.min(HORIZON_US))
    }

    /// Moves time forward to `at` since the scheduler was built, as
    /// [`advance`](Self::advance) does. A time in the past only runs what
    /// is due now.
    ///
    /// # Edge cases
    ///
    /// As in [`advance`](Self::advance), `at` saturates at
    /// [`HORIZON`](Self::HORIZON).
    ///
    /// # Panics
    ///
    /// As [`advance`](Self::advance).
    pub fn advance_to(&self, at: Duration) -> usize {
        self.step_to(micros_up(at).min(HORIZON_US))
    }

    /// The next time an iteration is due, if any is. It is now if a run is
    /// queued, from a `fire` or a re-run due at once. Else it is the
    /// earliest armed deadline, never later than it. A deadline since
    /// superseded may still be named until it passes. Its trigger was
    /// suspended, re-armed or dropped, or the scheduler shut down.
    /// Advancing to it then runs nothing.
    pub fn next_deadline(&self) -> Option<Duration> {
        let next = self.next_step();
        (next != u64::MAX).then(|| Duration::from_micros(next))
    }

    /// The time in µs of the next thing to do. It is now if a run is queued
    /// or a future woken. Else it is the earliest armed deadline or virtual
    /// sleep, or `u64::MAX` for none.
    fn next_step(&self) -> u64 {
        let shared = &self.scheduler.shared;
        let now_us = self.driver.time.now_us();
        self.driver.turn(shared, now_us);
        if self.driver.queued(shared) || self.jobs.any_woken() {
            return now_us;
        }
        self.driver.next_wake().min(self.sleepers.next())
    }

    /// `advance_to`, instant by instant up to `target_us`. At each instant
    /// it runs the due iterations, wakes the sleeps due, and polls the
    /// woken futures until nothing is left to do there. So an async
    /// iteration ends at the virtual time its future completes, as a sync
    /// one does. The re-arm it returns counts from there too.
    fn step_to(&self, target_us: u64) -> usize {
        /// Steps at one instant before concluding a task loops there.
        const SPIN_LIMIT: usize = 1_000_000;
        let shared = &self.scheduler.shared;
        let mut dispatched = 0;
        let mut at_this_instant = 0;
        loop {
            let now_us = self.driver.time.now_us();
            dispatched += self.driver.advance_to(shared, now_us);
            self.sleepers.wake_due(now_us);
            if self.jobs.poll_one() {
                at_this_instant += 1;
                assert!(
                    at_this_instant < SPIN_LIMIT,
                    "virtual time cannot advance: {SPIN_LIMIT} polls at {now_us} µs \
                     (a future wakes itself for ever?)"
                );
                continue;
            }
            at_this_instant = 0;
            // An iteration waiting on I/O takes no virtual time, such as a
            // `tokio::fs` read on the blocking pool. Wait for it in real
            // time before moving the clock past it.
            if self.jobs.wait_outside(OUTSIDE_PATIENCE) {
                panic!(
                    "virtual time cannot advance: an async iteration has waited {OUTSIDE_PATIENCE:?} \
                     (real time) on something other than virtual time — a Tokio timer? \
                     Use `VirtualClock::sleep` for delays on virtual time"
                );
            }
            if self.jobs.any_woken() {
                continue;
            }
            let next = self.next_step();
            if next > target_us {
                break;
            }
            self.driver.time.set_us(next.max(now_us));
        }
        dispatched + self.driver.advance_to(shared, target_us)
    }
}

/// How long in real time `advance` waits for an async iteration pending on
/// something other than virtual time, such as its I/O. After that it
/// concludes the iteration waits on what the advancing thread itself would
/// have to do.
const OUTSIDE_PATIENCE: Duration = Duration::from_secs(10);

/// `duration` in microseconds, rounded up so never early, and saturating.
fn micros_up(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX)
}

/// A virtual scheduler is a [`Scheduler`]. Every method of the real one,
/// shutdown and statistics included, works on it as written there. The
/// shutdowns poll its async iterations in flight, so they see a
/// `shutdown_now` without an `advance`. Its `await_termination` is `true`
/// at once unless an async iteration is in flight. One waiting on a
/// [`VirtualClock::sleep`] needs an `advance` to end.
impl std::ops::Deref for VirtualScheduler {
    type Target = Scheduler;

    fn deref(&self) -> &Scheduler {
        &self.scheduler
    }
}

/// Triggers bind to a virtual scheduler as to a real one, with
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

/// Drops the async iterations still in flight here, each ending as
/// cancelled. A runtime shutting down drops its tasks the same way. So none
/// keeps its trigger, or the graceful shutdown that follows, waiting.
impl Drop for VirtualScheduler {
    fn drop(&mut self) {
        self.scheduler.shutdown();
        while self.jobs.drop_all() > 0 {}
        self.sleepers.clear();
    }
}

/// Reads a [`VirtualScheduler`]'s time, and sleeps in it. It is cheap to
/// clone and safe to move into tasks.
#[derive(Clone)]
pub struct VirtualClock {
    time: Arc<ManualTime>,
    sleepers: Arc<Sleepers>,
}

impl VirtualClock {
    /// Virtual time since the scheduler was built.
    pub fn now(&self) -> Duration {
        Duration::from_micros(self.time.now_us())
    }

    /// A future that completes once virtual time has moved `delay` on. The
    /// delay is rounded up to a microsecond, and a zero delay completes at
    /// once. It is the stand-in for `tokio::time::sleep` in an async task
    /// tested on virtual time, whose [`advance`](VirtualScheduler::advance)
    /// moves the clock. A future awaiting a real timer there would wait in
    /// real time instead.
    ///
    /// # Examples
    ///
    /// An async refresh whose fetch takes 10 s, every 30 s after the last
    /// one ended. The test checks 95 virtual seconds in microseconds of
    /// real time.
    ///
    /// ```
    /// # #[cfg(feature = "tokio")] {
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::sync::{Arc, Mutex};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let (clock, starts) = (sim.clock(), Arc::new(Mutex::new(Vec::new())));
    /// let s = starts.clone();
    /// let refresh = Trigger::bind_async(&sim, move || {
    ///     let (clock, s) = (clock.clone(), s.clone());
    ///     async move {
    ///         s.lock().unwrap().push(clock.now().as_secs());
    ///         clock.sleep(Duration::from_secs(10)).await; // the fetch
    ///         Some(Duration::from_secs(30))
    ///     }
    /// });
    /// refresh.fire()?;
    /// sim.advance(Duration::from_secs(95));
    /// assert_eq!(*starts.lock().unwrap(), [0, 40, 80]);
    /// # }
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn sleep(&self, delay: Duration) -> impl Future<Output = ()> + Send + Sync + 'static {
        let at_us = self.time.now_us().saturating_add(micros_up(delay));
        self.sleep_until_us(at_us)
    }

    /// A future that completes once virtual time reaches `at`, counted
    /// since the scheduler was built. A time already passed completes at
    /// once. It works as [`sleep`](Self::sleep) does.
    pub fn sleep_until(&self, at: Duration) -> impl Future<Output = ()> + Send + Sync + 'static {
        self.sleep_until_us(micros_up(at))
    }

    fn sleep_until_us(&self, at_us: u64) -> Sleep {
        Sleep {
            time: Arc::clone(&self.time),
            sleepers: Arc::clone(&self.sleepers),
            at_us: at_us.min(HORIZON_US),
        }
    }
}

/// A [`VirtualClock::sleep`] in progress.
struct Sleep {
    time: Arc<ManualTime>,
    sleepers: Arc<Sleepers>,
    at_us: u64,
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.time.now_us() >= self.at_us {
            return Poll::Ready(());
        }
        self.sleepers.register(self.at_us, cx.waker());
        crate::scheduler::parked_on_virtual_time();
        // The clock may have passed `at_us` between the check and the
        // registration, by an `advance` on another thread. So look again.
        if self.time.now_us() >= self.at_us {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// The wakers of the futures waiting in virtual sleeps, with their times.
#[derive(Default)]
struct Sleepers(Mutex<Vec<(u64, Waker)>>);

impl Sleepers {
    fn register(&self, at_us: u64, waker: &Waker) {
        let mut list = lock(&self.0);
        if !list
            .iter()
            .any(|(at, w)| *at == at_us && w.will_wake(waker))
        {
            list.push((at_us, waker.clone()));
        }
    }

    /// The earliest time a sleep ends, or `u64::MAX` if none waits.
    fn next(&self) -> u64 {
        lock(&self.0)
            .iter()
            .map(|&(at, _)| at)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Wakes the sleeps ended by `now_us`. It wakes them outside the lock,
    /// because a waker may run code.
    fn wake_due(&self, now_us: u64) {
        let due: Vec<Waker> = {
            let mut list = lock(&self.0);
            let (due, waiting) = std::mem::take(&mut *list)
                .into_iter()
                .partition(|&(at, _)| at <= now_us);
            *list = waiting;
            due.into_iter().map(|(_, waker)| waker).collect::<Vec<_>>()
        };
        due.into_iter().for_each(Waker::wake);
    }

    fn clear(&self) {
        drop(std::mem::take(&mut *lock(&self.0)));
    }
}

impl fmt::Debug for VirtualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("VirtualClock").field(&self.now()).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
