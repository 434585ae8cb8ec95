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
//! # Files, by job
//!
//! | file | job |
//! |------|-----|
//! | `mod.rs` | the state under the lock, its ground rules, the run queue, where a worker looks for work (`next_work`) |
//! | `role.rs` | the timer role after a turn: sleep toward the next deadline, or put it back and pick who wakes |
//! | `inbox.rs` | the timer's inbox and its wake-up protocol |
//! | `monitor.rs` | the monitor's looks: stalls, worker starts, parking |

use super::timer::{InboxItem, Timer, NEVER};
use crate::clock::Clock;
use crate::core::{Core, InboxPush, Runtime};
use crate::stats::WorkerCounts;
use crate::sync::{lock, wait, wait_timeout, Arc, AtomicU64, Condvar, Mutex, MutexGuard, Ordering};
use std::collections::VecDeque;
use std::time::Duration;

mod inbox;
mod monitor;
mod role;

pub(crate) use monitor::Look;
pub use monitor::Watch;
pub(crate) use role::Step;

/// `sleep_until` while no thread sleeps toward a deadline.
pub(crate) const AWAKE: u64 = 0;
/// `sleep_until` while the timer role is free: above every deadline, so a
/// firer re-arming a trigger in the inbox always takes the lock.
const FREE: u64 = u64::MAX;

/// What a worker does next.
pub(crate) enum Work<R: Runtime> {
    /// Serve this trigger's due request.
    Run(Arc<Core<R>>),
    /// Hold the timer role: turn the wheel with these inbox items first.
    Timer(Box<Timer<R>>),
    /// The pool is closed, or this extra worker retires.
    Exit,
}

/// An idle worker's bed: it waits on its own condition variable, so the
/// pool can wake the most recently parked worker first (warm cache).
pub(crate) type Bed = Arc<Condvar>;

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

pub(super) struct State<R: Runtime> {
    queue: VecDeque<Arc<Core<R>>>,
    inbox: Vec<InboxItem<R>>,
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
    /// While the monitor is parked: the holder's wake-up it planned
    /// around (it looks one tick after it), or `NEVER` if it waits for
    /// activity only. A holder that wakes by itself before that time
    /// unparks it (see `role.rs`, `sleep`).
    monitor_plan: u64,
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

    /// When a thread next gets busy with no one waking it (`sleep_until`:
    /// the pool's): the sleeping holder at its target, a free role at its
    /// due time; `NEVER` if neither (the role is held by a thread awake).
    /// A free role with every thread waiting has no due time in practice
    /// (a role with one is put back only by a thread that comes back for
    /// it, or with a worker woken to take it).
    fn next_busy_by_itself(&self, sleep_until: u64) -> u64 {
        if self.holder_asleep {
            sleep_until
        } else if self.timer.is_some() {
            self.timer_next.min(self.inbox_next)
        } else {
            NEVER
        }
    }

    /// Whether work waits that no thread has picked up: queued runs, or a
    /// free timer role with a deadline passed (the wheel's or its news').
    fn pending(&self, now_us: u64) -> bool {
        !self.queue.is_empty() || (self.timer.is_some() && self.timer_due(now_us))
    }

    /// Takes the inbox's news for a turn.
    fn take_inbox(&mut self) -> Vec<InboxItem<R>> {
        self.inbox_next = NEVER;
        std::mem::take(&mut self.inbox)
    }

    /// Takes the inbox's news for a turn into `buffer` (empty: the holder's
    /// buffer from its last turn), which the inbox keeps, with its
    /// capacity: no allocation per turn for the news of about one turn.
    fn swap_inbox(&mut self, buffer: &mut Vec<InboxItem<R>>) {
        debug_assert!(buffer.is_empty());
        self.inbox_next = NEVER;
        std::mem::swap(&mut self.inbox, buffer);
    }

    fn timer_due(&self, now_us: u64) -> bool {
        self.timer_next.min(self.inbox_next) <= now_us
    }

    /// Workers neither parked nor asleep on the timer.
    fn busy(&self) -> usize {
        self.workers
            .current()
            .saturating_sub(self.idle.len() + usize::from(self.holder_asleep))
    }
}

/// What [`Pool::close`] took out of the pool, dropped by its caller outside
/// every lock.
pub(crate) struct Closed<R: Runtime> {
    _queue: VecDeque<Arc<Core<R>>>,
    _inbox: Vec<InboxItem<R>>,
    _timer: Option<Box<Timer<R>>>,
}

/// What a worker carries from one look at the pool to the next: a re-arm's
/// inbox push with the run's reference to its trigger (handed to the pool
/// with the next lock), and two buffers its
/// timer turns reuse, with their capacity — the inbox's news (swapped with
/// the pool's inbox) and the due runs a turn found (drained into the run
/// queue): no allocation per turn. Each is trimmed back to [`RETAIN`]
/// items' room once drained after a burst ([`trim`]).
pub(crate) struct Carry<R: Runtime> {
    pub(crate) push: Option<(Arc<Core<R>>, InboxPush)>,
    pub(crate) inbox: Vec<InboxItem<R>>,
    pub(crate) due: Vec<Arc<Core<R>>>,
}

impl<R: Runtime> Default for Carry<R> {
    fn default() -> Self {
        Self {
            push: None,
            inbox: Vec::new(),
            due: Vec::new(),
        }
    }
}

/// The room, in items, that a buffer kept from one use to the next keeps
/// beyond what it holds: a burst's peak (100,000 `fire_after`s at once is
/// 100,000 inbox items) is given back after it, not held for good. A load
/// whose turns stay within it allocates nothing; one whose bursts exceed
/// it (thousands of triggers on one period) grows the room for each burst
/// again — a few reallocations, each moving the items once more, against
/// the burst's own work per item.
pub(crate) const RETAIN: usize = 1 << 10;

/// Gives back `buffer`'s room beyond [`RETAIN`] once it is empty (a call
/// after a burst reallocates; any other is a comparison or two).
pub(crate) fn trim<T>(buffer: &mut Vec<T>) {
    if buffer.is_empty() && buffer.capacity() > RETAIN {
        buffer.shrink_to(RETAIN);
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
                monitor_plan: NEVER,
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
    /// itself, see `Core::schedule_run`). Returns `false` if the pool is
    /// closed.
    pub(crate) fn push(&self, core: Arc<Core<R>>, wake: bool) -> bool {
        let mut state = self.lock();
        if state.closed {
            // The trigger is let go outside the lock (it may be the last
            // reference: its task's captures may run any code).
            drop(state);
            drop(core);
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

    /// Worker side: the next thing to do, waiting for it if need be. The
    /// timer role comes first when it is free and due, so a queue that
    /// never empties cannot starve deadlines (G10).
    ///
    /// `carry.push`: the inbox push the worker's last run left (a re-arm),
    /// delivered under this lock instead of one of its own; left in place if
    /// the pool is closed (the caller lists it). `now_hint`: the clock as
    /// the caller's last timer turn began, given only right after that
    /// turn put the role back ([`after_turn`](Self::after_turn)'s
    /// `Released`): the caller then runs a queued run, leaving the role to
    /// the successor it may have woken. Taking the role swaps the inbox's
    /// news into `carry.inbox` (empty: drained by the caller's last turn).
    pub(crate) fn next_work(
        &self,
        bed: &Bed,
        extra: bool,
        limits: &Limits,
        clock: &Clock,
        carry: &mut Carry<R>,
        now_hint: Option<u64>,
    ) -> Work<R> {
        let Carry { push, inbox, .. } = carry;
        // The clock as the worker's last run ended (its re-arm read it) or
        // as its last timer turn began: good for the first look below,
        // saving a read per periodic run and per turn (the first read after
        // a wake-up is the costly one). The re-arm's reading is an upper
        // bound (at most about 2 µs ahead, see `Clock::deadline_base_ns`):
        // taking the role that much early only costs a turn that finds
        // nothing due; the turn itself reads the exact clock.
        let mut just_released = now_hint.is_some();
        let mut now_hint = now_hint.or(push.as_ref().map(|(_, push)| push.stamp.now_us()));
        let mut state = self.lock();
        if !state.closed {
            if let Some((core, push)) = push.take() {
                let stamp = push.stamp_for(&core);
                let mut wakes = Wakes::default();
                let deadline = inbox::judge(&core, stamp);
                // The run's reference moves into the inbox: no count
                // changes.
                self.add_to_inbox(&mut state, (core, stamp), || deadline, true, &mut wakes);
                // Under the lock, before this worker may park: rare (an
                // earlier deadline than the holder's, or a free role).
                self.notify(wakes);
            }
        }
        loop {
            if state.closed {
                // This thread is on its way out (`SchedulerStats::workers`
                // counts the threads now).
                state.workers.gone();
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
                state.swap_inbox(inbox);
                let timer = state.timer.take().expect("the role is free");
                // Relaxed: see the protocol in `inbox.rs`.
                self.sleep_until.store(AWAKE, Ordering::Relaxed);
                return Work::Timer(timer);
            }
            if let Some(core) = state.queue.pop_front() {
                state.progress += 1;
                if state.queue.is_empty() && state.queue.capacity() > RETAIN {
                    // A burst is over: give its room back (see `RETAIN`).
                    state.queue.shrink_to(RETAIN);
                }
                return Work::Run(core);
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
                let surplus = state.workers.current() > limits.core;
                // Not while the role is free either: this worker takes it
                // (the top of the loop), so no deadline goes unwatched.
                let role_free = state.timer.is_some();
                if extra && !state.closed && surplus && !role_free && !state.pending(clock.now_us())
                {
                    state.workers.gone();
                    return Work::Exit;
                }
            }
        }
    }

    /// Queues the due runs a thread-less driver found; `false` if closed.
    pub(crate) fn push_batch(&self, due: &mut Vec<Arc<Core<R>>>) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        state.queue.extend(due.drain(..));
        true
    }

    /// Takes the next queued trigger without waiting (thread-less drivers).
    pub(crate) fn try_pop(&self) -> Option<Arc<Core<R>>> {
        self.lock().queue.pop_front()
    }

    /// Number of queued dispatches.
    pub(crate) fn queued(&self) -> usize {
        self.lock().queue.len()
    }

    /// Takes the inbox (thread-less drivers).
    pub(crate) fn take_inbox(&self) -> Vec<InboxItem<R>> {
        self.lock().take_inbox()
    }

    /// Closes the pool: takes the queued work out (the shutdown scan lists
    /// it), the inbox and a free timer role with its wheel, and wakes every
    /// thread so it exits. Returns what it took for the caller to drop once
    /// it holds no lock: each holds triggers, any reference may be a
    /// trigger's last, and dropping it runs its task's destructor. Taking
    /// them also ends the cycle a trigger's reference to its runtime makes
    /// with the runtime's references to its triggers (a role held by a
    /// worker goes with the worker as it exits).
    #[must_use = "the queued triggers are dropped by the caller, outside its locks"]
    pub(crate) fn close(&self) -> Closed<R> {
        let mut state = self.lock();
        state.closed = true;
        let queue = std::mem::take(&mut state.queue);
        let inbox = state.take_inbox();
        let timer = state.timer.take();
        let beds = std::mem::take(&mut state.idle);
        state.holder_asleep = false;
        drop(state);
        for bed in beds {
            bed.notify_one();
        }
        self.timer_bed.notify_all();
        self.monitor_bed.notify_all();
        Closed {
            _queue: queue,
            _inbox: inbox,
            _timer: timer,
        }
    }

    /// Counts a worker the builder starts.
    pub(crate) fn add_core_worker(&self) {
        self.lock().workers.started();
    }

    /// A worker start the monitor decided on failed (or a core worker
    /// could not be spawned): uncount it.
    pub(crate) fn worker_not_started(&self) {
        self.lock().workers.gone();
    }

    /// Worker counts for statistics.
    pub(crate) fn counts(&self) -> WorkerCounts {
        self.lock().workers
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::core::tests::TestRuntime;

    #[test]
    fn an_extra_worker_past_its_keep_alive_takes_work_nobody_picked_up() {
        let pool = Arc::new(Pool::<TestRuntime>::new(None)); // the role is held for good
        pool.lock().workers.started();
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
                let carry = &mut Carry::default();
                let work = pool.next_work(&bed, true, &limits, &Clock::real(), carry, None);
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
        let runtime = crate::core::tests::TestRuntime::new();
        pool.lock().queue.push_back(runtime.bind(|| None));
        assert!(worker.join().unwrap(), "the extra worker took the run");
        assert_eq!(pool.counts().current(), 1);
    }
}
