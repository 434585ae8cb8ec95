//! The shared heart of one trigger: its state word, request word, queue
//! flags and task, and the fire / dispatch / run paths that drive them.
//!
//! ```text
//! fire()        ─ advance ─ publish(v, DUE) ─┬─ running? ─ yes ─▶ take_due + reserve (inline, no worker)
//!                                            └─ QUEUED? ─ no ─▶ run queue ─▶ worker: dispatch
//! fire_after(d) ─ advance ─ publish(v, AT T) ─── IN_INBOX? ─ no ─▶ timer inbox ─▶ wheel ─▶ (T) DUE ─▶ run queue
//! suspend()     ─ advance ─ publish(v, IDLE)
//! dispatch      ─ take_due (DUE→TAKEN) ─ enter(v) ─ Entered ─▶ run task ─ exit ─▶ re-arm (coalesced) / re-run
//!                                                 └ Reserved: the runner re-runs at exit
//! ```
//!
//! Two flags make every queue hold a trigger at most once (G9, G13):
//! `queued` (run queue) and IN_INBOX (timer inbox, a bit of the request
//! word, set by the same compare-exchange that installs an AT request). A
//! firer that finds its flag already set knows a pending dispatch (or inbox
//! entry) will read the request word after clearing the flag, so it will
//! serve the newest request.
//!
//! # Orderings
//!
//! * `queued`: set with a *Release* `swap` after publishing; cleared with an
//!   *Acquire* `swap` before reading the request. If a firer finds the flag
//!   set, the clear comes later in the flag's modification order and
//!   synchronizes with the firer, so the consumer reads the firer's request
//!   or a newer one (no lost fire, G4). The opposite direction carries
//!   nothing anyone reads (the ordering audit weakened those halves with
//!   no model failing). IN_INBOX needs no extra edge: it lives in the
//!   request word itself (see `request.rs`).
//! * The task cell is guarded by the RUNNING bit (see `state.rs`).
//!
//! # Doors
//!
//! Into the runtime, this file (and `iteration.rs`, `wait.rs`) goes only
//! through `scheduler/door.rs`: `Shared`'s fields are private to the
//! scheduler. What the runtime calls here:
//!
//! | method | who | what for |
//! |--------|-----|----------|
//! | `dispatch` | a worker | serve the live request of a trigger it popped from the run queue |
//! | `expire` | the timer | take a due deadline, if the request word still holds it |
//! | `request`, `expected_run_us` | the timer | read the deadline to file; estimate a due batch |
//! | `stuck_for` | the monitor | how long a run has been in flight |
//! | `touch_state`, `wake_waiters`, `cancel_slot`, `name`, `stats` | shutdown scan, stats | read-only looks |
//! | `InboxPush::deliver_now` / `closed` | a worker, the virtual driver | deliver the timer hand-over a `dispatch` returned, or drop it at shutdown |

use crate::async_task::{AsyncBody, AsyncTask, CancelSlot, TaskFuture};
use crate::clock::{coalesce, deadline_us};
use crate::context::{self, Outcome};
use crate::error::{FireError, WaitError};
use crate::jitter::RetryBackoff;
use crate::policy::{PanicPolicy, Policies};
use crate::request::{Kind, Request, Word};
use crate::state::{Enter, Exit, Reserve, Snapshot, State};
use crate::stats::{Counters, TriggerStats};
use crate::sync::{Arc, AtomicBool, Ordering, UnsafeCell};
use crate::task::Task;
use crate::wait::Waiters;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use iteration::{DispatchJob, Iteration};
pub(crate) use runtime::Runtime;
use runtime::SHARE_US;

pub(crate) mod iteration;
pub(crate) mod runtime;
#[cfg(feature = "tokio")]
pub(crate) mod wait_future;

/// What a request that meets a closed scheduler does (see `lifecycle.rs`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnClosed {
    /// A firer's request: left in place; the firer's `confirm` takes it
    /// back and refuses the fire.
    Refuse,
    /// The scheduler's own (expiry, re-run, re-arm): listed as discarded.
    List,
}

/// A trigger whose request now sits behind IN_INBOX and that must still be
/// put in the timer's inbox — by [`deliver`](Self::deliver), or by a worker
/// under the pool lock it takes next. No user code runs before that, so the
/// wake-up protocol (`scheduler/inbox.rs`) is unchanged: the push only
/// happens a little later, and judges the request it then reads.
#[must_use]
pub(crate) struct InboxPush<R: Runtime> {
    pub(crate) core: Arc<Core<R>>,
    pub(crate) now_us: u64,
}

impl<R: Runtime> InboxPush<R> {
    /// Pushes now; a closed pool makes the request discarded (and listed)
    /// for the scheduler's own requests, or refused for a firer's.
    fn deliver(self, on_closed: OnClosed) {
        if !self.core.runtime.to_timer(&self.core, self.now_us) {
            self.core.closed_under(on_closed);
        }
    }

    /// Pushes now; the scheduler's own request (a re-arm).
    pub(crate) fn deliver_now(self) {
        self.deliver(OnClosed::List);
    }

    /// The pool was closed before the push: list the re-arm as discarded.
    pub(crate) fn closed(self) {
        self.core.closed_under(OnClosed::List);
    }
}

/// What the RUNNING holder alone touches: the task, with the back-off of a
/// [`PanicPolicy::Retry`](crate::PanicPolicy::Retry) if it has one.
pub(crate) struct TaskCell {
    body: Box<dyn Body>,
}

/// A task that runs on the worker, or one whose iterations are futures,
/// with or without a retry back-off: one trait object, so a trigger pays
/// one fat pointer for any of them.
trait Body: Send {
    /// Calls the task, catching a panic.
    fn call(&mut self) -> Called;

    /// After an iteration's result: the delay before the next attempt if
    /// it panicked under a retry policy (which a normal return resets).
    fn settle(&mut self, _result: &std::thread::Result<Option<Duration>>) -> Option<Duration> {
        None
    }
}

/// A task under [`PanicPolicy::Retry`](crate::PanicPolicy::Retry): the
/// back-off lives beside it, in the same allocation.
struct Retrying<B> {
    body: B,
    backoff: RetryBackoff,
}

impl<B: Body> Body for Retrying<B> {
    fn call(&mut self) -> Called {
        self.body.call()
    }

    fn settle(&mut self, result: &std::thread::Result<Option<Duration>>) -> Option<Duration> {
        match result {
            Ok(_) => {
                self.backoff.reset();
                None
            }
            Err(_) => {
                let next = self.backoff.failed();
                if next.is_none() {
                    // Out of retries: the trigger stops until fired again,
                    // and that fire starts a fresh round of retries.
                    self.backoff.reset();
                }
                next
            }
        }
    }
}

/// A sync task.
struct SyncBody<T>(T);

impl<T: Task> Body for SyncBody<T> {
    fn call(&mut self) -> Called {
        Called::Returned(catch_unwind(AssertUnwindSafe(|| self.0.run())))
    }
}

impl<A: AsyncTask> Body for AsyncBody<A> {
    fn call(&mut self) -> Called {
        match catch_unwind(AssertUnwindSafe(|| self.task.start())) {
            Ok(future) => Called::Started(future),
            Err(payload) => Called::Returned(Err(payload)),
        }
    }
}

/// Where a re-run due at once when an iteration ends goes: `None`, through
/// the run queue; `Some(slot)`, for an async iteration ending in a poll,
/// served on the spot, its future put in `slot` for the ending iteration to
/// poll next in the same executor task (no worker wake-up, no new spawn).
pub(crate) type Adopt<'a> = Option<&'a mut Option<(u32, TaskFuture)>>;

/// What calling the task gave.
enum Called {
    /// A sync task returned (or panicked).
    Returned(std::thread::Result<Option<Duration>>),
    /// An async task returned this iteration's future, to spawn on its
    /// executor.
    Started(TaskFuture),
}

impl TaskCell {
    pub(crate) fn new<T: Task>(task: T, on_panic: PanicPolicy) -> Self {
        Self::with_body(SyncBody(task), on_panic)
    }

    #[cfg_attr(not(any(feature = "tokio", loom)), allow(dead_code))]
    pub(crate) fn new_async<A: AsyncTask>(body: AsyncBody<A>, on_panic: PanicPolicy) -> Self {
        Self::with_body(body, on_panic)
    }

    fn with_body<B: Body + 'static>(body: B, on_panic: PanicPolicy) -> Self {
        let body: Box<dyn Body> = match on_panic {
            PanicPolicy::Stop => Box::new(body),
            PanicPolicy::Retry(backoff) => Box::new(Retrying { body, backoff }),
        };
        Self { body }
    }

    /// Calls the task, catching a panic.
    fn call(&mut self) -> Called {
        self.body.call()
    }

    /// After an iteration's result: the delay before the next attempt if
    /// it panicked under a retry policy (which a normal return resets).
    fn settle(&mut self, result: &std::thread::Result<Option<Duration>>) -> Option<Duration> {
        self.body.settle(result)
    }
}

/// `Core::timer_key` when the trigger has no wheel entry.
pub(crate) const NO_KEY: u32 = u32::MAX;

/// Versions between two looks of `Core::advanced`, minus one: far below
/// the 2^29 versions the wrapping comparison tells apart.
const CATCH_UP_MASK: u32 = (1 << 16) - 1;

/// The fields are in a fixed order (`repr(C)`), hottest first: the timer's
/// expiry of a due entry reads the `Arc`'s count (`Weak::upgrade`), then
/// `request`, `queued`, `timer_key` and the statistics' `due_*` pair, so
/// with the `Arc` header they take the allocation's first 52 bytes (one or
/// two cache lines rather than three: expiry walks 100,000 cold cores a
/// second in the idle benchmark, and each line is a miss).
#[repr(C)]
pub(crate) struct Core<R: Runtime> {
    request: Request,
    state: State,
    /// The timer's wheel key for this trigger; read and written only by the
    /// timer (see `scheduler/timer.rs`).
    pub(crate) timer_key: crate::sync::TimerOwned,
    /// The trigger sits in the worker run queue.
    queued: AtomicBool,
    /// This trigger's slot in the scheduler's registry (here, where it
    /// fills what would be padding).
    slot: u32,
    /// Its `due_*` pair first (see `Counters`).
    stats: Counters,
    /// Invariant: accessed only by the holder of the RUNNING bit (between
    /// `State::enter` returning `Entered` and `State::exit`), in `run` and
    /// `end` only. Why that is sound:
    /// - exclusive: the holder — a worker, or for an async task the
    ///   iteration it spawned — keeps RUNNING until `exit`; no other code
    ///   touches the cell meanwhile (G1, checked by the loom models, the
    ///   async hand-over included);
    /// - ordered: the Acquire in `enter` makes the previous holder's writes
    ///   (Release in its `exit`) visible; a spawned iteration's executor
    ///   hands it to its polling thread with its own synchronization;
    /// - valid: the cell lives in `self`, kept alive by the Arc, and no
    ///   reference outlives its `with_mut` closure.
    task: UnsafeCell<TaskCell>,
    pub(crate) runtime: Arc<R>,
    /// The name, cooldown, stuck detection and an async task's cancel
    /// slot, if the trigger has any (most have none: one null pointer).
    pub(crate) policies: Option<Box<Policies>>,
    /// `fire_and_wait`'s waiters, from the first call on.
    waiters: std::sync::OnceLock<Box<Waiters>>,
}

impl<R: Runtime> Drop for Core<R> {
    fn drop(&mut self) {
        self.runtime.unregister(self.slot);
    }
}

// SAFETY: `Core` is shared between threads by `Arc`. Every field but `task`
// is `Sync` already. `task` (a `TaskCell`, which is `Send`: its task, async
// task and spawner are) is only accessed by the single holder of the
// RUNNING bit, with Acquire/Release hand-over between holders (see
// `state.rs`), so sharing `&Core` never gives two threads access to the task
// at once: the `Mutex<T>: Sync where T: Send` argument, with the state word
// as the lock.
unsafe impl<R: Runtime> Sync for Core<R> {}

impl<R: Runtime> Core<R> {
    /// A new idle trigger, registered with its scheduler.
    pub(crate) fn new(
        runtime: Arc<R>,
        task: TaskCell,
        policies: Option<Box<Policies>>,
        version: u32,
    ) -> Arc<Self> {
        let watched = policies.as_ref().is_some_and(|p| p.stuck_after_us > 0);
        let core = Arc::new_cyclic(|weak| Self {
            state: State::new(version),
            request: Request::new(version),
            queued: AtomicBool::new(false),
            timer_key: crate::sync::TimerOwned::new(NO_KEY),
            task: UnsafeCell::new(task),
            policies,
            waiters: std::sync::OnceLock::new(),
            slot: runtime.register(weak.clone()),
            stats: Counters::new(version & crate::state::VERSION_MASK),
            runtime,
        });
        if watched {
            core.runtime.watch(&core);
        }
        core
    }

    /// The trigger's name, if it was built with one.
    pub(crate) fn name(&self) -> Option<&str> {
        self.policies.as_ref().and_then(|p| p.name.as_deref())
    }

    /// A statistics snapshot.
    pub(crate) fn stats(&self) -> TriggerStats {
        let state = self.state.snapshot();
        let request = self.request.peek();
        let now = self.runtime.clock().now_us();
        let stuck = self.policies.as_ref().is_some_and(|p| p.is_stuck());
        self.stats.snapshot(self.name(), state, request, now, stuck)
    }

    /// Reads the state word with an RMW, for the shutdown scan.
    pub(crate) fn touch_state(&self) -> Snapshot {
        self.state.touch()
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        self.state.snapshot()
    }

    pub(crate) fn request(&self) -> &Request {
        &self.request
    }

    /// `State::advance`, counted for the statistics (fires are derived from
    /// the version, see `stats.rs`).
    #[inline]
    fn advance(&self) -> u32 {
        let version = self.state.advance();
        self.advanced(version, false);
        version
    }

    /// After every advance, to `version` (`coalesced`: into a reserved
    /// re-run, see `fire_version`): once per 2^16 versions, keeps what
    /// remembers versions within reach of the wrapping comparison — the
    /// statistics count a wrap, a coalesced fire's request word catches up
    /// (see `Request::catch_up`), and the waiters forget records a quarter
    /// of the ring old (see `Waiters::age`). One branch otherwise.
    #[inline]
    fn advanced(&self, version: u32, coalesced: bool) {
        if version & CATCH_UP_MASK == 0 {
            self.stats.advanced(version);
            if coalesced {
                // Such fires bump the state word only.
                self.request.catch_up(version);
            }
            if let Some(waiters) = self.waiters.get() {
                waiters.age(version);
            }
        }
    }

    /// Requests a run as soon as a worker is free.
    pub(crate) fn fire(self: &Arc<Self>) -> Result<(), FireError> {
        self.fire_version().map(|_| ())
    }

    /// [`fire`](Self::fire), returning the version it installed.
    fn fire_version(self: &Arc<Self>) -> Result<u32, FireError> {
        if self.runtime.is_closed() {
            return Err(FireError::Shutdown);
        }
        let (version, coalesced) = self.state.advance_fire();
        self.advanced(version, coalesced);
        if coalesced {
            // A re-run was already reserved and now serves this fire: one
            // RMW in all. The request word keeps the reservation's claim;
            // `exit` re-runs the live version, this one or newer (its
            // version kept within reach by `advanced`). Shutdown began
            // meanwhile: refuse; the reserved re-run stands for the
            // earlier, accepted fire, and `exit` lists it.
            if self.runtime.is_closed() {
                return Err(FireError::Shutdown);
            }
            return Ok(version);
        }
        let replaced = self.request.publish(version, Kind::Due, false);
        if replaced.is_some() && !self.reserve_inline() {
            self.schedule_run(OnClosed::Refuse);
        }
        self.confirm(version, Kind::Due, replaced)?;
        Ok(version)
    }

    /// Fires, then waits for the iteration that serves this fire (see
    /// `wait.rs`) for at most `timeout`.
    pub(crate) fn fire_and_wait(self: &Arc<Self>, timeout: Duration) -> Result<Outcome, WaitError> {
        let fired = self.fire_for_wait()?;
        let deadline = std::time::Instant::now().checked_add(timeout);
        self.waiters()
            .wait(fired, deadline, || self.runtime.is_closed())
    }

    /// A waiter's fire: refused from inside this trigger's own task;
    /// returns the version whose run the waiter waits for.
    pub(crate) fn fire_for_wait(self: &Arc<Self>) -> Result<u32, WaitError> {
        if context::is_running_here(self.address()) {
            return Err(WaitError::OwnTask);
        }
        // Created before the fire, so the run serving it reports to them.
        self.waiters();
        self.fire_version().map_err(|_| WaitError::Shutdown)
    }

    /// The waiters, created on first use.
    pub(crate) fn waiters(&self) -> &Waiters {
        self.waiters.get_or_init(Box::default)
    }

    /// The shutdown scan: waiters re-check (nothing new will start).
    pub(crate) fn wake_waiters(&self) {
        if let Some(waiters) = self.waiters.get() {
            waiters.notify();
        }
    }

    /// An async trigger's cancellation slot.
    pub(crate) fn cancel_slot(&self) -> Option<&CancelSlot> {
        self.policies.as_ref()?.cancel.as_ref()
    }

    /// This trigger's identity for the "running here" mark.
    pub(crate) fn address(&self) -> usize {
        self as *const Self as usize
    }

    /// Fired while an iteration runs: do the dispatcher's job right here —
    /// claim the due request and set RESERVED — instead of waking a worker
    /// only to find the trigger busy. Under a fire storm this keeps the
    /// second worker asleep and the queue empty (G13). Returns `false` if a
    /// worker must still be given the run.
    fn reserve_inline(&self) -> bool {
        if !self.state.snapshot().is_running() {
            return false;
        }
        // None: a worker already took it, or a newer non-due request
        // replaced it; either way someone else is in charge.
        let Some(version) = self.request.take_due() else {
            return true;
        };
        match self.state.reserve(version) {
            Reserve::Reserved | Reserve::Stale => true,
            // The iteration ended meanwhile: hand the request back.
            Reserve::NotRunning => self.request.publish(version, Kind::Due, false).is_none(),
        }
    }

    /// The firer's re-check after publishing (see `scheduler/lifecycle.rs`):
    /// if shutdown began meanwhile, refuse the fire. Its request is taken
    /// back — unless it replaced an armed one: then it stands for that
    /// earlier, accepted run, and stays for the shutdown scan to list.
    /// If someone listed or served it already, the fire was accepted.
    #[inline]
    fn confirm(&self, version: u32, kind: Kind, replaced: Option<Word>) -> Result<(), FireError> {
        if !self.runtime.is_closed() {
            return Ok(());
        }
        let replaced_armed =
            replaced.is_some_and(|old| matches!(old.kind(), Kind::At { .. } | Kind::Due));
        if replaced_armed || self.request.withdraw_own(version, kind) {
            return Err(FireError::Shutdown);
        }
        Ok(())
    }

    /// Requests a run `delay` from now (latest request wins).
    #[inline]
    pub(crate) fn fire_after(self: &Arc<Self>, delay: Duration) -> Result<(), FireError> {
        self.fire_after_from(self.runtime.clock().now_ns(), delay)
    }

    /// Requests a run `delay` after `now_ns`.
    #[inline]
    fn fire_after_from(self: &Arc<Self>, now_ns: u64, delay: Duration) -> Result<(), FireError> {
        if delay.is_zero() {
            return self.fire();
        }
        // The deadline is computed, checked, before the version moves: an
        // overflowing delay must not cancel the live chain (docs/DESIGN.md,
        // "Pitfalls").
        let deadline = deadline_us(now_ns, delay, self.runtime.tick_us())
            .ok_or(FireError::DelayTooLong(delay))?;
        if self.runtime.is_closed() {
            return Err(FireError::Shutdown);
        }
        let version = self.advance();
        let (kind, replaced) = self.publish_at(version, deadline, now_ns / 1_000, OnClosed::Refuse);
        self.confirm(version, kind, replaced)
    }

    /// Requests a run when the scheduler's clock shows `at_ns` (now, if it
    /// already has).
    pub(crate) fn fire_at_ns(self: &Arc<Self>, at_ns: u64) -> Result<(), FireError> {
        let now_ns = self.runtime.clock().now_ns();
        match at_ns.checked_sub(now_ns) {
            Some(delay) if delay > 0 => self.fire_after_from(now_ns, Duration::from_nanos(delay)),
            _ => self.fire(),
        }
    }

    /// Requests a run at `at` on the real clock (see `Trigger::fire_at`).
    pub(crate) fn fire_at(self: &Arc<Self>, at: std::time::Instant) -> Result<(), FireError> {
        match self.runtime.clock().instant_ns(at) {
            Some(at_ns) => self.fire_at_ns(at_ns),
            // Virtual time: the instant counts from the real now.
            None => self.fire_after(at.saturating_duration_since(std::time::Instant::now())),
        }
    }

    /// Requests a run after a uniformly random delay in `[0, window)`.
    /// The whole window must fit the clock's range, so whether the fire is
    /// refused never depends on the draw.
    pub(crate) fn fire_within(self: &Arc<Self>, window: Duration) -> Result<(), FireError> {
        let nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return self.fire();
        }
        let now_ns = self.runtime.clock().now_ns();
        if deadline_us(now_ns, window, self.runtime.tick_us()).is_none() {
            return Err(FireError::DelayTooLong(window));
        }
        let delay = Duration::from_nanos(self.runtime.random_below(nanos));
        self.fire_after_from(now_ns, delay)
    }

    /// Cancels every pending request; an iteration in flight finishes.
    pub(crate) fn suspend(&self) {
        let version = self.advance();
        self.stats.suspended(version);
        // A newer request may already be installed: then it wins, as the
        // later call.
        let _ = self.request.publish(version, Kind::Idle, false);
        // After the publish: a waiter told "suspended" reads the trigger so.
        if let Some(waiters) = self.waiters.get() {
            waiters.suspended(version);
        }
    }

    /// Puts the trigger in the run queue unless it is there already. A
    /// firer's run wakes a worker; the scheduler's own (a worker
    /// re-queueing the trigger it just ran) wakes nobody — that worker goes
    /// back to the queue itself — unless that iteration ran long (see
    /// [`ran_long`](Self::ran_long)).
    ///
    /// An async trigger's dispatch goes to its executor instead (while the
    /// scheduler is open): it only spawns the iteration's future, which
    /// the same executor task then polls — no worker wake-up. A dispatch
    /// its executor drops unpolled falls back to the pool.
    fn schedule_run(self: &Arc<Self>, on_closed: OnClosed) {
        if !self.claim_queue_slot(on_closed) {
            return;
        }
        if let Some(slot) = self.cancel_slot() {
            if !self.runtime.is_closed() {
                slot.spawner
                    .spawn(Box::pin(DispatchJob::new(Arc::clone(self))));
                return;
            }
        }
        let wake = on_closed == OnClosed::Refuse || self.ran_long();
        self.push_to_pool(on_closed, wake);
    }

    /// Whether this trigger's last iteration ran long enough (the pool's
    /// `SHARE_US`, the work worth waking a thread for) that its re-run
    /// should also wake a standby: an
    /// idle worker (or the role holder) that takes the run if it gets a
    /// CPU before the worker that queued it comes back to the queue. On a
    /// machine with more runnable threads than cores, a thread that has
    /// just spent its slice on user code is the one the kernel preempts
    /// next, while one that slept is favoured: first come, first served.
    /// Measured with a 1 ms task and two threads firing flat out on 2
    /// cores: re-running strictly in place gives about 575 iterations/s,
    /// strictly on the woken worker about 580/s, with a standby 570–750/s
    /// from one process to the next (about 650/s on average; the kernel's
    /// placement of the threads decides). The wake-up costs a few µs,
    /// under 2 % of such an iteration; quick iterations keep re-running in
    /// place with no wake-up at all.
    fn ran_long(&self) -> bool {
        let share = SHARE_US;
        self.stats.last_run_us().is_some_and(|us| us >= share)
    }

    /// Puts this trigger, its queue slot claimed, in the run queue, waking
    /// a worker if `wake`.
    pub(crate) fn push_to_pool(self: &Arc<Self>, on_closed: OnClosed, wake: bool) {
        if !self.runtime.queue_run(Arc::downgrade(self), wake) {
            self.closed_under(on_closed);
        }
    }

    /// A dispatch on the executor: as [`dispatch`](Self::dispatch), an
    /// async run due at once put in `adopt` for the caller to poll.
    pub(crate) fn dispatch_here(
        self: &Arc<Self>,
        adopt: &mut Option<(u32, TaskFuture)>,
    ) -> Option<InboxPush<R>> {
        // Acquire: see `# Orderings` (queued); clear before reading.
        self.queued.swap(false, Ordering::Acquire);
        self.serve_due(Some(adopt))
    }

    /// A request met a closed scheduler. The scheduler's own requests are
    /// listed as discarded here; a firer's is left for its `confirm`, which
    /// takes it back and refuses the fire.
    fn closed_under(&self, on_closed: OnClosed) {
        if on_closed == OnClosed::List {
            self.runtime.discard_listed(self);
        }
    }

    /// Installs "run at `deadline`" for `version` and tells the timer: the
    /// publish that sets IN_INBOX pushes the trigger to the inbox; one that
    /// finds it set only wakes the timer if the deadline is earlier than its
    /// sleep target.
    fn publish_at(
        self: &Arc<Self>,
        version: u32,
        deadline: u64,
        now_us: u64,
        on_closed: OnClosed,
    ) -> (Kind, Option<Word>) {
        let (kind, replaced, push) = self.publish_at_later(version, deadline, now_us, on_closed);
        if let Some(push) = push {
            push.deliver(on_closed);
        }
        (kind, replaced)
    }

    /// [`publish_at`](Self::publish_at), leaving the inbox push (if one is
    /// needed) to the caller: a worker hands it to the pool under the lock
    /// it takes next anyway. A request meeting a closed scheduler here is
    /// handled by `on_closed`: a firer's is left for its `confirm`.
    fn publish_at_later(
        self: &Arc<Self>,
        version: u32,
        deadline: u64,
        now_us: u64,
        on_closed: OnClosed,
    ) -> (Kind, Option<Word>, Option<InboxPush<R>>) {
        let kind = Kind::at(deadline, now_us);
        let replaced = self.request.publish(version, kind, true);
        let push = match replaced {
            Some(old) if !old.in_inbox() => Some(InboxPush {
                core: Arc::clone(self),
                now_us,
            }),
            Some(_) => {
                self.runtime.poke_timer(deadline);
                if self.runtime.is_closed() {
                    self.closed_under(on_closed);
                }
                None
            }
            None => None, // a newer request won; its caller tells the timer
        };
        (kind, replaced, push)
    }

    /// Timer side: the AT request the timer read is due. Marks it DUE
    /// unless a newer request replaced it; returns whether the trigger must
    /// be pushed to the run queue (the timer pushes a whole batch at once).
    pub(crate) fn expire(&self, seen: Word, due_at_us: u64) -> bool {
        self.stats.marked_due(seen.version(), due_at_us);
        self.request.expire(seen) && self.claim_queue_slot(OnClosed::List)
    }

    /// If this trigger's run in flight has just become stuck (running
    /// longer than its `stuck_after`), how long it has run (µs); marks it
    /// so it is reported once.
    pub(crate) fn stuck_for(&self, now_us: u64) -> Option<u64> {
        let policies = self.policies.as_ref()?;
        if policies.stuck_after_us == 0 {
            return None;
        }
        let running_for = now_us.saturating_sub(policies.running_since_us()?);
        (running_for >= policies.stuck_after_us && policies.mark_stuck()).then_some(running_for)
    }

    /// How long this trigger's last iteration ran (µs), as the timer role
    /// holder's guess of how long its next one will; `None` before its
    /// first run ends (nothing known).
    pub(crate) fn expected_run_us(&self) -> Option<u64> {
        if self.cancel_slot().is_some() {
            // An async iteration only spawns its future on the worker.
            return Some(0);
        }
        self.stats.last_run_us()
    }

    /// Sets `queued`; returns whether this caller must push the trigger. A
    /// trigger already queued is not pushed again — unless the queue was
    /// closed under it (see [`Core::closed_under`]).
    fn claim_queue_slot(&self, on_closed: OnClosed) -> bool {
        // Release: see `# Orderings` (queued).
        if !self.queued.swap(true, Ordering::Release) {
            return true;
        }
        #[cfg(feature = "tracing")]
        tracing::trace!(
            trigger = self.name().unwrap_or("<unnamed>"),
            "fire coalesced into the queued run"
        );
        if self.runtime.is_closed() {
            self.closed_under(on_closed);
        }
        false
    }

    /// Worker side: serves whatever request is live and due.
    /// Returns the re-armed trigger's inbox push, if its task asked for a
    /// next run: the caller delivers it ([`InboxPush::deliver`], or the
    /// pool's next lock).
    pub(crate) fn dispatch(self: &Arc<Self>) -> Option<InboxPush<R>> {
        // Acquire: see `# Orderings` (queued); clear before reading.
        self.queued.swap(false, Ordering::Acquire);
        self.serve_due(None)
    }

    /// Takes the due request, if any, and runs it: the body of
    /// [`dispatch`](Self::dispatch), also used where an async iteration
    /// re-runs in place.
    fn serve_due(self: &Arc<Self>, adopt: Adopt<'_>) -> Option<InboxPush<R>> {
        let version = self.request.take_due()?;
        match self.state.enter(version) {
            Enter::Entered => {
                // Entered after the shutdown scan? Then the run is discarded
                // (and listed), like any armed run: only iterations already
                // running when shutdown began finish.
                let discard = || {
                    let _ = self.state.exit(version);
                };
                if self.runtime.is_closed() && !self.runtime.admit_late(self, discard) {
                    return None;
                }
                match self.cooldown_end() {
                    Some((end_us, now_us)) => self.defer(version, end_us, now_us),
                    None => self.run(version, adopt),
                }
            }
            Enter::Reserved | Enter::Stale => None,
        }
    }

    /// The end of the minimum interval after the last start, and now, if
    /// that end is still ahead. Read while holding RUNNING: the Acquire in
    /// `enter` makes the previous run's start visible.
    fn cooldown_end(&self) -> Option<(u64, u64)> {
        let min_us = self.policies.as_ref()?.min_interval_us;
        if min_us == 0 {
            return None;
        }
        // The real clock's start was rounded down to the microsecond: the
        // run began somewhere in [start, start + 1), so the interval surely
        // has passed only from start + 1 + min on. Virtual time is exact.
        let rounding = u64::from(!self.runtime.clock().is_manual());
        let end_us = self
            .stats
            .last_start_us()?
            .saturating_add(min_us)
            .saturating_add(rounding);
        let now_us = self.runtime.clock().now_us();
        (end_us > now_us).then_some((end_us, now_us))
    }

    /// A due run came too soon after the previous start: give RUNNING back
    /// without running, and arm the live request for the cooldown's end
    /// (fires during the cooldown coalesce there; latest wins as always).
    fn defer(self: &Arc<Self>, version: u32, end_us: u64, now_us: u64) -> Option<InboxPush<R>> {
        let exit = self.state.exit(version);
        // No run happened. If the shutdown scan read RUNNING before this
        // `exit`, the AcqRel `exit` read its AcqRel `touch`: `closed` is
        // seen here, and the scan (which holds the report's lock throughout)
        // has listed this trigger in flight — strike it. Otherwise the scan
        // reads it idle and lists nothing in flight.
        if self.runtime.is_closed() {
            self.runtime.unlist_in_flight(self);
        }
        let live = match exit {
            Exit::Rerun { version } => version,
            Exit::Done { live: true } => version,
            Exit::Done { live: false } => return None, // a newer request rules
        };
        self.publish_at_later(live, end_us, now_us, OnClosed::List)
            .2
    }

    /// Runs one iteration (this worker holds RUNNING), then exits; or, for
    /// an async task, spawns the iteration's future, which exits when it
    /// completes (see `iteration.rs`).
    fn run(self: &Arc<Self>, version: u32, adopt: Adopt<'_>) -> Option<InboxPush<R>> {
        #[cfg(feature = "tracing")]
        let _span = tracing::trace_span!(
            "iteration",
            trigger = self.name().unwrap_or("<unnamed>"),
            version
        )
        .entered();
        let start_us = self.runtime.clock().now_us();
        self.stats.started(version, start_us);
        if let Some(waiters) = self.waiters.get() {
            waiters.started(version);
        }
        context::reset_observed();
        if let Some(policies) = &self.policies {
            policies.started(start_us);
        }
        let called = {
            let _running = context::running(self.address());
            // SAFETY: see the invariant on `Core::task`.
            self.task.with_mut(|cell| unsafe { (*cell).call() })
        };
        match called {
            Called::Returned(result) => {
                let outcome = match &result {
                    Ok(_) if context::observed() => Outcome::Cancelled,
                    Ok(_) => Outcome::Completed,
                    Err(_) => Outcome::Panicked,
                };
                self.end(version, result, outcome, None)
            }
            Called::Started(future) if adopt.is_some() => {
                if let Some(slot) = adopt {
                    *slot = Some((version, future));
                }
                None
            }
            Called::Started(future) => {
                // An async task is always bound with its executor.
                let Some(slot) = self.cancel_slot() else {
                    return self.end(version, Ok(None), Outcome::Cancelled, None);
                };
                // Spawned outside the cell's borrow: an executor that drops
                // the job at once (it shut down) ends the iteration right
                // here, and the next holder may then touch the cell.
                slot.spawner
                    .spawn(Box::pin(Iteration::new(Arc::clone(self), version, future)));
                None
            }
        }
    }

    /// An async iteration of `version` ended (on whichever thread polled
    /// it): as [`end`](Self::end), delivering a re-arm at once.
    /// `adopt`: see [`Adopt`]; `None` when the executor dropped the
    /// iteration unpolled (serving on the spot there could recurse through
    /// an executor that drops every job).
    pub(crate) fn end_async(
        self: &Arc<Self>,
        version: u32,
        result: std::thread::Result<Option<Duration>>,
        outcome: Outcome,
        adopt: Adopt<'_>,
    ) {
        if let Some(push) = self.end(version, result, outcome, adopt) {
            push.deliver_now();
        }
    }

    /// Ends the iteration of `version`, which this thread holds RUNNING
    /// for: a panic is reported, statistics, waiters and the shutdown
    /// report learn the outcome, then `exit`, and the re-run or re-arm.
    fn end(
        self: &Arc<Self>,
        version: u32,
        result: std::thread::Result<Option<Duration>>,
        outcome: Outcome,
        adopt: Adopt<'_>,
    ) -> Option<InboxPush<R>> {
        // SAFETY: see the invariant on `Core::task`.
        let retry = self
            .task
            .with_mut(|cell| unsafe { (*cell).settle(&result) });
        // Everything an observer of this end may read is written before it
        // is told: the statistics before the panic hook runs, and the
        // statistics, the shutdown report and `exit` before the waiters
        // wake (their lock orders the Relaxed counters).
        let panicked = outcome == Outcome::Panicked;
        // One clock read serves the statistics and the re-arm deadline.
        let end_ns = self.runtime.clock().now_ns();
        self.stats.ended(end_ns / 1_000, panicked);
        if let Some(policies) = &self.policies {
            policies.ended();
        }
        let next = match result {
            Ok(next) => next,
            Err(payload) => {
                self.runtime.report_panic(self.name(), payload.as_ref());
                crate::sync::drop_payload(payload);
                retry
            }
        };
        // The outcome goes to the shutdown report if the scan listed this
        // run: looked up before `exit`, or after it if the scan had not run
        // yet — it may read RUNNING between the first look and `exit`; the
        // AcqRel `exit` then reads the scan's AcqRel `touch`, so the second
        // look sees `closed` and the scan's report (`loom_shutdown` checks
        // every side).
        let recorded = self.runtime.is_closed() && self.runtime.finish_listed(self, outcome);
        let exit = self.state.exit(version);
        if !recorded && self.runtime.is_closed() {
            self.runtime.finish_listed(self, outcome);
        }
        // After `exit`, so a newer run may already have started (or even
        // ended) on another thread: the waiters' record only moves forward,
        // and a newer run serves this run's waiters too.
        if let Some(waiters) = self.waiters.get() {
            waiters.finished(version, outcome);
        }
        match exit {
            // The follow-up goes back through the pool rather than looping
            // here, so a fire storm cannot pin this worker (G10).
            Exit::Rerun { version } => self.rerun(version, adopt),
            Exit::Done { live: true } => self.rearm(version, next?, end_ns, adopt),
            // A newer request rules. Ending in a poll, serve it here if it is
            // due and its firer has not reserved it yet (under a storm, the
            // moment between a fire's `advance` and its `reserve`): the
            // claim is atomic, so the firer then finds nothing to hand the
            // pool, or hands it and the dispatch finds nothing.
            Exit::Done { live: false } if adopt.is_some() => self.serve_due(adopt),
            Exit::Done { live: false } => None,
        }
    }

    /// `version` is due again at once: through the run queue, or served on
    /// the spot for an async iteration ending in a poll (see [`Adopt`]).
    /// The pool's fairness (G10) is not at stake there: serving only calls
    /// the task for its next future, which the executor task polls among
    /// the executor's others.
    fn rerun(self: &Arc<Self>, version: u32, adopt: Adopt<'_>) -> Option<InboxPush<R>> {
        if adopt.is_none() {
            self.requeue(version);
            return None;
        }
        self.request.publish(version, Kind::Due, false)?;
        self.serve_due(adopt)
    }

    /// Scheduler side: `version` is due again at once (a re-run after a
    /// reservation, or a zero re-arm delay).
    fn requeue(self: &Arc<Self>, version: u32) {
        if self.request.publish(version, Kind::Due, false).is_some() {
            self.schedule_run(OnClosed::List);
        }
    }

    /// The iteration of the live `version`, which returned at `now_ns`,
    /// asked for its next run `delay` later.
    fn rearm(
        self: &Arc<Self>,
        version: u32,
        delay: Duration,
        now_ns: u64,
        adopt: Adopt<'_>,
    ) -> Option<InboxPush<R>> {
        if delay.is_zero() {
            return self.rerun(version, adopt);
        }
        // A delay beyond the clock's range can never come due: stop, as
        // with `None`.
        let mut deadline = deadline_us(now_ns, delay, self.runtime.tick_us())?;
        if self.runtime.coalesces() {
            deadline = coalesce(deadline, delay);
        }
        self.publish_at_later(version, deadline, now_ns / 1_000, OnClosed::List)
            .2
    }
}

#[cfg(all(test, not(loom)))]
mod cell_tests {
    use super::*;

    #[test]
    fn async_support_costs_a_sync_trigger_no_bytes() {
        // One fat pointer for either kind of task (a retry back-off lives in
        // the task's own allocation), and the async task's cancel slot and
        // the name in the (usually absent) policy box.
        assert_eq!(std::mem::size_of::<TaskCell>(), 16);
        assert_eq!(std::mem::size_of::<Option<Box<Policies>>>(), 8);
    }
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests;
