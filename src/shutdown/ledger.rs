//! The ledger a runtime keeps for shutdown: the registry of live
//! triggers, the shutdown scan, the report being drafted and the
//! cancellation signal tasks poll. The core reaches it through
//! `Runtime::ledger`; the rules that make the report exact are in this
//! room's module docs.

use super::report::{DiscardedRun, InFlightRun, ShutdownReport};
use crate::chunked::Chunked;
use crate::context::Outcome;
use crate::core::{Core, Runtime};
use crate::request::{at_least, Kind};
use crate::state::next_version;
use crate::sync::{lock, Arc, AtomicBool, Mutex, Ordering, Weak};
use std::time::Duration;

/// The report while shutdown proceeds; in-flight entries are keyed by the
/// trigger's address (stable while the scanning worker holds the `Arc`).
#[derive(Default)]
struct Draft {
    began_us: u64,
    report: ShutdownReport,
    /// Parallel to `report.in_flight`: the trigger's key and the version
    /// the scan moved it on to (see [`own_entry`]); `None` once the
    /// iteration finished (so a later trigger at a reused address is
    /// never mistaken for it).
    in_flight_keys: Vec<Option<(usize, u32)>>,
}

/// The shutdown ledger of one runtime: the registry of live triggers,
/// the report being drafted, the cancellation signal, the monitor's watch
/// list. The core reaches it through `Runtime::ledger`.
pub(crate) struct Ledger<R: Runtime> {
    registry: Mutex<Registry<R>>,
    /// Triggers with a `stuck_after`, for the monitor to check.
    watched: Mutex<Vec<Weak<Core<R>>>>,
    draft: Mutex<Option<Draft>>,
    /// Set by `shutdown_now`; polled by tasks through [`is_cancelled`].
    pub(crate) cancel: Arc<AtomicBool>,
}

struct Registry<R: Runtime> {
    /// In chunks: registering never copies the whole registry under its
    /// lock (see `chunked.rs`).
    slots: Chunked<Weak<Core<R>>>,
    free: Vec<u32>,
    /// The shutdown scan has taken its list: a trigger registered from
    /// now on is not scanned, and starts closed.
    scanned: bool,
}

fn key<R: Runtime>(core: &Core<R>) -> usize {
    core.address()
}

/// The index of the unfinished in-flight entry that is the iteration of
/// `core` which exited having read the live version `seen` (`None`: not
/// exited yet). The scan moved the version on past every version read
/// before it (`State::touch_for_scan`) and noted the one it wrote: an
/// `exit` that read it, or a later one, came after the scan, so the scan
/// saw that iteration running; one that read an older version came before
/// the scan, and the entry is a later iteration's.
fn own_entry<R: Runtime>(draft: &Draft, core: &Core<R>, seen: Option<u32>) -> Option<usize> {
    draft.in_flight_keys.iter().position(|k| {
        k.is_some_and(|(listed, scanned_at)| {
            listed == key(core) && seen.map_or(true, |seen| at_least(seen, scanned_at))
        })
    })
}

impl<R: Runtime> Default for Ledger<R> {
    fn default() -> Self {
        Self {
            registry: Mutex::new(Registry {
                slots: Chunked::new(),
                free: Vec::new(),
                scanned: false,
            }),
            watched: Mutex::new(Vec::new()),
            draft: Mutex::new(None),
            cancel: Arc::new(AtomicBool::new(false)),
        }
    }
}

impl<R: Runtime> Ledger<R> {
    /// Registers a new trigger; returns its slot, and whether the shutdown
    /// scan has taken its list already (then the trigger starts closed).
    pub(crate) fn register(&self, core: Weak<Core<R>>) -> (u32, bool) {
        let mut registry = lock(&self.registry);
        let slot = match registry.free.pop() {
            Some(slot) => {
                registry.slots[slot as usize] = core;
                slot
            }
            None => {
                registry.slots.push(core);
                u32::try_from(registry.slots.len() - 1).expect("fewer than 2^32 triggers")
            }
        };
        (slot, registry.scanned)
    }

    /// Whether `shutdown_now` was called, for an async iteration (read
    /// under its cancel slot's lock; see `core/iteration.rs`). Relaxed: the
    /// iteration that sees it only ends, and its end records the outcome in
    /// the report through the state word (`Core::end` looks again after
    /// its AcqRel `exit`), not through this flag. (It was Release/Acquire
    /// while the end looked only once; `loom_async` needs neither now.)
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// `shutdown_now`, after setting the flag: wakes every async iteration
    /// in flight so it sees it at its next `.await`.
    pub(crate) fn wake_async(&self) {
        for core in self.live() {
            if let Some(slot) = core.cancel_slot() {
                slot.wake();
            }
        }
    }

    /// Adds a trigger with a `stuck_after` to the monitor's checks.
    pub(crate) fn watch(&self, core: &Arc<Core<R>>) {
        lock(&self.watched).push(Arc::downgrade(core));
    }

    /// Whether no trigger with a `stuck_after` is on the watch list (the
    /// monitor may then park: nothing of its own to check).
    pub(crate) fn watches_nothing(&self) -> bool {
        lock(&self.watched).is_empty()
    }

    /// Reports, once per run, every watched trigger whose run in flight
    /// started more than its `stuck_after` before `now_us` (the monitor,
    /// every tick); forgets dropped triggers.
    pub(crate) fn check_stuck(&self, now_us: u64, report: impl Fn(&Core<R>, u64)) {
        let (mut stuck, mut looked_at) = (Vec::new(), Vec::new());
        lock(&self.watched).retain(|core| {
            let Some(core) = core.upgrade() else {
                return false;
            };
            if let Some(running_for) = core.stuck_for(now_us) {
                stuck.push((core, running_for));
            } else {
                // Kept until the lock is released: its other holders may
                // let go meanwhile, and dropping the last reference runs
                // the task's destructor, which may bind a watched trigger.
                looked_at.push(core);
            }
            true
        });
        drop(looked_at);
        // The hook is user code: called with no lock held (it may bind a
        // watched trigger itself), and the triggers dropped after it.
        for (core, running_for) in stuck {
            report(&core, running_for);
        }
    }

    /// Forgets a dropped trigger's slot.
    pub(crate) fn unregister(&self, slot: u32) {
        let mut registry = lock(&self.registry);
        registry.slots[slot as usize] = Weak::new();
        registry.free.push(slot);
    }

    /// Every live trigger (for statistics).
    pub(crate) fn live(&self) -> Vec<Arc<Core<R>>> {
        lock(&self.registry)
            .slots
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// The shutdown scan (see the module docs). Called once, by the thread
    /// that closed the scheduler, after the queues are closed. Returns the
    /// triggers it looked at, for the caller to let go after its own lock:
    /// a worker may drop its reference meanwhile, and the scan's is then
    /// the last (the task's destructor may run any code, the scheduler's
    /// calls included).
    #[must_use = "dropping the scanned triggers here may run a task's destructor under the caller's lock"]
    pub(crate) fn scan(&self, now_us: u64) -> Vec<Arc<Core<R>>> {
        let cores = {
            let mut registry = lock(&self.registry);
            registry.scanned = true;
            registry
                .slots
                .iter()
                .filter_map(Weak::upgrade)
                .collect::<Vec<_>>()
        };
        {
            let mut guard = lock(&self.draft);
            let draft = guard.insert(Draft {
                began_us: now_us,
                ..Draft::default()
            });
            for core in &cores {
                let closed = core.request().close();
                // An iteration in flight has its version moved on: no claim
                // enters after this, and the iteration can tell whether
                // this scan saw it (`State::touch_for_scan`).
                let state = core.touch_for_scan();
                match closed.kind() {
                    Kind::At { .. } | Kind::Due => draft.list_discarded(core, closed.kind()),
                    Kind::Taken
                        if !state.is_running() && core.claim_unstarted(closed.version()) =>
                    {
                        draft.list_discarded(core, Kind::Due);
                    }
                    Kind::Resuming if !state.is_running() => {
                        if let Some(kind) = core.settle_at_close(now_us) {
                            draft.list_discarded(core, kind);
                        }
                    }
                    _ => {}
                }
                if state.is_running() {
                    let scanned_at = next_version(state.version());
                    draft.in_flight_keys.push(Some((key(core), scanned_at)));
                    draft.report.in_flight.push(InFlightRun {
                        trigger: core.name().map(str::to_owned),
                        outcome: Outcome::StillRunning,
                    });
                }
            }
        }
        // `closed` is set: waiters whose fire no run serves give up now.
        for core in &cores {
            core.wake_waiters();
        }
        cores
    }

    /// A worker entered an iteration and then saw the scheduler closed:
    /// returns whether to run it (the scan listed it in flight). If not,
    /// `discard` is called under the report lock and the run is listed.
    pub(crate) fn admit_late(&self, core: &Core<R>, discard: impl FnOnce() -> bool) -> bool {
        let mut draft = lock(&self.draft);
        let Some(draft) = draft.as_mut() else {
            return true; // closed, but the scan has not run yet: it will list it
        };
        // Listed in flight, it entered before the scan: no claim enters
        // after it (`State::touch_for_scan`).
        if own_entry(draft, core, None).is_some() {
            return true;
        }
        if discard() {
            draft.list_discarded(core, Kind::Due);
        }
        false
    }

    /// A run that the closed request word refused, and whose listing the
    /// caller claimed (`Request::take_mark`): list it as discarded. The
    /// scan has run (it closed the word).
    pub(crate) fn list(&self, core: &Core<R>, kind: Kind) {
        if let Some(draft) = lock(&self.draft).as_mut() {
            draft.list_discarded(core, kind);
        }
    }

    /// Records how an iteration listed in flight ended; returns whether
    /// the scan had run (if not, the caller looks again after its `exit`).
    /// `seen`: the live version the iteration's `exit` read, if it has
    /// exited — the entry is its own only if the scan came before that
    /// `exit` (see [`own_entry`]); `None` before its `exit`, when an entry
    /// of its trigger can only be its own.
    pub(crate) fn finish(&self, core: &Core<R>, outcome: Outcome, seen: Option<u32>) -> bool {
        let mut draft = lock(&self.draft);
        let Some(draft) = draft.as_mut() else {
            return false;
        };
        if let Some(index) = own_entry(draft, core, seen) {
            draft.in_flight_keys[index] = None;
            draft.report.in_flight[index].outcome = outcome;
        }
        true
    }

    /// `core` took RUNNING only to find its cooldown not over, and has
    /// given it back without running (its `exit` read the live version
    /// `seen`): if the scan listed that as an iteration in flight, strike
    /// it (no run happened; the deferred request is listed as discarded
    /// instead).
    pub(crate) fn unlist(&self, core: &Core<R>, seen: u32) {
        let mut draft = lock(&self.draft);
        let Some(draft) = draft.as_mut() else {
            return;
        };
        if let Some(index) = own_entry(draft, core, Some(seen)) {
            draft.in_flight_keys.remove(index);
            draft.report.in_flight.remove(index);
        }
    }

    /// Notes threads detached after the grace period.
    pub(crate) fn detached(&self, threads: usize) {
        if let Some(draft) = lock(&self.draft).as_mut() {
            draft.report.detached_threads += threads;
        }
    }

    /// The report so far (`None` before shutdown).
    pub(crate) fn report(&self) -> Option<ShutdownReport> {
        lock(&self.draft).as_ref().map(|draft| draft.report.clone())
    }
}

impl Draft {
    fn list_discarded<R: Runtime>(&mut self, core: &Core<R>, kind: Kind) {
        let due_in = kind
            .deadline(self.began_us)
            .map_or(0, |at| at.saturating_sub(self.began_us));
        self.report.discarded.push(DiscardedRun {
            trigger: core.name().map(str::to_owned),
            due_in: Duration::from_micros(due_in),
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Ledger;
    use crate::core::tests::TestRuntime;
    use crate::sync::Arc;

    #[test]
    fn the_scan_hands_its_references_to_the_caller() {
        // A worker may let go of a trigger while the scan holds it; the
        // scan's reference is then the last, and must be dropped by the
        // caller, after its lock — not inside the scan.
        let runtime = TestRuntime::new();
        let ledger = Ledger::<TestRuntime>::default();
        let core = runtime.bind(|| None);
        ledger.register(Arc::downgrade(&core));
        let weak = Arc::downgrade(&core);
        let scanned = ledger.scan(0);
        drop(core); // the other holder goes
        assert_eq!(scanned.len(), 1);
        assert!(weak.upgrade().is_some(), "the caller still holds it");
        drop(scanned);
        assert!(weak.upgrade().is_none(), "the caller's drop was the last");
    }
}
