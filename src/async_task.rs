//! The async vocabulary of the crate.
//!
//! A [`TaskFuture`] is what an async trigger's task returns per iteration. A [`Spawn`]
//! executor is where its iterations run. The [`CancelSlot`] is how `shutdown_now` wakes
//! an iteration in flight. These are plain types. The core drives the iterations
//! themselves, in `core/iteration.rs`.

use crate::sync::{lock, Arc, Mutex};
use std::future::Future;
use std::pin::Pin;
use std::task::Waker;
use std::time::Duration;

/// The future of one iteration, as the task returned it.
pub(crate) type TaskFuture = Pin<Box<dyn Future<Output = Option<Duration>> + Send>>;

/// An iteration ready to be polled by an executor.
pub(crate) type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Starts iterations on some executor.
pub(crate) trait Spawn: Send + Sync {
    /// Hands `job` to the executor. An executor that shut down may drop it unpolled. The
    /// iteration then ends as cancelled.
    fn spawn(&self, job: Job);
}

/// A task that returns a future per iteration.
pub(crate) trait AsyncTask: Send + 'static {
    fn start(&mut self) -> TaskFuture;
}

impl<F, Fut> AsyncTask for F
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Option<Duration>> + Send + 'static,
{
    fn start(&mut self) -> TaskFuture {
        Box::pin(self())
    }
}

/// What the RUNNING holder of an async trigger touches, which is the task.
pub(crate) struct AsyncBody<A> {
    pub(crate) task: A,
}

/// What an async trigger shares beyond the RUNNING holder.
///
/// That is its executor, where firers spawn dispatches, and the waker of its iteration in
/// flight, for `shutdown_now`. The module docs say more.
pub(crate) struct CancelSlot {
    waker: Mutex<Option<Waker>>,
    pub(crate) spawner: Arc<dyn Spawn>,
}

impl CancelSlot {
    pub(crate) fn new(spawner: Arc<dyn Spawn>) -> Self {
        Self {
            waker: Mutex::new(None),
            spawner,
        }
    }
}

impl CancelSlot {
    /// A poll leaves its waker here. Returns whether `shutdown_now` was called.
    ///
    /// The flag is read under the lock, as the module docs describe.
    pub(crate) fn register(&self, waker: &Waker, is_cancelled: impl FnOnce() -> bool) -> bool {
        let mut slot = lock(&self.waker);
        match slot.as_ref() {
            Some(old) if old.will_wake(waker) => {}
            _ => *slot = Some(waker.clone()),
        }
        is_cancelled()
    }

    /// Called by `shutdown_now` after it sets the flag. Wakes the iteration in flight, if
    /// any, so it sees the flag.
    pub(crate) fn wake(&self) {
        let waker = lock(&self.waker).take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// The iteration ended, so this forgets its waker.
    pub(crate) fn clear(&self) {
        lock(&self.waker).take();
    }
}

/// Tokio as the executor. Iterations are spawned on a runtime's handle.
#[cfg(feature = "tokio")]
impl Spawn for tokio::runtime::Handle {
    fn spawn(&self, job: Job) {
        // The JoinHandle is not needed, because the iteration reports its own end.
        drop(tokio::runtime::Handle::spawn(self, job));
    }
}
