//! The request word: one `AtomicU64` pairing the live version with what it
//! asks for (nothing, "run now", or "run at T"), so a dispatch serves the
//! request that is live when it runs instead of a version made stale by a
//! newer fire (G13), and the timer holds one entry per trigger (G9).
//!
//! ```text
//!  bits 34..=63        bits 28..=33   bits 0..=27
//! ┌──────────────────┬──────────────┬──────────────────────────────┐
//! │ version (30 bits)│ tag (6 bits) │ mantissa (28 bits)            │
//! └──────────────────┴──────────────┴──────────────────────────────┘
//! tag 0..=38 : AT — deadline ≈ mantissa · 2^tag µs (see below)
//! tag 61     : TAKEN — a worker has claimed this version's run
//! tag 62     : DUE   — run now (fire(), or the timer found AT expired)
//! tag 63     : IDLE  — nothing requested (suspend, or a fresh trigger)
//! ```
//!
//! A deadline needs more than the 34 bits left beside the version, so an AT
//! request stores it like a float: the exponent `e` is the smallest that
//! makes the delay fit in 26 bits of `2^e` µs units, and the mantissa holds
//! the deadline's units (rounded **up**, so never early) modulo 2^28. The
//! reader rebuilds the full deadline from its own clock: the unique value
//! within ±2^27 units of now. Delays under 67 s keep microsecond precision;
//! an hour rounds up by at most 64 µs; the horizon is the whole `u64` µs
//! range. The timer reads every AT request promptly (it is queued to it at
//! publish), so its lag stays far inside the 2^26-unit margin.
//!
//! # Orderings
//!
//! * **caller → worker**: [`Request::publish`] is a *Release* CAS (AcqRel,
//!   see below); [`Request::take_due`] is an *Acquire* CAS. The timer's
//!   [`Request::expire`] in between is a Relaxed RMW, which continues the
//!   release sequence, so the worker still synchronizes with the caller.
//! * **timer wake-up protocol**: `publish` also *Acquires*, and the inbox
//!   pusher reads the word with an AcqRel [`Request::touch`]; whichever of
//!   the two comes later in this word's modification order sees the other
//!   (see `scheduler/inbox.rs`).

use crate::state::VERSION_MASK;
use crate::sync::{AtomicU64, Backoff, Ordering};
use std::fmt;

const VERSION_SHIFT: u32 = 34;
const TAG_SHIFT: u32 = 28;
const TAG_MASK: u64 = 0x3F;
const MANTISSA_BITS: u32 = 28;
const MANTISSA_MASK: u64 = (1 << MANTISSA_BITS) - 1;
/// A delay must fit in this many bits of units; the other 2 bits of the
/// mantissa are the reader's margin (lag of up to 2^26 units).
const DELAY_BITS: u32 = 26;
/// Largest AT exponent: 26 + 38 = 64 covers every `u64` delay.
const MAX_EXP: u8 = 38;

const TAG_TAKEN: u8 = 61;
const TAG_DUE: u8 = 62;
const TAG_IDLE: u8 = 63;

/// What a request word asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Nothing: suspended, stopped, or never fired.
    Idle,
    /// Run as soon as a worker is free.
    Due,
    /// A worker has claimed the run of this version.
    Taken,
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
        let exp = bits.saturating_sub(DELAY_BITS) as u8;
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
            Kind::At { exp, mantissa } => (exp, u64::from(mantissa)),
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
            exp => Kind::At {
                exp,
                mantissa: (self.0 & MANTISSA_MASK) as u32,
            },
        }
    }

    pub(crate) fn raw(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Word")
            .field("version", &self.version())
            .field("kind", &self.kind())
            .finish()
    }
}

/// Whether version `a` is newer than `b` in 30-bit wrapping order (within
/// half the ring, 2^29 versions: far beyond any request in flight).
fn is_newer(a: u32, b: u32) -> bool {
    let distance = a.wrapping_sub(b) & VERSION_MASK;
    distance != 0 && distance < (VERSION_MASK >> 1) + 1
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

    /// Reads the word. Relaxed: the timer reads it after an AcqRel RMW on
    /// the trigger's inbox flag that ordered it after the publish it serves;
    /// no data written by the caller is read through this value.
    pub(crate) fn load(&self) -> Word {
        Word(self.word.load(Ordering::Relaxed))
    }

    /// Installs `kind` for `version` unless a newer version is already
    /// installed; returns whether it was installed. Same-version writes are
    /// allowed (exit re-arms, re-runs after a reservation).
    pub(crate) fn publish(&self, version: u32, kind: Kind) -> bool {
        let new = Word::new(version, kind).raw();
        let backoff = Backoff::new();
        let mut current = self.word.load(Ordering::Relaxed);
        loop {
            if is_newer(Word(current).version(), version) {
                return false;
            }
            // AcqRel: Release hands the caller's writes to the worker's
            // Acquire in `take_due` (G2); Acquire pairs with `touch` for the
            // timer wake-up protocol (scheduler/inbox.rs).
            match self
                .word
                .compare_exchange_weak(current, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => {
                    current = actual;
                    backoff.spin();
                }
            }
        }
    }

    /// Claims a DUE request: DUE → TAKEN. Returns the version to enter.
    pub(crate) fn take_due(&self) -> Option<u32> {
        let mut current = self.word.load(Ordering::Relaxed);
        loop {
            let word = Word(current);
            if word.kind() != Kind::Due {
                return None;
            }
            let taken = Word::new(word.version(), Kind::Taken).raw();
            // Acquire: pairs with the Release in `publish`, so the iteration
            // (or the reservation it leaves) sees the caller's writes (G2).
            match self.word.compare_exchange_weak(
                current,
                taken,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(word.version()),
                Err(actual) => current = actual,
            }
        }
    }

    /// The timer found the AT request `expected` due: AT → DUE, unless the
    /// word changed since the timer read it.
    pub(crate) fn expire(&self, expected: Word) -> bool {
        let due = Word::new(expected.version(), Kind::Due).raw();
        // Relaxed: an RMW continues the release sequence of the publish it
        // replaces, so `take_due`'s Acquire still synchronizes with the
        // caller; the timer itself reads no caller data.
        self.word
            .compare_exchange(expected.raw(), due, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Reads the word with an RMW (AcqRel), for the inbox pusher: see the
    /// wake-up protocol in `scheduler/inbox.rs`.
    pub(crate) fn touch(&self) -> Word {
        Word(self.word.fetch_or(0, Ordering::AcqRel))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn word_round_trips() {
        for kind in [
            Kind::Idle,
            Kind::Due,
            Kind::Taken,
            Kind::At {
                exp: 5,
                mantissa: 12345,
            },
        ] {
            let word = Word::new(VERSION_MASK, kind);
            assert_eq!(word.version(), VERSION_MASK);
            assert_eq!(word.kind(), kind);
        }
    }

    #[test]
    fn short_delays_keep_microseconds() {
        let now = 1_000_000_007;
        for delay in [1, 2, 999, 5_000, 500_000, 60_000_000] {
            let kind = Kind::at(now + delay, now);
            assert!(matches!(kind, Kind::At { exp: 0, .. }));
            assert_eq!(kind.deadline(now), Some(now + delay));
            // A reader a little later still decodes the same deadline.
            assert_eq!(kind.deadline(now + 30_000_000), Some(now + delay));
        }
    }

    #[test]
    fn long_delays_round_up_never_early() {
        let now = 123_456_789;
        for delay in [3_600_000_000u64, 86_400_000_000, 10 * 365 * 86_400_000_000] {
            let deadline = now + delay;
            let decoded = Kind::at(deadline, now).deadline(now + 1).unwrap();
            assert!(decoded >= deadline);
            assert!(decoded - deadline < delay >> 25, "{decoded} vs {deadline}");
        }
        let kind = Kind::at(u64::MAX, 0);
        assert_eq!(kind.deadline(0), Some(u64::MAX));
    }

    #[test]
    fn publish_refuses_older_versions() {
        let request = Request::new(10);
        assert!(request.publish(12, Kind::Due));
        assert!(!request.publish(11, Kind::Idle));
        assert!(request.publish(12, Kind::Taken));
        assert_eq!(request.load().kind(), Kind::Taken);
        // Across the wrap-around, 0 is newer than VERSION_MASK.
        let request = Request::new(VERSION_MASK);
        assert!(request.publish(0, Kind::Due));
        assert!(!request.publish(VERSION_MASK, Kind::Idle));
    }

    #[test]
    fn take_due_claims_once() {
        let request = Request::new(0);
        assert_eq!(request.take_due(), None);
        assert!(request.publish(1, Kind::Due));
        assert_eq!(request.take_due(), Some(1));
        assert_eq!(request.take_due(), None);
    }

    #[test]
    fn expire_only_matches_the_read_word() {
        let request = Request::new(0);
        assert!(request.publish(1, Kind::at(500, 0)));
        let seen = request.load();
        assert!(request.publish(2, Kind::at(900, 0)));
        assert!(!request.expire(seen));
        let seen = request.load();
        assert!(request.expire(seen));
        assert_eq!(request.take_due(), Some(2));
    }
}
