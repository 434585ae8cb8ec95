//! The ledger a runtime keeps for shutdown.
//!
//! It holds the registry of live triggers, the shutdown scan, the report being drafted,
//! and the cancellation signal that tasks poll. The core reaches it through
//! `Runtime::ledger`. The rules that make the report exact are in this room's module
//! docs.

use super::report::{DiscardedRun, InFlightRun, ShutdownReport};
use super::slots::{Slots, Writer, CAPACITY};
use crate::context::Outcome;
use crate::core::{Core, Runtime};
use crate::core::{Counted, WeakCounted};
use crate::request::{at_least, Kind};
use crate::state::next_version;
use crate::sync::{lock, Arc, AtomicBool, Mutex, Ordering};
use std::time::Duration;

/// The report while shutdown proceeds.
///
/// In-flight entries are keyed by the trigger's address. It is stable while the scanning
/// worker holds its reference.
#[derive(Default)]
struct Draft {
    began_us: u64,
    report: ShutdownReport,
    /// Parallel to `report.in_flight`, the trigger's key and the version the scan moved it on
    /// to. See [`own_entry`].
    ///
    /// An entry is `None` once the iteration finished. So a later trigger at a reused address
    /// is never mistaken for it.
    in_flight_keys: Vec<Option<(usize, u32)>>,
}

/// The shutdown ledger of one runtime.
///
/// It holds the registry of live triggers, the report being drafted, the cancellation
/// signal, and the monitor's watch list. The core reaches it through `Runtime::ledger`.
pub(crate) struct Ledger<R: Runtime> {
    registry: Mutex<Registry<R>>,
    /// Triggers with a `stuck_after`, for the monitor to check.
    watched: Mutex<Vec<WeakCounted<Core<R>>>>,
    draft: Mutex<Option<Draft>>,
    /// Set by `shutdown_now`, and polled by tasks through [`is_cancelled`](Self::is_cancelled).
    pub(crate) cancel: Arc<AtomicBool>,
}

struct Registry<R: Runtime> {
    /// A weak handle per trigger, at its slot. Tables of a fixed size, so registering never
    /// copies the whole registry under its lock, and the timer reads a slot without the
    /// lock. See `slots.rs`.
    slots: Writer<Core<R>>,
    /// Slots below it have held a trigger.
    len: u32,
    free: Vec<u32>,
    /// The shutdown scan has taken its list. A trigger registered from now on is not scanned,
    /// and starts closed.
    scanned: bool,
}

impl<R: Runtime> Registry<R> {
    /// Every live trigger, in slot order.
    fn live(&self) -> Vec<Counted<Core<R>>> {
        (0..self.len)
            .filter_map(|slot| self.slots.upgrade(slot))
            .collect()
    }
}

fn key<R: Runtime>(core: &Core<R>) -> usize {
    core.address()
}

/// The index of the unfinished in-flight entry that is the iteration of `core` which
/// exited having read the live version `seen`. `None` means not exited yet.
///
/// The scan moved the version on past every version read before it, in
/// `State::touch_for_scan`. It noted the one it wrote. An `exit` that read it, or a later
/// one, came after the scan. So the scan saw that iteration running. An `exit` that read
/// an older version came before the scan, and the entry is a later iteration's.
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
                slots: Writer::default(),
                len: 0,
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
    /// Registers a new trigger. Returns its slot, and whether the shutdown scan has taken its
    /// list already.
    ///
    /// In that case the trigger starts closed.
    pub(crate) fn register(&self, core: WeakCounted<Core<R>>) -> (u32, bool) {
        let mut registry = lock(&self.registry);
        let slot = match registry.free.pop() {
            Some(slot) => slot,
            None => {
                // Checked before the slot is taken, so a refused trigger holds none.
                let slot = registry.len;
                assert!(
                    (slot as usize) < CAPACITY,
                    "a scheduler holds fewer than {CAPACITY} triggers"
                );
                registry.len += 1;
                slot
            }
        };
        registry.slots.set(slot, core);
        (slot, registry.scanned)
    }

    /// The registry's slots, for a timer to read. See `slots.rs`.
    pub(crate) fn slots(&self) -> Arc<Slots<Core<R>>> {
        lock(&self.registry).slots.shared()
    }

    /// Whether `shutdown_now` was called, for an async iteration.
    ///
    /// It is read under the iteration's cancel slot's lock. See `core/iteration.rs`.
    ///
    /// Relaxed: the iteration that sees it only ends. Its end records the outcome in the
    /// report through the state word, not through this flag. `Core::end` looks again after
    /// its AcqRel `exit`. The flag was Release/Acquire while the end looked only once.
    /// `loom_async` needs neither now.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }

    /// Called by `shutdown_now` after it sets the flag. Wakes every async iteration in
    /// flight, so it sees the flag at its next `.await`.
    pub(crate) fn wake_async(&self) {
        for core in self.live() {
            if let Some(slot) = core.cancel_slot() {
                slot.wake();
            }
        }
    }

    /// Adds a trigger with a `stuck_after` to the monitor's checks.
    pub(crate) fn watch(&self, core: &Counted<Core<R>>) {
        lock(&self.watched).push(Counted::downgrade(core));
    }

    /// Whether no trigger with a `stuck_after` is on the watch list.
    ///
    /// The monitor may then park, with nothing of its own to check.
    pub(crate) fn watches_nothing(&self) -> bool {
        lock(&self.watched).is_empty()
    }

    /// Reports, once per run, every watched trigger whose run in flight started more than
    /// its `stuck_after` before `now_us`. It forgets dropped triggers.
    ///
    /// The monitor calls it every tick.
    pub(crate) fn check_stuck(&self, now_us: u64, report: impl Fn(&Core<R>, u64)) {
        let (mut stuck, mut looked_at) = (Vec::new(), Vec::new());
        lock(&self.watched).retain(|core| {
            let Some(core) = core.upgrade() else {
                return false;
            };
            if let Some(running_for) = core.stuck_for(now_us) {
                stuck.push((core, running_for));
            } else {
                // Kept until the lock is released. Its other holders may let go
                // meanwhile. Dropping the last reference runs the task's
                // destructor, which may bind a watched trigger.
                looked_at.push(core);
            }
            true
        });
        drop(looked_at);
        // The hook is user code, so it is called with no lock held. It may
        // bind a watched trigger itself. The triggers are dropped after it.
        for (core, running_for) in stuck {
            report(&core, running_for);
        }
    }

    /// Forgets a dropped trigger's slot.
    pub(crate) fn unregister(&self, slot: u32) {
        let mut registry = lock(&self.registry);
        let weak = registry.slots.take(slot);
        registry.free.push(slot);
        drop(registry);
        drop(weak);
    }

    /// Every live trigger, for statistics.
    pub(crate) fn live(&self) -> Vec<Counted<Core<R>>> {
        lock(&self.registry).live()
    }

    /// The shutdown scan. See the module docs.
    ///
    /// It is called once, by the thread that closed the scheduler, after the queues are
    /// closed. It returns the triggers it looked at, for the caller to let go after its own
    /// lock. A worker may drop its reference meanwhile, and the scan's is then the last. The
    /// task's destructor may run any code, the scheduler's calls included.
    #[must_use = "dropping the scanned triggers here may run a task's destructor under the caller's lock"]
    pub(crate) fn scan(&self, now_us: u64) -> Vec<Counted<Core<R>>> {
        let cores = {
            let mut registry = lock(&self.registry);
            registry.scanned = true;
            registry.live()
        };
        {
            let mut guard = lock(&self.draft);
            let draft = guard.insert(Draft {
                began_us: now_us,
                ..Draft::default()
            });
            for core in &cores {
                let closed = core.request().close();
                // An iteration in flight has its version moved on. So no claim
                // enters after this, and the iteration can tell whether this scan
                // saw it. See `State::touch_for_scan`.
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
        // `closed` is set, so waiters whose fire no run serves give up now.
        for core in &cores {
            core.wake_waiters();
        }
        cores
    }

    /// A worker entered an iteration and then saw the scheduler closed. Returns whether to
    /// run it, which holds if the scan listed it in flight.
    ///
    /// If not, `discard` is called under the report lock and the run is listed.
    pub(crate) fn admit_late(&self, core: &Core<R>, discard: impl FnOnce() -> bool) -> bool {
        let mut draft = lock(&self.draft);
        let Some(draft) = draft.as_mut() else {
            return true; // closed, but the scan has not run yet and will list it
        };
        // Listed in flight, it entered before the scan. No claim enters after
        // it. See `State::touch_for_scan`.
        if own_entry(draft, core, None).is_some() {
            return true;
        }
        if discard() {
            draft.list_discarded(core, Kind::Due);
        }
        false
    }

    /// A run that the closed request word refused, and whose listing the caller claimed in
    /// `Request::take_mark`. This lists it as discarded.
    ///
    /// The scan has run, since it closed the word.
    pub(crate) fn list(&self, core: &Core<R>, kind: Kind) {
        if let Some(draft) = lock(&self.draft).as_mut() {
            draft.list_discarded(core, kind);
        }
    }

    /// Records how an iteration listed in flight ended. Returns whether the scan had run.
    ///
    /// If it had not, the caller looks again after its `exit`. `seen` is the live version
    /// that the iteration's `exit` read, if it has exited. The entry is then its own only if
    /// the scan came before that `exit`. See [`own_entry`]. `seen` is `None` before the
    /// `exit`, when an entry of its trigger can only be its own.
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

    /// `core` took RUNNING only to find its cooldown not over, and has given it back without
    /// running. Its `exit` read the live version `seen`.
    ///
    /// If the scan listed that as an iteration in flight, this strikes it. No run happened.
    /// The deferred request is listed as discarded instead.
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

    /// The report so far. It is `None` before shutdown.
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
    use crate::core::Counted;

    #[test]
    fn the_scan_hands_its_references_to_the_caller() {
        // A worker may let go of a trigger while the scan holds it. The scan's
        // reference is then the last. The caller must drop it after its lock,
        // not inside the scan.
        let runtime = TestRuntime::new();
        let ledger = Ledger::<TestRuntime>::default();
        let core = runtime.bind(|| None);
        ledger.register(Counted::downgrade(&core));
        let weak = Counted::downgrade(&core);
        let scanned = ledger.scan(0);
        drop(core); // the other holder goes
        assert_eq!(scanned.len(), 1);
        assert!(weak.upgrade().is_some(), "the caller still holds it");
        drop(scanned);
        assert!(weak.upgrade().is_none(), "the caller's drop was the last");
    }
}
