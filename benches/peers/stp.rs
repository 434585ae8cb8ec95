//! `scheduled-thread-pool` with the "cancel + reschedule + body mutex"
//! emulation a typical user writes for fire / fire_after / suspend.
//!
//! Each trigger keeps its pending job's `JobHandle` in a `Mutex`; every
//! request cancels it and schedules a new one-shot job, and a `Mutex` around
//! the body keeps runs from overlapping. A cancelled job stays in the pool's
//! heap (with its allocations) until its old deadline pops.

use super::{Fire, Peer};
use scheduled_thread_pool::{JobHandle, OnPoolDropBehavior, ScheduledThreadPool};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

type Body = Box<dyn FnMut() -> Option<Duration> + Send>;

/// A `ScheduledThreadPool` with `workers` threads.
pub struct Stp {
    pool: Arc<ScheduledThreadPool>,
}

/// One emulated trigger.
#[derive(Clone)]
pub struct StpTrigger {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Arc<ScheduledThreadPool>,
    pending: Mutex<Option<JobHandle>>,
    body: Mutex<Body>,
}

impl Inner {
    /// Cancel the pending job, schedule a new one after `delay`.
    fn schedule(self: &Arc<Self>, delay: Duration) {
        let weak: Weak<Inner> = Arc::downgrade(self);
        let mut pending = self.pending.lock().unwrap();
        if let Some(old) = pending.take() {
            old.cancel();
        }
        *pending = Some(self.pool.execute_after(delay, move || {
            if let Some(inner) = weak.upgrade() {
                inner.run();
            }
        }));
    }

    /// One run: the body under its mutex, then the periodic re-arm.
    fn run(self: &Arc<Self>) {
        let next = (self.body.lock().unwrap())();
        if let Some(delay) = next {
            self.schedule(delay);
        }
    }
}

impl Peer for Stp {
    const NAME: &'static str = "scheduled-thread-pool";
    type Trigger = StpTrigger;

    fn start(workers: usize) -> Self {
        let pool = ScheduledThreadPool::builder()
            .num_threads(workers)
            .on_drop_behavior(OnPoolDropBehavior::DiscardPendingScheduled)
            .build();
        Self {
            pool: Arc::new(pool),
        }
    }

    fn bind<F>(&self, task: F) -> StpTrigger
    where
        F: FnMut() -> Option<Duration> + Send + 'static,
    {
        StpTrigger {
            inner: Arc::new(Inner {
                pool: self.pool.clone(),
                pending: Mutex::new(None),
                body: Mutex::new(Box::new(task)),
            }),
        }
    }
}

impl Fire for StpTrigger {
    fn fire(&self) {
        self.inner.schedule(Duration::ZERO);
    }

    fn fire_after(&self, delay: Duration) {
        self.inner.schedule(delay);
    }

    fn suspend(&self) {
        if let Some(old) = self.inner.pending.lock().unwrap().take() {
            old.cancel();
        }
    }
}
