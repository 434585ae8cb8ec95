//! The timer role's state: the timing wheel, which turns AT requests into
//! wheel entries (one per trigger) and due entries into runs to queue.
//! Whichever worker holds the role owns it (see `pool/`); it never runs
//! user code while holding it.
//!
//! Wheel entries hold `Weak` references: a superseded or dropped trigger's
//! task is freed without waiting for a stale deadline (docs/DESIGN.md,
//! "Pitfalls").

use crate::core::{Core, Runtime, NO_KEY};
use crate::request::{Stamp, Word};
use crate::sync::{Arc, Ordering, Weak};
use crate::wheel::{Key, Wheel};

/// "No deadline at all."
pub(crate) const NEVER: u64 = u64::MAX;

/// A trigger in the timer's inbox, with its pusher's [`Stamp`].
pub(crate) type InboxItem<R> = (Weak<Core<R>>, Stamp);

/// How long a turn's due runs took last time, in all: the role holder's
/// guess of the batch (see [`Pool::after_turn`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Estimate {
    /// The runs that have finished before (µs, saturating).
    pub(crate) known_us: u64,
    /// Some run in the batch has never finished one: it may take any time,
    /// so the batch is never "quick".
    pub(crate) unknown: bool,
}

/// What the wheel remembers of a trigger: who, and the exact request word
/// it was armed for (so expiry can tell a superseded request apart).
struct Entry<R: Runtime> {
    core: Weak<Core<R>>,
    seen: Word,
}

/// The timer role's single-threaded state.
pub(crate) struct Timer<R: Runtime> {
    wheel: Wheel<Entry<R>>,
}

impl<R: Runtime> Timer<R> {
    pub(crate) fn new(now_us: u64) -> Self {
        Self {
            wheel: Wheel::new(now_us),
        }
    }

    /// One turn at time `now_us`: re-read the triggers from the inbox
    /// (`items`), then append every run that is due to `due`, in deadline
    /// order, for the caller to queue. Returns how long those runs took
    /// last time, in all (µs): the caller's estimate of the batch —
    /// noting whether one of them has never finished a run.
    pub(crate) fn turn(
        &mut self,
        now_us: u64,
        items: &mut Vec<InboxItem<R>>,
        due: &mut Vec<Arc<Core<R>>>,
    ) -> Estimate {
        // Drained, not consumed: the caller keeps the buffer for the next
        // turn's news (see `Pool::next_work`).
        for (weak, stamp) in items.drain(..) {
            let Some(core) = weak.upgrade() else {
                continue;
            };
            let seen = core.request().leave_inbox();
            self.update(&core, weak, seen, stamp.deadline(seen, now_us));
        }
        let mut estimate = Estimate::default();
        self.wheel.poll(now_us, |_, due_at, entry| {
            if let Some(core) = entry.core.upgrade() {
                core.timer_key.store(NO_KEY, Ordering::Relaxed);
                if core.expire(entry.seen, due_at) {
                    match core.expected_run_us() {
                        Some(us) => estimate.known_us = estimate.known_us.saturating_add(us),
                        None => estimate.unknown = true,
                    }
                    due.push(core);
                }
            }
        });
        estimate
    }

    /// The wheel's current time (µs).
    pub(crate) fn elapsed(&self) -> u64 {
        self.wheel.elapsed()
    }

    /// The next time the timer has work, or [`NEVER`].
    pub(crate) fn next_wake(&self) -> u64 {
        self.wheel.next_expiration().unwrap_or(NEVER)
    }

    /// Number of wheel entries (one per armed trigger at most).
    pub(crate) fn len(&self) -> usize {
        self.wheel.len()
    }

    /// Moves (or adds, or removes) `core`'s entry to match its request.
    /// `weak`: the inbox item's reference to it, which a new entry keeps
    /// (no second reference made, and none dropped, per insert).
    fn update(
        &mut self,
        core: &Arc<Core<R>>,
        weak: Weak<Core<R>>,
        seen: Word,
        deadline: Option<u64>,
    ) {
        // Relaxed: `timer_key` is only touched by the role holder, and the
        // role passes between threads through the pool lock.
        let key = core.timer_key.load(Ordering::Relaxed);
        let key = (key != NO_KEY).then_some(Key::from_raw(key));
        match (deadline, key) {
            (Some(deadline), Some(key)) => {
                self.wheel.reschedule(key, deadline);
                if let Some(entry) = self.wheel.get_mut(key) {
                    entry.seen = seen;
                }
            }
            (Some(deadline), None) => {
                let entry = Entry { core: weak, seen };
                let key = self.wheel.insert(deadline, entry);
                core.timer_key.store(key.into_raw(), Ordering::Relaxed);
            }
            (None, Some(key)) => {
                self.wheel.remove(key);
                core.timer_key.store(NO_KEY, Ordering::Relaxed);
            }
            (None, None) => {}
        }
    }
}
