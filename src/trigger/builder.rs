//! [`TriggerBuilder`] builds a trigger with options. They are a name, a
//! minimum interval, stuck detection, a panic policy and an async runtime.

use super::Trigger;
use crate::core::TaskCell;
use crate::policy::{PanicPolicy, Policies};
use crate::scheduler::{Scheduler, TriggerCore};
use crate::sync::Arc;
use crate::task::Task;
use std::time::Duration;

/// Builds a [`Trigger`] with options. See [`Trigger::builder`].
///
/// # Examples
///
/// ```
/// use circulation_trigger::{Scheduler, Trigger};
///
/// let scheduler = Scheduler::new();
/// let trigger = Trigger::builder(&scheduler)
///     .name("config-refresh")
///     .bind(|| None);
/// assert_eq!(trigger.name(), Some("config-refresh"));
/// ```
#[derive(Debug)]
#[must_use = "a builder does nothing until `bind` is called"]
pub struct TriggerBuilder<'a> {
    scheduler: &'a Scheduler,
    name: Option<Box<str>>,
    version: u32,
    min_interval: Duration,
    debounce: Option<(Duration, Duration)>,
    stuck_after: Duration,
    on_panic: PanicPolicy,
    #[cfg(feature = "tokio")]
    runtime: Option<tokio::runtime::Handle>,
}

impl<'a> TriggerBuilder<'a> {
    /// The scheduler the trigger will be bound to.
    pub(crate) fn scheduler(&self) -> &'a Scheduler {
        self.scheduler
    }

    /// The name set, if any.
    pub(crate) fn name_set(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Whether no `stuck_after` was set.
    pub(crate) fn stuck_after_unset(&self) -> bool {
        self.stuck_after.is_zero()
    }

    /// A builder with no options set, for [`Trigger::builder`].
    pub(super) fn new(scheduler: &'a Scheduler) -> Self {
        Self {
            scheduler,
            name: None,
            version: 0,
            min_interval: Duration::ZERO,
            debounce: None,
            stuck_after: Duration::ZERO,
            on_panic: PanicPolicy::Stop,
            #[cfg(feature = "tokio")]
            runtime: None,
        }
    }

    /// Names the trigger. `Debug`, statistics, shutdown reports and panic
    /// reports show the name.
    ///
    /// # Edge cases
    ///
    /// None. Any string is a name, the empty one and very long ones
    /// included. It is stored as given.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into().into_boxed_str());
        self
    }

    /// Starts the 30-bit version counter at `version`, masked to 30 bits,
    /// instead of 0. Behaviour does not depend on it, as guarantee G12
    /// promises. It exists to test code that reads versions, or the crate
    /// itself, across the wrap-around without a billion fires first.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    ///
    /// let scheduler = Scheduler::new();
    /// let last = (1 << 30) - 1;
    /// let trigger = Trigger::builder(&scheduler).start_version(last).bind(|| None);
    /// assert_eq!(trigger.snapshot().version(), last);
    /// trigger.suspend(); // the next version wraps to 0
    /// assert_eq!(trigger.snapshot().version(), 0);
    /// ```
    pub fn start_version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// Binds `task` and returns the trigger, which starts idle. Dropping the
    /// last handle suspends the trigger. See [`Trigger::bind`].
    #[must_use = "dropping the last handle suspends the trigger: its task never runs"]
    pub fn bind(mut self, task: impl Task) -> Trigger {
        // Moved, not cloned, since a clone of a `RetryBackoff` draws a fresh
        // generator. That would lose a seed the user gave it.
        let on_panic = std::mem::replace(&mut self.on_panic, PanicPolicy::Stop);
        self.bind_cell(TaskCell::new(task, on_panic), None)
    }

    fn bind_cell(
        self,
        task: TaskCell,
        spawner: Option<Arc<dyn crate::async_task::Spawn>>,
    ) -> Trigger {
        let policies = Policies::new(
            self.name,
            self.min_interval,
            self.stuck_after,
            self.debounce,
            spawner,
        );
        let core = TriggerCore::new(
            Arc::clone(&self.scheduler.shared),
            task,
            policies,
            self.version,
        );
        Trigger::from_core(core)
    }

    /// Binds an async task whose iterations `spawner` polls.
    #[cfg(any(feature = "tokio", loom))]
    pub(crate) fn bind_spawned(
        mut self,
        spawner: Arc<dyn crate::async_task::Spawn>,
        task: impl crate::async_task::AsyncTask,
    ) -> Trigger {
        // Moved, not cloned, for the reason `bind` gives.
        let on_panic = std::mem::replace(&mut self.on_panic, PanicPolicy::Stop);
        let body = crate::async_task::AsyncBody { task };
        self.bind_cell(TaskCell::new_async(body, on_panic), Some(spawner))
    }

    /// The Tokio runtime whose threads poll the iterations of a trigger
    /// bound with [`bind_async`](Self::bind_async). By default it is the
    /// runtime `bind_async` is called in.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// let runtime = tokio::runtime::Runtime::new()?;
    /// let scheduler = Scheduler::new();
    /// // Outside any runtime: name the one to use.
    /// let trigger = Trigger::builder(&scheduler)
    ///     .runtime(runtime.handle().clone())
    ///     .bind_async(|| async { None });
    /// let outcome = trigger.fire_and_wait(Duration::from_secs(10))?;
    /// assert_eq!(outcome, circulation_trigger::Outcome::Completed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub fn runtime(mut self, handle: tokio::runtime::Handle) -> Self {
        self.runtime = Some(handle);
        self
    }

    /// Binds an async `task`. Each iteration is the future it returns,
    /// polled on a Tokio runtime as [`runtime`](Self::runtime) explains. A
    /// virtual scheduler without a runtime polls it in its `advance`. The
    /// scheduler decides when iterations start. See
    /// [`Trigger::bind_async`].
    ///
    /// # Panics
    ///
    /// Panics like [`tokio::spawn`] if no runtime was given with
    /// [`runtime`](Self::runtime) and this is called, for a real
    /// scheduler, outside the context of a Tokio runtime.
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    #[must_use = "dropping the last handle suspends the trigger: its task never runs"]
    pub fn bind_async<F, Fut>(mut self, task: F) -> Trigger
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Option<Duration>> + Send + 'static,
    {
        let spawner: Arc<dyn crate::async_task::Spawn> = match self.runtime.take() {
            Some(handle) => Arc::new(handle),
            // On virtual time, `advance` polls the iterations.
            None => match &self.scheduler.local {
                Some(local) => Arc::clone(local) as Arc<dyn crate::async_task::Spawn>,
                None => Arc::new(tokio::runtime::Handle::try_current().unwrap_or_else(|_| {
                    panic!(
                        "`bind_async` must be called from the context of a Tokio runtime, \
                         or given one with `TriggerBuilder::runtime`"
                    )
                })),
            },
        };
        self.bind_spawned(spawner, task)
    }

    /// A cooldown. No iteration starts sooner than `interval` after the
    /// previous one started. A run due earlier waits for the cooldown's end.
    /// Such a run may come from a fire, a re-run after a reservation, or a
    /// shorter delay the task returned. All that come meanwhile coalesce
    /// into that one run. A `fire_after` beyond the cooldown is served at its
    /// deadline as usual, and the latest wins. A storm of "refresh now"
    /// messages then costs at most one run per `interval`. `Duration::ZERO`,
    /// the default, sets no cooldown. A refresher's trigger starts with a
    /// cooldown of one second instead (see
    /// [`RefreshBuilder::trigger`](crate::RefreshBuilder::trigger)).
    ///
    /// ```text
    /// run ──┐ fire fire fire            fire_after(30 s) ─┐
    ///       │  │    │    │                                 │
    ///       ●──┴────┴────┴──── ● (at +10 s: one run)       └─ ● (+30 s)
    ///       └─ min_interval(10 s) ─┘
    /// ```
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::builder(&sim)
    ///     .min_interval(Duration::from_secs(10))
    ///     .bind(|| None);
    /// trigger.fire()?; // runs at 0 s
    /// sim.advance(Duration::from_secs(1));
    /// for _ in 0..100 {
    ///     trigger.fire()?; // a storm at 1 s: one run, at 10 s
    /// }
    /// sim.advance(Duration::from_secs(20));
    /// assert_eq!(trigger.stats().iterations, 2);
    /// assert_eq!(trigger.stats().last_start, Some(Duration::from_secs(10)));
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn min_interval(mut self, interval: Duration) -> Self {
        self.min_interval = interval;
        self
    }

    /// Debounces `fire` on the trailing edge. A burst of fires becomes one
    /// run `window` after its **last** fire, since each fire pushes the run
    /// back. The run comes no later than `max_wait` after the burst's
    /// **first** fire. So a steady stream of fires still runs every
    /// `max_wait`. A burst begins with the first fire after a worker claimed
    /// a run. The claim ends the burst before it, even one the run then finds
    /// superseded or holds for `min_interval`. Compare
    /// [`min_interval`](Self::min_interval), which runs the first fire at
    /// once and caps the rate after it.
    ///
    /// ```text
    /// fires:         f  f   f    f                 f
    /// debounce(w):   ───────────────┤w├● ─────────────┤w├●   one run, w after the last fire
    /// min_interval:  ●─────────┤d├● ─────────────────● ...   first at once, then one per d
    /// ```
    ///
    /// `suspend` and `pause` end a burst too, and the next fire begins a new
    /// one. Take a window of 200 milliseconds, a fire at 0, `suspend` at 0.1
    /// seconds and a fire at 10 seconds. The run comes at 10.2 seconds, not
    /// at once for a burst begun at 0.
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::builder(&sim)
    ///     .debounce(Duration::from_millis(200), Duration::from_secs(2))
    ///     .bind(|| None);
    /// trigger.fire()?;
    /// sim.advance(Duration::from_millis(100));
    /// trigger.suspend(); // the burst begun at 0 ends, unserved
    /// sim.advance(Duration::from_millis(9_900));
    /// trigger.fire()?; // at 10 s: a new burst
    /// sim.advance(Duration::from_secs(1));
    /// assert_eq!(trigger.stats().last_start, Some(Duration::from_millis(10_200)));
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    ///
    /// Only `fire` is debounced, with `fire_and_wait`, whose wait ends with
    /// that run. `fire_after`, `fire_at` and `fire_within` name their own
    /// time. Combined with `min_interval`, the debounced run also waits
    /// for the cooldown.
    ///
    /// # Edge cases
    ///
    /// A zero `window` turns debouncing off. A `max_wait` under `window`
    /// runs every burst `max_wait` after its first fire. Both are rounded
    /// up to the microsecond, and `Duration::MAX` saturates. A `max_wait`
    /// that long never caps. A window that puts the run past the clock's
    /// range, uncapped by `max_wait`, makes `fire` return
    /// [`FireError::DelayTooLong`](crate::FireError::DelayTooLong), as
    /// `fire_after` would. Nothing is requested then.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::builder(&sim)
    ///     .debounce(Duration::from_millis(200), Duration::from_secs(2))
    ///     .bind(|| None);
    /// for _ in 0..5 {
    ///     trigger.fire()?; // a paced burst: one fire every 100 ms
    ///     sim.advance(Duration::from_millis(100));
    /// }
    /// assert_eq!(trigger.stats().iterations, 0);
    /// sim.advance(Duration::from_millis(100)); // 200 ms after the last fire
    /// assert_eq!(trigger.stats().iterations, 1);
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn debounce(mut self, window: Duration, max_wait: Duration) -> Self {
        self.debounce = Some((window, max_wait));
        self
    }

    /// Reports a run still in flight `after` it started, once per run. The
    /// report goes to the scheduler's [`stuck_hook`](crate::Builder::stuck_hook).
    /// With the `tracing` feature it is also a `tracing` warning.
    /// [`TriggerStats::stuck`](crate::TriggerStats::stuck) shows it until
    /// that run ends. The run is not interrupted, since a sync task cannot
    /// be. The scheduler's monitor checks every half
    /// [stall threshold](crate::Builder::stall_threshold), so a report
    /// comes within about that much after `after`. On a
    /// [`VirtualScheduler`](crate::VirtualScheduler) time does not move
    /// during a run, so no run becomes stuck. `Duration::ZERO`, the default,
    /// never reports.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::sync::mpsc;
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = mpsc::channel();
    /// let scheduler = Scheduler::builder()
    ///     .stuck_hook(move |stuck| tx.send(stuck.trigger().map(str::to_owned)).unwrap())
    ///     .build()?;
    /// let trigger = Trigger::builder(&scheduler)
    ///     .name("config-refresh")
    ///     .stuck_after(Duration::from_millis(20))
    ///     .bind(|| {
    ///         std::thread::sleep(Duration::from_millis(200)); // an RPC that hangs
    ///         None
    ///     });
    /// trigger.fire().unwrap();
    /// let stuck = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    /// assert_eq!(stuck.as_deref(), Some("config-refresh"));
    /// # Ok::<(), circulation_trigger::BuildError>(())
    /// ```
    pub fn stuck_after(mut self, after: Duration) -> Self {
        self.stuck_after = after;
        self
    }

    /// What a panic in the task does, as a [`PanicPolicy`]. By default the
    /// trigger stops circulating, as guarantee G8 says. It may instead retry
    /// after a back-off. The panic is caught, counted and reported either
    /// way.
    pub fn on_panic(mut self, policy: PanicPolicy) -> Self {
        self.on_panic = policy;
        self
    }

    /// Applies every policy `policies` sets, such as policies read from a
    /// config file. A field left `None` keeps the builder's setting. See
    /// [`TriggerPolicies`](crate::TriggerPolicies).
    pub fn policies(mut self, policies: &crate::policy::TriggerPolicies) -> Self {
        if let Some(name) = &policies.name {
            self = self.name(name.clone());
        }
        if let Some(interval) = policies.min_interval {
            self = self.min_interval(interval);
        }
        if let Some(debounce) = policies.debounce {
            self = self.debounce(debounce.window, debounce.max_wait);
        }
        if let Some(after) = policies.stuck_after {
            self = self.stuck_after(after);
        }
        if let Some(policy) = &policies.on_panic {
            self = self.on_panic(policy.clone());
        }
        self
    }
}
