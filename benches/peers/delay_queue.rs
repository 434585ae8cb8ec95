//! `tokio_util::time::DelayQueue`: one task owns every timer (idle scale
//! only: it has no per-trigger handle to fire from other threads).

use std::future::poll_fn;
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio_util::time::DelayQueue;

type Body = Box<dyn FnMut() -> Option<Duration> + Send>;

/// A multi-thread tokio runtime hosting one `DelayQueue` task.
pub struct DelayQueueTimers {
    /// The runtime; dropping it stops the queue's task.
    pub runtime: Runtime,
}

impl DelayQueueTimers {
    /// Name for tables.
    pub const NAME: &'static str = "tokio-util DelayQueue";

    /// A runtime with `workers` worker threads.
    pub fn start(workers: usize) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_time()
            .build()
            .expect("runtime");
        Self { runtime }
    }

    /// Spawns the task that owns every timer: `bodies[i]` first runs after
    /// `first(i)`, then after each delay it returns (`None` drops it).
    pub fn spawn(&self, bodies: Vec<Body>, first: impl Fn(usize) -> Duration + Send + 'static) {
        self.spawn_then(bodies, first, || {});
    }

    /// [`spawn`](Self::spawn), calling `inserted` once every timer is in
    /// the queue.
    pub fn spawn_then(
        &self,
        mut bodies: Vec<Body>,
        first: impl Fn(usize) -> Duration + Send + 'static,
        inserted: impl FnOnce() + Send + 'static,
    ) {
        self.runtime.spawn(async move {
            let mut queue = DelayQueue::with_capacity(bodies.len());
            for i in 0..bodies.len() {
                queue.insert(i, first(i));
            }
            inserted();
            while let Some(expired) = poll_fn(|cx| queue.poll_expired(cx)).await {
                let i = expired.into_inner();
                if let Some(delay) = bodies[i]() {
                    queue.insert(i, delay);
                }
            }
        });
    }
}
