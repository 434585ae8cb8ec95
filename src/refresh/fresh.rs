//! How fresh a refresher's value is. This module keeps when a fetch last
//! confirmed the value, and the freshness that follows from its age. It
//! holds the readiness waiters and reports each change of freshness.

use crate::clock::Clock;
use crate::sync::{
    lock, wait, wait_timeout, AtomicU64, Condvar, Mutex, Ordering, StatU32, StatU64,
};
#[cfg(feature = "tokio")]
use std::future::Future;
#[cfg(feature = "tokio")]
use std::pin::Pin;
use std::task::Waker;
#[cfg(feature = "tokio")]
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

/// How fresh the value a refresher serves is. It goes by the time since a
/// fetch last confirmed the value with a good or "unchanged" answer. That
/// time is held against [`stale_after`](crate::RefreshBuilder::stale_after)
/// and [`expire_after`](crate::RefreshBuilder::expire_after). A stale or
/// expired value is still served, and the service decides what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Freshness {
    /// Confirmed within `stale_after`, or no `stale_after` is set.
    Fresh,
    /// Not confirmed for `stale_after` or longer.
    Stale,
    /// Not confirmed for `expire_after` or longer.
    Expired,
}

/// Where the value a refresher serves came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum Origin {
    /// A fetch returned it.
    Fetch,
    /// It was read from the local copy at start, as
    /// [`Refresh::local_copy`](crate::Refresh::local_copy) does. No fetch
    /// has returned a value since. One may have confirmed it with
    /// "unchanged".
    LocalCopy,
}

/// [`Meta::reported`] when no value is held.
const EMPTY: u32 = 0;
const FRESH: u32 = 1;
const STALE: u32 = 2;
const EXPIRED: u32 = 3;

/// The part of a refresher's shared state that does not depend on the
/// value's type. It keeps confirmation, freshness and readiness.
pub(crate) struct Meta {
    clock: Clock,
    /// The wall clock when [`clock`](Self::clock) read zero. It is the
    /// scheduler's, read once, since the schedule runs on the monotonic
    /// clock.
    wall_at_zero: SystemTime,
    stale_after: Option<Duration>,
    expire_after: Option<Duration>,
    /// The clock's time in ns, plus one, of the last confirmation, or zero
    /// until the first.
    confirmed: AtomicU64,
    /// The freshness last reported, which was traced, counted and exported.
    reported: StatU32,
    pub(crate) transitions: StatU64,
    /// Readiness waiters. The async ones leave their wakers here, and the
    /// blocking ones wait on the condvar.
    waiters: Mutex<Vec<Waker>>,
    ready: Condvar,
    /// The trigger's name, for traces and metric labels.
    name: Option<String>,
    /// A value carried over from the local copy, with the clock's time it
    /// was installed at and its age then. Its address, in `carried_at`,
    /// tells it from a fetched one. Its allocation is kept by the
    /// refresher, so the address is never reused.
    carried: std::sync::Mutex<Option<Carried>>,
    carried_at: std::sync::atomic::AtomicUsize,
}

/// See [`Meta::carried`].
#[derive(Clone, Copy)]
struct Carried {
    installed_ns: u64,
    age: Duration,
}

impl Meta {
    pub(crate) fn new(
        clock: Clock,
        wall_at_zero: SystemTime,
        stale_after: Option<Duration>,
        expire_after: Option<Duration>,
        name: Option<String>,
    ) -> Self {
        Self {
            wall_at_zero,
            clock,
            stale_after,
            expire_after,
            confirmed: AtomicU64::new(0),
            reported: StatU32::new(EMPTY),
            transitions: StatU64::new(0),
            waiters: Mutex::new(Vec::new()),
            ready: Condvar::new(),
            name,
            carried: std::sync::Mutex::new(None),
            carried_at: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// A value carried over from the local copy is held at `address`, `age`
    /// old now.
    pub(crate) fn carry(&self, address: usize, age: Duration) {
        let carried = Carried {
            installed_ns: self.clock.now_ns(),
            age,
        };
        *self
            .carried
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(carried);
        // Relaxed: the value itself is published by the cell, and this only
        // names it. A reader that misses it sees `Fetch` for a value
        // installed as it read.
        self.carried_at.store(address, Ordering::Relaxed);
    }

    /// Where the value at `address` came from.
    pub(crate) fn origin_of(&self, address: usize) -> super::Origin {
        if self.carried_at.load(Ordering::Relaxed) == address {
            super::Origin::LocalCopy
        } else {
            super::Origin::Fetch
        }
    }

    /// The age of a carried value never confirmed since.
    fn carried_age(&self) -> Option<Duration> {
        let carried = *self
            .carried
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        carried.map(|carried| {
            let since = self.clock.now_ns().saturating_sub(carried.installed_ns);
            carried.age.saturating_add(Duration::from_nanos(since))
        })
    }

    /// The clock's time in ns.
    pub(crate) fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }

    /// The value held is confirmed now. This renews its freshness, and wakes
    /// the readiness waiters on the first confirmation.
    pub(crate) fn confirm(&self) {
        let now = self.clock.now_ns().saturating_add(1);
        // Release: a reader that sees this confirmation with the Acquire in
        // `confirmed_ns` sees the value stored before it. A later
        // confirmation carries the same edge for its own value.
        let before = self.confirmed.swap(now, Ordering::Release);
        crate::metrics::confirmed(self.name.as_deref(), self.unix_secs(now));
        if before == 0 {
            // The lock orders this wake against a waiter that found no
            // confirmation under it and is about to sleep.
            let wakers = std::mem::take(&mut *lock(&self.waiters));
            self.ready.notify_all();
            wakers.into_iter().for_each(Waker::wake);
        }
    }

    /// The clock's time of the last confirmation, plus one, or zero if none.
    fn confirmed_ns(&self) -> u64 {
        // Acquire: pairs with `confirm`'s Release.
        self.confirmed.load(Ordering::Acquire)
    }

    /// Whether a fetch has confirmed a value since the refresher started.
    pub(crate) fn is_confirmed(&self) -> bool {
        self.confirmed_ns() != 0
    }

    fn unix_secs(&self, confirmed: u64) -> f64 {
        self.wall(confirmed)
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64())
    }

    fn wall(&self, confirmed: u64) -> SystemTime {
        let since_zero = Duration::from_nanos(confirmed - 1);
        self.wall_at_zero
            .checked_add(since_zero)
            .unwrap_or(self.wall_at_zero)
    }

    /// The wall-clock time of the last confirmation.
    pub(crate) fn confirmed_at(&self) -> Option<SystemTime> {
        match self.confirmed_ns() {
            0 => None,
            confirmed => Some(self.wall(confirmed)),
        }
    }

    /// The time since the last confirmation.
    pub(crate) fn age(&self) -> Option<Duration> {
        match self.confirmed_ns() {
            0 => None,
            confirmed => Some(Duration::from_nanos(
                self.clock.now_ns().saturating_sub(confirmed - 1),
            )),
        }
    }

    /// The age of the value held, counted from its last confirmation. A
    /// value carried over from the local copy and never confirmed counts
    /// from when it was saved.
    pub(crate) fn value_age(&self) -> Option<Duration> {
        self.age().or_else(|| self.carried_age())
    }

    /// The value's freshness, given that one is held.
    pub(crate) fn freshness(&self) -> Freshness {
        match self.value_age() {
            Some(age) => self.freshness_at(age),
            None => Freshness::Stale,
        }
    }

    fn freshness_at(&self, age: Duration) -> Freshness {
        if self.expire_after.is_some_and(|after| age >= after) {
            Freshness::Expired
        } else if self.stale_after.is_some_and(|after| age >= after) {
            Freshness::Stale
        } else {
            Freshness::Fresh
        }
    }

    /// Whether the freshness has limits to watch.
    pub(crate) fn watched(&self) -> bool {
        self.stale_after.is_some() || self.expire_after.is_some()
    }

    /// Reports the freshness if it changed since the last report, and
    /// returns when to look again. That is at the next limit the value's age
    /// reaches. Past the last limit it is at the shortest limit's pace, so a
    /// value confirmed meanwhile is watched again.
    pub(crate) fn observe(&self, has_value: bool) -> Option<Duration> {
        let age = self.value_age();
        let now = match (has_value, age) {
            (false, _) => EMPTY,
            (true, Some(age)) => code(self.freshness_at(age)),
            (true, None) => STALE,
        };
        let before = self.reported.swap(now, Ordering::Relaxed);
        if before != now {
            self.transitions.fetch_add(1, Ordering::Relaxed);
            let to = match now {
                FRESH => "fresh",
                STALE => "stale",
                EXPIRED => "expired",
                _ => "empty",
            };
            crate::metrics::freshness(self.name.as_deref(), to, now as u8);
            #[cfg(feature = "tracing")]
            if now == FRESH {
                tracing::info!(
                    refresh = self.name.as_deref(),
                    to,
                    "refresh freshness changed"
                );
            } else {
                tracing::warn!(
                    refresh = self.name.as_deref(),
                    to,
                    "refresh freshness changed"
                );
            }
        }
        let shortest = [self.stale_after, self.expire_after]
            .into_iter()
            .flatten()
            .min()?;
        let age = age.unwrap_or(Duration::ZERO);
        let next = [self.stale_after, self.expire_after]
            .into_iter()
            .flatten()
            .filter(|&limit| limit > age)
            .min()
            .map_or(shortest, |limit| limit - age);
        Some(next)
    }

    /// Blocks until a fetch has confirmed a value, or for at most
    /// `timeout`. Returns whether one has.
    pub(crate) fn wait_confirmed(&self, timeout: Duration) -> bool {
        if self.is_confirmed() {
            return true;
        }
        let deadline = Instant::now().checked_add(timeout);
        let mut waiters = lock(&self.waiters);
        loop {
            if self.is_confirmed() {
                return true;
            }
            waiters = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    wait_timeout(&self.ready, &self.waiters, waiters, left)
                }
                // A timeout past the clock's range needs no timer at all.
                None => wait(&self.ready, waiters),
            };
        }
    }

    /// A future that completes once a fetch has confirmed a value.
    #[cfg(feature = "tokio")]
    pub(crate) fn confirmed(&self) -> Confirmed<'_> {
        Confirmed { meta: self }
    }
}

fn code(freshness: Freshness) -> u32 {
    match freshness {
        Freshness::Fresh => FRESH,
        Freshness::Stale => STALE,
        Freshness::Expired => EXPIRED,
    }
}

/// See [`Meta::confirmed`].
#[cfg(feature = "tokio")]
pub(crate) struct Confirmed<'a> {
    meta: &'a Meta,
}

#[cfg(feature = "tokio")]
impl Future for Confirmed<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.meta.is_confirmed() {
            return Poll::Ready(());
        }
        let mut wakers = lock(&self.meta.waiters);
        // Checked again under the lock, since `confirm` takes the wakers
        // under it after storing the confirmation.
        if self.meta.is_confirmed() {
            return Poll::Ready(());
        }
        if !wakers.iter().any(|waker| waker.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
