//! Building a [`Refresh`]. A builder sets the period, the
//! back-off and the trigger's options, then binds the fetch. The fetch is
//! blocking or async. Each iteration turns its outcome into the latest
//! value, the last error and the next delay.

#[cfg(feature = "tokio")]
use super::FetchFuture;
use super::{Course, Ended, Fetched, Latest, Meta, Pace, Refresh, Validator};
use crate::jitter::RetryBackoff;
use crate::scheduler::Scheduler;
use crate::trigger::{Trigger, TriggerBuilder};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

impl Refresh<()> {
    /// A builder. Set the period, the back-off and the trigger's options,
    /// then bind the fetch with [`bind`](RefreshBuilder::bind). With the
    /// `tokio` feature, [`bind_async`](RefreshBuilder::bind_async) binds an
    /// async one. Takes a [`Scheduler`] or a
    /// [`VirtualScheduler`](crate::testing::VirtualScheduler).
    pub fn builder<S: AsRef<Scheduler> + ?Sized>(scheduler: &S) -> RefreshBuilder<'_> {
        RefreshBuilder {
            trigger: Trigger::builder(scheduler)
                .policies(crate::policy::TriggerPolicies::new().min_interval(DEFAULT_COOLDOWN)),
            every: DEFAULT_PERIOD,
            retry: None,
            stale_after: None,
            expire_after: None,
            fetch_timeout: None,
            phase: None,
            budget: None,
        }
    }
}

/// `RefreshBuilder::every`'s default.
const DEFAULT_PERIOD: Duration = Duration::from_secs(30);

/// A refresher's default cooldown, the trigger's `min_interval`. With it, a
/// burst of "refresh now" drained from a channel costs at most two fetches.
/// That holds even for a burst a busy machine stretches to a few hundred
/// milliseconds.
pub(crate) const DEFAULT_COOLDOWN: Duration = Duration::from_secs(1);

/// Builds a [`Refresh`]. See [`Refresh::builder`].
#[must_use = "a builder does nothing until a fetch is bound"]
pub struct RefreshBuilder<'a> {
    trigger: TriggerBuilder<'a>,
    every: Duration,
    retry: Option<RetryBackoff>,
    stale_after: Option<Duration>,
    expire_after: Option<Duration>,
    fetch_timeout: Option<Duration>,
    phase: Option<crate::phase::PhaseKeeper>,
    budget: Option<super::Budget>,
}

impl fmt::Debug for RefreshBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RefreshBuilder")
            .field("every", &self.every)
            .field("retry", &self.retry)
            .field("stale_after", &self.stale_after)
            .field("expire_after", &self.expire_after)
            .field("fetch_timeout", &self.fetch_timeout)
            .field("phase", &self.phase)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl<'a> RefreshBuilder<'a> {
    /// The period between fetches after a success, counted from the end of
    /// the fetch. It is 30 seconds by default. `Duration::ZERO` re-fetches
    /// as soon as the cooldown allows. A period past the clock's range
    /// fetches only when fired.
    pub fn every(mut self, period: Duration) -> Self {
        self.every = period;
        self
    }

    /// The back-off after a failed fetch. By default it is the period. Its
    /// jitter, if any, also spreads the period after a success. A step
    /// shorter than the cooldown waits for the cooldown's end.
    pub fn retry(mut self, backoff: RetryBackoff) -> Self {
        self.retry = Some(backoff);
        self
    }

    /// Keeps the fetches after a success on `phase`'s grid of slots,
    /// instead of a period after the fetch. The period is then the phase's.
    /// A "refresh now" does not move the schedule. With
    /// [`PhaseKeeper::keyed`](crate::policy::PhaseKeeper::keyed) a fleet keeps its
    /// spread across restarts. A retry after a failure never waits past
    /// the next slot. Once the back-off has climbed to the period, the
    /// retries fall on the slots only, so a fleet's load on a store that
    /// is down, and as it returns, is its load on the slots.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler, policy::PhaseKeeper};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let slots = PhaseKeeper::new(Duration::from_secs(60)).offset(Duration::from_secs(7));
    /// let config = Refresh::builder(&sim)
    ///     .phase(slots)
    ///     .bind(|| Ok::<_, String>("v1"));
    /// config.refresh_now()?; // at 0 s; then on the slots: 67 s (7 s is too close), 127 s…
    /// sim.advance(Duration::from_secs(130));
    /// assert_eq!(config.stats().refreshes, 3);
    /// assert_eq!(config.trigger().stats().last_start, Some(Duration::from_secs(127)));
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn phase(mut self, phase: crate::phase::PhaseKeeper) -> Self {
        self.every = phase.period();
        self.phase = Some(phase);
        self
    }

    /// Shares `budget` with the other refreshers given it, so their fetches
    /// together keep to its rate and burst. A fetch over budget waits for
    /// its slot, and every "refresh now" meanwhile is served by it.
    /// [`RefreshStats::budget_waited`](super::RefreshStats::budget_waited)
    /// counts the wait.
    pub fn budget(mut self, budget: &super::Budget) -> Self {
        self.budget = Some(budget.clone());
        self
    }

    /// The value turns [`Stale`](super::Freshness::Stale) once no fetch
    /// has confirmed it for `after`. By default it never does. It is still
    /// served. [`Refresh::stats`] and
    /// [`Current::freshness`](super::Current::freshness) report it, and
    /// each change is traced and counted as it happens. A watchdog trigger
    /// named after the refresher with `:freshness` added does that. It
    /// shows in the scheduler's stats and in a shutdown report.
    pub fn stale_after(mut self, after: Duration) -> Self {
        self.stale_after = Some(after);
        self
    }

    /// The value turns [`Expired`](super::Freshness::Expired) once no
    /// fetch has confirmed it for `after`. By default it never does. It is
    /// still served, as with [`stale_after`](Self::stale_after).
    pub fn expire_after(mut self, after: Duration) -> Self {
        self.expire_after = Some(after);
        self
    }

    /// A fetch's deadline, none by default. An async fetch still running at
    /// it is dropped, and its state is given back. It counts as a timeout,
    /// [`RefreshError::TimedOut`](crate::refresh::RefreshError::TimedOut), apart from
    /// the fetch's own errors. The value stays, and the fetch is retried on
    /// the back-off. A blocking fetch cannot be interrupted. Its overrun is
    /// reported once through the scheduler's stuck hook, since this sets the
    /// trigger's `stuck_after` unless it is set. It is counted as a timeout
    /// when it returns, and its late result counts. A fetch that never
    /// returns keeps the next one from starting, since fetches never run two
    /// at once. The value then turns stale, then expired.
    ///
    /// The deadline holds during a graceful shutdown too. The fetch in
    /// flight, which the shutdown waits for, still ends by it. On a
    /// [`VirtualScheduler`](crate::testing::VirtualScheduler) an async fetch's
    /// deadline runs on virtual time. A fetch waiting on real I/O there
    /// holds virtual time back, and `advance` panics once it has waited ten
    /// seconds of real time, as its Panics section says.
    pub fn fetch_timeout(mut self, timeout: Duration) -> Self {
        self.fetch_timeout = Some(timeout);
        self
    }

    /// Sets the trigger's own options: its `name`, its
    /// [`policies`](crate::TriggerBuilder::policies) such as `min_interval`,
    /// `debounce` and `stuck_after`, and its `runtime`, which serves
    /// [`bind_async`](Self::bind_async).
    ///
    /// A refresher's trigger starts with a cooldown, since its
    /// `min_interval` is one second. So the first "refresh now" after a
    /// quiet spell fetches at once. A burst during a fetch or within a
    /// second of its start costs one more fetch, at the cooldown's end.
    /// That is guarantee G18. `min_interval(d)` changes the cooldown, and
    /// `min_interval(Duration::ZERO)` turns it off.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use circulation_trigger::policy::TriggerPolicies;
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let config = Refresh::builder(&sim)
    ///     .trigger(|t| {
    ///         t.name("config")
    ///             .policies(TriggerPolicies::new().min_interval(Duration::from_secs(5)))
    ///     })
    ///     .bind(|| Ok::<_, String>("v1"));
    /// assert_eq!(config.trigger().name(), Some("config"));
    /// config.refresh_now()?;
    /// sim.advance(Duration::from_secs(1)); // fetched at 0 s
    /// for _ in 0..1_000 {
    ///     config.refresh_now()?; // a burst at 1 s: one fetch, at 5 s
    /// }
    /// sim.advance(Duration::from_secs(10));
    /// assert_eq!(config.refreshes(), 2);
    /// assert_eq!(config.trigger().stats().last_start, Some(Duration::from_secs(5)));
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn trigger(
        mut self,
        configure: impl FnOnce(TriggerBuilder<'a>) -> TriggerBuilder<'a>,
    ) -> Self {
        self.trigger = configure(self.trigger);
        self
    }

    /// Binds a blocking fetch. `Ok(value)` becomes the latest value, and the
    /// next fetch comes a period later. `Err(error)` keeps the value and
    /// becomes [`last_error`](Refresh::last_error). The next fetch then
    /// comes after the back-off. With no back-off it comes a period later.
    /// A back-off past its retry limit stops until fired, and that fire
    /// starts a fresh round. A panicking fetch is a failure too, counted in
    /// [`panics`](Refresh::panics). The value stays and the fetch is
    /// retried. The fetch runs on the scheduler's workers and owns its
    /// state. It is `FnMut` and needs no `Mutex`, since fetches never
    /// overlap.
    ///
    /// Nothing runs until the first fire, such as a
    /// [`refresh_now`](Refresh::refresh_now). Start it when the service is
    /// ready for it.
    ///
    /// # Examples
    ///
    /// The front page's config service with a blocking fetch, which needs
    /// no feature.
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler, policy::RetryBackoff};
    /// use std::time::Duration;
    ///
    /// fn main() -> Result<(), Box<dyn std::error::Error>> {
    ///     let scheduler = Scheduler::builder().workers(1).build()?;
    ///     let mut calls = 0u64; // the fetch's own state: no Mutex, fetches never overlap
    ///     let config = Refresh::builder(&scheduler)
    ///         .every(Duration::from_secs(30))
    ///         .retry(RetryBackoff::new(Duration::from_secs(1), Duration::from_secs(60)))
    ///         .bind(move || {
    ///             calls += 1; // stands in for an HTTP GET, a Redis read…
    ///             Ok::<_, String>(calls)
    ///         });
    ///     assert_eq!(*config.refresh_and_wait(Duration::from_secs(5))?, 1);
    ///     for _ in 0..100 {
    ///         config.refresh_now()?; // a burst: one more fetch, at the cooldown's end
    ///     }
    ///     assert_eq!(*config.refresh_and_wait(Duration::from_secs(5))?, 2); // served by it
    ///     scheduler.shutdown();
    ///     assert!(scheduler.await_termination(Duration::from_secs(5)));
    ///     Ok(())
    /// }
    /// ```
    #[must_use = "dropping the last handle suspends the refresh: its fetch never runs"]
    pub fn bind<T, E, F>(self, mut fetch: F) -> Refresh<T, E>
    where
        T: Send + Sync + 'static,
        E: Send + Sync + 'static,
        F: FnMut() -> Result<T, E> + Send + 'static,
    {
        self.bind_conditional(move |_| fetch().map(Fetched::changed))
    }

    /// Binds a blocking conditional fetch. It is handed the [`Validator`] of
    /// the last value, such as a version or an ETag. The validator is `None`
    /// before the first value, or after a value that came without one. The
    /// fetch answers a [`Fetched`], which is a new value or "unchanged".
    /// "Unchanged" renews the value's freshness and publishes nothing, so no
    /// subscriber wakes. "Unchanged" with no value held is a failure,
    /// [`RefreshError::NothingHeld`](crate::refresh::RefreshError::NothingHeld).
    /// [`Fetched::next_after`] names the delay before the next fetch, for
    /// a value that carries its own period. Otherwise it works as
    /// [`bind`](Self::bind).
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::refresh::{Fetched, Validator};
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let store = ("v7", "config body"); // (version, value) at the store
    /// let config = Refresh::builder(&sim)
    ///     .every(Duration::from_secs(30))
    ///     .bind_conditional(move |last: Option<Validator>| {
    ///         if last.is_some_and(|seen| seen == store.0) {
    ///             return Ok::<_, String>(Fetched::unchanged()); // a 304
    ///         }
    ///         Ok(Fetched::changed(store.1).validator(store.0))
    ///     });
    /// config.refresh_now()?;
    /// sim.advance(Duration::ZERO); // changed
    /// let first = config.get().map(|v| std::sync::Arc::as_ptr(&v));
    /// sim.advance(Duration::from_secs(90)); // unchanged at 30, 60 and 90 s
    /// let stats = config.stats();
    /// assert_eq!((stats.refreshes, stats.unchanged), (1, 3));
    /// assert_eq!(config.get().map(|v| std::sync::Arc::as_ptr(&v)), first); // not republished
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    #[must_use = "dropping the last handle suspends the refresh: its fetch never runs"]
    pub fn bind_conditional<T, E, F>(self, mut fetch: F) -> Refresh<T, E>
    where
        T: Send + Sync + 'static,
        E: Send + Sync + 'static,
        F: FnMut(Option<Validator>) -> Result<Fetched<T>, E> + Send + 'static,
    {
        let Parts {
            mut trigger,
            latest,
            mut course,
            watchdog,
        } = self.parts();
        if let Some(timeout) = course.timeout {
            if trigger.stuck_after_unset() {
                trigger =
                    trigger.policies(crate::policy::TriggerPolicies::new().stuck_after(timeout));
            }
        }
        let shared = Arc::clone(&latest);
        let trigger = trigger.bind(move || {
            if let Some(wait) = shared.held_back(&course) {
                return Some(wait);
            }
            if let Some(wait) = shared.over_budget(&mut course) {
                return Some(wait);
            }
            #[cfg(feature = "tokio")]
            let fetching = shared.fetching();
            let started = shared.meta.now_ns();
            let validator = shared.validator_for(&mut course);
            // A panicking fetch is a failure too. It is counted and retried,
            // and the value is kept. It is not a silent stop of the refresh.
            let ended =
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fetch(validator))) {
                    Ok(Ok(answer)) => Ended::Answered(answer),
                    Ok(Err(error)) => Ended::Error(error),
                    Err(payload) => Ended::Panic(payload),
                };
            if let Some(timeout) = course.timeout {
                let took = Duration::from_nanos(shared.meta.now_ns().saturating_sub(started));
                if took > timeout {
                    shared
                        .timeouts
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
            shared.settle(
                ended,
                &mut course,
                #[cfg(feature = "tokio")]
                fetching,
            )
        });
        Refresh {
            trigger,
            latest,
            watchdog,
        }
    }

    /// What every bind starts from.
    fn parts<T, E>(self) -> Parts<'a, T, E>
    where
        T: Send + Sync + 'static,
        E: Send + Sync + 'static,
    {
        let scheduler = self.trigger.scheduler();
        let meta = Meta::new(
            scheduler.shared.timing.clock.clone(),
            scheduler.shared.wall_epoch(),
            self.stale_after,
            self.expire_after,
            self.trigger.name_set().map(str::to_owned),
        );
        let latest = Latest::new(meta);
        #[cfg(feature = "tokio")]
        latest.close_with(scheduler);
        let watchdog = if latest.meta.watched() {
            let watched = Arc::clone(&latest);
            let name = self
                .trigger
                .name_set()
                .map(|name| format!("{name}:freshness"));
            let mut watchdog = crate::trigger::Trigger::builder(scheduler);
            if let Some(name) = name {
                watchdog = watchdog.name(name);
            }
            let watchdog = watchdog.bind(move || {
                let held = watched.value.load().is_some();
                watched.meta.observe(held)
            });
            let _ = latest.watchdog.set(watchdog.downgrade());
            Some(watchdog)
        } else {
            None
        };
        let mut pace = Pace::new(self.every, self.retry);
        pace.phase = self.phase;
        let mut course = Course::new(pace, self.fetch_timeout);
        course.budget = self.budget;
        Parts {
            trigger: self.trigger,
            latest,
            course,
            watchdog,
        }
    }
    /// Binds an async fetch, with the `tokio` feature. Each fetch is the
    /// future `fetch(&mut state)` returns, polled on a Tokio runtime. That
    /// is the one this is called in, or the one given with
    /// [`TriggerBuilder::runtime`] through [`trigger`](Self::trigger). On a
    /// [`VirtualScheduler`](crate::testing::VirtualScheduler) without one, its
    /// `advance` polls the future. The outcome counts as
    /// [`bind`](Self::bind)'s does. The `Refresh` is the same, with its
    /// reads, `subscribe`, errors, back-off, cooldown, pause,
    /// `refresh_and_wait` and its async twin.
    ///
    /// The refresher owns `state` and lends it to each fetch. The state may
    /// be a client, a connection or the last version seen. Fetches never
    /// overlap, so it needs no `Mutex`. A fetch may be dropped before it
    /// completes, by `shutdown_now` or by its runtime shutting down. It then
    /// gives the state back as it left it, and the next fetch starts from
    /// there. The closure returns a boxed future borrowing the state. Write
    /// `|state| Box::pin(async move { … })`, since stable Rust's async
    /// closures cannot promise a `Send` future.
    ///
    /// `S`, `T`, `E` and the closure are `Send + 'static`, since they move
    /// to the runtime's threads. The future is `Send`.
    ///
    /// # Panics
    ///
    /// As [`TriggerBuilder::bind_async`]. It panics on a real scheduler if
    /// no runtime was given and this is called outside a Tokio runtime.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// struct Client {
    ///     calls: u32, // the fetch's own state: no Mutex
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let scheduler = Scheduler::new();
    /// let config = Refresh::builder(&scheduler)
    ///     .every(Duration::from_secs(30))
    ///     .bind_async(Client { calls: 0 }, |client| {
    ///         Box::pin(async move {
    ///             tokio::task::yield_now().await; // the request
    ///             client.calls += 1;
    ///             Ok::<_, std::io::Error>(format!("v{}", client.calls))
    ///         })
    ///     });
    /// let first = config.refresh_and_wait_async(Duration::from_secs(10)).await?;
    /// assert_eq!(*first, "v1");
    /// scheduler.shutdown_async().await;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    #[must_use = "dropping the last handle suspends the refresh: its fetch never runs"]
    pub fn bind_async<S, T, E, F>(self, state: S, mut fetch: F) -> Refresh<T, E>
    where
        S: Send + 'static,
        T: Send + Sync + 'static,
        E: Send + Sync + 'static,
        F: for<'s> FnMut(&'s mut S) -> FetchFuture<'s, T, E> + Send + 'static,
    {
        self.bind_async_conditional(state, move |state, _| {
            let fetched = fetch(state);
            Box::pin(async move { fetched.await.map(Fetched::changed) })
        })
    }

    /// Binds an async conditional fetch, with the `tokio` feature. It is the
    /// async [`bind_conditional`](Self::bind_conditional). Each fetch
    /// borrows the state, is handed the last [`Validator`], and answers a
    /// [`Fetched`]. That is a new value or "unchanged". Otherwise it works
    /// as [`bind_async`](Self::bind_async).
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::refresh::{Fetched, Validator};
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// struct Store {
    ///     version: u64,
    /// }
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let config = Refresh::builder(&sim)
    ///     .every(Duration::from_secs(30))
    ///     .bind_async_conditional(Store { version: 3 }, |store, last: Option<Validator>| {
    ///         Box::pin(async move {
    ///             let version = Validator::from(store.version); // a cheap "GET version"
    ///             if last.as_ref() == Some(&version) {
    ///                 return Ok::<_, String>(Fetched::unchanged());
    ///             }
    ///             Ok(Fetched::changed(format!("config v{version}")).validator(version))
    ///         })
    ///     });
    /// config.refresh_now()?;
    /// sim.advance(Duration::from_secs(30));
    /// let stats = config.stats();
    /// assert_eq!((stats.refreshes, stats.unchanged), (1, 1));
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    #[must_use = "dropping the last handle suspends the refresh: its fetch never runs"]
    pub fn bind_async_conditional<S, T, E, F>(self, state: S, fetch: F) -> Refresh<T, E>
    where
        S: Send + 'static,
        T: Send + Sync + 'static,
        E: Send + Sync + 'static,
        F: for<'s> FnMut(&'s mut S, Option<Validator>) -> FetchFuture<'s, Fetched<T>, E>
            + Send
            + 'static,
    {
        let Parts {
            trigger,
            latest,
            course,
            watchdog,
        } = self.parts();
        let clock = trigger.scheduler().virtual_sleep.clone();
        let lent = super::lend::Lent::new(state, fetch, course);
        let shared = Arc::clone(&latest);
        let trigger = trigger.bind_async(move || {
            super::lend::fetch_once(Arc::clone(&lent), Arc::clone(&shared), clock.clone())
        });
        Refresh {
            trigger,
            latest,
            watchdog,
        }
    }
}

/// What every bind starts from. It holds the trigger's builder, the shared
/// state, the fetch-side state, and the freshness watchdog when limits are
/// set.
struct Parts<'a, T, E> {
    trigger: TriggerBuilder<'a>,
    latest: Arc<Latest<T, E>>,
    course: Course,
    watchdog: Option<Trigger>,
}
