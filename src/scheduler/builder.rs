//! [`Builder`] holds the scheduler's settings and starts its threads.

use super::pool::{Limits, Pool};
use super::report::{PanicHook, StuckHook};
use super::shared::{Shared, DEFAULT_GRACE};
use super::timer::Timer;
use super::Scheduler;
use crate::clock::{Clock, ManualTime};
use crate::error::BuildError;
use crate::sync::{Arc, Mutex};
use std::fmt;
use std::thread;
use std::time::Duration;

/// Default [`Builder::stall_threshold`].
const DEFAULT_STALL: Duration = Duration::from_millis(10);
/// The shortest keep-alive an extra worker gets, whatever
/// [`Builder::worker_keep_alive`] asks.
const MIN_KEEP_ALIVE: Duration = Duration::from_millis(1);
/// Default [`Builder::worker_keep_alive`].
const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(10);
/// Default [`Builder::max_workers`]. Tokio's blocking pool uses the same.
const DEFAULT_MAX_WORKERS: usize = 512;
/// The most worker threads a scheduler has at once. It is above any
/// machine's parallelism and far below what would exhaust the operating
/// system.
const MAX_WORKERS: usize = 1_024;
/// The finest tick, which is the timer's resolution.
const MIN_TICK: Duration = Duration::from_micros(1);
/// The coarsest tick. A deadline rounded up by more than an hour would be a
/// different deadline, not a batched one.
const MAX_TICK: Duration = Duration::from_secs(3_600);

/// Configures and starts a [`Scheduler`].
///
/// # Examples
///
/// ```
/// use circulation_trigger::Scheduler;
/// use std::time::Duration;
///
/// let scheduler = Scheduler::builder()
///     .workers(2)
///     .max_workers(64)
///     .tick(Duration::from_micros(100))
///     .thread_name_prefix("refresh-")
///     .panic_hook(|panic| eprintln!("{panic}"))
///     .build()?;
/// # Ok::<(), circulation_trigger::BuildError>(())
/// ```
#[must_use = "a builder does nothing until `build` or `build_virtual` is called"]
pub struct Builder {
    workers: Option<usize>,
    max_workers: usize,
    stall: Duration,
    keep_alive: Duration,
    tick: Duration,
    coalesce: bool,
    prefix: String,
    panic_hook: Option<PanicHook>,
    stuck_hook: Option<StuckHook>,
    grace: Duration,
    seed: u64,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("max_workers", &self.max_workers)
            .field("stall_threshold", &self.stall)
            .field("worker_keep_alive", &self.keep_alive)
            .field("tick", &self.tick)
            .field("coalesce_periodic", &self.coalesce)
            .field("prefix", &self.prefix)
            .field("panic_hook", &self.panic_hook.is_some())
            .field("stuck_hook", &self.stuck_hook.is_some())
            .field("shutdown_grace", &self.grace)
            .finish()
    }
}

impl Builder {
    pub(super) fn new() -> Self {
        Self {
            workers: None,
            max_workers: DEFAULT_MAX_WORKERS,
            stall: DEFAULT_STALL,
            keep_alive: DEFAULT_KEEP_ALIVE,
            tick: Duration::from_micros(1),
            coalesce: true,
            prefix: "circulation-".to_owned(),
            panic_hook: None,
            stuck_hook: None,
            grace: DEFAULT_GRACE,
            seed: 0x5EED,
        }
    }

    /// Seed of [`Trigger::fire_within`](crate::Trigger::fire_within)'s
    /// random delays on a virtual-time scheduler. The default is fixed, so
    /// a test is deterministic. The real scheduler always draws from a
    /// thread-local generator.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// How long [`Scheduler::shutdown_now`] and dropping the scheduler wait
    /// for iterations in flight. The default is five seconds. Drop then
    /// detaches the threads whose task has not returned, and the report
    /// counts them. A task that never returns must not hang `drop`.
    ///
    /// # Edge cases
    ///
    /// Any duration is accepted. `Duration::ZERO` does not wait.
    /// `Duration::MAX` waits as long as the iterations in flight take, and
    /// so does any grace past the clock's range.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Number of worker threads started with the scheduler. The default is
    /// the machine's available parallelism. They never retire. When all of
    /// them are busy and work waits past the
    /// [stall threshold](Self::stall_threshold), more are started, up to
    /// [`max_workers`](Self::max_workers).
    ///
    /// # Edge cases
    ///
    /// [`build`](Self::build) refuses `0` with [`BuildError::NoWorkers`].
    /// It refuses more than 1,024 with [`BuildError::TooManyWorkers`].
    /// [`build_virtual`](Self::build_virtual) has no workers and ignores
    /// the count.
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = Some(workers);
        self
    }

    /// The most worker threads that may exist at once. The default is 512.
    /// A value below [`workers`](Self::workers) is raised to it, and one
    /// above 1,024 is lowered to 1,024. When every worker is busy the runs
    /// wait, and
    /// [`SchedulerStats::worker_limit_hits`](crate::report::SchedulerStats::worker_limit_hits)
    /// counts it. With the `tracing` feature, a warning says so too.
    /// `max_workers(n)` equal to `workers(n)` gives a fixed pool.
    pub fn max_workers(mut self, max: usize) -> Self {
        self.max_workers = max;
        self
    }

    /// How long work may wait while every worker is busy before another
    /// worker starts. The default is ten milliseconds. Any value is
    /// accepted, and a value below a hundred microseconds counts as a
    /// hundred microseconds. A task that blocks therefore delays another
    /// trigger's start by about this much at most, while the
    /// [worker limit](Self::max_workers) is not reached.
    pub fn stall_threshold(mut self, threshold: Duration) -> Self {
        self.stall = threshold;
        self
    }

    /// How long a worker started beyond [`workers`](Self::workers) stays
    /// idle before it exits. The default is ten seconds. Any value is
    /// accepted, and a value below one millisecond counts as one
    /// millisecond. An extra worker holding the timer role sleeps at most
    /// this long at a time.
    pub fn worker_keep_alive(mut self, keep_alive: Duration) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// Timer resolution. The default and the minimum are one microsecond.
    /// Deadlines are rounded **up** to a multiple of it, so a coarser tick
    /// batches wake-ups. A delay a task returns is then also rounded up
    /// onto its coalescing grid, as
    /// [`coalesce_periodic`](Self::coalesce_periodic) describes. That may
    /// leave it off the tick's multiples, but only later, never earlier.
    ///
    /// # Edge cases
    ///
    /// The tick is clamped to between one microsecond and one hour, on both
    /// [`build`](Self::build) and [`build_virtual`](Self::build_virtual).
    /// So `tick(Duration::ZERO)` means one microsecond, and
    /// `tick(Duration::MAX)` means one hour.
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick.clamp(MIN_TICK, MAX_TICK);
        self
    }

    /// Whether the delay a task *returns* may be served a little late, so
    /// that many periodic triggers share wake-ups. The default is `true`.
    ///
    /// With it on, the next run after a returned delay `d` is rounded
    /// **up** onto a grid of at most `min(d / 500, 2 ms)`. The grid steps
    /// are 1, 2, 5, 10, 20, 50, 100, 200 and 500 microseconds, then one and
    /// two milliseconds. So a one-second period may start up to two
    /// milliseconds late. A period of a hundred milliseconds may start up
    /// to two hundred microseconds late. Neither starts early. A period
    /// that is a whole number of steps of its grid, started on that grid,
    /// stays exact, as it does on virtual time: a one-second period started
    /// at an even millisecond, say. 100,000 one-second triggers then cost
    /// about 500 wake-ups per second instead of a hundred thousand.
    /// [`fire`](crate::Trigger::fire) and
    /// [`fire_after`](crate::Trigger::fire_after) are always served at the
    /// tick's precision. With `false`, returned delays are served that way
    /// too.
    pub fn coalesce_periodic(mut self, coalesce: bool) -> Self {
        self.coalesce = coalesce;
        self
    }

    /// Prefix of the threads' names, followed by `worker-N` or `monitor`.
    /// The default is `"circulation-"`.
    ///
    /// # Edge cases
    ///
    /// [`build`](Self::build) refuses a prefix containing a NUL byte with
    /// [`BuildError::InvalidThreadName`]. Empty and very long prefixes are
    /// accepted. The operating system may shorten the name it shows.
    /// [`build_virtual`](Self::build_virtual) starts no thread and ignores
    /// the prefix.
    pub fn thread_name_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Called with every panic caught in a task, on the thread that ran it.
    /// That thread is a worker, or for an async task a thread of its
    /// runtime. The hook runs after the panic is counted in
    /// [`SchedulerStats::panics`](crate::report::SchedulerStats::panics) and in the trigger's statistics. The
    /// trigger then stops circulating until fired again, unless its
    /// [`PanicPolicy`](crate::policy::PanicPolicy) retries. The standard
    /// library's panic hook runs too, when the task panics and before this
    /// one. It prints the message, with a backtrace under `RUST_BACKTRACE`.
    /// Set [`std::panic::set_hook`] to quiet it.
    pub fn panic_hook(mut self, hook: impl Fn(&super::TaskPanic) + Send + Sync + 'static) -> Self {
        self.panic_hook = Some(Box::new(hook));
        self
    }

    /// Called on the scheduler's monitor thread, once for every run in
    /// flight longer than its trigger's
    /// [`stuck_after`](crate::policy::TriggerPolicies::stuck_after). The run goes
    /// on, and [`TriggerStats::stuck`](crate::report::TriggerStats::stuck) marks
    /// it.
    ///
    /// Keep it short and never let it block. Logging, counting, or sending
    /// on an unbounded channel are fine. While it runs, the monitor looks
    /// at nothing else. It replaces no stalled worker, which G14 counts on,
    /// and reports no other stuck run. A panic in it is caught and ignored.
    pub fn stuck_hook(
        mut self,
        hook: impl Fn(&crate::policy::trigger::StuckRun) + Send + Sync + 'static,
    ) -> Self {
        self.stuck_hook = Some(Box::new(hook));
        self
    }

    /// The tick in whole µs, at least 1. [`tick`](Self::tick) has clamped it.
    fn tick_us(&self) -> u64 {
        u64::try_from(self.tick.as_micros())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// The elastic limits for `core` workers.
    fn limits(&self, core: usize) -> Limits {
        Limits {
            core,
            max: self.max_workers.clamp(core, MAX_WORKERS.max(core)),
            stall: self.stall.max(Duration::from_micros(100)),
            keep_alive: self.keep_alive.max(MIN_KEEP_ALIVE),
        }
    }

    /// The shared state both kinds of scheduler start from.
    fn shared(self, clock: Clock, pool: Pool<Shared>, limits: Limits) -> Shared {
        let tick_us = self.tick_us();
        let mut shared = Shared::new(clock, tick_us, self.panic_hook, pool, limits);
        shared.grace = self.grace;
        shared.timing.coalesce = self.coalesce;
        shared.prefix = self.prefix;
        shared.stuck_hook = self.stuck_hook;
        shared
    }

    /// The thread-less scheduler under a
    /// [`VirtualScheduler`](crate::testing::VirtualScheduler), on the manual clock
    /// `time`. The virtual driver holds its timer role for good.
    pub(crate) fn build_threadless(self, time: &Arc<ManualTime>) -> Scheduler {
        let clock = Clock::Manual(Arc::clone(time));
        let seed = self.seed;
        let limits = self.limits(0);
        // The driver holds the timer role for good, so the pool has none.
        let mut shared = self.shared(clock, Pool::new(None), limits);
        shared.rng = Some(Mutex::new(fastrand::Rng::with_seed(seed)));
        Scheduler::threadless(shared)
    }

    /// Starts the worker threads and the monitor.
    ///
    /// # Errors
    ///
    /// [`BuildError::NoWorkers`] for `workers(0)`,
    /// [`BuildError::TooManyWorkers`] for more than 1,024 workers, and
    /// [`BuildError::InvalidThreadName`] for a thread name prefix with a
    /// NUL byte. All three come before any thread starts.
    /// [`BuildError::Spawn`] if a thread cannot be started. The threads
    /// already started are then shut down and joined.
    pub fn build(self) -> Result<Scheduler, BuildError> {
        let workers = match self.workers {
            Some(0) => return Err(BuildError::NoWorkers),
            Some(requested) if requested > MAX_WORKERS => {
                return Err(BuildError::TooManyWorkers {
                    requested,
                    max: MAX_WORKERS,
                })
            }
            Some(n) => n,
            None => thread::available_parallelism().map_or(1, |n| n.get().min(MAX_WORKERS)),
        };
        // `std::thread::Builder::spawn` panics on a name with a NUL byte.
        if self.prefix.contains('\0') {
            return Err(BuildError::InvalidThreadName(self.prefix));
        }
        let clock = Clock::real();
        let pool = Pool::new(Some(Box::new(Timer::new(clock.now_us()))));
        let limits = self.limits(workers);
        let scheduler = Scheduler::threaded(self.shared(clock, pool, limits));
        scheduler.start(workers)?;
        Ok(scheduler)
    }
}
