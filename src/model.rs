//! A thread-less scheduler for the loom models: the model's threads play
//! the workers and the timer by calling [`Harness::run_one`] and
//! [`Harness::timer_turn`], and move time by hand. Only under `--cfg loom`.
//!
//! Everything a model touches here is the crate's real code: the same
//! `Core`, state word, request word, run queue, inbox and timer that the
//! threaded scheduler runs.

use crate::clock::{Clock, ManualTime};
use crate::scheduler::{Scheduler, Timer};
use crate::sync::{lock, Arc, Mutex};
use crate::{Snapshot, Task, Trigger};

/// A scheduler whose threads are the model's own.
pub struct Harness {
    scheduler: Scheduler,
    time: Arc<ManualTime>,
    timer: Mutex<Timer>,
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
        let items = self.scheduler.shared.inbox.drain();
        lock(&self.timer).turn(now_us, items);
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
