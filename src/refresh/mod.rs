//! The refresher, a value kept fresh by a trigger. [`Refresh`] runs a fetch
//! on a period, or when fired. It keeps the latest good value for readers,
//! and a [`Reader`]'s read writes no shared cache line. It keeps the value
//! through failed fetches, which it reports and retries with a back-off. It
//! tells how fresh the value is with [`Freshness`] and [`RefreshStats`].
//!
//! The types here are what a refresher's fetch answers and what its readers
//! see. A fetch answers with [`Fetched`] and [`Validator`]. Readers see
//! [`Current`], [`Freshness`], [`Origin`] and [`RefreshStats`].
//! [`Refresh`] and [`RefreshBuilder`] are at the crate's root too.
//!
//! # A fleet's client
//!
//! A refresher gives each client of a fleet what the fleet needs. Its
//! slots keep a phase across restarts, its back-off is jittered, a
//! [`Budget`] caps the fetches of all the namespaces of one store, and a
//! [`LocalCopy`] serves the last good value while the store is down.
//!
//! ```no_run
//! use circulation_trigger::refresh::{Budget, LocalCopy, StartPolicy};
//! use circulation_trigger::{Refresh, Scheduler, policy::{PhaseKeeper, RetryBackoff}};
//! use std::time::Duration;
//!
//! let scheduler = Scheduler::new();
//! let budget = Budget::new(&scheduler, Duration::from_millis(100), 5); // shared by every namespace
//! let config = Refresh::builder(&scheduler)
//!     // Slots at a wall-clock phase from the instance's key: kept across restarts.
//!     .phase(PhaseKeeper::keyed(Duration::from_secs(60), "host-17", &scheduler))
//!     .retry(RetryBackoff::new(Duration::from_secs(1), Duration::from_secs(60)).jitter(0.5))
//!     .budget(&budget)
//!     .bind(|| Ok::<_, String>(String::from("config")))
//!     // The last good value, saved atomically: served at start if the store is down.
//!     .local_copy(LocalCopy::new(
//!         "/var/lib/app/config.copy",
//!         "config-v1",
//!         |value: &String| Ok::<_, std::io::Error>(value.as_bytes().to_vec()),
//!         |bytes| String::from_utf8(bytes.to_vec()),
//!     ));
//! config.start(StartPolicy::WaitThenCopy(Duration::from_secs(5)))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A retry never waits past the next slot. Once the back-off reaches the
//! period, the client retries on its slots only, so a store that returns
//! meets the fleet's usual load. A fetch over the shared budget waits for
//! its turn, and every "refresh now" meanwhile is served by it. A store
//! that says "retry after" is obeyed through [`Refresh::retry_after`]. Keys
//! spread a fleet like random draws. A fleet that numbers its members
//! spreads evenly with [`PhaseKeeper::ordinal`](crate::policy::PhaseKeeper::ordinal).

use crate::error::FireError;
pub use crate::error::RefreshError;
use crate::trigger::Trigger;
use std::fmt;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod answer;
mod budget;
mod builder;
#[cfg(feature = "tokio")]
mod deadline;
mod fresh;
#[cfg(feature = "tokio")]
mod lend;
mod local_copy;
#[cfg(loom)]
pub mod model;
mod pace;
mod read;
mod shared;
#[cfg(all(test, feature = "tokio", not(loom)))]
mod tests;
#[cfg(feature = "tokio")]
mod watch;

pub use answer::{Fetched, Validator};
pub use budget::{Budget, BudgetStats};
pub use builder::RefreshBuilder;
pub use fresh::{Freshness, Origin};
pub(crate) use local_copy::fnv1a64 as stable_hash;
pub use local_copy::{BoxError, LocalCopy, LocalCopyError, Saved};
pub use read::{Current, Reader};

pub(crate) use fresh::Meta;
pub(crate) use pace::{Course, Pace};
pub(crate) use shared::{Ended, Latest};

/// The future an async fetch returns, as [`RefreshBuilder::bind_async`]
/// takes it. It is boxed and `Send`, and borrows the state the refresher
/// lends it for `'s`.
///
/// # Examples
///
/// A fetch written as a function.
///
/// ```
/// use circulation_trigger::{Refresh, Scheduler, refresh::FetchFuture};
/// use std::time::Duration;
///
/// fn fetch(calls: &mut u32) -> FetchFuture<'_, u32, String> {
///     Box::pin(async move {
///         *calls += 1;
///         Ok(*calls)
///     })
/// }
///
/// let sim = Scheduler::builder().build_virtual();
/// let config = Refresh::builder(&sim).bind_async(0, fetch);
/// config.refresh_now()?;
/// sim.advance(Duration::ZERO);
/// assert_eq!(config.get().as_deref(), Some(&1));
/// # Ok::<(), circulation_trigger::FireError>(())
/// ```
#[cfg(feature = "tokio")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
pub type FetchFuture<'s, T, E> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, E>> + Send + 's>>;

/// A refresher's statistics and state, read at once by [`Refresh::stats`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RefreshStats {
    /// A value is held, so readers get one.
    pub has_value: bool,
    /// A fetch has confirmed a value since the refresher started, with a
    /// good or "unchanged" answer. Readiness waits for this.
    pub confirmed: bool,
    /// The wall-clock time of the last confirmation. It is the wall clock
    /// read when the scheduler was built, plus the monotonic time since.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub last_confirmed: Option<SystemTime>,
    /// The time since the last confirmation.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub age: Option<Duration>,
    /// How fresh the value held is, or `None` with no value.
    pub freshness: Option<Freshness>,
    /// Fetches that ended, of every kind. Each counts in exactly one of
    /// `refreshes`, `unchanged` and `failures`.
    pub fetches: u64,
    /// Fetches that returned a new value.
    pub refreshes: u64,
    /// Fetches that answered "unchanged" with a value held. With
    /// [`Refresh::compare_values`], a fetch that returned a value equal to
    /// it counts too.
    pub unchanged: u64,
    /// Fetches that failed with an error, a panic, a timeout, or "unchanged"
    /// with no value held.
    pub failures: u64,
    /// Fetches that panicked. They count in `failures` too.
    pub panics: u64,
    /// Fetches that overran [`RefreshBuilder::fetch_timeout`]. An async one
    /// is dropped and counts in `failures` too. A blocking one is reported,
    /// and its late result counts.
    pub timeouts: u64,
    /// Calls refused because the refresher was paused.
    pub refused_fires: u64,
    /// Changes of [`freshness`](Self::freshness) reported. They are traced,
    /// and counted in the `metrics` feature's
    /// `circulation_trigger_refresh_transitions_total`.
    pub transitions: u64,
    /// The last fetch failed.
    pub failing: bool,
    /// Where the value held came from, or `None` with none.
    pub origin: Option<Origin>,
    /// The time this refresher's fetches waited for a shared
    /// [`Budget`], in total.
    pub budget_waited: Duration,
    /// New values saved to the local copy.
    pub copy_writes: u64,
    /// Reads and saves of the local copy that failed.
    pub copy_failures: u64,
}

/// A value kept fresh by a trigger. The fetch runs on a period and on
/// demand through [`refresh_now`](Self::refresh_now), never twice at once.
/// Readers get the latest good value without a lock. On the hot path they
/// read through a [`reader`](Self::reader). A failed fetch keeps the last
/// good value. It is reported through [`last_error`](Self::last_error) and
/// retried with a back-off. [`stats`](Self::stats) tells how fresh the value
/// is.
///
/// # Events with a periodic safety net
///
/// This is the usual shape of a service whose store publishes changes, as
/// through Redis pub/sub, a webhook or a watch stream. Every event calls
/// [`refresh_now`](Self::refresh_now). A burst costs at most two fetches, as
/// guarantee G18 promises. The period catches whatever an event lost while
/// the listener was disconnected. The listener reconnects after a jittered
/// back-off, a [`RetryBackoff`](crate::policy::RetryBackoff) with jitter. So a
/// fleet whose store restarts does not reconnect in step.
/// `examples/redis_config_refresh.rs` in the repository is this shape on
/// Redis.
///
/// ```
/// use circulation_trigger::{Refresh, Scheduler, policy::RetryBackoff};
/// use std::time::Duration;
///
/// let scheduler = Scheduler::builder().workers(1).build()?;
/// let config = Refresh::builder(&scheduler)
///     .every(Duration::from_secs(60)) // the safety net
///     .bind(|| Ok::<_, String>("config"));
/// let (events, inbox) = std::sync::mpsc::channel::<()>(); // the store's events
/// let listener = {
///     let config = config.clone();
///     std::thread::spawn(move || {
///         let mut reconnect = RetryBackoff::new(Duration::from_millis(100), Duration::from_secs(5))
///             .jitter(0.5);
///         // A real listener loops: connect (on failure, sleep
///         // `reconnect.failed()`), then `refresh_now` per event.
///         reconnect.reset();
///         while inbox.recv().is_ok() {
///             let _ = config.refresh_now(); // coalesced: a burst is one fetch or two
///         }
///     })
/// };
/// for _ in 0..100 {
///     events.send(())?;
/// }
/// drop(events);
/// listener.join().unwrap();
/// config.wait_ready(Duration::from_secs(10))?;
/// assert!(config.stats().fetches <= 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Cloning gives another handle to the same value and trigger. The
/// trigger is a plain [`Trigger`]. Its `fire`, `fire_and_wait`, `pause`,
/// `resume` and statistics work as documented there.
///
/// # Examples
///
/// ```
/// use circulation_trigger::{Refresh, Scheduler, policy::RetryBackoff};
/// use std::time::Duration;
///
/// #[derive(Debug, PartialEq)]
/// struct Config {
///     greeting: String,
/// }
///
/// let sim = Scheduler::builder().build_virtual();
/// let mut calls = 0;
/// let config = Refresh::builder(&sim)
///     .every(Duration::from_secs(30))
///     .retry(RetryBackoff::new(Duration::from_secs(1), Duration::from_secs(60)))
///     .bind(move || {
///         calls += 1; // the fetch: FnMut, never run twice at once
///         match calls {
///             2 => Err("config center down"),
///             n => Ok(Config { greeting: format!("hello #{n}") }),
///         }
///     });
/// assert!(config.get().is_none()); // nothing fetched yet
/// config.trigger().fire()?; // refresh now
/// sim.advance(Duration::ZERO);
/// assert_eq!(config.get().unwrap().greeting, "hello #1");
///
/// sim.advance(Duration::from_secs(30)); // the second fetch fails…
/// assert_eq!(config.get().unwrap().greeting, "hello #1"); // …the value stays
/// assert_eq!(config.last_error().as_deref(), Some(&"config center down"));
/// sim.advance(Duration::from_secs(1)); // retried after the back-off
/// assert_eq!(config.get().unwrap().greeting, "hello #3");
/// assert!(config.last_error().is_none());
/// # Ok::<(), circulation_trigger::FireError>(())
/// ```
pub struct Refresh<T, E = Box<dyn std::error::Error + Send + Sync>> {
    trigger: Trigger,
    latest: Arc<Latest<T, E>>,
    /// The trigger that reports changes of freshness, with limits set.
    watchdog: Option<Trigger>,
}

impl<T, E> Clone for Refresh<T, E> {
    fn clone(&self) -> Self {
        Self {
            trigger: self.trigger.clone(),
            latest: Arc::clone(&self.latest),
            watchdog: self.watchdog.clone(),
        }
    }
}

impl<T, E> fmt::Debug for Refresh<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refresh")
            .field("trigger", &self.trigger)
            .field("has_value", &self.latest.value.load().is_some())
            .field("failing", &self.latest.error.load().is_some())
            .finish()
    }
}

impl<T, E> Refresh<T, E> {
    /// The latest good value, owned, if a fetch has succeeded yet. It stays
    /// valid for as long as the caller holds the `Arc`, whatever refreshes
    /// meanwhile. It is lock-free. Each call moves the value's reference
    /// count, so a hot path reads through a [`reader`](Self::reader)
    /// instead.
    pub fn get(&self) -> Option<Arc<T>> {
        self.latest.value.load_full()
    }

    /// The error of type `E` the fetch itself returned last, if the last
    /// fetch failed with one. It is `None` once a fetch succeeds again. A
    /// failure that is not an `E` leaves it as it was. Such failures are a
    /// panic, a timeout, and "unchanged" with no value held.
    /// [`last_failure`](Self::last_failure) reports every kind.
    pub fn last_error(&self) -> Option<Arc<E>> {
        self.latest.error.load_full()
    }

    /// Why the last fetch failed, whatever the kind. It is
    /// [`RefreshError::Failed`] with its error, `Panicked`, `TimedOut`,
    /// `NothingHeld` or `NoRuntime`. It is `None` if the last fetch
    /// succeeded or none has ended yet.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler, refresh::RefreshError};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let config = Refresh::builder(&sim).bind(|| Err::<u32, _>("store down"));
    /// config.refresh_now()?;
    /// sim.advance(Duration::ZERO);
    /// match config.last_failure() {
    ///     Some(RefreshError::Failed(error)) => assert_eq!(*error, "store down"),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn last_failure(&self) -> Option<RefreshError<E>> {
        self.latest.last_outcome().and_then(Result::err)
    }

    /// Fetches that succeeded so far.
    pub fn refreshes(&self) -> u64 {
        self.latest.refreshes.load(Relaxed)
    }

    /// Fetches that failed so far, as with an error or a panic.
    pub fn failures(&self) -> u64 {
        self.latest.failures.load(Relaxed)
    }

    /// Fetches that panicked so far. They count in
    /// [`failures`](Self::failures) too. The value stays, and the fetch is
    /// retried as after an error. [`last_error`](Self::last_error) keeps the
    /// last error.
    pub fn panics(&self) -> u64 {
        self.latest.panics.load(Relaxed)
    }

    /// The trigger that runs the fetch. Its `fire()` refreshes now, and
    /// `fire_and_wait` refreshes and waits. Its `pause` and `resume` make a
    /// feature switch, and `stats()` reads its statistics.
    pub fn trigger(&self) -> &Trigger {
        &self.trigger
    }

    /// A reader's handle, for the hot path. [`Reader::read`] lends the
    /// latest value after one load, writing nothing another thread reads.
    /// Keep one per thread or task. It neither fires nor keeps the fetch
    /// alive.
    pub fn reader(&self) -> Reader<T, E> {
        Reader::new(Arc::clone(&self.latest))
    }

    /// A receiver of the latest good value, with the `tokio` feature.
    /// `changed().await` waits until a fetch has stored a newer one. Every
    /// good fetch stores one, even one equal to the last. `borrow()` reads
    /// it. Like any `watch` channel it keeps only the latest. So a reader
    /// that was slow sees the newest value, not each one in between.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::new();
    /// let mut version = 0;
    /// let config = Refresh::builder(&scheduler).bind(move || {
    ///     version += 1;
    ///     Ok::<_, String>(version)
    /// });
    /// let mut updates = config.subscribe();
    /// config.trigger().fire().unwrap();
    /// updates.changed().await.unwrap();
    /// assert_eq!(updates.borrow().as_deref(), Some(&1));
    /// # });
    /// ```
    ///
    /// Once the scheduler has shut down and its last iteration has ended,
    /// no newer value can come. The channel then closes, and `changed()`
    /// returns an error. A receiver subscribed after that gets the last
    /// value and a closed channel. So a reader's loop ends with the
    /// service.
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::new();
    /// let config = Refresh::builder(&scheduler).bind(|| Ok::<_, String>("v1"));
    /// let mut updates = config.subscribe();
    /// config.refresh_and_wait_async(std::time::Duration::from_secs(10)).await.unwrap();
    /// scheduler.shutdown_async().await;
    /// while updates.changed().await.is_ok() {} // sees "v1", then ends
    /// assert_eq!(updates.borrow().as_deref(), Some(&"v1"));
    /// # });
    /// ```
    #[cfg(feature = "tokio")]
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Option<Arc<T>>> {
        if self.trigger.scheduler_terminated() {
            // Terminated. The scheduler tells this refresh's hook once its
            // live count is zero, but only after releasing that count's
            // lock. So a caller back from `await_termination` may come
            // first. Close the channel now, as the hook will. Closing twice
            // is harmless, and a fetch still in flight closes it as it ends.
            self.latest.watch.close_at_termination();
        }
        if let Some(sender) = self.latest.watch.lock().sender.as_ref() {
            return sender.subscribe();
        }
        // Terminated, so hand out the last value on a channel already closed.
        tokio::sync::watch::channel(self.get()).1
    }
}

impl<T, E> Refresh<T, E> {
    /// Refreshes now with [`Trigger::fire`] on the fetch's trigger. The
    /// first call after a quiet spell fetches at once. A burst of calls
    /// during a fetch or its cooldown costs one more fetch, at the
    /// cooldown's end, as guarantee G18 promises. The cooldown is one second
    /// by default. See [`RefreshBuilder::trigger`].
    ///
    /// # Errors
    ///
    /// As [`Trigger::fire`], when the scheduler shut down or the refresh is
    /// paused. A call refused while paused counts in
    /// [`refused_fires`](Self::refused_fires). A debounced trigger also
    /// refuses a window past the clock's range.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let config = Refresh::builder(&sim).bind(|| Ok::<_, String>("v1"));
    /// for _ in 0..1_000 {
    ///     config.refresh_now()?; // a burst from the bus
    ///     sim.advance(Duration::from_micros(10));
    /// }
    /// sim.advance(Duration::from_secs(2));
    /// assert_eq!(config.refreshes(), 2); // at once, then at the cooldown's end
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    #[doc(alias = "fire")]
    pub fn refresh_now(&self) -> Result<(), FireError> {
        let fired = self.trigger.fire();
        if fired == Err(FireError::Paused) {
            self.latest.refused.fetch_add(1, Relaxed);
        }
        fired
    }

    /// Pauses the refresh with [`Trigger::pause`]. No fetch starts until
    /// [`resume`](Self::resume), and `refresh_now` is refused with
    /// [`FireError::Paused`]. The value stays readable. This is a feature
    /// switch's "off".
    pub fn pause(&self) {
        self.trigger.pause();
    }

    /// Resumes a paused refresh with [`Trigger::resume`], back on its
    /// schedule. Returns whether it was paused. The next fetch waits the
    /// delay the last one set, counted from this call. For a fetch at once,
    /// call `resume_after(Duration::ZERO)` on [`trigger`](Self::trigger).
    ///
    /// # Errors
    ///
    /// As [`Trigger::resume`], when the scheduler shut down.
    pub fn resume(&self) -> Result<bool, FireError> {
        self.trigger.resume()
    }

    /// Whether the refresh is paused.
    pub fn is_paused(&self) -> bool {
        self.trigger.is_paused()
    }

    /// Calls of [`refresh_now`](Self::refresh_now) and
    /// [`refresh_and_wait`](Self::refresh_and_wait) refused because the
    /// refresh was paused. The scheduler's
    /// [`SchedulerStats::refused_paused`](crate::report::SchedulerStats::refused_paused)
    /// counts those of every trigger.
    pub fn refused_fires(&self) -> u64 {
        self.latest.refused.load(Relaxed)
    }

    fn count_refused<V>(&self, result: &Result<V, RefreshError<E>>) {
        if matches!(result, Err(RefreshError::Wait(crate::WaitError::Paused))) {
            self.latest.refused.fetch_add(1, Relaxed);
        }
    }

    /// Refreshes now and waits for the fetch's value, or for why there is
    /// none. A service wants this before it starts serving, and a "reload
    /// now" endpoint before it answers. It calls [`Trigger::fire_and_wait`]
    /// on the fetch's trigger. Then it returns how the fetch that served the
    /// call ended. If a later fetch ended meanwhile, it returns how that one
    /// ended, the latest news either way.
    ///
    /// A failed fetch is an error here even though [`get`](Self::get)
    /// still returns the last good value. The caller asked for a fresh
    /// one. `fire_and_wait` alone reports `Outcome::Completed` for a
    /// failed fetch, since the fetch's task ran to its end.
    ///
    /// # Errors
    ///
    /// * [`RefreshError::Failed`] with the fetch's error, and
    ///   [`RefreshError::Panicked`] if it panicked. The fetch is retried
    ///   with the back-off as always.
    /// * [`RefreshError::Wait`] if no fetch served the call. The timeout may
    ///   have passed, and the fire then stands. The trigger may have been
    ///   paused or suspended, or the scheduler shut down. A debounce window
    ///   may lie past the clock's range. The call may have come from inside
    ///   the fetch itself. [`WaitError`](crate::WaitError) tells which. On a
    ///   [`VirtualScheduler`](crate::testing::VirtualScheduler) the fetch runs when
    ///   another thread advances time. With no such thread, the call times
    ///   out.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler, refresh::RefreshError};
    /// use std::time::Duration;
    ///
    /// let scheduler = Scheduler::builder().workers(1).build().unwrap();
    /// let mut calls = 0;
    /// let config = Refresh::builder(&scheduler).bind(move || {
    ///     calls += 1;
    ///     if calls == 2 { Err("config center down") } else { Ok(calls) }
    /// });
    /// let first = config.refresh_and_wait(Duration::from_secs(10)).unwrap();
    /// assert_eq!(*first, 1);
    /// match config.refresh_and_wait(Duration::from_secs(10)) {
    ///     Err(RefreshError::Failed(error)) => assert_eq!(*error, "config center down"),
    ///     other => panic!("{other:?}"),
    /// }
    /// assert_eq!(config.get().as_deref(), Some(&1)); // the last good value stays
    /// ```
    pub fn refresh_and_wait(&self, timeout: Duration) -> Result<Arc<T>, RefreshError<E>> {
        let served = self
            .trigger
            .fire_and_wait(timeout)
            .map_err(RefreshError::Wait)
            .and_then(|run| self.latest.served(run));
        self.count_refused(&served);
        served
    }

    /// The awaitable [`refresh_and_wait`](Self::refresh_and_wait), with the
    /// `tokio` feature. It fires when called, not when first polled, and
    /// waits without blocking a thread. Like every path to a fetch, it may
    /// first wait out the cooldown.
    ///
    /// # Errors
    ///
    /// As [`refresh_and_wait`](Self::refresh_and_wait).
    ///
    /// # Panics
    ///
    /// As [`Trigger::fire_and_wait_async`]. It panics when awaited outside a
    /// Tokio runtime with the time driver enabled, unless the timeout is
    /// `Duration::MAX`.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let scheduler = Scheduler::new();
    /// let config = Refresh::builder(&scheduler).bind(|| Ok::<_, String>("v1"));
    /// let value = config.refresh_and_wait_async(Duration::from_secs(10)).await.unwrap();
    /// assert_eq!(*value, "v1");
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    pub fn refresh_and_wait_async(
        &self,
        timeout: Duration,
    ) -> impl std::future::Future<Output = Result<Arc<T>, RefreshError<E>>> + Send + 'static
    where
        T: Send + Sync + 'static,
        E: Send + Sync + 'static,
    {
        let wait = self.trigger.fire_and_wait_async(timeout);
        let latest = Arc::clone(&self.latest);
        async move {
            let run = wait.await.map_err(|error| {
                if error == crate::WaitError::Paused {
                    latest.refused.fetch_add(1, Relaxed);
                }
                RefreshError::Wait(error)
            })?;
            latest.served(run)
        }
    }
}

/// Readiness and freshness.
impl<T, E> Refresh<T, E> {
    /// How fresh the value held is, or `None` with none. It goes by the time
    /// since a fetch last confirmed the value, against
    /// [`stale_after`](RefreshBuilder::stale_after) and
    /// [`expire_after`](RefreshBuilder::expire_after).
    pub fn freshness(&self) -> Option<Freshness> {
        self.latest.freshness()
    }

    /// The refresher's state and counters, read at once. They come as a
    /// [`RefreshStats`], from [`circulation_trigger::refresh`](self).
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::refresh::Freshness;
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let mut up = true;
    /// let config = Refresh::builder(&sim)
    ///     .every(Duration::from_secs(30))
    ///     .stale_after(Duration::from_secs(60))
    ///     .expire_after(Duration::from_secs(300))
    ///     .bind(move || {
    ///         let fetched = if up { Ok("v1") } else { Err("store down") };
    ///         up = false; // the store goes down after the first fetch
    ///         fetched
    ///     });
    /// config.refresh_now()?;
    /// sim.advance(Duration::from_secs(59));
    /// assert_eq!(config.stats().freshness, Some(Freshness::Fresh));
    /// sim.advance(Duration::from_secs(1));
    /// assert_eq!(config.stats().freshness, Some(Freshness::Stale));
    /// sim.advance(Duration::from_secs(240));
    /// let stats = config.stats();
    /// assert_eq!(stats.freshness, Some(Freshness::Expired)); // still served
    /// assert_eq!(config.get().as_deref(), Some(&"v1"));
    /// assert_eq!((stats.refreshes, stats.transitions), (1, 3)); // fresh, stale, expired
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn stats(&self) -> RefreshStats {
        self.latest.stats()
    }

    /// Blocks until a fetch has confirmed a value since the refresher
    /// started, or for at most `timeout`. A good or "unchanged" answer
    /// confirms one. This is readiness, what a service waits for before it
    /// serves. It does not fire. Call [`refresh_now`](Self::refresh_now)
    /// first, since nothing runs before the first fire, or it waits for the
    /// schedule.
    ///
    /// # Errors
    ///
    /// [`WaitError::Timeout`](crate::WaitError::Timeout) if none did in
    /// time. The fetch's last error, if any, is in
    /// [`last_error`](Self::last_error).
    /// [`WaitError::OnRuntime`](crate::WaitError::OnRuntime) comes at once
    /// if not yet ready and called where a Tokio runtime is entered, with
    /// the `tokio` feature. The runtime's thread may be the one that would
    /// poll the fetch. Await [`ready`](Self::ready) there instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// let scheduler = Scheduler::new();
    /// let config = Refresh::builder(&scheduler).bind(|| Ok::<_, String>("v1"));
    /// config.refresh_now()?;
    /// config.wait_ready(Duration::from_secs(10))?;
    /// assert_eq!(config.get().as_deref(), Some(&"v1"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), crate::WaitError> {
        self.latest.wait_ready(timeout)
    }

    /// Waits until a fetch has confirmed a value, or for at most
    /// `timeout`, without blocking a thread. It is the async
    /// [`wait_ready`](Self::wait_ready), with the `tokio` feature. It does
    /// not fire either.
    ///
    /// # Errors
    ///
    /// [`WaitError::Timeout`](crate::WaitError::Timeout) if none did in
    /// time.
    ///
    /// # Panics
    ///
    /// Panics when awaited outside a Tokio runtime with the time driver
    /// enabled, unless `timeout` is `Duration::MAX`, which needs no timer.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let scheduler = Scheduler::new();
    /// let config = Refresh::builder(&scheduler).bind(|| Ok::<_, String>("v1"));
    /// config.refresh_now()?;
    /// config.ready(Duration::from_secs(10)).await?;
    /// assert!(config.stats().confirmed);
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn ready(&self, timeout: Duration) -> Result<(), crate::WaitError> {
        self.latest.ready(timeout).await
    }

    /// Compares a new value with the one held, for `T: PartialEq`. An equal
    /// one counts as "unchanged". Freshness is renewed, nothing is
    /// published, and no subscriber is woken. Set it when building. It
    /// applies from the next fetch.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let config = Refresh::builder(&sim)
    ///     .every(Duration::from_secs(30))
    ///     .bind(|| Ok::<_, String>("the same"))
    ///     .compare_values();
    /// config.refresh_now()?;
    /// sim.advance(Duration::from_secs(60)); // fetches at 0, 30 and 60 s
    /// let stats = config.stats();
    /// assert_eq!((stats.refreshes, stats.unchanged), (1, 2));
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    #[must_use = "the refresher, with values compared"]
    pub fn compare_values(self) -> Self
    where
        T: PartialEq,
    {
        self.latest.hooks().same = Some(|held: &T, new: &T| held == new);
        self
    }

    /// Keeps a local copy of the last good value, as guarantee G22
    /// promises. It reads the copy now, and saves every new value to it
    /// afterwards. So a process that starts while its store is down serves
    /// the value it saved last, until its first good fetch. That value is
    /// marked [`Origin::LocalCopy`]. The copy's validator goes to the first
    /// fetch. That fetch may answer "unchanged" and so confirm the copy
    /// without a transfer.
    ///
    /// No file is a first start, not an error. A copy that cannot be read
    /// serves nothing and is reported. It may be corrupt, torn, of another
    /// schema, or hold a value that does not decode. The report is in
    /// [`local_copy_error`](Self::local_copy_error) and a `tracing` warning.
    /// A save that fails, as on a full disk or a read-only directory, is
    /// counted in [`RefreshStats::copy_failures`]. It never stops the
    /// refresh. Saves run on the fetch's thread, after the value is
    /// published, and only when it changed. Set it when building, before
    /// the first fire. Then call [`start`](Self::start).
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::refresh::{LocalCopy, Origin, StartPolicy};
    /// use circulation_trigger::{Refresh, Scheduler};
    /// use std::time::Duration;
    ///
    /// let dir = std::env::temp_dir().join(format!("copy-start-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let copy = LocalCopy::new(
    ///     dir.join("config.copy"),
    ///     "config-v1",
    ///     |value: &String| Ok::<_, std::io::Error>(value.as_bytes().to_vec()),
    ///     |bytes| String::from_utf8(bytes.to_vec()),
    /// );
    /// copy.save(&String::from("saved by the last run"), None)?;
    ///
    /// // The store is down at start: the copy is served.
    /// let scheduler = Scheduler::new();
    /// let config = Refresh::builder(&scheduler)
    ///     .bind(|| Err::<String, _>("store down"))
    ///     .local_copy(copy);
    /// let origin = config.start(StartPolicy::WaitThenCopy(Duration::from_millis(100)))?;
    /// assert_eq!(origin, Origin::LocalCopy);
    /// assert_eq!(config.get().as_deref().map(String::as_str), Some("saved by the last run"));
    /// assert!(!config.stats().confirmed);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use = "the refresher, with its local copy"]
    pub fn local_copy(self, copy: LocalCopy<T>) -> Self {
        self.latest.carry_over(&copy);
        self.latest.hooks().copy = Some(copy);
        self
    }

    /// The last error reading or writing the local copy, if any.
    pub fn local_copy_error(&self) -> Option<Arc<LocalCopyError>> {
        self.latest
            .copy_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Starts the refresh with its first fetch, and waits as `policy` says.
    /// Returns where the value served comes from. This is the explicit start
    /// of a service with a [`local_copy`](Self::local_copy).
    ///
    /// # Errors
    ///
    /// [`RefreshError::Wait`] with `Timeout` if the policy waited for a
    /// fetch in vain and has nothing to serve instead. The fetch's last
    /// error is in [`last_failure`](Self::last_failure). The error holds
    /// `Shutdown` or `Paused` if the fetch could not be started. It holds
    /// `WaitError::OnRuntime` if the call would block inside a Tokio
    /// runtime. Await [`start_async`](Self::start_async) there.
    pub fn start(&self, policy: StartPolicy) -> Result<Origin, RefreshError<E>> {
        self.refresh_now().map_err(start_refused)?;
        let waited = match policy.waits() {
            Some(timeout) => self.latest.wait_ready(timeout),
            None => Ok(()),
        };
        self.started(policy, waited)
    }

    /// The async [`start`](Self::start), with the `tokio` feature.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start).
    ///
    /// # Panics
    ///
    /// As [`ready`](Self::ready).
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn start_async(&self, policy: StartPolicy) -> Result<Origin, RefreshError<E>> {
        self.refresh_now().map_err(start_refused)?;
        let waited = match policy.waits() {
            Some(timeout) => self.latest.ready(timeout).await,
            None => Ok(()),
        };
        self.started(policy, waited)
    }

    fn started(
        &self,
        policy: StartPolicy,
        waited: Result<(), crate::WaitError>,
    ) -> Result<Origin, RefreshError<E>> {
        if let Err(error) = waited {
            let serve_copy = matches!(policy, StartPolicy::WaitThenCopy(_));
            if error != crate::WaitError::Timeout || !serve_copy {
                return Err(RefreshError::Wait(error));
            }
        }
        let held = self.latest.value.load();
        match held.get() {
            Some(value) => Ok(self
                .latest
                .meta
                .origin_of(std::ptr::from_ref(value) as usize)),
            None if policy == StartPolicy::Immediately => Ok(Origin::Fetch),
            None => Err(RefreshError::Wait(crate::WaitError::Timeout)),
        }
    }

    /// Reads "retry after" from a fetch's error, such as an HTTP 429 or
    /// 503's `Retry-After` or a store's throttling reply. After such an
    /// error the next fetch waits at least that long. The wait is capped at
    /// the back-off's maximum, or at the period with no back-off. It is
    /// spread over up to a tenth more, or over the back-off's jitter if that
    /// is larger. So a fleet told the same delay does not come back at once.
    /// A `refresh_now` inside that window is served by one fetch at its end.
    /// A `refresh_and_wait` there returns the store's error at once. Set it
    /// when building.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Refresh, Scheduler, policy::RetryBackoff};
    /// use std::time::Duration;
    ///
    /// #[derive(Debug)]
    /// enum StoreError {
    ///     Throttled { retry_after: Duration },
    /// }
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let mut calls = 0;
    /// let config = Refresh::builder(&sim)
    ///     .retry(RetryBackoff::new(Duration::from_secs(1), Duration::from_secs(120)))
    ///     .bind(move || {
    ///         calls += 1;
    ///         if calls == 1 {
    ///             return Err(StoreError::Throttled { retry_after: Duration::from_secs(30) });
    ///         }
    ///         Ok("v1")
    ///     })
    ///     .retry_after(|error: &StoreError| match error {
    ///         StoreError::Throttled { retry_after } => Some(*retry_after),
    ///     });
    /// config.refresh_now()?;
    /// sim.advance(Duration::from_secs(29));
    /// config.refresh_now()?; // inside the window: deferred to its end
    /// sim.advance(Duration::from_millis(999));
    /// assert!(config.get().is_none()); // not before 30 s
    /// sim.advance(Duration::from_secs(4)); // by 33 s (30 s, spread by up to 3 s)
    /// assert_eq!(config.get().as_deref(), Some(&"v1"));
    /// assert_eq!(config.stats().failures, 1);
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    #[must_use = "the refresher, with retry-after read"]
    pub fn retry_after(
        self,
        read: impl Fn(&E) -> Option<Duration> + Send + Sync + 'static,
    ) -> Self {
        self.latest.hooks().retry_after = Some(Arc::new(read));
        self
    }
}

/// How [`Refresh::start`] waits for the first fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartPolicy {
    /// Do not wait. Serve the local copy, if any, at once, while the first
    /// fetch runs. Only a refused fire makes this an error.
    Immediately,
    /// Wait up to this long for a fetch to confirm a value. Then serve
    /// the local copy, or fail if there is none.
    WaitThenCopy(Duration),
    /// Wait up to this long for a fetch to confirm a value. Fail if none
    /// did, whatever the local copy holds.
    WaitForFetch(Duration),
}

impl StartPolicy {
    fn waits(self) -> Option<Duration> {
        match self {
            StartPolicy::Immediately => None,
            StartPolicy::WaitThenCopy(timeout) | StartPolicy::WaitForFetch(timeout) => {
                Some(timeout)
            }
        }
    }
}

/// A start whose fire was refused.
fn start_refused<E>(error: FireError) -> RefreshError<E> {
    RefreshError::Wait(match error {
        FireError::Paused => crate::WaitError::Paused,
        FireError::DelayTooLong(delay) => crate::WaitError::DelayTooLong(delay),
        _ => crate::WaitError::Shutdown,
    })
}
