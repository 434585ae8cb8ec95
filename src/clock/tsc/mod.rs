//! A cheaper "now" for computing deadlines on x86-64 Linux: the CPU's
//! time-stamp counter read without a fence, turned into `CLOCK_MONOTONIC`
//! nanoseconds through a per-thread anchor, and **rounded up** so that a
//! deadline computed from it is never early (G15).
//!
//! `clock_gettime` spends most of its 20-odd ns in the fence that orders
//! its TSC read (`rdtscp`, or `lfence; rdtsc`). A deadline does not need
//! the exact time, only a time **not before** the call: this module
//! returns such an upper bound for about half the cost.
//!
//! ```text
//! anchor (per thread, ≤ 250 µs old):  tsc₀ ──────────── tsc (now)
//!                                      ns₀ = CLOCK_MONOTONIC read after tsc₀
//! upper(tsc) = ns₀ + (tsc − tsc₀) · rate⁺ + 1 + REORDER_NS
//! ```
//!
//! Why the result is never behind the monotonic clock:
//!
//! - `ns₀` is read after `tsc₀` (both reads are ordered in the slow path),
//!   so `ns₀ ≥ M(tsc₀)`, where `M` maps a TSC value to the monotonic clock.
//! - `rate⁺` is an upper bound on the clock's nanoseconds per tick, the
//!   product of two bounds:
//!   - the rate of `CLOCK_MONOTONIC_RAW`, which no time daemon adjusts:
//!     learned over at least [`LEARN_NS`], bounded from above by the
//!     uncertainty of its two readings;
//!   - how much faster than that the monotonic clock runs *now*: the
//!     kernel's current adjustments (`adjtimex`, read at every refresh —
//!     tick length, frequency, the phase-locked loop's offset), plus 500
//!     ppm for an `adjtime` slew it does not show ([`slew_ppm`]). A time
//!     daemon slewing an offset away (chrony changes the tick length by up
//!     to 8.3 %) is taken into account at the next refresh.
//! - The unfenced read may execute before instructions that precede it
//!   (out of order), by at most the time they take: [`REORDER_NS`] covers
//!   that, so the result is not behind a clock reading taken before the
//!   call.
//!
//! The cost of the bound is lateness: at most `REORDER_NS` + 1 ns + about
//! 0.05 % (plus the rate's uncertainty, and the kernel's adjustment while a
//! daemon slews) of the anchor's 250 µs age: about 1.2 µs.
//!
//! What it cannot see: a rate *raised* by a time daemon after a thread's
//! last refresh holds for that thread's anchor until its next one (at most
//! 250 µs later). A raise of up to the 500 ppm allowance costs nothing (the
//! allowance covers it); a daemon starting an 8.3 % slew in that window
//! could make a deadline computed in it early by at most that excess of
//! the anchor's age. Nor can it see a phase-loop share the kernel still
//! applies after a daemon replaced the offset it came from, unless some
//! thread of the process saw that offset in the 2 s before (the share is
//! remembered that long): a process that wakes in that second after a
//! large offset was replaced can compute such early deadlines too.
//!
//! The check on each refresh switches the fast path off for good when the
//! previous anchor fell behind the clock while the kernel's adjustments
//! stayed the same: that is a fault of this module's model, not a daemon's
//! change (see [`Anchor::judged_by`]).
//!
//! It is used only where the kernel itself trusts the TSC (the current
//! clocksource is `tsc`: invariant and synchronized across CPUs); once
//! off, every reading is `clock_gettime`'s.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// How long a thread's anchor serves before the thread reads the clock
/// again, in ns.
const ANCHOR_NS: u64 = 250_000;
/// How far the unfenced TSC read may run ahead of the instructions before
/// it, in ns (a few hundred at most: the time those instructions take).
const REORDER_NS: u64 = 1_000;
/// What the kernel may add to the monotonic clock's rate that `adjtimex`
/// does not show, in ppm: an `adjtime` slew (at most 500 ppm), plus a
/// residue for its own rounding of the rate (well below 1 ppm).
const HIDDEN_PPM: i64 = 510;
/// The baseline the rate is learned over before the fast path starts, in
/// ns; until then every reading is `clock_gettime`'s.
const LEARN_NS: u64 = 20_000_000;
/// A clock reading counts as a calibration pair only if the two TSC reads
/// around it are at most this many ticks apart (no preemption between).
const PAIR_TICKS: u64 = 1 << 10;
/// How far the suspended time may seem to move between two pairs without
/// a suspend (the two clocks are read a few ns apart), in ns.
const SUSPEND_TOLERANCE_NS: u64 = 100_000;
/// Tries to read a tight pair before giving up on this refresh.
const PAIR_TRIES: usize = 4;

/// A monotonic clock reading and the TSC values just before and after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pair {
    /// TSC, read (ordered) before the clock.
    before: u64,
    /// `CLOCK_MONOTONIC`, ns.
    ns: u64,
    /// `CLOCK_MONOTONIC_RAW`, ns, read after `ns`: the rate's lesson.
    raw_ns: u64,
    /// TSC, read (ordered) after the clock.
    after: u64,
    /// `CLOCK_BOOTTIME` less `CLOCK_MONOTONIC`: the time the system spent
    /// suspended (the TSC may count on through a suspend that the
    /// monotonic clock skips).
    asleep_ns: u64,
}

/// One thread's anchor: readings `tsc - tsc₀ < span` map to an upper
/// bound of the monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Anchor {
    tsc: u64,
    ns: u64,
    /// Upper bound of ns per tick, in 2^-32 ns.
    mult: u64,
    /// Ticks the anchor serves (0: none); `span · mult` stays below 2^51,
    /// so the product in [`Anchor::upper_ns`] cannot overflow.
    span: u64,
    /// The kernel's adjustments it was made at (see [`slew_ppm`]).
    slew_ppm: i64,
}

impl Anchor {
    const NONE: Anchor = Anchor {
        tsc: 0,
        ns: 0,
        mult: 0,
        span: 0,
        slew_ppm: 0,
    };

    /// An anchor at `pair`'s reading, at the raw clock's rate bound
    /// `raw_mult` sped up by `slew_ppm` (see [`slew_ppm`]), rounded up.
    fn new(pair: Pair, raw_mult: u64, slew_ppm: i64) -> Self {
        let scale = u128::try_from(1_000_000 + slew_ppm).unwrap_or(0);
        let mult = (u128::from(raw_mult) * scale).div_ceil(1_000_000);
        let mult = u64::try_from(mult).unwrap_or(u64::MAX).max(1);
        Anchor {
            tsc: pair.before,
            ns: pair.ns,
            mult,
            span: ((u128::from(ANCHOR_NS) << 32) / u128::from(mult)) as u64,
            slew_ppm,
        }
    }

    /// Whether `pair` can judge this anchor ([`holds_at`](Self::holds_at)):
    /// read within two spans of it — extrapolating across a thread's long
    /// sleep tests a rate over a time the anchor never served — with the
    /// kernel's adjustments (`slew`) unchanged. A rate a time daemon
    /// changed since is the case the module docs own up to: the new anchor
    /// follows it, and the fast path stays on.
    fn judged_by(&self, pair: Pair, slew: Option<i64>) -> bool {
        self.span != 0
            && pair.after.wrapping_sub(self.tsc) <= 2 * self.span
            && slew == Some(self.slew_ppm)
    }

    /// An upper bound of the monotonic clock at `tsc`, if the anchor
    /// serves it (a TSC behind the anchor's, another CPU's or after a
    /// reset, wraps to a huge distance and is not served).
    #[inline]
    fn upper_ns(&self, tsc: u64) -> Option<u64> {
        let ticks = tsc.wrapping_sub(self.tsc);
        if ticks >= self.span {
            return None;
        }
        Some(self.ns + ((ticks * self.mult) >> 32) + 1 + REORDER_NS)
    }

    /// Whether the anchor's extrapolation (any distance, no margin for
    /// reordering: the pair's reads are ordered) is still at or ahead of
    /// the clock reading in `pair`.
    fn holds_at(&self, pair: Pair) -> bool {
        let ticks = u128::from(pair.after.wrapping_sub(self.tsc));
        let extrapolated = u128::from(self.ns) + ((ticks * u128::from(self.mult)) >> 32) + 1;
        extrapolated >= u128::from(pair.ns)
    }
}

/// An upper bound (2^-32 ns per tick) of the raw monotonic clock's rate
/// from two pairs at least [`LEARN_NS`] apart, or `None` if they are
/// closer.
///
/// Between the raw clock's two reads at most `b.raw_ns - a.raw_ns` ns
/// passed, over at least `b.before - a.after` ticks: their ratio bounds
/// the mean rate from above, whatever the two reads' positions within
/// their pairs. No time daemon adjusts the raw clock: its rate is the
/// clocksource's, fixed.
fn learn(a: Pair, b: Pair) -> Option<u64> {
    // A suspend in between: the TSC may have counted through it, and the
    // rate would come out low. No lesson (the two reads of the offset are
    // a few ns apart; a suspend is far longer than the tolerance).
    if a.asleep_ns.abs_diff(b.asleep_ns) > SUSPEND_TOLERANCE_NS {
        return None;
    }
    let ns = b.raw_ns.checked_sub(a.raw_ns)?;
    let ticks = b.before.checked_sub(a.after)?;
    if ns < LEARN_NS || ticks == 0 {
        return None;
    }
    let mult = (u128::from(ns) << 32).div_ceil(u128::from(ticks)) + 1;
    u64::try_from(mult).ok().filter(|&mult| mult < 1 << 48)
}

/// What `adjtimex` shows of the kernel's adjustments to the monotonic
/// clock's rate (the fields of `struct timex` that matter here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Adjustments {
    /// µs per scheduler tick (`USER_HZ` of them a second).
    tick: i64,
    /// The nominal `tick`: 1,000,000 / `USER_HZ`.
    nominal_tick: i64,
    /// Frequency offset, ppm · 2^16.
    freq: i64,
    /// The phase-locked loop's remaining offset (ns with `STA_NANO`, µs
    /// otherwise), and its time constant.
    offset: i64,
    constant: i64,
    status: i32,
}

/// The kernel's adjustments now, if it tells them.
fn adjustments() -> Option<Adjustments> {
    // SAFETY: `timex` is plain data, valid all zeroes; `modes == 0` asks
    // `adjtimex` only to read, which any process may, into that struct.
    let mut timex: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: as above; the pointer is valid and writable for the call.
    if unsafe { libc::adjtimex(&mut timex) } < 0 {
        return None;
    }
    // SAFETY: `sysconf` reads a constant.
    let user_hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(Adjustments {
        tick: timex.tick,
        nominal_tick: 1_000_000 / user_hz.max(1),
        freq: timex.freq,
        offset: timex.offset,
        constant: timex.constant,
        status: timex.status,
    })
}

/// How much faster than its raw rate the monotonic clock may run now, in
/// ppm (negative: slower), rounded up; `None` if the adjustments allow no
/// useful bound (a pulse-per-second signal steering the phase: the kernel
/// then corrects a whole offset in a second).
///
/// The kernel's rate is the tick length, plus the frequency offset, plus
/// each second a share of the loop's remaining offset ([`share_ppm`]),
/// plus what [`HIDDEN_PPM`] covers.
fn slew_ppm(adj: Adjustments) -> Option<i64> {
    const STA_PPSTIME: i32 = 0x0004;
    const STA_PPSSIGNAL: i32 = 0x0100;
    if adj.status & STA_PPSTIME != 0 && adj.status & STA_PPSSIGNAL != 0 {
        return None;
    }
    let tick_ppm = (adj.tick - adj.nominal_tick) * 1_000_000 / adj.nominal_tick.max(1);
    let freq_ppm = adj.freq.div_euclid(1 << 16) + 1;
    Some(tick_ppm + freq_ppm + share_ppm(adj) + HIDDEN_PPM)
}

/// The phase-locked loop's share of the rate, in ppm, rounded up: each
/// second the kernel applies `offset / 2^(2 + constant)` of the offset as
/// it stood at the second's start (at most twice the offset now, once a
/// share of it is gone). A time daemon that *replaces* the offset changes
/// what `adjtimex` shows at once, but not the share already applied this
/// second: [`recent_share`] remembers the shares seen lately.
fn share_ppm(adj: Adjustments) -> i64 {
    const STA_NANO: i32 = 0x2000;
    /// The kernel bounds the loop's offset by half a second.
    const MAXPHASE_NS: i64 = 500_000_000;
    let offset_ns = if adj.status & STA_NANO != 0 {
        adj.offset.unsigned_abs()
    } else if adj.offset > MAXPHASE_NS / 1_000 {
        // The kernel hands a negative µs offset through a 32-bit unsigned
        // cast: undo it (to within a µs).
        ((1i64 << 32) - adj.offset * 1_000).unsigned_abs() + 1_000
    } else {
        adj.offset.unsigned_abs() * 1_000
    };
    let offset_ns = offset_ns.min(MAXPHASE_NS as u64) as i64;
    let shift = 2 + adj.constant.clamp(0, 10);
    // ns per second are thousandths of a ppm.
    ((2 * offset_ns) >> shift) / 1_000 + 1
}

/// How long a seen share is remembered, in seconds: the kernel applies a
/// share for one second after the offset it came from was replaced.
const SHARE_MEMORY_S: u64 = 2;

/// The share to bound the rate with, given the `share` read now at
/// `now_s` (seconds of the monotonic clock) and the `remembered` one
/// (packed: the second it was seen in the high half, the share in the low
/// half): the larger while the remembered one is recent. Returns it and
/// what to remember now.
fn recent_share(remembered: u64, share: i64, now_s: u64) -> (i64, u64) {
    let (seen_at, seen) = (remembered >> 32, (remembered & u64::from(u32::MAX)) as i64);
    let recent = now_s.saturating_sub(seen_at) <= SHARE_MEMORY_S;
    let share = share.clamp(0, i64::from(u32::MAX));
    if recent && seen > share {
        (seen, remembered)
    } else {
        (share, now_s << 32 | share as u64)
    }
}

/// What every thread shares: the first pair, the learned rate, and the
/// off switch.
struct Shared {
    first: OnceLock<Pair>,
    /// [`learn`]'s latest result; 0 until learned.
    mult: AtomicU64,
    /// Set for good when an anchor fell behind the clock.
    off: AtomicBool,
    /// The phase-locked loop's largest share seen lately (see
    /// [`recent_share`]).
    share: AtomicU64,
}

static SHARED: Shared = Shared {
    first: OnceLock::new(),
    mult: AtomicU64::new(0),
    off: AtomicBool::new(false),
    share: AtomicU64::new(0),
};

thread_local! {
    static ANCHOR: Cell<Anchor> = const { Cell::new(Anchor::NONE) };
}

/// Whether the kernel's clocksource is the TSC (read once per process).
fn trusted() -> bool {
    static TRUSTED: OnceLock<bool> = OnceLock::new();
    *TRUSTED.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|source| source.trim() == "tsc")
    })
}

/// The TSC, unfenced: it may execute ahead of earlier instructions (see
/// [`REORDER_NS`]).
#[inline]
fn tsc() -> u64 {
    // SAFETY: `rdtsc` reads a register; every x86-64 CPU has it, and it
    // touches no memory.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

/// The TSC, after every earlier instruction has executed.
fn tsc_ordered() -> u64 {
    // SAFETY: `lfence` (SSE2, which every x86-64 CPU has) waits for the
    // instructions before it; `rdtsc` reads a register. Neither touches
    // memory. (Not `rdtscp`: some virtual CPUs lack it.)
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_mm_lfence();
        core::arch::x86_64::_rdtsc()
    }
}

/// A clock reading between two ordered TSC reads close together.
fn read_pair() -> Option<Pair> {
    for _ in 0..PAIR_TRIES {
        let before = tsc_ordered();
        let ns = super::raw::now_ns()?;
        let raw_ns = super::raw::read_ns(libc::CLOCK_MONOTONIC_RAW)?;
        let after = tsc_ordered();
        let asleep_ns = super::raw::read_ns(libc::CLOCK_BOOTTIME)?.wrapping_sub(ns);
        if after.wrapping_sub(before) <= PAIR_TICKS {
            return Some(Pair {
                before,
                ns,
                raw_ns,
                after,
                asleep_ns,
            });
        }
    }
    None
}

/// An upper bound of `CLOCK_MONOTONIC` now, in ns, never behind a reading
/// of it taken before this call; `None` where the fast path does not run
/// (the caller reads the clock itself).
#[inline]
pub(super) fn upper_ns() -> Option<u64> {
    let now = tsc();
    match ANCHOR.with(|anchor| anchor.get().upper_ns(now)) {
        Some(ns) => Some(ns),
        None => refresh(),
    }
}

/// The slow path: a new anchor for this thread, learning the rate first.
/// Returns the exact reading it took (for this call) when it has one.
#[cold]
#[inline(never)]
fn refresh() -> Option<u64> {
    if !trusted() || SHARED.off.load(Ordering::Relaxed) {
        return None;
    }
    if SHARED.mult.load(Ordering::Relaxed) == 0 {
        if let Some(first) = SHARED.first.get() {
            // Still learning: no pair is needed before the baseline.
            let ns = super::raw::now_ns()?;
            if ns.saturating_sub(first.ns) < LEARN_NS {
                return Some(ns);
            }
        }
    }
    let pair = read_pair()?;
    let first = *SHARED.first.get_or_init(|| pair);
    // Relaxed: the rate is a plain value, and every stored one (from any
    // thread's pairs) is an upper bound.
    let known = SHARED.mult.load(Ordering::Relaxed);
    let slew = adjustments().and_then(|adj| {
        let share = share_ppm(adj);
        // Relaxed: a plain value. Two refreshes at once may each keep their
        // own; both read `adjtimex` within nanoseconds of each other.
        let remembered = SHARED.share.load(Ordering::Relaxed);
        let (bound, remember) = recent_share(remembered, share, pair.ns / 1_000_000_000);
        if remember != remembered {
            SHARED.share.store(remember, Ordering::Relaxed);
        }
        Some(slew_ppm(adj)? + (bound - share))
    });
    match renew(ANCHOR.with(Cell::get), pair, first, known, slew) {
        Renewal::Off => {
            // Relaxed: a flag; until other threads see it, their anchors
            // stay within a quarter millisecond of their own last check.
            SHARED.off.store(true, Ordering::Relaxed);
            ANCHOR.with(|anchor| anchor.set(Anchor::NONE));
        }
        Renewal::Anchor(anchor, learned) => {
            if let Some(mult) = learned {
                // Never lowered: a higher bound is only later, never early.
                SHARED.mult.fetch_max(mult, Ordering::Relaxed);
            }
            ANCHOR.with(|cell| cell.set(anchor));
        }
        Renewal::Learning => {}
    }
    Some(pair.ns)
}

/// What a refresh does with a new pair (see [`renew`]).
#[derive(Debug, PartialEq, Eq)]
enum Renewal {
    /// The previous anchor fell behind the clock, or the kernel's
    /// adjustments cannot be read or allow no bound (a pulse-per-second
    /// signal steers the clock: a time server's): the fast path goes off
    /// for good.
    Off,
    /// A new anchor, and the rate it learned if it learned one (to share).
    Anchor(Anchor, Option<u64>),
    /// No rate known yet: no anchor.
    Learning,
}

/// The refresh's decision, without its reads: the thread's `previous`
/// anchor is checked against `pair` (if `pair` can judge it), then a new
/// anchor is made at the raw rate learned from the process's `first` pair,
/// or at the `known` one (0: none yet), sped up by the kernel's current
/// `slew` (see [`slew_ppm`]).
fn renew(previous: Anchor, pair: Pair, first: Pair, known: u64, slew: Option<i64>) -> Renewal {
    if previous.judged_by(pair, slew) && !previous.holds_at(pair) {
        return Renewal::Off;
    }
    let learned = learn(first, pair).map(|mult| mult.max(known));
    let Some(raw_mult) = learned.or((known != 0).then_some(known)) else {
        return Renewal::Learning;
    };
    match slew {
        Some(ppm) => Renewal::Anchor(Anchor::new(pair, raw_mult, ppm), learned),
        None => Renewal::Off,
    }
}

#[cfg(test)]
mod tests;
