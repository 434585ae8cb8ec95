//! The time source. It is the real monotonic clock, or a manual clock that
//! moves only when told to. The manual clock serves model checking and
//! deterministic tests.
//!
//! All scheduler time is `u64` microseconds since the clock's epoch. The
//! fire path reads nanoseconds, so that a computed deadline can be rounded
//! up and is never early.

use crate::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The latest time either clock can show, in µs. Both clocks count
/// nanoseconds in a `u64`, which lasts about 584 years. So later
/// microseconds have no clock reading.
pub(crate) const HORIZON_US: u64 = u64::MAX / 1_000;

/// The latest deadline a request may carry, in µs. When a deadline `d` µs
/// away nears the horizon, the request word stores it in units of up to
/// `2^30` µs, rounding it up. `request.rs` holds that encoding. This margin
/// keeps the rounded deadline within the horizon, where a clock can reach
/// it.
pub(crate) const LAST_DEADLINE_US: u64 = HORIZON_US - (1 << 30);

/// The time a runtime keeps. That is its clock, the tick its deadlines
/// round up to, and whether delays that tasks return may share wake-ups.
pub(crate) struct Timing {
    pub(crate) clock: Clock,
    /// Deadlines are rounded up to a multiple of this, in µs. It is at least 1.
    pub(crate) tick_us: u64,
    /// Whether delays returned by tasks may share wake-ups.
    /// `Builder::coalesce_periodic` sets it.
    pub(crate) coalesce: bool,
}

/// Where a scheduler's time comes from.
#[derive(Debug, Clone)]
pub(crate) enum Clock {
    /// The monotonic clock that `Instant` reads, relative to the scheduler's creation.
    Real(RealClock),
    /// A clock moved by hand, a [`ManualTime`].
    Manual(Arc<ManualTime>),
}

/// The real clock's epoch, as an `Instant`. On Linux it is also kept as a
/// raw `CLOCK_MONOTONIC` reading.
#[derive(Debug, Clone)]
pub(crate) struct RealClock {
    epoch: Instant,
    /// On Linux, `CLOCK_MONOTONIC` at `epoch` in ns, as [`raw`] reads it.
    #[cfg(target_os = "linux")]
    raw_epoch_ns: Option<u64>,
}

impl RealClock {
    fn new() -> Self {
        Self {
            epoch: Instant::now(),
            #[cfg(target_os = "linux")]
            raw_epoch_ns: raw::now_ns(),
        }
    }

    /// Nanoseconds since the epoch, not before the true time of the call.
    /// `tsc/mod.rs` explains the bound. Where the fast path does not run,
    /// it is `now_ns`.
    #[inline]
    fn upper_ns(&self) -> u64 {
        #[cfg(all(target_os = "linux", target_arch = "x86_64", not(loom)))]
        if let Some(epoch) = self.raw_epoch_ns {
            if let Some(now) = tsc::upper_ns() {
                return now.saturating_sub(epoch);
            }
        }
        self.now_ns()
    }

    /// Nanoseconds since the epoch.
    #[inline]
    fn now_ns(&self) -> u64 {
        #[cfg(target_os = "linux")]
        if let Some(epoch) = self.raw_epoch_ns {
            if let Some(now) = raw::now_ns() {
                return now.saturating_sub(epoch);
            }
        }
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

/// Raw readings of the monotonic clock on Linux. It is the clock `Instant`
/// reads, without `Instant`'s `Duration` arithmetic. That arithmetic is
/// most of a reading's cost on the fire path.
///
/// The coarse clock, `CLOCK_MONOTONIC_COARSE`, was tried for long delays
/// and rejected. It costs a few ns to read. But on a tickless kernel it is
/// only updated on ticks, which stop while a CPU idles. So it can lag the
/// precise clock by more than its stated resolution. A deadline measured
/// from it could be early, against G15. A test of "never behind the precise
/// clock" caught it.
#[cfg(all(target_os = "linux", target_arch = "x86_64", not(loom)))]
mod tsc;

#[cfg(target_os = "linux")]
mod raw {
    /// Reads `CLOCK_MONOTONIC` in nanoseconds.
    #[inline]
    pub(super) fn now_ns() -> Option<u64> {
        read_ns(libc::CLOCK_MONOTONIC)
    }

    /// Reads clock `id` in nanoseconds, or `None` on an error.
    #[inline]
    pub(super) fn read_ns(id: libc::clockid_t) -> Option<u64> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY:
        // - `ts` is a valid, writable `timespec` for the whole call.
        //   `clock_gettime` writes only through that pointer.
        // - An unknown clock or any other error returns -1, which becomes
        //   `None`. The caller then falls back to `Instant`, or to no fast
        //   clock.
        let status = unsafe { libc::clock_gettime(id, &mut ts) };
        if status != 0 {
            return None;
        }
        let secs = u64::try_from(ts.tv_sec).ok()?;
        let nanos = u64::try_from(ts.tv_nsec).ok()?;
        secs.checked_mul(1_000_000_000)?.checked_add(nanos)
    }
}

/// A clock that moves only when [`ManualTime::set_us`] is called.
///
/// It is not a loom atomic, on purpose. Models set time between steps.
/// Keeping it out of the model keeps the explored state space on the
/// trigger's own atomics.
#[derive(Debug, Default)]
pub(crate) struct ManualTime {
    now_ns: AtomicU64,
}

impl ManualTime {
    /// The clock's time in µs.
    pub(crate) fn now_us(&self) -> u64 {
        self.now_ns.load(Ordering::Relaxed) / 1_000
    }

    /// Moves the clock to `us` microseconds, never backwards.
    pub(crate) fn set_us(&self, us: u64) {
        // Relaxed: the clock value carries no other data. Whoever moves
        // time then hands control to the timer through a lock or a join.
        self.now_ns
            .fetch_max(us.saturating_mul(1_000), Ordering::Relaxed);
    }
}

impl Clock {
    /// A real clock whose epoch is now.
    pub(crate) fn real() -> Self {
        Clock::Real(RealClock::new())
    }

    /// Nanoseconds since the epoch.
    #[inline]
    pub(crate) fn now_ns(&self) -> u64 {
        match self {
            Clock::Real(clock) => clock.now_ns(),
            Clock::Manual(time) => time.now_ns.load(Ordering::Relaxed),
        }
    }

    /// Nanoseconds since the epoch at which the real clock reaches `at`. It
    /// is 0 if `at` is before the epoch. It is `None` on a manual clock,
    /// where an `Instant` names no point of its time. The raw reading lags
    /// the `Instant` epoch by the nanoseconds between the two reads at
    /// creation. So the conversion can only make a run later, never early.
    pub(crate) fn instant_ns(&self, at: Instant) -> Option<u64> {
        match self {
            Clock::Real(clock) => Some(
                u64::try_from(at.saturating_duration_since(clock.epoch).as_nanos())
                    .unwrap_or(u64::MAX),
            ),
            Clock::Manual(_) => None,
        }
    }

    /// The time a deadline counts from, in nanoseconds since the epoch. It
    /// is never behind the clock's time at the call, so no deadline is
    /// early, as G15 requires. It is at most about two microseconds ahead
    /// of that time. On x86-64 Linux it reads the TSC without a fence, at
    /// about half the cost of [`now_ns`](Self::now_ns). It must not decide
    /// whether a deadline has passed, because its reading may be ahead.
    #[inline]
    pub(crate) fn deadline_base_ns(&self) -> u64 {
        match self {
            Clock::Real(clock) => clock.upper_ns(),
            Clock::Manual(time) => time.now_ns.load(Ordering::Relaxed),
        }
    }

    /// Microseconds since the epoch, rounded down.
    #[inline]
    pub(crate) fn now_us(&self) -> u64 {
        self.now_ns() / 1_000
    }

    /// Whether time moves only by hand.
    pub(crate) fn is_manual(&self) -> bool {
        matches!(self, Clock::Manual(_))
    }

    /// How long to sleep from now until `until_us`, for the real clock.
    pub(crate) fn until(&self, until_us: u64) -> Duration {
        let target_ns = until_us.saturating_mul(1_000);
        Duration::from_nanos(target_ns.saturating_sub(self.now_ns()))
    }
}

/// `duration` in nanoseconds, in 64-bit arithmetic. The fire path's budget
/// has no room for `as_nanos`'s 128-bit product.
#[inline]
fn nanos(duration: Duration) -> Option<u64> {
    duration
        .as_secs()
        .checked_mul(1_000_000_000)?
        .checked_add(u64::from(duration.subsec_nanos()))
}

/// The deadline in µs of a run `delay` after `now_ns`, rounded up to a
/// multiple of `tick_us`. It is `None` if it lies past
/// [`LAST_DEADLINE_US`], where no clock reading could ever reach it.
#[inline]
pub(crate) fn deadline_us(now_ns: u64, delay: Duration, tick_us: u64) -> Option<u64> {
    let at_ns = now_ns.checked_add(nanos(delay)?)?;
    let mut at_us = at_ns.div_ceil(1_000);
    if tick_us != 1 {
        // The default tick needs no division on the fire path.
        at_us = at_us.checked_next_multiple_of(tick_us)?;
    }
    (at_us <= LAST_DEADLINE_US).then_some(at_us)
}

/// The coarsest grid a returned delay may be coalesced onto, in µs.
pub(crate) const COARSEST_GRID_US: u64 = 2_000;

/// Every grid of a millisecond or more, and a tick of one millisecond, puts
/// deadlines on whole milliseconds. The role holder wakes once for such a
/// deadline, as `pool/role.rs` explains.
pub(crate) const WHOLE_MS_US: u64 = 1_000;

/// The grids a returned delay may be coalesced onto, in µs. They go in
/// 1-2-5 steps up to [`COARSEST_GRID_US`]. So a period that is a whole
/// number of steps of its grid, started on that grid, stays exact: a
/// one-second period started at an even millisecond, say.
const GRIDS_US: [u64; 11] = [COARSEST_GRID_US, 1_000, 500, 200, 100, 50, 20, 10, 5, 2, 1];

/// Rounds the deadline of a run a task asked for `delay` from now **up**
/// onto the widest grid of [`GRIDS_US`] that is at most
/// `min(delay / 500, 2 ms)`. Runs due within one grid step then share one
/// wake-up. None starts early, as G15 requires.
#[inline]
pub(crate) fn coalesce(deadline_us: u64, delay: Duration) -> u64 {
    // `delay / 500` in whole µs, computed in 64 bits: a second is 2,000 of
    // it exactly. Every periodic re-arm comes here, so it avoids a 128-bit
    // division.
    let slack_us = delay
        .as_secs()
        .saturating_mul(2_000)
        .saturating_add(u64::from(delay.subsec_micros() / 500));
    match GRIDS_US.iter().find(|&&grid| grid <= slack_us) {
        Some(&grid) => deadline_us
            .checked_next_multiple_of(grid)
            .unwrap_or(deadline_us),
        None => deadline_us,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up_and_reject_overflow() {
        assert_eq!(deadline_us(1_500, Duration::from_nanos(1), 1), Some(2));
        assert_eq!(deadline_us(2_000, Duration::ZERO, 1), Some(2));
        assert_eq!(deadline_us(0, Duration::from_micros(5), 4), Some(8));
        assert_eq!(deadline_us(1, Duration::MAX, 1), None);
        assert_eq!(deadline_us(u64::MAX, Duration::from_nanos(1), 1), None);
        let last_ns = LAST_DEADLINE_US * 1_000;
        let last = Some(LAST_DEADLINE_US);
        assert_eq!(deadline_us(last_ns, Duration::ZERO, 1), last);
        assert_eq!(deadline_us(last_ns, Duration::from_nanos(1), 1), None);
        assert_eq!(
            deadline_us(HORIZON_US * 1_000, Duration::from_nanos(1), 1),
            None
        );
        assert_eq!(
            deadline_us(0, Duration::from_micros(LAST_DEADLINE_US), 1),
            last
        );
        assert_eq!(deadline_us(0, Duration::from_nanos(1), u64::MAX), None);
        assert_eq!(
            deadline_us(0, Duration::from_nanos(1), LAST_DEADLINE_US),
            last
        );
    }

    #[test]
    fn coalescing_rounds_up_within_two_thousandths() {
        let second = Duration::from_secs(1);
        assert_eq!(coalesce(1_000_001, second), 1_002_000);
        assert_eq!(coalesce(1_000_000, second), 1_000_000);
        // A long period is held to the coarsest grid.
        assert_eq!(coalesce(1_000_001, Duration::from_secs(60)), 1_002_000);
        // 500 ms gives a slack of 1 ms. 100 ms gives 200 µs. 30 ms gives
        // 60 µs and a grid of 50 µs.
        assert_eq!(coalesce(1_000_001, Duration::from_millis(500)), 1_001_000);
        assert_eq!(coalesce(1_000_001, Duration::from_millis(100)), 1_000_200);
        assert_eq!(coalesce(100_000, Duration::from_millis(100)), 100_000);
        assert_eq!(coalesce(1_000_001, Duration::from_millis(30)), 1_000_050);
        // 2.5 ms gives a slack of 5 µs. Under 1 ms the slack is a
        // microsecond at most, the finest tick.
        assert_eq!(coalesce(1_000_001, Duration::from_micros(2_500)), 1_000_005);
        assert_eq!(coalesce(1_000_001, Duration::from_micros(2_499)), 1_000_002);
        assert_eq!(coalesce(777, Duration::from_micros(999)), 777);
        assert_eq!(coalesce(u64::MAX, Duration::MAX), u64::MAX);
        for (deadline, delay) in [(5, 3_000u64), (123_456_789, 86_400_000_000)] {
            let delay = Duration::from_micros(delay);
            let served = coalesce(deadline, delay);
            assert!(served >= deadline, "never early");
            assert!(served - deadline < COARSEST_GRID_US);
            assert!(served - deadline <= (delay.as_micros() / 500) as u64);
        }
    }

    #[test]
    fn every_grid_of_a_millisecond_or_more_lands_on_whole_milliseconds() {
        for grid in GRIDS_US.into_iter().filter(|&grid| grid >= WHOLE_MS_US) {
            assert_eq!(grid % WHOLE_MS_US, 0, "grid {grid}");
        }
    }

    #[test]
    fn the_raw_reading_follows_instant_and_never_goes_back() {
        let clock = Clock::real();
        let Clock::Real(real) = &clock else {
            unreachable!()
        };
        let mut last = clock.now_ns();
        for _ in 0..10_000 {
            let lower = real.epoch.elapsed().as_nanos() as u64;
            let now = clock.now_ns();
            let upper = real.epoch.elapsed().as_nanos() as u64;
            assert!(now >= last, "the clock went back: {now} < {last}");
            // The same clock as `Instant`, so between two `Instant`
            // readings. The margin allows for the epoch's two reads, well
            // under a millisecond apart natively. Miri reads the real
            // clock here but interprets the code between the two reads
            // thousands of times slower, so on a busy machine they may be
            // milliseconds apart.
            let margin = if cfg!(miri) { 1_000_000_000 } else { 1_000_000 };
            assert!(now + margin >= lower && now <= upper + margin);
            last = now;
        }
    }

    #[test]
    fn manual_time_moves_only_forward() {
        let time = Arc::new(ManualTime::default());
        let clock = Clock::Manual(time.clone());
        time.set_us(5);
        time.set_us(3);
        assert_eq!(clock.now_us(), 5);
        assert!(clock.is_manual());
    }
}
