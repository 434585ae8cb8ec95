//! The public trigger handle: bind a task to a scheduler, then `fire`,
//! `fire_after` and `suspend` it from any thread.

use crate::error::FireError;
use crate::scheduler::{Scheduler, TriggerCore};
use crate::state::Snapshot;
use crate::sync::Arc;
use crate::task::Task;
use std::fmt;
use std::time::Duration;

mod builder;
mod identity;
mod pause;

pub use builder::TriggerBuilder;
pub use identity::WeakTrigger;

/// A task bound to a scheduler, re-triggerable from any thread.
///
/// Cloning gives another handle to the same trigger. When the last handle
/// is dropped the trigger is suspended and its task is dropped as soon as no
/// iteration is in flight — in the drop, for a trigger that never asked for
/// a deadline; for one that did (`fire_after`, a returned delay), as a
/// rule by a scheduler thread as soon as the timer lets go of it, which
/// the drop asks for at once (on a
/// [`VirtualScheduler`](crate::VirtualScheduler), in the drop, or by an
/// advance running at that moment). A task that needs its own trigger captures a
/// [`WeakTrigger`] (a strong one would keep itself alive forever).
///
/// # Guarantees
///
/// The task never runs concurrently with itself (so it may be `FnMut`
/// without a lock), the latest `fire`/`fire_after`/`suspend` wins, fires
/// during a run coalesce into one follow-up, and no fire is lost. See the
/// [crate docs](crate#guarantees).
///
/// # Examples
///
/// ```
/// use circulation_trigger::{Scheduler, Trigger};
/// use std::sync::mpsc;
/// use std::time::Duration;
///
/// let scheduler = Scheduler::new();
/// let (tx, rx) = mpsc::channel();
/// let mut runs = 0;
/// let trigger = Trigger::bind(&scheduler, move || {
///     runs += 1; // FnMut state, no Mutex: runs never overlap
///     tx.send(runs).unwrap();
///     (runs < 3).then(|| Duration::from_millis(1)) // run 3 times, then stop
/// });
/// trigger.fire()?;
/// assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(1));
/// assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(2));
/// assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(3));
/// # Ok::<(), circulation_trigger::FireError>(())
/// ```
pub struct Trigger {
    /// The trigger itself; the core counts its handles (see
    /// `Core::release_handle`): dropping the last one suspends.
    core: Arc<TriggerCore>,
}

impl Clone for Trigger {
    fn clone(&self) -> Self {
        self.core.add_handle();
        Self {
            core: Arc::clone(&self.core),
        }
    }
}

impl Drop for Trigger {
    fn drop(&mut self) {
        if !self.core.release_handle() {
            return;
        }
        // The last handle going while the first run is pending is almost
        // always `Trigger::bind(..).fire()` with the handle not kept: say
        // so, in debug builds (and through `tracing` in any build).
        if self.core.has_pending_first_run() {
            #[cfg(loom)]
            self.core
                .first_run_warnings
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let name = self.core.name().unwrap_or("<unnamed>");
            #[cfg(debug_assertions)]
            eprintln!(
                "circulation-trigger: the last handle of trigger `{name}` was dropped before its \
                 first run; the trigger is suspended and the run will not happen (keep a handle)"
            );
            #[cfg(feature = "tracing")]
            tracing::warn!(
                trigger = name,
                "last handle dropped with a run pending: suspended"
            );
            let _ = name;
        }
        self.core.suspend();
        self.core.let_go();
    }
}

impl Trigger {
    /// Binds `task` to `scheduler`. The trigger starts idle: nothing runs
    /// until it is fired.
    ///
    /// Keep the returned handle (or a clone): dropping the last handle
    /// suspends the trigger. `Trigger::bind(&scheduler, task);` never runs
    /// `task`, and `Trigger::bind(&scheduler, task).fire()?;` runs it at
    /// most once: the temporary handle is dropped at the end of the
    /// statement.
    ///
    /// Binding to a scheduler that has shut down works, and gives a
    /// trigger whose fires return [`FireError::Shutdown`].
    ///
    /// `scheduler` is a [`Scheduler`] or a
    /// [`VirtualScheduler`](crate::VirtualScheduler) (anything that is
    /// `AsRef<Scheduler>`).
    #[must_use = "dropping the last handle suspends the trigger: its task never runs"]
    pub fn bind<S: AsRef<Scheduler> + ?Sized>(scheduler: &S, task: impl Task) -> Self {
        Self::builder(scheduler).bind(task)
    }

    /// Binds an async `task` to `scheduler`: each iteration is the whole
    /// future the task returns, polled on the Tokio runtime this is called
    /// in (or the one given with [`TriggerBuilder::runtime`]); the
    /// scheduler's own timing wheel decides when iterations start. The
    /// returned trigger is the same type as [`bind`](Self::bind)'s, and
    /// every method and guarantee works unchanged, from sync or async code
    /// (on a real scheduler; virtual time is below):
    ///
    /// * the RUNNING bit is held from the moment the future is spawned until
    ///   it completes: two iterations are never in flight at once, and fires
    ///   during an `.await` coalesce into exactly one follow-up;
    /// * `suspend` during an `.await` lets that iteration finish and ignores
    ///   the delay it returns;
    /// * a panic while the future is polled is caught and reported;
    /// * [`Scheduler::shutdown_now`] drops in-flight futures at their next
    ///   `.await` and lists them as [`Cancelled`](crate::Outcome::Cancelled);
    ///   graceful shutdown and drop wait for them up to the grace period,
    ///   and a future dropped by its runtime (shut down) ends its iteration
    ///   as cancelled;
    /// * inside the future, [`is_cancelled`](crate::is_cancelled) and
    ///   [`scheduler_time`](crate::scheduler_time) answer as in a sync task.
    ///
    /// Keep the returned handle: dropping the last one suspends the
    /// trigger (as for [`bind`](Self::bind)) and then frees the task.
    ///
    /// Shut down with the async shutdowns
    /// ([`Scheduler::shutdown_async`], [`shutdown_now_async`](Scheduler::shutdown_now_async),
    /// [`shutdown_and_join_async`](Scheduler::shutdown_and_join_async)):
    /// they wait without blocking the runtime's threads, which the
    /// in-flight futures may need — the blocking ones (drop, `shutdown_now`,
    /// `await_termination`) called on a runtime thread can wait on an
    /// iteration that thread should be polling. Inside an async task, the
    /// task's own iteration counts as in flight.
    ///
    /// On a [`VirtualScheduler`](crate::VirtualScheduler) the futures run
    /// on virtual time, with no runtime:
    /// [`advance`](crate::VirtualScheduler::advance) polls them on the
    /// calling thread, and each iteration ends (and re-arms) at the virtual
    /// time its future completes. A future that waits should wait with
    /// [`VirtualClock::sleep`](crate::VirtualClock::sleep) there (a Tokio
    /// timer would wait in real time, and `advance` does not wait for it);
    /// README's "Testing" section has the recipe. To poll them on a Tokio
    /// runtime instead, name it with [`TriggerBuilder::runtime`].
    ///
    /// # Panics
    ///
    /// Like [`tokio::spawn`]: when called outside the context of a Tokio
    /// runtime, on a real scheduler. Use [`TriggerBuilder::runtime`] to
    /// name one instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let scheduler = Scheduler::new();
    /// let version = Arc::new(AtomicU64::new(0));
    /// let v = version.clone();
    /// let refresher = Trigger::bind_async(&scheduler, move || {
    ///     let v = v.clone();
    ///     async move {
    ///         tokio::time::sleep(Duration::from_millis(5)).await; // an RPC
    ///         v.fetch_add(1, Ordering::Relaxed);
    ///         Some(Duration::from_secs(30)) // next refresh in 30 s
    ///     }
    /// });
    /// // "Refresh now", and wait for it without blocking the runtime.
    /// refresher.fire_and_wait_async(Duration::from_secs(10)).await?;
    /// assert_eq!(version.load(Ordering::Relaxed), 1);
    /// # scheduler.shutdown();
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    #[must_use = "dropping the last handle suspends the trigger: its task never runs"]
    pub fn bind_async<S, F, Fut>(scheduler: &S, task: F) -> Self
    where
        S: AsRef<Scheduler> + ?Sized,
        F: FnMut() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Option<Duration>> + Send + 'static,
    {
        Self::builder(scheduler).bind_async(task)
    }

    /// A builder for a trigger with a name (shown in `Debug` and in panic
    /// reports); `scheduler` as in [`bind`](Self::bind).
    #[must_use = "a builder does nothing until `bind` is called"]
    pub fn builder<S: AsRef<Scheduler> + ?Sized>(scheduler: &S) -> TriggerBuilder<'_> {
        TriggerBuilder::new(scheduler.as_ref())
    }

    /// The handle of a core just made (its handle count starts at 1).
    pub(crate) fn from_core(core: Arc<TriggerCore>) -> Self {
        Self { core }
    }

    #[cfg(loom)]
    pub(crate) fn core(&self) -> &Arc<TriggerCore> {
        &self.core
    }

    /// Whether this trigger's scheduler has terminated (see
    /// `Shared::has_terminated`).
    #[cfg(feature = "tokio")]
    pub(crate) fn scheduler_terminated(&self) -> bool {
        self.core.runtime.has_terminated()
    }

    /// Runs the task as soon as a worker is free. Fired while an iteration
    /// runs, exactly one more iteration starts right after it ends (however
    /// many fires arrive meanwhile). Supersedes every earlier request.
    ///
    /// **What a burst becomes.** Fires that arrive together coalesce: a
    /// burst at one instant, or during a run, is one run (G5). A burst that
    /// arrives *paced* — a fire every few milliseconds, as from a bounded
    /// channel — runs on every fire that finds the trigger idle. To turn it
    /// into one run, debounce it
    /// ([`TriggerBuilder::debounce`]: one run a window after the last fire)
    /// or cap its rate ([`TriggerBuilder::min_interval`]: the first at
    /// once, then one per interval).
    ///
    /// **A storm gives way.** A fire that only lands on a run already
    /// pending — a re-run reserved during an iteration, or a run queued and
    /// not yet taken — has nothing left to do. Every 256th such fire on a
    /// thread yields that thread's CPU once ([`std::thread::yield_now`]),
    /// so threads firing in a loop on a machine with fewer cores than busy
    /// threads leave the worker that runs the task its core. A thread that
    /// does other work between fires, or whose fires find the trigger idle,
    /// never gets there. ([`fire_after`](Self::fire_after) and
    /// [`fire_within`](Self::fire_within) with a zero delay, and
    /// [`fire_and_wait`](Self::fire_and_wait), fire the same way.)
    ///
    /// # Errors
    ///
    /// [`FireError::Shutdown`] once the scheduler has shut down;
    /// [`FireError::Paused`] while the trigger is [paused](Self::pause);
    /// for a [debounced](TriggerBuilder::debounce) trigger,
    /// [`FireError::DelayTooLong`] if its window puts the run past the
    /// clock's range (nothing is requested then).
    #[inline]
    pub fn fire(&self) -> Result<(), FireError> {
        self.core.fire()
    }

    /// Runs the task once `delay` has passed (never earlier), superseding
    /// every earlier request — the latest call wins, whether its deadline is
    /// earlier or later:
    ///
    /// ```text
    /// fire_after(5s) ──┐  fire_after(1s) ──┐
    ///                  │                   └──── runs at +1s (latest wins)
    ///                  └──────────────────────── superseded, never runs
    /// ```
    ///
    /// `fire_after(Duration::ZERO)` is `fire()` as on a trigger without
    /// a debounce: a run now, never debounced. Note that `fire()` followed
    /// by `fire_after(1 h)` cancels the immediate run unless it already
    /// started, and that any `fire_after` during a periodic chain replaces
    /// the chain's next run.
    ///
    /// # Errors
    ///
    /// [`FireError::DelayTooLong`] if the deadline lies past the clock's
    /// range, about 584 years after the scheduler started (e.g.
    /// `Duration::MAX` or `Duration::from_secs(u64::MAX)`): the trigger is
    /// left exactly as it was. [`FireError::Shutdown`] once the scheduler
    /// has shut down; [`FireError::Paused`] while the trigger is paused.
    /// Every other delay is accepted: `Duration::ZERO` is a run now (never
    /// debounced), and a delay that is not a whole number of ticks rounds
    /// up.
    ///
    /// A delay over about 67 s (2^26 µs) is kept to within 2^-24 of itself
    /// (about 5 ms a day), rounded up: such a run may start that much
    /// late, never early.
    ///
    /// # Examples
    ///
    /// ```
    /// # use circulation_trigger::{Scheduler, Trigger, FireError};
    /// # use std::time::Duration;
    /// # let scheduler = Scheduler::new();
    /// let trigger = Trigger::bind(&scheduler, || None);
    /// trigger.fire_after(Duration::from_secs(3600))?;
    /// assert!(matches!(
    ///     trigger.fire_after(Duration::MAX),
    ///     Err(FireError::DelayTooLong(_))
    /// ));
    /// # Ok::<(), FireError>(())
    /// ```
    #[inline]
    pub fn fire_after(&self, delay: Duration) -> Result<(), FireError> {
        self.core.fire_after(delay)
    }

    /// "Refresh now and tell me when it is done": fires, then blocks until
    /// an iteration that serves this fire — one that started after the
    /// call, seeing everything the caller wrote before it — has finished,
    /// and returns its [`Outcome`](crate::Outcome) (`Completed`,
    /// `Panicked`, or `Cancelled` if it saw [`is_cancelled`](crate::is_cancelled)).
    /// An iteration already in flight at the call does not count: its
    /// follow-up does. Concurrent callers share one run (fires coalesce as
    /// always).
    ///
    /// On a [`VirtualScheduler`](crate::VirtualScheduler) the run happens
    /// when another thread advances time; with none, the call times out
    /// (and with `Duration::MAX` waits for ever).
    ///
    /// # Errors
    ///
    /// No hang beyond the timeout: [`WaitError::Timeout`](crate::WaitError::Timeout) after `timeout` (the fire
    /// stands; any duration is accepted, `Duration::MAX` waits without
    /// limit), [`WaitError::Suspended`](crate::WaitError::Suspended) if a `suspend` or a `pause`
    /// superseded the fire before a run serving it started (one that
    /// started first runs to its end and answers),
    /// [`WaitError::Shutdown`](crate::WaitError::Shutdown) if the scheduler shut down before such a
    /// run started, [`WaitError::OwnTask`](crate::WaitError::OwnTask) when called from inside
    /// this trigger's own task, and the refusals of [`fire`](Self::fire):
    /// [`WaitError::Paused`](crate::WaitError::Paused) while the trigger is paused,
    /// [`WaitError::DelayTooLong`](crate::WaitError::DelayTooLong) for a debounce window past the
    /// clock's range.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Outcome, Scheduler, Trigger};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let scheduler = Scheduler::new();
    /// let version = Arc::new(AtomicU64::new(0));
    /// let v = version.clone();
    /// let refresher = Trigger::bind(&scheduler, move || {
    ///     v.fetch_add(1, Ordering::Relaxed); // fetch the configuration
    ///     Some(Duration::from_secs(60))
    /// });
    /// // A request handler: refresh now, and answer once it is done.
    /// let outcome = refresher.fire_and_wait(Duration::from_secs(10))?;
    /// assert_eq!(outcome, Outcome::Completed);
    /// assert_eq!(version.load(Ordering::Relaxed), 1);
    /// # Ok::<(), circulation_trigger::WaitError>(())
    /// ```
    pub fn fire_and_wait(&self, timeout: Duration) -> Result<crate::Outcome, crate::WaitError> {
        self.core.fire_and_wait(timeout)
    }

    /// The awaitable [`fire_and_wait`](Self::fire_and_wait), for sync and
    /// async triggers alike: fires now (when called, not when first
    /// polled), and the future resolves once an iteration that serves this
    /// fire has finished, with its [`Outcome`](crate::Outcome). It waits
    /// without blocking a thread; concurrent waiters share one run.
    ///
    /// # Errors
    ///
    /// As [`fire_and_wait`](Self::fire_and_wait): `Timeout` (the fire
    /// stands), `Suspended`, `Shutdown`, `OwnTask` when called from
    /// inside this trigger's own task or future, `Paused` and
    /// `DelayTooLong`.
    ///
    /// # Panics
    ///
    /// The timeout is a [`tokio::time::timeout`]: awaited outside a Tokio
    /// runtime with the time driver enabled, it panics as that does —
    /// except with `Duration::MAX`, which needs no timer.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Outcome, Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), circulation_trigger::WaitError> {
    /// let scheduler = Scheduler::new();
    /// let trigger = Trigger::bind(&scheduler, || None); // a sync task
    /// let outcome = trigger.fire_and_wait_async(Duration::from_secs(10)).await?;
    /// assert_eq!(outcome, Outcome::Completed);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn fire_and_wait_async(
        &self,
        timeout: Duration,
    ) -> impl std::future::Future<Output = Result<crate::Outcome, crate::WaitError>> + Send + 'static
    {
        let fired = self.core.fire_for_wait();
        let core = Arc::clone(&self.core);
        async move {
            let wait = crate::core::wait_future::WaitFuture::new(core, fired?);
            match tokio::time::Instant::now().checked_add(timeout) {
                Some(deadline) => tokio::time::timeout_at(deadline, wait)
                    .await
                    .unwrap_or(Err(crate::WaitError::Timeout)),
                None => wait.await,
            }
        }
    }

    /// Runs the task at `deadline` (at once if it has passed), superseding
    /// earlier requests like [`fire_after`](Self::fire_after): latest
    /// wins, never early.
    ///
    /// On a [`VirtualScheduler`](crate::VirtualScheduler), whose time is
    /// not the real clock's, `deadline` counts from the real now: the run is
    /// due `deadline - Instant::now()` of virtual time later. Use
    /// [`fire_at_elapsed`](Self::fire_at_elapsed) to name a point of the
    /// scheduler's own time on either kind.
    ///
    /// # Errors
    ///
    /// As [`fire_after`](Self::fire_after).
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::time::{Duration, Instant};
    ///
    /// let scheduler = Scheduler::new();
    /// let trigger = Trigger::bind(&scheduler, || None);
    /// let nightly = Instant::now() + Duration::from_secs(3600);
    /// trigger.fire_at(nightly)?;
    /// trigger.fire_at(Instant::now() - Duration::from_secs(1))?; // past: now
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    #[inline]
    pub fn fire_at(&self, deadline: std::time::Instant) -> Result<(), FireError> {
        self.core.fire_at(deadline)
    }

    /// Runs the task when the scheduler's clock shows `at` — the time since
    /// it was built, as [`VirtualScheduler::now`](crate::VirtualScheduler::now),
    /// [`scheduler_time`](crate::scheduler_time) and the statistics count it
    /// — or at once if it already has. Latest wins, never early, on the real
    /// and the virtual scheduler alike (a point over about 67 s ahead is
    /// rounded up as [`fire_after`](Self::fire_after) says).
    ///
    /// # Errors
    ///
    /// As [`fire_after`](Self::fire_after).
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::bind(&sim, || None);
    /// trigger.fire_at_elapsed(Duration::from_secs(90))?;
    /// sim.advance(Duration::from_secs(120));
    /// assert_eq!(trigger.stats().last_start, Some(Duration::from_secs(90)));
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    #[inline]
    pub fn fire_at_elapsed(&self, at: Duration) -> Result<(), FireError> {
        let at_ns = u64::try_from(at.as_nanos()).unwrap_or(u64::MAX);
        self.core.fire_at_ns(at_ns)
    }

    /// Runs the task after a uniformly random delay in `[0, window)`,
    /// superseding earlier requests like [`fire_after`](Self::fire_after)
    /// (whose rounding of the deadline up to the microsecond, or to the
    /// [tick](crate::Builder::tick), applies as well).
    /// A "refresh now" broadcast to a fleet spread over a window does not
    /// stampede the service every client calls.
    ///
    /// # Errors
    ///
    /// As [`fire_after`](Self::fire_after), judged on the end of the
    /// window, so the answer does not depend on the random draw:
    /// `fire_within(Duration::MAX)` returns
    /// `Err(FireError::DelayTooLong(Duration::MAX))` and leaves the trigger
    /// as it was. `fire_within(Duration::ZERO)` is `fire()` as on a
    /// trigger without a debounce: a run now, never debounced.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::bind(&sim, || None);
    /// trigger.fire_within(Duration::from_secs(10))?;
    /// sim.advance(Duration::from_secs(10));
    /// let ran_at = trigger.stats().last_start.unwrap();
    /// assert!(ran_at < Duration::from_secs(10));
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    #[inline]
    pub fn fire_within(&self, window: Duration) -> Result<(), FireError> {
        self.core.fire_within(window)
    }

    /// Cancels what is pending: no new iteration starts after `suspend`
    /// returns — **until the next fire**, which starts the trigger again;
    /// an iteration in flight finishes and its returned delay is ignored.
    /// A pause and a [`resume`](Self::resume) do not undo it: suspended
    /// before the pause or while paused, the trigger stays idle after the
    /// resume until the next fire. Works after shutdown too. A switch that
    /// must hold whatever fires arrive wants [`pause`](Self::pause) (see
    /// [Pause and resume](#pause-and-resume)).
    #[inline]
    pub fn suspend(&self) {
        self.core.suspend();
    }

    /// A weak handle, for a task that fires or suspends its own trigger.
    pub fn downgrade(&self) -> WeakTrigger {
        WeakTrigger {
            core: Arc::downgrade(&self.core),
        }
    }

    /// The trigger's name, if it was built with one.
    pub fn name(&self) -> Option<&str> {
        self.core.name()
    }

    /// Statistics: fires, coalesced fires, iterations, panics, last start
    /// and end, last and maximum lateness, and the current state. Cheap:
    /// always on, nothing is counted on the fire path itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger, TriggerState};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::builder(&sim).name("poll").bind(|| Some(Duration::from_secs(10)));
    /// for _ in 0..3 {
    ///     trigger.fire()?; // three fires, one iteration: two coalesced
    /// }
    /// sim.advance(Duration::from_secs(15)); // runs at 0 s and 10 s
    /// let stats = trigger.stats();
    /// assert_eq!((stats.fires, stats.coalesced_fires, stats.iterations), (3, 2, 2));
    /// assert_eq!(stats.state, TriggerState::Armed(Duration::from_secs(20)));
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn stats(&self) -> crate::TriggerStats {
        self.core.stats()
    }

    /// The state word now (running, reserved, version), for diagnostics
    /// and tests: one atomic load; see [`Snapshot`].
    pub fn snapshot(&self) -> Snapshot {
        self.core.snapshot()
    }
}

impl fmt::Debug for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trigger")
            .field("name", &self.name())
            .field("state", &self.snapshot())
            .finish()
    }
}
