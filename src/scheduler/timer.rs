//! The timer role's state, the timing wheel. It turns AT requests into
//! wheel entries, one per trigger, and due entries into runs to queue.
//! Whichever worker holds the role owns it, as `pool/` arranges. That
//! worker never runs user code while holding it.
//!
//! Wheel entries and inbox items hold strong references. A periodic run
//! goes from the wheel to the run queue, to its worker, and back through
//! the inbox to the wheel. It goes with one reference, moved at each step.
//! There is no `Weak` upgrade, downgrade or count change on the way.
//! `Core::let_go` brings a trigger whose last handle goes to the timer's
//! next turn. So the timer drops its entry then, rather than at a stale
//! deadline maybe an hour away. docs/DESIGN.md explains this under
//! "Pitfalls".
//!
//! What the timer lets go of may be a trigger's last reference, whose
//! task's destructor may run any code. A destructor that blocks must not
//! hold up the deadlines. So a worker's turn queues the reference of a
//! trigger with no handle left as a run. Its dispatch finds nothing to run.
//! The worker drops it with the role put back, and the monitor watches it
//! like any run. The turn drops the other references outside every lock.
//! They are superseded deadlines of triggers the user still holds.
//! [`Timer::settle_let_go`] does both. A thread-less driver drops them all
//! after its lock.

use crate::core::Counted;
use crate::core::{Core, Runtime};
use crate::request::Stamp;
use crate::wheel::{Key, Wheel};

/// "No deadline at all."
pub(crate) const NEVER: u64 = u64::MAX;

/// A trigger in the timer's inbox, with its pusher's [`Stamp`].
pub(crate) type InboxItem<R> = (Counted<Core<R>>, Stamp);

/// How long a turn's due runs took last time, in all. It is the role
/// holder's guess of the batch, for [`Pool::after_turn`](super::pool::Pool::after_turn).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Estimate {
    /// The time of the runs that have finished before, in µs, saturating.
    pub(crate) known_us: u64,
    /// Some run in the batch has never finished one. It may take any time,
    /// so the batch is never "quick".
    pub(crate) unknown: bool,
}

/// What the wheel remembers of a trigger, which is only who. The request
/// word it was filed for needs no copy, as `Core::expire` explains. So a
/// wheel entry is 24 bytes, not 32.
struct Entry<R: Runtime> {
    core: Counted<Core<R>>,
}

/// The timer role's single-threaded state.
pub(crate) struct Timer<R: Runtime> {
    wheel: Wheel<Entry<R>>,
    /// The references the last turn let go of, such as a superseded
    /// deadline or a trigger taken off the wheel. Any may be a trigger's
    /// last. So they are settled by [`settle_let_go`](Self::settle_let_go)
    /// or taken by [`take_let_go`](Self::take_let_go), never inside a turn.
    let_go: Vec<Counted<Core<R>>>,
}

impl<R: Runtime> Timer<R> {
    pub(crate) fn new(now_us: u64) -> Self {
        Self {
            wheel: Wheel::new(now_us),
            let_go: Vec::new(),
        }
    }

    /// One turn at time `now_us`. It re-reads the triggers from the inbox,
    /// `items`. Then it appends every run that is due to `due`, in deadline
    /// order, for the caller to queue. Returns how long those runs took
    /// last time, in all, in µs. That is the caller's estimate of the
    /// batch. The estimate notes whether one of those triggers has never
    /// finished a run.
    pub(crate) fn turn(
        &mut self,
        now_us: u64,
        items: &mut Vec<InboxItem<R>>,
        due: &mut Vec<Counted<Core<R>>>,
    ) -> Estimate {
        // Drained, not consumed, because the caller keeps the buffer for
        // the next turn's news in `Pool::next_work`.
        for (core, stamp) in items.drain(..) {
            self.take_in(core, stamp, now_us);
        }

        let mut estimate = Estimate::default();
        let let_go = &mut self.let_go;
        self.wheel.poll(now_us, |_, due_at, Entry { core }| {
            if core.expire(due_at) {
                match core.expected_run_us() {
                    Some(us) => estimate.known_us = estimate.known_us.saturating_add(us),
                    None => estimate.unknown = true,
                }
                // The entry's reference goes on to the run queue.
                due.push(core);
            } else {
                let_go.push(core); // superseded
            }
        });
        estimate
    }

    /// Called after a worker's turn, with the caller holding no lock. A
    /// thread-less driver's turn does not come here. Its caller drops what
    /// it let go of outside its lock, as a rule on the thread that asked.
    /// This queues onto `due`, as runs, the references the turn let go of
    /// that belong to triggers with no handle left. Any of them may be the
    /// last. So a worker drops them with the role put back, as the module
    /// docs explain. Their length is unknown, because a destructor may
    /// block. So the batch is not judged quick, and the role goes to a
    /// successor.
    ///
    /// It drops the others here. Each belonged to a trigger with a handle
    /// when the turn looked, or was already queued. So it is the last only
    /// in a race, and only then does its task's destructor run here with
    /// the role held. In that race the handle dropped in between, or the
    /// queued run was dispatched and let go of in between.
    pub(crate) fn settle_let_go(
        &mut self,
        due: &mut Vec<Counted<Core<R>>>,
        estimate: &mut Estimate,
    ) {
        for core in self.let_go.drain(..) {
            if core.queue_to_drop() {
                due.push(core);
                estimate.unknown = true;
            }
        }
    }

    /// Takes `core` out of the inbox at `now_us`, with its pusher's
    /// `stamp`. It files the request it reads, or drops its entry.
    pub(crate) fn take_in(&mut self, core: Counted<Core<R>>, stamp: Stamp, now_us: u64) {
        let seen = core.request().leave_inbox();
        let deadline = stamp.deadline(seen, now_us);
        self.update(core, deadline);
    }

    /// The references the turns let go of. A caller that turns under a
    /// lock, such as the thread-less driver, drops them once it has
    /// released the lock.
    pub(crate) fn take_let_go(&mut self) -> Vec<Counted<Core<R>>> {
        std::mem::take(&mut self.let_go)
    }

    /// Empties the wheel at shutdown. It returns every reference it held,
    /// and any let go of, for the caller to drop outside its locks. A later
    /// turn files each trigger afresh.
    pub(crate) fn drain(&mut self) -> Vec<Counted<Core<R>>> {
        let mut held = std::mem::take(&mut self.let_go);
        self.wheel.drain(|entry| held.push(entry.core));
        held
    }

    /// The wheel's current time, in µs.
    pub(crate) fn elapsed(&self) -> u64 {
        self.wheel.elapsed()
    }

    /// The next time the timer has work, or [`NEVER`].
    pub(crate) fn next_wake(&self) -> u64 {
        self.wheel.next_expiration().unwrap_or(NEVER)
    }

    /// Number of wheel entries, at most one per armed trigger.
    pub(crate) fn len(&self) -> usize {
        self.wheel.len()
    }

    /// Moves, adds or removes `core`'s entry to match its request. `core`
    /// is the inbox item's reference, which a new entry keeps. So an insert
    /// changes no count.
    ///
    /// The entry is at the trigger's registry slot. No other live trigger
    /// has that slot, and the entry holds the trigger alive. So the entry
    /// there is live exactly while it is this trigger's, and the trigger
    /// keeps no key of its own. A periodic trigger keeps its entry's index,
    /// and triggers due together keep neighbouring ones.
    fn update(&mut self, core: Counted<Core<R>>, deadline: Option<u64>) {
        let slot = core.slot();
        let key = Key::from_raw(slot);
        match deadline {
            Some(deadline) if self.wheel.reschedule(key, deadline) => {
                // The entry keeps a reference of its own.
                self.let_go.push(core);
            }
            Some(deadline) => {
                // The reference moves into the entry.
                self.wheel
                    .insert_at(slot, deadline, Entry { core })
                    .expect("a trigger's registry slot names no live wheel entry");
            }
            None => {
                if let Some(entry) = self.wheel.remove(key) {
                    self.let_go.push(entry.core);
                }
                self.let_go.push(core);
            }
        }
    }
}
