//! A cheaper "now" for computing deadlines on x86-64 Linux. It reads the
//! CPU's time-stamp counter without a fence. A per-thread anchor turns the
//! count into `CLOCK_MONOTONIC` nanoseconds. The result is **rounded up**,
//! so that a deadline computed from it is never early, as G15 requires.
//!
//! `clock_gettime` spends most of its cost in the fence that orders its TSC
//! read. That fence is `rdtscp`, or `lfence; rdtsc`. A deadline does not
//! need the exact time, only a time **not before** the call. This module
//! returns such an upper bound for about half the cost.
//!
//! ```text
//! anchor (per thread, ≤ 250 µs old):  tsc₀ ──────────── tsc (now)
//!                                      ns₀ = CLOCK_MONOTONIC read after tsc₀
//! upper(tsc) = ns₀ + (tsc − tsc₀) · rate⁺ + 1 + REORDER_NS
//! ```
//!
//! The result is never behind the monotonic clock, for three reasons.
//!
//! - `ns₀` is read after `tsc₀`, and the slow path orders both reads. So
//!   `ns₀ ≥ M(tsc₀)`, where `M` maps a TSC value to the monotonic clock.
//! - `rate⁺` is an upper bound on the clock's nanoseconds per tick. It is
//!   the product of two bounds.
//!   - The first is the rate of `CLOCK_MONOTONIC_RAW`, which no time daemon
//!     adjusts. It is learned over at least [`LEARN_NS`]. It is bounded
//!     from above by allowing for the uncertainty of its two readings.
//!   - The second is how much faster than that the monotonic clock runs
//!     *now*. It takes the kernel's current adjustments, read with
//!     `adjtimex` at every refresh. They are the tick length, the
//!     frequency, and the phase-locked loop's offset. [`slew_ppm`] adds 500
//!     ppm more for an `adjtime` slew that `adjtimex` does not show. A time
//!     daemon may slew an offset away. Chrony, for one, changes the tick
//!     length by up to a twelfth. The next refresh takes such a slew into
//!     account.
//! - The unfenced read may execute out of order, before instructions that
//!   precede it. It runs ahead by at most the time those instructions take.
//!   [`REORDER_NS`] covers that, so the result is not behind a clock
//!   reading taken before the call.
//!
//! The cost of the bound is lateness. The lateness is at most `REORDER_NS`,
//! plus one nanosecond, plus a share of the anchor's age. That share is
//! about 500 ppm, plus the rate's uncertainty, plus the kernel's adjustment
//! while a daemon slews. With the anchor's age of at most `ANCHOR_NS`,
//! the total is about 1.2 microseconds.
//!
//! Two changes escape the bound. First, a time daemon may *raise* the rate
//! after a thread's last refresh. That thread's anchor then holds until its
//! next refresh, at most `ANCHOR_NS` later. A raise within the 500 ppm
//! allowance costs nothing, because the allowance covers it. A daemon that
//! starts a slew of a twelfth in that window could make a deadline computed
//! in it early. That deadline is early by at most the excess rate's share
//! of the anchor's age. Second, the kernel may still apply a phase-loop
//! share after a daemon replaced the offset it came from. The module sees
//! that share only if some thread of the process saw the offset in the two
//! seconds before. `SHARE_MEMORY_S` keeps a seen share that long. A process
//! that wakes in that second after a large offset was replaced can compute
//! such early deadlines too.
//!
//! The check on each refresh switches the fast path off for good in one
//! case. That case is a previous anchor that fell behind the clock while
//! the kernel's adjustments stayed the same. It is a fault of this module's
//! model, not a daemon's change. [`Anchor::judged_by`] says which readings
//! may judge an anchor.
//!
//! It is used only where the kernel itself trusts the TSC. There the
//! current clocksource is `tsc`, which is invariant and synchronized across
//! CPUs. Once the fast path is off, every reading is `clock_gettime`'s.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

/// How long a thread's anchor serves before the thread reads the clock
/// again, in ns.
const ANCHOR_NS: u64 = 250_000;
/// How far the unfenced TSC read may run ahead of the instructions before
/// it, in ns. The real distance is the time those instructions take, a few
/// hundred at most.
const REORDER_NS: u64 = 1_000;
/// What the kernel may add to the monotonic clock's rate that `adjtimex`
/// does not show, in ppm. That is an `adjtime` slew of at most 500 ppm,
/// plus a residue for the kernel's own rounding of the rate. The residue is
/// well below 1 ppm.
const HIDDEN_PPM: i64 = 510;
/// The baseline the rate is learned over before the fast path starts, in
/// ns. Until then every reading is `clock_gettime`'s.
const LEARN_NS: u64 = 20_000_000;
/// A clock reading counts as a calibration pair only if the two TSC reads
/// around it are at most this many ticks apart. Then no preemption came
/// between them.
const PAIR_TICKS: u64 = 1 << 10;
/// How far the suspended time may seem to move between two pairs without a
/// suspend, in ns. The two clocks it comes from are read a few ns apart.
const SUSPEND_TOLERANCE_NS: u64 = 100_000;
/// Tries to read a tight pair before giving up on this refresh.
const PAIR_TRIES: usize = 4;

/// A monotonic clock reading and the TSC values just before and after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pair {
    /// The TSC, read before the clock, ordered.
    before: u64,
    /// `CLOCK_MONOTONIC`, ns.
    ns: u64,
    /// `CLOCK_MONOTONIC_RAW` in ns, read after `ns`. The rate is learned from it.
    raw_ns: u64,
    /// The TSC, read after the clock, ordered.
    after: u64,
    /// `CLOCK_BOOTTIME` less `CLOCK_MONOTONIC`, the time the system spent
    /// suspended. The TSC may count on through a suspend that the monotonic
    /// clock skips.
    asleep_ns: u64,
}

/// One thread's anchor. It maps readings with `tsc - tsc₀ < span` to an
/// upper bound of the monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Anchor {
    tsc: u64,
    ns: u64,
    /// Upper bound of nanoseconds per tick, in units of 2^-32 nanoseconds.
    mult: u64,
    /// Ticks the anchor serves, where 0 means none. `span · mult` stays
    /// below 2^51, so the product in [`Anchor::upper_ns`] cannot overflow.
    span: u64,
    /// The kernel's adjustments it was made at, as [`slew_ppm`] sums them.
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

    /// An anchor at `pair`'s reading. Its rate is the raw clock's rate
    /// bound `raw_mult`, sped up by `slew_ppm` and rounded up.
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

    /// Whether `pair` can judge this anchor with
    /// [`holds_at`](Self::holds_at). The pair must be read within two spans
    /// of the anchor. Extrapolating across a thread's long sleep would test
    /// a rate over a time the anchor never served. The kernel's
    /// adjustments, `slew`, must also be unchanged. A rate that a time
    /// daemon changed since is the case the module docs own up to. The new
    /// anchor follows that rate, and the fast path stays on.
    fn judged_by(&self, pair: Pair, slew: Option<i64>) -> bool {
        self.span != 0
            && pair.after.wrapping_sub(self.tsc) <= 2 * self.span
            && slew == Some(self.slew_ppm)
    }

    /// An upper bound of the monotonic clock at `tsc`, if the anchor serves
    /// it. A TSC behind the anchor's wraps to a huge distance and is not
    /// served. Such a TSC may be another CPU's, or read after a reset.
    #[inline]
    fn upper_ns(&self, tsc: u64) -> Option<u64> {
        let ticks = tsc.wrapping_sub(self.tsc);
        if ticks >= self.span {
            return None;
        }
        Some(self.ns + ((ticks * self.mult) >> 32) + 1 + REORDER_NS)
    }

    /// Whether the anchor's extrapolation is still at or ahead of the clock
    /// reading in `pair`. It extrapolates over any distance. It adds no
    /// margin for reordering, because the pair's reads are ordered.
    fn holds_at(&self, pair: Pair) -> bool {
        let ticks = u128::from(pair.after.wrapping_sub(self.tsc));
        let extrapolated = u128::from(self.ns) + ((ticks * u128::from(self.mult)) >> 32) + 1;
        extrapolated >= u128::from(pair.ns)
    }
}

/// An upper bound of the raw monotonic clock's rate, in units of 2^-32
/// nanoseconds per tick. It is learned from two pairs at least [`LEARN_NS`]
/// apart, and is `None` if they are closer.
///
/// Between the raw clock's two reads at most `b.raw_ns - a.raw_ns` ns
/// passed. At least `b.before - a.after` ticks passed over that time. Their
/// ratio bounds the mean rate from above, whatever the two reads' positions
/// within their pairs. No time daemon adjusts the raw clock. Its rate is
/// the clocksource's, and fixed.
fn learn(a: Pair, b: Pair) -> Option<u64> {
    // A suspend in between gives no lesson. The TSC may have counted
    // through it, and the rate would come out low. The two reads of the
    // offset are a few ns apart, and a suspend is far longer than the
    // tolerance.
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
/// clock's rate. It holds the fields of `struct timex` that matter here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Adjustments {
    /// Microseconds per scheduler tick. There are `USER_HZ` ticks a second.
    tick: i64,
    /// The nominal `tick`, which is 1,000,000 / `USER_HZ`.
    nominal_tick: i64,
    /// Frequency offset in ppm, scaled by 2^16.
    freq: i64,
    /// The phase-locked loop's remaining offset, and its time constant. The
    /// offset is in ns with `STA_NANO` and in µs otherwise.
    offset: i64,
    constant: i64,
    status: i32,
}

/// The kernel's adjustments now, if it tells them.
fn adjustments() -> Option<Adjustments> {
    // SAFETY: `timex` is plain data, valid as all zeroes. `modes == 0` asks
    // `adjtimex` only to read into that struct, which any process may do.
    let mut timex: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: as above. The pointer is valid and writable for the call.
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
/// ppm, rounded up. A negative value means slower. It is `None` if the
/// adjustments allow no useful bound. That is the case when a
/// pulse-per-second signal steers the phase, because the kernel then
/// corrects a whole offset in a second.
///
/// The kernel's rate is the tick length, plus the frequency offset, plus
/// what [`HIDDEN_PPM`] covers. Each second it also adds a share of the
/// loop's remaining offset, which [`share_ppm`] bounds.
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

/// The phase-locked loop's share of the rate, in ppm, rounded up. Each
/// second the kernel applies `offset / 2^(2 + constant)` of the offset as
/// it stood at the second's start. That offset is at most twice the offset
/// now, once a share of it is gone. A time daemon that *replaces* the
/// offset changes what `adjtimex` shows at once. It does not change the
/// share already applied this second. So [`recent_share`] remembers the
/// shares seen lately.
fn share_ppm(adj: Adjustments) -> i64 {
    const STA_NANO: i32 = 0x2000;
    /// The kernel bounds the loop's offset by half a second.
    const MAXPHASE_NS: i64 = 500_000_000;
    let offset_ns = if adj.status & STA_NANO != 0 {
        adj.offset.unsigned_abs()
    } else if adj.offset > MAXPHASE_NS / 1_000 {
        // The kernel hands a negative µs offset through a 32-bit unsigned
        // cast. This undoes the cast, to within a µs.
        ((1i64 << 32) - adj.offset * 1_000).unsigned_abs() + 1_000
    } else {
        adj.offset.unsigned_abs() * 1_000
    };
    let offset_ns = offset_ns.min(MAXPHASE_NS as u64) as i64;
    let shift = 2 + adj.constant.clamp(0, 10);
    // ns per second are thousandths of a ppm.
    ((2 * offset_ns) >> shift) / 1_000 + 1
}

/// How long a seen share is remembered, in seconds. The kernel applies a
/// share for one second after the offset it came from was replaced.
const SHARE_MEMORY_S: u64 = 2;

/// The share to bound the rate with. It is the larger of the `share` read
/// now and the `remembered` one, while the remembered one is recent.
/// `now_s` is the time of the read, in seconds of the monotonic clock.
/// `remembered` packs the second it was seen in the high half and the share
/// in the low half. Returns the share and what to remember now.
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

/// What every thread shares. It holds the first pair, the learned rate, and the off switch.
struct Shared {
    first: OnceLock<Pair>,
    /// [`learn`]'s latest result, or 0 until learned.
    mult: AtomicU64,
    /// Set for good when an anchor fell behind the clock.
    off: AtomicBool,
    /// The phase-locked loop's largest share seen lately, packed by [`recent_share`].
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

/// Whether the kernel's clocksource is the TSC. It is read once per process.
fn trusted() -> bool {
    static TRUSTED: OnceLock<bool> = OnceLock::new();
    *TRUSTED.get_or_init(|| {
        std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource")
            .is_ok_and(|source| source.trim() == "tsc")
    })
}

/// The TSC, unfenced. It may execute ahead of earlier instructions, by at
/// most [`REORDER_NS`].
#[inline]
#[cfg(not(miri))]
fn tsc() -> u64 {
    // SAFETY: `rdtsc` reads a register. Every x86-64 CPU has it, and it
    // touches no memory.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_rdtsc()
    }
}

/// Under Miri, which cannot execute `rdtsc`, a stand-in counter of one
/// tick per nanosecond of `CLOCK_MONOTONIC`. The calibration, the anchors
/// and their checks then run on it as on a real TSC.
#[cfg(miri)]
fn tsc() -> u64 {
    super::raw::now_ns().unwrap_or(0)
}

/// The TSC, after every earlier instruction has executed.
#[cfg(not(miri))]
fn tsc_ordered() -> u64 {
    // SAFETY: `lfence` waits for the instructions before it. It is part of
    // SSE2, which every x86-64 CPU has. `rdtsc` reads a register. Neither
    // touches memory. This is not `rdtscp`, because some virtual CPUs lack
    // it.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::_mm_lfence();
        core::arch::x86_64::_rdtsc()
    }
}

/// See the stand-in [`tsc`].
#[cfg(miri)]
fn tsc_ordered() -> u64 {
    tsc()
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

/// An upper bound of `CLOCK_MONOTONIC` now, in ns. It is never behind a
/// reading of it taken before this call. It is `None` where the fast path
/// does not run, and the caller then reads the clock itself.
#[inline]
pub(super) fn upper_ns() -> Option<u64> {
    let now = tsc();
    match ANCHOR.with(|anchor| anchor.get().upper_ns(now)) {
        Some(ns) => Some(ns),
        None => refresh(),
    }
}

/// The slow path makes a new anchor for this thread, learning the rate
/// first. It returns the exact reading it took for this call, when it has
/// one.
#[cold]
#[inline(never)]
fn refresh() -> Option<u64> {
    if !trusted() || SHARED.off.load(Ordering::Relaxed) {
        return None;
    }
    if SHARED.mult.load(Ordering::Relaxed) == 0 {
        if let Some(first) = SHARED.first.get() {
            // Still learning, and no pair is needed before the baseline.
            let ns = super::raw::now_ns()?;
            if ns.saturating_sub(first.ns) < LEARN_NS {
                return Some(ns);
            }
        }
    }
    let pair = read_pair()?;
    let first = *SHARED.first.get_or_init(|| pair);
    // Relaxed: the rate is a plain value. Every stored one is an upper
    // bound, from whichever thread's pairs it came.
    let known = SHARED.mult.load(Ordering::Relaxed);
    let slew = adjustments().and_then(|adj| {
        let share = share_ppm(adj);
        // Relaxed: a plain value. Two refreshes at once may each keep their
        // own. Both read `adjtimex` within nanoseconds of each other.
        let remembered = SHARED.share.load(Ordering::Relaxed);
        let (bound, remember) = recent_share(remembered, share, pair.ns / 1_000_000_000);
        if remember != remembered {
            SHARED.share.store(remember, Ordering::Relaxed);
        }
        Some(slew_ppm(adj)? + (bound - share))
    });
    match renew(ANCHOR.with(Cell::get), pair, first, known, slew) {
        Renewal::Off => {
            // Relaxed: a flag. Until other threads see it, their anchors
            // stay within a quarter millisecond of their own last check.
            SHARED.off.store(true, Ordering::Relaxed);
            ANCHOR.with(|anchor| anchor.set(Anchor::NONE));
        }
        Renewal::Anchor(anchor, learned) => {
            if let Some(mult) = learned {
                // Never lowered, because a higher bound is only later, never early.
                SHARED.mult.fetch_max(mult, Ordering::Relaxed);
            }
            ANCHOR.with(|cell| cell.set(anchor));
        }
        Renewal::Learning => {}
    }
    Some(pair.ns)
}

/// What a refresh does with a new pair, as [`renew`] decides it.
#[derive(Debug, PartialEq, Eq)]
enum Renewal {
    /// The fast path goes off for good. Either the previous anchor fell
    /// behind the clock, or the kernel's adjustments cannot be read or
    /// allow no bound. They allow none when a pulse-per-second signal
    /// steers the clock, as on a time server.
    Off,
    /// A new anchor, and the rate it learned if it learned one, to share.
    Anchor(Anchor, Option<u64>),
    /// No rate is known yet, so there is no anchor.
    Learning,
}

/// The refresh's decision, without its reads. The thread's `previous`
/// anchor is checked against `pair`, if `pair` can judge it. Then a new
/// anchor is made at the raw rate learned from the process's `first` pair,
/// or else at the `known` one. A `known` of 0 means none yet. The new
/// anchor's rate is sped up by the kernel's current `slew`, from
/// [`slew_ppm`].
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
