//! The monitor's side of the pool: one look per tick at whether work waits
//! that no thread picks up (a stall), which starts a worker or turns a
//! free timer role itself; and when a quiet monitor may park.

use super::Limits;
use super::{Pool, State, Wakes, AWAKE};
use crate::core::{Core, Runtime};
use crate::scheduler::timer::{InboxItem, Timer, NEVER};
use crate::sync::{wait, wait_timeout, Arc, MutexGuard, Ordering};
use std::time::Duration;

/// What the monitor's look at the pool found.
pub(crate) enum Look<R: Runtime> {
    /// Nothing to do.
    Fine,
    /// Start a worker (already counted).
    Start,
    /// Only the free timer role was due, at two looks without progress:
    /// the monitor holds it now, to turn the wheel once with these inbox
    /// items and hand the result to [`Pool::monitor_turned`].
    Turn(Box<Timer<R>>, Vec<InboxItem<R>>),
}

/// Ticks without pending work or progress before the monitor parks.
const QUIET_TICKS: u32 = 200;

/// What the monitor remembers between two looks.
#[derive(Debug, Default)]
pub struct Watch {
    pending: bool,
    progress: u64,
    quiet: u32,
}

impl<R: Runtime> Pool<R> {
    /// Monitor side: one look at the pool at `now_us`: whether a worker
    /// must be started (it is already counted), or the role, to turn once
    /// (see [`Look::Turn`]).
    pub(crate) fn monitor_check(&self, watch: &mut Watch, limits: &Limits, now_us: u64) -> Look<R> {
        let mut state = self.lock();
        if state.closed {
            return Look::Fine;
        }
        let pending = state.pending(now_us);
        let stalled = pending && watch.pending && watch.progress == state.progress;
        watch.quiet = if pending || watch.progress != state.progress {
            0
        } else {
            watch.quiet.saturating_add(1)
        };
        watch.pending = pending;
        watch.progress = state.progress;
        if !pending {
            state.at_limit = false;
        }
        if !stalled {
            return Look::Fine;
        }
        if state.queue.is_empty() {
            if let Some(timer) = state.timer.take() {
                // Only the free role is due — maybe for a stale deadline (a
                // suspended or re-armed trigger's old wheel entry), which no
                // worker need be started for: the monitor turns the wheel
                // itself (a turn runs no user code) and judges by what that
                // queues.
                let items = state.take_inbox();
                // Relaxed: see the protocol in `inbox.rs`.
                self.sleep_until.store(AWAKE, Ordering::Relaxed);
                return Look::Turn(timer, items);
            }
        }
        let start = self.stalled(state, limits);
        watch.pending = false; // the next stall is judged afresh
        if start {
            Look::Start
        } else {
            Look::Fine
        }
    }

    /// Monitor side, after its turn of [`Look::Turn`] found `due` runs:
    /// puts the role back and queues them. Runs that were due while every
    /// worker was busy are a stall; returns whether a worker must be
    /// started (already counted). If the pool closed meanwhile, `due` is
    /// left for the caller to list.
    pub(crate) fn monitor_turned(
        &self,
        watch: &mut Watch,
        timer: Box<Timer<R>>,
        due: &mut Vec<Arc<Core<R>>>,
        limits: &Limits,
    ) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        state.timer_next = timer.next_wake();
        self.put_back(&mut state, timer);
        let queued = !due.is_empty();
        state.queue.extend(due.drain(..));
        // A worker may be parked with the role free (its holder put the
        // role back for a batch it thought quick, which blocked): it takes
        // the role ahead of the runs just queued (`successor`), as after a
        // release — not a run, which could block too and leave every later
        // deadline to the next stall — and, holding the role, hands the
        // runs on. Nothing stalled then.
        let deadlines = state.timer_next != NEVER || !state.inbox.is_empty();
        let mut wakes = Wakes::default();
        if (deadlines || queued) && state.wake_idle(&mut wakes) {
            state.successor = true;
        }
        if !queued || wakes.first.is_some() {
            // Nothing waited (a stale deadline), or a worker is on its way.
            drop(state);
            self.notify(wakes);
            return false;
        }
        watch.pending = false; // the next stall is judged afresh
        self.stalled(state, limits)
    }

    /// Work waits that no thread picks up: wakes a waiting thread if one
    /// was missed, else counts a worker to start (returns `true`), or a
    /// hit of the worker limit.
    fn stalled(&self, mut state: MutexGuard<'_, State<R>>, limits: &Limits) -> bool {
        let mut wakes = Wakes::default();
        let start = if state.wake_idle(&mut wakes) || state.wake_holder(&mut wakes) {
            false // a waiting thread was missed: wake it (never expected)
        } else if state.workers.current < limits.max {
            state.workers.current += 1;
            crate::metrics::workers(1.0);
            state.workers.peak = state.workers.peak.max(state.workers.current);
            true
        } else {
            if !std::mem::replace(&mut state.at_limit, true) {
                state.workers.limit_hits += 1;
                #[cfg(feature = "tracing")]
                tracing::warn!(
                    workers = state.workers.current,
                    "every worker is busy and the worker limit is reached: runs wait"
                );
            }
            false
        };
        drop(state);
        self.notify(wakes);
        start
    }

    /// Monitor side: waits one tick — or, after a quiet spell with no
    /// worker busy and no trigger on the stuck watch list
    /// (`watches_nothing`, called under the pool's lock: see
    /// [`unpark_monitor`](Self::unpark_monitor)), until a worker gets busy
    /// again. Returns `false` once the pool is closed.
    pub(crate) fn monitor_sleep(
        &self,
        watch: &mut Watch,
        tick: Duration,
        watches_nothing: impl FnOnce() -> bool,
    ) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        // An async iteration occupies no worker: with a watched trigger,
        // the monitor never parks, or a hung iteration would go unreported.
        if watch.quiet >= QUIET_TICKS && state.busy() == 0 && watches_nothing() {
            state.monitor_parked = true;
            while state.monitor_parked && !state.closed {
                state = wait(&self.monitor_bed, state);
            }
            watch.quiet = 0;
        } else {
            state = wait_timeout(&self.monitor_bed, &self.state, state, tick);
        }
        !state.closed
    }

    /// A trigger joined the stuck watch list: a parked monitor must watch.
    pub(crate) fn unpark_monitor(&self) {
        let mut state = self.lock();
        let mut wakes = Wakes::default();
        state.note_activity(&mut wakes);
        drop(state);
        self.notify(wakes);
    }
}
