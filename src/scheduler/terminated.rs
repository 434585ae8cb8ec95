//! Shutdown as futures, in [`Scheduler::await_termination_async`] and the `*_async`
//! shutdowns. They wait for the scheduler's threads and async iterations in
//! flight without blocking the thread that polls them. So on a
//! single-threaded runtime, an async iteration in flight can finish on the
//! very thread that awaits the shutdown.
//!
//! The wake-up works like this. A waiter registers its waker, *then* reads the
//! live count, both under the `alive` lock. Every decrement to zero takes
//! the wakers under that lock. So a waiter either sees zero or is woken.

use super::shared::Shared;
use super::Scheduler;
use crate::shutdown::ShutdownReport;
use crate::sync::{lock, Arc};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The future [`Scheduler::await_termination_async`] returns. Its waker sits in the list
/// under its own id while it waits. It leaves the list when the future is
/// dropped unfinished, so a timed-out wait leaves nothing behind.
struct Terminated {
    shared: Arc<Shared>,
    /// The id its waker is listed under, once it waited.
    id: Option<u64>,
}

impl Future for Terminated {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let shared = Arc::clone(&self.shared);
        let alive = lock(&shared.alive);
        if *alive == 0 {
            return Poll::Ready(());
        }
        let mut waiting = lock(&shared.termination_wakers);
        let id = *self.id.get_or_insert_with(|| {
            waiting.next_id += 1;
            waiting.next_id
        });
        match waiting.wakers.iter_mut().find(|(listed, _)| *listed == id) {
            Some((_, waker)) => waker.clone_from(cx.waker()),
            None => waiting.wakers.push((id, cx.waker().clone())),
        }
        drop(waiting);
        drop(alive);
        Poll::Pending
    }
}

impl Drop for Terminated {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            lock(&self.shared.termination_wakers)
                .wakers
                .retain(|(listed, _)| *listed != id);
        }
    }
}

impl Scheduler {
    /// Resolves once every thread of the scheduler has exited and every
    /// async iteration has ended. That happens after a shutdown. Before
    /// one, a real scheduler's threads are alive, so it waits. A virtual
    /// scheduler has no threads, so it resolves at once. The exception is
    /// an async iteration in flight. That iteration ends only as virtual
    /// time moves on, or when its executor drops it.
    ///
    /// This is the async [`await_termination`](Self::await_termination). It
    /// never blocks the thread that polls it, and works on any executor.
    /// Bound the wait with the executor's timeout, such as
    /// `tokio::time::timeout`. A future dropped unfinished leaves nothing
    /// behind.
    ///
    /// Do not await it from inside one of the scheduler's own tasks. The
    /// calling iteration counts as alive, so it would wait for itself. The
    /// blocking `await_termination` leaves the calling worker out.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "tokio")] {
    /// use circulation_trigger::Scheduler;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::new();
    /// scheduler.shutdown();
    /// scheduler.await_termination_async().await;
    /// assert!(scheduler.await_termination(std::time::Duration::ZERO));
    /// # });
    /// # }
    /// ```
    pub fn await_termination_async(&self) -> impl Future<Output = ()> + Send + 'static {
        Terminated {
            shared: Arc::clone(&self.shared),
            id: None,
        }
    }

    /// [`shutdown`](Self::shutdown), then a wait as a future for the
    /// iterations in flight to finish and every thread to exit. It returns
    /// the report. A tokio service needs no `spawn_blocking` for it. An
    /// async iteration in flight finishes even on a single-threaded
    /// runtime. The wait has no limit, so wrap it in a timeout to bound it.
    /// The report is then [`shutdown_report`](Self::shutdown_report). Do
    /// not await it from inside one of the scheduler's own tasks, for the
    /// reason [`await_termination_async`](Self::await_termination_async) gives.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[cfg(feature = "tokio")] {
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::new();
    /// let trigger = Trigger::builder(&scheduler).name("hourly").bind(|| None);
    /// trigger.fire_after(Duration::from_secs(3600)).unwrap();
    /// let report = scheduler.shutdown_async().await;
    /// assert_eq!(report.discarded()[0].trigger(), Some("hourly"));
    /// # });
    /// # }
    /// ```
    ///
    /// A Tokio service stops on Ctrl-C, and prints what was cut short.
    ///
    /// ```no_run
    /// # #[cfg(feature = "tokio")] {
    /// use circulation_trigger::Scheduler;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::new();
    /// // … bind the service's refreshers and triggers …
    /// tokio::signal::ctrl_c().await.expect("a signal handler");
    /// println!("{}", scheduler.shutdown_async().await);
    /// # });
    /// # }
    /// ```
    pub async fn shutdown_async(&self) -> ShutdownReport {
        self.shutdown();
        self.await_termination_async().await;
        self.shutdown_report().unwrap_or_default()
    }

    /// [`shutdown_now`](Self::shutdown_now) as a future. Iterations in
    /// flight are told to stop, and [`is_cancelled`](crate::is_cancelled)
    /// turns `true` for them. An async one is dropped at its next `.await`.
    /// Then it waits for them and every thread, without blocking, and
    /// returns the report. The wait has no limit, because a sync task that
    /// never looks at `cancelled` is waited for. Wrap it in a timeout to
    /// bound it.
    pub async fn shutdown_now_async(&self) -> ShutdownReport {
        self.cancel_now();
        self.await_termination_async().await;
        self.shutdown_report().unwrap_or_default()
    }
}
