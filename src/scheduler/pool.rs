//! The worker pool's shared state: the run queue, the timer's inbox, the
//! timer role, the idle workers' beds and the elastic worker count — all
//! under one lock, so every decision about who wakes is made on one
//! consistent picture.
//!
//! # Ground rules
//!
//! | field | who may touch it |
//! |---|---|
//! | `queue`, `inbox`, `idle`, counts | anyone, under the lock |
//! | `timer` (`Some`: the role is free) | taken under the lock by one worker, which then owns the wheel outside the lock until it puts it back |
//! | `holder_asleep`, `notified` | the role holder sets `holder_asleep` before it waits; a waker clears it (and sets `notified`) when it wakes the holder |
//! | `sleep_until` | stored by the holder under the lock (see `inbox.rs`); read lock-free by firers |
//!
//! Invariants:
//!
//! * A worker parks idle only while the role is held (`timer` is `None`),
//!   or while the thread that put it back after a quick batch (see
//!   [`Pool::release`]) is on its way back for it: whoever finds the role
//!   free takes it rather than park, so an idle pool always has one thread
//!   sleeping toward the next deadline. A worker woken to take the role
//!   over (`successor`) takes it ahead of queued runs, so the runs of a
//!   batch that block never leave the role free while another worker
//!   sleeps. If that batch blocks instead, the
//!   monitor wakes a parked worker for the role within the stall threshold,
//!   and an extra worker whose keep-alive runs out meanwhile takes the role
//!   rather than retire.
//! * A thread that wakes another pops its bed from `idle` (or clears
//!   `holder_asleep`) under the lock: a woken worker is never counted
//!   idle, and a wake is never sent to a thread that is not waiting.
//!
//! # Why leader/follower
//!
//! A separate timer thread costs two wake-ups per due run (timer, then a
//! worker). Here the thread that wakes for a deadline runs the first due
//! run itself (tokio's workers parking on the time driver, Go's per-P
//! timers and the leader/follower pattern all do this). Before it runs
//! user code it puts the timer role back and, from how long the due runs
//! took last time, decides who else wakes: idle workers to share a long
//! batch (a batch of quick runs stays on this thread), else one idle worker
//! to take the role over. When every worker is busy the role waits for the
//! first one to finish, or for the monitor (see `worker.rs`) to wake or
//! start one within the stall threshold.

use super::timer::{Estimate, Timer, NEVER};
use crate::clock::{Clock, COARSEST_GRID_US};
use crate::core::runtime::SHARE_US;
use crate::core::{Core, InboxPush, Runtime};
use crate::stats::WorkerCounts;
use crate::sync::Weak;
use crate::sync::{lock, wait, wait_timeout, Arc, AtomicU64, Condvar, Mutex, MutexGuard, Ordering};
use std::collections::VecDeque;
use std::time::Duration;

/// `sleep_until` while no thread sleeps toward a deadline.
pub(crate) const AWAKE: u64 = 0;
/// `sleep_until` while the timer role is free: above every deadline, so a
/// firer re-arming a trigger in the inbox always takes the lock.
const FREE: u64 = u64::MAX;

/// An idle worker's bed: it waits on its own condition variable, so the
/// pool can wake the most recently parked worker first (warm cache).
pub(crate) type Bed = Arc<Condvar>;

/// What a worker does next.
pub(crate) enum Work<R: Runtime> {
    /// Serve this trigger's due request.
    Run(Weak<Core<R>>),
    /// Hold the timer role: turn the wheel with these inbox items first.
    Timer(Box<Timer<R>>, Vec<Weak<Core<R>>>),
    /// The pool is closed, or this extra worker retires.
    Exit,
}

/// What the monitor's look at the pool found.
pub(crate) enum Look<R: Runtime> {
    /// Nothing to do.
    Fine,
    /// Start a worker (already counted).
    Start,
    /// Only the free timer role was due, at two looks without progress:
    /// the monitor holds it now, to turn the wheel once with these inbox
    /// items and hand the result to [`Pool::monitor_turned`].
    Turn(Box<Timer<R>>, Vec<Weak<Core<R>>>),
}

/// What the timer role holder does after a turn.
pub(crate) enum Step<R: Runtime> {
    /// Turn again (woken, or news in the inbox) with these items.
    Turn(Box<Timer<R>>, Vec<Weak<Core<R>>>),
    /// The role is put back: go run the queued work.
    Released,
    /// The pool closed; these due runs were never queued (list them).
    Closed(Vec<Weak<Core<R>>>),
    /// This extra worker handed the role over after its keep-alive and is
    /// uncounted: it exits.
    Retired,
}

/// Slack (µs) between a quick batch's estimated end and the next deadline
/// for the releasing thread to skip waking a successor.
const BACK_MARGIN_US: u64 = 300;

/// How long before an exact deadline the role holder wakes first (µs).
const PREWAKE_US: u64 = 30;

/// When the role holder wakes for the wheel's next deadline `next` (µs),
/// seen at `now_us`: an exact deadline is slept toward in two steps — to
/// [`PREWAKE_US`] before it, then the rest — and one on the 1 ms grid
/// (coalesced periodic re-arms, a 1 ms tick) in one.
///
/// Measured on a 2-vCPU VM (bench scenario 3, p50 lateness over three
/// runs each): waking exactly at the deadline 34–44 µs; 30 µs early, then
/// the rest, 23–26 µs (the first wake pays the idle vCPU's exit latency
/// early, and the short second sleep returns fast); 100 µs early, 39–42 µs.
/// A deadline on the 1 ms grid is served within its grid anyway (G15), so
/// it gets one wake-up: 100,000 periodic triggers then cost one per
/// millisecond, not two. Waking early is never a risk: the turn finds
/// nothing due and the holder sleeps the rest.
fn wake_target(next: u64, now_us: u64) -> u64 {
    let on_grid = next % COARSEST_GRID_US == 0;
    if next == NEVER || on_grid || next.saturating_sub(now_us) <= 2 * PREWAKE_US {
        next
    } else {
        next - PREWAKE_US
    }
}

/// Elastic sizing (see [`Builder`](crate::Builder)).
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Workers started with the pool; they never retire.
    pub(crate) core: usize,
    /// The most workers that may exist at once.
    pub(crate) max: usize,
    /// Work pending this long with no progress starts a worker.
    pub(crate) stall: Duration,
    /// An extra worker idle this long retires.
    pub(crate) keep_alive: Duration,
}

/// Threads to notify once the lock is released.
#[derive(Default)]
#[must_use]
pub(crate) struct Wakes {
    first: Option<Bed>,
    rest: Vec<Bed>,
    timer: bool,
    monitor: bool,
}

impl Wakes {
    fn bed(&mut self, bed: Bed) {
        match self.first {
            None => self.first = Some(bed),
            Some(_) => self.rest.push(bed),
        }
    }
}

struct State<R: Runtime> {
    queue: VecDeque<Weak<Core<R>>>,
    inbox: Vec<Weak<Core<R>>>,
    /// The earliest deadline of the inbox's news (µs; `NEVER` if none or
    /// unknown to matter): a free role is due for it then, not before, so
    /// a worker delivering its own re-arm runs the rest of its batch first
    /// instead of turning the wheel once per run.
    inbox_next: u64,
    closed: bool,
    /// The timer role: `Some` while no thread holds it.
    timer: Option<Box<Timer<R>>>,
    /// The wheel's next deadline when the role was last put back.
    timer_next: u64,
    holder_asleep: bool,
    /// Set by whoever wakes the holder; cleared when it wakes.
    notified: bool,
    /// Parked workers, most recent last.
    idle: Vec<Bed>,
    workers: WorkerCounts,
    /// Set while the worker limit stops a needed start (one hit per episode).
    at_limit: bool,
    /// `release` woke an idle worker to take the free role: the first
    /// worker to look takes it, ahead of queued runs (all but the thread
    /// that just put it back, which runs the batch's first run). Cleared
    /// when someone takes the role.
    successor: bool,
    /// Bumped whenever a worker picks up work: the monitor's stall test.
    progress: u64,
    monitor_parked: bool,
}

impl<R: Runtime> State<R> {
    /// Pops the most recently parked worker, if any, to wake it.
    fn wake_idle(&mut self, wakes: &mut Wakes) -> bool {
        match self.idle.pop() {
            Some(bed) => {
                wakes.bed(bed);
                self.note_activity(wakes);
                true
            }
            None => false,
        }
    }

    /// Wakes the role holder if it sleeps.
    fn wake_holder(&mut self, wakes: &mut Wakes) -> bool {
        if !self.holder_asleep {
            return false;
        }
        self.holder_asleep = false;
        self.notified = true;
        wakes.timer = true;
        self.note_activity(wakes);
        true
    }

    /// A thread goes from waiting to working: a parked monitor must watch.
    fn note_activity(&mut self, wakes: &mut Wakes) {
        if self.monitor_parked {
            self.monitor_parked = false;
            wakes.monitor = true;
        }
    }

    /// Whether work waits that no thread has picked up: queued runs, or a
    /// free timer role with a deadline passed (the wheel's or its news').
    fn pending(&self, now_us: u64) -> bool {
        !self.queue.is_empty() || (self.timer.is_some() && self.timer_due(now_us))
    }

    /// Takes the inbox's news for a turn.
    fn take_inbox(&mut self) -> Vec<Weak<Core<R>>> {
        self.inbox_next = NEVER;
        std::mem::take(&mut self.inbox)
    }

    fn timer_due(&self, now_us: u64) -> bool {
        self.timer_next.min(self.inbox_next) <= now_us
    }

    /// Workers neither parked nor asleep on the timer.
    fn busy(&self) -> usize {
        self.workers
            .current
            .saturating_sub(self.idle.len() + usize::from(self.holder_asleep))
    }
}

/// The pool: its state, the beds of the role holder and of the monitor,
/// and the holder's sleep target.
pub(crate) struct Pool<R: Runtime> {
    state: Mutex<State<R>>,
    timer_bed: Condvar,
    monitor_bed: Condvar,
    /// See the wake-up protocol in `inbox.rs`.
    pub(super) sleep_until: AtomicU64,
}

impl<R: Runtime> Pool<R> {
    /// A pool whose timer role starts free (`timer`) or is held for good by
    /// a thread-less driver (`None`).
    pub(crate) fn new(timer: Option<Box<Timer<R>>>) -> Self {
        let free = timer.is_some();
        Self {
            state: Mutex::new(State {
                queue: VecDeque::new(),
                inbox: Vec::new(),
                inbox_next: NEVER,
                closed: false,
                timer_next: timer.as_ref().map_or(NEVER, |t| t.next_wake()),
                timer,
                holder_asleep: false,
                notified: false,
                idle: Vec::new(),
                workers: WorkerCounts::default(),
                at_limit: false,
                successor: false,
                progress: 0,
                monitor_parked: false,
            }),
            timer_bed: Condvar::new(),
            monitor_bed: Condvar::new(),
            // A pool made with the role free (see `put_back`).
            sleep_until: AtomicU64::new(if free { FREE } else { AWAKE }),
        }
    }

    /// Puts the timer role back, free. `sleep_until` becomes [`FREE`], so
    /// a firer re-arming a trigger already in the inbox takes the lock and
    /// lowers the free role's due time (`inbox_next`, see `poke_locked`).
    /// News that came in while the role was held may have had such re-arms
    /// judged by nobody (`sleep_until` was `AWAKE`): then the role is due
    /// at once, as before `inbox_next` existed.
    fn put_back(&self, state: &mut State<R>, timer: Box<Timer<R>>) {
        state.timer = Some(timer);
        if !state.inbox.is_empty() {
            state.inbox_next = 0;
        }
        // Relaxed: see the protocol in `inbox.rs` (the lock carries it).
        self.sleep_until.store(FREE, Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, State<R>> {
        lock(&self.state)
    }

    fn notify(&self, wakes: Wakes) {
        if let Some(bed) = wakes.first {
            bed.notify_one();
        }
        for bed in wakes.rest {
            bed.notify_one();
        }
        if wakes.timer {
            self.timer_bed.notify_one();
        }
        if wakes.monitor {
            self.monitor_bed.notify_one();
        }
    }

    /// Queues a due trigger. `wake`: a caller outside the pool (a firer)
    /// wakes an idle worker, else the sleeping role holder; a worker
    /// re-queueing its own trigger does not (it loops back to the queue
    /// itself) unless that iteration ran long (`Core::ran_long`). Returns
    /// `false` if the pool is closed.
    pub(crate) fn push(&self, core: Weak<Core<R>>, wake: bool) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        state.queue.push_back(core);
        let mut wakes = Wakes::default();
        if wake && !state.wake_idle(&mut wakes) {
            let _ = state.wake_holder(&mut wakes);
        }
        drop(state);
        self.notify(wakes);
        true
    }

    /// Queues the due runs a thread-less driver found; `false` if closed.
    pub(crate) fn push_batch(&self, due: &mut Vec<Weak<Core<R>>>) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        state.queue.extend(due.drain(..));
        true
    }

    /// Takes the next queued trigger without waiting (thread-less drivers).
    pub(crate) fn try_pop(&self) -> Option<Weak<Core<R>>> {
        self.lock().queue.pop_front()
    }

    /// Number of queued dispatches.
    pub(crate) fn queued(&self) -> usize {
        self.lock().queue.len()
    }

    /// Takes the inbox (thread-less drivers).
    pub(crate) fn take_inbox(&self) -> Vec<Weak<Core<R>>> {
        self.lock().take_inbox()
    }

    /// Worker side: the next thing to do, waiting for it if need be. The
    /// timer role comes first when it is free and due, so a queue that
    /// never empties cannot starve deadlines (G10).
    ///
    /// `push`: the inbox push the worker's last run left (a re-arm),
    /// delivered under this lock instead of one of its own; left in place if
    /// the pool is closed (the caller lists it). `now_hint`: the clock as
    /// the caller's last timer turn began, given only right after that
    /// turn put the role back ([`after_turn`](Self::after_turn)'s
    /// `Released`): the caller then runs a queued run, leaving the role to
    /// the successor it may have woken.
    pub(crate) fn next_work(
        &self,
        bed: &Bed,
        extra: bool,
        limits: &Limits,
        clock: &Clock,
        push: &mut Option<InboxPush<R>>,
        now_hint: Option<u64>,
    ) -> Work<R> {
        // The clock as the worker's last run ended (its re-arm read it) or
        // as its last timer turn began: good for the first look below,
        // saving a read per periodic run and per turn (the first read after
        // a wake-up is the costly one).
        let mut just_released = now_hint.is_some();
        let mut now_hint = now_hint.or(push.as_ref().map(|push| push.now_us));
        // The re-arm's trigger, held until the lock is released: declared
        // before the guard, so it is dropped after it. If its last handle
        // went meanwhile, dropping it drops the task, whose captures may
        // run any code (fire another trigger, say) — never under the lock.
        let mut delivered: Option<Arc<Core<R>>> = None;
        let mut state = self.lock();
        if !state.closed {
            if let Some(InboxPush { core, now_us }) = push.take() {
                let mut wakes = Wakes::default();
                let judge = || core.request().touch().kind().deadline(now_us);
                self.add_to_inbox(&mut state, Arc::downgrade(&core), judge, true, &mut wakes);
                // Under the lock, before this worker may park: rare (an
                // earlier deadline than the holder's, or a free role).
                self.notify(wakes);
                delivered = Some(core);
            }
        }
        loop {
            if state.closed {
                // This thread is on its way out (`SchedulerStats::workers`
                // counts the threads now).
                state.workers.current = state.workers.current.saturating_sub(1);
                return Work::Exit;
            }
            // Only the first look may use the hint: after a wait it is old.
            let hint = now_hint.take();
            let role_free = state.timer.is_some();
            let due = |state: &State<R>| state.timer_due(hint.unwrap_or_else(|| clock.now_us()));
            // Only the first look: after a wait this worker may itself be
            // the successor someone woke.
            let released = std::mem::take(&mut just_released);
            let successor = state.successor && !released;
            if role_free && (state.queue.is_empty() || successor || due(&state)) {
                state.successor = false;
                state.progress += 1;
                let items = state.take_inbox();
                let timer = state.timer.take().expect("the role is free");
                // Relaxed: see the protocol in `inbox.rs`.
                self.sleep_until.store(AWAKE, Ordering::Relaxed);
                return Work::Timer(timer, items);
            }
            if let Some(core) = state.queue.pop_front() {
                state.progress += 1;
                return Work::Run(core);
            }
            if delivered.is_some() {
                // About to park: let the trigger go first, outside the lock.
                drop(state);
                drop(delivered.take());
                state = self.lock();
                continue;
            }
            state.idle.push(Arc::clone(bed));
            state = if extra {
                wait_timeout(bed, &self.state, state, limits.keep_alive)
            } else {
                wait(bed, state)
            };
            // Still listed: nobody woke us (the keep-alive ran out, or a
            // spurious wake-up).
            // An extra worker then retires — unless work waits that nobody
            // picked up (a free role left behind a quick batch that
            // blocked, say): it takes that instead.
            if let Some(index) = state.idle.iter().position(|b| Arc::ptr_eq(b, bed)) {
                state.idle.remove(index);
                let surplus = state.workers.current > limits.core;
                // Not while the role is free either: this worker takes it
                // (the top of the loop), so no deadline goes unwatched.
                let role_free = state.timer.is_some();
                if extra && !state.closed && surplus && !role_free && !state.pending(clock.now_us())
                {
                    state.workers.current -= 1;
                    return Work::Exit;
                }
            }
        }
    }

    /// Role holder side, after a turn at `turned_at_us` that found `due` runs: queue them
    /// and go run them (putting the role back), or sleep toward the
    /// wheel's next deadline until then or until woken. `retire`: the
    /// holder is an extra worker, which sleeps at most its keep-alive and
    /// may then retire (see [`hand_over_and_retire`](Self::hand_over_and_retire)).
    pub(crate) fn after_turn(
        &self,
        timer: Box<Timer<R>>,
        due: &mut Vec<Weak<Core<R>>>,
        estimate: Estimate,
        turned_at_us: u64,
        clock: &Clock,
        retire: Option<&Limits>,
    ) -> Step<R> {
        let mut state = self.lock();
        if state.closed {
            return Step::Closed(std::mem::take(due));
        }
        let from_turn = due.len();
        if !due.is_empty() {
            state.progress += 1;
            state.queue.extend(due.drain(..));
        }
        if !state.queue.is_empty() {
            // Runs queued before this turn (fires, or a batch an earlier
            // holder left) are not in the estimate: their length is
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
            let by_itself;
            (state, by_itself) = self.sleep(state, until, timeout);
            if state.closed {
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
        Step::Turn(timer, state.take_inbox())
    }

    /// An extra worker's keep-alive ran out while it held the role with
    /// nothing due: if another worker is idle to take the role over and the
    /// pool is above its core size, wake that worker (the caller puts the
    /// role back) and uncount this one. Else it keeps the role: it is the
    /// only thread free to watch the wheel.
    fn hand_over_and_retire(
        &self,
        state: &mut State<R>,
        timer: &Timer<R>,
        limits: &Limits,
    ) -> Option<Wakes> {
        if state.idle.is_empty() || state.workers.current <= limits.core {
            return None;
        }
        let mut wakes = Wakes::default();
        state.timer_next = timer.next_wake();
        let _ = state.wake_idle(&mut wakes);
        // The woken worker takes the role even if a run is queued first.
        state.successor = true;
        state.workers.current -= 1;
        Some(wakes)
    }

    /// Puts the timer role back before running user code, and picks who
    /// wakes, from how long the due runs took last time (`estimate_us`):
    ///
    /// * helpers: one idle worker per [`SHARE_US`] of estimated work beyond
    ///   the first share (a batch of quick runs is cheaper on one thread
    ///   than spread with wake-ups);
    /// * a successor for the role: one idle worker, if the wheel has
    ///   deadlines, which takes the role ahead of queued runs (so helpers
    ///   and runs that block never leave it free while a worker sleeps) —
    ///   unless the batch is known to be quick
    ///   (every run in it has finished before, and twice their last
    ///   durations plus [`BACK_MARGIN_US`] end before the next deadline):
    ///   then this thread runs the batch and takes the role back itself,
    ///   one wake-up per turn instead of two (100,000 periodic triggers:
    ///   half the context switches). A first run, whose duration nobody
    ///   knows, always gets a successor; a known-quick run that blocks
    ///   this time leaves the role to the monitor, within the stall
    ///   threshold. Measured: taking the role back unconditionally, even
    ///   with the next deadline close, tripled the p99 lateness on a
    ///   2-vCPU VM.
    ///
    /// When every worker is busy the role stays free until the first
    /// one finishes, or the monitor wakes or starts one within the stall
    /// threshold (G14).
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
        // The role gets a thread of its own, unless this one comes back
        // for it after a quick batch: the woken worker takes it ahead of
        // queued runs (`successor`), so runs that block — whoever runs
        // them — never leave it free while a worker sleeps.
        if deadlines && !back_in_time && state.wake_idle(&mut wakes) {
            state.successor = true;
        }
        wakes
    }

    /// The role holder sleeps toward `until` (see the protocol in
    /// `inbox.rs`); `timeout` bounds the wait on the real clock.
    /// Returns the guard and whether it woke by itself (a timeout, not a
    /// waker).
    fn sleep<'a>(
        &'a self,
        mut state: MutexGuard<'a, State<R>>,
        until: u64,
        timeout: Option<Duration>,
    ) -> (MutexGuard<'a, State<R>>, bool) {
        // Relaxed: see the protocol in `inbox.rs` (the lock carries it).
        self.sleep_until.store(until, Ordering::Relaxed);
        state.holder_asleep = true;
        state = match timeout {
            Some(timeout) => wait_timeout(&self.timer_bed, &self.state, state, timeout),
            None => wait(&self.timer_bed, state),
        };
        self.sleep_until.store(AWAKE, Ordering::Relaxed);
        let by_itself = std::mem::replace(&mut state.holder_asleep, false);
        if by_itself {
            // Woke by itself (its deadline): it is about to work.
            let mut wakes = Wakes::default();
            state.note_activity(&mut wakes);
            if wakes.monitor {
                self.monitor_bed.notify_one();
            }
        }
        (state, by_itself)
    }

    /// Plays the role holder going to sleep toward `until_us` without a
    /// timeout (loom models: a missed wake-up deadlocks the model); returns
    /// the inbox items to turn with.
    #[cfg(loom)]
    pub(crate) fn wait_as_holder(&self, until_us: u64) -> Vec<Weak<Core<R>>> {
        let mut state = self.lock();
        if state.inbox.is_empty() && !state.notified && !state.closed {
            state = self.sleep(state, until_us, None).0;
        }
        state.notified = false;
        state.take_inbox()
    }

    /// Whether the role holder is awake or has been woken (loom models).
    #[cfg(loom)]
    pub(crate) fn holder_awake(&self) -> bool {
        let state = self.lock();
        state.notified || self.sleep_until.load(Ordering::Relaxed) == AWAKE
    }

    /// Wakes the role holder without news (loom models' stand-in for its
    /// timeout).
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

    /// Adds `core` to the inbox (its caller set IN_INBOX) and applies the
    /// wake-up protocol of `inbox.rs` through `judge`, which reads the
    /// trigger's deadline; `false` if closed.
    pub(super) fn push_inbox(
        &self,
        core: Weak<Core<R>>,
        judge: impl FnOnce() -> Option<u64>,
    ) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        let mut wakes = Wakes::default();
        self.add_to_inbox(&mut state, core, judge, false, &mut wakes);
        drop(state);
        self.notify(wakes);
        true
    }

    /// Under the lock: the inbox push proper (see [`push_inbox`](Self::push_inbox)).
    fn add_to_inbox(
        &self,
        state: &mut State<R>,
        core: Weak<Core<R>>,
        judge: impl FnOnce() -> Option<u64>,
        taker: bool,
        wakes: &mut Wakes,
    ) {
        state.inbox.push(core);
        // A free role is due for the news at its deadline (a worker's look
        // for work takes it then, ahead of queued runs); news with no
        // deadline (a suspend) asks nothing by a time.
        let deadline = judge();
        state.inbox_next = state.inbox_next.min(deadline.unwrap_or(NEVER));
        if state.timer.is_some() {
            // The role is free: an idle worker takes it to read the news —
            // unless the caller is a worker about to look for work, which
            // takes it itself once its queue is done.
            if !taker {
                let _ = state.wake_idle(wakes);
            }
        } else if deadline.is_some_and(|deadline| self.earlier(state, deadline)) {
            let _ = state.wake_holder(wakes);
        }
    }

    /// The slow half of `poke` (see `inbox.rs`): under the lock, wakes the
    /// holder if `deadline` precedes its target.
    pub(super) fn poke_locked(&self, deadline: u64) {
        let mut state = self.lock();
        let mut wakes = Wakes::default();
        if state.timer.is_some() {
            // The role is free: it is due for this news by its deadline.
            state.inbox_next = state.inbox_next.min(deadline);
        } else if self.earlier(&mut state, deadline) {
            let _ = state.wake_holder(&mut wakes);
        }
        drop(state);
        self.notify(wakes);
    }

    /// Under the lock: whether `deadline` precedes the holder's target; if
    /// so marks it awake, so later firers skip the lock.
    fn earlier(&self, state: &mut State<R>, deadline: u64) -> bool {
        // Relaxed: the lock orders it (see `inbox.rs`).
        if deadline < self.sleep_until.load(Ordering::Relaxed) {
            self.sleep_until.store(AWAKE, Ordering::Relaxed);
            state.notified = true;
            true
        } else {
            false
        }
    }

    /// Closes the pool: drops queued work (the shutdown scan lists it) and
    /// wakes every thread so it exits.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.queue.clear();
        let _ = state.take_inbox();
        let beds = std::mem::take(&mut state.idle);
        state.holder_asleep = false;
        drop(state);
        for bed in beds {
            bed.notify_one();
        }
        self.timer_bed.notify_all();
        self.monitor_bed.notify_all();
    }

    /// Counts a worker the builder starts.
    pub(crate) fn add_core_worker(&self) {
        let mut state = self.lock();
        state.workers.current += 1;
        state.workers.peak = state.workers.peak.max(state.workers.current);
    }

    /// A worker start the monitor decided on failed (or a core worker
    /// could not be spawned): uncount it.
    pub(crate) fn worker_not_started(&self) {
        let mut state = self.lock();
        state.workers.current = state.workers.current.saturating_sub(1);
    }

    /// Worker counts for statistics.
    pub(crate) fn counts(&self) -> WorkerCounts {
        self.lock().workers
    }

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
        due: &mut Vec<Weak<Core<R>>>,
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

/// Ticks without pending work or progress before the monitor parks.
const QUIET_TICKS: u32 = 200;

/// What the monitor remembers between two looks.
#[derive(Debug, Default)]
pub struct Watch {
    pending: bool,
    progress: u64,
    quiet: u32,
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::core::tests::TestRuntime;

    #[test]
    fn an_extra_worker_past_its_keep_alive_takes_work_nobody_picked_up() {
        let pool = Arc::new(Pool::<TestRuntime>::new(None)); // the role is held for good
        pool.lock().workers.current = 1;
        let limits = Limits {
            core: 0,
            max: 1,
            stall: Duration::from_millis(10),
            keep_alive: Duration::from_millis(50),
        };
        let worker = {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || {
                let bed = Arc::new(Condvar::new());
                let work = pool.next_work(&bed, true, &limits, &Clock::real(), &mut None, None);
                matches!(work, Work::Run(_))
            })
        };
        for _ in 0..5_000 {
            if !pool.lock().idle.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // Work arrives without a wake-up, as behind a quick batch that
        // blocked: past its keep-alive the worker takes it, not retires.
        pool.lock().queue.push_back(Weak::new());
        assert!(worker.join().unwrap(), "the extra worker took the run");
        assert_eq!(pool.counts().current, 1);
    }

    #[test]
    fn exact_deadlines_are_slept_toward_in_two_steps() {
        // Exact and far: wake early, then (near) sleep the rest.
        assert_eq!(wake_target(10_537, 5_000), 10_537 - PREWAKE_US);
        assert_eq!(wake_target(10_537, 10_537 - PREWAKE_US), 10_537);
        // On the 1 ms grid, or never: one step.
        assert_eq!(wake_target(10_000, 5_000), 10_000);
        assert_eq!(wake_target(NEVER, 5_000), NEVER);
        // Never after the deadline, whatever the clock says.
        for (next, now) in [(1, 0), (0, 7), (999, 1_000), (u64::MAX - 1, 0)] {
            assert!(wake_target(next, now) <= next);
        }
    }
}
