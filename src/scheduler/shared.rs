//! The state every scheduler thread and every trigger bound to the
//! scheduler share. That is [`Shared`], with the threads' bookkeeping of
//! start, count and join.
//!
//! # Ground rules
//!
//! * **Fields are the runtime's.** Every field is visible to `scheduler/`
//!   only. The trigger core in `core/` reaches the runtime through the
//!   `Runtime` trait, implemented in `door.rs`, and nothing else. So what
//!   the core may ask of the runtime is one short list, checked by the
//!   compiler.
//! * **One lock for scheduling.** The queue, the inbox, the timer role, the
//!   idle beds and the worker counts sit behind the pool's one mutex.
//!   `pool/` has ground rules of its own. Nothing else here is taken on a
//!   run's path.
//! * **`alive` counts what shutdown waits for.** It counts every thread
//!   started, until its `ExitGuard` drops, even by unwinding. It also
//!   counts every async iteration in flight. `terminated` is notified on
//!   every decrement.
//! * **`threads` holds every handle** until joined or detached. Retired
//!   extra workers' handles are pruned when the next thread starts.
//! * **`closed` goes false → true once**, in `begin_shutdown`. After it, no
//!   new run starts and the ledger's scan lists what was armed. `shutting`
//!   serializes shutdowns. A concurrent second caller and a reader of the
//!   report wait until that scan is done.

use super::pool::{Limits, Pool};
use super::report::{PanicHook, StuckHook};
use crate::clock::Clock;
use crate::clock::Timing;
use crate::shutdown::Ledger;
#[cfg(feature = "tokio")]
use crate::sync::Weak;
use crate::sync::{lock, Arc, AtomicBool, AtomicU64, Condvar, Mutex, Ordering};
use crossbeam_utils::CachePadded;
use std::thread::{self, JoinHandle, ThreadId};
use std::time::Duration;

/// State shared by the scheduler's threads and every trigger bound to it.
pub(crate) struct Shared {
    /// The clock and how deadlines round on it.
    pub(crate) timing: Timing,
    pub(crate) pool: CachePadded<Pool<Shared>>,
    pub(super) limits: Limits,
    pub(super) closed: AtomicBool,
    /// Taken by `begin_shutdown` from the `closed` swap to the end of the
    /// scan. Readers of the report take it after `closed` is set. So nobody
    /// sees a shutdown half begun.
    pub(super) shutting: Mutex<()>,
    /// Taken by `pause` and `resume`. `Runtime::pause_lock` hands it to them.
    pub(super) pausing: Mutex<()>,
    pub(super) ledger: Ledger<Shared>,
    /// How long `shutdown_now` and drop wait for iterations in flight.
    pub(super) grace: Duration,
    pub(super) panics: AtomicU64,
    /// Fires refused because their trigger was paused.
    pub(super) refused_paused: AtomicU64,
    pub(super) panic_hook: Option<PanicHook>,
    /// Called by the monitor for each run reported stuck.
    pub(super) stuck_hook: Option<StuckHook>,
    /// The generator of `fire_within` on virtual time. It is seeded, so the
    /// same test gives the same delays. The real scheduler uses a
    /// thread-local one instead, with no lock on the fire path.
    pub(super) rng: Option<Mutex<fastrand::Rng>>,
    /// The wall-clock time, in ns since the Unix epoch, at which the clock
    /// read zero. It is read once at build, so a wall-clock step never
    /// moves a schedule. A virtual scheduler may set it.
    wall_epoch_ns: std::sync::atomic::AtomicU64,
    /// Threads started and not yet exited, and their bed.
    pub(super) alive: Mutex<usize>,
    pub(super) terminated: Condvar,
    /// The async waiters of termination from `terminated.rs`, woken when
    /// `alive` drops to zero. They sit behind their own lock, taken inside
    /// `alive`'s.
    pub(super) termination_wakers: Mutex<Waiting>,
    /// What is told once the scheduler has shut down and nothing of it runs
    /// any more. [`when_terminated`](Self::when_terminated) adds to it. It
    /// sits behind its own lock, taken inside `alive`'s.
    #[cfg(feature = "tokio")]
    termination_hooks: Mutex<TerminationHooks>,
    /// Every thread started. The monitor adds workers as it starts them.
    pub(super) threads: Mutex<Vec<(ThreadId, JoinHandle<()>)>>,
    /// Thread names are this prefix, then `worker-N` or `monitor`.
    pub(super) prefix: String,
    /// The index of the next worker's name.
    pub(super) next_worker: AtomicU64,
    /// The timer of a thread-less driver that holds the role for good, such
    /// as a virtual scheduler's. It is set once, as the driver is made. A
    /// trigger's last handle lets go of its wheel entry here at once, since
    /// no thread would turn the wheel before the next advance.
    /// `Runtime::to_timer` does that when asked `at_once`.
    pub(super) manual_timer: std::sync::OnceLock<ManualTimer>,
}

/// A thread-less driver's timer. `manual.rs` holds the driver.
pub(crate) type ManualTimer = Arc<Mutex<super::timer::Timer<Shared>>>;

/// `at` in ns since the Unix epoch. It is zero before the epoch and saturates after.
fn unix_ns(at: std::time::SystemTime) -> u64 {
    at.duration_since(std::time::UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    })
}

impl Shared {
    /// Makes the task context answer for this scheduler on this thread. The
    /// context answers `cancelled` and `scheduler_time`. Returns what it
    /// replaced, for `context::leave_thread`.
    pub(super) fn enter_context(&self) -> Option<crate::context::Context> {
        crate::context::enter_thread(&self.ledger.cancel, &self.timing.clock)
    }

    /// The wall-clock time at which the scheduler's clock read zero.
    pub(crate) fn wall_epoch(&self) -> std::time::SystemTime {
        // Relaxed: a plain setting, read where it is used.
        let ns = self
            .wall_epoch_ns
            .load(std::sync::atomic::Ordering::Relaxed);
        std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns)
    }

    /// Sets a virtual scheduler's [`wall_epoch`](Self::wall_epoch).
    pub(crate) fn set_wall_epoch(&self, epoch: std::time::SystemTime) {
        self.wall_epoch_ns
            .store(unix_ns(epoch), std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn new(
        clock: Clock,
        tick_us: u64,
        panic_hook: Option<PanicHook>,
        pool: Pool<Shared>,
        limits: Limits,
    ) -> Self {
        let wall_epoch_ns = unix_ns(
            std::time::SystemTime::now()
                .checked_sub(std::time::Duration::from_nanos(clock.now_ns()))
                .unwrap_or(std::time::UNIX_EPOCH),
        );
        Self {
            timing: Timing {
                clock,
                tick_us,
                coalesce: true,
            },
            pool: CachePadded::new(pool),
            limits,
            closed: AtomicBool::new(false),
            shutting: Mutex::new(()),
            pausing: Mutex::new(()),
            ledger: Ledger::default(),
            grace: DEFAULT_GRACE,
            panics: AtomicU64::new(0),
            refused_paused: AtomicU64::new(0),
            panic_hook,
            stuck_hook: None,
            rng: None,
            wall_epoch_ns: std::sync::atomic::AtomicU64::new(wall_epoch_ns),
            alive: Mutex::new(0),
            terminated: Condvar::new(),
            termination_wakers: Mutex::new(Default::default()),
            #[cfg(feature = "tokio")]
            termination_hooks: Mutex::new(TerminationHooks::default()),
            threads: Mutex::new(Vec::new()),
            prefix: String::new(),
            next_worker: AtomicU64::new(0),
            manual_timer: std::sync::OnceLock::new(),
        }
    }

    /// Starts a scheduler thread running `body`, counted alive until it
    /// ends, and keeps its handle for joining.
    pub(super) fn spawn(
        self: &Arc<Self>,
        name: String,
        body: fn(&Arc<Shared>),
    ) -> std::io::Result<()> {
        let shared = Arc::clone(self);
        *lock(&self.alive) += 1;
        // Held from before the spawn until the handle is listed. A task on
        // the new thread that awaits termination or shuts down looks the
        // thread up there. It must find it, or else it waits for itself.
        let mut threads = lock(&self.threads);
        let spawned = thread::Builder::new().name(name).spawn(move || {
            let guard = ExitGuard(shared);
            body(&guard.0);
        });
        #[cfg(all(test, not(loom)))]
        tests::AFTER_SPAWN.with(|hook| hook.get().map(|hook| hook()));
        match spawned {
            Ok(handle) => {
                // Prunes retired workers' handles, whose threads have ended.
                threads.retain(|(_, handle)| !handle.is_finished());
                threads.push((handle.thread().id(), handle));
                Ok(())
            }
            Err(error) => {
                drop(threads);
                self.thread_exited();
                Err(error)
            }
        }
    }

    /// Begins shutdown. It refuses fires, discards armed runs, and wakes
    /// every thread. The report lists the discarded runs.
    pub(super) fn begin_shutdown(&self) {
        // The runs the pool had queued and the triggers the scan looked at.
        // They are declared first, so they are dropped last, after the lock
        // below. Either may hold a trigger's last reference, and a task's
        // destructor may run any code.
        let (_queued, _scanned, _wheel);
        // Held until the scan is done. So a second, concurrent caller
        // returns only once the report it will read is complete.
        let _one_at_a_time = lock(&self.shutting);
        // Release: pairs with the Acquire in `is_closed`. So whoever sees
        // the scheduler shut down also sees what the caller of `shutdown`
        // wrote before. `loom_shutdown` checks it. The internal protocol
        // does not rely on it. Its edges run through the scan's RMWs on the
        // request and state words, as the `shutdown` module explains. The
        // losing caller of the swap reads nothing, so the swap needs no
        // Acquire half.
        if self.closed.swap(true, Ordering::Release) {
            return;
        }
        _queued = self.pool.close();
        // A thread-less driver's wheel in `manual_timer` is drained too.
        _wheel = self.manual_timer.get().map(|timer| lock(timer).drain());
        _scanned = self.ledger.scan(self.timing.clock.now_us());
        // With no thread alive, the scheduler has terminated now. That is
        // so for a virtual scheduler, or when every worker is gone already.
        // Else the last thread's exit tells, in `thread_exited`, which
        // reads `closed` under this same lock.
        #[cfg(feature = "tokio")]
        let hooks = {
            let alive = lock(&self.alive);
            self.take_termination_hooks(*alive)
        };
        #[cfg(feature = "tracing")]
        if let Some(report) = self.ledger.report() {
            tracing::info!(
                discarded = report.discarded().len(),
                in_flight = report.in_flight().len(),
                "scheduler shut down"
            );
        }
        // Told with no lock held, because a hook may run any code.
        drop(_one_at_a_time);
        #[cfg(feature = "tokio")]
        tell_terminated(hooks);
    }

    /// A run of `core` has been in flight for `running_for_us`, past its
    /// `stuck_after`. This reports it. The monitor calls it once per run.
    pub(super) fn report_stuck(&self, core: &crate::core::Core<Self>, running_for_us: u64) {
        let report = crate::policy::trigger::StuckRun {
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
            let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&report)));
            if let Err(payload) = called {
                crate::sync::drop_payload(payload);
            }
        }
    }

    pub(super) fn thread_exited(&self) {
        let mut alive = lock(&self.alive);
        *alive -= 1;
        // Every exit notifies, not only the last. A task awaiting
        // termination from inside waits for all threads but its own.
        self.terminated.notify_all();
        let wakers = self.take_terminated(*alive);
        #[cfg(feature = "tokio")]
        let hooks = self.take_termination_hooks(*alive);
        drop(alive);
        wakers.into_iter().for_each(std::task::Waker::wake);
        #[cfg(feature = "tokio")]
        tell_terminated(hooks);
    }

    /// Tells `hook` once the scheduler has shut down and its live count is
    /// zero. The live count covers threads and async iterations. If that is
    /// so already, it tells `hook` at once. Hooks are held weakly. A hook
    /// dropped before then is never told, and the list sheds such hooks as
    /// it grows.
    #[cfg(feature = "tokio")]
    pub(crate) fn when_terminated(&self, hook: Weak<dyn OnTerminated>) {
        let alive = lock(&self.alive);
        // Relaxed: the lock is the edge. A `begin_shutdown` that took
        // `alive` before this call had set `closed` and took the hooks
        // listed then. One that takes it after finds this hook. The hooks
        // read nothing the swap published, because their own state has its
        // locks.
        let terminated = self.closed.load(Ordering::Relaxed) && *alive == 0;
        let mut hooks = lock(&self.termination_hooks);
        if terminated || hooks.told {
            drop(hooks);
            drop(alive);
            tell_terminated(vec![hook]);
            return;
        }
        if hooks.waiting.len() >= 2 * hooks.kept.max(8) {
            hooks.waiting.retain(|hook| hook.strong_count() > 0);
            hooks.kept = hooks.waiting.len();
        }
        hooks.waiting.push(hook);
    }

    /// Whether the scheduler has shut down and nothing of it runs any more.
    /// It is true from the moment
    /// [`when_terminated`](Self::when_terminated)'s hooks are taken to be
    /// told, under the same lock. So a caller that sees it need not wait
    /// for them. They are told after that lock is released, and
    /// `await_termination` may return before.
    #[cfg(feature = "tokio")]
    pub(crate) fn has_terminated(&self) -> bool {
        let alive = lock(&self.alive);
        // Relaxed: the `alive` lock orders it, as in `when_terminated`.
        self.closed.load(Ordering::Relaxed) && *alive == 0
    }

    /// Called under the `alive` lock, with the live count at `alive`. If
    /// the scheduler has terminated, it takes the hooks to tell, once only.
    /// The caller tells them after releasing the lock, because a hook may
    /// run any code.
    #[cfg(feature = "tokio")]
    fn take_termination_hooks(&self, alive: usize) -> Vec<Weak<dyn OnTerminated>> {
        // Relaxed: the `alive` lock orders it, as in `when_terminated`.
        if alive > 0 || !self.closed.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let mut hooks = lock(&self.termination_hooks);
        hooks.told = true;
        std::mem::take(&mut hooks.waiting)
    }
}

/// Something to tell once a scheduler has terminated, through
/// [`Shared::when_terminated`]. A `Refresh`'s value channel closes then, as
/// no fetch can follow.
#[cfg(feature = "tokio")]
pub(crate) trait OnTerminated: Send + Sync {
    /// The scheduler has shut down and nothing of it runs any more.
    fn terminated(&self);
}

/// The hooks waiting for termination.
#[cfg(feature = "tokio")]
#[derive(Default)]
struct TerminationHooks {
    waiting: Vec<Weak<dyn OnTerminated>>,
    /// How many were left at the last shedding of dropped hooks.
    kept: usize,
    /// Set once they have been told. A later hook is told at once.
    told: bool,
}

/// Tells every hook still alive, outside every lock.
#[cfg(feature = "tokio")]
fn tell_terminated(hooks: Vec<Weak<dyn OnTerminated>>) {
    for hook in hooks.iter().filter_map(Weak::upgrade) {
        hook.terminated();
    }
}

/// The async waiters of termination from `terminated.rs`, under their ids.
/// A future dropped unfinished removes its own.
#[derive(Default)]
pub(super) struct Waiting {
    pub(super) wakers: Vec<(u64, std::task::Waker)>,
    pub(super) next_id: u64,
}

impl Shared {
    /// The live count dropped to `alive`. At zero, this takes every async
    /// termination waiter's waker. It is called under the `alive` lock. The
    /// caller wakes them after releasing it, because a waker may poll at
    /// once.
    fn take_terminated(&self, alive: usize) -> Vec<std::task::Waker> {
        if alive > 0 {
            return Vec::new();
        }
        let mut waiting = lock(&self.termination_wakers);
        waiting.wakers.drain(..).map(|(_, waker)| waker).collect()
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

/// Default grace period of [`Scheduler::shutdown_now`](super::Scheduler::shutdown_now) and of drop.
pub(super) const DEFAULT_GRACE: Duration = Duration::from_secs(5);

#[cfg(all(test, not(loom)))]
pub(super) mod tests {
    use super::Shared;
    use crate::sync::{lock, Arc, Mutex};
    use std::cell::Cell;
    use std::time::Duration;

    thread_local! {
        /// Called by `Shared::spawn` on this thread between the spawn and
        /// the listing of the new thread's handle.
        pub(in crate::scheduler) static AFTER_SPAWN: Cell<Option<fn()>> = const { Cell::new(None) };
    }

    /// What the test thread's body found.
    static LISTED: Mutex<Option<bool>> = Mutex::new(None);

    /// A new thread's body, which records whether its handle is listed.
    fn look_for_own_handle(shared: &Arc<Shared>) {
        let me = std::thread::current().id();
        let listed = lock(&shared.threads).iter().any(|(id, _)| *id == me);
        *lock(&LISTED) = Some(listed);
    }

    #[test]
    fn a_new_thread_finds_its_own_handle_listed() {
        // A new worker may run a task at once, and a task that awaits
        // termination tells its own thread by that list. The spawning
        // thread is held up between spawn and listing, so that the new
        // thread's look comes in that gap unless the listing holds it off.
        let virtual_scheduler = crate::Scheduler::builder().build_virtual();
        let shared = &virtual_scheduler.shared;
        AFTER_SPAWN.with(|hook| hook.set(Some(|| std::thread::sleep(Duration::from_millis(50)))));
        shared
            .spawn("own-handle".to_string(), look_for_own_handle)
            .expect("spawn");
        AFTER_SPAWN.with(|hook| hook.set(None));
        // The body looks before its handle leaves the list here.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while lock(&LISTED).is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let (_, handle) = lock(&shared.threads).pop().expect("listed");
        handle.join().expect("the body returns");
        assert_eq!(*lock(&LISTED), Some(true));
    }
}
