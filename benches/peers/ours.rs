//! Our crate, `circulation_trigger`, behind the common [`Peer`] interface:
//! with its default 1 µs tick, and with a 1 ms tick (tokio's resolution),
//! which batches the timer's wake-ups.

use super::{Fire, Peer};
use circulation_trigger::{Scheduler, Trigger};
use std::time::Duration;

/// A `circulation_trigger::Scheduler` (timer thread + `workers` workers).
pub struct Ours {
    /// The scheduler; dropping it shuts down and joins its threads.
    pub scheduler: Scheduler,
}

impl Peer for Ours {
    const NAME: &'static str = "circulation-trigger";
    type Trigger = Trigger;

    fn start(workers: usize) -> Self {
        let scheduler = Scheduler::builder()
            .workers(workers)
            .build()
            .expect("scheduler");
        Self { scheduler }
    }

    fn bind<F>(&self, task: F) -> Trigger
    where
        F: FnMut() -> Option<Duration> + Send + 'static,
    {
        Trigger::bind(&self.scheduler, task)
    }
}

/// Our scheduler built with `tick(1 ms)`: deadlines round up to whole
/// milliseconds, like tokio's timer.
pub struct OursMillisTick {
    /// The scheduler; dropping it shuts down and joins its threads.
    pub scheduler: Scheduler,
}

impl Peer for OursMillisTick {
    const NAME: &'static str = "circulation-trigger, tick 1 ms";
    type Trigger = Trigger;

    fn start(workers: usize) -> Self {
        let scheduler = Scheduler::builder()
            .workers(workers)
            .tick(Duration::from_millis(1))
            .build()
            .expect("scheduler");
        Self { scheduler }
    }

    fn bind<F>(&self, task: F) -> Trigger
    where
        F: FnMut() -> Option<Duration> + Send + 'static,
    {
        Trigger::bind(&self.scheduler, task)
    }
}

impl Fire for Trigger {
    #[inline]
    fn fire(&self) {
        Trigger::fire(self).expect("fire");
    }

    #[inline]
    fn fire_after(&self, delay: Duration) {
        Trigger::fire_after(self, delay).expect("fire_after");
    }

    #[inline]
    fn suspend(&self) {
        Trigger::suspend(self);
    }
}
