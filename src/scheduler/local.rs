//! A hand-polled executor. Spawned jobs wait in a list. Whoever calls
//! [`LocalJobs::poll_one`] polls them, one poll at a time, and only once
//! woken. The virtual scheduler polls the async iterations of its triggers
//! with it, on the thread calling `advance`. The loom harness lets its
//! model threads poll with it. So a lost wake-up leaves a job behind for
//! the model to find.
//!
//! A job's "woken" mark is a bool under its own lock, not an atomic. A wake
//! must happen-before the poll it causes, so the future sees what the
//! waking thread wrote. The lock gives exactly that, with no ordering to
//! argue. Polls and drops run outside the list's lock, so a job may spawn,
//! wake or drop others.
//!
//! A pending job is either parked on virtual time or waits on something
//! outside. A job is parked when its last poll registered a `VirtualClock`
//! sleep, which tells [`parked_on_virtual_time`] during the poll. Something
//! outside is I/O on a blocking pool, or a channel. The virtual scheduler
//! moves time only past the first kind. It waits in real time for the
//! second, in [`LocalJobs::wait_outside`]. So a fetch's I/O takes no
//! virtual time, whatever it takes in real time.

use crate::async_task::{Job, Spawn};
use crate::sync::{lock, Arc, Mutex};
use std::cell::Cell;
use std::task::{Context, Wake, Waker};
use std::time::{Duration, Instant};

/// The jobs spawned and not completed, each with its "woken" mark and
/// whether its last poll parked it on virtual time.
#[derive(Default)]
pub(crate) struct LocalJobs {
    list: Mutex<Vec<(Job, Arc<Mark>, bool)>>,
    /// Tells a thread waiting on a job woken from outside.
    wakes: std::sync::Arc<Wakes>,
}

/// The condition a thread waits on for the next wake, and its lock. It is a
/// std lock even under loom, because no model waits on it.
#[derive(Default)]
struct Wakes {
    lock: std::sync::Mutex<()>,
    changed: std::sync::Condvar,
}

impl Wakes {
    fn lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether a job was woken since its last poll. It is also the job's waker.
struct Mark(Mutex<bool>, std::sync::Arc<Wakes>);

impl Wake for Mark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        *lock(&self.0) = true;
        // Under the waiter's lock. So a waiter that looked before the mark
        // was set is already waiting when this notifies.
        drop(self.1.lock());
        self.1.changed.notify_all();
    }
}

impl Spawn for LocalJobs {
    fn spawn(&self, job: Job) {
        let mark = Arc::new(Mark(Mutex::new(true), std::sync::Arc::clone(&self.wakes)));
        lock(&self.list).push((job, mark, false));
    }
}

thread_local! {
    /// Set by a virtual sleep registering during the poll of a job.
    static PARKED: Cell<bool> = const { Cell::new(false) };
}

/// The future being polled on this thread waits on virtual time. A
/// `VirtualClock` sleep calls this as it registers.
pub(crate) fn parked_on_virtual_time() {
    PARKED.with(|parked| parked.set(true));
}

/// Runs `poll`, a poll of part of a future, and returns whether it parked
/// on virtual time. It leaves the mark as it found it. So a future that
/// waits on two things decides which of them mark it.
#[cfg(feature = "tokio")]
pub(crate) fn parks_on_virtual_time<R>(poll: impl FnOnce() -> R) -> (R, bool) {
    let was = PARKED.with(|parked| parked.replace(false));
    let polled = poll();
    (polled, PARKED.with(|parked| parked.replace(was)))
}

impl LocalJobs {
    /// Polls one woken job once, if there is one, and returns whether it
    /// polled. A completed job is dropped, and a pending one stays. Jobs
    /// are taken in spawn order.
    pub(crate) fn poll_one(&self) -> bool {
        let taken = {
            let mut list = lock(&self.list);
            let index = list
                .iter()
                .position(|(_, mark, _)| std::mem::take(&mut *lock(&mark.0)));
            index.map(|index| list.remove(index))
        };
        let Some((mut job, mark, _)) = taken else {
            return false;
        };
        let waker = Waker::from(Arc::clone(&mark));
        let was = PARKED.with(|parked| parked.replace(false));
        let polled = job.as_mut().poll(&mut Context::from_waker(&waker));
        // Restored, so a job polled inside another's poll leaves the outer
        // one's mark as it found it.
        let parked = PARKED.with(|parked| parked.replace(was));
        if polled.is_pending() {
            lock(&self.list).push((job, mark, parked));
        }
        true
    }

    /// Whether some job is woken, so that `poll_one` would poll it.
    pub(crate) fn any_woken(&self) -> bool {
        lock(&self.list).iter().any(|(_, mark, _)| *lock(&mark.0))
    }

    /// Waits, up to `patience` of real time, while some job is pending on
    /// something other than virtual time and none is woken. Returns whether
    /// such a job still waits when it gives up.
    pub(crate) fn wait_outside(&self, patience: Duration) -> bool {
        let deadline = Instant::now() + patience;
        let mut wakes = self.wakes.lock();
        loop {
            let outside = {
                let list = lock(&self.list);
                let woken = list.iter().any(|(_, mark, _)| *lock(&mark.0));
                !woken && list.iter().any(|&(_, _, parked)| !parked)
            };
            if !outside {
                return false;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            // A wake between the look and this wait takes the lock this
            // thread holds, so it notifies only once this thread waits.
            wakes = self
                .wakes
                .changed
                .wait_timeout(wakes, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }

    /// Jobs not completed yet, woken or not.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn pending(&self) -> usize {
        lock(&self.list).len()
    }

    /// Drops every job not completed, outside the list's lock, and returns
    /// how many. Each async iteration among them ends as cancelled.
    pub(crate) fn drop_all(&self) -> usize {
        let jobs = std::mem::take(&mut *lock(&self.list));
        let dropped = jobs.len();
        drop(jobs);
        dropped
    }
}
