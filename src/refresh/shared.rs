//! What a refresher's fetch and its readers share. They share the value,
//! the last error and outcome, freshness, counters and hooks.
//! [`Latest::settle`] records the end of a fetch in them.

use super::local_copy::{LocalCopy, LocalCopyError};
use super::pace::Course;
#[cfg(feature = "tokio")]
use super::watch::{Fetching, Subscribers};
use super::{Fetched, Freshness, Meta, RefreshStats, Validator};
use crate::error::RefreshError;
use crate::sync::{AtomicU32, StatU64, ValueCell};
use crate::trigger::WeakTrigger;
use std::any::Any;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, SystemTime};

/// Reads "retry after" from a fetch's error.
pub(super) type RetryAfter<E> = Arc<dyn Fn(&E) -> Option<Duration> + Send + Sync>;

/// Hooks a refresher's owner sets after binding, since they name `T` and `E`.
pub(crate) struct Hooks<T, E> {
    pub(super) retry_after: Option<RetryAfter<E>>,
    /// Compares a new value with the one held.
    pub(super) same: Option<fn(&T, &T) -> bool>,
    /// Where the last good value is saved, if anywhere.
    pub(super) copy: Option<LocalCopy<T>>,
    /// The validator read from the local copy, for the first fetch.
    pub(super) carried_validator: Option<Validator>,
    /// The allocation of the value read from the local copy. It is kept so
    /// that its address, which tells it from a fetched value, is never
    /// reused.
    #[allow(dead_code)] // held for its allocation, never read
    pub(super) carried: Option<Weak<T>>,
}

/// What readers share. That is the latest good value, the last error,
/// freshness and counters.
pub(crate) struct Latest<T, E> {
    pub(super) value: ValueCell<T>,
    /// The error of the last fetch, if it failed. A success clears it.
    pub(super) error: ValueCell<E>,
    pub(super) meta: Meta,
    pub(super) refreshes: StatU64,
    pub(super) unchanged: StatU64,
    pub(super) failures: StatU64,
    pub(super) panics: StatU64,
    pub(super) timeouts: StatU64,
    /// Calls of this refresher's own methods refused because it was paused.
    pub(super) refused: StatU64,
    /// The time this refresher's fetches waited for their budget, in ns.
    pub(super) budget_waited: StatU64,
    /// Values saved to the local copy, and saves that failed.
    pub(super) copy_writes: StatU64,
    pub(super) copy_failures: StatU64,
    /// The last error reading or writing the local copy.
    pub(super) copy_error: std::sync::Mutex<Option<Arc<LocalCopyError>>>,
    /// How the last fetch ended, or [`NO_FETCH`] until one has. It is
    /// written after the value or error the fetch left. See
    /// [`Latest::served`].
    pub(super) outcome: AtomicU32,
    pub(super) hooks: std::sync::Mutex<Hooks<T, E>>,
    /// The trigger that reports changes of freshness as they happen, if
    /// limits are set. The first confirmation starts it.
    pub(super) watchdog: OnceLock<WeakTrigger>,
    /// The watchdog has been started, and it then re-arms itself.
    pub(super) watching: std::sync::atomic::AtomicBool,
    /// The channel of [`Refresh::subscribe`](super::Refresh::subscribe)'s receivers.
    #[cfg(feature = "tokio")]
    pub(super) watch: Subscribers<T>,
}

/// [`Latest::outcome`] when no fetch has ended yet.
pub(super) const NO_FETCH: u32 = 0;
/// [`Latest::outcome`] when the last fetch returned a value, or "unchanged".
pub(super) const SUCCEEDED: u32 = 1;
/// [`Latest::outcome`] when the last fetch returned an error.
pub(super) const FAILED: u32 = 2;
/// [`Latest::outcome`] when the last fetch panicked.
pub(super) const PANICKED: u32 = 3;
/// [`Latest::outcome`] when the last fetch, an async one, panicked for want
/// of a Tokio runtime around its poll.
pub(super) const NO_RUNTIME: u32 = 4;
/// [`Latest::outcome`] when the last fetch, an async one, was dropped at its
/// deadline.
pub(super) const TIMED_OUT: u32 = 5;
/// [`Latest::outcome`] when the last fetch answered "unchanged" with no
/// value held.
pub(super) const NOTHING_HELD: u32 = 6;

/// How one fetch ended.
pub(crate) enum Ended<T, E> {
    Answered(Fetched<T>),
    Error(E),
    Panic(Box<dyn Any + Send>),
    /// Dropped at its deadline, which only an async fetch can be.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    TimedOut,
}

/// Whether a panic's message is Tokio's "no runtime here". An async fetch
/// polled outside any runtime panics so. A virtual scheduler advanced by a
/// plain `#[test]` is one such case.
pub(super) fn wants_runtime(payload: &(dyn Any + Send)) -> bool {
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("");
    message.contains("no reactor running")
        || message.contains("must be called from the context of a Tokio")
}

impl<T, E> Latest<T, E> {
    pub(super) fn new(meta: Meta) -> Arc<Self> {
        Arc::new(Latest {
            value: ValueCell::empty(),
            error: ValueCell::empty(),
            meta,
            refreshes: StatU64::new(0),
            unchanged: StatU64::new(0),
            failures: StatU64::new(0),
            panics: StatU64::new(0),
            timeouts: StatU64::new(0),
            refused: StatU64::new(0),
            budget_waited: StatU64::new(0),
            copy_writes: StatU64::new(0),
            copy_failures: StatU64::new(0),
            copy_error: std::sync::Mutex::new(None),
            outcome: AtomicU32::new(NO_FETCH),
            hooks: std::sync::Mutex::new(Hooks {
                retry_after: None,
                same: None,
                copy: None,
                carried_validator: None,
                carried: None,
            }),
            watchdog: OnceLock::new(),
            watching: std::sync::atomic::AtomicBool::new(false),
            #[cfg(feature = "tokio")]
            watch: Subscribers::new(),
        })
    }

    pub(super) fn hooks(&self) -> std::sync::MutexGuard<'_, Hooks<T, E>> {
        // Nothing user-written runs under the lock, so poison is moot.
        self.hooks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `value` equals the value held, when asked to compare.
    pub(super) fn same_as_held(&self, value: &T) -> bool {
        let Some(same) = self.hooks().same else {
            return false;
        };
        let held = self.value.load();
        held.get().is_some_and(|held| same(held, value))
    }

    /// A run of the fetch starts at `now_ns`. Returns the delay before it
    /// may fetch, if a retry-after holds it. The run then re-arms for that
    /// delay, so every fire inside the window is served by one fetch at its
    /// end.
    pub(super) fn held_back(&self, course: &Course) -> Option<Duration> {
        course.holding(self.meta.now_ns())
    }

    /// Whether the budget holds the run that passed [`held_back`](Self::held_back). Returns
    /// the delay to its slot, reserved now. The run re-arms for it, and the
    /// run at the slot fetches without asking again.
    pub(super) fn over_budget(&self, course: &mut Course) -> Option<Duration> {
        let budget = course.budget.as_ref()?;
        if std::mem::take(&mut course.reserved) {
            return None;
        }
        let (now, at) = budget.reserve();
        if at <= now {
            return None;
        }
        course.not_before_ns = at;
        course.reserved = true;
        self.budget_waited.fetch_add(at - now, Relaxed);
        Some(Duration::from_nanos(at - now))
    }

    /// The validator to hand the fetch about to run. It is the last
    /// answer's, or the local copy's before the first fetch.
    pub(super) fn validator_for(&self, course: &mut Course) -> Option<Validator> {
        if !course.started {
            course.started = true;
            if course.validator.is_none() {
                course.validator = self.hooks().carried_validator.take();
            }
        }
        course.validator.clone()
    }

    /// Reads the local copy into an empty refresher. Its value is marked as
    /// carried over, and its validator is kept for the first fetch. An error
    /// is recorded, never fatal.
    pub(super) fn carry_over(&self, copy: &LocalCopy<T>) {
        match copy.load() {
            Ok(None) => {}
            Ok(Some(saved)) => {
                let value = Arc::new(saved.value);
                let weak = Arc::downgrade(&value);
                let address = Arc::as_ptr(&value) as usize;
                if self.value.install_if_empty(value) {
                    let age = SystemTime::now()
                        .duration_since(saved.saved_at)
                        .unwrap_or(Duration::ZERO);
                    let mut hooks = self.hooks();
                    hooks.carried = Some(weak);
                    hooks.carried_validator = saved.validator;
                    drop(hooks);
                    self.meta.carry(address, age);
                    self.watch_freshness();
                }
            }
            Err(error) => self.copy_failed(error),
        }
    }

    /// Saves a new value to the local copy, if there is one. A failure is
    /// counted and recorded, and the value is served all the same. A full
    /// disk, a read-only directory or an encoding that panics may cause one.
    fn save_copy(&self, value: &T, validator: Option<&Validator>) {
        let Some(copy) = self.hooks().copy.clone() else {
            return;
        };
        let saved =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| copy.save(value, validator)));
        match saved {
            Ok(Ok(())) => {
                self.copy_writes.fetch_add(1, Relaxed);
            }
            Ok(Err(error)) => self.copy_failed(error),
            Err(payload) => {
                crate::sync::drop_payload(payload);
                self.copy_failed(LocalCopyError::Encode("the encoding panicked".into()));
            }
        }
    }

    fn copy_failed(&self, error: LocalCopyError) {
        self.copy_failures.fetch_add(1, Relaxed);
        #[cfg(feature = "tracing")]
        tracing::warn!(%error, "the refresher's local copy failed");
        *self
            .copy_error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::new(error));
    }

    /// Records how a fetch ended, and returns the delay before the next one.
    /// It records the value, the error, the counters, the subscribers' news
    /// and the freshness.
    pub(super) fn settle(
        &self,
        ended: Ended<T, E>,
        course: &mut Course,
        #[cfg(feature = "tokio")] fetching: Fetching<'_, T>,
    ) -> Option<Duration> {
        #[cfg(feature = "tokio")]
        let mut fetching = Some(fetching);
        let next = match ended {
            Ended::Answered(Fetched {
                value: Some(value),
                validator,
                next,
            }) if !self.same_as_held(&value) => {
                course.validator = validator;
                let value = Arc::new(value);
                // The replaced value and error are dropped after the
                // outcome is recorded, since their destructors are user code.
                let replaced = self.value.swap(Some(Arc::clone(&value)));
                let cleared = self.error.swap(None);
                self.refreshes.fetch_add(1, Relaxed);
                self.meta.confirm();
                self.ended(SUCCEEDED);
                drop((replaced, cleared));
                self.save_copy(&value, course.validator.as_ref());
                #[cfg(feature = "tokio")]
                if let Some(fetching) = fetching.take() {
                    fetching.sent(value);
                }
                #[cfg(not(feature = "tokio"))]
                drop(value);
                course.pace.succeeded(next)
            }
            Ended::Answered(Fetched {
                value,
                validator,
                next,
                ..
            }) => {
                // "Unchanged", or a value equal to the one held.
                if !self.value.load().is_some() {
                    self.failures.fetch_add(1, Relaxed);
                    self.ended(NOTHING_HELD);
                    #[cfg(feature = "tracing")]
                    tracing::warn!("refresh answered \"unchanged\" with no value held");
                    course.pace.failed()
                } else {
                    if validator.is_some() || value.is_some() {
                        course.validator = validator;
                    }
                    let cleared = self.error.swap(None);
                    self.unchanged.fetch_add(1, Relaxed);
                    self.meta.confirm();
                    self.ended(SUCCEEDED);
                    drop((cleared, value));
                    course.pace.succeeded(next)
                }
            }
            Ended::Error(error) => {
                let wait = self
                    .hooks()
                    .retry_after
                    .clone()
                    .and_then(|retry_after| retry_after(&error));
                let replaced = self.error.swap(Some(Arc::new(error)));
                self.failures.fetch_add(1, Relaxed);
                self.ended(FAILED);
                drop(replaced);
                #[cfg(feature = "tracing")]
                tracing::warn!("refresh failed; the last good value stays");
                let next = course.pace.failed();
                match wait {
                    Some(wait) => {
                        let wait = course.pace.told_to_wait(wait);
                        let until = self.meta.now_ns().saturating_add(nanos(wait));
                        course.not_before_ns = until;
                        next.map(|next| next.max(wait))
                    }
                    None => next,
                }
            }
            Ended::TimedOut => {
                self.failures.fetch_add(1, Relaxed);
                self.timeouts.fetch_add(1, Relaxed);
                self.ended(TIMED_OUT);
                #[cfg(feature = "tracing")]
                tracing::warn!("refresh fetch timed out; the last good value stays");
                course.pace.failed()
            }
            Ended::Panic(payload) => {
                self.failures.fetch_add(1, Relaxed);
                self.panics.fetch_add(1, Relaxed);
                let no_runtime = wants_runtime(&*payload);
                self.ended(if no_runtime { NO_RUNTIME } else { PANICKED });
                // The payload's and the log's user code runs only once the
                // outcome is recorded.
                crate::sync::drop_payload(payload);
                #[cfg(feature = "tracing")]
                if no_runtime {
                    tracing::warn!("{}", RefreshError::<E>::NoRuntime.recipe());
                } else {
                    tracing::warn!("refresh panicked; the last good value stays");
                }
                course.pace.failed()
            }
        };
        #[cfg(feature = "tokio")]
        drop(fetching);
        self.watch_freshness();
        next
    }

    /// Reports a change of freshness, and starts the watchdog that reports
    /// the next ones as they come, once there is a value to watch.
    pub(super) fn watch_freshness(&self) {
        let look_again = self.meta.observe(self.value.load().is_some());
        if let (Some(after), Some(watchdog)) = (look_again, self.watchdog.get()) {
            if let Some(watchdog) = watchdog.upgrade() {
                if !self.watching.swap(true, Relaxed) {
                    // Refused only at shutdown, when no report is due.
                    let _ = watchdog.fire_after(after);
                }
            }
        }
    }

    /// A fetch ended as `outcome`, after storing what it left.
    /// Release: a caller of `refresh_and_wait` that reads this outcome also
    /// reads the value or error stored before it. The outcome may be that of
    /// the fetch which served the caller, or of a later one.
    pub(super) fn ended(&self, outcome: u32) {
        self.outcome.store(outcome, Release);
    }

    /// What `refresh_and_wait` returns once the iteration serving it has
    /// ended as `run`. That is how the last fetch ended, the serving one or
    /// a later one. An iteration that panicked past the fetch's own catch
    /// may have recorded no outcome. A panic in a `tracing` subscriber is
    /// one such case. The call then reports a panic, whatever an earlier
    /// fetch left.
    pub(super) fn served(&self, run: crate::Outcome) -> Result<Arc<T>, RefreshError<E>> {
        if run == crate::Outcome::Panicked {
            return Err(RefreshError::Panicked);
        }
        // A served wait never meets "no fetch yet", since the fetch that
        // served it wrote its outcome before the wait ended.
        self.last_outcome().unwrap_or(Err(RefreshError::Panicked))
    }

    /// How the last fetch ended, as `refresh_and_wait` reports it, or
    /// `None` if none has.
    pub(super) fn last_outcome(&self) -> Option<Result<Arc<T>, RefreshError<E>>> {
        // Acquire: pairs with `ended`'s Release, for an outcome a later
        // fetch wrote. The serving fetch's stores are visible anyway, since
        // the wait ends through the waiters' lock, after the run.
        let failed = match self.outcome.load(Acquire) {
            NO_FETCH => return None,
            PANICKED => RefreshError::Panicked,
            NO_RUNTIME => RefreshError::NoRuntime,
            TIMED_OUT => RefreshError::TimedOut,
            NOTHING_HELD => RefreshError::NothingHeld,
            FAILED => match self.error.load_full() {
                Some(error) => RefreshError::Failed(error),
                // A later fetch succeeded meanwhile. It cleared the error
                // after storing its value. This thread read the cleared
                // error with an Acquire load, so it now sees that value.
                None => return Some(self.value.load_full().ok_or(RefreshError::Panicked)),
            },
            // On SUCCEEDED, the answer is the value stored before the outcome.
            _ => return Some(self.value.load_full().ok_or(RefreshError::Panicked)),
        };
        Some(Err(failed))
    }

    pub(super) fn stats(&self) -> RefreshStats {
        let has_value = self.value.load().is_some();
        let (refreshes, unchanged, failures) = (
            self.refreshes.load(Relaxed),
            self.unchanged.load(Relaxed),
            self.failures.load(Relaxed),
        );
        RefreshStats {
            has_value,
            confirmed: self.meta.is_confirmed(),
            last_confirmed: self.meta.confirmed_at(),
            age: self.meta.age(),
            freshness: has_value.then(|| self.meta.freshness()),
            fetches: refreshes + unchanged + failures,
            refreshes,
            unchanged,
            failures,
            panics: self.panics.load(Relaxed),
            timeouts: self.timeouts.load(Relaxed),
            refused_fires: self.refused.load(Relaxed),
            transitions: self.meta.transitions.load(Relaxed),
            origin: self
                .value
                .load()
                .get()
                .map(|value| self.meta.origin_of(std::ptr::from_ref(value) as usize)),
            budget_waited: Duration::from_nanos(self.budget_waited.load(Relaxed)),
            copy_writes: self.copy_writes.load(Relaxed),
            copy_failures: self.copy_failures.load(Relaxed),
            failing: matches!(
                self.outcome.load(Relaxed),
                FAILED | PANICKED | NO_RUNTIME | TIMED_OUT | NOTHING_HELD
            ),
        }
    }
}

/// `duration` in nanoseconds, saturating.
pub(super) fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

impl<T, E> Latest<T, E> {
    #[cfg(feature = "tokio")]
    pub(super) async fn ready(&self, timeout: Duration) -> Result<(), crate::WaitError> {
        let confirmed = self.meta.confirmed();
        if timeout == Duration::MAX {
            confirmed.await;
            return Ok(());
        }
        tokio::time::timeout(timeout, confirmed)
            .await
            .map_err(|_| crate::WaitError::Timeout)
    }

    pub(super) fn freshness(&self) -> Option<Freshness> {
        self.value.load().is_some().then(|| self.meta.freshness())
    }

    pub(super) fn wait_ready(&self, timeout: Duration) -> Result<(), crate::WaitError> {
        #[cfg(feature = "tokio")]
        if tokio::runtime::Handle::try_current().is_ok() && !self.meta.is_confirmed() {
            return Err(crate::WaitError::OnRuntime);
        }
        if self.meta.wait_confirmed(timeout) {
            Ok(())
        } else {
            Err(crate::WaitError::Timeout)
        }
    }
}

#[cfg(feature = "tokio")]
impl<T, E> Latest<T, E> {
    /// Closes the subscribers' channel once `scheduler` has terminated.
    pub(super) fn close_with(self: &Arc<Self>, scheduler: &crate::scheduler::Scheduler)
    where
        T: Send + Sync + 'static,
        E: Send + Sync + 'static,
    {
        let hook = Arc::downgrade(self);
        scheduler.shared.when_terminated(hook);
    }

    /// A fetch starts, as [`Subscribers::fetching`] describes.
    pub(super) fn fetching(&self) -> Fetching<'_, T> {
        self.watch.fetching()
    }
}

#[cfg(feature = "tokio")]
impl<T: Send + Sync, E: Send + Sync> crate::scheduler::OnTerminated for Latest<T, E> {
    fn terminated(&self) {
        self.watch.close_at_termination();
    }
}
