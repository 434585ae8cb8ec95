//! The timer: owns the timing wheel, turns AT requests into wheel entries
//! (one per trigger) and due entries into queued runs. It never runs user
//! code, so a slow task cannot delay another trigger's deadline.
//!
//! Wheel entries hold `Weak` references: a superseded or dropped trigger's
//! task is freed without waiting for a stale deadline (SPEC §7).

use super::inbox::NEVER;
use super::Shared;
use crate::core::Core;
use crate::request::Word;
use crate::sync::{Arc, Ordering, Weak};
use crate::wheel::{Key, Wheel};

/// `Core::timer_key` when the trigger has no wheel entry.
pub(crate) const NO_KEY: u32 = u32::MAX;

/// What the wheel remembers of a trigger: who, and the exact request word
/// it was armed for (so expiry can tell a superseded request apart).
struct Entry {
    core: Weak<Core>,
    seen: Word,
}

/// The timer's single-threaded state.
pub(crate) struct Timer {
    wheel: Wheel<Entry>,
    /// Due runs of one turn, pushed to the run queue in one batch.
    due: Vec<Weak<Core>>,
}

impl Timer {
    pub(crate) fn new(now_us: u64) -> Self {
        Self {
            wheel: Wheel::new(now_us),
            due: Vec::new(),
        }
    }

    /// One turn at time `now_us`: re-read the triggers from the inbox, then
    /// queue every run that is due.
    pub(crate) fn turn(&mut self, shared: &Shared, now_us: u64, items: Vec<Weak<Core>>) {
        for core in items.iter().filter_map(Weak::upgrade) {
            let seen = core.request().leave_inbox();
            self.update(&core, seen, now_us);
        }
        let due = &mut self.due;
        self.wheel.poll(now_us, |_, due_at, entry| {
            if let Some(core) = entry.core.upgrade() {
                core.timer_key.store(NO_KEY, Ordering::Relaxed);
                if core.expire(entry.seen, due_at) {
                    due.push(entry.core);
                }
            }
        });
        if !self.due.is_empty() && !shared.run_queue.push_batch(&mut self.due) {
            // Closed under us: list what was due as discarded.
            for core in self.due.drain(..).filter_map(|core| core.upgrade()) {
                shared.lifecycle.discard_live(&core);
            }
        }
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
    fn update(&mut self, core: &Arc<Core>, seen: Word, now_us: u64) {
        // Relaxed: `timer_key` is only ever touched by this thread.
        let key = core.timer_key.load(Ordering::Relaxed);
        let key = (key != NO_KEY).then_some(Key::from_raw(key));
        match (seen.kind().deadline(now_us), key) {
            (Some(deadline), Some(key)) => {
                self.wheel.reschedule(key, deadline);
                if let Some(entry) = self.wheel.get_mut(key) {
                    entry.seen = seen;
                }
            }
            (Some(deadline), None) => {
                let entry = Entry {
                    core: Arc::downgrade(core),
                    seen,
                };
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

/// The timer thread's loop: sleep until the next deadline or a wake-up,
/// turn, repeat until the inbox closes.
pub(crate) fn run(shared: &Shared) {
    let mut timer = Timer::new(shared.clock.now_us());
    let mut until = NEVER;
    loop {
        let timeout =
            (until != NEVER && !shared.clock.is_manual()).then(|| shared.clock.until(until));
        let Some(items) = shared.inbox.wait(until, timeout) else {
            return;
        };
        timer.turn(shared, shared.clock.now_us(), items);
        until = timer.next_wake();
    }
}
