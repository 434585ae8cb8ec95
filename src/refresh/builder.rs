//! Building a [`Refresh`](super::Refresh): the period, the back-off, the
//! trigger's options, then the fetch — blocking or async — whose outcome
//! each iteration turns into the latest value, the last error and the next
//! delay.

#[cfg(feature = "tokio")]
use super::FetchFuture;
use super::{Ended, Latest, Pace, Refresh};
use crate::jitter::RetryBackoff;
use crate::scheduler::Scheduler;
use crate::trigger::{Trigger, TriggerBuilder};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

impl Refresh<()> {
    /// A builder: set the period, the back-off, the trigger's options,
    /// then bind the fetch ([`bind`](RefreshBuilder::bind), or
    /// [`bind_async`](RefreshBuilder::bind_async) with the `tokio`
    /// feature). Takes a [`Scheduler`] or a
    /// [`VirtualScheduler`](crate::VirtualScheduler).
    pub fn builder<S: AsRef<Scheduler> + ?Sized>(scheduler: &S) -> RefreshBuilder<'_> {
        RefreshBuilder {
            trigger: Trigger::builder(scheduler).min_interval(DEFAULT_COOLDOWN),
            every: DEFAULT_PERIOD,
            retry: None,
        }
    }
}

/// `RefreshBuilder::every`'s default.
const DEFAULT_PERIOD: Duration = Duration::from_secs(30);

/// A refresher's default cooldown (the trigger's `min_interval`): a burst
/// of "refresh now" drained from a channel, even one a busy machine
/// stretches to a few hundred milliseconds, costs at most two fetches.
pub(crate) const DEFAULT_COOLDOWN: Duration = Duration::from_secs(1);

/// Builds a [`Refresh`]; see [`Refresh::builder`].
#[must_use = "a builder does nothing until a fetch is bound"]
pub struct RefreshBuilder<'a> {
    trigger: TriggerBuilder<'a>,
    every: Duration,
    retry: Option<RetryBackoff>,
}

impl fmt::Debug for RefreshBuilder<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RefreshBuilder")
            .field("every", &self.every)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl<'a> RefreshBuilder<'a> {
    /// The period between fetches after a success (default 30 s),
    /// counted from the end of the fetch. `Duration::ZERO` re-fetches as
    /// soon as the cooldown allows; a period past the clock's range
    /// fetches only when fired.
    pub fn every(mut self, period: Duration) -> Self {
        self.every = period;
        self
    }

    /// The back-off after a failed fetch (default: the period). Its
    /// jitter, if any, also spreads the period after a success. A step
    /// shorter than the cooldown waits for the cooldown's end.
    pub fn retry(mut self, backoff: RetryBackoff) -> Self {
        self.retry = Some(backoff);
        self
    }

    /// Sets the trigger's own options: `name`, `min_interval`,
    /// `debounce`, `stuck_after`, `runtime` (for
    /// [`bind_async`](Self::bind_async)).
    ///
    /// A refresher's trigger starts with a cooldown: `min_interval` is
    /// 1 s, so the first "refresh now" after a quiet spell fetches at once
    /// and a burst during a fetch or within a second of its start costs
    /// one more fetch, at the cooldown's end (G18). `min_interval(d)`
    /// changes it; `min_interval(Duration::ZERO)` turns it off.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let config = Refresh::builder(&sim)
    ///     .trigger(|t| t.name("config").min_interval(Duration::from_secs(5)))
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

    /// Binds a blocking fetch: `Ok(value)` becomes the latest value and the
    /// next fetch comes a period later; `Err(error)` keeps the value,
    /// becomes [`last_error`](Refresh::last_error) and the next fetch comes
    /// after the back-off (with no back-off, a period later; a back-off
    /// past its retry limit stops until fired, and that fire starts a fresh
    /// round). A panicking fetch is a failure too
    /// ([`panics`](Refresh::panics)): the value stays and the fetch is
    /// retried. The fetch runs on the scheduler's workers and owns its
    /// state (`FnMut`, no `Mutex`: fetches never overlap).
    ///
    /// Nothing runs until the first fire
    /// ([`refresh_now`](Refresh::refresh_now)): start it when the service
    /// is ready for it.
    #[must_use = "dropping the last handle suspends the refresh: its fetch never runs"]
    pub fn bind<T, E, F>(self, mut fetch: F) -> Refresh<T, E>
    where
        T: Send + Sync + 'static,
        E: Send + Sync + 'static,
        F: FnMut() -> Result<T, E> + Send + 'static,
    {
        let every = self.every;
        self.bind_with_next(move || fetch().map(|value| (value, every)))
    }

    /// As [`bind`](Self::bind), the fetch also saying when to fetch next
    /// after a success — for a period that comes with the value (a config
    /// that carries its own refresh interval), or that the service tunes
    /// at run time. [`every`](Self::every) is then only the delay after
    /// a failure when there is no [`retry`](Self::retry) back-off; a
    /// back-off with jitter spreads the `next` the fetch returns too.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// struct Config {
    ///     period: Duration,
    /// }
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let mut fetches = 0;
    /// let config = Refresh::builder(&sim).bind_with_next(move || {
    ///     fetches += 1;
    ///     // The config names its own period: 10 s, then 60 s.
    ///     let period = Duration::from_secs(if fetches == 1 { 10 } else { 60 });
    ///     Ok::<_, String>((Config { period }, period))
    /// });
    /// config.refresh_now()?;
    /// sim.advance(Duration::from_secs(10));
    /// assert_eq!(config.refreshes(), 2);
    /// assert_eq!(config.get().unwrap().period, Duration::from_secs(60));
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    #[must_use = "dropping the last handle suspends the refresh: its fetch never runs"]
    pub fn bind_with_next<T, E, F>(self, mut fetch: F) -> Refresh<T, E>
    where
        T: Send + Sync + 'static,
        E: Send + Sync + 'static,
        F: FnMut() -> Result<(T, Duration), E> + Send + 'static,
    {
        let latest = Latest::new();
        #[cfg(feature = "tokio")]
        latest.close_with(self.trigger.scheduler());
        let mut pace = Pace::new(self.every, self.retry);
        let shared = Arc::clone(&latest);
        let trigger = self.trigger.bind(move || {
            #[cfg(feature = "tokio")]
            let fetching = shared.fetching();
            // A panicking fetch is a failure too: counted, retried, the
            // value kept — not a silent stop of the refresh.
            let ended = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut fetch)) {
                Ok(Ok((value, next))) => Ended::Value(value, next),
                Ok(Err(error)) => Ended::Error(error),
                Err(payload) => Ended::Panic(payload),
            };
            shared.settle(
                ended,
                &mut pace,
                #[cfg(feature = "tokio")]
                fetching,
            )
        });
        Refresh { trigger, latest }
    }

    /// Binds an async fetch (feature `tokio`): each fetch is the future
    /// `fetch(&mut state)` returns, polled on a Tokio runtime — the one
    /// this is called in, or the one given with
    /// [`TriggerBuilder::runtime`] through [`trigger`](Self::trigger); on
    /// a [`VirtualScheduler`](crate::VirtualScheduler) without one, by its
    /// `advance`. The outcome counts as [`bind`](Self::bind)'s does, and
    /// the `Refresh` is the same: reads, `subscribe`, errors, back-off,
    /// cooldown, pause, `refresh_and_wait` and its async twin.
    ///
    /// The refresher owns `state` (a client, a connection, the last
    /// version seen) and lends it to each fetch: fetches never overlap, so
    /// it needs no `Mutex`. A fetch dropped before it completes (by
    /// `shutdown_now`, or its runtime shutting down) gives the state back
    /// as it left it, and the next fetch starts from there. The closure
    /// returns a boxed future borrowing the state — write
    /// `|state| Box::pin(async move { … })`; stable Rust's async closures
    /// cannot promise a `Send` future.
    ///
    /// `S`, `T`, `E` and the closure are `Send + 'static` (they move to
    /// the runtime's threads); the future is `Send`.
    ///
    /// # Panics
    ///
    /// As [`TriggerBuilder::bind_async`]: on a real scheduler, if no
    /// runtime was given and this is called outside a Tokio runtime.
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
    pub fn bind_async<S, T, E, F>(self, state: S, fetch: F) -> Refresh<T, E>
    where
        S: Send + 'static,
        T: Send + Sync + 'static,
        E: Send + Sync + 'static,
        F: for<'s> FnMut(&'s mut S) -> FetchFuture<'s, T, E> + Send + 'static,
    {
        let latest = Latest::new();
        latest.close_with(self.trigger.scheduler());
        let pace = Pace::new(self.every, self.retry);
        let lent = super::lend::Lent::new(state, fetch, pace);
        let shared = Arc::clone(&latest);
        let trigger = self
            .trigger
            .bind_async(move || super::lend::fetch_once(Arc::clone(&lent), Arc::clone(&shared)));
        Refresh { trigger, latest }
    }
}
