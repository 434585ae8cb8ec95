//! A hand-driven scheduler core with no threads. Whoever holds the driver
//! plays the timer and the workers, and moves a manual clock. The public
//! [`VirtualScheduler`](crate::testing::VirtualScheduler) and the loom harness are
//! both built on it. So they run exactly the threaded scheduler's code
//! paths, minus the sleeping. Those paths are `Core`, the pool's queue and
//! inbox, and the timer. The driver holds the timer role for good, and its
//! pool has none.

use super::shared::{ManualTimer, Shared};
use super::timer::{InboxItem, Timer};
use crate::clock::ManualTime;
use crate::core::Runtime;
use crate::sync::{lock, Arc, Mutex};

/// The timer and the clock of a thread-less scheduler.
pub(crate) struct Driver {
    pub(crate) time: Arc<ManualTime>,
    /// Shared with the runtime as `Shared::manual_timer`. There a trigger's
    /// last handle lets go of its entry at once.
    timer: ManualTimer,
    /// Triggers a blocking wait took from the inbox, for the next turn.
    #[cfg_attr(not(loom), allow(dead_code))]
    parked: Mutex<Vec<InboxItem<Shared>>>,
}

impl Driver {
    pub(crate) fn new(time: Arc<ManualTime>) -> Self {
        Self {
            time,
            timer: Arc::new(Mutex::new(Timer::new(0))),
            parked: Mutex::default(),
        }
    }

    /// Makes this driver's timer `shared`'s for good. The runtime then lets
    /// go of a trigger's entry at once when its last handle goes, through
    /// `Shared::manual_timer`. It is not for a pool whose workers hold the
    /// role, as in the loom models of the pool.
    pub(crate) fn hold_role_of(&self, shared: &Shared) {
        let set = shared.manual_timer.set(Arc::clone(&self.timer));
        debug_assert!(set.is_ok(), "one driver per scheduler");
    }

    /// Plays a worker. It runs one queued dispatch and returns whether there was one.
    pub(crate) fn run_one(&self, shared: &Shared) -> bool {
        match shared.pool.try_pop() {
            Some(core) => {
                if let Some(push) = core.dispatch() {
                    push.deliver(&core);
                }
                true
            }
            None => false,
        }
    }

    /// Whether a dispatch is queued, due at once.
    pub(crate) fn queued(&self, shared: &Shared) -> bool {
        shared.pool.queued() > 0
    }

    /// Plays the timer at `now_us`. It moves the clock there, never back,
    /// re-reads the inbox, and queues every run due.
    pub(crate) fn turn(&self, shared: &Shared, now_us: u64) {
        self.time.set_us(now_us);
        let mut items = std::mem::take(&mut *lock(&self.parked));
        items.extend(shared.pool.take_inbox());
        let mut due = Vec::new();
        let let_go = {
            let mut timer = lock(&self.timer);
            let _ = timer.turn(now_us, &mut items, &mut due);
            // Shutdown may have emptied the wheel before this turn filed
            // the items it had taken. So empty it again, as the shutdown
            // did through `Shared::manual_timer`.
            let emptied = shared.is_closed().then(|| timer.drain());
            (timer.take_let_go(), emptied)
        };
        // Outside the timer's lock, because a task's destructor may call in again.
        drop(let_go);
        // If the scheduler closed under us, what was due is dropped here,
        // outside the locks. It was marked due before the shutdown scan
        // closed its word, so the scan lists it. `Request::close` holds
        // that argument.
        if !due.is_empty() && !shared.pool.push_batch(&mut due) {
            drop(due);
        }
    }

    /// The time the timer next has work at, or `u64::MAX` for never.
    pub(crate) fn next_wake(&self) -> u64 {
        lock(&self.timer).next_wake()
    }

    /// Number of wheel entries.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn timer_entries(&self) -> usize {
        lock(&self.timer).len()
    }

    /// Plays the timer going to sleep toward `until_us` through the real
    /// wake-up protocol. It has no timeout, for the loom models.
    #[cfg(loom)]
    pub(crate) fn wait(&self, shared: &Shared, until_us: u64) {
        let items = shared.pool.wait_as_holder(until_us);
        lock(&self.parked).extend(items);
    }

    /// Runs every iteration due up to `target_us`, in deadline order,
    /// moving the clock from deadline to deadline. Runs at one instant go
    /// in the order they became due. Returns the number of dispatches
    /// processed.
    pub(crate) fn advance_to(&self, shared: &Shared, target_us: u64) -> usize {
        let previous = shared.enter_context();
        let dispatched = self.advance_inner(shared, target_us);
        crate::context::leave_thread(previous);
        dispatched
    }

    fn advance_inner(&self, shared: &Shared, target_us: u64) -> usize {
        /// Runs at one instant before concluding a task loops on zero delays.
        const SPIN_LIMIT: usize = 1_000_000;
        let mut dispatched = 0;
        let mut at_this_instant = 0;
        let mut now = self.time.now_us().max(lock(&self.timer).elapsed());
        loop {
            self.turn(shared, now);
            if self.run_one(shared) {
                dispatched += 1;
                at_this_instant += 1;
                assert!(
                    at_this_instant < SPIN_LIMIT,
                    "virtual time cannot advance: {SPIN_LIMIT} runs at {now} µs \
                     (a task keeps returning Some(Duration::ZERO)?)"
                );
                continue;
            }
            at_this_instant = 0;
            let next = self.next_wake();
            if next > target_us {
                break;
            }
            now = now.max(next);
        }
        self.turn(shared, target_us.max(now));
        dispatched
    }
}
