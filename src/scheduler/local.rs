//! A hand-polled executor: spawned jobs wait in a list and are polled, one
//! poll at a time, by whoever calls [`LocalJobs::poll_one`] — only once
//! woken. The virtual scheduler polls the async iterations of its triggers
//! with it (on the thread calling `advance`), and the loom harness lets
//! its model threads poll with it (so a lost wake-up leaves a job behind
//! for the model to find).
//!
//! A job's "woken" mark is a bool under its own lock, not an atomic: a wake
//! must happen-before the poll it causes (what the waking thread wrote is
//! seen by the future), and the lock gives exactly that with no ordering
//! to argue. Polls and drops run outside the list's lock, so a job may
//! spawn, wake or drop others.

use crate::async_task::{Job, Spawn};
use crate::sync::{lock, Arc, Mutex};
use std::task::{Context, Wake, Waker};

/// The jobs spawned and not completed, each with its "woken" mark.
#[derive(Default)]
pub(crate) struct LocalJobs {
    list: Mutex<Vec<(Job, Arc<Mark>)>>,
}

/// Whether a job was woken since its last poll; its waker.
struct Mark(Mutex<bool>);

impl Wake for Mark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        *lock(&self.0) = true;
    }
}

impl Spawn for LocalJobs {
    fn spawn(&self, job: Job) {
        lock(&self.list).push((job, Arc::new(Mark(Mutex::new(true)))));
    }
}

impl LocalJobs {
    /// Polls one woken job once, if there is one (a completed job is
    /// dropped, a pending one stays); returns whether it polled. Jobs are
    /// taken in spawn order.
    pub(crate) fn poll_one(&self) -> bool {
        let taken = {
            let mut list = lock(&self.list);
            let index = list
                .iter()
                .position(|(_, mark)| std::mem::take(&mut *lock(&mark.0)));
            index.map(|index| list.remove(index))
        };
        let Some((mut job, mark)) = taken else {
            return false;
        };
        let waker = Waker::from(Arc::clone(&mark));
        if job
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending()
        {
            lock(&self.list).push((job, mark));
        }
        true
    }

    /// Whether some job is woken (would be polled by `poll_one`).
    pub(crate) fn any_woken(&self) -> bool {
        lock(&self.list).iter().any(|(_, mark)| *lock(&mark.0))
    }

    /// Jobs not completed yet (woken or not).
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn pending(&self) -> usize {
        lock(&self.list).len()
    }

    /// Drops every job not completed (each async iteration among them ends
    /// as cancelled), outside the list's lock; returns how many.
    pub(crate) fn drop_all(&self) -> usize {
        let jobs = std::mem::take(&mut *lock(&self.list));
        let dropped = jobs.len();
        drop(jobs);
        dropped
    }
}
