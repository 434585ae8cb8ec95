//! The request word: one `AtomicU64` pairing the live version with what it
//! asks for (nothing, "run now", or "run at T"), so a dispatch serves the
//! request that is live when it runs instead of a version made stale by a
//! newer fire (G13), and the timer holds one entry per trigger (G9).
//!
//! ```text
//!  bits 34..=63        bit 33     bits 28..=32   bits 0..=27
//! ┌──────────────────┬──────────┬──────────────┬────────────────────┐
//! │ version (30 bits)│ IN_INBOX │ tag (5 bits) │ mantissa (28 bits)  │
//! └──────────────────┴──────────┴──────────────┴────────────────────┘
//! tag 0..=19 : AT — deadline ≈ mantissa · 4^tag µs (see below)
//! tag 25     : CLOSED — the shutdown scan has been: no request goes in;
//!              the mantissa holds whether the trigger is paused (bit 0)
//!              and the scan's mark (bits 1..=2, see [`Mark`])
//! tag 27     : RESUMING — resumed while an iteration ran: that
//!              iteration's returned delay settles the schedule
//! tag 28     : PAUSED — nothing requested, and no request is accepted
//!              but a resume's (G17)
//! tag 29     : TAKEN — a worker has claimed this version's run
//! tag 30     : DUE   — run now (fire(), or the timer found AT expired)
//! tag 31     : IDLE  — nothing requested (suspend, or a fresh trigger)
//! ```
//!
//! PAUSED is a mode, not a request: `pause` installs it over whatever the
//! word holds, and every later publish is refused — only raising the
//! word's version to the refused one, so a `resume` knows which version
//! its own request must be at least (see `Core::resume`).
//!
//! IN_INBOX says the trigger sits in the timer's inbox. Keeping it in this
//! word lets `fire_after` install its request and claim the inbox slot in
//! one compare-exchange, and lets the timer leave the inbox and read the
//! request in one RMW. Every AT install sets it, and only the timer's
//! `leave_inbox` clears it (and the `take_in` that called it files the
//! word it read): an AT word without IN_INBOX is therefore the one the
//! timer filed last, which is why a wheel entry keeps no
//! copy of it (see `Core::expire`).
//!
//! A deadline needs more than the bits left beside the version, so an AT
//! request stores it like a float: the exponent `e` (even) is the smallest
//! that makes the delay fit in 26 bits of `2^e` µs units, and the mantissa
//! holds the deadline's units (rounded **up**, so never early) modulo 2^28.
//! The reader rebuilds the full deadline from its own clock: the unique
//! value within ±2^27 units of now. Delays under 67 s keep microsecond
//! precision; an hour rounds up by at most 64 µs; the horizon is the whole
//! `u64` µs range. The timer may read a request long after it was
//! published — every worker busy for minutes, the process stopped, the VM
//! paused — so the inbox push carries a [`Stamp`]: the request pushed and
//! the pusher's clock. The timer rebuilds the pushed request's deadline
//! against that clock, exactly however late; only a request re-published
//! while the trigger sat in the inbox is rebuilt against the timer's own
//! clock (it is recent: the timer role was held again before it aged).
//!
//! # Orderings
//!
//! * **caller → worker**: [`Request::publish`] is a *Release* CAS (AcqRel,
//!   see below); [`Request::take_due`] is an *Acquire* CAS. The timer's
//!   [`Request::expire`] in between is a Relaxed RMW, which continues the
//!   release sequence, so the worker still synchronizes with the caller.
//! * **timer wake-up protocol**: `publish` also *Acquires*, and the inbox
//!   pusher reads the word with a Release [`Request::touch`]; a publish that
//!   comes later in this word's modification order synchronizes with the
//!   pusher (see `scheduler/inbox.rs`).

use crate::state::VERSION_MASK;
use crate::sync::{AtomicU64, Ordering};
use crate::word;
use std::fmt;

const VERSION_SHIFT: u32 = 34;
/// The trigger sits in the timer's inbox.
const IN_INBOX: u64 = 1 << 33;
const TAG_SHIFT: u32 = 28;
const TAG_MASK: u64 = 0x1F;
const MANTISSA_BITS: u32 = 28;
const MANTISSA_MASK: u64 = (1 << MANTISSA_BITS) - 1;
/// A delay must fit in this many bits of units; the other 2 bits of the
/// mantissa are the reader's margin (lag of up to 2^26 units).
const DELAY_BITS: u32 = 26;
/// Largest AT exponent: 26 + 38 = 64 covers every `u64` delay. Exponents
/// are even, so the tag stores `exp / 2` in 5 bits.
const MAX_EXP: u8 = 38;

const TAG_CLOSED: u8 = 25;
const TAG_RESUMING: u8 = 27;
const TAG_PAUSED: u8 = 28;
const TAG_TAKEN: u8 = 29;
const TAG_DUE: u8 = 30;
const TAG_IDLE: u8 = 31;

/// The scan's note in a CLOSED word: a run it could not list, because it
/// found the run's claim rather than its request, which may still be
/// owed — listed by whoever takes the mark ([`Request::take_mark`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// Nothing owed.
    None,
    /// The scan found TAKEN: a worker's claim not yet entered, a
    /// reservation's re-run, or what an ended iteration leaves.
    Claim,
    /// The scan found RESUMING: the run the schedule asks for once the
    /// iteration in flight ends.
    Resuming,
}

/// What a request word asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Nothing: suspended, stopped, or never fired.
    Idle,
    /// Run as soon as a worker is free.
    Due,
    /// A worker has claimed the run of this version.
    Taken,
    /// Paused: nothing requested, and only a resume installs a request.
    Paused,
    /// Resumed while an iteration was in flight: nothing requested yet;
    /// that iteration's returned delay (or, if it ended first, the
    /// resume) settles what comes next (see `Core::settle_resuming`).
    Resuming,
    /// The shutdown scan has been: every install is refused (see
    /// [`Request::close`]).
    Closed {
        /// What the scan found that may still owe a run.
        mark: Mark,
        /// Paused (before or after the scan): only `is_paused` asks.
        paused: bool,
    },
    /// Run at a deadline (encoded; see [`Kind::deadline`]).
    At {
        /// Unit exponent: units are `2^exp` µs.
        exp: u8,
        /// Deadline in units, modulo 2^28.
        mantissa: u32,
    },
}

impl Kind {
    /// Encodes "run at `deadline_us`", given the writer's `now_us`.
    pub(crate) fn at(deadline_us: u64, now_us: u64) -> Self {
        let delay = deadline_us.saturating_sub(now_us);
        let bits = u64::BITS - delay.leading_zeros();
        let exp = bits.saturating_sub(DELAY_BITS).next_multiple_of(2) as u8;
        debug_assert!(exp <= MAX_EXP);
        let units = round_up_units(deadline_us, exp);
        Kind::At {
            exp,
            mantissa: (units & MANTISSA_MASK) as u32,
        }
    }

    /// The full deadline (µs) of an AT request, rebuilt near `now_us`.
    pub(crate) fn deadline(self, now_us: u64) -> Option<u64> {
        let Kind::At { exp, mantissa } = self else {
            return None;
        };
        let now_units = now_us >> exp;
        let raw = (u64::from(mantissa).wrapping_sub(now_units)) & MANTISSA_MASK;
        // Sign-extend the 28-bit difference: the deadline lies within
        // ±2^27 units of now.
        let diff = ((raw << (64 - MANTISSA_BITS)) as i64) >> (64 - MANTISSA_BITS);
        let units = i128::from(now_units) + i128::from(diff);
        let deadline = units.max(0) << exp;
        Some(u64::try_from(deadline).unwrap_or(u64::MAX))
    }

    fn tag_and_mantissa(self) -> (u8, u64) {
        match self {
            Kind::Idle => (TAG_IDLE, 0),
            Kind::Due => (TAG_DUE, 0),
            Kind::Taken => (TAG_TAKEN, 0),
            Kind::Paused => (TAG_PAUSED, 0),
            Kind::Resuming => (TAG_RESUMING, 0),
            Kind::Closed { mark, paused } => (TAG_CLOSED, (mark as u64) << 1 | u64::from(paused)),
            Kind::At { exp, mantissa } => (exp / 2, u64::from(mantissa)),
        }
    }
}

/// `ceil(value / 2^exp)`, in units of `2^exp`.
fn round_up_units(value: u64, exp: u8) -> u64 {
    let units = value >> exp;
    let remainder = value & ((1u64 << exp) - 1);
    units + u64::from(remainder != 0)
}

/// A decoded request word.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Word(u64);

impl Word {
    #[inline]
    pub(crate) fn new(version: u32, kind: Kind) -> Self {
        let (tag, mantissa) = kind.tag_and_mantissa();
        Self(
            (u64::from(version & VERSION_MASK) << VERSION_SHIFT)
                | (u64::from(tag) << TAG_SHIFT)
                | mantissa,
        )
    }

    pub(crate) fn version(self) -> u32 {
        (self.0 >> VERSION_SHIFT) as u32
    }

    pub(crate) fn kind(self) -> Kind {
        let tag = ((self.0 >> TAG_SHIFT) & TAG_MASK) as u8;
        match tag {
            TAG_IDLE => Kind::Idle,
            TAG_DUE => Kind::Due,
            TAG_TAKEN => Kind::Taken,
            TAG_PAUSED => Kind::Paused,
            TAG_RESUMING => Kind::Resuming,
            TAG_CLOSED => Kind::Closed {
                mark: match (self.0 >> 1) & 3 {
                    1 => Mark::Claim,
                    2 => Mark::Resuming,
                    _ => Mark::None,
                },
                paused: self.0 & 1 != 0,
            },
            half => Kind::At {
                exp: half * 2,
                mantissa: (self.0 & MANTISSA_MASK) as u32,
            },
        }
    }

    /// Whether the shutdown scan has closed the word (CLOSED, whatever its
    /// mark).
    #[inline]
    pub(crate) fn is_closed(self) -> bool {
        matches!(self.kind(), Kind::Closed { .. })
    }

    /// Whether the trigger sits in the timer's inbox.
    pub(crate) fn in_inbox(self) -> bool {
        self.0 & IN_INBOX != 0
    }

    pub(crate) fn raw(self) -> u64 {
        self.0
    }

    /// This word with the IN_INBOX bit of `flags` (any word).
    fn with_inbox_of(self, flags: u64) -> u64 {
        (self.0 & !IN_INBOX) | (flags & IN_INBOX)
    }
}

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Word")
            .field("version", &self.version())
            .field("kind", &self.kind())
            .field("in_inbox", &self.in_inbox())
            .finish()
    }
}

/// An inbox push's note to the timer: the request the pusher installed,
/// and the clock (µs) it encoded that request's deadline against.
///
/// An AT deadline is relative (see the module docs): rebuilt against the
/// reader's clock it is exact within 2^27 units of that clock — 134 s at
/// microsecond precision — but the timer may read the inbox far later
/// (every worker busy for minutes, the process stopped, the VM paused).
/// Rebuilt against the pusher's own clock it is exact however late.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stamp {
    version: u32,
    kind: Kind,
    now_us: u64,
}

impl Stamp {
    /// Plain moves: built on every `fire_after`, needed only by the one
    /// that pushes.
    #[inline]
    pub(crate) fn new(version: u32, kind: Kind, now_us: u64) -> Self {
        Self {
            version,
            kind,
            now_us,
        }
    }

    /// The request pushed.
    pub(crate) fn kind(self) -> Kind {
        self.kind
    }

    /// The pusher's clock.
    pub(crate) fn now_us(self) -> u64 {
        self.now_us
    }

    /// The deadline of `seen`, the word the timer read as it took the
    /// trigger from the inbox at `now_us`: the pushed request's, exactly;
    /// a newer one's (published while the trigger sat in the inbox, so
    /// recent unless the timer role pauses again before it is read) rebuilt
    /// near `now_us` — when even that is more than 2^27 units old, the
    /// rebuilt deadline is a multiple of 2^28 units late, never early.
    pub(crate) fn deadline(self, seen: Word, now_us: u64) -> Option<u64> {
        let pushed = seen.version() == self.version & VERSION_MASK && seen.kind() == self.kind;
        seen.kind()
            .deadline(if pushed { self.now_us } else { now_us })
    }
}

/// Whether version `a` is newer than `b` in 30-bit wrapping order (within
/// half the ring, 2^29 versions: far beyond any request in flight).
pub(crate) fn is_newer(a: u32, b: u32) -> bool {
    let distance = a.wrapping_sub(b) & VERSION_MASK;
    distance != 0 && distance < (VERSION_MASK >> 1) + 1
}

/// Whether version `a` is `b` or newer, in 30-bit wrapping order.
pub(crate) fn at_least(a: u32, b: u32) -> bool {
    a == b || is_newer(a, b)
}

/// Whose request [`Request::install`] installs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Installer {
    /// A firer's, or the scheduler's own: refused while paused.
    Publish,
    /// A resume's: only over PAUSED.
    Resume,
    /// The schedule a RESUMING word waited for: only over that word.
    Settle,
}

/// Why [`Request::install`] installed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A newer version is installed: its request wins.
    Newer,
    /// The trigger is paused (a firer's request).
    Paused,
    /// The trigger is not paused (a resume's request), or the RESUMING
    /// word was settled or replaced already (a settling one).
    NotPaused,
    /// The shutdown scan has closed the word (CLOSED): nothing goes in.
    Closed,
}

/// The atomic request word of one trigger.
#[derive(Debug)]
pub(crate) struct Request {
    word: AtomicU64,
}

impl Request {
    pub(crate) fn new(version: u32) -> Self {
        Self {
            word: AtomicU64::new(Word::new(version, Kind::Idle).raw()),
        }
    }

    /// Reads the word: for statistics, the paused checks, and the timer's
    /// expiry (see `Core::expire`). Relaxed: a recent value is enough —
    /// every decision taken on it is then made by an RMW that fails if the
    /// word moved on.
    #[inline]
    pub(crate) fn peek(&self) -> Word {
        Word(self.word.load(Ordering::Relaxed))
    }

    /// Reads the word, for models and tests. Relaxed: it orders nothing.
    #[cfg(any(test, loom))]
    pub(crate) fn load(&self) -> Word {
        Word(self.word.load(Ordering::Relaxed))
    }

    /// Every conditional transition goes through the one compare-exchange
    /// loop of `word.rs` (as `State::update`): `step` maps the word read to
    /// a [`Step`] — write a new raw word with the ordering that transition
    /// needs, or leave it — and the outcome to return.
    #[inline]
    fn update<T>(&self, mut step: impl FnMut(Word) -> Step<T>) -> T {
        word::update(&self.word, |raw| step(Word(raw)))
    }

    /// Installs `kind` for `version` unless a newer version is already
    /// installed or the trigger is paused (an AT request sets IN_INBOX
    /// too); returns the word it replaced, or `None` if refused.
    /// Same-version writes are allowed (exit re-arms, re-runs after a
    /// reservation).
    #[cfg(test)]
    pub(crate) fn publish(&self, version: u32, kind: Kind) -> Option<Word> {
        self.install(version, kind, Installer::Publish).ok()
    }

    /// [`publish`](Self::publish), telling why it was refused. A resume's
    /// request goes in only over PAUSED (and never under a newer version);
    /// a settling one only over the RESUMING word of `version`. A firer's
    /// request that meets PAUSED
    /// raises the paused word's version to its own: the resume that later
    /// finds it newer than its own request advances again, so the request
    /// it installs is never made stale by a fire refused meanwhile.
    #[inline]
    pub(crate) fn install(
        &self,
        version: u32,
        kind: Kind,
        installer: Installer,
    ) -> Result<Word, Refused> {
        // Every AT request goes to the timer through the inbox, so only the
        // timer's `leave_inbox` ever clears IN_INBOX under an AT request:
        // an AT word without it is the one the timer filed last (see
        // `Core::expire`).
        let to_inbox = matches!(kind, Kind::At { .. });
        let fresh = Word::new(version, kind).raw() | if to_inbox { IN_INBOX } else { 0 };
        let resume = installer == Installer::Resume;
        self.update(|current| {
            if current.is_closed() {
                return Step::Keep(Err(Refused::Closed));
            }
            let paused = current.kind() == Kind::Paused;
            if installer == Installer::Settle
                && (current.kind() != Kind::Resuming || current.version() != version)
            {
                return Step::Keep(Err(Refused::NotPaused));
            }
            if paused && !resume {
                if !is_newer(version, current.version()) {
                    return Step::Keep(Err(Refused::Paused));
                }
                let raised = Word::new(version, Kind::Paused).with_inbox_of(current.raw());
                // Relaxed: the version is only compared, by the resume's
                // own RMW on this word; no data goes with it.
                return Step::Store(raised, Ordering::Relaxed, Err(Refused::Paused));
            }
            if resume && !paused {
                return Step::Keep(Err(Refused::NotPaused));
            }
            if is_newer(current.version(), version) {
                return Step::Keep(Err(Refused::Newer));
            }
            // AcqRel: Release hands the caller's writes to the worker's
            // Acquire in `take_due` (G2); Acquire pairs with `touch` for the
            // timer wake-up protocol (scheduler/inbox.rs).
            let new = fresh | (current.raw() & IN_INBOX);
            Step::Store(new, Ordering::AcqRel, Ok(current))
        })
    }

    /// Installs PAUSED over whatever the word holds, keeping its version
    /// and IN_INBOX; returns the word it replaced (PAUSED itself if the
    /// trigger was paused already: then nothing changes). What makes a
    /// pause hold is the order of RMWs on this word and on the state word
    /// (see `Core::pause`). Acquire for one datum: a suspend's IDLE word
    /// replaced here was installed (Release) after the suspend recorded
    /// its version (`RareCounters::suspended`), which the pause then reads
    /// to keep the trigger suspended through the resume (G6) — Relaxed, a
    /// weakly ordered CPU could show it the record from before.
    pub(crate) fn pause(&self) -> Word {
        self.update(|current| {
            let paused = match current.kind() {
                Kind::Paused | Kind::Closed { paused: true, .. } => return Step::Keep(current),
                // Shut down: only noted, for `is_paused`; the scan's mark
                // stays (a run it stands for was accepted before).
                Kind::Closed { mark, .. } => Kind::Closed { mark, paused: true },
                _ => Kind::Paused,
            };
            let paused = Word::new(current.version(), paused).with_inbox_of(current.raw());
            Step::Store(paused, Ordering::Acquire, current)
        })
    }

    /// Brings the word's version up to `version`, keeping its kind: for
    /// fires that only bump the state word (coalescing into a reserved
    /// re-run), so the two versions never drift half the 30-bit ring apart
    /// — past that, `is_newer` would judge the re-run's publish at `exit`
    /// older than the word and refuse it. An AT request is left alone (the
    /// timer files that exact word; none is live while a re-run is
    /// reserved). Relaxed: it hands nothing on, and as an RMW it keeps every
    /// release sequence running through the word.
    pub(crate) fn catch_up(&self, version: u32) {
        self.update(|current| {
            let keep = matches!(current.kind(), Kind::At { .. }) || current.is_closed();
            if keep || !is_newer(version, current.version()) {
                return Step::Keep(());
            }
            let caught_up = Word::new(version, current.kind()).with_inbox_of(current.raw());
            Step::Store(caught_up, Ordering::Relaxed, ())
        })
    }

    /// Claims a DUE request: DUE → TAKEN. Returns the version to enter.
    pub(crate) fn take_due(&self) -> Option<u32> {
        self.update(|current| {
            if current.kind() != Kind::Due {
                return Step::Keep(None);
            }
            let taken = Word::new(current.version(), Kind::Taken).with_inbox_of(current.raw());
            // Acquire: pairs with the Release in `publish`, so the iteration
            // (or the reservation it leaves) sees the caller's writes (G2).
            Step::Store(taken, Ordering::Acquire, Some(current.version()))
        })
    }

    /// The timer found the AT request `expected` due: AT → DUE, unless the
    /// word changed since the timer read it (a new request also sets
    /// IN_INBOX, so the timer will read that one).
    pub(crate) fn expire(&self, expected: Word) -> bool {
        let due = Word::new(expected.version(), Kind::Due).with_inbox_of(expected.raw());
        self.update(|current| {
            if current != expected {
                return Step::Keep(false);
            }
            // Release: hands the timer's statistics (the deadline it marked
            // due) to the worker's Acquire in `take_due`. The caller's data
            // needs no more: an RMW continues the release sequence of the
            // publish it replaces.
            Step::Store(due, Ordering::Release, true)
        })
    }

    /// Timer side: clears IN_INBOX and returns the request it read, in one
    /// RMW. A firer that found IN_INBOX set published before this in the
    /// word's modification order, so this reads that request or a newer one
    /// (no lost fire_after, G4) — a property of the RMW, not of its
    /// ordering: Relaxed, as the timer reads only the word's bits, and the
    /// worker still synchronizes with the caller through the release
    /// sequence this RMW continues.
    pub(crate) fn leave_inbox(&self) -> Word {
        Word(self.word.fetch_and(!IN_INBOX, Ordering::Relaxed) & !IN_INBOX)
    }

    /// Sets IN_INBOX for a push of whatever the word holds, and returns the
    /// word if this call set it (`None`: the trigger is in the inbox, and
    /// the timer will read the word later). Relaxed: the push goes through
    /// the pool's lock, which orders this caller's earlier writes to the
    /// word before the timer reads it; and if the flag was set, the
    /// timer's `leave_inbox` that clears it comes later in the word's
    /// modification order than this RMW, so it reads this caller's earlier
    /// writes or newer ones anyway.
    pub(crate) fn enter_inbox(&self) -> Option<Word> {
        let old = self.word.fetch_or(IN_INBOX, Ordering::Relaxed);
        (old & IN_INBOX == 0).then_some(Word(old))
    }

    /// Reads the word with an RMW for the inbox pusher: see the wake-up
    /// protocol in `scheduler/inbox.rs`. Release: a later `publish`
    /// (Acquire) that reads this write synchronizes with the pusher, and so
    /// sees the `sleep_until` the pusher judged under the lock.
    pub(crate) fn touch(&self) -> Word {
        Word(self.word.fetch_or(0, Ordering::Release))
    }
}

/// What one attempt of a transition does with the request word (a raw
/// word to store).
type Step<T> = word::Step<u64, T>;

mod closed;
#[cfg(all(test, not(loom)))]
mod tests;
