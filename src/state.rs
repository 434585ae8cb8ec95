//! The trigger's state word.
//!
//! It is one `AtomicU32` holding a reservation bit, a running bit and a 30-bit wrapping
//! version. The three procedures of the design, advance, enter and exit, are named
//! transitions.
//!
//! ```text
//!  bits 2..=31                       bit 1      bit 0
//! ┌─────────────────────────────────┬──────────┬─────────┐
//! │ version (wraps 0x3FFF_FFFF → 0) │ RESERVED │ RUNNING │
//! └─────────────────────────────────┴──────────┴─────────┘
//! ```
//!
//! The version sits in the high bits so that the two transitions a fire storm hammers
//! need no compare-exchange. `fire`'s advance is one `fetch_add` of a version step. It
//! keeps both bits, and the version wraps off the top of the word. `exit` is one
//! `fetch_and` clearing both bits. Neither can fail and retry. So two threads firing flat
//! out never make the worker's `exit` loop, nor each other.
//!
//! | RESERVED | RUNNING | meaning                                                        |
//! |----------|---------|----------------------------------------------------------------|
//! | 0        | 0       | idle: no iteration in flight                                   |
//! | 0        | 1       | an iteration is in flight                                      |
//! | 1        | 1       | in flight, and a due run of the live version found it busy:    |
//! |          |         | exactly one follow-up runs when it ends                        |
//! | 1        | 0       | never stored: `exit` clears both bits together                 |
//!
//! The conditional transitions, `advance`, `enter` and `reserve`, are a compare-exchange
//! through one loop, `State::update`. Each is a small closure naming its arms and their
//! orderings, as in tokio's `runtime/task/state.rs`. `enter` and `reserve` stop at the
//! first version change, since the run is then stale. So under a storm they do not loop
//! either. All transitions of one trigger sit in one modification order.
//!
//! # Orderings
//!
//! This word carries the happens-before edges below. The "Orderings" section of
//! docs/DESIGN.md gives the whole argument.
//!
//! * **iteration N → iteration N+1**. `exit` clears RUNNING with *Release*. `enter` sets
//!   RUNNING with *Acquire* and reads that store. It may read a later one in its release
//!   sequence instead, since every write to the word is an RMW.
//! * **firer → the run serving it**, for G2 and G4. A fire's `advance_fire` is *Release*
//!   in both arms. Every write to this word is an RMW. So every later value is in the
//!   release sequence of each firer's advance. The run serving version v does `enter(v)`
//!   with *Acquire* and reads such a value. So it synchronizes with that firer *and with
//!   every earlier, coalesced one*, whose publish was refused. This covers the re-run
//!   that a reservation causes too. Its `enter` reads the value that the runner's `exit`
//!   wrote, still in that sequence. A Relaxed advance loses a coalesced firer's data, and
//!   `loom_trigger`'s G4 model catches it. `fire_after` and `suspend` use the plain
//!   `advance`, since a delayed request's data travels through the request word.
//! * **pause → a later firer**, for G17. `pause` installs PAUSED in the request word,
//!   then advances here. A firer advances here, then publishes. A firer whose advance
//!   reads the pause's must see PAUSED when it publishes. The request word gives that,
//!   not this one. A publish is a Release RMW and the PAUSED install an Acquire RMW. So a
//!   publish before the install in that word's order synchronizes with it. The firer's
//!   advance then happens before the pause's and cannot read it. So the plain `advance`
//!   is Relaxed and `advance_fire` only Release. See "Pause" in docs/DESIGN.md.
//!   `loom_pause`'s G6 models fail if the install's Acquire is weakened.
//! * A fire while a re-run is already reserved, in `advance_fire`, only bumps the
//!   version. It keeps RUNNING and RESERVED, with *Release*. The re-run's Acquire `enter`
//!   reads a later value of its release sequence.
//!   `loom_trigger`'s `g2_a_fire_coalescing_into_a_reserved_re_run…` fails with Relaxed.
//! * Setting RESERVED is therefore *Relaxed*, in `enter`'s reservation arm and in
//!   `reserve`. The reserver hands nothing on that the firer's own Release does not. The
//!   ordering audit in docs/DESIGN.md weakened each of these with no model failing. The
//!   argument above says why.
//! * **shutdown scan → an ending iteration**. `exit` is *AcqRel* in both arms. Suppose
//!   the scan's AcqRel `touch` read RUNNING before the `exit`. Then the ending iteration
//!   synchronizes with it and sees the scheduler closed. So it records its outcome in the
//!   report instead of leaving "still running" there. `loom_shutdown`'s
//!   `an_iteration_ending_as_shutdown_begins…` fails with either arm Release.

use crate::sync::{AtomicU32, Ordering};
use crate::word;
use std::fmt;

/// Set while an iteration is in flight. It guards the task, for mutual exclusion.
pub(crate) const RUNNING: u32 = 1;
/// Set while a due run found the trigger running. The trigger runs once more at exit.
pub(crate) const RESERVED: u32 = 1 << 1;
/// Where the version starts in the word.
const VERSION_SHIFT: u32 = 2;
/// One version step in the word. Adding it wraps the version off the top.
const VERSION_ONE: u32 = 1 << VERSION_SHIFT;
/// A version's 30 bits, as a number, not in the word.
///
/// Being a power of two minus one matters, since `(v + 1) & VERSION_MASK` is the whole
/// wrap-around rule.
pub(crate) const VERSION_MASK: u32 = u32::MAX >> VERSION_SHIFT;

/// The version a state word holds.
#[inline]
const fn version_of(word: u32) -> u32 {
    word >> VERSION_SHIFT
}

/// A word holding `version`, masked to 30 bits, and no bit.
#[inline]
const fn word_of(version: u32) -> u32 {
    (version & VERSION_MASK) << VERSION_SHIFT
}

/// Returns the version after `version`, wrapping within 30 bits.
#[inline]
pub(crate) const fn next_version(version: u32) -> u32 {
    version.wrapping_add(1) & VERSION_MASK
}

/// A decoded copy of a trigger's state word at one instant.
///
/// It tells whether an iteration is in flight, whether a follow-up is reserved, and the
/// version. Every `fire`, `fire_after` and `suspend` bumps the version, which has 30 bits
/// and wraps. It may be out of date as soon as it is taken. Users read
/// [`Trigger::stats`](crate::Trigger::stats), which derives its state from it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Snapshot(u32);

impl Snapshot {
    /// Builds a snapshot from a raw word, for unit tests.
    #[cfg(test)]
    pub(crate) const fn from_raw(raw: u32) -> Self {
        Self(raw)
    }

    /// Whether a due run found the trigger busy and a follow-up is pending.
    pub const fn is_reserved(self) -> bool {
        self.0 & RESERVED != 0
    }

    /// Whether an iteration is in flight.
    pub const fn is_running(self) -> bool {
        self.0 & RUNNING != 0
    }

    /// The live version, bumped by every `fire`, `fire_after` and `suspend`.
    pub const fn version(self) -> u32 {
        version_of(self.0)
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("reserved", &self.is_reserved())
            .field("running", &self.is_running())
            .field("version", &self.version())
            .finish()
    }
}

/// Outcome of [`State::enter`] for a due run of some version.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enter {
    /// RUNNING is now set by this caller. Run the task, then call `exit`.
    Entered,
    /// The trigger was running. RESERVED is set, and the runner re-runs at exit.
    Reserved,
    /// A newer `fire`, `fire_after` or `suspend` superseded this run, so drop it.
    Stale,
}

/// Outcome of [`State::steal`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Steal {
    /// The version moved on, so the claim's `enter` fails.
    Stolen,
    /// A fire had moved it on already, so the claim's `enter` fails.
    Stale,
    /// The claim's worker entered, and it lists the run itself.
    Entered,
}

/// Outcome of [`State::reserve`].
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserve {
    /// RESERVED is set, and the runner re-runs at exit.
    Reserved,
    /// No iteration is in flight, so the run must go to a worker.
    NotRunning,
    /// A newer request superseded this one, so drop it.
    Stale,
}

/// Outcome of [`State::exit`] after an iteration.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// A reservation was pending. Both bits are cleared, and the live `version` must be
    /// re-dispatched at once. It goes through the pool, so a storm cannot pin a worker.
    Rerun {
        /// The live version the follow-up serves.
        version: u32,
    },
    /// RUNNING is cleared. `live` tells whether the runner's version is still the live one.
    /// If it is, its returned delay, if any, is honoured.
    Done {
        /// Whether no request superseded the finished iteration.
        live: bool,
    },
}

/// The atomic state word of one trigger.
#[derive(Debug)]
pub struct State {
    word: AtomicU32,
}

impl State {
    /// A fresh word, idle, at `version` masked to 30 bits.
    pub fn new(version: u32) -> Self {
        Self {
            word: AtomicU32::new(word_of(version)),
        }
    }

    /// Reads the word.
    ///
    /// Acquire: a reader that then inspects what an iteration wrote sees the writes that the
    /// Release in `exit` published. Tests and statistics are such readers. The transitions
    /// themselves never rely on this load.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot(self.word.load(Ordering::Acquire))
    }

    /// Reads the word with an RMW.
    ///
    /// AcqRel: Release, so a later `enter` that reads this write synchronizes with it. That
    /// `enter` then sees the scheduler closed by the shutdown scan. See the `shutdown` module.
    /// Acquire, so a resume that reads an iteration's `exit` here sees the delay that the
    /// iteration recorded before. `loom_pause`'s resume during an iteration checks it.
    pub fn touch(&self) -> Snapshot {
        Snapshot(self.word.fetch_or(0, Ordering::AcqRel))
    }

    /// The shutdown scan's [`touch`](Self::touch).
    ///
    /// If an iteration is in flight, the version also moves on. Both bits are kept, as when a
    /// fire coalesces into a reserved re-run. Two things follow.
    /// - No claim can enter after the scan. One not entered yet is stale. Such a claim is a
    ///   newer run that a worker took during the iteration. And the closed request word
    ///   refuses every install after the scan. So the iteration that the scan lists in flight
    ///   is the last to run. A claim entering after its `exit` is never taken for it. The
    ///   claim is listed instead. The ending iteration lists it when it finds a newer version
    ///   live, in `Core::list_marked_claim`. Or its refused re-run lists it, if the claim was
    ///   a reservation's.
    /// - The iteration can tell whether the scan came before it, and so listed it, or after.
    ///   It tells by the version its `exit` read, in [`exit_seen`](Self::exit_seen). The
    ///   version the scan wrote is newer than any that an earlier `exit` read.
    ///
    /// Returns the word as it was. AcqRel, as in `touch`. When idle, the word is written back
    /// unchanged, which is still an RMW. The advance hands nothing over beyond that.
    pub fn touch_for_scan(&self) -> Snapshot {
        self.update(|current| {
            let new = if current & RUNNING != 0 {
                current.wrapping_add(VERSION_ONE)
            } else {
                current
            };
            Step::Store(new, Ordering::AcqRel, Snapshot(current))
        })
    }

    /// The shutdown scan found a worker's claim of `claimed`, not entered when its `touch`
    /// read this word. This advances the version, so the claim's `enter` fails and the scan
    /// lists the run instead.
    ///
    /// It does not if the claim is stale already, because a fire advanced since. Nor does it
    /// if the worker entered meanwhile. Every value the loop reads is at or after the scan's
    /// `touch`, by coherence. So both refusals are current. Versions only move on, and
    /// RUNNING set means that the claim's worker entered.
    ///
    /// Relaxed: the claim's `enter` only has to fail. Nothing is handed over, and the run is
    /// listed under the report's lock.
    pub fn steal(&self, claimed: u32) -> Steal {
        self.update(|current| {
            if version_of(current) != claimed {
                Step::Keep(Steal::Stale)
            } else if current & RUNNING != 0 {
                Step::Keep(Steal::Entered)
            } else {
                let stolen = word_of(next_version(claimed));
                Step::Store(stolen, Ordering::Relaxed, Steal::Stolen)
            }
        })
    }

    /// Every transition goes through the one compare-exchange loop of `word.rs`.
    ///
    /// `step` maps the word it read to a [`Step`] and the outcome to return. The step writes
    /// a new word with the ordering that the transition's arm needs, or leaves the word. See
    /// `# Orderings`.
    #[inline]
    fn update<T>(&self, step: impl FnMut(u32) -> Step<T>) -> T {
        word::update(&self.word, step)
    }

    /// **advance**. It clears RESERVED, bumps the version and keeps RUNNING. Returns the new
    /// version.
    ///
    /// `fire_after` and `suspend` use it. `fire` uses [`advance_fire`](Self::advance_fire).
    /// Clearing RESERVED is what makes fire/fire/suspend stop and fire/fire/fire yield one
    /// chain. See "Pitfalls" in docs/DESIGN.md.
    #[inline]
    pub fn advance(&self) -> u32 {
        self.update(|current| {
            let version = next_version(version_of(current));
            // Relaxed: this advance hands nothing on. A `fire_after`'s data
            // reaches its run through the request word. The edge from a pause
            // to a later firer, for G17, runs through the request word too.
            // See the module docs. Only the order of advances on this word
            // matters, and any RMW keeps it.
            Step::Store(
                (current & RUNNING) | word_of(version),
                Ordering::Relaxed,
                version,
            )
        })
    }

    /// **advance** for `fire`. It acts as [`advance`](Self::advance), except when a re-run is
    /// already reserved. Returns the new version and whether it coalesced so.
    ///
    /// A re-run is reserved when RUNNING and RESERVED are both set. The call then keeps both
    /// bits. That re-run adopts the live version at `exit`, so it serves this fire too. The
    /// fire then needs no other step.
    ///
    /// It is one `fetch_add`, which cannot fail. RESERVED is only ever set with RUNNING,
    /// since `exit` clears both at once. So keeping both bits is exactly the rule above, and
    /// a fire never retries.
    pub fn advance_fire(&self) -> (u32, bool) {
        // Release: the serving run's Acquire `enter` reads a later value of this
        // release sequence, for G2. No Acquire, since the pause edge runs through
        // the request word. See the module docs.
        let previous = self.word.fetch_add(VERSION_ONE, Ordering::Release);
        let version = next_version(version_of(previous));
        let reserved = previous & (RUNNING | RESERVED) == RUNNING | RESERVED;
        (version, reserved)
    }

    /// **enter**. A due run of `version` asks to execute.
    pub fn enter(&self, version: u32) -> Enter {
        self.update(|current| {
            if version_of(current) != version {
                Step::Keep(Enter::Stale)
            } else if current & RUNNING == 0 {
                // Acquire: pairs with the Release in `exit`. So iteration N+1 sees
                // everything iteration N wrote, as G1 and G2 require.
                Step::Store(current | RUNNING, Ordering::Acquire, Enter::Entered)
            } else {
                // Relaxed: the re-run synchronizes with the firer through the
                // release sequence of its `advance`. See `# Orderings`.
                Step::Store(current | RESERVED, Ordering::Relaxed, Enter::Reserved)
            }
        })
    }

    /// The reservation half of **enter**, for a firer that claimed a due run while the
    /// trigger runs.
    ///
    /// It sets RESERVED if `version` is live and an iteration is in flight. It never sets
    /// RUNNING.
    pub fn reserve(&self, version: u32) -> Reserve {
        self.update(|current| {
            if version_of(current) != version {
                Step::Keep(Reserve::Stale)
            } else if current & RUNNING == 0 {
                Step::Keep(Reserve::NotRunning)
            } else {
                // Relaxed: as in `enter`'s reservation arm. See `# Orderings`.
                Step::Store(current | RESERVED, Ordering::Relaxed, Reserve::Reserved)
            }
        })
    }

    /// **exit**. The iteration that entered with `version` has returned.
    ///
    /// It is one `fetch_and` clearing both bits, which cannot fail.
    #[inline]
    pub fn exit(&self, version: u32) -> Exit {
        self.exit_seen(version).0
    }

    /// [`exit`](Self::exit), and the live version it read. See
    /// [`touch_for_scan`](Self::touch_for_scan).
    pub fn exit_seen(&self, version: u32) -> (Exit, u32) {
        // Release: publishes this iteration's writes to the next one's Acquire
        // `enter`. If a re-run is reserved, that is the re-run's `enter`. The
        // firer's data reaches it through the release sequence of its advance.
        // Acquire: reading the shutdown scan's AcqRel `touch`, the ending
        // iteration then sees the scheduler closed and records its outcome in the
        // report. See `Core::end`.
        let previous = self.word.fetch_and(!(RUNNING | RESERVED), Ordering::AcqRel);
        debug_assert!(previous & RUNNING != 0, "exit without running bit");
        let live = version_of(previous);
        let exit = if previous & RESERVED != 0 {
            Exit::Rerun { version: live }
        } else {
            Exit::Done {
                live: live == version,
            }
        };
        (exit, live)
    }
}

/// What one attempt of a transition does with the state word.
type Step<T> = word::Step<u32, T>;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn advance_bumps_version_and_clears_reservation() {
        let state = State::new(7);
        assert_eq!(state.enter(7), Enter::Entered);
        assert_eq!(state.enter(7), Enter::Reserved);
        assert!(state.snapshot().is_reserved());
        assert_eq!(state.advance(), 8);
        let s = state.snapshot();
        assert!(s.is_running() && !s.is_reserved());
        assert_eq!(s.version(), 8);
    }

    #[test]
    fn stale_versions_are_dropped() {
        let state = State::new(0);
        let v = state.advance();
        assert_eq!(state.enter(v.wrapping_sub(1) & VERSION_MASK), Enter::Stale);
        assert_eq!(state.enter(v), Enter::Entered);
    }

    #[test]
    fn exit_reports_liveness_and_reruns() {
        let state = State::new(3);
        assert_eq!(state.enter(3), Enter::Entered);
        assert_eq!(state.exit(3), Exit::Done { live: true });
        assert_eq!(state.enter(3), Enter::Entered);
        let v = state.advance();
        assert_eq!(state.exit(3), Exit::Done { live: false });
        assert_eq!(state.enter(v), Enter::Entered);
        assert_eq!(state.enter(v), Enter::Reserved);
        assert_eq!(state.exit(v), Exit::Rerun { version: v });
        assert_eq!(state.snapshot(), Snapshot::from_raw(word_of(v)));
    }

    #[test]
    fn version_wraps_within_30_bits() {
        let state = State::new(VERSION_MASK);
        assert_eq!(state.enter(VERSION_MASK), Enter::Entered);
        assert_eq!(state.advance(), 0);
        let s = state.snapshot();
        assert!(s.is_running() && !s.is_reserved());
        assert_eq!(s.version(), 0);
    }

    #[test]
    fn snapshot_debug_decodes_fields() {
        let text = format!("{:?}", Snapshot::from_raw(RESERVED | RUNNING | word_of(5)));
        assert_eq!(
            text,
            "Snapshot { reserved: true, running: true, version: 5 }"
        );
    }
}
