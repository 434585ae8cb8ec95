//! A thread-less scheduler for the loom models: the model's threads play
//! the workers and the timer by calling [`Harness::run_one`] and
//! [`Harness::timer_turn`], and move time by hand. Only under `--cfg loom`.
//!
//! Everything a model touches here is the crate's real code: the same
//! `Core`, state word, request word, run queue, inbox and timer that the
//! threaded scheduler runs.

use crate::clock::{Clock, ManualTime};
use crate::scheduler::manual::Driver;
use crate::scheduler::pool::{Limits, Pool};
use crate::scheduler::{Scheduler, Shared};
use crate::sync::Arc;
use crate::{Snapshot, Task, Trigger};

pub use crate::state::{Enter, Exit, Reserve, State};

/// A scheduler whose threads are the model's own.
pub struct Harness {
    scheduler: Scheduler,
    driver: Driver,
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
        let limits = Limits {
            core: 0,
            max: 0,
            stall: std::time::Duration::from_millis(10),
            keep_alive: std::time::Duration::from_secs(10),
        };
        let shared = Shared::new(
            Clock::Manual(Arc::clone(&time)),
            1,
            None,
            Pool::new(None),
            limits,
        );
        Self {
            scheduler: Scheduler::threadless(shared),
            driver: Driver::new(time),
        }
    }

    /// The scheduler to bind triggers to.
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    fn shared(&self) -> &Shared {
        &self.scheduler.shared
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
        self.driver.run_one(self.shared())
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
        self.driver.turn(self.shared(), now_us);
    }

    /// Plays the timer going to sleep toward `until_us` (`u64::MAX`: no
    /// deadline) through the real wake-up protocol. Loom cannot time out, so
    /// this returns only when there is work or a firer wakes the timer: a
    /// missed wake-up shows as a deadlock. The triggers it takes from the
    /// inbox are processed by the next [`timer_turn`](Self::timer_turn).
    pub fn timer_wait(&self, until_us: u64) {
        self.driver.wait(self.shared(), until_us);
    }

    /// Whether the timer is awake, or has been woken (as opposed to asleep
    /// toward its target).
    pub fn timer_awake(&self) -> bool {
        self.shared().pool.holder_awake()
    }

    /// Releases a timer blocked in [`timer_wait`](Self::timer_wait) (the
    /// model's stand-in for its timeout).
    pub fn release_timer(&self) {
        self.shared().pool.nudge();
    }

    /// The deadline (µs) of `trigger`'s live request, if it is a delayed one.
    pub fn live_deadline(&self, trigger: &Trigger) -> Option<u64> {
        let now = self.shared().clock.now_us();
        trigger.core().request().load().kind().deadline(now)
    }

    /// Whether `trigger` holds an armed request (due now, or at a time).
    pub fn is_armed(&self, trigger: &Trigger) -> bool {
        use crate::request::Kind;
        matches!(
            trigger.core().request().load().kind(),
            Kind::At { .. } | Kind::Due
        )
    }

    /// Number of dispatches waiting in the run queue.
    pub fn queued(&self) -> usize {
        self.shared().pool.queued()
    }

    /// The time the timer would next wake at (`u64::MAX`: never).
    pub fn next_wake(&self) -> u64 {
        self.driver.next_wake()
    }

    /// Number of wheel entries.
    pub fn timer_entries(&self) -> usize {
        self.driver.timer_entries()
    }

    /// The state word of `trigger`.
    pub fn snapshot(trigger: &Trigger) -> Snapshot {
        trigger.snapshot()
    }
}
