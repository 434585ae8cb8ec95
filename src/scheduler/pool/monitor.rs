//! The monitor's side of the pool. Each tick the monitor looks once at
//! whether work waits that no thread picks up. Such a stall starts a
//! worker, or the monitor turns a free timer role itself. This side also
//! decides when a quiet monitor may park.

use super::Limits;
use super::{Pool, State, Wakes, AWAKE};
use crate::clock::Clock;
use crate::core::Counted;
use crate::core::{Core, Runtime};
use crate::scheduler::timer::{InboxItem, Timer, NEVER};
use crate::sync::{wait, wait_timeout, MutexGuard, Ordering};
use std::time::Duration;

/// What the monitor's look at the pool found.
pub(crate) enum Look<R: Runtime> {
    /// Nothing to do.
    Fine,
    /// Start a worker, which is already counted.
    Start,
    /// Only the free timer role was due, at two looks without progress. The
    /// monitor holds it now. It turns the wheel once with these inbox items
    /// and hands the result to [`Pool::monitor_turned`].
    Turn(Box<Timer<R>>, Vec<InboxItem<R>>),
}

/// Looks in a row that found nothing pending and no thread busy before the
/// monitor parks in [`Pool::monitor_sleep`].
const QUIET_LOOKS: u32 = 2;

/// What the monitor remembers between two looks.
#[derive(Debug, Default)]
pub struct Watch {
    pending: bool,
    progress: u64,
    quiet: u32,
}

impl<R: Runtime> Pool<R> {
    /// Monitor side, one look at the pool at `now_us`. It returns whether a
    /// worker must be started, already counted. Or it returns the role, to
    /// turn once as [`Look::Turn`] describes.
    pub(crate) fn monitor_check(&self, watch: &mut Watch, limits: &Limits, now_us: u64) -> Look<R> {
        let mut state = self.lock();
        if state.closed {
            return Look::Fine;
        }
        let pending = state.pending(now_us);
        let stalled = pending && watch.pending && watch.progress == state.progress;
        watch.quiet = if pending || state.busy() > 0 {
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
                // Only the free role is due, maybe for a stale deadline. A
                // stale deadline is a suspended or re-armed trigger's old
                // wheel entry. No worker need be started for it. So the
                // monitor turns the wheel itself, since a turn runs no user
                // code. It judges by what that turn queues.
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

    /// Monitor side, after its turn of [`Look::Turn`] found `due` runs. It
    /// puts the role back and queues them. Runs that were due while every
    /// worker was busy are a stall. Returns whether a worker must be
    /// started, already counted. If the pool closed meanwhile, `due` is
    /// left for the caller to list.
    pub(crate) fn monitor_turned(
        &self,
        watch: &mut Watch,
        timer: Box<Timer<R>>,
        due: &mut Vec<Counted<Core<R>>>,
        limits: &Limits,
    ) -> bool {
        let mut state = self.lock();
        if state.closed {
            // The wheel's references go outside the lock, as in `close`.
            drop(state);
            drop(timer);
            return false;
        }
        state.timer_next = timer.next_wake();
        self.put_back(&mut state, timer);
        let queued = !due.is_empty();
        state.queue.extend(due.drain(..));
        // A worker may be parked with the role free. Its holder put the
        // role back for a batch it thought quick, and the batch blocked.
        // That worker takes the role ahead of the runs just queued, as
        // `successor`, as after a release. It does not take a run, which
        // could block too and leave every later deadline to the next stall.
        // Holding the role, it hands the runs on. Nothing stalled then.
        let deadlines = state.timer_next != NEVER || !state.inbox.is_empty();
        let mut wakes = Wakes::default();
        if (deadlines || queued) && state.wake_idle(&mut wakes) {
            state.successor = true;
        }
        if !queued || wakes.first.is_some() {
            // Nothing waited, as for a stale deadline, or a worker is on its way.
            drop(state);
            self.notify(wakes);
            return false;
        }
        watch.pending = false; // the next stall is judged afresh
        self.stalled(state, limits)
    }

    /// Work waits that no thread picks up. This wakes a waiting thread if
    /// one was missed. Else it counts a worker to start and returns `true`,
    /// or it counts a hit of the worker limit.
    fn stalled(&self, mut state: MutexGuard<'_, State<R>>, limits: &Limits) -> bool {
        let mut wakes = Wakes::default();
        let start = if state.wake_idle(&mut wakes) || state.wake_holder(&mut wakes) {
            false // a waiting thread was missed, which is never expected: wake it
        } else if state.workers.current() < limits.max {
            state.workers.started();
            true
        } else {
            if !std::mem::replace(&mut state.at_limit, true) {
                state.workers.limit_hits += 1;
                #[cfg(feature = "tracing")]
                tracing::warn!(
                    workers = state.workers.current(),
                    "every worker is busy and the worker limit is reached: runs wait"
                );
            }
            false
        };
        drop(state);
        self.notify(wakes);
        start
    }

    /// Monitor side. It waits one tick, or parks after [`QUIET_LOOKS`]
    /// looks that found nothing pending and no thread busy. It parks only
    /// with no trigger on the stuck watch list. `watches_nothing` tells
    /// that, called under the pool's lock as
    /// [`unpark_monitor`](Self::unpark_monitor) needs. Returns `false` once
    /// the pool is closed.
    ///
    /// A stall needs a busy thread. With every thread waiting, work that
    /// arrives wakes one. So a parked monitor need not look again before a
    /// thread gets busy. A thread gets busy when someone wakes it, or by
    /// itself. Someone wakes it with a fire, news for the holder, or a role
    /// handed over. [`State::note_activity`] then unparks the monitor. The
    /// role holder gets busy by itself at the deadline it sleeps toward.
    /// The monitor plans around that deadline and looks one tick after it.
    /// The holder unparks it only if it wakes before the plan. An extra
    /// worker at the end of its keep-alive gets busy by itself too, and so
    /// does any thread woken spuriously. But such a thread takes only work
    /// already pending, or goes back to sleep. And pending work keeps the
    /// monitor from parking. A stand-by takes a napping holder's role, at
    /// the holder's own deadline, which the plan covers. Detection stays within the stall threshold,
    /// because after the plan's look the monitor ticks while a thread is
    /// busy. An idle pool costs the monitor one wake-up per deadline at
    /// most, not one per tick. 100,000 triggers with a one-second period
    /// make a deadline every two milliseconds. One trigger with a period of a
    /// hundred milliseconds makes ten a second. Neither keeps the monitor
    /// ticking 200 times a second any more.
    pub(crate) fn monitor_sleep(
        &self,
        watch: &mut Watch,
        tick: Duration,
        clock: &Clock,
        watches_nothing: impl FnOnce() -> bool,
    ) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        // An async iteration occupies no worker. So with a watched trigger
        // the monitor never parks, or a hung iteration would go unreported.
        if watch.quiet >= QUIET_LOOKS && state.busy() == 0 && watches_nothing() {
            // Relaxed: under the lock, which orders every store to it.
            let next = state.next_busy_by_itself(self.sleep_until.load(Ordering::Relaxed));
            let tick_us = u64::try_from(tick.as_micros()).unwrap_or(u64::MAX);
            // Never less than a tick away. A holder late to wake, on an
            // overloaded machine, may still count as asleep after its
            // target. A plan already past would make this a busy loop. The
            // monitor runs on the real clock only, because a virtual
            // scheduler has no threads.
            let look_at = (next != NEVER).then(|| next.max(clock.now_us()).saturating_add(tick_us));
            state.monitor_parked = true;
            state.monitor_plan = next;
            while state.monitor_parked && !state.closed {
                state = match look_at {
                    None => wait(&self.monitor_bed, state),
                    Some(at) => {
                        let timeout = clock.until(at);
                        if timeout.is_zero() {
                            break;
                        }
                        wait_timeout(&self.monitor_bed, &self.state, state, timeout)
                    }
                };
            }
            // Unparked by activity, the pool is quiet no more. At the
            // plan's time, the next look decides, and parks again at once
            // if still quiet.
            if !std::mem::replace(&mut state.monitor_parked, false) {
                watch.quiet = 0;
            }
            state.monitor_plan = NEVER;
            watch.pending = false; // judged afresh
        } else {
            state = wait_timeout(&self.monitor_bed, &self.state, state, tick);
        }
        !state.closed
    }

    /// A trigger joined the stuck watch list, so a parked monitor must watch.
    pub(crate) fn unpark_monitor(&self) {
        let mut state = self.lock();
        let mut wakes = Wakes::default();
        state.note_activity(&mut wakes);
        drop(state);
        self.notify(wakes);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::core::tests::TestRuntime;

    #[test]
    fn a_monitor_whose_plan_is_already_past_still_parks_for_a_tick() {
        // The holder counts as asleep with its target long past, late to
        // wake on a loaded machine. The monitor parks until a tick from
        // now, not until a time already gone, which would spin.
        let clock = Clock::real();
        let pool = Pool::<TestRuntime>::new(None); // the role is held
        {
            let mut state = pool.lock();
            state.workers.started();
            state.holder_asleep = true;
        }
        let tick = Duration::from_millis(20);
        std::thread::sleep(2 * tick);
        pool.sleep_until.store(1, Ordering::Relaxed);
        let mut watch = Watch {
            quiet: QUIET_LOOKS,
            ..Watch::default()
        };
        let started = std::time::Instant::now();
        assert!(pool.monitor_sleep(&mut watch, tick, &clock, || true));
        let parked = started.elapsed();
        // Half a tick, because the scheduler's clock and `Instant` may
        // differ a little. A spin returns in microseconds.
        assert!(parked >= tick / 2, "parked {parked:?}");
        assert!(!pool.lock().monitor_parked);
    }
}
