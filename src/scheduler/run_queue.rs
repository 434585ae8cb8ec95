//! The worker run queue: a FIFO of triggers with a due request, each at
//! most once (the trigger's QUEUED flag), and the idle workers' bed.
//!
//! A plain `Mutex<VecDeque>`: pushes happen once per dispatch, not once per
//! fire (fires coalesce on the flag), so the lock is not on the hot path.

use crate::core::Core;
use crate::sync::{lock, wait, Condvar, Mutex, Weak};
use std::collections::VecDeque;

#[derive(Default)]
struct Inner {
    queue: VecDeque<Weak<Core>>,
    idle: usize,
    closed: bool,
}

/// FIFO of triggers waiting for a worker.
#[derive(Default)]
pub(crate) struct RunQueue {
    inner: Mutex<Inner>,
    ready: Condvar,
}

impl RunQueue {
    /// Appends a trigger; returns `false` (and drops it) if the queue is
    /// closed (shut down).
    pub(crate) fn push(&self, core: Weak<Core>) -> bool {
        let mut inner = lock(&self.inner);
        if inner.closed {
            return false;
        }
        inner.queue.push_back(core);
        let wake = inner.idle > 0;
        drop(inner);
        if wake {
            self.ready.notify_one();
        }
        true
    }

    /// Appends a batch (the timer's due runs) under one lock, waking as many
    /// idle workers as there are runs; returns `false` (dropping them) if
    /// the queue is closed.
    pub(crate) fn push_batch(&self, cores: &mut Vec<Weak<Core>>) -> bool {
        let mut inner = lock(&self.inner);
        if inner.closed {
            return false;
        }
        let wake = inner.idle.min(cores.len());
        inner.queue.extend(cores.drain(..));
        drop(inner);
        for _ in 0..wake {
            self.ready.notify_one();
        }
        true
    }

    /// Takes the next trigger, waiting for one; `None` once closed.
    pub(crate) fn pop_blocking(&self) -> Option<Weak<Core>> {
        let mut inner = lock(&self.inner);
        loop {
            if inner.closed {
                return None;
            }
            if let Some(core) = inner.queue.pop_front() {
                return Some(core);
            }
            inner.idle += 1;
            inner = wait(&self.ready, inner);
            inner.idle -= 1;
        }
    }

    /// Takes the next trigger without waiting.
    pub(crate) fn try_pop(&self) -> Option<Weak<Core>> {
        lock(&self.inner).queue.pop_front()
    }

    /// Number of queued dispatches.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn len(&self) -> usize {
        lock(&self.inner).queue.len()
    }

    /// Closes the queue, dropping queued dispatches (the shutdown scan
    /// reports their requests); wakes every worker.
    pub(crate) fn close(&self) {
        let mut inner = lock(&self.inner);
        inner.closed = true;
        inner.queue.clear();
        drop(inner);
        self.ready.notify_all();
    }
}
