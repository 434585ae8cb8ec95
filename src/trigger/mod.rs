//! The public trigger handle. Bind a task to a scheduler, then `fire`,
//! `fire_after` and `suspend` it from any thread.

use crate::core::Counted;
use crate::error::FireError;
use crate::scheduler::{Scheduler, TriggerCore};
use crate::state::Snapshot;
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
/// is dropped, the trigger is suspended. Its task is dropped as soon as no
/// iteration is in flight. For a trigger that never asked for a deadline,
/// that happens in the drop. For one that did, through `fire_after` or a
/// returned delay, a scheduler thread as a rule drops the task once the
/// timer lets go of it. The drop asks the timer to let go at once. On a
/// [`VirtualScheduler`](crate::testing::VirtualScheduler), the task is dropped in the
/// drop, or by an advance running at that moment. A task that needs its own
/// trigger captures a [`WeakTrigger`]. A strong one would keep itself alive
/// forever.
///
/// # Guarantees
///
/// The task never runs concurrently with itself, so it may be `FnMut`
/// without a lock. The latest `fire`/`fire_after`/`suspend` wins. Fires
/// during a run coalesce into one follow-up. No fire is lost. See the
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
    /// The trigger itself. The core counts its handles, and dropping the last
    /// one suspends. See `Core::release_handle`.
    core: Counted<TriggerCore>,
}

impl Clone for Trigger {
    fn clone(&self) -> Self {
        self.core.add_handle();
        Self {
            core: Counted::clone(&self.core),
        }
    }
}

impl Drop for Trigger {
    fn drop(&mut self) {
        if !self.core.release_handle() {
            return;
        }
        // The last handle going while the first run is pending is almost
        // always `Trigger::bind(..).fire()` with the handle not kept. Say
        // so in debug builds, and through `tracing` in any build.
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
    /// Binds `task` to `scheduler`. The trigger starts idle, and nothing runs
    /// until it is fired.
    ///
    /// Keep the returned handle or a clone, since dropping the last handle
    /// suspends the trigger. `Trigger::bind(&scheduler, task);` never runs
    /// `task`. `Trigger::bind(&scheduler, task).fire()?;` runs it at most
    /// once, since the temporary handle is dropped at the end of the
    /// statement.
    ///
    /// Binding to a scheduler that has shut down works, and gives a
    /// trigger whose fires return [`FireError::Shutdown`].
    ///
    /// `scheduler` is a [`Scheduler`] or a
    /// [`VirtualScheduler`](crate::testing::VirtualScheduler). Anything that is
    /// `AsRef<Scheduler>` will do.
    #[must_use = "dropping the last handle suspends the trigger: its task never runs"]
    pub fn bind<S: AsRef<Scheduler> + ?Sized>(scheduler: &S, task: impl Task) -> Self {
        Self::builder(scheduler).bind(task)
    }

    /// Binds an async `task` to `scheduler`. Each iteration is the whole
    /// future the task returns. It is polled on the Tokio runtime this is
    /// called in, or on the one given with [`TriggerBuilder::runtime`]. The
    /// scheduler's own timing wheel decides when iterations start. The
    /// returned trigger is the same type as [`bind`](Self::bind)'s. Every
    /// method and guarantee works unchanged, from sync or async code. On a
    /// real scheduler that means the points below. Virtual time comes after
    /// them.
    ///
    /// * The RUNNING bit is held from the moment the future is spawned until
    ///   it completes. So two iterations are never in flight at once, and
    ///   fires during an `.await` coalesce into exactly one follow-up.
    /// * `suspend` during an `.await` lets that iteration finish and ignores
    ///   the delay it returns.
    /// * A panic while the future is polled is caught and reported.
    /// * [`Scheduler::shutdown_now`] drops in-flight futures at their next
    ///   `.await` and lists them as [`Cancelled`](crate::Outcome::Cancelled).
    ///   Graceful shutdown and drop wait for them up to the grace period. A
    ///   future dropped by its runtime because that runtime shut down ends
    ///   its iteration as cancelled.
    /// * Inside the future, [`is_cancelled`](crate::is_cancelled) and
    ///   [`scheduler_time`](crate::scheduler_time) answer as in a sync task.
    ///
    /// Keep the returned handle. Dropping the last one suspends the trigger,
    /// as for [`bind`](Self::bind), and then frees the task.
    ///
    /// Shut down with the async shutdowns, which are
    /// [`Scheduler::shutdown_async`],
    /// [`shutdown_now_async`](Scheduler::shutdown_now_async) and
    /// [`await_termination_async`](Scheduler::await_termination_async).
    /// They wait without blocking the runtime's threads, which the in-flight
    /// futures may need. The blocking ones are drop, `shutdown_now` and
    /// `await_termination`. Called on a runtime thread, they can wait on an
    /// iteration that thread should be polling. Inside an async task, the
    /// task's own iteration counts as in flight.
    ///
    /// On a [`VirtualScheduler`](crate::testing::VirtualScheduler) the futures run
    /// on virtual time, with no runtime.
    /// [`advance`](crate::testing::VirtualScheduler::advance) polls them on the
    /// calling thread. Each iteration ends and re-arms at the virtual time
    /// its future completes. A future that waits should wait with
    /// [`VirtualClock::sleep`](crate::testing::VirtualClock::sleep) there. A Tokio
    /// timer would wait in real time, and `advance` does not wait for it.
    /// README's "Testing" section has the recipe. To poll them on a Tokio
    /// runtime instead, name it with [`TriggerBuilder::runtime`].
    ///
    /// # Panics
    ///
    /// Panics like [`tokio::spawn`] when called outside the context of a
    /// Tokio runtime, on a real scheduler. Use [`TriggerBuilder::runtime`]
    /// to name one instead.
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

    /// A builder for a trigger with a name, which `Debug` and panic reports
    /// show. `scheduler` is as in [`bind`](Self::bind).
    #[must_use = "a builder does nothing until `bind` is called"]
    pub fn builder<S: AsRef<Scheduler> + ?Sized>(scheduler: &S) -> TriggerBuilder<'_> {
        TriggerBuilder::new(scheduler.as_ref())
    }

    /// The handle of a core just made, whose handle count starts at 1.
    pub(crate) fn from_core(core: Counted<TriggerCore>) -> Self {
        Self { core }
    }

    #[cfg(loom)]
    pub(crate) fn core(&self) -> &Counted<TriggerCore> {
        &self.core
    }

    /// Whether this trigger's scheduler has terminated, as
    /// `Shared::has_terminated` tells.
    #[cfg(feature = "tokio")]
    pub(crate) fn scheduler_terminated(&self) -> bool {
        self.core.runtime.has_terminated()
    }

    /// Runs the task as soon as a worker is free. Fired while an iteration
    /// runs, exactly one more iteration starts right after it ends, however
    /// many fires arrive meanwhile. Supersedes every earlier request.
    ///
    /// **What a burst becomes.** Fires that arrive together coalesce. A
    /// burst at one instant, or during a run, is one run, as guarantee G5
    /// promises. A burst that arrives *paced* runs on every fire that finds
    /// the trigger idle. Such a burst has a fire every few milliseconds, as
    /// from a bounded channel. To turn it into one run, debounce it or cap
    /// its rate. [`TriggerPolicies::debounce`](crate::policy::TriggerPolicies::debounce) gives one run a window after
    /// the last fire. [`TriggerPolicies::min_interval`](crate::policy::TriggerPolicies::min_interval) runs the first at
    /// once, then one per interval.
    ///
    /// **A storm gives way.** A fire that only lands on a run already
    /// pending has nothing left to do. That run is a re-run reserved during
    /// an iteration, or a run queued and not yet taken. Every 256th such
    /// fire on a thread yields that thread's CPU once, with
    /// [`std::thread::yield_now`]. So threads firing in a loop on a machine
    /// with fewer cores than busy threads leave the worker that runs the task
    /// its core. A thread that does other work between fires, or whose fires
    /// find the trigger idle, never gets there. [`fire_after`](Self::fire_after)
    /// and [`fire_within`](Self::fire_within) with a zero delay fire the same
    /// way, and so does [`fire_and_wait`](Self::fire_and_wait).
    ///
    /// # Errors
    ///
    /// [`FireError::Shutdown`] once the scheduler has shut down.
    /// [`FireError::Paused`] while the trigger is [paused](Self::pause). For
    /// a [debounced](crate::policy::TriggerPolicies::debounce) trigger,
    /// [`FireError::DelayTooLong`] if its window puts the run past the
    /// clock's range. Nothing is requested then.
    #[inline]
    pub fn fire(&self) -> Result<(), FireError> {
        self.core.fire()
    }

    /// Runs the task once `delay` has passed, never earlier. It supersedes
    /// every earlier request. The latest call wins, whether its deadline is
    /// earlier or later.
    ///
    /// ```text
    /// fire_after(5s) ──┐  fire_after(1s) ──┐
    ///                  │                   └──── runs at +1s (latest wins)
    ///                  └──────────────────────── superseded, never runs
    /// ```
    ///
    /// `fire_after(Duration::ZERO)` is `fire()` as on a trigger without a
    /// debounce. It is a run now, never debounced. Note that `fire()`
    /// followed by `fire_after(1 h)` cancels the immediate run unless it
    /// already started. Any `fire_after` during a periodic chain replaces the
    /// chain's next run.
    ///
    /// # Errors
    ///
    /// [`FireError::DelayTooLong`] if the deadline lies past the clock's
    /// range, about 584 years after the scheduler started. `Duration::MAX`
    /// and `Duration::from_secs(u64::MAX)` are such delays. The trigger is
    /// then left exactly as it was. [`FireError::Shutdown`] once the
    /// scheduler has shut down. [`FireError::Paused`] while the trigger is
    /// paused. Every other delay is accepted. `Duration::ZERO` is a run now,
    /// never debounced. A delay that is not a whole number of ticks rounds
    /// up.
    ///
    /// A delay over about 67 seconds, which is 2^26 microseconds, is kept to
    /// within 2^-24 of itself, rounded up. That is about five milliseconds a
    /// day. Such a run may start that much late, never early.
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

    /// "Refresh now and tell me when it is done." It fires, then blocks until
    /// an iteration that serves this fire has finished. Such an iteration
    /// started after the call and sees everything the caller wrote before
    /// it. The call returns that iteration's [`Outcome`](crate::Outcome). The
    /// outcome is `Completed`, `Panicked`, or `Cancelled` if the iteration
    /// saw [`is_cancelled`](crate::is_cancelled). An iteration already in
    /// flight at the call does not count, but its follow-up does. Concurrent
    /// callers share one run, since fires coalesce as always.
    ///
    /// On a [`VirtualScheduler`](crate::testing::VirtualScheduler) the run happens
    /// when another thread advances time. With no such thread, the call
    /// times out. With `Duration::MAX` it then waits for ever.
    ///
    /// # Errors
    ///
    /// No hang beyond the timeout. [`WaitError::Timeout`](crate::WaitError::Timeout)
    /// comes after `timeout`, and the fire stands. Any duration is accepted,
    /// and `Duration::MAX` waits without limit.
    /// [`WaitError::Suspended`](crate::WaitError::Suspended) comes if a
    /// `suspend` or a `pause` superseded the fire before a run serving it
    /// started. A run that started first runs to its end and answers.
    /// [`WaitError::Shutdown`](crate::WaitError::Shutdown) comes if the
    /// scheduler shut down before such a run started.
    /// [`WaitError::OwnTask`](crate::WaitError::OwnTask) comes when called
    /// from inside this trigger's own task. The refusals of
    /// [`fire`](Self::fire) come too.
    /// [`WaitError::Paused`](crate::WaitError::Paused) comes while the
    /// trigger is paused.
    /// [`WaitError::DelayTooLong`](crate::WaitError::DelayTooLong) comes for
    /// a debounce window past the clock's range.
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
    /// async triggers alike. It fires when called, not when first polled.
    /// The future resolves once an iteration that serves this fire has
    /// finished, with its [`Outcome`](crate::Outcome). It waits without
    /// blocking a thread. Concurrent waiters share one run.
    ///
    /// # Errors
    ///
    /// As [`fire_and_wait`](Self::fire_and_wait). The errors are `Timeout`,
    /// after which the fire stands, `Suspended`, `Shutdown`, `Paused` and
    /// `DelayTooLong`. `OwnTask` comes when called from inside this
    /// trigger's own task or future.
    ///
    /// # Panics
    ///
    /// The timeout is a [`tokio::time::timeout`]. Awaited outside a Tokio
    /// runtime with the time driver enabled, it panics as that does.
    /// `Duration::MAX` is the exception, since it needs no timer.
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
        let core = Counted::clone(&self.core);
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

    /// Runs the task at `deadline`, or at once if it has passed. It
    /// supersedes earlier requests as [`fire_after`](Self::fire_after) does.
    /// The latest wins, and the run is never early.
    ///
    /// On a [`VirtualScheduler`](crate::testing::VirtualScheduler), whose time is
    /// not the real clock's, `deadline` counts from the real now. The run is
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

    /// Runs the task when the scheduler's clock shows `at`, or at once if it
    /// already has. `at` is the time since the scheduler was built, as
    /// [`VirtualScheduler::now`](crate::testing::VirtualScheduler::now),
    /// [`scheduler_time`](crate::scheduler_time) and the statistics count it.
    /// The latest wins and the run is never early, on the real and the
    /// virtual scheduler alike. A point over about 67 seconds ahead is
    /// rounded up as [`fire_after`](Self::fire_after) says.
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

    /// Runs the task after a uniformly random delay in `[0, window)`. It
    /// supersedes earlier requests as [`fire_after`](Self::fire_after) does.
    /// That method's rounding of the deadline up to the microsecond, or to
    /// the [tick](crate::Builder::tick), applies as well.
    /// A "refresh now" broadcast to a fleet spread over a window does not
    /// stampede the service every client calls.
    ///
    /// # Errors
    ///
    /// As [`fire_after`](Self::fire_after), judged on the end of the
    /// window, so the answer does not depend on the random draw.
    /// `fire_within(Duration::MAX)` returns
    /// `Err(FireError::DelayTooLong(Duration::MAX))` and leaves the trigger
    /// as it was. `fire_within(Duration::ZERO)` is `fire()` as on a
    /// trigger without a debounce. It is a run now, never debounced.
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

    /// Cancels what is pending. No new iteration starts after `suspend`
    /// returns, **until the next fire**, which starts the trigger again. An
    /// iteration in flight finishes, and its returned delay is ignored. A
    /// pause and a [`resume`](Self::resume) do not undo it. Suspended before
    /// the pause or while paused, the trigger stays idle after the resume
    /// until the next fire. It works after shutdown too. A switch that must
    /// hold whatever fires arrive wants [`pause`](Self::pause). See
    /// [Pause and resume](#pause-and-resume).
    #[inline]
    pub fn suspend(&self) {
        self.core.suspend();
    }

    /// A weak handle, for a task that fires or suspends its own trigger.
    pub fn downgrade(&self) -> WeakTrigger {
        WeakTrigger {
            core: Counted::downgrade(&self.core),
        }
    }

    /// The trigger's name, if it was built with one.
    pub fn name(&self) -> Option<&str> {
        self.core.name()
    }

    /// Statistics of fires, coalesced fires, iterations, panics, last start
    /// and end, last and maximum lateness, and the current state. They are
    /// cheap. They are always on, and nothing is counted on the fire path
    /// itself.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger, report::TriggerState};
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
    pub fn stats(&self) -> crate::report::TriggerStats {
        self.core.stats()
    }

    /// The state word now, with its running bit, reserved bit and version.
    pub(crate) fn snapshot(&self) -> Snapshot {
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
