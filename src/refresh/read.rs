//! The hot-path read. A reader's handle keeps its own copy of the value and
//! revalidates it with one load. The value it reads tells where it came
//! from and how fresh it is.

use super::{Freshness, Latest, Meta, Origin, RefreshStats};
use crate::sync::{HoldsCell, ValueCache, ValueCell};
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// The cache's way to the value cell, through a handle on the shared state.
struct Holder<T, E>(Arc<Latest<T, E>>);

impl<T, E> HoldsCell for Holder<T, E> {
    type Value = T;

    #[inline]
    fn cell(&self) -> &ValueCell<T> {
        &self.0.value
    }
}

/// A reader's handle on a [`Refresh`](crate::Refresh)'s value, from
/// [`Refresh::reader`](crate::Refresh::reader). It is the hot path of a
/// service that reads its configuration on every request.
///
/// [`read`](Self::read) checks with one load that the value this handle
/// last saw is still the latest, and lends it. It writes nothing another
/// thread reads, neither a reference count nor a lock. So readers on many
/// cores never contend. A new value is loaded once per handle, at its first
/// read. Keep one handle per thread or task, and note that a clone is
/// another handle. Between reads a handle keeps the value it last saw
/// alive.
///
/// It neither fires nor keeps the fetch alive. [`get`](Self::get) gives
/// an owned `Arc` of the latest value instead.
///
/// # Examples
///
/// ```
/// use circulation_trigger::refresh::{Freshness, Origin};
/// use circulation_trigger::{Refresh, Scheduler};
/// use std::time::Duration;
///
/// struct Config {
///     limit: u32,
/// }
///
/// let sim = Scheduler::builder().build_virtual();
/// let config = Refresh::builder(&sim)
///     .stale_after(Duration::from_secs(60))
///     .bind(|| Ok::<_, String>(Config { limit: 10 }));
/// let mut reader = config.reader(); // one per thread or task
/// assert!(reader.read().is_none()); // nothing fetched yet
/// config.refresh_now()?;
/// sim.advance(Duration::ZERO);
///
/// let limit = reader.read().map_or(1, |c| c.limit); // per request
/// assert_eq!(limit, 10);
/// let current = reader.read().unwrap();
/// assert_eq!(current.origin(), Origin::Fetch);
/// assert_eq!(current.freshness(), Freshness::Fresh);
/// assert!(current.confirmed_at().is_some());
/// # Ok::<(), circulation_trigger::FireError>(())
/// ```
pub struct Reader<T, E = Box<dyn std::error::Error + Send + Sync>> {
    latest: Arc<Latest<T, E>>,
    cache: ValueCache<Holder<T, E>>,
}

impl<T, E> Reader<T, E> {
    pub(super) fn new(latest: Arc<Latest<T, E>>) -> Self {
        let cache = ValueCache::new(Holder(Arc::clone(&latest)));
        Self { latest, cache }
    }

    /// The latest value, read in place, or `None` until one is held. One
    /// load checks that the handle's copy is still the latest.
    #[inline]
    pub fn read(&mut self) -> Option<Current<'_, T>> {
        let meta = &self.latest.meta;
        self.cache.load().map(|value| Current { value, meta })
    }

    /// The latest value, owned. It stays valid for as long as it is held,
    /// whatever is published meanwhile. Each call moves the value's
    /// reference count, and [`read`](Self::read) moves none.
    pub fn get(&self) -> Option<Arc<T>> {
        self.latest.value.load_full()
    }

    /// As [`Refresh::last_error`](crate::Refresh::last_error).
    pub fn last_error(&self) -> Option<Arc<E>> {
        self.latest.error.load_full()
    }

    /// As [`Refresh::stats`](crate::Refresh::stats).
    pub fn stats(&self) -> RefreshStats {
        self.latest.stats()
    }

    /// As [`Refresh::freshness`](crate::Refresh::freshness).
    pub fn freshness(&self) -> Option<Freshness> {
        self.latest.freshness()
    }

    /// As [`Refresh::wait_ready`](crate::Refresh::wait_ready).
    ///
    /// # Errors
    ///
    /// As [`Refresh::wait_ready`](crate::Refresh::wait_ready).
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), crate::WaitError> {
        self.latest.wait_ready(timeout)
    }

    /// As [`Refresh::ready`](crate::Refresh::ready), with the `tokio` feature.
    ///
    /// # Errors
    ///
    /// As [`Refresh::ready`](crate::Refresh::ready).
    ///
    /// # Panics
    ///
    /// As [`Refresh::ready`](crate::Refresh::ready).
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn ready(&self, timeout: Duration) -> Result<(), crate::WaitError> {
        self.latest.ready(timeout).await
    }
}

/// Another handle, with a cache of its own.
impl<T, E> Clone for Reader<T, E> {
    fn clone(&self) -> Self {
        Self::new(Arc::clone(&self.latest))
    }
}

impl<T, E> fmt::Debug for Reader<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader")
            .field("has_value", &self.latest.value.load().is_some())
            .finish_non_exhaustive()
    }
}

/// The value a [`Reader`] read. It dereferences to the value, and tells
/// where the value came from and how fresh it is.
pub struct Current<'a, T> {
    value: &'a T,
    meta: &'a Meta,
}

impl<T> Current<'_, T> {
    /// Where the value came from, which is a fetch or the local copy read
    /// at start.
    pub fn origin(&self) -> Origin {
        self.meta.origin_of(std::ptr::from_ref(self.value) as usize)
    }

    /// The wall-clock time a fetch last confirmed the value held. It is read
    /// now, not when the value was read, since an "unchanged" answer renews
    /// it.
    pub fn confirmed_at(&self) -> Option<SystemTime> {
        self.meta.confirmed_at()
    }

    /// How fresh the value held is, now.
    pub fn freshness(&self) -> Freshness {
        self.meta.freshness()
    }
}

impl<T> Clone for Current<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Current<'_, T> {}

impl<T> Deref for Current<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T: fmt::Debug> fmt::Debug for Current<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.value, f)
    }
}
