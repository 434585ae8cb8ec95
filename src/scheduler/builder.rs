//! [`Builder`]: the scheduler's settings, and starting its threads.

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
/// The shortest keep-alive an extra worker gets (see
/// [`Builder::worker_keep_alive`]).
const MIN_KEEP_ALIVE: Duration = Duration::from_millis(1);
/// Default [`Builder::worker_keep_alive`].
const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(10);
/// Default [`Builder::max_workers`] (tokio's blocking pool uses the same).
const DEFAULT_MAX_WORKERS: usize = 512;
/// The most worker threads a scheduler has at once: above any machine's
/// parallelism, far below what would exhaust the operating system.
const MAX_WORKERS: usize = 1_024;
/// The finest tick: the timer's resolution.
const MIN_TICK: Duration = Duration::from_micros(1);
/// The coarsest tick: a deadline rounded up by more than an hour would be
/// a different deadline, not a batched one.
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
    /// random delays on a virtual-time scheduler (default fixed, so a test
    /// is deterministic). The real scheduler always draws from a
    /// thread-local generator.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// How long [`Scheduler::shutdown_now`] and dropping the scheduler wait
    /// for iterations in flight (default 5 s). Drop then detaches the
    /// threads whose task has not returned (a task that never returns
    /// must not hang `drop`), and the report counts them.
    ///
    /// # Edge cases
    ///
    /// None: any duration is accepted. `Duration::ZERO` does not wait;
    /// `Duration::MAX` (or any grace past the clock's range) waits as long
    /// as the iterations in flight take.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Number of worker threads started with the scheduler (default: the
    /// machine's available parallelism). They never retire; when all of
    /// them are busy and work waits past the
    /// [stall threshold](Self::stall_threshold), more are started, up to
    /// [`max_workers`](Self::max_workers).
    ///
    /// # Edge cases
    ///
    /// [`build`](Self::build) refuses `0` ([`BuildError::NoWorkers`]) and
    /// more than 1,024 ([`BuildError::TooManyWorkers`]);
    /// [`build_virtual`](Self::build_virtual) has no workers and ignores
    /// the count.
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = Some(workers);
        self
    }

    /// The most worker threads that may exist at once (default 512; raised
    /// to [`workers`](Self::workers) if lower, lowered to 1,024 if higher). When every one is busy
    /// the runs wait, and [`SchedulerStats::worker_limit_hits`](crate::SchedulerStats::worker_limit_hits)
    /// counts it (and a `tracing` warning says so, with that feature).
    /// `max_workers(n)` equal to `workers(n)` gives a fixed pool.
    pub fn max_workers(mut self, max: usize) -> Self {
        self.max_workers = max;
        self
    }

    /// How long work may wait while every worker is busy before another
    /// worker starts (default 10 ms; any value is accepted, and below
    /// 100 µs it counts as 100 µs). A task that blocks
    /// therefore delays another trigger's start by about this much at most,
    /// while the [worker limit](Self::max_workers) is not reached.
    pub fn stall_threshold(mut self, threshold: Duration) -> Self {
        self.stall = threshold;
        self
    }

    /// How long a worker started beyond [`workers`](Self::workers) stays
    /// idle before it exits (default 10 s; any value is accepted, and below
    /// 1 ms it counts as 1 ms — an extra worker holding the timer role
    /// sleeps at most this long at a time).
    pub fn worker_keep_alive(mut self, keep_alive: Duration) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// Timer resolution (default and minimum 1 µs): deadlines are rounded
    /// **up** to a multiple of it, so a coarser tick batches wake-ups. A
    /// delay a task returns is then also rounded up onto its coalescing
    /// grid (see [`coalesce_periodic`](Self::coalesce_periodic)), which
    /// may leave it off the tick's multiples — later, never earlier.
    ///
    /// # Edge cases
    ///
    /// None: the tick is clamped to 1 µs ..= 1 hour, on both
    /// [`build`](Self::build) and [`build_virtual`](Self::build_virtual):
    /// `tick(Duration::ZERO)` means 1 µs, `tick(Duration::MAX)` one hour.
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick.clamp(MIN_TICK, MAX_TICK);
        self
    }

    /// Whether the delay a task *returns* may be served a little late so
    /// that many periodic triggers share wake-ups (default `true`).
    ///
    /// With it on, the next run after a returned delay `d` is rounded **up**
    /// onto a grid of at most `min(d / 1000, 1 ms)`, in 1-2-5 steps (1, 2,
    /// 5, 10, … 500 µs, 1 ms): a 1 s period may start up to 1 ms late, a
    /// 100 ms period up to 100 µs late, never early; a round period started
    /// at a round time (as on virtual time) stays exact. 100,000
    /// one-second triggers then cost about a thousand wake-ups per second
    /// instead of a hundred thousand. [`fire`](crate::Trigger::fire) and
    /// [`fire_after`](crate::Trigger::fire_after) are always served at
    /// the tick's precision; `false` serves returned delays that way too.
    pub fn coalesce_periodic(mut self, coalesce: bool) -> Self {
        self.coalesce = coalesce;
        self
    }

    /// Prefix of the threads' names (default `"circulation-"`), followed by
    /// `worker-N` or `monitor`.
    ///
    /// # Edge cases
    ///
    /// [`build`](Self::build) refuses a prefix containing a NUL byte
    /// ([`BuildError::InvalidThreadName`]); empty and very long prefixes
    /// are accepted (the operating system may shorten the name it shows).
    /// [`build_virtual`](Self::build_virtual) starts no thread and ignores
    /// the prefix.
    pub fn thread_name_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Called with every panic caught in a task, on the thread that ran it
    /// (a worker, or for an async task a thread of its runtime), after the
    /// panic is counted ([`Scheduler::panic_count`] and the trigger's
    /// statistics). The trigger then stops circulating until fired again,
    /// unless its [`PanicPolicy`](crate::PanicPolicy) retries.
    pub fn panic_hook(mut self, hook: impl Fn(&super::TaskPanic) + Send + Sync + 'static) -> Self {
        self.panic_hook = Some(Box::new(hook));
        self
    }

    /// Called (on the scheduler's monitor thread) once for every run in
    /// flight longer than its trigger's
    /// [`stuck_after`](crate::TriggerBuilder::stuck_after). The run goes on;
    /// [`TriggerStats::stuck`](crate::TriggerStats::stuck) marks it.
    ///
    /// Keep it short and never let it block (log, count, send on an
    /// unbounded channel): while it runs, the monitor looks at nothing
    /// else — no stalled worker is replaced (G14) and no other stuck run
    /// is reported. A panic in it is caught and ignored.
    pub fn stuck_hook(
        mut self,
        hook: impl Fn(&crate::policy::StuckRun) + Send + Sync + 'static,
    ) -> Self {
        self.stuck_hook = Some(Box::new(hook));
        self
    }

    /// The tick (clamped by [`tick`](Self::tick)) in whole µs, at least 1.
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
    /// [`VirtualScheduler`](crate::VirtualScheduler), on the manual clock
    /// `time` (the virtual driver holds its timer role for good).
    pub(crate) fn build_threadless(self, time: &Arc<ManualTime>) -> Scheduler {
        let clock = Clock::Manual(Arc::clone(time));
        let seed = self.seed;
        let limits = self.limits(0);
        // The driver holds the timer role for good: the pool has none.
        let mut shared = self.shared(clock, Pool::new(None), limits);
        shared.rng = Some(Mutex::new(fastrand::Rng::with_seed(seed)));
        Scheduler::threadless(shared)
    }

    /// Starts the worker threads and the monitor.
    ///
    /// # Errors
    ///
    /// [`BuildError::NoWorkers`] for `workers(0)`,
    /// [`BuildError::TooManyWorkers`] for more than 1,024 workers,
    /// [`BuildError::InvalidThreadName`] for a thread name prefix with a
    /// NUL byte (all three before any thread starts), and
    /// [`BuildError::Spawn`] if a thread cannot be started (the threads
    /// already started are shut down and joined).
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
