//! The scheduler: one timer thread that owns the timing wheel and a pool of
//! worker threads that run iterations; lifecycle (shutdown, termination,
//! drop) and panic reporting.
//!
//! ```text
//!  fire_after ──▶ inbox ──▶ [timer thread: wheel] ──due──▶ run queue ──▶ [worker 1..n]
//!  fire ─────────────────────────────────────────────────▶ run queue
//! ```

mod inbox;
pub(crate) mod lifecycle;
pub(crate) mod manual;
mod run_queue;
mod timer;

pub(crate) use timer::Timer;
pub(crate) use timer::NO_KEY;

use crate::clock::Clock;
use crate::error::BuildError;
use crate::sync::{lock, Arc, AtomicBool, AtomicU64, Condvar, Mutex, Ordering};
use crossbeam_utils::CachePadded;
use inbox::Inbox;
use lifecycle::{Lifecycle, ShutdownReport};
use run_queue::RunQueue;
use std::any::Any;
use std::fmt;
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};

/// A panic caught in a task, as handed to the builder's panic hook.
#[derive(Debug, Clone)]
pub struct TaskPanic {
    trigger: Option<String>,
    message: String,
}

impl TaskPanic {
    /// The name of the trigger whose task panicked, if it has one.
    pub fn trigger(&self) -> Option<&str> {
        self.trigger.as_deref()
    }

    /// The panic message (`"<non-string panic payload>"` if it had none).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for TaskPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.trigger {
            Some(name) => write!(f, "task of trigger `{name}` panicked: {}", self.message),
            None => write!(f, "task panicked: {}", self.message),
        }
    }
}

type PanicHook = Box<dyn Fn(&TaskPanic) + Send + Sync>;

/// The text of a panic payload.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<non-string panic payload>".to_owned())
}

/// State shared by the scheduler's threads and every trigger bound to it.
pub(crate) struct Shared {
    pub(crate) clock: Clock,
    /// Deadlines are rounded up to a multiple of this (µs, ≥ 1).
    pub(crate) tick_us: u64,
    pub(crate) run_queue: CachePadded<RunQueue>,
    pub(crate) inbox: CachePadded<Inbox>,
    closed: AtomicBool,
    pub(crate) lifecycle: Lifecycle,
    /// How long `shutdown_now` and drop wait for iterations in flight.
    grace: Duration,
    panics: AtomicU64,
    panic_hook: Option<PanicHook>,
    /// The generator of `fire_within` on virtual time (seeded: the same
    /// test gives the same delays); the real scheduler uses a thread-local
    /// one instead, with no lock on the fire path.
    rng: Option<Mutex<fastrand::Rng>>,
    /// Threads started and not yet exited, and their bed.
    alive: Mutex<usize>,
    terminated: Condvar,
}

impl Shared {
    pub(crate) fn new(clock: Clock, tick_us: u64, panic_hook: Option<PanicHook>) -> Self {
        Self {
            clock,
            tick_us,
            run_queue: CachePadded::default(),
            inbox: CachePadded::default(),
            closed: AtomicBool::new(false),
            lifecycle: Lifecycle::default(),
            grace: DEFAULT_GRACE,
            panics: AtomicU64::new(0),
            panic_hook,
            rng: None,
            alive: Mutex::new(0),
            terminated: Condvar::new(),
        }
    }

    /// Whether shutdown has begun. Acquire: pairs with the Release in
    /// `close` (see there). A fire that passes this check may still race
    /// shutdown: it then re-checks after publishing (`Core::confirm`).
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Begins shutdown: refuse fires, discard armed runs (listing them in
    /// the report), wake every thread.
    fn close(&self) {
        // Release: pairs with the Acquire in `is_closed`, so whoever sees
        // the scheduler shut down also sees what the caller of `shutdown`
        // wrote before (`loom_shutdown` checks it). The internal protocol
        // does not rely on it: its edges run through the scan's RMWs on the
        // request and state words (see `lifecycle.rs`). The losing caller
        // of the swap reads nothing, so no Acquire half.
        if self.closed.swap(true, Ordering::Release) {
            return;
        }
        self.run_queue.close();
        self.inbox.close();
        self.lifecycle.scan(self.clock.now_us());
        #[cfg(feature = "tracing")]
        if let Some(report) = self.lifecycle.report() {
            tracing::info!(
                discarded = report.discarded().len(),
                in_flight = report.in_flight().len(),
                "scheduler shut down"
            );
        }
    }

    /// A uniformly random number in `0..bound` (`bound` > 0).
    pub(crate) fn random_below(&self, bound: u64) -> u64 {
        match &self.rng {
            Some(rng) => lock(rng).u64(..bound),
            None => fastrand::u64(..bound),
        }
    }

    pub(crate) fn report_panic(&self, trigger: Option<&str>, payload: &(dyn Any + Send)) {
        // Relaxed: a statistic; it orders nothing.
        self.panics.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        tracing::error!(
            trigger = trigger.unwrap_or("<unnamed>"),
            message = panic_message(payload).as_str(),
            "task panicked"
        );
        if let Some(hook) = &self.panic_hook {
            let report = TaskPanic {
                trigger: trigger.map(str::to_owned),
                message: panic_message(payload),
            };
            // A panicking hook must not take the worker down with it.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&report)));
        }
    }

    fn thread_exited(&self) {
        let mut alive = lock(&self.alive);
        *alive -= 1;
        // Every exit, not only the last: a task awaiting termination from
        // inside waits for all threads but its own.
        self.terminated.notify_all();
    }
}

/// Decrements the live-thread count when a scheduler thread ends, even by
/// unwinding.
struct ExitGuard(Arc<Shared>);

impl Drop for ExitGuard {
    fn drop(&mut self) {
        self.0.thread_exited();
    }
}

/// Default grace period of [`Scheduler::shutdown_now`] and of drop.
const DEFAULT_GRACE: Duration = Duration::from_secs(5);

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
///     .tick(Duration::from_micros(100))
///     .thread_name_prefix("refresh-")
///     .panic_hook(|panic| eprintln!("{panic}"))
///     .build()?;
/// # Ok::<(), circulation_trigger::BuildError>(())
/// ```
pub struct Builder {
    workers: Option<usize>,
    tick: Duration,
    prefix: String,
    panic_hook: Option<PanicHook>,
    grace: Duration,
    seed: u64,
}

impl fmt::Debug for Builder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("workers", &self.workers)
            .field("tick", &self.tick)
            .field("prefix", &self.prefix)
            .field("panic_hook", &self.panic_hook.is_some())
            .field("shutdown_grace", &self.grace)
            .finish()
    }
}

impl Builder {
    fn new() -> Self {
        Self {
            workers: None,
            tick: Duration::from_micros(1),
            prefix: "circulation-".to_owned(),
            panic_hook: None,
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
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Number of worker threads that run iterations (default: the
    /// machine's available parallelism).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = Some(workers);
        self
    }

    /// Timer resolution (default and minimum 1 µs): deadlines are rounded
    /// **up** to a multiple of it, so a coarser tick batches wake-ups.
    pub fn tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// Prefix of the threads' names (default `"circulation-"`), followed by
    /// `timer` or `worker-N`.
    pub fn thread_name_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Called (on the worker) with every panic caught in a task. The panic
    /// is also counted ([`Scheduler::panic_count`]) and the trigger stops
    /// circulating until fired again.
    pub fn panic_hook(mut self, hook: impl Fn(&TaskPanic) + Send + Sync + 'static) -> Self {
        self.panic_hook = Some(Box::new(hook));
        self
    }

    /// Builds a scheduler on **virtual time** instead: no threads, a clock
    /// at zero that moves only in [`VirtualScheduler::advance`](crate::VirtualScheduler::advance), which runs
    /// the due iterations on the calling thread. `workers` and
    /// `thread_name_prefix` do not apply; `tick` and `panic_hook` do.
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
    pub fn build_virtual(self) -> crate::VirtualScheduler {
        let time = Arc::new(crate::clock::ManualTime::default());
        let tick_us = u64::try_from(self.tick.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        let clock = Clock::Manual(Arc::clone(&time));
        let mut shared = Shared::new(clock, tick_us, self.panic_hook);
        shared.grace = self.grace;
        shared.rng = Some(Mutex::new(fastrand::Rng::with_seed(self.seed)));
        crate::VirtualScheduler::new(Scheduler::threadless(shared), time)
    }

    /// Starts the timer thread and the workers.
    ///
    /// # Errors
    ///
    /// [`BuildError::NoWorkers`] for `workers(0)`,
    /// [`BuildError::TickTooSmall`] for a tick under 1 µs, and
    /// [`BuildError::Spawn`] if a thread cannot be started (the threads
    /// already started are shut down and joined).
    pub fn build(self) -> Result<Scheduler, BuildError> {
        let workers = match self.workers {
            Some(0) => return Err(BuildError::NoWorkers),
            Some(n) => n,
            None => thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let tick_us = u64::try_from(self.tick.as_micros()).unwrap_or(u64::MAX);
        if tick_us == 0 {
            return Err(BuildError::TickTooSmall(self.tick));
        }
        let mut shared = Shared::new(Clock::real(), tick_us, self.panic_hook);
        shared.grace = self.grace;
        let shared = Arc::new(shared);
        let scheduler = Scheduler {
            shared,
            threads: Mutex::new(Vec::with_capacity(workers + 1)),
            finished: false,
        };
        scheduler.spawn(format!("{}timer", self.prefix), timer::run)?;
        for index in 0..workers {
            scheduler.spawn(format!("{}worker-{index}", self.prefix), worker_loop)?;
        }
        Ok(scheduler)
    }
}

/// Runs dispatches until the run queue closes.
fn worker_loop(shared: &Shared) {
    let _ = lifecycle::enter_thread(shared);
    while let Some(core) = shared.run_queue.pop_blocking() {
        if let Some(core) = core.upgrade() {
            core.dispatch();
        }
    }
}

/// Owns the timer thread and the worker pool that run triggers' tasks.
///
/// Dropping the scheduler shuts it down gracefully and joins its threads
/// (see [`shutdown`](Self::shutdown)).
///
/// # Examples
///
/// ```
/// use circulation_trigger::{Scheduler, Trigger};
/// use std::time::Duration;
///
/// let scheduler = Scheduler::new();
/// let trigger = Trigger::bind(&scheduler, || None);
/// trigger.fire().unwrap();
/// scheduler.shutdown();
/// assert!(scheduler.await_termination(Duration::from_secs(5)));
/// assert!(trigger.fire().is_err());
/// ```
pub struct Scheduler {
    pub(crate) shared: Arc<Shared>,
    threads: Mutex<Vec<(ThreadId, JoinHandle<()>)>>,
    /// Set once `finish` has run (by `close`), so drop does not wait again.
    finished: bool,
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("shutdown", &self.is_shutdown())
            .field("terminated", &self.is_terminated())
            .field("panics", &self.panic_count())
            .finish()
    }
}

impl Default for Scheduler {
    fn default() -> Self {
        Self::new()
    }
}

impl Scheduler {
    /// A scheduler with default settings (see [`Builder`]).
    ///
    /// # Panics
    ///
    /// If the operating system cannot start a thread; use
    /// [`Scheduler::builder`] to get the error instead.
    pub fn new() -> Self {
        match Self::builder().build() {
            Ok(scheduler) => scheduler,
            Err(error) => panic!("{error}"),
        }
    }

    /// A builder to configure workers, tick, thread names and panic hook.
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A scheduler without threads, driven by hand (virtual time, models).
    pub(crate) fn threadless(shared: Shared) -> Self {
        Self {
            shared: Arc::new(shared),
            threads: Mutex::new(Vec::new()),
            finished: false,
        }
    }

    fn spawn(&self, name: String, body: fn(&Shared)) -> Result<(), BuildError> {
        let shared = Arc::clone(&self.shared);
        *lock(&shared.alive) += 1;
        let spawned = thread::Builder::new().name(name).spawn(move || {
            let guard = ExitGuard(shared);
            body(&guard.0);
        });
        match spawned {
            Ok(handle) => {
                lock(&self.threads).push((handle.thread().id(), handle));
                Ok(())
            }
            Err(error) => {
                self.shared.thread_exited();
                self.shutdown();
                self.join_all();
                Err(BuildError::Spawn(error))
            }
        }
    }

    /// Graceful shutdown: `fire`/`fire_after` now return
    /// [`FireError::Shutdown`](crate::FireError::Shutdown), armed runs are
    /// discarded, iterations in flight finish, then every thread exits.
    /// Idempotent; callable from any thread, including from inside a task.
    /// Does not wait: see [`await_termination`](Self::await_termination).
    pub fn shutdown(&self) {
        self.shared.close();
    }

    /// Abrupt shutdown: as [`shutdown`](Self::shutdown), and iterations in
    /// flight are told to stop early ([`cancelled`](crate::cancelled) turns
    /// `true`). Waits up to the grace period
    /// ([`Builder::shutdown_grace`]) for them, then returns the report:
    /// every armed run discarded, every iteration in flight with its
    /// outcome.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// let scheduler = Scheduler::new();
    /// let trigger = Trigger::builder(&scheduler).name("nightly").bind(|| None);
    /// trigger.fire_after(Duration::from_secs(3600))?;
    /// let report = scheduler.shutdown_now();
    /// assert_eq!(report.discarded()[0].trigger(), Some("nightly"));
    /// assert!(report.in_flight().is_empty());
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn shutdown_now(&self) -> ShutdownReport {
        // Close (and scan) first, so the iterations told to stop are the
        // ones the report lists in flight.
        self.shared.close();
        // Relaxed: `cancelled()` only answers "was shutdown_now called?";
        // no data is handed to the task through it.
        self.shared.lifecycle.cancel.store(true, Ordering::Relaxed);
        self.await_termination(self.shared.grace);
        self.shutdown_report().unwrap_or_default()
    }

    /// The shutdown report so far: `None` before shutdown; after it, the
    /// armed runs discarded and the iterations in flight (outcomes fill in
    /// as they end).
    pub fn shutdown_report(&self) -> Option<ShutdownReport> {
        self.shared.lifecycle.report()
    }

    /// Whether [`shutdown`](Self::shutdown) has been called.
    pub fn is_shutdown(&self) -> bool {
        self.shared.is_closed()
    }

    /// Whether every thread of the scheduler has exited.
    pub fn is_terminated(&self) -> bool {
        *lock(&self.shared.alive) == 0
    }

    /// Waits up to `timeout` for every thread to exit after a shutdown;
    /// returns whether they all did. Called from inside a task, it waits
    /// for the *other* threads (the calling worker exits when its task
    /// returns).
    pub fn await_termination(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let me = thread::current().id();
        let own = usize::from(lock(&self.threads).iter().any(|(id, _)| *id == me));
        let mut alive = lock(&self.shared.alive);
        while *alive > own {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            alive = crate::sync::wait_timeout(&self.shared.terminated, alive, left);
        }
        true
    }

    /// Statistics of every live trigger (named ones first, by name) and
    /// their totals.
    pub fn stats(&self) -> crate::SchedulerStats {
        let triggers = self
            .shared
            .lifecycle
            .live()
            .iter()
            .map(|core| core.stats())
            .collect();
        crate::SchedulerStats::new(triggers, self.panic_count())
    }

    /// Number of panics caught in tasks so far.
    pub fn panic_count(&self) -> u64 {
        // Relaxed: a statistic.
        self.shared.panics.load(Ordering::Relaxed)
    }

    /// What drop does, returning the final report: a graceful shutdown,
    /// then waiting up to the grace period ([`Builder::shutdown_grace`])
    /// and joining every thread; a thread whose task has not returned by
    /// then is detached, not waited for, and counted in
    /// [`ShutdownReport::detached_threads`].
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// let scheduler = Scheduler::new();
    /// let trigger = Trigger::builder(&scheduler).name("hourly").bind(|| None);
    /// trigger.fire_after(Duration::from_secs(3600))?;
    /// let report = scheduler.close();
    /// assert_eq!(report.discarded().len(), 1);
    /// assert_eq!(report.detached_threads(), 0);
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn close(mut self) -> ShutdownReport {
        self.finish();
        self.shutdown_report().unwrap_or_default()
    }

    /// Shuts down, waits up to the grace period, detaches what is left,
    /// joins the rest. Idempotent.
    fn finish(&mut self) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        self.shutdown();
        if !self.await_termination(self.shared.grace) {
            let me = thread::current().id();
            let mut threads = lock(&self.threads);
            let before = threads.len();
            threads.retain(|(id, handle)| *id == me || handle.is_finished());
            self.shared.lifecycle.detached(before - threads.len());
        }
        self.join_all();
    }

    /// Joins every thread but the current one (a task dropping its own
    /// scheduler must not wait for itself: that thread exits when the task
    /// returns).
    fn join_all(&self) {
        let me = thread::current().id();
        let threads = std::mem::take(&mut *lock(&self.threads));
        for (id, handle) in threads {
            if id != me {
                let _ = handle.join();
            }
        }
    }
}

impl Drop for Scheduler {
    /// Shuts down gracefully and joins every thread (except the calling
    /// one, if a task drops its own scheduler). Threads whose task has not
    /// returned within the grace period ([`Builder::shutdown_grace`]) are
    /// detached rather than waited for, and counted in the report.
    fn drop(&mut self) {
        self.finish();
    }
}
