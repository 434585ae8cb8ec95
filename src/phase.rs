//! Phase-keeping periods. A periodic task runs on its own grid of slots
//! `offset + k·period`, so an out-of-band run such as a "refresh now" does
//! not move its schedule. A fleet that received one broadcast then does not
//! refresh in lockstep ever after.

use crate::context::scheduler_time;
use std::time::Duration;

/// The delay to a periodic task's next slot on a fixed grid,
/// `offset + k·period` in [scheduler time](crate::scheduler_time), for the
/// task to return.
///
/// A task returning `Some(period)` re-phases itself on every run. After a
/// "refresh now", its chain restarts from that run. Across a fleet that
/// received one broadcast, every client then refreshes within the same
/// window, every period, for ever. Jitter smears that window out only
/// slowly. A task returning [`next_delay`](Self::next_delay) keeps its
/// phase instead.
///
/// ```text
/// slots:      7 s          67 s            127 s           187 s
///              │             │    fire() ──┐  │               │
/// Some(60 s):  ●─────────────●─────────────●──┼──── 160 s ────●  (re-phased)
/// phase:       ●─────────────●─────────────●──┼─(skipped)─────●  (kept)
///                                        100 s
/// ```
///
/// A slot closer than [`min_gap`](Self::min_gap) after the run that asks is
/// skipped. The gap is half a period by default. So an out-of-band run just
/// before a slot does not cost a second run right after it.
///
/// It composes with the crate's other delay helpers. Return
/// `RetryBackoff::failed()` on failure and `Some(phase.next_delay())` on
/// success. Wrap it in [`jittered`](crate::policy::jittered) to spread each run a
/// little around its slot. The grid itself does not drift. Give each client
/// of a fleet its own offset with [`random_offset`](Self::random_offset).
///
/// # Examples
///
/// ```
/// use circulation_trigger::{Scheduler, Trigger, policy::PhaseKeeper};
/// use std::time::Duration;
///
/// let sim = Scheduler::builder().build_virtual();
/// let phase = PhaseKeeper::new(Duration::from_secs(60)).offset(Duration::from_secs(7));
/// let trigger = Trigger::bind(&sim, move || Some(phase.next_delay()));
/// trigger.fire_after(phase.first_delay_from(sim.now()))?; // first slot: 7 s
/// sim.advance_to(Duration::from_secs(100));
/// trigger.fire()?; // "refresh now" at 100 s
/// sim.advance_to(Duration::from_secs(200));
/// let runs = trigger.stats().iterations;
/// assert_eq!(runs, 4); // 7, 67, 100, 187 s: the slot at 127 s was too close
/// assert_eq!(trigger.stats().last_start, Some(Duration::from_secs(187)));
/// # Ok::<(), circulation_trigger::FireError>(())
/// ```
///
/// A fleet's client with a back-off on failure and its own grid on
/// success. A [`Refresh`](crate::Refresh) does the same with
/// [`RefreshBuilder::phase`](crate::RefreshBuilder::phase).
///
/// ```
/// use circulation_trigger::{Scheduler, Trigger, policy::{PhaseKeeper, RetryBackoff}};
/// use std::time::Duration;
///
/// fn refresh() -> Result<(), ()> {
///     Ok(()) // stands in for the real fetch
/// }
///
/// let scheduler = Scheduler::new();
/// let phase = PhaseKeeper::new(Duration::from_secs(60)).random_offset();
/// let mut backoff = RetryBackoff::new(Duration::from_secs(1), Duration::from_secs(30));
/// let trigger = Trigger::bind(&scheduler, move || match refresh() {
///     Ok(()) => {
///         backoff.reset(); // the next failure waits 1 s again
///         Some(phase.next_delay()) // back on the client's own grid
///     }
///     Err(()) => backoff.failed(),
/// });
/// trigger.fire_after(phase.first_delay_from(Duration::ZERO)).expect("running");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseKeeper {
    period: Duration,
    offset: Duration,
    min_gap: Duration,
}

impl PhaseKeeper {
    /// Slots every `period`, at offset zero, skipping slots closer than
    /// half a period. A zero `period` is taken as one microsecond, since
    /// there is no grid of zero spacing.
    pub fn new(period: Duration) -> Self {
        let period = period.max(Duration::from_micros(1));
        Self {
            period,
            offset: Duration::ZERO,
            min_gap: period / 2,
        }
    }

    /// Places the slots at `offset + k·period`. `offset` is taken modulo the
    /// period.
    #[must_use]
    pub fn offset(mut self, offset: Duration) -> Self {
        self.offset = modulo(offset, self.period);
        self
    }

    /// Slots every `period` at a phase that survives restarts. The slots
    /// fall at the wall-clock times `t` where `t mod period`, counted from
    /// the Unix epoch, is the `key`'s hash modulo the period. That phase is
    /// the same for a key in every run of every build. The key may be an
    /// instance id or a host name. Over a fleet's keys the phases spread as
    /// independent random draws would. Clients restarted together, as in a
    /// rolling deploy or a node's reboot, keep their spread. A fleet that
    /// numbers its members spreads more evenly with [`ordinal`](Self::ordinal).
    ///
    /// The hash is 64-bit FNV-1a of the key's UTF-8 bytes, with offset basis
    /// `0xcbf29ce484222325` and prime `0x100000001b3`. MurmurHash3's 64-bit
    /// finalizer then mixes it, so keys that differ in one character land far
    /// apart. The result is taken modulo the period in nanoseconds. The hash
    /// is documented so that it never changes. std's `DefaultHasher` may
    /// change between Rust releases. The wall clock is read once, when
    /// `scheduler` was built. The slots then run on its monotonic clock, so a
    /// wall-clock step never makes a run early, as guarantee G15 requires. On
    /// a [`VirtualScheduler`](crate::testing::VirtualScheduler), set that reading with
    /// [`set_wall_epoch`](crate::testing::VirtualScheduler::set_wall_epoch).
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, policy::PhaseKeeper};
    /// use std::time::{Duration, UNIX_EPOCH};
    ///
    /// let period = Duration::from_secs(60);
    /// // Two runs of the same instance, started at different times.
    /// let first = Scheduler::builder().build_virtual();
    /// first.set_wall_epoch(UNIX_EPOCH + Duration::from_secs(1_000_000));
    /// let second = Scheduler::builder().build_virtual();
    /// second.set_wall_epoch(UNIX_EPOCH + Duration::from_secs(1_000_000 + 3_617));
    /// let a = PhaseKeeper::keyed(period, "host-17", &first);
    /// let b = PhaseKeeper::keyed(period, "host-17", &second);
    /// // The next slot, as a wall-clock time, is the same second of the minute.
    /// let at = |epoch: u64, delay: Duration| (epoch + delay.as_secs()) % 60;
    /// assert_eq!(
    ///     at(1_000_000, a.first_delay_from(Duration::ZERO)),
    ///     at(1_003_617, b.first_delay_from(Duration::ZERO)),
    /// );
    /// ```
    pub fn keyed<S: AsRef<crate::Scheduler> + ?Sized>(
        period: Duration,
        key: &str,
        scheduler: &S,
    ) -> Self {
        Self::at_wall_phase(period, |period_ns| key_hash(key) % period_ns, scheduler)
    }

    /// Slots every `period` at a phase that survives restarts, for the
    /// member numbered `ordinal` of a fleet that numbers its members. The
    /// number may be a StatefulSet's pod ordinal or a worker index.
    ///
    /// Keys place a fleet's members like independent random draws, so a
    /// short stretch of the period may hold noticeably more of them than
    /// another. Ordinals place member `n` at the fraction `n / φ` of the
    /// period, where φ is the golden ratio. It is taken as the 64-bit fixed
    /// point `0x9e37_79b9_7f4a_7c15`. Members `0..N` then split the period
    /// into gaps of at most three lengths, the longest under three times the
    /// shortest, whatever `N` is. Added or removed members keep the others'
    /// slots. The wall clock is read as [`keyed`](Self::keyed) reads it.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, policy::PhaseKeeper};
    /// use std::time::Duration;
    ///
    /// let period = Duration::from_secs(60);
    /// let sim = Scheduler::builder().build_virtual();
    /// let mut firsts: Vec<Duration> = (0..8)
    ///     .map(|n| PhaseKeeper::ordinal(period, n, &sim).first_delay_from(Duration::ZERO))
    ///     .collect();
    /// firsts.sort();
    /// // Eight members: every gap between neighbours within 4–12 s.
    /// for pair in firsts.windows(2) {
    ///     let gap = pair[1] - pair[0];
    ///     assert!(gap >= Duration::from_secs(4) && gap <= Duration::from_secs(12), "{gap:?}");
    /// }
    /// ```
    pub fn ordinal<S: AsRef<crate::Scheduler> + ?Sized>(
        period: Duration,
        ordinal: u64,
        scheduler: &S,
    ) -> Self {
        // `frac(n / φ)` as a 64-bit fraction, scaled to the period.
        let fraction = ordinal.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Self::at_wall_phase(
            period,
            |period_ns| {
                let scaled = (u128::from(fraction) * u128::from(period_ns)) >> 64;
                // `scaled` < `period_ns`, a u64.
                u64::try_from(scaled).unwrap_or(0)
            },
            scheduler,
        )
    }

    /// Slots at the wall-clock times `t` where `t mod period` is
    /// `phase(period_ns)`, from the wall clock read when `scheduler` was
    /// built.
    fn at_wall_phase<S: AsRef<crate::Scheduler> + ?Sized>(
        period: Duration,
        phase: impl FnOnce(u64) -> u64,
        scheduler: &S,
    ) -> Self {
        let keeper = Self::new(period);
        let period_ns = u64::try_from(keeper.period.as_nanos()).unwrap_or(u64::MAX);
        let phase_ns = phase(period_ns) % period_ns;
        let epoch = scheduler.as_ref().shared.wall_epoch();
        let epoch_ns = epoch
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| {
                u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
            });
        // Scheduler time `s` is wall time `epoch + s`. A slot has
        // `(epoch + s) mod period == phase`, so `s ≡ phase − epoch`.
        let offset_ns = (u128::from(phase_ns) + u128::from(period_ns)
            - u128::from(epoch_ns % period_ns))
            % u128::from(period_ns);
        keeper.offset(Duration::from_nanos(u64::try_from(offset_ns).unwrap_or(0)))
    }

    /// A uniformly random offset in `[0, period)`, drawn from a thread-local
    /// generator. Seed it with [`seed_jitter`](crate::policy::seed_jitter) for a
    /// deterministic test. Each client of a fleet then gets its own phase.
    #[must_use]
    pub fn random_offset(self) -> Self {
        let nanos = u64::try_from(self.period.as_nanos()).unwrap_or(u64::MAX);
        self.offset(Duration::from_nanos(crate::jitter::with_rng(|rng| {
            rng.u64(..nanos)
        })))
    }

    /// Skips a slot closer than `gap` after the run that asks. The default is
    /// half a period, and `Duration::ZERO` never skips. The gap is clamped to
    /// the period.
    #[must_use]
    pub fn min_gap(mut self, gap: Duration) -> Self {
        self.min_gap = gap.min(self.period);
        self
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// The delay from now to the next slot, for a task to return as
    /// `Some(phase.next_delay())`. "Now" is the
    /// [scheduler time](crate::scheduler_time) of the running task. Outside a
    /// task it is unknown, and the delay is one period.
    pub fn next_delay(&self) -> Duration {
        scheduler_time().map_or(self.period, |now| self.delay_from(now))
    }

    /// The delay to the next slot after now, skipping none. It caps a retry,
    /// which may come right before a slot. Outside a task it is one period.
    pub(crate) fn next_slot_delay(&self) -> Duration {
        let Some(now) = scheduler_time() else {
            return self.period;
        };
        match self.first_delay_from(now) {
            Duration::ZERO => self.period,
            delay => delay,
        }
    }

    /// The delay from `now`, in scheduler time, to the first slot at or after
    /// it, skipping none. It arms the task for the first time, as in
    /// `trigger.fire_after(phase.first_delay_from(now))`.
    ///
    /// # Edge cases
    ///
    /// None. Times and periods of any size saturate.
    pub fn first_delay_from(&self, now: Duration) -> Duration {
        if now <= self.offset {
            return self.offset - now;
        }
        let into_period = modulo(now - self.offset, self.period);
        if into_period.is_zero() {
            Duration::ZERO
        } else {
            self.period - into_period
        }
    }

    /// The delay from `now`, in scheduler time, to the first slot after it at
    /// least [`min_gap`](Self::min_gap) away. A `now` exactly on a slot counts
    /// as a run of that slot, so the next one is a period later.
    ///
    /// # Edge cases
    ///
    /// None. Times and periods of any size saturate.
    pub fn delay_from(&self, now: Duration) -> Duration {
        if now < self.offset {
            // Before the first slot of the grid, which is at `offset`.
            return self.skip_close(self.offset - now);
        }
        let into_period = modulo(now - self.offset, self.period);
        self.skip_close(self.period - into_period)
    }

    /// `delay` to a slot, or a period more if the slot is too close.
    fn skip_close(&self, delay: Duration) -> Duration {
        if delay < self.min_gap {
            delay.saturating_add(self.period)
        } else {
            delay
        }
    }
}

/// `value mod period` for durations, for a nonzero `period`.
fn modulo(value: Duration, period: Duration) -> Duration {
    let period_ns = period.as_nanos().max(1);
    let rest = value.as_nanos() % period_ns;
    // `rest` < `period_ns`, which came from a `Duration`, so it fits.
    Duration::from_nanos(u64::try_from(rest).unwrap_or(u64::MAX))
}

/// `PhaseKeeper` from a config file, with the `serde` feature. The fields are
/// `period` and the optional `offset`, `min_gap` and `random_offset`. The
/// first three are human durations. With `random_offset` set to `true`, each
/// process draws its own phase. Setting it beside `offset` is an error, since
/// both choose the phase.
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use circulation_trigger::policy::PhaseKeeper;
/// use std::time::Duration;
///
/// let phase: PhaseKeeper =
///     serde_json::from_str(r#"{ "period": "1m", "offset": "15s" }"#).unwrap();
/// assert_eq!(phase.period(), Duration::from_secs(60));
/// # }
/// ```
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for PhaseKeeper {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Config {
            #[serde(with = "humantime_serde")]
            period: Duration,
            #[serde(default, with = "humantime_serde")]
            offset: Option<Duration>,
            #[serde(default, with = "humantime_serde")]
            min_gap: Option<Duration>,
            #[serde(default)]
            random_offset: bool,
        }
        let config = Config::deserialize(deserializer)?;
        if config.random_offset && config.offset.is_some() {
            return Err(serde::de::Error::custom(
                "`offset` and `random_offset` both choose the phase: give one",
            ));
        }
        let mut keeper = PhaseKeeper::new(config.period);
        if config.random_offset {
            keeper = keeper.random_offset();
        }
        if let Some(offset) = config.offset {
            keeper = keeper.offset(offset);
        }
        if let Some(gap) = config.min_gap {
            keeper = keeper.min_gap(gap);
        }
        Ok(keeper)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn slots_stay_on_the_grid() {
        let phase = PhaseKeeper::new(secs(60))
            .offset(secs(7))
            .min_gap(Duration::ZERO);
        assert_eq!(phase.delay_from(secs(0)), secs(7));
        assert_eq!(
            phase.delay_from(secs(7)),
            secs(60),
            "on a slot: the next one"
        );
        assert_eq!(phase.delay_from(secs(8)), secs(59));
        assert_eq!(phase.delay_from(secs(100)), secs(27));
        assert_eq!(
            phase.delay_from(secs(66) + Duration::from_nanos(999)),
            Duration::from_secs(1) - Duration::from_nanos(999)
        );
    }

    #[test]
    fn the_first_slot_is_never_skipped() {
        let phase = PhaseKeeper::new(secs(60)).offset(secs(7));
        assert_eq!(phase.first_delay_from(secs(0)), secs(7));
        assert_eq!(phase.first_delay_from(secs(7)), Duration::ZERO);
        assert_eq!(phase.first_delay_from(secs(70)), secs(57));
        assert_eq!(phase.first_delay_from(secs(67)), Duration::ZERO);
    }

    #[test]
    fn close_slots_are_skipped() {
        let phase = PhaseKeeper::new(secs(60)).offset(secs(7)).min_gap(secs(30));
        assert_eq!(phase.delay_from(secs(100)), secs(87), "127 s is 27 s away");
        assert_eq!(phase.delay_from(secs(90)), secs(37), "127 s is 37 s away");
        assert_eq!(
            PhaseKeeper::new(secs(60))
                .min_gap(Duration::MAX)
                .delay_from(secs(1)),
            secs(119)
        );
    }

    #[test]
    fn hostile_values_saturate() {
        let zero = PhaseKeeper::new(Duration::ZERO);
        assert_eq!(zero.period(), Duration::from_micros(1));
        let huge = PhaseKeeper::new(Duration::MAX).offset(Duration::MAX);
        let _ = huge.delay_from(Duration::MAX);
        let _ = huge.delay_from(Duration::ZERO);
        let _ = PhaseKeeper::new(secs(1))
            .random_offset()
            .delay_from(Duration::MAX);
        assert_eq!(
            PhaseKeeper::new(secs(10)).next_delay(),
            secs(10),
            "outside a task"
        );
    }
}

/// A key's stable hash, as [`PhaseKeeper::keyed`] documents it. It is
/// FNV-1a, then MurmurHash3's 64-bit finalizer.
fn key_hash(key: &str) -> u64 {
    let mut hash = crate::refresh::stable_hash(key.as_bytes());
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^ (hash >> 33)
}
