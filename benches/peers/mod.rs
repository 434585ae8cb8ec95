//! The implementations compared by the benches and by `examples/bench_report`:
//! our crate and the peers a user would otherwise reach for, all behind one
//! small interface (bind a task, then `fire` / `fire_after` / `suspend`).
//!
//! Shared by `#[path]`: the benches and the report include this module, so
//! every number comes from the same peer code.

#[cfg(feature = "tokio")]
pub mod async_loop;
pub mod delay_queue;
pub mod heap_timer;
pub mod ours;
pub mod stp;
pub mod tokio_watch;

use std::time::Duration;

/// A trigger handle: the three operations every scenario drives.
pub trait Fire: Clone + Send + Sync + 'static {
    /// Run the task as soon as possible (latest request wins).
    fn fire(&self);
    /// Run the task once `delay` has passed (latest request wins).
    fn fire_after(&self, delay: Duration);
    /// Cancel whatever is pending.
    fn suspend(&self);
}

/// A scheduler that binds tasks to triggers; dropping it stops its threads.
pub trait Peer: Sized {
    /// Short name for tables and charts.
    const NAME: &'static str;
    /// Its trigger handle.
    type Trigger: Fire;
    /// Starts the scheduler with `workers` threads running tasks (peers
    /// with a fixed thread model ignore it).
    fn start(workers: usize) -> Self;
    /// Binds `task` (it returns the delay to its next run, or `None`).
    fn bind<F>(&self, task: F) -> Self::Trigger
    where
        F: FnMut() -> Option<Duration> + Send + 'static;
}
