//! The shared heart of one trigger.
//!
//! It holds the trigger's state word, request word, queue flags and task. It also holds
//! the fire, dispatch and run paths that drive them.
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
//! Two flags make every queue hold a trigger at most once, as G9 and G13 require. The
//! `QUEUED` flag of `marks` covers the run queue. IN_INBOX covers the timer inbox. It is a bit of
//! the request word, set by the same compare-exchange that installs an AT request.
//!
//! A firer may find its flag already set. Then a pending dispatch or inbox entry will
//! read the request word after clearing the flag. So that dispatch serves the newest
//! request.
//!
//! # Orderings
//!
//! * `queued`: the `QUEUED` flag is set with a *Release* `fetch_or` after publishing. It
//!   is cleared with an *Acquire* `fetch_and` before reading the request. Suppose a firer
//!   finds the flag set. Then the clear comes later in the modification order of `marks`
//!   and synchronizes with the firer. Every write to `marks` after the slot's store is an
//!   RMW, so no write between them breaks the release sequence. So the consumer reads the
//!   firer's request or a newer one. No fire is lost, as G4 requires. The opposite direction carries nothing anyone reads. The
//!   ordering audit weakened those halves with no model failing. IN_INBOX needs no extra
//!   edge, since it lives in the request word itself. See `request/mod.rs`.
//! * The RUNNING bit guards the task cell. See `state.rs`.
//!
//! # Files, by job
//!
//! | file | job |
//! |------|-----|
//! | `mod.rs` | [`Core`]: the fields, who may touch them, accessors |
//! | `runtime.rs` | [`Runtime`]: everything the core asks of the runtime |
//! | `fire.rs` | the firer side: `fire`, `fire_after` and kin, `fire_and_wait`, debounce, `suspend` (G6), giving way in a storm |
//! | `hand_off.rs` | the hand-offs to the runtime: into the run queue, the timer's inbox, and the timer's expiry |
//! | `pause.rs` | the off switch, `pause` and `resume` (G17) |
//! | `run.rs` | the runner side: `dispatch`, `run`, `end`, re-run and re-arm |
//! | `task_cell.rs` | the task cell ([`TaskCell`], touched only by the RUNNING holder): the task in place if it fits in a pointer, else boxed |
//! | `iteration.rs` | an async iteration, polled by its executor |
//! | `wait_future.rs` | `fire_and_wait_async`'s future |
//!
//! No file here imports the scheduler. The core reaches its runtime only through
//! [`Runtime`], which `scheduler/door.rs` implements. The runtime calls these methods
//! here.
//!
//! | method | who | what for |
//! |--------|-----|----------|
//! | `dispatch` | a worker | serve the live request of a trigger it popped from the run queue |
//! | `expire` | the timer | take a due deadline, if the request word still holds it |
//! | `request`, `expected_run_us` | the timer | read the deadline to file; estimate a due batch |
//! | `stuck_for` | the monitor | how long a run has been in flight |
//! | `wake_waiters` | shutdown scan | record for the waiters that the scan looked at this trigger, waking them |
//! | `cancel_slot`, `name`, `stats` | shutdown scan, stats | read-only looks |
//! | `touch_for_scan` | shutdown scan | read the state word, moving an iteration in flight's version on (see `State::touch_for_scan`) |
//! | `InboxPush::deliver` / `closed` | the virtual driver, an async trigger's executor (`deliver`); a worker (`closed`, delivering through the pool lock otherwise) | deliver the timer hand-over a `dispatch` returned, or drop it at shutdown |
//!
//! # Ground rules
//!
//! | field | who may touch it |
//! |---|---|
//! | `state` | anyone, by RMW only (see `state.rs`); RUNNING makes its holder the runner |
//! | `request` | anyone, by RMW only (see `request.rs`) |
//! | `marks` | the slot: set at creation, read-only after. `QUEUED`: set by whoever pushes to the run queue, cleared by the dispatch that pops it. `TIMED`: set before the first install that may set IN_INBOX |
//! | `task` | the RUNNING holder only (see the invariant on the field) |
//! | `stats` | counters written by firers and the runner, each with its own rule (see `stats/mod.rs`) |
//! | `runtime` | set at creation, read-only after |
//! | `rare` | created at creation for a trigger with policies or a start version, else on first use: the policies (read-only), the rare counters (see `stats/mod.rs`), and `fire_and_wait`'s waiters, created on first use behind their own lock |
//! | `handles` | the user's handles (`Trigger`), by RMW only (see [`Core::release_handle`]) |

use crate::async_task::CancelSlot;
use crate::policy::trigger::Policies;
use crate::request::Request;
use crate::state::{Snapshot, State};
use crate::stats::{Counters, LastDelay, RareCounters, TriggerStats};
use crate::sync::{Arc, AtomicU32, Ordering, UnsafeCell};
use crate::wait::Waiters;

#[cfg(loom)]
pub(crate) use counted::LoomCounter;
pub(crate) use counted::{Counted, WeakCounted};
pub(crate) use hand_off::{InboxPush, OnClosed};
pub(crate) use pause::ResumeTo;
pub(crate) use runtime::{Alive, Runtime, Turn};
pub(crate) use task_cell::TaskCell;

mod closed;
mod counted;
mod fire;
mod hand_off;
pub(crate) mod iteration;
mod pause;
mod run;
pub(crate) mod runtime;
mod task_cell;
#[cfg(feature = "tokio")]
pub(crate) mod wait_future;

/// Registry slots are below it, so that they fit under the flags of `Core::marks`.
pub(crate) const SLOT_LIMIT: u32 = 1 << 30;
/// In `Core::marks`: the trigger sits in the worker run queue. It is the first bit above
/// the slots.
const QUEUED: u32 = SLOT_LIMIT;
/// In `Core::marks`: the trigger has asked the timer for a deadline at least once.
///
/// Only then can the timer hold it. See [`Counted::let_go`]. It is set before the install that
/// sets IN_INBOX, and never cleared.
const TIMED: u32 = 1 << 31;

/// Versions between two looks of `Core::advanced`, minus one.
///
/// It is far below the 2^29 versions that the wrapping comparison tells apart.
const CATCH_UP_MASK: u32 = (1 << 16) - 1;

/// The fields are in a fixed order, `repr(C)`, hottest first.
///
/// The timer reads `request`, the slot in `marks` that places its wheel entry, and the
/// statistics' `due_*` pair. With the counts in front, they take the allocation's first 44
/// bytes. That is one or two cache lines rather than three. It matters because expiry walks
/// 100,000 cold cores a second in the idle benchmark, and each line is a miss.
///
/// The whole core is 96 bytes, and 112 with feature `metrics`, with no padding. The
/// reference counts in front add 8 bytes, as `counted.rs` explains. A task no larger than a
/// pointer lives inside the core, as `task_cell.rs` explains.
/// `core::tests::a_core_stays_within_its_byte_budget` holds it there.
#[repr(C)]
pub(crate) struct Core<R: Runtime> {
    request: Request,
    state: State,
    /// This trigger's slot in the scheduler's registry, below `SLOT_LIMIT`, with the flags
    /// `QUEUED` and `TIMED` above it.
    ///
    /// The three share one word rather than three. The slot is set once, right
    /// after the trigger is registered, by an RMW on its bits. The trigger is registered
    /// whole, so the shutdown scan never misses it. Each flag is changed by an RMW on its
    /// own bit, so neither the slot nor the other flag is ever written by it.
    marks: AtomicU32,
    /// The user's handles to this trigger, the `Trigger`s.
    ///
    /// They are counted here rather than in an `Arc` of their own, so a trigger takes one
    /// allocation, not two. The count starts at 1, for the handle `bind` returns. Once it is
    /// 0, it stays 0, because an upgrade refuses it.
    handles: AtomicU32,
    /// The delay the last iteration returned, which a resume re-arms. It sits here, where
    /// the statistics' 8-byte alignment would leave padding.
    pub(crate) last_delay: LastDelay,
    /// Its `due_*` pair comes first. See `Counters`.
    stats: Counters,
    /// Invariant: only the holder of the RUNNING bit accesses it, in `run` and `end` only.
    /// The holder holds the bit from `State::enter` returning `Entered` to `State::exit`.
    ///
    /// That is sound for three reasons.
    /// - Exclusive. The holder keeps RUNNING until `exit`. It is a worker, or for an async
    ///   task the iteration it spawned. No other code touches the cell meanwhile. That is G1,
    ///   checked by the loom models, the async hand-over included.
    /// - Ordered. The Acquire in `enter` makes the previous holder's writes visible, which
    ///   the Release in its `exit` published. A spawned iteration's executor hands it to its
    ///   polling thread with its own synchronization.
    /// - Valid. The cell lives in `self`, which its `Counted` handle keeps alive. No reference
    ///   outlives its `with_mut` closure.
    task: UnsafeCell<TaskCell>,
    pub(crate) runtime: Arc<R>,
    /// What most triggers never need, from its first use on. See [`Rare`].
    ///
    /// A `OnceBox` is one pointer. A `OnceLock<Box<_>>` would add its 8-byte state to every
    /// trigger. Racing first users may each build a rare part. One is installed and the
    /// others are dropped unused.
    rare: crate::sync::OnceBox<Rare>,
    /// The first-run warnings the last handle gave, for the models.
    #[cfg(loom)]
    pub(crate) first_run_warnings: std::sync::atomic::AtomicUsize,
}

/// The part of a trigger most never need, behind one pointer.
///
/// It holds the policies, the counters of suspends, panics and version wraps, and
/// `fire_and_wait`'s waiters.
struct Rare {
    /// The name, cooldown, debounce, stuck detection and an async task's cancel slot, if the
    /// trigger has any.
    ///
    /// They are set at creation and read-only after. A trigger with policies has its rare part
    /// from the start.
    policies: Option<Box<Policies>>,
    counters: RareCounters,
    waiters: std::sync::OnceLock<Box<Waiters>>,
    /// The trigger was suspended when it was paused, or while paused.
    ///
    /// A resume onto its schedule then leaves it idle until the next fire, as G6 requires. It
    /// is read and written only under the runtime's pause lock.
    ///
    /// Relaxed: the lock orders it. It is a `std` atomic even under loom. The lock orders
    /// every access, so a model would gain nothing from seeing it.
    stays_suspended: std::sync::atomic::AtomicBool,
    /// The version the last resume installed its request with. It is the start version if
    /// no resume has.
    ///
    /// Take a suspend whose install a newer request refused. It tells by this version whether
    /// a resume came after its advance. See `Core::suspend`. It is kept under the pause lock,
    /// as `stays_suspended` is.
    resumed_at: std::sync::atomic::AtomicU32,
}

impl Rare {
    fn new(policies: Option<Box<Policies>>, start_version: u32) -> Box<Self> {
        Box::new(Self {
            policies,
            counters: RareCounters::new(start_version),
            waiters: std::sync::OnceLock::new(),
            stays_suspended: std::sync::atomic::AtomicBool::new(false),
            resumed_at: std::sync::atomic::AtomicU32::new(start_version),
        })
    }
}

/// More handles than this is a leak, such as `mem::forget` in a loop.
///
/// The count then aborts, as `Arc` does, rather than wrap.
const MAX_HANDLES: u32 = u32::MAX / 2;

impl<R: Runtime> Drop for Core<R> {
    fn drop(&mut self) {
        crate::metrics::triggers(-1.0);
        self.runtime.ledger().unregister(self.slot());
    }
}

// SAFETY: `Core` is shared between threads by `Counted`. Every field but `task` is `Sync`
// already. `task` is a `TaskCell`, which is `Send` because the task it owns is, sync or
// async. Only the single holder of the RUNNING bit accesses it. Holders hand it over
// with Acquire/Release, as `state.rs` describes. So sharing `&Core` never gives two
// threads access to the task at once. It is the `Mutex<T>: Sync where T: Send` argument,
// with the state word as the lock.
unsafe impl<R: Runtime> Sync for Core<R> {}

impl<R: Runtime> Core<R> {
    /// A new idle trigger, registered with its scheduler.
    pub(crate) fn new(
        runtime: Arc<R>,
        task: TaskCell,
        policies: Option<Box<Policies>>,
        version: u32,
    ) -> Counted<Self> {
        let watched = policies.as_ref().is_some_and(|p| p.stuck_after_us > 0);
        let core = Counted::new(Self {
            state: State::new(version),
            request: Request::new(version),
            task: UnsafeCell::new(task),
            // Policies need the rare part from the start. So does a start version, since it counts
            // as advances that were no fires.
            rare: match (policies, version & crate::state::VERSION_MASK) {
                (None, 0) => crate::sync::OnceBox::new(),
                (policies, start) => crate::sync::OnceBox::with_value(Rare::new(policies, start)),
            },
            marks: AtomicU32::new(0),
            stats: Counters::new(version & crate::state::VERSION_MASK),
            runtime,
            handles: AtomicU32::new(1),
            last_delay: LastDelay::new(),
            #[cfg(loom)]
            first_run_warnings: std::sync::atomic::AtomicUsize::new(0),
        });
        // The trigger is registered whole. So the shutdown scan, which upgrades what it finds
        // registered, never misses it. A trigger registered after the scan took its list is
        // closed here, as the scan closes the others. See `Request::close`. Nobody else holds
        // it yet.
        let (slot, scanned) = core.runtime.ledger().register(Counted::downgrade(&core));
        // An RMW, since the registry already lends the trigger out, to a
        // scan or a stats listing. Neither writes a flag yet, but an RMW stays right if
        // one did. Relaxed: read by the trigger's drop, which the last reference orders.
        core.marks.fetch_or(slot, Ordering::Relaxed);
        if scanned {
            let _ = core.request.close();
        }
        if watched {
            core.runtime.watch(&core);
        }
        crate::metrics::triggers(1.0);
        core
    }

    /// This trigger's slot in its scheduler's registry, below `SLOT_LIMIT`. It is the
    /// same for the trigger's whole life, and no other live trigger of the scheduler has it.
    pub(crate) fn slot(&self) -> u32 {
        // Relaxed: stored before the trigger was handed to anyone but the registry, and
        // whoever holds a reference got it through a synchronizing hand-over since.
        self.marks.load(Ordering::Relaxed) & (SLOT_LIMIT - 1)
    }

    /// One more handle, cloned from a live one.
    pub(crate) fn add_handle(&self) {
        // Relaxed: as with `Arc::clone`, nothing is handed over. The new handle comes from a
        // live one, which keeps the count above 0.
        if self.handles.fetch_add(1, Ordering::Relaxed) > MAX_HANDLES {
            std::process::abort();
        }
    }

    /// One more handle, from a weak one. Returns `false` if every handle is gone.
    ///
    /// The trigger then stays suspended for good.
    pub(crate) fn upgrade_handle(&self) -> bool {
        // Relaxed: as with `WeakCounted::upgrade`'s increment, nothing is handed over by it.
        // The compare-exchange only keeps 0 sticky.
        let upgraded = self
            .handles
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n != 0).then_some(n + 1)
            });
        if upgraded.is_ok_and(|n| n > MAX_HANDLES) {
            std::process::abort(); // as `add_handle`
        }
        upgraded.is_ok()
    }

    /// A handle goes. Returns whether it was the last one.
    ///
    /// AcqRel, as in `Arc`'s drop, which is Release, and Acquire for the last. Every handle's
    /// calls happen before the last handle's drop. So what that drop reads and does comes
    /// after them. Its first-run check sees a fire made through another handle.
    /// `loom_trigger`'s `the_last_handle_sees_the_fires_of_the_others` fails with either half
    /// weakened. And its suspend comes after every such fire in the state word's order.
    pub(crate) fn release_handle(&self) -> bool {
        self.handles.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// The trigger's policies, if it was built with any.
    #[inline]
    pub(crate) fn policies(&self) -> Option<&Policies> {
        self.rare.get()?.policies.as_deref()
    }

    /// The trigger's name, if it was built with one.
    pub(crate) fn name(&self) -> Option<&str> {
        self.policies().and_then(|p| p.name.as_deref())
    }

    /// Sets the low 32 bits of the iteration count, so that a model reaches its carry.
    #[cfg(loom)]
    pub(crate) fn preset_iterations(&self, low: u32) {
        self.stats.preset_iterations(low);
    }

    /// A statistics snapshot.
    pub(crate) fn stats(&self) -> TriggerStats {
        let state = self.state.snapshot();
        let request = self.request.peek();
        let now = self.runtime.timing().clock.now_us();
        let stuck = self.policies().is_some_and(|p| p.is_stuck());
        let closed = self.runtime.is_closed();
        self.stats.snapshot(
            || self.rare_counters(),
            self.name(),
            state,
            request,
            now,
            stuck,
            closed,
        )
    }

    /// The shutdown scan's look at the state word, an RMW.
    ///
    /// It moves the version of an iteration in flight on, past any claim not entered yet.
    /// See `State::touch_for_scan`. It is not a fire.
    pub(crate) fn touch_for_scan(&self) -> Snapshot {
        let state = self.state.touch_for_scan();
        if state.is_running() {
            self.rare().counters.not_a_fire();
        }
        state
    }

    pub(crate) fn snapshot(&self) -> Snapshot {
        self.state.snapshot()
    }

    pub(crate) fn request(&self) -> &Request {
        &self.request
    }

    /// `State::advance`, counted for the statistics.
    ///
    /// Fires are derived from the version, as `stats/mod.rs` explains.
    #[inline]
    fn advance(&self) -> u32 {
        let version = self.state.advance();
        self.advanced(version, false);
        version
    }

    /// Runs after every advance, to `version`.
    ///
    /// `coalesced` says the fire went into a reserved re-run, as in `fire_version`. Once per
    /// 2^16 versions, the call keeps what remembers versions within reach of the wrapping
    /// comparison. The statistics count a wrap. A coalesced fire's request word catches up,
    /// through `Request::catch_up`. The waiters forget records a quarter of the ring old,
    /// through `Waiters::age`. Otherwise the call costs one branch.
    #[inline]
    fn advanced(&self, version: u32, coalesced: bool) {
        if version & CATCH_UP_MASK == 0 {
            if version == 0 {
                self.rare().counters.wrapped();
            }
            if coalesced {
                // Such fires bump the state word only.
                self.request.catch_up(version);
            }
            if let Some(waiters) = self.existing_waiters() {
                waiters.age(version);
            }
        }
    }

    /// The trigger's debounce policy, if it has one.
    #[inline]
    pub(crate) fn debounce(&self) -> Option<&crate::policy::trigger::Debounce> {
        self.policies().and_then(|p| p.debounce.as_ref())
    }
}

impl<R: Runtime> Counted<Core<R>> {
    /// The last handle is gone and the trigger is suspended. This brings the trigger to a
    /// timer turn at once, so the timer drops any wheel entry it holds for it.
    ///
    /// That entry may be the one of a request since replaced, since `fire`, `suspend` and
    /// `pause` leave it. Or it is the one the suspend just replaced. Wheel entries hold
    /// strong references, as `scheduler/timer.rs` explains. Without this call, the task would
    /// live until that entry's deadline, maybe an hour away.
    ///
    /// Either this call sets IN_INBOX and pushes the trigger for a turn at once, or the flag
    /// was set. In the second case the trigger is in the inbox, or on its way there as a
    /// worker's re-arm, pushed at the worker's next look for work. Then the turn that takes it
    /// out reads the suspend and drops the entry. The timer is poked for that turn at once,
    /// under the pool's lock. So an item already pushed is turned now. A push still to come
    /// reads this drop under the same lock, finds no handle left, and asks for a turn at once
    /// itself. A closed runtime holds nothing.
    ///
    /// A trigger that never asked for a deadline has nothing with the timer. Its task goes
    /// with the last reference, here as a rule.
    ///
    /// The read of `TIMED` is Relaxed, for these reasons. Every install that may set IN_INBOX
    /// sets `TIMED` first and is a Release RMW. See [`mark_timed`](Core::mark_timed). The drop
    /// already synchronized with each such install that the timer may still hold. Its own
    /// suspend's install is an AcqRel RMW that reads it, or a later value of its release
    /// sequence. On a paused trigger, the suspend writes nothing. There the pause's Acquire
    /// install read it. If another handle paused, it read the pauser's install through the
    /// handle count's AcqRel. An install after the pause is refused. An install after the
    /// drop's would need a newer version, which only a handle gives. A shut-down runtime holds
    /// nothing.
    pub(crate) fn let_go(&self) {
        if self.marks.load(Ordering::Relaxed) & TIMED == 0 {
            return;
        }
        match self.request.enter_inbox() {
            Some(word) => {
                let now_us = self.runtime.timing().clock.now_us();
                let stamp = crate::request::Stamp::new(word.version(), word.kind(), now_us);
                let _ = self.runtime.to_timer(self, stamp, true);
            }
            None => self.runtime.poke_timer(Turn::Now),
        }
    }
}

impl<R: Runtime> Core<R> {
    /// Marks the trigger as one the timer may hold, before an install that may set IN_INBOX.
    /// See [`let_go`](Counted::let_go).
    ///
    /// Relaxed: the install's Release carries it. A load comes first, because the flag is set
    /// once and read on every re-arm.
    #[inline]
    pub(crate) fn mark_timed(&self) {
        if self.marks.load(Ordering::Relaxed) & TIMED == 0 {
            self.marks.fetch_or(TIMED, Ordering::Relaxed);
        }
    }

    /// Sets the `QUEUED` flag with `order`, and returns whether it was set already.
    #[inline]
    fn set_queued(&self, order: Ordering) -> bool {
        self.marks.fetch_or(QUEUED, order) & QUEUED != 0
    }

    /// Clears the `QUEUED` flag, with Acquire. See `queued` in `# Orderings`.
    #[inline]
    pub(crate) fn clear_queued(&self) {
        self.marks.fetch_and(!QUEUED, Ordering::Acquire);
    }

    /// Whether every handle is gone. It is for good, since an upgrade refuses 0.
    ///
    /// Relaxed: it is read under the pool's lock, or by the timer. The timer only decides who
    /// drops a reference. See [`queue_to_drop`](Self::queue_to_drop).
    pub(crate) fn handles_gone(&self) -> bool {
        self.handles.load(Ordering::Relaxed) == 0
    }

    /// The timer let go of a reference to a trigger with no handle left, which may be its
    /// last. Returns whether to queue it as a run, so that a worker drops it with the role
    /// put back.
    ///
    /// A `true` claims the queue slot. If the trigger is queued already, a worker drops the
    /// queue's reference too, and this one is not the last. Its dispatch finds no request to
    /// serve.
    ///
    /// Relaxed `fetch_or`: nothing is published for the dispatch to read, since no handle can fire.
    /// The queue's lock hands the trigger to the worker.
    pub(crate) fn queue_to_drop(&self) -> bool {
        self.handles_gone() && !self.set_queued(Ordering::Relaxed)
    }

    /// Whether a run is requested, due or armed, for a trigger that never ran, with the
    /// runtime still open.
    ///
    /// That is the first fire of a trigger whose handle was not kept. A periodic trigger
    /// dropped to stop it is armed too, but it has run.
    pub(crate) fn has_pending_first_run(&self) -> bool {
        use crate::request::Kind;
        let armed = matches!(self.request.peek().kind(), Kind::Due | Kind::At { .. });
        armed && !self.stats.ran() && !self.runtime.is_closed()
    }

    /// The rare part, created on first use.
    fn rare(&self) -> &Rare {
        self.rare.get_or_init(|| Rare::new(None, 0))
    }

    /// The rare counters, if the trigger has any. Having none means all are zero.
    fn rare_counters(&self) -> Option<&RareCounters> {
        self.rare.get().map(|rare| &rare.counters)
    }

    /// The waiters, created on first use.
    pub(crate) fn waiters(&self) -> &Waiters {
        self.rare().waiters.get_or_init(Box::default)
    }

    /// The waiters, if any were ever created.
    fn existing_waiters(&self) -> Option<&Waiters> {
        self.rare.get()?.waiters.get().map(|waiters| &**waiters)
    }

    /// The shutdown scan looked at this trigger.
    ///
    /// Waiters whose fire no run has started give up, since nothing new will start.
    pub(crate) fn wake_waiters(&self) {
        if let Some(waiters) = self.existing_waiters() {
            waiters.scanned();
        }
    }

    /// An async trigger's cancellation slot.
    pub(crate) fn cancel_slot(&self) -> Option<&CancelSlot> {
        self.policies()?.cancel.as_ref()
    }

    /// This trigger's identity for the "running here" mark.
    pub(crate) fn address(&self) -> usize {
        self as *const Self as usize
    }

    /// If this trigger's run in flight has just become stuck, returns how long it has run,
    /// in µs.
    ///
    /// Stuck means running longer than its `stuck_after`. The call marks the run, so it is
    /// reported once.
    pub(crate) fn stuck_for(&self, now_us: u64) -> Option<u64> {
        let policies = self.policies()?;
        if policies.stuck_after_us == 0 {
            return None;
        }
        let running_for = now_us.saturating_sub(policies.running_since_us()?);
        (running_for >= policies.stuck_after_us && policies.mark_stuck()).then_some(running_for)
    }

    /// How long this trigger's last iteration ran, in µs.
    ///
    /// The timer role holder takes it as its guess of how long the next one will run. It is
    /// `None` before the first run ends, since nothing is known yet.
    pub(crate) fn expected_run_us(&self) -> Option<u64> {
        if self.cancel_slot().is_some() {
            // An async iteration only spawns its future on the worker.
            return Some(0);
        }
        self.stats.last_run_us()
    }
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests;
