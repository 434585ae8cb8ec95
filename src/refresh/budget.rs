//! A fetch budget shared by refreshers, for guarantee G23. It is a rate and
//! a burst that their fetches together never exceed, handed out in turn.

use crate::clock::Clock;
use crate::scheduler::Scheduler;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// A budget of fetches shared by several refreshers of one scheduler, such
/// as N namespaces of one config store. Together they fetch at most `burst`
/// times at once, then once per `per` on average. In any window `w`, they
/// make at most `burst + w / per` fetches.
///
/// A fetch over budget is not dropped and not queued per call. Its
/// refresher reserves the next free slot and fetches then. Slots are handed
/// out in the order they are asked for, so no refresher starves. Every
/// "refresh now" meanwhile is served by that one fetch. Give the budget to
/// each refresher with [`RefreshBuilder::budget`](crate::RefreshBuilder::budget).
///
/// # Examples
///
/// ```
/// use circulation_trigger::refresh::Budget;
/// use circulation_trigger::{Refresh, Scheduler};
/// use std::time::Duration;
///
/// let sim = Scheduler::builder().build_virtual();
/// let budget = Budget::new(&sim, Duration::from_secs(1), 2); // 2 at once, then 1/s
/// let namespaces: Vec<_> = (0..4)
///     .map(|n| {
///         Refresh::builder(&sim)
///             .budget(&budget)
///             .bind(move || Ok::<_, String>(format!("namespace {n}")))
///     })
///     .collect();
/// for config in &namespaces {
///     config.refresh_now()?; // all four at once: two now, then one a second
/// }
/// sim.advance(Duration::ZERO);
/// assert_eq!(budget.stats().granted, 4);
/// assert_eq!(namespaces.iter().filter(|c| c.get().is_some()).count(), 2);
/// sim.advance(Duration::from_secs(2));
/// assert!(namespaces.iter().all(|c| c.get().is_some()));
/// # Ok::<(), circulation_trigger::FireError>(())
/// ```
#[derive(Clone)]
pub struct Budget(Arc<Inner>);

struct Inner {
    clock: Clock,
    /// The average spacing of fetches, in ns.
    interval_ns: u64,
    /// How far ahead of the average a burst may run, in ns.
    tolerance_ns: u64,
    /// The theoretical arrival time of the next fetch, as the generic cell
    /// rate algorithm keeps it, on the scheduler's clock in ns.
    next_ns: Mutex<u64>,
    granted: AtomicU64,
    delayed: AtomicU64,
    waited_ns: AtomicU64,
}

/// A [`Budget`]'s counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BudgetStats {
    /// Slots handed out, which are fetches let through at once or later.
    pub granted: u64,
    /// Of those, slots later than asked for, which are fetches the budget
    /// delayed.
    pub delayed: u64,
    /// The time those fetches waited, in total.
    pub waited: Duration,
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Budget")
            .field("per", &Duration::from_nanos(self.0.interval_ns))
            .field("stats", &self.stats())
            .finish()
    }
}

impl Budget {
    /// A budget on `scheduler`'s clock. It allows `burst` fetches at once,
    /// then one per `per`. `burst` counts as at least one, and `per` as at
    /// least a nanosecond.
    pub fn new<S: AsRef<Scheduler> + ?Sized>(scheduler: &S, per: Duration, burst: u32) -> Self {
        let interval_ns = u64::try_from(per.as_nanos()).unwrap_or(u64::MAX).max(1);
        let tolerance_ns = interval_ns.saturating_mul(u64::from(burst.max(1) - 1));
        Self(Arc::new(Inner {
            clock: scheduler.as_ref().shared.timing.clock.clone(),
            interval_ns,
            tolerance_ns,
            next_ns: Mutex::new(0),
            granted: AtomicU64::new(0),
            delayed: AtomicU64::new(0),
            waited_ns: AtomicU64::new(0),
        }))
    }

    /// Reserves the next free slot and returns the clock's time now and the
    /// slot's, in ns. The slot is now, or later if over budget.
    pub(crate) fn reserve(&self) -> (u64, u64) {
        let inner = &*self.0;
        let now = inner.clock.now_ns();
        let mut next = inner.next_ns.lock().unwrap_or_else(PoisonError::into_inner);
        let at = now.max(next.saturating_sub(inner.tolerance_ns));
        *next = (*next).max(now).saturating_add(inner.interval_ns);
        drop(next);
        inner.granted.fetch_add(1, Relaxed);
        if at > now {
            inner.delayed.fetch_add(1, Relaxed);
            inner.waited_ns.fetch_add(at - now, Relaxed);
        }
        (now, at)
    }

    /// The budget's counters.
    pub fn stats(&self) -> BudgetStats {
        BudgetStats {
            granted: self.0.granted.load(Relaxed),
            delayed: self.0.delayed.load(Relaxed),
            waited: Duration::from_nanos(self.0.waited_ns.load(Relaxed)),
        }
    }
}
