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
//! # Files, by job
//!
//! | file | job |
//! |------|-----|
//! | `mod.rs` | [`Core`]: the fields, who may touch them, accessors |
//! | `runtime.rs` | [`Runtime`]: everything the core asks of the runtime |
//! | `fire.rs` | the firer side (`fire`, `fire_after`, `fire_and_wait`, debounce) and the hand-offs to the runtime: into the run queue, the timer's inbox, the shutdown report |
//! | `give_way.rs` | a firer whose fire only lands on a pending run yields its CPU once in a while, so a storm's firers leave the worker its core |
//! | `pause.rs` | the stop calls: `suspend` (G6), and the off switch, `pause` and `resume` (G17) |
//! | `run.rs` | the runner side: `dispatch`, `run`, `end`, re-run and re-arm |
//! | `task_cell.rs` | the task cell ([`TaskCell`], touched only by the RUNNING holder): the task in place if it fits in a pointer, else boxed |
//! | `iteration.rs` | an async iteration, polled by its executor |
//! | `wait_future.rs` | `fire_and_wait_async`'s future |
//!
//! No file here imports the scheduler: the core reaches its runtime only
//! through [`Runtime`], which `scheduler/door.rs` implements. What the
//! runtime calls here:
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
//! | `queued` | set by whoever pushes to the run queue, cleared by the dispatch that pops it |
//! | `timer_key` | the timer role holder only (the role passes through the pool's lock) |
//! | `task` | the RUNNING holder only (see the invariant on the field) |
//! | `stats` | counters written by firers and the runner, each with its own rule (see `stats/mod.rs`) |
//! | `slot`, `runtime` | set at creation, read-only after |
//! | `rare` | created at creation for a trigger with policies or a start version, else on first use: the policies (read-only), the rare counters (see `stats/mod.rs`), and `fire_and_wait`'s waiters, created on first use behind their own lock |
//! | `handles` | the user's handles (`Trigger`), by RMW only (see [`Core::release_handle`]) |

use crate::async_task::CancelSlot;
use crate::policy::Policies;
use crate::request::Request;
use crate::state::{Snapshot, State};
use crate::stats::{Counters, LastDelay, RareCounters, TriggerStats};
use crate::sync::{Arc, AtomicBool, AtomicU32, Ordering, UnsafeCell};
use crate::wait::Waiters;

pub(crate) use fire::{InboxPush, OnClosed};
pub(crate) use pause::ResumeTo;
pub(crate) use runtime::{Alive, Runtime, Turn};
pub(crate) use task_cell::TaskCell;

mod closed;
mod fire;
mod give_way;
pub(crate) mod iteration;
mod pause;
mod run;
pub(crate) mod runtime;
mod task_cell;
#[cfg(feature = "tokio")]
pub(crate) mod wait_future;

/// `Core::timer_key` when the trigger has no wheel entry.
pub(crate) const NO_KEY: u32 = u32::MAX;

/// Versions between two looks of `Core::advanced`, minus one: far below
/// the 2^29 versions the wrapping comparison tells apart.
const CATCH_UP_MASK: u32 = (1 << 16) - 1;

/// The fields are in a fixed order (`repr(C)`), hottest first: the timer's
/// expiry of a due entry reads `request`, `queued`, `timer_key` and the
/// statistics' `due_*` pair, so with the `Arc` header they take the
/// allocation's first 60 bytes (one or two cache lines rather than three:
/// expiry walks 100,000 cold cores a second in the idle benchmark, and
/// each line is a miss). The whole core
/// is 120 bytes (136 with feature `metrics`), 136 with the `Arc` header,
/// and a task no larger than a pointer lives inside it (see
/// `task_cell.rs`): `core::tests::a_core_stays_within_its_byte_budget`
/// holds it there.
#[repr(C)]
pub(crate) struct Core<R: Runtime> {
    request: Request,
    state: State,
    /// The timer's wheel key for this trigger; read and written only by the
    /// timer (see `scheduler/timer.rs`).
    pub(crate) timer_key: crate::sync::TimerOwned,
    /// The trigger sits in the worker run queue.
    queued: AtomicBool,
    /// The trigger has asked the timer for a deadline at least once: only
    /// then can the timer hold it (see [`let_go`](Self::let_go)). Set
    /// before the install that sets IN_INBOX, never cleared.
    timed: AtomicBool,
    /// This trigger's slot in the scheduler's registry (here, where it
    /// fills what would be padding). Set once, right after the trigger is
    /// built: registered whole, it is never missed by the shutdown scan.
    slot: std::sync::atomic::AtomicU32,
    /// The user's handles to this trigger (`Trigger`s), counted here
    /// rather than in an `Arc` of their own: one allocation per trigger,
    /// not two. Starts at 1, for the handle `bind` returns; once 0, it
    /// stays 0 (an upgrade refuses it).
    handles: AtomicU32,
    /// The delay the last iteration returned: what `resume` re-arms
    /// (written by the holder of RUNNING).
    last_delay: LastDelay,
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
    /// What most triggers never need, from its first use on (see
    /// [`Rare`]).
    /// A `OnceBox`: one pointer (a `OnceLock<Box<_>>` would add its 8-byte
    /// state to every trigger). Racing first users may each build a rare
    /// part; one is installed, the others dropped unused.
    rare: crate::sync::OnceBox<Rare>,
    /// The first-run warnings the last handle gave, for the models.
    #[cfg(loom)]
    pub(crate) first_run_warnings: std::sync::atomic::AtomicUsize,
}

/// The part of a trigger most never need, behind one pointer: its
/// policies, the counters of suspends, panics and version wraps, and
/// `fire_and_wait`'s waiters.
struct Rare {
    /// The name, cooldown, debounce, stuck detection and an async task's
    /// cancel slot, if the trigger has any: set at creation (a trigger
    /// with policies has its rare part from the start), read-only after.
    policies: Option<Box<Policies>>,
    counters: RareCounters,
    waiters: std::sync::OnceLock<Box<Waiters>>,
    /// The trigger was suspended when it was paused, or while paused: a
    /// resume onto its schedule leaves it idle until the next fire (G6).
    /// Read and written only under the runtime's pause lock (Relaxed: the
    /// lock orders it). A `std` atomic even under loom: the lock orders
    /// every access, so a model would gain nothing from seeing it.
    stays_suspended: std::sync::atomic::AtomicBool,
    /// The version the last resume installed its request with (the start
    /// version if none has): a suspend whose install a newer request
    /// refused tells by it whether a resume came after its advance (see
    /// `Core::suspend`). Under the pause lock, as `stays_suspended`.
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

/// More handles than this is a leak (`mem::forget` in a loop): abort, as
/// `Arc` does, rather than wrap the count.
const MAX_HANDLES: u32 = u32::MAX / 2;

impl<R: Runtime> Drop for Core<R> {
    fn drop(&mut self) {
        crate::metrics::triggers(-1.0);
        // Relaxed: see `new`.
        self.runtime
            .ledger()
            .unregister(self.slot.load(std::sync::atomic::Ordering::Relaxed));
    }
}

// SAFETY: `Core` is shared between threads by `Arc`. Every field but `task`
// is `Sync` already. `task` (a `TaskCell`, which is `Send`: the task it
// owns, sync or async, is) is only accessed by the single holder of the
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
        let core = Arc::new(Self {
            state: State::new(version),
            request: Request::new(version),
            queued: AtomicBool::new(false),
            timed: AtomicBool::new(false),
            timer_key: crate::sync::TimerOwned::new(NO_KEY),
            task: UnsafeCell::new(task),
            // Policies, and a start version (it counts as advances that
            // were no fires), need the rare part from the start.
            rare: match (policies, version & crate::state::VERSION_MASK) {
                (None, 0) => crate::sync::OnceBox::new(),
                (policies, start) => crate::sync::OnceBox::with_value(Rare::new(policies, start)),
            },
            slot: std::sync::atomic::AtomicU32::new(0),
            stats: Counters::new(version & crate::state::VERSION_MASK),
            runtime,
            handles: AtomicU32::new(1),
            last_delay: LastDelay::new(),
            #[cfg(loom)]
            first_run_warnings: std::sync::atomic::AtomicUsize::new(0),
        });
        // Registered whole, so the shutdown scan, which upgrades what it
        // finds registered, never misses it; registered after the scan
        // took its list, it is closed here as the scan closes the others'
        // (see `Request::close`): nobody else holds it yet.
        let (slot, scanned) = core.runtime.ledger().register(Arc::downgrade(&core));
        // Relaxed: written before the trigger is shared; read by its drop.
        core.slot.store(slot, std::sync::atomic::Ordering::Relaxed);
        if scanned {
            let _ = core.request.close();
        }
        if watched {
            core.runtime.watch(&core);
        }
        crate::metrics::triggers(1.0);
        core
    }

    /// One more handle, cloned from a live one.
    pub(crate) fn add_handle(&self) {
        // Relaxed: as `Arc::clone`: the new handle comes from a live one,
        // which keeps the count above 0; nothing is handed over.
        if self.handles.fetch_add(1, Ordering::Relaxed) > MAX_HANDLES {
            std::process::abort();
        }
    }

    /// One more handle, from a weak one: `false` if every handle is gone
    /// (then the trigger stays suspended for good).
    pub(crate) fn upgrade_handle(&self) -> bool {
        // Relaxed: as `Weak::upgrade`'s increment, nothing is handed over
        // by it; the compare-exchange only keeps 0 sticky.
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

    /// A handle goes; returns whether it was the last one.
    ///
    /// AcqRel, as `Arc`'s drop (Release, and Acquire for the last): every
    /// handle's calls happen before the last handle's drop, so what that
    /// drop reads and does comes after them — its first-run check sees a
    /// fire made through another handle (`loom_trigger`'s
    /// `the_last_handle_sees_the_fires_of_the_others` fails with either
    /// half weakened), and its suspend comes after every such fire in the
    /// state word's order.
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

    /// A statistics snapshot.
    pub(crate) fn stats(&self) -> TriggerStats {
        let state = self.state.snapshot();
        let request = self.request.peek();
        let now = self.runtime.timing().clock.now_us();
        let stuck = self.policies().is_some_and(|p| p.is_stuck());
        let closed = self.runtime.is_closed();
        self.stats.snapshot(
            self.rare_counters(),
            self.name(),
            state,
            request,
            now,
            stuck,
            closed,
        )
    }

    /// The shutdown scan's look at the state word, an RMW: an iteration in
    /// flight has the version moved on past any claim not entered yet
    /// (see `State::touch_for_scan`). Not a fire.
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

    /// `State::advance`, counted for the statistics (fires are derived from
    /// the version, see `stats/mod.rs`).
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
    pub(crate) fn debounce(&self) -> Option<&crate::policy::Debounce> {
        self.policies().and_then(|p| p.debounce.as_ref())
    }

    /// The last handle is gone (and the trigger suspended): brings the
    /// trigger to a timer turn at once, so the timer drops any wheel entry
    /// it holds for it — the entry of a request since replaced (`fire`,
    /// `suspend`, `pause` leave it) or the one the suspend just replaced.
    /// Wheel entries hold strong references (see `scheduler/timer.rs`):
    /// without this, the task would live until that entry's deadline,
    /// maybe an hour away.
    ///
    /// Either this call sets IN_INBOX and pushes the trigger for a turn at
    /// once, or the flag was set: the trigger is in the inbox, or on its
    /// way there (a worker's re-arm, pushed at its next look for work).
    /// Then the turn that takes it out reads the suspend and drops the
    /// entry, and the timer is poked for that turn at once: under the
    /// pool's lock, so an item already pushed is turned now, and a push
    /// still to come reads this drop under the same lock (no handle left)
    /// and asks for a turn at once itself. A closed runtime holds nothing.
    ///
    /// A trigger that never asked for a deadline has nothing with the timer
    /// (its task goes with the last reference, here as a rule). Relaxed
    /// read of `timed`: every install that may set IN_INBOX sets `timed`
    /// first (see [`mark_timed`](Self::mark_timed)) and is a Release RMW,
    /// and the drop already synchronized with each such install that the
    /// timer may still hold. Its own suspend's install is an AcqRel RMW
    /// that reads it (or a later value of its release sequence). On a
    /// paused trigger (a suspend that writes nothing), the pause's Acquire
    /// install read it — the pauser's, through the handle count's AcqRel
    /// if another handle paused — and an install after the pause is
    /// refused. An install after the drop's would need a newer version,
    /// which only a handle gives. A shut-down runtime holds nothing.
    pub(crate) fn let_go(self: &Arc<Self>) {
        if !self.timed.load(Ordering::Relaxed) {
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

    /// Marks the trigger as one the timer may hold, before an install that
    /// may set IN_INBOX (see [`let_go`](Self::let_go)). Relaxed: the
    /// install's Release carries it. A load first: set once, read on every
    /// re-arm.
    #[inline]
    pub(crate) fn mark_timed(&self) {
        if !self.timed.load(Ordering::Relaxed) {
            self.timed.store(true, Ordering::Relaxed);
        }
    }

    /// Whether every handle is gone (for good: an upgrade refuses 0).
    /// Relaxed: read under the pool's lock, or by the timer, which only
    /// decides who drops a reference (see [`queue_to_drop`](Self::queue_to_drop)).
    pub(crate) fn handles_gone(&self) -> bool {
        self.handles.load(Ordering::Relaxed) == 0
    }

    /// The timer let go of a reference to a trigger with no handle left,
    /// which may be its last: whether to queue it as a run, so a worker
    /// drops it with the role put back (claiming the queue slot; if the
    /// trigger is queued already, the queue's reference is dropped by a
    /// worker too, and this one is not the last). Its dispatch finds no
    /// request to serve. Relaxed swap: nothing is published for the
    /// dispatch to read (no handle can fire), and the queue's lock hands
    /// the trigger to the worker.
    pub(crate) fn queue_to_drop(&self) -> bool {
        self.handles_gone() && !self.queued.swap(true, Ordering::Relaxed)
    }

    /// Whether a run is requested (due or armed) for a trigger that never
    /// ran, the runtime still open: the first fire of a trigger whose
    /// handle was not kept. (A periodic trigger dropped to stop it is
    /// armed too, but has run.)
    pub(crate) fn has_pending_first_run(&self) -> bool {
        use crate::request::Kind;
        let armed = matches!(self.request.peek().kind(), Kind::Due | Kind::At { .. });
        armed && !self.stats.ran() && !self.runtime.is_closed()
    }

    /// The rare part, created on first use.
    fn rare(&self) -> &Rare {
        self.rare.get_or_init(|| Rare::new(None, 0))
    }

    /// The rare counters, if the trigger has any (none: all zero).
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

    /// The shutdown scan looked at this trigger: waiters whose fire no
    /// run has started for give up (nothing new will start).
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

    /// If this trigger's run in flight has just become stuck (running
    /// longer than its `stuck_after`), how long it has run (µs); marks it
    /// so it is reported once.
    pub(crate) fn stuck_for(&self, now_us: u64) -> Option<u64> {
        let policies = self.policies()?;
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
}

#[cfg(all(test, not(loom)))]
pub(crate) mod tests;
