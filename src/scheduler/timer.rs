//! The timer role's state, the timing wheel. It turns AT requests into
//! wheel entries, one per trigger, and due entries into runs to queue.
//! Whichever worker holds the role owns it, as `pool/` arranges. That
//! worker never runs user code while holding it.
//!
//! Wheel entries and inbox items hold strong references. A periodic run
//! goes from the wheel to the run queue, to its worker, and back through
//! the inbox to the wheel. It goes with one reference, moved at each step.
//! There is no `Weak` upgrade, downgrade or count change on the way. A
//! wheel entry keeps its reference's count but not its pointer. The entry
//! is at the trigger's registry slot, and the registry's slot holds the
//! same pointer, which the timer reads back when the entry comes due, is
//! removed or is drained. So a wheel entry is 12 bytes, not 24.
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
use crate::shutdown::Slots;
use crate::sync::Arc;
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

/// The timer role's single-threaded state.
pub(crate) struct Timer<R: Runtime> {
    /// An entry's key is its trigger's registry slot, which names the
    /// trigger in `slots`. An entry keeps a strong count of it, given up by
    /// `Counted::into_raw`. The request word it was filed for needs no copy,
    /// as `Core::expire` explains. So an entry holds no value at all.
    wheel: Wheel<()>,
    /// The registry's slots, from the first trigger filed. Every trigger of
    /// one timer has the same runtime.
    slots: Option<Arc<Slots<Core<R>>>>,
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
            slots: None,
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
        let slots = &self.slots;
        self.wheel.poll(now_us, |key, due_at, ()| {
            let core = Self::kept(slots, key);
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
        let slots = &self.slots;
        self.wheel
            .drain(|key, ()| held.push(Self::kept(slots, key)));
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

    /// The reference the wheel entry `key` kept, taken back from the entry.
    /// The entry is expired, removed or drained, so it owns the count no
    /// more.
    fn kept(slots: &Option<Arc<Slots<Core<R>>>>, key: Key) -> Counted<Core<R>> {
        let slots = slots
            .as_ref()
            .expect("a timer with entries knows the slots");
        // SAFETY: `update` filed the entry at the trigger's slot and kept a
        // strong count of the trigger with `Counted::into_raw`. The entry is
        // gone now, and its count goes to the handle made here. The trigger
        // came to `update` through the inbox, a hand-over that synchronizes,
        // after it was registered.
        unsafe { slots.counted(key.into_raw()) }
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
                let slots = self
                    .slots
                    .get_or_insert_with(|| core.runtime.ledger().slots());
                // The count comes back through this slot. So it must hold
                // this very trigger, not another runtime's trigger in a slot
                // of the same index. A panic here, before the entry is made,
                // beats handing the count to another trigger later.
                assert!(
                    slots.holds(slot, Counted::as_raw(&core)),
                    "a trigger's registry slot holds it"
                );
                self.wheel
                    .insert_at(slot, deadline, ())
                    .expect("a trigger's registry slot names no live wheel entry");
                // The reference's count moves into the entry.
                let _ = Counted::into_raw(core);
            }
            None => {
                if self.wheel.remove(key).is_some() {
                    self.let_go.push(Self::kept(&self.slots, key));
                }
                self.let_go.push(core);
            }
        }
    }
}

/// The entries' counts are kept with no handle, so a timer dropped with
/// entries left gives them back here, as a wheel of handles would drop them.
impl<R: Runtime> Drop for Timer<R> {
    fn drop(&mut self) {
        drop(self.drain());
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::core::tests::TestRuntime;
    use std::time::Duration;

    #[test]
    fn an_entry_gives_its_reference_back_when_due_and_when_drained() {
        let runtime = TestRuntime::new();
        let mut timer = Timer::new(0);
        let cores: Vec<_> = (0..3).map(|_| runtime.bind(|| None)).collect();
        for (core, ms) in cores.iter().zip([5, 7, 60_000]) {
            core.fire_after(Duration::from_millis(ms)).expect("open");
        }
        let stamps = std::mem::take(&mut *runtime.stamps.lock().unwrap());
        assert_eq!(stamps.len(), 3);
        for (core, stamp) in cores.iter().zip(stamps) {
            timer.take_in(core.clone(), stamp, 0);
        }
        assert_eq!(timer.len(), 3);
        assert!(
            timer.take_let_go().is_empty(),
            "each reference went into its entry"
        );
        let mut due = Vec::new();
        timer.turn(10_000, &mut Vec::new(), &mut due);
        assert_eq!(due.len(), 2);
        for core in &cores[..2] {
            assert!(due.iter().any(|d| Counted::ptr_eq(d, core)));
        }
        let held = timer.drain();
        assert_eq!(held.len(), 1);
        assert!(Counted::ptr_eq(&held[0], &cores[2]));
        assert_eq!(timer.len(), 0);
        let weak: Vec<_> = cores.iter().map(Counted::downgrade).collect();
        // Each reference came back once: a count kept is a trigger that
        // stays, and Miri finds one given back twice.
        drop((due, held, cores, timer));
        assert!(weak.iter().all(|weak| weak.upgrade().is_none()));
    }

    /// Files `core`'s latest request, handed over with its stamp.
    fn file(
        runtime: &TestRuntime,
        timer: &mut Timer<TestRuntime>,
        core: &Counted<Core<TestRuntime>>,
    ) {
        let stamp = runtime.stamps.lock().unwrap().pop().expect("handed over");
        timer.take_in(core.clone(), stamp, 0);
    }

    #[test]
    fn a_re_filed_entry_keeps_one_reference_and_a_removed_one_gives_it_back() {
        let runtime = TestRuntime::new();
        let mut timer = Timer::new(0);
        let core = runtime.bind(|| None);
        let weak = Counted::downgrade(&core);
        core.fire_after(Duration::from_millis(5)).expect("open");
        file(&runtime, &mut timer, &core);
        // Moved: the entry keeps its count, and the inbox's reference goes.
        core.fire_after(Duration::from_millis(9)).expect("open");
        file(&runtime, &mut timer, &core);
        assert_eq!(timer.take_let_go().len(), 1);
        assert_eq!(timer.len(), 1);
        let mut due = Vec::new();
        timer.turn(8_000, &mut Vec::new(), &mut due);
        assert!(due.is_empty(), "the entry moved to 9 ms");
        timer.turn(9_000, &mut Vec::new(), &mut due);
        assert_eq!(due.len(), 1);
        drop(due);
        // Removed: the request read is no deadline, so the entry's count
        // and the inbox's reference both go.
        core.fire_after(Duration::from_millis(20)).expect("open");
        file(&runtime, &mut timer, &core);
        core.fire_after(Duration::from_millis(30)).expect("open");
        core.suspend();
        let stamp = runtime.stamps.lock().unwrap().pop().expect("handed over");
        timer.take_in(core.clone(), stamp, 0);
        assert_eq!(timer.len(), 0);
        assert_eq!(timer.take_let_go().len(), 2);
        drop((core, timer));
        assert!(weak.upgrade().is_none(), "no count was kept");
    }

    #[test]
    #[should_panic(expected = "a trigger's registry slot holds it")]
    fn a_trigger_of_another_runtime_is_refused_before_its_entry_is_made() {
        // The timer learns the registry from the first trigger it files. A
        // trigger of another runtime with a slot of the same index would
        // have its count come back through the wrong trigger. The filing
        // refuses it, and the unwinding drops the timer, whose one entry
        // gives its own trigger back.
        let (first, second) = (TestRuntime::new(), TestRuntime::new());
        let mut timer = Timer::new(0);
        let ours = first.bind(|| None);
        let _neighbour = first.bind(|| None);
        let _theirs_first = second.bind(|| None);
        let theirs = second.bind(|| None);
        assert_eq!(ours.slot() + 1, theirs.slot());
        ours.fire_after(Duration::from_millis(5)).expect("open");
        file(&first, &mut timer, &ours);
        theirs.fire_after(Duration::from_millis(5)).expect("open");
        file(&second, &mut timer, &theirs);
    }

    #[test]
    fn a_timer_dropped_with_entries_gives_their_references_back() {
        let runtime = TestRuntime::new();
        let mut timer = Timer::new(0);
        let core = runtime.bind(|| None);
        core.fire_after(Duration::from_secs(1)).expect("open");
        let stamp = runtime.stamps.lock().unwrap().pop().expect("handed over");
        timer.take_in(core.clone(), stamp, 0);
        let weak = Counted::downgrade(&core);
        drop(core);
        assert!(weak.upgrade().is_some(), "the entry keeps the trigger");
        drop(timer);
        assert!(weak.upgrade().is_none(), "and gives it back when dropped");
    }
}
