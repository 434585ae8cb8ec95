//! A scheduler for the loom models, whose threads are the model's own. They
//! play the workers and the timer step by step, with [`Harness::run_one`]
//! and [`Harness::timer_turn`]. Or they run the real worker loop with
//! [`Harness::run_worker`], on a harness [`with_pool`](Harness::with_pool).
//! They move time by hand. It exists only under `--cfg loom`.
//!
//! Everything a model touches here is the crate's real code. It is the same
//! `Core`, state word, request word, pool and timer that the threaded
//! scheduler runs. The pool brings its queue, inbox, timer role, idle beds
//! and worker counts.

use crate::async_task::Spawn;
use crate::clock::{Clock, ManualTime};
use crate::scheduler::local::LocalJobs;
use crate::scheduler::manual::Driver;
pub use crate::scheduler::pool::Watch;
use crate::scheduler::pool::{Limits, Pool};
use crate::scheduler::shared::Shared;
use crate::scheduler::timer::Timer;
use crate::scheduler::Scheduler;
use crate::state::Snapshot;
use crate::sync::Arc;
use crate::{Task, Trigger};
use std::future::Future;

pub use crate::state::{Enter, Exit, Reserve, State};

/// A scheduler whose threads are the model's own.
pub struct Harness {
    scheduler: Scheduler,
    driver: Driver,
}

impl std::fmt::Debug for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness")
            .field("scheduler", &self.scheduler)
            .finish_non_exhaustive()
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// A harness at time zero whose timer role the model plays by hand.
    pub fn new() -> Self {
        Self::build(None, 0, 0)
    }

    /// A harness at time zero whose timer role is free for the workers the
    /// model runs with [`run_worker`](Self::run_worker). There are `core`
    /// of them, counted now. The monitor may count extra ones up to `max`.
    pub fn with_pool(core: usize, max: usize) -> Self {
        let harness = Self::build(Some(Box::new(Timer::new(0))), core, max);
        for _ in 0..core {
            harness.shared().pool.add_core_worker();
        }
        harness
    }

    /// [`with_pool`](Self::with_pool), with a holder that naps toward
    /// exact deadlines as on the real clock, leaving its role for a
    /// stand-by whose timed wait may run out at any point.
    pub fn with_pool_napping(core: usize, max: usize) -> Self {
        let harness = Self::with_pool(core, max);
        harness
            .shared()
            .pool
            .naps_in_models
            .store(true, std::sync::atomic::Ordering::Relaxed);
        harness
    }

    fn build(timer: Option<Box<Timer<Shared>>>, core: usize, max: usize) -> Self {
        let time = Arc::new(ManualTime::default());
        let limits = Limits {
            core,
            max,
            stall: std::time::Duration::from_millis(10),
            keep_alive: std::time::Duration::from_secs(10),
        };
        let clock = Clock::Manual(Arc::clone(&time));
        let driver_holds_the_role = timer.is_none();
        let shared = Shared::new(clock, 1, None, Pool::new(timer), limits);
        let scheduler = Scheduler::threadless(shared);
        let driver = Driver::new(time);
        if driver_holds_the_role {
            driver.hold_role_of(&scheduler.shared);
        }
        Self { scheduler, driver }
    }

    /// Runs the real worker loop on this thread until the pool closes. An
    /// `extra` worker may also stop when it retires. Under loom a
    /// keep-alive wait may time out at any point.
    pub fn run_worker(&self, extra: bool) {
        crate::scheduler::worker::run_worker(&self.scheduler.shared, extra);
    }

    /// Moves the clock to `now_us`, never back, without running anything.
    pub fn set_time(&self, now_us: u64) {
        self.driver.time.set_us(now_us);
    }

    /// One look of the monitor at `now_us`, returning whether it decided to
    /// start a worker. That worker is already counted. The model then runs
    /// it with [`run_worker`](Self::run_worker).
    pub fn monitor_check(&self, watch: &mut Watch, now_us: u64) -> bool {
        crate::scheduler::worker::monitor_look(self.shared(), watch, now_us)
    }

    /// Counts one more extra worker, as the monitor does before starting
    /// it. The model then runs it with [`run_worker`](Self::run_worker).
    pub fn count_extra_worker(&self) {
        self.shared().pool.add_core_worker();
    }

    /// Worker threads counted now.
    pub fn workers(&self) -> usize {
        self.shared().pool.counts().current()
    }

    /// The scheduler to bind triggers to.
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// Whether the scheduler has begun to shut down, as its fire paths see it.
    pub fn is_shutdown(&self) -> bool {
        self.scheduler.is_shutdown()
    }

    /// Whether every thread and async iteration of the scheduler has ended.
    pub fn is_terminated(&self) -> bool {
        self.scheduler.is_terminated()
    }

    fn shared(&self) -> &Shared {
        &self.scheduler.shared
    }

    /// `fire_and_wait`'s fire alone. It returns the version whose run the
    /// waiter waits for.
    pub fn fire_for_wait(trigger: &Trigger) -> Result<u32, crate::WaitError> {
        trigger.core().fire_for_wait()
    }

    /// What a waiter for the fire of `fired` gets now, without waiting. It
    /// is `Timeout` while the waiter would still wait.
    pub fn wait_now(trigger: &Trigger, fired: u32) -> Result<crate::Outcome, crate::WaitError> {
        trigger
            .core()
            .waiters()
            .wait(fired, Some(std::time::Instant::now()))
    }

    /// Binds a task whose version starts at `version`.
    pub fn trigger(&self, version: u32, task: impl Task) -> Trigger {
        Trigger::builder(&self.scheduler)
            .start_version(version)
            .bind(task)
    }

    /// Binds an async task whose version starts at `version`. Each
    /// iteration's future is spawned on `executor`, which the model's
    /// threads poll.
    pub fn async_trigger<F, Fut>(&self, version: u32, executor: &Executor, task: F) -> Trigger
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Option<std::time::Duration>> + Send + 'static,
    {
        Trigger::builder(&self.scheduler)
            .start_version(version)
            .bind_spawned(Arc::clone(&executor.0) as Arc<dyn Spawn>, task)
    }

    /// What [`Scheduler::shutdown_now`] does before it waits. It closes,
    /// scans, sets the cancel flag and wakes the async iterations in
    /// flight. The model then checks they end as cancelled.
    pub fn shutdown_now_without_waiting(&self) {
        self.scheduler.cancel_now();
    }

    /// Plays a worker. It runs one queued dispatch, if any, and returns
    /// whether there was one.
    pub fn run_one(&self) -> bool {
        self.driver.run_one(self.shared())
    }

    /// Runs queued dispatches until the queue is empty, and returns how many.
    pub fn run_all(&self) -> usize {
        let mut count = 0;
        while self.run_one() {
            count += 1;
        }
        count
    }

    /// Plays the timer. It moves time to `now_us`, drains the inbox and
    /// queues every due run.
    pub fn timer_turn(&self, now_us: u64) {
        self.driver.turn(self.shared(), now_us);
    }

    /// Plays the timer going to sleep toward `until_us` through the real
    /// wake-up protocol. A `until_us` of `u64::MAX` means no deadline. Loom
    /// cannot time out, so this returns only when there is work or a firer
    /// wakes the timer. So a missed wake-up shows as a deadlock. The
    /// triggers it takes from the inbox are processed by the next
    /// [`timer_turn`](Self::timer_turn).
    pub fn timer_wait(&self, until_us: u64) {
        self.driver.wait(self.shared(), until_us);
    }

    /// Whether a holder naps toward a deadline with its role in the pool.
    pub fn holder_naps(&self) -> bool {
        self.shared().pool.holder_naps()
    }

    /// Whether a holder sleeps with its role in hand.
    pub fn holder_sleeps_holding(&self) -> bool {
        self.shared().pool.holder_sleeps_holding()
    }

    /// Whether the timer is awake or has been woken, as opposed to asleep
    /// toward its target.
    pub fn timer_awake(&self) -> bool {
        self.shared().pool.holder_awake()
    }

    /// Releases a timer blocked in [`timer_wait`](Self::timer_wait). This
    /// is the model's stand-in for its timeout.
    pub fn release_timer(&self) {
        self.shared().pool.nudge();
    }

    /// The deadline in µs of `trigger`'s live request, if it is a delayed one.
    pub fn live_deadline(&self, trigger: &Trigger) -> Option<u64> {
        let now = self.shared().timing.clock.now_us();
        trigger.core().request().load().kind().deadline(now)
    }

    /// The lateness in µs that `trigger`'s statistics recorded for its last
    /// timed run, if any.
    pub fn last_lateness(trigger: &Trigger) -> Option<u64> {
        trigger
            .stats()
            .last_lateness
            .map(|late| late.as_micros() as u64)
    }

    /// Sets the low 32 bits of `trigger`'s iteration count, before it runs,
    /// so that a model reaches the carry past them.
    pub fn preset_iterations(trigger: &Trigger, low: u32) {
        trigger.core().preset_iterations(low);
    }

    /// Whether `trigger` holds an armed request, due now or at a time.
    pub fn is_armed(&self, trigger: &Trigger) -> bool {
        use crate::request::Kind;
        matches!(
            trigger.core().request().load().kind(),
            Kind::At { .. } | Kind::Due
        )
    }

    /// Number of dispatches waiting in the run queue.
    pub fn queued(&self) -> usize {
        self.shared().pool.queued()
    }

    /// The time the timer would next wake at, or `u64::MAX` for never.
    pub fn next_wake(&self) -> u64 {
        self.driver.next_wake()
    }

    /// Number of wheel entries.
    pub fn timer_entries(&self) -> usize {
        self.driver.timer_entries()
    }

    /// The state word of `trigger`.
    pub fn snapshot(trigger: &Trigger) -> Snapshot {
        trigger.snapshot()
    }

    /// Whether `trigger` is paused, read from its request word alone.
    pub fn is_paused(trigger: &Trigger) -> bool {
        trigger.is_paused()
    }

    /// Watches the warnings `trigger`'s last handle gives when it goes with
    /// the first run pending. It keeps the trigger, not a handle.
    pub fn first_run_warnings(trigger: &Trigger) -> FirstRunWarnings {
        FirstRunWarnings(crate::core::Counted::clone(trigger.core()))
    }
}

/// See [`Harness::first_run_warnings`].
pub struct FirstRunWarnings(crate::core::Counted<crate::scheduler::TriggerCore>);

impl std::fmt::Debug for FirstRunWarnings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("FirstRunWarnings")
            .field(&self.count())
            .finish()
    }
}

impl FirstRunWarnings {
    /// The warnings given so far.
    pub fn count(&self) -> usize {
        self.0
            .first_run_warnings
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A minimal executor for the models, the crate's hand-polled one from
/// `local.rs`. Spawned jobs wait in a list. Whichever model thread calls
/// [`poll_one`](Executor::poll_one) polls them, one poll at a time. A job
/// is polled only once woken, so a lost wake-up leaves it behind for the
/// model to find.
#[derive(Clone, Default)]
pub struct Executor(Arc<LocalJobs>);

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Executor")
    }
}

impl Executor {
    /// Polls one woken job once, if there is one, and returns whether it
    /// polled. A completed job is dropped, and a pending one stays.
    pub fn poll_one(&self) -> bool {
        self.0.poll_one()
    }

    /// Polls woken jobs until none is woken, and returns how many polls.
    pub fn run_woken(&self) -> usize {
        let mut polls = 0;
        while self.poll_one() {
            polls += 1;
        }
        polls
    }

    /// Jobs not completed yet, woken or not.
    pub fn pending(&self) -> usize {
        self.0.pending()
    }
}

/// A value counted by `core/counted.rs` with loom's atomics, for the count's
/// own model. The trigger's core runs the same code with std's.
///
/// It is not `Send`, since loom's cell is not `Sync`. `loom::thread::spawn`
/// does not ask for `Send`, so a model's threads can still take it.
#[derive(Clone)]
pub struct Counted(crate::core::Counted<(), crate::core::LoomCounter>);

/// A weak handle to a [`Counted`].
#[derive(Clone, Debug)]
pub struct WeakCounted(crate::core::WeakCounted<(), crate::core::LoomCounter>);

impl Counted {
    /// A new value with one strong handle.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self(crate::core::Counted::new(()))
    }

    /// A weak handle to the same value.
    pub fn downgrade(&self) -> WeakCounted {
        WeakCounted(crate::core::Counted::downgrade(&self.0))
    }
}

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Counted")
    }
}

impl WeakCounted {
    /// A strong handle, while another still keeps the value.
    pub fn upgrade(&self) -> Option<Counted> {
        self.0.upgrade().map(Counted)
    }
}
