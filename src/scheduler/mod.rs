//! The scheduler: an elastic pool of worker threads that run iterations
//! and take turns holding the timer role (the timing wheel), a monitor
//! that grows the pool when every worker is busy; lifecycle (shutdown,
//! termination, drop) and panic reporting.
//!
//! ```text
//!  fire_after ──▶ inbox ──▶ [role holder: wheel] ──due──▶ runs the first itself, queues the rest
//!  fire ──────────────────────────────────────────────▶ run queue ──▶ [most recently idle worker]
//! ```
//!
//! Files: `builder.rs` (settings, start), `pool.rs` (the one lock: queue,
//! inbox, timer role, idle beds, worker counts), `inbox.rs` (the timer's
//! wake-up protocol), `timer.rs` (the wheel's use), `worker.rs` (worker
//! and monitor loops), `lifecycle.rs` (shutdown report), `manual.rs`
//! (the thread-less driver of virtual time and the loom models).

mod builder;
mod inbox;
pub(crate) mod lifecycle;
pub(crate) mod manual;
pub(crate) mod pool;
mod timer;
mod worker;

pub use builder::Builder;
pub(crate) use timer::Timer;
pub(crate) use timer::NO_KEY;
#[cfg(loom)]
pub(crate) use worker::run_worker;

use crate::clock::Clock;
use crate::error::BuildError;
use crate::sync::{lock, Arc, AtomicBool, AtomicU64, Condvar, Mutex, Ordering};
use crossbeam_utils::CachePadded;
use lifecycle::{Lifecycle, ShutdownReport};
use pool::{Limits, Pool};
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
type StuckHook = Box<dyn Fn(&crate::StuckRun) + Send + Sync>;

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
    /// Whether delays returned by tasks may share wake-ups (see
    /// [`Builder::coalesce_periodic`]).
    pub(crate) coalesce: bool,
    pub(crate) pool: CachePadded<Pool>,
    pub(crate) limits: Limits,
    closed: AtomicBool,
    pub(crate) lifecycle: Lifecycle,
    /// How long `shutdown_now` and drop wait for iterations in flight.
    grace: Duration,
    panics: AtomicU64,
    panic_hook: Option<PanicHook>,
    /// Called by the monitor for each run reported stuck.
    stuck_hook: Option<StuckHook>,
    /// The generator of `fire_within` on virtual time (seeded: the same
    /// test gives the same delays); the real scheduler uses a thread-local
    /// one instead, with no lock on the fire path.
    rng: Option<Mutex<fastrand::Rng>>,
    /// Threads started and not yet exited, and their bed.
    alive: Mutex<usize>,
    terminated: Condvar,
    /// Every thread started (the monitor adds workers as it starts them).
    threads: Mutex<Vec<(ThreadId, JoinHandle<()>)>>,
    /// Thread names: this prefix, then `worker-N` or `monitor`.
    prefix: String,
    /// The index of the next worker's name.
    next_worker: AtomicU64,
}

impl Shared {
    pub(crate) fn new(
        clock: Clock,
        tick_us: u64,
        panic_hook: Option<PanicHook>,
        pool: Pool,
        limits: Limits,
    ) -> Self {
        Self {
            clock,
            tick_us,
            coalesce: true,
            pool: CachePadded::new(pool),
            limits,
            closed: AtomicBool::new(false),
            lifecycle: Lifecycle::default(),
            grace: DEFAULT_GRACE,
            panics: AtomicU64::new(0),
            panic_hook,
            stuck_hook: None,
            rng: None,
            alive: Mutex::new(0),
            terminated: Condvar::new(),
            threads: Mutex::new(Vec::new()),
            prefix: String::new(),
            next_worker: AtomicU64::new(0),
        }
    }

    /// Starts a scheduler thread running `body`, counted alive until it
    /// ends, and keeps its handle for joining.
    fn spawn(self: &Arc<Self>, name: String, body: fn(&Arc<Shared>)) -> std::io::Result<()> {
        let shared = Arc::clone(self);
        *lock(&self.alive) += 1;
        let spawned = thread::Builder::new().name(name).spawn(move || {
            let guard = ExitGuard(shared);
            body(&guard.0);
        });
        match spawned {
            Ok(handle) => {
                let mut threads = lock(&self.threads);
                // Retired workers' handles: their threads have ended.
                threads.retain(|(_, handle)| !handle.is_finished());
                threads.push((handle.thread().id(), handle));
                Ok(())
            }
            Err(error) => {
                self.thread_exited();
                Err(error)
            }
        }
    }

    /// Starts a worker (`extra`: one that retires when idle).
    fn spawn_worker(self: &Arc<Self>, extra: bool) -> std::io::Result<()> {
        // Relaxed: a name counter; it orders nothing.
        let index = self.next_worker.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}worker-{index}", self.prefix);
        let body = if extra {
            |shared: &Arc<Shared>| worker::run_worker(shared, true)
        } else {
            |shared: &Arc<Shared>| worker::run_worker(shared, false)
        };
        self.spawn(name, body)
    }

    /// Whether shutdown has begun. Acquire: pairs with the Release in
    /// `begin_shutdown` (see there). A fire that passes this check may still race
    /// shutdown: it then re-checks after publishing (`Core::confirm`).
    #[inline]
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Begins shutdown: refuse fires, discard armed runs (listing them in
    /// the report), wake every thread.
    fn begin_shutdown(&self) {
        // Release: pairs with the Acquire in `is_closed`, so whoever sees
        // the scheduler shut down also sees what the caller of `shutdown`
        // wrote before (`loom_shutdown` checks it). The internal protocol
        // does not rely on it: its edges run through the scan's RMWs on the
        // request and state words (see `lifecycle.rs`). The losing caller
        // of the swap reads nothing, so no Acquire half.
        if self.closed.swap(true, Ordering::Release) {
            return;
        }
        self.pool.close();
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

    /// A run of `core` has been in flight for `running_for_us`, past its
    /// `stuck_after`: report it (the monitor, once per run).
    pub(crate) fn report_stuck(&self, core: &crate::core::Core, running_for_us: u64) {
        let report = crate::StuckRun {
            trigger: core.name().map(str::to_owned),
            running_for: Duration::from_micros(running_for_us),
        };
        #[cfg(feature = "tracing")]
        tracing::warn!(
            trigger = report.trigger().unwrap_or("<unnamed>"),
            running_for = ?report.running_for(),
            "run stuck"
        );
        if let Some(hook) = &self.stuck_hook {
            // A panicking hook must not take the monitor down with it.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&report)));
        }
    }

    /// An async iteration was spawned: counted alive (like a thread) until
    /// it ends, so shutdown waits for it.
    pub(crate) fn alive_started(&self) {
        *lock(&self.alive) += 1;
    }

    /// An async iteration ended.
    pub(crate) fn alive_ended(&self) {
        self.thread_exited();
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

/// Starts a worker the monitor asked for (already counted in the pool); a
/// failure to start one is uncounted and reported, never fatal.
fn start_extra_worker(shared: &Arc<Shared>) {
    if let Err(_error) = shared.spawn_worker(true) {
        shared.pool.worker_not_started();
        #[cfg(feature = "tracing")]
        tracing::error!(error = %_error, "could not start an extra worker");
    }
}

/// Owns the worker threads that run triggers' tasks and the monitor that
/// grows their number when every worker is busy.
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
    /// Set once `finish` has run (by `shutdown_and_join`), so drop does not
    /// wait again.
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

/// Lets [`Trigger::bind`](crate::Trigger::bind) take a `Scheduler` or a
/// [`VirtualScheduler`](crate::VirtualScheduler) alike.
impl AsRef<Scheduler> for Scheduler {
    fn as_ref(&self) -> &Scheduler {
        self
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
            finished: false,
        }
    }

    /// A scheduler whose threads [`start`](Self::start) will start.
    fn threaded(shared: Shared) -> Self {
        Self::threadless(shared)
    }

    /// Starts `workers` core workers and the monitor; on failure shuts
    /// down and joins what started.
    fn start(&self, workers: usize) -> Result<(), BuildError> {
        let shared = &self.shared;
        let started = (0..workers)
            .try_for_each(|_| {
                shared.pool.add_core_worker();
                shared
                    .spawn_worker(false)
                    .inspect_err(|_| shared.pool.worker_not_started())
            })
            .and_then(|()| shared.spawn(format!("{}monitor", shared.prefix), worker::run_monitor));
        started.map_err(|error| {
            self.shutdown();
            self.join_all();
            BuildError::Spawn(error)
        })
    }

    /// Graceful shutdown: `fire`/`fire_after` now return
    /// [`FireError::Shutdown`](crate::FireError::Shutdown), armed runs are
    /// discarded, iterations in flight finish, then every thread exits.
    /// Idempotent; callable from any thread, including from inside a task.
    /// Does not wait: see [`await_termination`](Self::await_termination).
    pub fn shutdown(&self) {
        self.shared.begin_shutdown();
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
        self.cancel_now();
        let _ = self.await_termination(self.shared.grace);
        self.shutdown_report().unwrap_or_default()
    }

    /// `shutdown_now` but the wait.
    pub(crate) fn cancel_now(&self) {
        // Close (and scan) first, so the iterations told to stop are the
        // ones the report lists in flight.
        self.shared.begin_shutdown();
        // Relaxed: `cancelled()` only answers "was shutdown_now called?",
        // and an async iteration reads it under its cancel slot's lock,
        // which `wake_async` takes after this store (see `iteration.rs`);
        // no data is handed over through it.
        self.shared.lifecycle.cancel.store(true, Ordering::Relaxed);
        self.shared.lifecycle.wake_async();
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
    ///
    /// # Errors
    ///
    /// None: any timeout is accepted. One past the range of [`Instant`]
    /// (`Duration::MAX`) waits without limit — before a shutdown, for
    /// ever.
    #[must_use = "`false` means some threads are still running"]
    pub fn await_termination(&self, timeout: Duration) -> bool {
        // A timeout beyond the clock's range waits without a deadline.
        let deadline = Instant::now().checked_add(timeout);
        let me = thread::current().id();
        let own = usize::from(lock(&self.shared.threads).iter().any(|(id, _)| *id == me));
        let mut alive = lock(&self.shared.alive);
        while *alive > own {
            alive = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    crate::sync::wait_timeout(
                        &self.shared.terminated,
                        &self.shared.alive,
                        alive,
                        left,
                    )
                }
                None => crate::sync::wait(&self.shared.terminated, alive),
            };
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
        crate::SchedulerStats::new(triggers, self.panic_count(), self.shared.pool.counts())
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
    /// let report = scheduler.shutdown_and_join();
    /// assert_eq!(report.discarded().len(), 1);
    /// assert_eq!(report.detached_threads(), 0);
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn shutdown_and_join(mut self) -> ShutdownReport {
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
            let mut threads = lock(&self.shared.threads);
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
        let threads = std::mem::take(&mut *lock(&self.shared.threads));
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
