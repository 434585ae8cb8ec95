//! The timer role. A worker takes it in `Pool::next_work` when it is free
//! and due. The worker turns the wheel, then either sleeps toward the next
//! deadline or puts the role back to run the due batch. Putting it back
//! wakes helpers and a successor, in `after_turn` and `release`.
//!
//! # Why leader/follower
//!
//! A separate timer thread costs two wake-ups per due run, the timer's and
//! then a worker's. Here the thread that wakes for a deadline runs the
//! first due run itself. Tokio's workers parking on the time driver, Go's
//! per-P timers and the leader/follower pattern all do this. Before it runs
//! user code, it puts the timer role back. Then it decides who else wakes,
//! from how long the due runs took last time. Idle workers wake to share a
//! long batch, while a batch of quick runs stays on this thread. Else one
//! idle worker wakes to take the role over. When every worker is busy, the
//! role waits for the first one to finish. Or it waits for the monitor of
//! `worker.rs` to wake or start one within the stall threshold.

use super::{Carry, Limits, Pool, State, Wakes, AWAKE};
use crate::clock::{Clock, WHOLE_MS_US};
use crate::core::Counted;
use crate::core::{Core, Runtime};
use crate::scheduler::timer::{Estimate, Timer, NEVER};
use crate::sync::{wait, wait_timeout, MutexGuard, Ordering};
use std::time::Duration;

/// Estimated work one helper is woken for, in microseconds. Below it,
/// waking another thread costs more than running the work on the thread
/// at hand, so the pool wakes one idle worker per share of a due batch.
const SHARE_US: u64 = 200;

/// What the timer role holder does after a turn.
pub(crate) enum Step<R: Runtime> {
    /// Turn again, because the holder was woken or news came into the
    /// inbox. The news is now in the holder's buffer.
    Turn(Box<Timer<R>>),
    /// The role is put back, so go run the queued work.
    Released,
    /// The pool closed. These due runs were never queued, so list them.
    Closed(Vec<Counted<Core<R>>>),
    /// This extra worker handed the role over after its keep-alive and is
    /// uncounted. It exits.
    Retired,
    /// Another worker took the role while this one napped past its
    /// deadline. This one goes on as a plain worker.
    TakenOver,
}

/// Slack in µs between a quick batch's estimated end and the next deadline,
/// for the releasing thread to skip waking a successor.
const BACK_MARGIN_US: u64 = 300;

/// How long before an exact deadline the role holder wakes first, in µs.
const PREWAKE_US: u64 = 30;

/// When the role holder wakes for the wheel's next deadline `next` in µs,
/// seen at `now_us`. An exact deadline is slept toward in two steps. The
/// holder sleeps to [`PREWAKE_US`] before it, then the rest. A deadline on
/// a whole millisecond, [`WHOLE_MS_US`], takes one step. Periodic re-arms
/// coalesced onto a grid of a millisecond or more, and a tick of one
/// millisecond, land there.
///
/// On a virtual machine, the first wake pays the idle vCPU's exit latency
/// early, and the short second sleep returns fast. docs/DESIGN.md gives the
/// lateness measured with and without the early wake, under "Sleeping
/// toward a deadline". A deadline on the grid is served within its grid
/// anyway, as G15 allows. So it gets one wake-up, and 100,000 periodic
/// triggers then cost one per grid step, not two. Waking early is never a
/// risk. The turn finds nothing due, and the holder sleeps the rest.
fn wake_target(next: u64, now_us: u64) -> u64 {
    let on_grid = next % WHOLE_MS_US == 0;
    if next == NEVER || on_grid || next.saturating_sub(now_us) <= 2 * PREWAKE_US {
        next
    } else {
        next - PREWAKE_US
    }
}

/// What a holder's sleep gives back: the guard, whether it woke by itself,
/// and its role unless another worker took it.
type Slept<'a, R> = (MutexGuard<'a, State<R>>, bool, Option<Box<Timer<R>>>);

/// Whether a holder about to sleep toward the wheel's next deadline `next`
/// naps, leaving its role in the pool.
///
/// # A nap
///
/// On a virtual machine a sleeping thread's CPU may be descheduled by the
/// host, and its wake-up then comes late, now and then by milliseconds.
/// A pool whose idle threads all time out at a deadline is served by the
/// first of them to wake. So a napping holder's role waits in the pool,
/// and an idle worker that parks meanwhile wakes at the deadline too,
/// waiting on a CPU other than the holder's (see `apart.rs`). The first of
/// the two to look at the pool past the deadline takes the role.
/// docs/DESIGN.md gives the rules that keep the wake-up protocol whole,
/// under "A nap".
///
/// Only exact deadlines nap. Deadlines on the coarse grid are the periodic
/// re-arms of many triggers, where a second wake-up per deadline would
/// double the idle cost. An extra worker that may retire keeps its role.
/// So does a holder on a manual clock, which has no timed waits, but in the
/// loom models of the nap.
fn naps(next: u64, clock: &Clock, retiring: bool, in_models: bool) -> Option<u64> {
    let timed = !clock.is_manual() || in_models;
    (next != NEVER && next % WHOLE_MS_US != 0 && !retiring && timed).then_some(next)
}

impl<R: Runtime> Pool<R> {
    /// Role holder side, after a turn at `turned_at_us` that found `due`
    /// runs. The holder queues them and goes to run them, putting the role
    /// back. Or it sleeps toward the wheel's next deadline, until then or
    /// until woken. With `retire`, the holder is an extra worker. It sleeps
    /// at most its keep-alive and may then retire through
    /// [`hand_over_and_retire`](Self::hand_over_and_retire).
    pub(crate) fn after_turn(
        &self,
        timer: Box<Timer<R>>,
        carry: &mut Carry<R>,
        estimate: Estimate,
        turned_at_us: u64,
        clock: &Clock,
        retire: Option<&Limits>,
    ) -> Step<R> {
        let Carry { inbox, due, .. } = carry;
        let mut state = self.lock();
        if state.closed {
            // The wheel's references go outside the lock, as in `close`.
            drop(state);
            drop(timer);
            return Step::Closed(std::mem::take(due));
        }
        let from_turn = due.len();
        if !due.is_empty() {
            state.progress += 1;
            state.queue.extend(due.drain(..));
        }
        if !state.queue.is_empty() {
            // Runs queued before this turn are not in the estimate. They
            // are fires, or a batch an earlier holder left. Their length is
            // unknown, so this thread does not count on coming back.
            let estimate = Estimate {
                unknown: estimate.unknown || state.queue.len() > from_turn,
                ..estimate
            };
            let wakes = self.release(&mut state, timer, estimate, turned_at_us);
            drop(state);
            self.notify(wakes);
            return Step::Released;
        }
        let mut timer = timer;
        if state.inbox.is_empty() && !state.notified {
            let next = timer.next_wake();
            let until = if clock.is_manual() {
                next
            } else {
                wake_target(next, turned_at_us)
            };
            let mut timeout = (until != NEVER && !clock.is_manual()).then(|| clock.until(until));
            if let Some(keep_alive) = retire.map(|limits| limits.keep_alive) {
                timeout = Some(timeout.map_or(keep_alive, |t| t.min(keep_alive)));
            }
            #[cfg(loom)]
            // Relaxed: set before any worker runs, and the thread spawns order it.
            let in_models = self
                .naps_in_models
                .load(std::sync::atomic::Ordering::Relaxed);
            #[cfg(not(loom))]
            let in_models = false;
            let nap = naps(next, clock, retire.is_some(), in_models);
            let by_itself;
            let kept;
            (state, by_itself, kept) = self.sleep(state, Some(timer), until, timeout, nap);
            let Some(kept) = kept else {
                return Step::TakenOver;
            };
            timer = kept;
            if state.closed {
                // The wheel's references go outside the lock, as above.
                // `timer` is a local declared after the guard, so it would
                // be dropped first.
                drop(state);
                drop(timer);
                return Step::Closed(Vec::new());
            }
            let quiet = by_itself && state.inbox.is_empty() && state.queue.is_empty();
            if let Some(limits) = retire.filter(|_| quiet && clock.now_us() < until) {
                if let Some(wakes) = self.hand_over_and_retire(&mut state, &timer, limits) {
                    self.put_back(&mut state, timer);
                    drop(state);
                    self.notify(wakes);
                    return Step::Retired;
                }
            }
        }
        state.notified = false;
        state.swap_inbox(inbox);
        Step::Turn(timer)
    }

    /// An extra worker's keep-alive ran out while it held the role with
    /// nothing due. Another worker may be idle to take the role over, with
    /// the pool above its core size. Then this wakes that worker and
    /// uncounts this one, and the caller puts the role back. Else this
    /// worker keeps the role, because it is the only thread free to watch
    /// the wheel.
    fn hand_over_and_retire(
        &self,
        state: &mut State<R>,
        timer: &Timer<R>,
        limits: &Limits,
    ) -> Option<Wakes> {
        if state.idle.is_empty() || state.workers.current() <= limits.core {
            return None;
        }
        let mut wakes = Wakes::default();
        state.timer_next = timer.next_wake();
        let _ = state.wake_idle(&mut wakes);
        // The woken worker takes the role even if a run is queued first.
        state.successor = true;
        state.workers.gone();
        Some(wakes)
    }

    /// Puts the timer role back before running user code, and picks who
    /// wakes. It picks from how long the due runs took last time,
    /// `estimate`.
    ///
    /// * Helpers come first. One idle worker wakes per [`SHARE_US`] of
    ///   estimated work beyond the first share. A batch of quick runs is
    ///   cheaper on one thread than spread with wake-ups.
    /// * A successor for the role comes next. It is one idle worker, woken
    ///   if the wheel has deadlines. It takes the role ahead of queued
    ///   runs. So helpers and runs that block never leave the role free
    ///   while a worker sleeps. No successor wakes when the batch is known
    ///   to be quick. In a quick batch every run has finished before, and
    ///   twice their last durations plus [`BACK_MARGIN_US`] end before the
    ///   next deadline. Then this thread runs the batch and takes the role
    ///   back itself. That is one wake-up per turn instead of two, and half
    ///   the context switches for 100,000 periodic triggers. A first run,
    ///   whose duration nobody knows, always gets a successor. A
    ///   known-quick run that blocks this time leaves the role to the
    ///   monitor, within the stall threshold. Taking the role back
    ///   unconditionally, even with the next deadline close, raised the
    ///   tail lateness, as docs/DESIGN.md records.
    ///
    /// When every worker is busy, the role stays free until the first one
    /// finishes. Or the monitor wakes or starts one within the stall
    /// threshold, as G14 requires.
    fn release(
        &self,
        state: &mut State<R>,
        timer: Box<Timer<R>>,
        estimate: Estimate,
        now_us: u64,
    ) -> Wakes {
        let mut wakes = Wakes::default();
        state.timer_next = timer.next_wake();
        self.put_back(state, timer);
        state.successor = false;
        let others = state.queue.len().saturating_sub(1) as u64;
        for _ in 0..(estimate.known_us / SHARE_US).min(others) {
            if !state.wake_idle(&mut wakes) {
                break;
            }
        }
        let deadlines = state.timer_next != NEVER || !state.inbox.is_empty();
        let back_in_time = !estimate.unknown
            && state.inbox.is_empty()
            && state.timer_next.saturating_sub(now_us)
                > estimate
                    .known_us
                    .saturating_mul(2)
                    .saturating_add(BACK_MARGIN_US);
        // The role gets a thread of its own, unless this one comes back for
        // it after a quick batch. The woken worker takes it ahead of queued
        // runs, as `successor`. So runs that block never leave it free
        // while a worker sleeps, whoever runs them.
        if deadlines && !back_in_time && state.wake_idle(&mut wakes) {
            state.successor = true;
        }
        wakes
    }

    /// The role holder sleeps toward `until`, under the protocol in
    /// `inbox.rs`. `timeout` bounds the wait on the real clock. With
    /// `nap`, the wheel's next deadline, the role waits in the pool, and a
    /// worker may take it once that deadline has come. Returns the guard,
    /// whether it woke by itself, by a timeout and not a waker, and the role
    /// unless it was taken. The loom models' stand-in holder has no role in
    /// hand.
    fn sleep<'a>(
        &'a self,
        mut state: MutexGuard<'a, State<R>>,
        held: Option<Box<Timer<R>>>,
        until: u64,
        timeout: Option<Duration>,
        nap: Option<u64>,
    ) -> Slept<'a, R> {
        // Relaxed: the lock carries it, as the protocol in `inbox.rs` explains.
        self.sleep_until.store(until, Ordering::Relaxed);
        state.holder_asleep = true;
        let mut held = held;
        let mut nap_id = None;
        if let Some(due) = nap.filter(|_| held.is_some()) {
            state.nap_id += 1;
            nap_id = Some(state.nap_id);
            state.nap_due = due;
            state.nap_cpu = super::apart::current_cpu();
            state.napping = held.take();
        }
        state = match timeout {
            Some(timeout) => wait_timeout(&self.timer_bed, &self.state, state, timeout),
            None => wait(&self.timer_bed, state),
        };
        if let Some(id) = nap_id {
            if state.nap_id != id || state.napping.is_none() {
                // Taken. The pool's holder fields are the taker's now, so
                // they stay as they are. A waker meant for the taker may
                // have woken this thread instead, since both waited on
                // the same condition variable. The taker has not yet seen
                // a wake-up while `notified` is set, so it is passed on.
                if state.notified {
                    self.timer_bed.notify_all();
                }
                return (state, false, None);
            }
            held = state.napping.take();
            state.nap_due = NEVER;
        }
        self.sleep_until.store(AWAKE, Ordering::Relaxed);
        let by_itself = std::mem::replace(&mut state.holder_asleep, false);
        // Woke by itself at its deadline, so it is about to work. A parked
        // monitor plans to look a tick after the holder's target, in
        // `Pool::monitor_sleep`. It is unparked only if this wake-up comes
        // before its plan, or if it has no plan. So not every deadline
        // costs a second wake-up.
        if by_itself && until < state.monitor_plan {
            let mut wakes = Wakes::default();
            state.note_activity(&mut wakes);
            if wakes.monitor {
                self.monitor_bed.notify_one();
            }
        }
        (state, by_itself, held)
    }

    /// Plays the role holder going to sleep toward `until_us` without a
    /// timeout, for the loom models. A missed wake-up deadlocks the model.
    /// Returns the inbox items to turn with.
    #[cfg(loom)]
    pub(crate) fn wait_as_holder(
        &self,
        until_us: u64,
    ) -> Vec<crate::scheduler::timer::InboxItem<R>> {
        let mut state = self.lock();
        if state.inbox.is_empty() && !state.notified && !state.closed {
            state = self.sleep(state, None, until_us, None, None).0;
        }
        state.notified = false;
        state.take_inbox()
    }

    /// Whether a holder naps with its role in the pool, for the loom models.
    #[cfg(loom)]
    pub(crate) fn holder_naps(&self) -> bool {
        let state = self.lock();
        state.holder_asleep && state.napping.is_some()
    }

    /// Whether the role holder is awake or has been woken, for the loom models.
    #[cfg(loom)]
    pub(crate) fn holder_awake(&self) -> bool {
        let state = self.lock();
        state.notified || self.sleep_until.load(Ordering::Relaxed) == AWAKE
    }

    /// Whether the role holder sleeps with its role in hand, for the loom
    /// models.
    #[cfg(loom)]
    pub(crate) fn holder_sleeps_holding(&self) -> bool {
        let state = self.lock();
        state.holder_asleep && state.napping.is_none()
    }

    /// Wakes the role holder without news. It is the loom models' stand-in
    /// for its timeout.
    #[cfg(loom)]
    pub(crate) fn nudge(&self) {
        let mut state = self.lock();
        state.notified = true;
        let mut wakes = Wakes::default();
        let _ = state.wake_holder(&mut wakes);
        drop(state);
        self.timer_bed.notify_one();
        self.notify(wakes);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn exact_deadlines_are_slept_toward_in_two_steps() {
        // Exact and far, so wake early, then sleep the rest once near.
        assert_eq!(wake_target(10_537, 5_000), 10_537 - PREWAKE_US);
        assert_eq!(wake_target(10_537, 10_537 - PREWAKE_US), 10_537);
        // On a whole millisecond, or never, it takes one step.
        assert_eq!(wake_target(10_000, 5_000), 10_000);
        assert_eq!(wake_target(NEVER, 5_000), NEVER);
        // Never after the deadline, whatever the clock says.
        for (next, now) in [(1, 0), (0, 7), (999, 1_000), (u64::MAX - 1, 0)] {
            assert!(wake_target(next, now) <= next);
        }
    }
}
