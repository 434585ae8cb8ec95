//! [`TriggerBuilder`] builds a trigger with options. They are a name, a
//! start version, the trigger's policies and an async runtime.

use super::Trigger;
use crate::core::TaskCell;
use crate::policy::{PanicPolicy, TriggerPolicies};
use crate::scheduler::{Scheduler, TriggerCore};
use crate::sync::Arc;
use crate::task::Task;

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
    policies: TriggerPolicies,
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
        self.policies.stuck_after_unset()
    }

    /// A builder with no options set, for [`Trigger::builder`].
    pub(super) fn new(scheduler: &'a Scheduler) -> Self {
        Self {
            scheduler,
            name: None,
            version: 0,
            policies: TriggerPolicies::new(),
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
    /// assert_eq!(trigger.stats().version, last);
    /// trigger.suspend(); // the next version wraps to 0
    /// assert_eq!(trigger.stats().version, 0);
    /// ```
    pub fn start_version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// Binds `task` and returns the trigger, which starts idle. Dropping the
    /// last handle suspends the trigger. See [`Trigger::bind`].
    #[must_use = "dropping the last handle suspends the trigger: its task never runs"]
    pub fn bind(self, task: impl Task) -> Trigger {
        self.bind_cell(|on_panic| TaskCell::new(task, on_panic), None)
    }

    /// Binds the task `cell` makes with the panic policy. The policy is
    /// moved, not cloned, since a clone of a `RetryBackoff` draws a fresh
    /// generator. That would lose a seed the user gave it.
    fn bind_cell(
        self,
        cell: impl FnOnce(PanicPolicy) -> TaskCell,
        spawner: Option<Arc<dyn crate::async_task::Spawn>>,
    ) -> Trigger {
        let (policies, on_panic) = self.policies.split(self.name, spawner);
        let task = cell(on_panic);
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
        self,
        spawner: Arc<dyn crate::async_task::Spawn>,
        task: impl crate::async_task::AsyncTask,
    ) -> Trigger {
        let body = crate::async_task::AsyncBody { task };
        self.bind_cell(
            |on_panic| TaskCell::new_async(body, on_panic),
            Some(spawner),
        )
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
        Fut: std::future::Future<Output = Option<std::time::Duration>> + Send + 'static,
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

    /// The trigger's policies: a cooldown, a debounce, a stuck-run report
    /// and what a panic does. See [`TriggerPolicies`]. Each policy the
    /// value sets replaces the one set before, and a policy it leaves unset
    /// keeps it. A trigger without policies has none of them, and a panic
    /// stops it, as guarantee G8 says.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::policy::TriggerPolicies;
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::builder(&sim)
    ///     .policies(TriggerPolicies::new().min_interval(Duration::from_secs(10)))
    ///     .bind(|| None);
    /// for _ in 0..100 {
    ///     trigger.fire()?; // a storm: one run at once, then one per 10 s
    /// }
    /// sim.advance(Duration::from_secs(1));
    /// assert_eq!(trigger.stats().iterations, 1);
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn policies(mut self, policies: TriggerPolicies) -> Self {
        self.policies.merge(policies);
        self
    }
}
