//! The hot-path read: the value held, borrowed in place, with where it came
//! from and how fresh it is.

use super::{Freshness, Meta, Origin};
use crate::sync::ValueGuard;
use std::fmt;
use std::ops::Deref;
use std::time::SystemTime;

/// The value a refresher holds, read in place ([`Refresh::read`]): it
/// dereferences to the value, which stays valid while this is held,
/// whatever is published meanwhile.
///
/// Taking one writes no cache line another thread reads: no reference
/// count moves (the guard takes a slot of the reading thread's own). Hold
/// it for a request, not for ever: a thread holding many at once falls
/// back to counting them. For an owned value, use
/// [`Refresh::get`](crate::Refresh::get).
///
/// [`Refresh::read`]: crate::Refresh::read
///
/// # Examples
///
/// ```
/// use circulation_trigger::refresh::{Freshness, Origin};
/// use circulation_trigger::{Refresh, Scheduler};
/// use std::time::Duration;
///
/// let sim = Scheduler::builder().build_virtual();
/// let config = Refresh::builder(&sim)
///     .stale_after(Duration::from_secs(60))
///     .bind(|| Ok::<_, String>(String::from("v1")));
/// assert!(config.read().is_none()); // nothing fetched yet
/// config.refresh_now()?;
/// sim.advance(Duration::ZERO);
///
/// let current = config.read().unwrap();
/// assert_eq!(current.len(), 2); // derefs to the value
/// assert_eq!(current.origin(), Origin::Fetch);
/// assert_eq!(current.freshness(), Freshness::Fresh);
/// assert!(current.confirmed_at().is_some());
/// # Ok::<(), circulation_trigger::FireError>(())
/// ```
pub struct Current<'a, T> {
    guard: ValueGuard<T>,
    meta: &'a Meta,
}

impl<'a, T> Current<'a, T> {
    /// The value in `guard`, if there is one.
    #[inline]
    pub(super) fn new(guard: ValueGuard<T>, meta: &'a Meta) -> Option<Self> {
        guard.is_some().then_some(Self { guard, meta })
    }

    /// Where the value came from.
    pub fn origin(&self) -> Origin {
        Origin::Fetch
    }

    /// The wall-clock time a fetch last confirmed the value held (now, not
    /// when this was read: an "unchanged" answer since renews it).
    pub fn confirmed_at(&self) -> Option<SystemTime> {
        self.meta.confirmed_at()
    }

    /// How fresh the value held is, now.
    pub fn freshness(&self) -> Freshness {
        self.meta.freshness()
    }
}

impl<T> Deref for Current<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        match self.guard.get() {
            Some(value) => value,
            // `new` built none without a value.
            None => unreachable!("a `Current` always holds a value"),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Current<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
