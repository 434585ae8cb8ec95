//! The timer's inbox: triggers whose AT request changed, each at most once
//! (the IN_INBOX bit of the trigger's request word), and the timer's bed, woken only when a new
//! deadline is earlier than the one the timer sleeps toward.
//!
//! # The wake-up protocol
//!
//! `sleep_until` holds the deadline the timer sleeps toward (`AWAKE` while
//! it works; the timer drains the inbox before sleeping again). The timer
//! writes it only under the lock, right before waiting.
//!
//! * The firer that sets IN_INBOX ([`Inbox::push`]) takes the lock, pushes,
//!   reads the trigger's request with an RMW (`Request::touch`) and wakes
//!   the timer if that request's deadline is before `sleep_until`.
//! * A firer that finds IN_INBOX already set ([`Inbox::poke`]) reads
//!   `sleep_until` without the lock. Either the pusher's `touch` came after
//!   this firer's publish in the request word's modification order — then
//!   the pusher judged this firer's deadline — or before it: then the
//!   firer's publish (Acquire) synchronized with `touch` (Release), which
//!   happened after every `sleep_until` store the pusher saw under the lock,
//!   so the firer reads that value or a later one. A later value is `AWAKE`
//!   (the timer will drain the inbox, where this trigger is) or a new sleep,
//!   which the timer only starts with an empty inbox — after it cleared
//!   IN_INBOX, which this firer found set, so it read this firer's request.
//!
//! Relaxed is enough on `sleep_until`: every edge above is carried by the
//! lock or by the request word.

use crate::core::Core;
use crate::sync::{lock, wait, wait_timeout, Arc, AtomicU64, Condvar, Mutex, Ordering, Weak};
use std::time::Duration;

/// `sleep_until` while the timer is awake.
const AWAKE: u64 = 0;
/// `sleep_until` while the timer sleeps with no deadline at all.
pub(crate) const NEVER: u64 = u64::MAX;

#[derive(Default)]
struct Inner {
    items: Vec<Weak<Core>>,
    closed: bool,
    /// Set by a waker; the timer clears it when it wakes.
    notified: bool,
}

/// Triggers for the timer to (re)read, and the timer's bed.
pub(crate) struct Inbox {
    inner: Mutex<Inner>,
    wake: Condvar,
    sleep_until: AtomicU64,
}

impl Default for Inbox {
    fn default() -> Self {
        Self {
            inner: Mutex::default(),
            wake: Condvar::new(),
            sleep_until: AtomicU64::new(AWAKE),
        }
    }
}

impl Inbox {
    /// Adds `core` (whose IN_INBOX flag this caller set); wakes the timer if
    /// the trigger's current deadline is earlier than its sleep target.
    /// Returns `false` if the inbox is closed (shut down).
    pub(crate) fn push(&self, core: &Arc<Core>, now_us: u64) -> bool {
        let mut inner = lock(&self.inner);
        if inner.closed {
            return false;
        }
        inner.items.push(Arc::downgrade(core));
        let deadline = core.request().touch().kind().deadline(now_us);
        let wake = deadline.is_some_and(|d| self.should_wake(&mut inner, d));
        drop(inner);
        if wake {
            self.wake.notify_one();
        }
        true
    }

    /// A trigger already in the inbox got a new deadline: wake the timer if
    /// the deadline is earlier than its sleep target.
    pub(crate) fn poke(&self, deadline: u64) {
        // Relaxed: see the module docs.
        if deadline >= self.sleep_until.load(Ordering::Relaxed) {
            return;
        }
        let mut inner = lock(&self.inner);
        let wake = self.should_wake(&mut inner, deadline);
        drop(inner);
        if wake {
            self.wake.notify_one();
        }
    }

    /// Under the lock: marks the timer awake if `deadline` precedes its
    /// target, so later firers skip the lock.
    fn should_wake(&self, inner: &mut Inner, deadline: u64) -> bool {
        if deadline < self.sleep_until.load(Ordering::Relaxed) {
            self.sleep_until.store(AWAKE, Ordering::Relaxed);
            inner.notified = true;
            true
        } else {
            false
        }
    }

    /// Timer side: unless there is work already, sleeps until `until_us`
    /// (`NEVER`: until woken), for at most `timeout` when one is given (the
    /// real clock); returns the triggers to re-read, or `None` once closed.
    pub(crate) fn wait(&self, until_us: u64, timeout: Option<Duration>) -> Option<Vec<Weak<Core>>> {
        let mut inner = lock(&self.inner);
        if inner.items.is_empty() && !inner.closed && !inner.notified {
            self.sleep_until.store(until_us, Ordering::Relaxed);
            inner = match timeout {
                Some(timeout) => wait_timeout(&self.wake, inner, timeout),
                None => wait(&self.wake, inner),
            };
        }
        self.sleep_until.store(AWAKE, Ordering::Relaxed);
        inner.notified = false;
        if inner.closed {
            return None;
        }
        Some(std::mem::take(&mut inner.items))
    }

    /// Takes the pending triggers without sleeping.
    pub(crate) fn drain(&self) -> Vec<Weak<Core>> {
        std::mem::take(&mut lock(&self.inner).items)
    }

    /// Whether the timer is awake or woken (not asleep toward a deadline);
    /// read under the lock, so it is exact.
    #[cfg(loom)]
    pub(crate) fn is_awake(&self) -> bool {
        let inner = lock(&self.inner);
        inner.notified || self.sleep_until.load(Ordering::Relaxed) == AWAKE
    }

    /// Wakes the timer without news.
    #[cfg(loom)]
    pub(crate) fn nudge(&self) {
        lock(&self.inner).notified = true;
        self.wake.notify_one();
    }

    /// Closes the inbox and wakes the timer so it exits.
    pub(crate) fn close(&self) {
        let mut inner = lock(&self.inner);
        inner.closed = true;
        inner.items.clear();
        drop(inner);
        self.wake.notify_one();
    }
}
