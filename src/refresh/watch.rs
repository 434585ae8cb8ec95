//! [`Refresh::subscribe`](super::Refresh::subscribe)'s channel. It is sent
//! a value at each publish, and closed once the scheduler has terminated and
//! no fetch runs.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The subscribers' channel. Its sender is dropped once the scheduler has
/// terminated and no fetch runs. That closes the channel, so a reader
/// awaiting `changed()` learns that no newer value can come. A virtual
/// scheduler counts no thread for a sync fetch in flight, so its
/// termination may come first. That fetch then sends its value, and closes
/// the channel as it ends.
pub(crate) struct Subscribers<T>(Mutex<Watch<T>>);

/// What [`Subscribers`] guards.
pub(crate) struct Watch<T> {
    pub(super) sender: Option<tokio::sync::watch::Sender<Option<Arc<T>>>>,
    fetching: bool,
    terminated: bool,
}

impl<T> Subscribers<T> {
    pub(super) fn new() -> Self {
        Self(Mutex::new(Watch {
            sender: Some(tokio::sync::watch::Sender::new(None)),
            fetching: false,
            terminated: false,
        }))
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Watch<T>> {
        // A panic cannot leave the flags half written, so poison is moot.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The scheduler has terminated, so this closes the channel. It closes
    /// it now, or as the fetch in flight ends. Idempotent.
    pub(super) fn close_at_termination(&self) {
        let mut watch = self.lock();
        watch.terminated = true;
        let closed = if watch.fetching {
            None // the fetch in flight closes it as it ends
        } else {
            watch.sender.take()
        };
        drop(watch);
        drop(closed);
    }

    /// A fetch starts. Until it ends, a termination leaves the channel open
    /// for it. [`Fetching`]'s drop or `sent` ends it.
    pub(super) fn fetching(&self) -> Fetching<'_, T> {
        self.lock().fetching = true;
        Fetching(self)
    }
}

/// A fetch in flight, as [`Subscribers::fetching`] starts it. Dropped, it
/// ends having sent nothing. That holds also when the iteration unwinds
/// past the fetch's catch.
pub(crate) struct Fetching<'a, T>(&'a Subscribers<T>);

impl<T> Fetching<'_, T> {
    /// Ends the fetch, sending `value` to the subscribers first.
    pub(super) fn sent(self, value: Arc<T>) {
        self.end(Some(value));
    }

    fn end(&self, value: Option<Arc<T>>) {
        let mut watch = self.0.lock();
        watch.fetching = false;
        let replaced = match (&watch.sender, value) {
            (Some(sender), Some(value)) => sender.send_replace(Some(value)),
            _ => None,
        };
        let closed = if watch.terminated {
            watch.sender.take()
        } else {
            None
        };
        drop(watch);
        // Outside the lock, since a value's destructor is user code that may
        // subscribe. Dropping the sender also wakes the receivers.
        drop((replaced, closed));
    }
}

impl<T> Drop for Fetching<'_, T> {
    fn drop(&mut self) {
        // After `sent`, this finds `fetching` already cleared.
        if self.0.lock().fetching {
            self.end(None);
        }
    }
}
