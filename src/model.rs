//! A thread-less scheduler for the loom models: the model's threads play
//! the workers and the timer by calling [`Harness::run_one`] and
//! [`Harness::timer_turn`], and move time by hand. Only under `--cfg loom`.
//!
//! Everything a model touches here is the crate's real code: the same
//! `Core`, state word, request word, run queue, inbox and timer that the
//! threaded scheduler runs.

use crate::clock::{Clock, ManualTime};
use crate::core::Core;
use crate::scheduler::{Scheduler, Timer};
use crate::sync::{lock, Arc, Mutex, Weak};
use crate::{Snapshot, Task, Trigger};

pub use crate::state::{Enter, Exit, State};

/// A scheduler whose threads are the model's own.
pub struct Harness {
    scheduler: Scheduler,
    time: Arc<ManualTime>,
    timer: Mutex<Timer>,
    /// Triggers a `timer_wait` took from the inbox, for the next turn.
    parked: Mutex<Vec<Weak<Core>>>,
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

impl Harness {
    /// A harness at time 0 µs.
    pub fn new() -> Self {
        let time = Arc::new(ManualTime::default());
        Self {
            scheduler: Scheduler::manual(Clock::Manual(Arc::clone(&time))),
            time,
            timer: Mutex::new(Timer::new(0)),
            parked: Mutex::default(),
        }
    }

    /// The scheduler to bind triggers to.
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// Binds a task whose version starts at `version`.
    pub fn trigger(&self, version: u32, task: impl Task) -> Trigger {
        Trigger::builder(&self.scheduler)
            .start_version(version)
            .bind(task)
    }

    /// Plays a worker: runs one queued dispatch, if any; returns whether
    /// there was one.
    pub fn run_one(&self) -> bool {
        match self.scheduler.shared.run_queue.try_pop() {
            Some(core) => {
                if let Some(core) = core.upgrade() {
                    core.dispatch();
                }
                true
            }
            None => false,
        }
    }

    /// Runs queued dispatches until the queue is empty; returns how many.
    pub fn run_all(&self) -> usize {
        let mut count = 0;
        while self.run_one() {
            count += 1;
        }
        count
    }

    /// Plays the timer: moves time to `now_us`, drains the inbox and queues
    /// every due run.
    pub fn timer_turn(&self, now_us: u64) {
        self.time.set_us(now_us);
        let mut items = std::mem::take(&mut *lock(&self.parked));
        items.extend(self.scheduler.shared.inbox.drain());
        lock(&self.timer).turn(now_us, items);
    }

    /// Plays the timer going to sleep toward `until_us` (`u64::MAX`: no
    /// deadline) through the real wake-up protocol. Loom cannot time out, so
    /// this returns only when there is work or a firer wakes the timer: a
    /// missed wake-up shows as a deadlock. Returns the triggers to re-read,
    /// which the next [`timer_turn`](Self::timer_turn) processes.
    pub fn timer_wait(&self, until_us: u64) {
        let items = self
            .scheduler
            .shared
            .inbox
            .wait(until_us, None)
            .unwrap_or_default();
        lock(&self.parked).extend(items);
    }

    /// Whether the timer is awake, or has been woken (as opposed to asleep
    /// toward its target).
    pub fn timer_awake(&self) -> bool {
        self.scheduler.shared.inbox.is_awake()
    }

    /// Releases a timer blocked in [`timer_wait`](Self::timer_wait) (the
    /// model's stand-in for its timeout).
    pub fn release_timer(&self) {
        self.scheduler.shared.inbox.nudge();
    }

    /// The deadline (µs) of `trigger`'s live request, if it is a delayed one.
    pub fn live_deadline(&self, trigger: &Trigger) -> Option<u64> {
        let now = self.scheduler.shared.clock.now_us();
        trigger.core().request().load().kind().deadline(now)
    }

    /// Number of dispatches waiting in the run queue.
    pub fn queued(&self) -> usize {
        self.scheduler.shared.run_queue.len()
    }

    /// The time the timer would next wake at (`u64::MAX`: never).
    pub fn next_wake(&self) -> u64 {
        lock(&self.timer).next_wake()
    }

    /// Number of wheel entries.
    pub fn timer_entries(&self) -> usize {
        lock(&self.timer).len()
    }

    /// The state word of `trigger`.
    pub fn snapshot(trigger: &Trigger) -> Snapshot {
        trigger.snapshot()
    }
}
