//! The worker pool's shared state. It holds the run queue, the timer's
//! inbox, the timer role, the idle workers' beds and the elastic worker
//! count. All of it sits under one lock, so every decision about who wakes
//! is made on one consistent picture.
//!
//! # Ground rules
//!
//! | field | who may touch it |
//! |---|---|
//! | `queue`, `inbox`, `idle`, counts | anyone, under the lock |
//! | `timer` (`Some`: the role is free) | taken under the lock by one worker, which then owns the wheel outside the lock until it puts it back |
//! | `holder_asleep`, `notified` | the role holder sets `holder_asleep` before it waits; a waker clears it (and sets `notified`) when it wakes the holder, and a stand-by clears it when it takes a napping role |
//! | `sleep_until` | stored by the holder under the lock (see `inbox.rs`); read lock-free by firers |
//! | `napping` (`Some`: a holder naps), `nap_due`, `nap_id`, `nap_cpu` | set by a holder as it naps; the napping role is taken under the lock by the holder as it wakes, or by a worker once `nap_due` has come (see `role.rs`, "A nap") |
//!
//! The pool keeps two invariants.
//!
//! * A worker parks idle only while the role is held, with `timer` at
//!   `None`. It may also park while the thread that put the role back after
//!   a quick batch is on its way back for it. [`Pool::release`] makes that
//!   case. Whoever finds the role free takes it rather than park. So an
//!   idle pool always has one thread sleeping toward the next deadline. A
//!   worker woken to take the role over, the `successor`, takes it ahead of
//!   queued runs. So the runs of a batch that block never leave the role
//!   free while another worker sleeps. A quick batch may block instead.
//!   Then the monitor wakes a parked worker for the role within the stall
//!   threshold. An extra worker whose keep-alive runs out meanwhile takes
//!   the role rather than retire.
//! * A thread that wakes another pops its bed from `idle`, or clears
//!   `holder_asleep`, under the lock. So a woken worker is never counted
//!   idle, and a wake is never sent to a thread that is not waiting. A
//!   holder whose nap was taken may get a wake meant for the new holder,
//!   and passes it on.
//!
//! # Files, by job
//!
//! | file | job |
//! |------|-----|
//! | `mod.rs` | the state under the lock, its ground rules, the run queue, where a worker looks for work (`next_work`) |
//! | `role.rs` | the timer role after a turn: sleep toward the next deadline, or put it back and pick who wakes |
//! | `inbox.rs` | the timer's inbox and its wake-up protocol |
//! | `monitor.rs` | the monitor's looks: stalls, worker starts, parking |
//! | `apart.rs` | a stand-by kept off the napping holder's CPU while it waits |

use super::timer::{InboxItem, Timer, NEVER};
use crate::clock::Clock;
use crate::core::Counted;
use crate::core::{Core, InboxPush, Runtime};
use crate::sync::{lock, wait, wait_timeout, Arc, AtomicU64, Condvar, Mutex, MutexGuard, Ordering};
use std::collections::VecDeque;
use std::time::Duration;

mod apart;
mod inbox;
mod monitor;
mod role;

pub(crate) use monitor::Look;
pub use monitor::Watch;
pub(crate) use role::Step;

/// `sleep_until` while no thread sleeps toward a deadline.
pub(crate) const AWAKE: u64 = 0;
/// `sleep_until` while the timer role is free. It is above every deadline,
/// so a firer re-arming a trigger in the inbox always takes the lock.
const FREE: u64 = u64::MAX;

/// What a worker does next.
pub(crate) enum Work<R: Runtime> {
    /// Serve this trigger's due request.
    Run(Counted<Core<R>>),
    /// Hold the timer role, and turn the wheel with the inbox items first.
    Timer(Box<Timer<R>>),
    /// The pool is closed, or this extra worker retires.
    Exit,
}

/// An idle worker's bed. Each worker waits on its own condition variable.
/// So the pool can wake the most recently parked worker first, whose cache
/// is warm.
pub(crate) type Bed = Arc<Condvar>;

/// Elastic sizing, as set on the [`Builder`](crate::Builder).
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Workers started with the pool. They never retire.
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
    queue: VecDeque<Counted<Core<R>>>,
    inbox: Vec<InboxItem<R>>,
    /// The earliest deadline of the inbox's news, in µs. It is `NEVER` if
    /// there is none, or none known to matter. A free role is due for the
    /// news then, not before. So a worker delivering its own re-arm runs
    /// the rest of its batch first, instead of turning the wheel once per
    /// run.
    inbox_next: u64,
    closed: bool,
    /// The timer role, `Some` while no thread holds it.
    timer: Option<Box<Timer<R>>>,
    /// The wheel's next deadline when the role was last put back.
    timer_next: u64,
    holder_asleep: bool,
    /// The role of a holder asleep toward an exact deadline, left here so
    /// that another worker may take it once that deadline has come.
    /// `role.rs` explains why, under "A nap".
    napping: Option<Box<Timer<R>>>,
    /// The deadline the napping role waits for, in µs.
    nap_due: u64,
    /// Counts naps, so a holder that wakes tells its own nap from a later one.
    nap_id: u64,
    /// The CPU the napping holder went to sleep on, if known.
    nap_cpu: Option<usize>,
    /// Set by whoever wakes the holder, and cleared when it wakes.
    notified: bool,
    /// Parked workers, most recent last.
    idle: Vec<Bed>,
    workers: WorkerCounts,
    /// Set while the worker limit stops a needed start. One hit counts per episode.
    at_limit: bool,
    /// `release` woke an idle worker to take the free role. The first
    /// worker to look takes it, ahead of queued runs. The thread that just
    /// put it back is the exception, because it runs the batch's first run.
    /// Cleared when someone takes the role.
    successor: bool,
    /// Bumped whenever a worker picks up work. The monitor's stall test reads it.
    progress: u64,
    monitor_parked: bool,
    /// While the monitor is parked, the holder's wake-up it planned around.
    /// The monitor looks one tick after it. It is `NEVER` if the monitor
    /// waits for activity only. A holder that wakes by itself before that
    /// time unparks the monitor, in `sleep` of `role.rs`.
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

    /// A thread goes from waiting to working, so a parked monitor must watch.
    fn note_activity(&mut self, wakes: &mut Wakes) {
        if self.monitor_parked {
            self.monitor_parked = false;
            wakes.monitor = true;
        }
    }

    /// When a thread next gets busy with no one waking it. `sleep_until` is
    /// the pool's. The sleeping holder gets busy at its target, and a free
    /// role at its due time. It is `NEVER` if neither applies, because a
    /// thread awake holds the role. A free role with every thread waiting
    /// has no due time in practice. A role with one is put back only by a
    /// thread that comes back for it, or with a worker woken to take it.
    fn next_busy_by_itself(&self, sleep_until: u64) -> u64 {
        if self.holder_asleep {
            sleep_until
        } else if self.timer.is_some() {
            self.timer_next.min(self.inbox_next)
        } else {
            NEVER
        }
    }

    /// Whether work waits that no thread has picked up. That is queued
    /// runs, or a free timer role with a deadline passed. The deadline may
    /// be the wheel's or its news'.
    fn pending(&self, now_us: u64) -> bool {
        !self.queue.is_empty() || (self.timer.is_some() && self.timer_due(now_us))
    }

    /// Takes the inbox's news for a turn.
    fn take_inbox(&mut self) -> Vec<InboxItem<R>> {
        self.inbox_next = NEVER;
        std::mem::take(&mut self.inbox)
    }

    /// Takes the inbox's news for a turn into `buffer`. `buffer` is empty,
    /// the holder's buffer from its last turn. The inbox keeps it, with its
    /// capacity. So the news of about one turn costs no allocation per
    /// turn.
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
    _queue: VecDeque<Counted<Core<R>>>,
    _inbox: Vec<InboxItem<R>>,
    _timer: Option<Box<Timer<R>>>,
}

/// What a worker carries from one look at the pool to the next. One item is
/// a re-arm's inbox push with the run's reference to its trigger. It is
/// handed to the pool with the next lock. The others are two buffers its
/// timer turns reuse, with their capacity. One holds the inbox's news,
/// swapped with the pool's inbox. The other holds the due runs a turn
/// found, drained into the run queue. So a turn allocates nothing. [`trim`]
/// cuts each back to [`RETAIN`] items' room once drained after a burst.
pub(crate) struct Carry<R: Runtime> {
    pub(crate) push: Option<(Counted<Core<R>>, InboxPush)>,
    pub(crate) inbox: Vec<InboxItem<R>>,
    pub(crate) due: Vec<Counted<Core<R>>>,
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
/// beyond what it holds. A burst's peak is given back after it, not held
/// for good. For example, 100,000 `fire_after`s at once make 100,000 inbox
/// items. A load whose turns stay within this room allocates nothing. A
/// load whose bursts exceed it grows the room again for each burst, as
/// thousands of triggers on one period do. That is a few reallocations,
/// each moving the items once more, set against the burst's own work per
/// item.
pub(crate) const RETAIN: usize = 1 << 10;

/// Gives back `buffer`'s room beyond [`RETAIN`] once it is empty. A call
/// after a burst reallocates. Any other call is a comparison or two.
pub(crate) fn trim<T>(buffer: &mut Vec<T>) {
    if buffer.is_empty() && buffer.capacity() > RETAIN {
        buffer.shrink_to(RETAIN);
    }
}

/// The pool, with its state, the beds of the role holder and of the
/// monitor, and the holder's sleep target.
pub(crate) struct Pool<R: Runtime> {
    state: Mutex<State<R>>,
    timer_bed: Condvar,
    monitor_bed: Condvar,
    /// See the wake-up protocol in `inbox.rs`.
    pub(super) sleep_until: AtomicU64,
    /// The models' holder naps on the manual clock too, where a stand-by's
    /// timed wait may run out at any point. Set before any worker runs.
    #[cfg(loom)]
    pub(crate) naps_in_models: std::sync::atomic::AtomicBool,
}

impl<R: Runtime> Pool<R> {
    /// A pool whose timer role starts free with `timer`. With `None`, a
    /// thread-less driver holds the role for good.
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
                napping: None,
                nap_due: NEVER,
                nap_id: 0,
                nap_cpu: None,
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
            // A pool made with the role free starts as `put_back` leaves it.
            sleep_until: AtomicU64::new(if free { FREE } else { AWAKE }),
            #[cfg(loom)]
            naps_in_models: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Puts the timer role back, free. `sleep_until` becomes [`FREE`]. So a
    /// firer re-arming a trigger already in the inbox takes the lock in
    /// `poke_locked`. There it lowers the free role's due time,
    /// `inbox_next`. News that came in while the role was held may have had
    /// such re-arms judged by nobody, because `sleep_until` was `AWAKE`.
    /// Then the role is due at once, as before `inbox_next` existed.
    fn put_back(&self, state: &mut State<R>, timer: Box<Timer<R>>) {
        state.timer = Some(timer);
        if !state.inbox.is_empty() {
            state.inbox_next = 0;
        }
        // Relaxed: the lock carries it, as the protocol in `inbox.rs` explains.
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

    /// Queues a due trigger. With `wake`, a caller outside the pool, such
    /// as a firer, wakes an idle worker, or else the sleeping role holder.
    /// A worker re-queueing its own trigger wakes nobody. It loops back to
    /// the queue itself, as `Core::schedule_run` explains. Returns `false`
    /// if the pool is closed.
    pub(crate) fn push(&self, core: Counted<Core<R>>, wake: bool) -> bool {
        let mut state = self.lock();
        if state.closed {
            // The trigger is let go outside the lock. It may be the last
            // reference, and its task's captures may run any code.
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

    /// Gives the role `timer` to the worker looking, with the inbox's items swapped into
    /// `inbox` for its first turn. The role was free, or a nap's and past its deadline.
    fn hand_role(
        &self,
        state: &mut State<R>,
        timer: Box<Timer<R>>,
        inbox: &mut Vec<InboxItem<R>>,
    ) -> Work<R> {
        state.progress += 1;
        state.swap_inbox(inbox);
        // Relaxed: see the protocol in `inbox.rs`.
        self.sleep_until.store(AWAKE, Ordering::Relaxed);
        Work::Timer(timer)
    }

    /// Worker side. It returns the next thing to do, waiting for it if need
    /// be. The timer role comes first when it is free and due. So a queue
    /// that never empties cannot starve deadlines, as G10 requires.
    ///
    /// `carry.push` is the inbox push the worker's last run left, a re-arm.
    /// It is delivered under this lock instead of one of its own. It is
    /// left in place if the pool is closed, and the caller lists it.
    /// `now_hint` is the clock as the caller's last timer turn began. It is
    /// given only right after that turn put the role back, as
    /// [`after_turn`](Self::after_turn)'s `Released`. The caller then runs
    /// a queued run, leaving the role to the successor it may have woken.
    /// Taking the role swaps the inbox's news into `carry.inbox`. That
    /// buffer is empty, drained by the caller's last turn.
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
        // The clock as the worker's last run ended, which its re-arm read,
        // or as its last timer turn began. It is good for the first look
        // below. It saves a read per periodic run and per turn, and the
        // first read after a wake-up is the costly one. The re-arm's
        // reading is an upper bound, at most about 2 µs ahead, as
        // `Clock::deadline_base_ns` explains. Taking the role that much
        // early only costs a turn that finds nothing due. The turn itself
        // reads the exact clock.
        let mut just_released = now_hint.is_some();
        let mut now_hint = now_hint.or(push.as_ref().map(|(_, push)| push.stamp.now_us()));
        // This worker kept off a napping holder's CPU while it stands by,
        // and that CPU. Declared before the guard, so it gives the CPU back
        // after the lock is released.
        let mut _apart: Option<apart::Apart> = None;
        let mut apart_for: Option<usize> = None;
        let mut state = self.lock();
        if !state.closed {
            if let Some((core, push)) = push.take() {
                let stamp = push.stamp_for(&core);
                let mut wakes = Wakes::default();
                let deadline = inbox::judge(&core, stamp);
                // The run's reference moves into the inbox, so no count changes.
                self.add_to_inbox(&mut state, (core, stamp), || deadline, true, &mut wakes);
                // Under the lock, before this worker may park. This is
                // rare, since it takes an earlier deadline than the
                // holder's, or a free role.
                self.notify(wakes);
            }
        }
        loop {
            if state.closed {
                // This thread is on its way out. `SchedulerStats::workers`
                // counts the threads now.
                state.workers.gone();
                return Work::Exit;
            }
            // Only the first look may use the hint, because after a wait it is old.
            let hint = now_hint.take();
            let role_free = state.timer.is_some();
            let due = |state: &State<R>| state.timer_due(hint.unwrap_or_else(|| clock.now_us()));
            let due_nap = |state: &State<R>| state.nap_due <= clock.now_us();
            // Only the first look, because after a wait this worker may
            // itself be the successor someone woke.
            let released = std::mem::take(&mut just_released);
            if state.holder_asleep && state.napping.is_some() && due_nap(&state) {
                // The holder slept past its deadline, as on a CPU the host
                // took away. This worker woke first, so it takes the role.
                let timer = state.napping.take().expect("a napping role");
                state.nap_due = NEVER;
                state.holder_asleep = false;
                return self.hand_role(&mut state, timer, inbox);
            }
            let successor = state.successor && !released;
            if role_free && (state.queue.is_empty() || successor || due(&state)) {
                state.successor = false;
                let timer = state.timer.take().expect("the role is free");
                return self.hand_role(&mut state, timer, inbox);
            }
            if let Some(core) = state.queue.pop_front() {
                state.progress += 1;
                if state.queue.is_empty() && state.queue.capacity() > RETAIN {
                    // A burst is over, so give its room back, as `RETAIN` explains.
                    state.queue.shrink_to(RETAIN);
                }
                return Work::Run(core);
            }
            // A stand-by for a napping holder wakes at its deadline too.
            let standby = (state.holder_asleep && state.napping.is_some())
                .then(|| clock.until(state.nap_due));
            let away_from = standby.and(state.nap_cpu);
            if away_from != apart_for {
                // The CPU set changes with the lock released, since the
                // call may move this thread to another CPU. Then it looks
                // again, because anything may have changed meanwhile.
                drop(state);
                _apart = None;
                apart_for = away_from;
                _apart = away_from.and_then(apart::Apart::from);
                state = self.lock();
                just_released = released;
                continue;
            }
            // An extra worker standing by wakes at the nap's deadline, which
            // is not the end of its keep-alive.
            let keep_alive_ends = standby.map_or(true, |s| s >= limits.keep_alive);
            state.idle.push(Arc::clone(bed));
            state = match (extra, standby) {
                (true, _) => wait_timeout(
                    bed,
                    &self.state,
                    state,
                    standby.map_or(limits.keep_alive, |s| s.min(limits.keep_alive)),
                ),
                (false, Some(standby)) => wait_timeout(bed, &self.state, state, standby),
                (false, None) => wait(bed, state),
            };
            // Still listed, so nobody woke us. The keep-alive ran out, or
            // the wake-up was spurious. An extra worker then retires,
            // unless work waits that nobody picked up. Then it takes that
            // work instead. A free role left behind a quick batch that
            // blocked is such work.
            if let Some(index) = state.idle.iter().position(|b| Arc::ptr_eq(b, bed)) {
                state.idle.remove(index);
                let surplus = state.workers.current() > limits.core;
                // Not while the role is free either. This worker takes it
                // at the top of the loop, so no deadline goes unwatched.
                let role_free = state.timer.is_some();
                if extra
                    && keep_alive_ends
                    && !state.closed
                    && surplus
                    && !role_free
                    && !state.pending(clock.now_us())
                {
                    state.workers.gone();
                    return Work::Exit;
                }
            }
        }
    }

    /// Queues the due runs a thread-less driver found. Returns `false` if closed.
    pub(crate) fn push_batch(&self, due: &mut Vec<Counted<Core<R>>>) -> bool {
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        state.queue.extend(due.drain(..));
        true
    }

    /// Takes the next queued trigger without waiting, for thread-less drivers.
    pub(crate) fn try_pop(&self) -> Option<Counted<Core<R>>> {
        self.lock().queue.pop_front()
    }

    /// Number of queued dispatches.
    pub(crate) fn queued(&self) -> usize {
        self.lock().queue.len()
    }

    /// Takes the inbox, for thread-less drivers.
    pub(crate) fn take_inbox(&self) -> Vec<InboxItem<R>> {
        self.lock().take_inbox()
    }

    /// Closes the pool. It takes out the queued work, the inbox, and a free
    /// timer role with its wheel. The shutdown scan lists the queued work.
    /// It wakes every thread so it exits. Returns what it took, for the
    /// caller to drop once it holds no lock. Each part holds triggers, and
    /// any reference may be a trigger's last. Dropping that reference runs
    /// its task's destructor. Taking them also ends the cycle between a
    /// trigger's reference to its runtime and the runtime's references to
    /// its triggers. A role held by a worker goes with the worker as it
    /// exits.
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

    /// A worker start the monitor decided on failed, or a core worker could
    /// not be spawned. This uncounts it.
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
        // blocked. Past its keep-alive the worker takes it, and does not
        // retire.
        let runtime = crate::core::tests::TestRuntime::new();
        pool.lock().queue.push_back(runtime.bind(|| None));
        assert!(worker.join().unwrap(), "the extra worker took the run");
        assert_eq!(pool.counts().current(), 1);
    }

    #[test]
    fn an_extra_worker_standing_by_takes_a_late_holders_role_rather_than_retire() {
        let pool = Arc::new(Pool::<TestRuntime>::new(None));
        let clock = Clock::real();
        {
            // A holder naps toward a deadline 30 ms away, and never wakes.
            let mut state = pool.lock();
            state.workers.started();
            state.workers.started();
            state.holder_asleep = true;
            state.nap_id = 1;
            state.nap_due = clock.now_us() + 30_000;
            state.napping = Some(Box::new(Timer::new(clock.now_us())));
        }
        let limits = Limits {
            core: 1,
            max: 2,
            stall: Duration::from_millis(10),
            keep_alive: Duration::from_secs(60),
        };
        let bed = Arc::new(Condvar::new());
        let carry = &mut Carry::default();
        // The stand-by's wait ends at the nap's deadline, long before its
        // keep-alive. It takes the role instead of retiring as surplus.
        let work = pool.next_work(&bed, true, &limits, &clock, carry, None);
        assert!(matches!(work, Work::Timer(_)), "the stand-by took the role");
        assert_eq!(pool.counts().current(), 2);
        let state = pool.lock();
        assert!(state.napping.is_none() && !state.holder_asleep);
        // The taker leaves no stale deadline for a later stand-by to read.
        assert_eq!(state.nap_due, NEVER);
    }
}

/// Worker counts, for statistics. `current` changes only through
/// [`started`](Self::started) and [`gone`](Self::gone), which move the
/// `metrics` gauge of workers with it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct WorkerCounts {
    current: usize,
    pub(crate) peak: usize,
    pub(crate) limit_hits: u64,
}

impl WorkerCounts {
    /// The workers counted now.
    pub(crate) fn current(&self) -> usize {
        self.current
    }

    /// Now, the peak and the limit hits, for `SchedulerStats`.
    pub(crate) fn for_stats(&self) -> (usize, usize, u64) {
        (self.current, self.peak, self.limit_hits)
    }

    /// A worker is counted, as started or about to be.
    pub(crate) fn started(&mut self) {
        self.current += 1;
        self.peak = self.peak.max(self.current);
        crate::metrics::workers(1.0);
    }

    /// A counted worker is gone. It exited, retired or never started.
    pub(crate) fn gone(&mut self) {
        if self.current > 0 {
            self.current -= 1;
            crate::metrics::workers(-1.0);
        }
    }
}
