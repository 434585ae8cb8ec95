//! Building a [`Refresh`](super::Refresh): the period, the back-off, the
//! trigger's options, then the fetch, whose outcome each iteration turns
//! into the latest value, the last error and the next delay.

use super::{Latest, Refresh, FAILED, NO_FETCH, PANICKED, SUCCEEDED};
use crate::jitter::RetryBackoff;
use crate::scheduler::Scheduler;
use crate::trigger::{Trigger, TriggerBuilder};
use arc_swap::ArcSwapOption;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

impl Refresh<()> {
    /// A builder: set the period, the back-off, the trigger's options,
    /// then [`bind`](RefreshBuilder::bind) the fetch.
    /// Takes a [`Scheduler`] or a
    /// [`VirtualScheduler`](crate::VirtualScheduler).
    pub fn builder<S: AsRef<Scheduler> + ?Sized>(scheduler: &S) -> RefreshBuilder<'_> {
        RefreshBuilder {
            trigger: Trigger::builder(scheduler),
            every: DEFAULT_PERIOD,
            retry: None,
        }
    }
}

/// The delay before the next fetch after a failure: the back-off's (with
/// none, the period). A back-off past its retry limit stops the refresh
/// until it is fired again — and that fire starts a fresh round.
fn retry_after(retry: &mut Option<RetryBackoff>, every: Duration) -> Option<Duration> {
    let Some(backoff) = retry else {
        return Some(every);
    };
    let next = backoff.failed();
    if next.is_none() {
        backoff.reset();
    }
    next
}

/// `RefreshBuilder::every`'s default.
const DEFAULT_PERIOD: Duration = Duration::from_secs(30);

/// Builds a [`Refresh`]; see [`Refresh::builder`].
#[must_use = "a builder does nothing until `bind`"]
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
    /// counted from the end of the fetch. `Duration::ZERO` re-fetches at
    /// once; a period past the clock's range fetches only when fired.
    pub fn every(mut self, period: Duration) -> Self {
        self.every = period;
        self
    }

    /// The back-off after a failed fetch (default: the period). Its
    /// jitter, if any, also spreads the period after a success.
    pub fn retry(mut self, backoff: RetryBackoff) -> Self {
        self.retry = Some(backoff);
        self
    }

    /// Sets the trigger's own options: name, `debounce`, `min_interval`,
    /// `stuck_after`.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let config = Refresh::builder(&sim)
    ///     .trigger(|t| t.name("config").debounce(Duration::from_millis(200), Duration::from_secs(2)))
    ///     .bind(|| Ok::<_, String>("v1"));
    /// assert_eq!(config.trigger().name(), Some("config"));
    /// ```
    pub fn trigger(
        mut self,
        configure: impl FnOnce(TriggerBuilder<'a>) -> TriggerBuilder<'a>,
    ) -> Self {
        self.trigger = configure(self.trigger);
        self
    }

    /// Binds the fetch: `Ok(value)` becomes the latest value and the next
    /// fetch comes a period later; `Err(error)` keeps the value, becomes
    /// [`last_error`](Refresh::last_error) and the next fetch comes after
    /// the back-off (with no back-off, a period later; a back-off past its
    /// retry limit stops until fired, and that fire starts a fresh round).
    /// A panicking fetch is a failure too ([`panics`](Refresh::panics)):
    /// the value stays and the fetch is retried.
    ///
    /// Nothing runs until the first fire (`refresh.trigger().fire()`):
    /// start it when the service is ready for it.
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
    pub fn bind_with_next<T, E, F>(self, mut fetch: F) -> Refresh<T, E>
    where
        T: Send + Sync + 'static,
        E: Send + Sync + 'static,
        F: FnMut() -> Result<(T, Duration), E> + Send + 'static,
    {
        let latest = Arc::new(Latest {
            value: ArcSwapOption::empty(),
            error: ArcSwapOption::empty(),
            refreshes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            outcome: AtomicU8::new(NO_FETCH),
            #[cfg(feature = "tokio")]
            watch: std::sync::Mutex::new(super::Watch::new()),
        });
        #[cfg(feature = "tokio")]
        {
            let hook = Arc::downgrade(&latest);
            self.trigger.scheduler().shared.when_terminated(hook);
        }
        let (every, mut retry) = (self.every, self.retry);
        let shared = Arc::clone(&latest);
        let trigger = self.trigger.bind(move || {
            #[cfg(feature = "tokio")]
            let fetching = shared.fetching();
            // A panicking fetch is a failure too: counted, retried, the
            // value kept — not a silent stop of the refresh.
            let fetched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut fetch));
            let fetched = match fetched {
                Ok(fetched) => fetched,
                Err(payload) => {
                    shared.failures.fetch_add(1, Relaxed);
                    shared.panics.fetch_add(1, Relaxed);
                    shared.ended(PANICKED);
                    // User code (the payload's and the log's) only once
                    // the outcome is recorded.
                    crate::sync::drop_payload(payload);
                    #[cfg(feature = "tracing")]
                    tracing::warn!("refresh panicked; the last good value stays");
                    return retry_after(&mut retry, every);
                }
            };
            match fetched {
                Ok((value, next)) => {
                    let value = Arc::new(value);
                    // The replaced value and error are dropped after the
                    // outcome is recorded: their destructors are user code.
                    let replaced = shared.value.swap(Some(Arc::clone(&value)));
                    let cleared = shared.error.swap(None);
                    shared.refreshes.fetch_add(1, Relaxed);
                    shared.ended(SUCCEEDED);
                    drop((replaced, cleared));
                    #[cfg(feature = "tokio")]
                    fetching.sent(value);
                    #[cfg(not(feature = "tokio"))]
                    drop(value);
                    match &mut retry {
                        Some(backoff) => backoff.succeeded(next),
                        None => Some(next),
                    }
                }
                Err(error) => {
                    let replaced = shared.error.swap(Some(Arc::new(error)));
                    shared.failures.fetch_add(1, Relaxed);
                    shared.ended(FAILED);
                    drop(replaced);
                    #[cfg(feature = "tracing")]
                    tracing::warn!("refresh failed; the last good value stays");
                    retry_after(&mut retry, every)
                }
            }
        });
        Refresh { trigger, latest }
    }
}
