//! The scheduler. Its elastic pool of worker threads runs iterations. The
//! workers take turns holding the timer role, which owns the timing wheel.
//! A monitor grows the pool when every worker is busy. The scheduler also
//! owns the lifecycle of shutdown, termination and drop, and it reports
//! panics.
//!
//! ```text
//!  fire_after ──▶ inbox ──▶ [role holder: wheel] ──due──▶ runs the first itself, queues the rest
//!  fire ──────────────────────────────────────────────▶ run queue ──▶ [most recently idle worker]
//! ```
//!
//! This is the runtime layer. It implements the trigger core's
//! [`Runtime`] trait in `door.rs`. It drives cores
//! through their `dispatch` and `expire`. No lower layer imports it. Its
//! shutdown ledger is the `shutdown` module's `Ledger`, one room below.
//!
//! The table lists the files by job.
//!
//! | file | job |
//! |------|-----|
//! | `mod.rs` | [`Scheduler`], the public handle: shutdown, termination, stats |
//! | `builder.rs` | [`Builder`]: settings, start |
//! | `report.rs` | [`TaskPanic`], what the panic hook is given |
//! | `shared.rs` | `Shared`, the state every thread and trigger shares (ground rules there) |
//! | `door.rs` | `impl Runtime for Shared`: everything the core asks of the runtime |
//! | `pool/` | the one lock: run queue, inbox, timer role, idle beds, worker counts (`mod.rs`); the timer role (`role.rs`); the inbox wake-up protocol (`inbox.rs`); the monitor's looks (`monitor.rs`) |
//! | `timer.rs` | the wheel's use: inbox items in, due runs out |
//! | `worker.rs` | worker and monitor loops, thread starts |
//! | `manual.rs` | the thread-less driver of virtual time and the loom models |
//! | `local.rs` | the hand-polled executor of virtual time's and the models' async iterations |
//!
//! A fire's main hand-offs are below. Each step goes downward or through
//! `Runtime`. A debugger stepping into every call enters 18 files on this
//! path and 25 on a delayed fire's; `docs/DESIGN.md` lists them.
//!
//! ```text
//! trigger/mod.rs    Trigger::fire
//!  └▶ core/fire.rs + hand_off.rs   advance_fire, publish DUE, claim `queued` ─ Runtime::queue_run
//!      └▶ scheduler/door.rs     impl Runtime for Shared
//!          └▶ scheduler/pool/mod.rs   push, wake an idle worker ─ (that worker) next_work pops it
//!              └▶ scheduler/worker.rs     the worker loop ─ Core::dispatch
//!                  └▶ core/run.rs             take_due, enter, the task, end, exit
//! ```
//!
//! A delayed fire goes through the timer first. It starts in
//! `core/hand_off.rs`, with `publish_at` and `Runtime::to_timer`. It passes
//! `door.rs`, then `pool/inbox.rs`, which holds the inbox push and its
//! wake-up. The role holder in `worker.rs` turns `timer.rs`, which calls
//! `Core::expire` back in `core/hand_off.rs`. Then `after_turn` in
//! `pool/role.rs` queues the due batch. From there the run goes through
//! `worker.rs` to `core/run.rs`.

mod builder;
pub(crate) mod door;
pub(crate) mod local;
pub(crate) mod manual;
pub(crate) mod pool;
mod report;
pub(crate) mod shared;
mod terminated;
pub(crate) mod timer;
pub(crate) mod worker;

use crate::shutdown::ShutdownReport;
pub use builder::Builder;
pub(crate) use door::TriggerCore;
pub(crate) use local::{parked_on_virtual_time, LocalJobs};
pub(crate) use manual::Driver;
pub use report::TaskPanic;

use crate::core::Runtime;
use crate::error::BuildError;
use crate::sync::{lock, Arc, Ordering};
#[cfg(feature = "tokio")]
pub(crate) use shared::OnTerminated;
use shared::Shared;
use std::fmt;
use std::thread;
use std::time::{Duration, Instant};

/// Owns the worker threads that run triggers' tasks and the monitor that
/// grows their number when every worker is busy.
///
/// Dropping the scheduler shuts it down gracefully, as
/// [`shutdown`](Self::shutdown) does, and joins its threads.
///
/// # Shutdown
///
/// | | new fires | armed runs | runs in flight | threads | returns |
/// |---|---|---|---|---|---|
/// | [`shutdown`](Self::shutdown) | refused: [`FireError::Shutdown`](crate::FireError::Shutdown) | discarded, listed in the report | finish normally | exit once idle | — |
/// | [`shutdown_now`](Self::shutdown_now) | refused | discarded, listed | told to stop ([`is_cancelled`](crate::is_cancelled) turns `true`), waited for up to the grace period | exit once idle | the [`ShutdownReport`] |
/// | drop | refused | discarded, listed | finish, waited for up to the grace period | joined; a thread whose task outlives the grace period is detached | — |
///
/// The report is exact. A fire that races the shutdown is either refused
/// to its caller or listed, never both and never neither. The state word
/// knows what is armed and what runs, so the report has none of the false
/// positives an executor's `shutdownNow` has.
/// [`shutdown_report`](Self::shutdown_report) gives it after either kind
/// of shutdown.
///
/// [`await_termination`](Self::await_termination) waits for the threads to
/// exit. Async services await [`shutdown_async`](Self::shutdown_async),
/// [`shutdown_now_async`](Self::shutdown_now_async) and
/// [`await_termination_async`](Self::await_termination_async). They wait
/// without blocking the thread that polls them, so an async iteration in flight finishes even on a
/// single-threaded runtime. Bound them with the runtime's timeout, and
/// never await them from inside the scheduler's own tasks. Shutting down
/// or dropping the scheduler from inside a sync task does not deadlock.
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
    /// A virtual scheduler's executor. Async triggers bound to it without a
    /// runtime of their own have their iterations polled by `advance`.
    pub(crate) local: Option<Arc<LocalJobs>>,
    /// A virtual scheduler's sleep. A deadline inside an async task waits
    /// on it there.
    pub(crate) virtual_sleep: Option<VirtualSleep>,
}

/// A sleep on a virtual scheduler's clock, set by the virtual scheduler.
/// This floor does not name the virtual scheduler.
pub(crate) type VirtualSleep = Arc<
    dyn Fn(std::time::Duration) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

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
/// [`VirtualScheduler`](crate::testing::VirtualScheduler) alike.
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
    /// A scheduler with the default settings of [`Builder`].
    ///
    /// # Panics
    ///
    /// If the operating system cannot start a thread. Use
    /// [`Scheduler::builder`] to get the error instead.
    #[must_use = "dropping the scheduler shuts it down: its triggers never run"]
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

    /// A scheduler without threads, driven by hand by virtual time or the models.
    pub(crate) fn threadless(shared: Shared) -> Self {
        Self {
            shared: Arc::new(shared),
            local: None,
            virtual_sleep: None,
        }
    }

    /// A scheduler whose threads [`start`](Self::start) will start.
    fn threaded(shared: Shared) -> Self {
        Self::threadless(shared)
    }

    /// Starts `workers` core workers and the monitor. On failure it shuts
    /// down and joins what started.
    fn start(&self, workers: usize) -> Result<(), BuildError> {
        let shared = &self.shared;
        let started = (0..workers)
            .try_for_each(|_| {
                shared.pool.add_core_worker();
                worker::spawn_worker(shared, false)
                    .inspect_err(|_| shared.pool.worker_not_started())
            })
            .and_then(|()| shared.spawn(format!("{}monitor", shared.prefix), worker::run_monitor));
        started.map_err(|error| {
            self.shutdown();
            self.join_all();
            BuildError::Spawn(error)
        })
    }

    /// Graceful shutdown. `fire`/`fire_after` now return
    /// [`FireError::Shutdown`](crate::FireError::Shutdown), and armed runs
    /// are discarded. Iterations in flight finish, then every thread exits.
    /// It is idempotent and callable from any thread, including from inside
    /// a task. It does not wait.
    /// [`await_termination`](Self::await_termination) waits.
    ///
    /// # Examples
    ///
    /// A sync service stops on Ctrl-C or SIGTERM with the `signal-hook`
    /// crate or `ctrlc`. Then it shuts down and prints what was cut short.
    ///
    /// ```no_run
    /// use circulation_trigger::Scheduler;
    /// use signal_hook::consts::{SIGINT, SIGTERM};
    /// use std::time::Duration;
    ///
    /// fn main() -> std::io::Result<()> {
    ///     let scheduler = Scheduler::builder().workers(1).build().expect("threads");
    ///     // … bind and fire the service's triggers …
    ///     let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    ///     signals.forever().next(); // blocks until Ctrl-C or SIGTERM
    ///     scheduler.shutdown(); // armed runs discarded, runs in flight finish
    ///     if !scheduler.await_termination(Duration::from_secs(10)) {
    ///         eprintln!("a task is still running; the drop detaches its thread");
    ///     }
    ///     if let Some(report) = scheduler.shutdown_report() {
    ///         println!("{report}");
    ///     }
    ///     Ok(())
    /// }
    /// ```
    pub fn shutdown(&self) {
        self.shared.begin_shutdown();
    }

    /// Abrupt shutdown. It does what [`shutdown`](Self::shutdown) does, and
    /// tells iterations in flight to stop early. For them,
    /// [`is_cancelled`](crate::is_cancelled) turns `true`. It waits for
    /// them up to the grace period, [`Builder::shutdown_grace`]. Then it
    /// returns the report, with every armed run discarded and every
    /// iteration in flight with its outcome.
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
        self.report_after_grace()
    }

    /// `shutdown_now` after `cancel_now`. It waits up to the grace period
    /// for the iterations in flight, then reports.
    pub(crate) fn report_after_grace(&self) -> ShutdownReport {
        let _ = self.await_termination(self.shared.grace);
        self.shutdown_report().unwrap_or_default()
    }

    /// `shutdown_now` but the wait.
    pub(crate) fn cancel_now(&self) {
        // Close and scan first, so the iterations told to stop are the ones
        // the report lists in flight.
        self.shared.begin_shutdown();
        // Relaxed: `is_cancelled()` only answers "was shutdown_now
        // called?". An async iteration reads it under its cancel slot's
        // lock, which `wake_async` takes after this store.
        // `core/iteration.rs` holds that side. No data is handed over
        // through it.
        self.shared.ledger.cancel.store(true, Ordering::Relaxed);
        self.shared.ledger.wake_async();
        self.poll_local();
    }

    /// Polls a virtual scheduler's woken async iterations until none is
    /// woken. No thread of its own polls them, and a shutdown needs an
    /// iteration told to stop to see it.
    fn poll_local(&self) {
        if let Some(jobs) = &self.local {
            while jobs.poll_one() {}
        }
    }

    /// The shutdown report so far. It is `None` before shutdown. After it,
    /// the report lists the armed runs discarded and the iterations in
    /// flight. Their outcomes fill in as they end.
    pub fn shutdown_report(&self) -> Option<ShutdownReport> {
        if self.shared.is_closed() {
            // A shutdown begun on another thread may still be scanning, so wait for its scan.
            drop(lock(&self.shared.shutting));
        }
        self.shared.ledger.report()
    }

    /// Whether [`shutdown`](Self::shutdown) has been called.
    pub(crate) fn is_shutdown(&self) -> bool {
        self.shared.is_closed()
    }

    /// Whether every thread of the scheduler has exited.
    pub(crate) fn is_terminated(&self) -> bool {
        *lock(&self.shared.alive) == 0
    }

    /// Waits up to `timeout` for every thread to exit after a shutdown, and
    /// returns whether they all did. Called from inside a task, it waits
    /// for the *other* threads. The calling worker exits when its task
    /// returns. Called from inside an async task's future, it can only time
    /// out. That future's own iteration is in flight until it completes.
    ///
    /// # Edge cases
    ///
    /// Any timeout is accepted. One past the range of [`Instant`], such as
    /// `Duration::MAX`, waits without limit. Before a shutdown, that is for
    /// ever.
    #[must_use = "`false` means some threads are still running"]
    pub fn await_termination(&self, timeout: Duration) -> bool {
        self.poll_local();
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

    /// Statistics of every live trigger and their totals. Named triggers
    /// come first, by name.
    ///
    /// # Cost
    ///
    /// It is a snapshot of every live trigger, one
    /// [`TriggerStats`](crate::report::TriggerStats) each. So its time and
    /// memory grow with the number of triggers. Binding and dropping
    /// triggers wait while it lists the live ones. With many triggers, call
    /// it now and then, not per request. [`Trigger::stats`](crate::Trigger::stats)
    /// reads one trigger and allocates nothing. The figures at a million
    /// triggers are in docs/DESIGN.md, under "A million triggers".
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    ///
    /// let scheduler = Scheduler::new();
    /// let trigger = Trigger::bind(&scheduler, || None);
    /// trigger.fire_and_wait(std::time::Duration::from_secs(5)).unwrap();
    /// let stats = scheduler.stats();
    /// assert_eq!(stats.triggers.len(), 1);
    /// assert_eq!(stats.triggers[0].iterations, 1);
    /// ```
    pub fn stats(&self) -> crate::stats::SchedulerStats {
        let triggers = self
            .shared
            .ledger
            .live()
            .iter()
            .map(|core| core.stats())
            .collect();
        // Relaxed: a statistic.
        let refused_paused = self.shared.refused_paused.load(Ordering::Relaxed);
        crate::stats::SchedulerStats::new(
            triggers,
            self.panic_count(),
            refused_paused,
            self.shared.pool.counts().for_stats(),
        )
    }

    /// Number of panics caught in tasks so far.
    fn panic_count(&self) -> u64 {
        // Relaxed: a statistic.
        self.shared.panics.load(Ordering::Relaxed)
    }

    /// Shuts down, waits up to the grace period, detaches what is left,
    /// joins the rest. Idempotent.
    fn finish(&mut self) {
        self.shutdown();
        if !self.await_termination(self.shared.grace) {
            let me = thread::current().id();
            let mut threads = lock(&self.shared.threads);
            let before = threads.len();
            threads.retain(|(id, handle)| *id == me || handle.is_finished());
            let _detached = before - threads.len();
            #[cfg(feature = "tracing")]
            if _detached > 0 {
                tracing::warn!(
                    threads = _detached,
                    "scheduler dropped with tasks still running after the grace period; their threads are detached"
                );
            }
        }
        self.join_all();
    }

    /// Joins every thread but the current one. A task dropping its own
    /// scheduler must not wait for itself. Its thread exits when the task
    /// returns.
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
    /// Shuts down gracefully and joins every thread. If a task drops its
    /// own scheduler, the calling thread is not joined. Threads whose task
    /// has not returned within the grace period of
    /// [`Builder::shutdown_grace`] are detached rather than waited for.
    /// With the `tracing` feature, a warning counts them.
    fn drop(&mut self) {
        self.finish();
    }
}
