//! The request word.
//!
//! It is one `AtomicU64` that pairs the live version with what it asks for. That is
//! nothing, "run now", or "run at T". So a dispatch serves the request that is live when
//! it runs, instead of a version made stale by a newer fire, as G13 requires. And the
//! timer holds one entry per trigger, as G9 requires.
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
//! PAUSED is a mode, not a request. `pause` installs it over whatever the word holds, and
//! every later publish is refused. A refused publish only raises the word's version to
//! its own. So a `resume` knows which version its own request must at least have. See
//! `Core::resume`.
//!
//! IN_INBOX says the trigger sits in the timer's inbox. Keeping it in this word lets
//! `fire_after` install its request and claim the inbox slot in one compare-exchange. It
//! also lets the timer leave the inbox and read the request in one RMW. Every AT install
//! sets it. Only the timer's `leave_inbox` clears it, and the `take_in` that called it
//! files the word it read. So an AT word without IN_INBOX is the one the timer filed
//! last. That is why a wheel entry keeps no copy of it. See `Core::expire`.
//!
//! A deadline needs more than the bits left beside the version. So an AT request stores
//! it like a float. The exponent `e` is even. It is the smallest that makes the delay fit
//! in 26 bits of `2^e` µs units. The mantissa holds the deadline's units modulo 2^28. They
//! are rounded **up**, so the deadline is never early. The reader rebuilds the full
//! deadline from its own clock, as the unique value within ±2^27 units of now. Delays
//! under 67 s keep microsecond precision. An hour rounds up by at most sixty-four
//! microseconds. The horizon is the whole `u64` µs range.
//!
//! The timer may read a request long after it was published. Every worker may be busy
//! for minutes, the process stopped, or the VM paused. So the inbox push carries a
//! [`Stamp`], holding the request pushed and the pusher's clock. The timer rebuilds the
//! pushed request's deadline against that clock, exactly, however late. Only a request
//! re-published while the trigger sat in the inbox is rebuilt against the timer's own
//! clock. That request is recent, since the timer role was held again before it aged.
//!
//! # Orderings
//!
//! * **caller → worker**. `Request::publish` is a *Release* CAS. It is AcqRel, as the
//!   next item explains. [`Request::take_due`] is an *Acquire* CAS. The timer's
//!   [`Request::expire`] in between is a Relaxed RMW. It continues the release sequence,
//!   so the worker still synchronizes with the caller.
//! * **timer wake-up protocol**. `publish` also *Acquires*. The inbox pusher reads the
//!   word with a Release [`Request::touch`]. A publish that comes later in this word's
//!   modification order synchronizes with the pusher. See `scheduler/pool/inbox.rs`.

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
/// A delay must fit in this many bits of units.
///
/// The other 2 bits of the mantissa are the reader's margin, for a lag of up to 2^26
/// units.
const DELAY_BITS: u32 = 26;
/// Largest AT exponent. 26 + 38 = 64 covers every `u64` delay. Exponents are even, so the
/// tag stores `exp / 2` in 5 bits.
const MAX_EXP: u8 = 38;

const TAG_CLOSED: u8 = 25;
const TAG_RESUMING: u8 = 27;
const TAG_PAUSED: u8 = 28;
const TAG_TAKEN: u8 = 29;
const TAG_DUE: u8 = 30;
const TAG_IDLE: u8 = 31;

/// The scan's note in a CLOSED word.
///
/// It notes a run that the scan could not list, because it found the run's claim rather
/// than its request. The run may still be owed. Whoever takes the mark lists it. See
/// [`Request::take_mark`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// Nothing owed.
    None,
    /// The scan found TAKEN. That is a worker's claim not yet entered, a reservation's re-run,
    /// or what an ended iteration leaves.
    Claim,
    /// The scan found RESUMING. The run is the one the schedule asks for once the iteration
    /// in flight ends.
    Resuming,
}

/// What a request word asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Nothing, because the trigger is suspended, stopped, or never fired.
    Idle,
    /// Run as soon as a worker is free.
    Due,
    /// A worker has claimed the run of this version.
    Taken,
    /// Paused. Nothing is requested, and only a resume installs a request.
    Paused,
    /// Resumed while an iteration was in flight, with nothing requested yet.
    ///
    /// That iteration's returned delay settles what comes next. If the iteration ended first,
    /// the resume settles it. See `Core::settle_resuming`.
    Resuming,
    /// The shutdown scan has been, so every install is refused. See [`Request::close`].
    Closed {
        /// What the scan found that may still owe a run.
        mark: Mark,
        /// Paused, before or after the scan. Only `is_paused` asks.
        paused: bool,
    },
    /// Run at a deadline. See [`Kind::deadline`] for the encoding.
    At {
        /// Unit exponent. Units are `2^exp` µs.
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

    /// The full deadline of an AT request in µs, rebuilt near `now_us`.
    pub(crate) fn deadline(self, now_us: u64) -> Option<u64> {
        let Kind::At { exp, mantissa } = self else {
            return None;
        };
        let now_units = now_us >> exp;
        let raw = (u64::from(mantissa).wrapping_sub(now_units)) & MANTISSA_MASK;
        // Sign-extend the 28-bit difference, since the deadline lies within
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

    /// Whether the shutdown scan has closed the word. That is CLOSED, whatever its mark.
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

    /// This word with the IN_INBOX bit of `flags`, which may be any word.
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

/// An inbox push's note to the timer.
///
/// It holds the request the pusher installed, and the clock in µs that it encoded the
/// request's deadline against.
///
/// An AT deadline is relative, as the module docs explain. Rebuilt against the reader's
/// clock, it is exact within 2^27 units of that clock. That is 134 s at microsecond
/// precision. But the timer may read the inbox far later. Every worker may be busy for
/// minutes, the process stopped, or the VM paused. Rebuilt against the pusher's own
/// clock, the deadline is exact however late.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stamp {
    version: u32,
    kind: Kind,
    now_us: u64,
}

impl Stamp {
    /// Plain moves. A `Stamp` is built on every `fire_after`, but needed only by the one that
    /// pushes.
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

    /// The deadline of `seen`, the word the timer read as it took the trigger from the inbox
    /// at `now_us`.
    ///
    /// The pushed request's deadline comes out exactly. A newer request was published while
    /// the trigger sat in the inbox. So it is recent, unless the timer role pauses again
    /// before it is read. Its deadline is rebuilt near `now_us`. If even that request is more
    /// than 2^27 units old, the rebuilt deadline is a multiple of 2^28 units late, never
    /// early.
    pub(crate) fn deadline(self, seen: Word, now_us: u64) -> Option<u64> {
        let pushed = seen.version() == self.version & VERSION_MASK && seen.kind() == self.kind;
        seen.kind()
            .deadline(if pushed { self.now_us } else { now_us })
    }
}

/// Whether version `a` is newer than `b` in 30-bit wrapping order.
///
/// That holds within half the ring, 2^29 versions, which is far beyond any request in
/// flight.
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
    /// A firer's request, or the scheduler's own. It is refused while paused.
    Publish,
    /// A resume's request. It goes in only over PAUSED.
    Resume,
    /// The schedule a RESUMING word waited for. It goes in only over that word.
    Settle,
}

/// Why [`Request::install`] installed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A newer version is installed, and its request wins.
    Newer,
    /// The trigger is paused. This refuses a firer's request.
    Paused,
    /// The trigger is not paused, for a resume's request. For a settling request, the
    /// RESUMING word was settled or replaced already.
    NotPaused,
    /// The shutdown scan has closed the word, so nothing goes in.
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

    /// Reads the word for statistics, the paused checks, and the timer's expiry. See
    /// `Core::expire`.
    ///
    /// Relaxed: a recent value is enough. Every decision taken on it is then made by an RMW
    /// that fails if the word moved on.
    #[inline]
    pub(crate) fn peek(&self) -> Word {
        Word(self.word.load(Ordering::Relaxed))
    }

    /// Reads the word, for models and tests.
    ///
    /// Relaxed: it orders nothing.
    #[cfg(any(test, loom))]
    pub(crate) fn load(&self) -> Word {
        Word(self.word.load(Ordering::Relaxed))
    }

    /// Every conditional transition goes through the one compare-exchange loop of `word.rs`,
    /// as `State::update` does.
    ///
    /// `step` maps the word read to a [`Step`] and the outcome to return. The step writes a
    /// new raw word with the ordering that transition needs, or leaves the word.
    #[inline]
    fn update<T>(&self, mut step: impl FnMut(Word) -> Step<T>) -> T {
        word::update(&self.word, |raw| step(Word(raw)))
    }

    /// Installs `kind` for `version` unless a newer version is already installed or the
    /// trigger is paused. Returns the word it replaced, or `None` if refused.
    ///
    /// An AT request sets IN_INBOX too. Same-version writes are allowed, for exit re-arms and
    /// re-runs after a reservation.
    #[cfg(test)]
    pub(crate) fn publish(&self, version: u32, kind: Kind) -> Option<Word> {
        self.install(version, kind, Installer::Publish).ok()
    }

    /// `publish`, telling why it was refused.
    ///
    /// A resume's request goes in only over PAUSED, and never under a newer version. A
    /// settling one goes in only over the RESUMING word of `version`. A firer's request that
    /// meets PAUSED raises the paused word's version to its own. The resume that later finds
    /// it newer than its own request advances again. So the request it installs is never
    /// made stale by a fire refused meanwhile.
    #[inline]
    pub(crate) fn install(
        &self,
        version: u32,
        kind: Kind,
        installer: Installer,
    ) -> Result<Word, Refused> {
        // Every AT request goes to the timer through the inbox. So only the
        // timer's `leave_inbox` ever clears IN_INBOX under an AT request. An AT
        // word without it is the one the timer filed last. See `Core::expire`.
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
                // Relaxed: the version is only compared, by the resume's own RMW on
                // this word. No data goes with it.
                return Step::Store(raised, Ordering::Relaxed, Err(Refused::Paused));
            }
            if resume && !paused {
                return Step::Keep(Err(Refused::NotPaused));
            }
            if is_newer(current.version(), version) {
                return Step::Keep(Err(Refused::Newer));
            }
            // AcqRel: Release hands the caller's writes to the worker's Acquire in
            // `take_due`, for G2. Acquire pairs with `touch` for the timer wake-up
            // protocol of `scheduler/pool/inbox.rs`.
            let new = fresh | (current.raw() & IN_INBOX);
            Step::Store(new, Ordering::AcqRel, Ok(current))
        })
    }

    /// Installs PAUSED over whatever the word holds, keeping its version and IN_INBOX.
    /// Returns the word it replaced.
    ///
    /// That is PAUSED itself if the trigger was paused already, and then nothing changes.
    /// What makes a pause hold is the order of RMWs on this word and on the state word. See
    /// `Core::pause`.
    ///
    /// Acquire, for one datum. A suspend recorded its version in `RareCounters::suspended`.
    /// It then installed its IDLE word with Release, and this call may replace that word.
    /// The pause reads the record to keep the trigger suspended through the resume, as G6
    /// requires. With Relaxed, a weakly ordered CPU could show it the record from before.
    pub(crate) fn pause(&self) -> Word {
        self.update(|current| {
            let paused = match current.kind() {
                Kind::Paused | Kind::Closed { paused: true, .. } => return Step::Keep(current),
                // Shut down, so the pause is only noted, for `is_paused`. The
                // scan's mark stays, since a run it stands for was accepted before.
                Kind::Closed { mark, .. } => Kind::Closed { mark, paused: true },
                _ => Kind::Paused,
            };
            let paused = Word::new(current.version(), paused).with_inbox_of(current.raw());
            Step::Store(paused, Ordering::Acquire, current)
        })
    }

    /// Brings the word's version up to `version`, keeping its kind.
    ///
    /// It serves fires that only bump the state word, by coalescing into a reserved re-run.
    /// With it, the two versions never drift half the 30-bit ring apart. Past that, `is_newer`
    /// would judge the re-run's publish at `exit` older than the word, and refuse it. An AT
    /// request is left alone, since the timer files that exact word. None is live while a
    /// re-run is reserved.
    ///
    /// Relaxed: it hands nothing on. As an RMW, it keeps every release sequence running
    /// through the word.
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

    /// Claims a DUE request, turning DUE into TAKEN. Returns the version to enter.
    pub(crate) fn take_due(&self) -> Option<u32> {
        self.update(|current| {
            if current.kind() != Kind::Due {
                return Step::Keep(None);
            }
            let taken = Word::new(current.version(), Kind::Taken).with_inbox_of(current.raw());
            // Acquire: pairs with the Release in `publish`. So the iteration, or the
            // reservation it leaves, sees the caller's writes, as G2 requires.
            Step::Store(taken, Ordering::Acquire, Some(current.version()))
        })
    }

    /// The timer found the AT request `expected` due, and turns AT into DUE.
    ///
    /// It does not if the word changed since the timer read it. A new request also sets
    /// IN_INBOX, so the timer will read that one.
    pub(crate) fn expire(&self, expected: Word) -> bool {
        let due = Word::new(expected.version(), Kind::Due).with_inbox_of(expected.raw());
        self.update(|current| {
            if current != expected {
                return Step::Keep(false);
            }
            // Release: hands the timer's statistics, the deadline it marked due, to
            // the worker's Acquire in `take_due`. The caller's data needs no more,
            // since an RMW continues the release sequence of the publish it
            // replaces.
            Step::Store(due, Ordering::Release, true)
        })
    }

    /// Timer side. Clears IN_INBOX and returns the request it read, in one RMW.
    ///
    /// A firer that found IN_INBOX set published before this in the word's modification
    /// order. So this reads that request or a newer one, and no `fire_after` is lost, as G4
    /// requires. That is a property of the RMW, not of its ordering.
    ///
    /// Relaxed: the timer reads only the word's bits. The worker still synchronizes with the
    /// caller through the release sequence that this RMW continues.
    pub(crate) fn leave_inbox(&self) -> Word {
        Word(self.word.fetch_and(!IN_INBOX, Ordering::Relaxed) & !IN_INBOX)
    }

    /// Sets IN_INBOX for a push of whatever the word holds. Returns the word if this call set
    /// the flag.
    ///
    /// `None` means the trigger is in the inbox, and the timer will read the word later.
    ///
    /// Relaxed: the push goes through the pool's lock, which orders this caller's earlier
    /// writes to the word before the timer reads it. If the flag was set, the timer's
    /// `leave_inbox` that clears it comes later in the word's modification order than this
    /// RMW. So it reads this caller's earlier writes or newer ones anyway.
    pub(crate) fn enter_inbox(&self) -> Option<Word> {
        let old = self.word.fetch_or(IN_INBOX, Ordering::Relaxed);
        (old & IN_INBOX == 0).then_some(Word(old))
    }

    /// Reads the word with an RMW for the inbox pusher. See the wake-up protocol in
    /// `scheduler/pool/inbox.rs`.
    ///
    /// Release: a later Acquire `publish` that reads this write synchronizes with the pusher.
    /// So it sees the `sleep_until` that the pusher judged under the lock.
    pub(crate) fn touch(&self) -> Word {
        Word(self.word.fetch_or(0, Ordering::Release))
    }
}

/// What one attempt of a transition does with the request word, as a raw word to store.
type Step<T> = word::Step<u64, T>;

mod closed;
#[cfg(all(test, not(loom)))]
mod tests;
