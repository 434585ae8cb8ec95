//! Randomness for fleets, in jittered delays and exponential back-off. With
//! them, a cluster reacting to one event does not stampede its config center.

use std::time::Duration;

/// `period` moved by a uniformly random amount within `± fraction` of it,
/// for a task's return value. A task returning
/// `Some(jittered(Duration::from_secs(30), 0.1))` runs every 27 to 33 seconds.
///
/// Uses a thread-local generator. [`seed_jitter`] makes it deterministic on
/// the calling thread. Virtual-time tests run tasks on the test thread, so a
/// seed there reaches them.
///
/// # Edge cases
///
/// None. Every input gives a delay. `fraction` is clamped to `0.0..=1.0`.
/// NaN, zero and negative values mean no jitter, so `period` itself comes
/// back. `+∞` means `1.0`. A delay beyond [`Duration::MAX`] saturates there.
///
/// # Examples
///
/// ```
/// use circulation_trigger::policy::jittered;
/// use std::time::Duration;
///
/// let delay = jittered(Duration::from_secs(30), 0.1);
/// assert!(delay >= Duration::from_secs(27) && delay <= Duration::from_secs(33));
/// ```
#[must_use]
pub fn jittered(period: Duration, fraction: f64) -> Duration {
    spread(period, fraction, with_rng(fastrand::Rng::f64))
}

/// Seeds the generator [`jittered`] uses on this thread. Any `u64` is a
/// valid seed. The seed reaches every other draw of this crate on this
/// thread too. Those are
/// [`PhaseKeeper::random_offset`](crate::policy::PhaseKeeper::random_offset) and the
/// generator a new [`RetryBackoff`] starts from.
///
/// The generator is this crate's own, one per thread. Seeding it leaves
/// `fastrand`'s shared thread-local generator alone, and with it every other
/// crate's draws.
///
/// # Examples
///
/// ```
/// use circulation_trigger::policy::{jittered, seed_jitter};
/// use std::time::Duration;
///
/// seed_jitter(7);
/// let first = jittered(Duration::from_secs(30), 0.1);
/// seed_jitter(7);
/// assert_eq!(jittered(Duration::from_secs(30), 0.1), first);
/// ```
pub fn seed_jitter(seed: u64) {
    RNG.with(|rng| *rng.borrow_mut() = fastrand::Rng::with_seed(seed));
}

thread_local! {
    /// The crate's generator on this thread, which [`seed_jitter`] seeds.
    static RNG: std::cell::RefCell<fastrand::Rng> = std::cell::RefCell::new(fastrand::Rng::new());
}

/// Draws from this thread's generator of the crate.
pub(crate) fn with_rng<T>(draw: impl FnOnce(&mut fastrand::Rng) -> T) -> T {
    RNG.with(|rng| draw(&mut rng.borrow_mut()))
}

/// `initial` doubled `times` times, saturating at `Duration::MAX`. It works
/// in 128-bit nanoseconds. A 32-bit multiplier stopped at 2^32 times
/// `initial`, short of a distant `max`.
fn doubled(initial: Duration, times: u32) -> Duration {
    let nanos = initial.as_nanos();
    if nanos == 0 {
        return Duration::ZERO;
    }
    if times >= nanos.leading_zeros() {
        return Duration::MAX;
    }
    let nanos = nanos << times;
    // The remainder is below 10^9, so it fits in a `u32`.
    u64::try_from(nanos / 1_000_000_000).map_or(Duration::MAX, |secs| {
        Duration::new(secs, (nanos % 1_000_000_000) as u32)
    })
}

/// `period · (1 + fraction · (2u − 1))` for `u` in `[0, 1)`, saturating.
///
/// Only the offset goes through `f64`, and it is at most `period` itself.
/// So `Duration::mul_f64`'s panics on NaN and on a product beyond
/// `Duration::MAX` cannot happen. A zero fraction returns `period` exactly.
fn spread(period: Duration, fraction: f64, unit: f64) -> Duration {
    let offset = unit_fraction(fraction) * (2.0 * unit - 1.0);
    if offset == 0.0 {
        return period;
    }
    let delta =
        Duration::try_from_secs_f64(period.as_secs_f64() * offset.abs()).unwrap_or(Duration::MAX);
    if offset > 0.0 {
        period.saturating_add(delta)
    } else {
        period.saturating_sub(delta)
    }
}

/// `fraction` clamped to `0.0..=1.0`, NaN counting as `0.0`, which means no jitter.
fn unit_fraction(fraction: f64) -> f64 {
    if fraction.is_nan() {
        0.0
    } else {
        fraction.clamp(0.0, 1.0)
    }
}

/// Exponential back-off with a cap and jitter. It produces what a failing
/// task should return, which is the delay before its next attempt.
///
/// # Examples
///
/// ```
/// use circulation_trigger::{Scheduler, Trigger, policy::RetryBackoff};
/// use std::time::Duration;
///
/// let sim = Scheduler::builder().build_virtual();
/// let clock = sim.clock();
/// let mut backoff = RetryBackoff::new(Duration::from_secs(1), Duration::from_secs(60));
/// let trigger = Trigger::bind(&sim, move || {
///     let up = clock.now() >= Duration::from_secs(10); // down for 10 s
///     if up {
///         backoff.succeeded(Duration::from_secs(30))
///     } else {
///         backoff.failed() // 1 s, 2 s, 4 s, 8 s, … up to 60 s
///     }
/// });
/// trigger.fire()?;
/// sim.advance(Duration::from_secs(20));
/// assert_eq!(trigger.stats().iterations, 5); // at 0, 1, 3, 7 and 15 s
/// # Ok::<(), circulation_trigger::FireError>(())
/// ```
///
/// A clone draws its own jitter from a fresh generator. That generator is
/// seeded from this thread's, which [`seed_jitter`] seeds. So one policy
/// cloned onto many triggers does not keep their retries in step.
#[derive(Debug)]
pub struct RetryBackoff {
    initial: Duration,
    max: Duration,
    jitter: f64,
    max_retries: Option<u32>,
    failures: u32,
    rng: fastrand::Rng,
}

impl Clone for RetryBackoff {
    fn clone(&self) -> Self {
        Self {
            rng: with_rng(|rng| rng.fork()),
            ..*self
        }
    }
}

impl RetryBackoff {
    /// Doubling delays from `initial`, never above `max`. There is no jitter
    /// and no retry limit.
    ///
    /// # Edge cases
    ///
    /// None. A `max` below `initial` is raised to `initial`.
    /// `initial == Duration::ZERO` gives zero delays, so the task re-runs at
    /// once. On a real scheduler other triggers still get their turn.
    /// [`VirtualScheduler::advance`](crate::testing::VirtualScheduler::advance) stops
    /// such a loop at its run limit.
    #[must_use]
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max: max.max(initial),
            jitter: 0.0,
            max_retries: None,
            failures: 0,
            rng: with_rng(|rng| rng.fork()),
        }
    }

    /// Spreads each delay by `± fraction` of it. The period that
    /// [`succeeded`](Self::succeeded) returns is spread too. So a test that
    /// checks exact fetch times leaves the jitter at zero.
    ///
    /// # Edge cases
    ///
    /// None. `fraction` is clamped to `0.0..=1.0` as in [`jittered`], and NaN
    /// means no jitter.
    #[must_use]
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.jitter = unit_fraction(fraction);
        self
    }

    /// After `retries` consecutive failures, [`failed`](Self::failed)
    /// returns `None`. The task then stops circulating until fired again.
    /// With `max_retries(0)`, the first failure already gives `None`.
    #[must_use]
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = Some(retries);
        self
    }

    /// Seeds the jitter, for deterministic tests.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.rng = fastrand::Rng::with_seed(seed);
        self
    }

    /// Consecutive failures so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Records a failure and returns the delay before the next attempt. It
    /// returns `None` once the retry limit is reached.
    ///
    /// # Edge cases
    ///
    /// None. The doubling saturates at `max`, however long the failures last.
    /// The failure count saturates at `u32::MAX`.
    pub fn failed(&mut self) -> Option<Duration> {
        if self.max_retries.is_some_and(|limit| self.failures >= limit) {
            return None;
        }
        let delay = doubled(self.initial, self.failures).min(self.max);
        self.failures = self.failures.saturating_add(1);
        Some(spread(delay, self.jitter, self.rng.f64()).min(self.max))
    }

    /// The delay of the last failure before its jitter, or zero before any.
    pub(crate) fn last_nominal(&self) -> Duration {
        match self.failures {
            0 => Duration::ZERO,
            failures => doubled(self.initial, failures - 1).min(self.max),
        }
    }

    /// Forgets the failures so far, without producing a delay. The next
    /// failure waits the initial delay again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// Records a success and resets. It returns `Some(period)`, jittered like
    /// the back-off delays.
    ///
    /// # Edge cases
    ///
    /// None. A jittered period beyond `Duration::MAX` saturates there.
    pub fn succeeded(&mut self, period: Duration) -> Option<Duration> {
        self.failures = 0;
        Some(spread(period, self.jitter, self.rng.f64()))
    }

    /// The delay after a store asked for `wait` in a retry-after. It is `wait`
    /// capped at [`max`](Self::new), spread upward by [`after_at_least`].
    pub(crate) fn told_to_wait(&mut self, wait: Duration) -> Duration {
        after_at_least(wait.min(self.max), self.jitter, self.rng.f64())
    }
}

/// The least share of a retry-after to spread over. A fleet told the same
/// delay comes back over a tenth of it, not at once.
const RETRY_AFTER_SPREAD: f64 = 0.1;

/// `wait` plus up to `fraction` of it, drawn from `unit` in `0.0..1.0`. The
/// fraction is at least [`RETRY_AFTER_SPREAD`]. The result is never before
/// what the store asked.
pub(crate) fn after_at_least(wait: Duration, fraction: f64, unit: f64) -> Duration {
    let fraction = unit_fraction(fraction).max(RETRY_AFTER_SPREAD);
    let extra = Duration::try_from_secs_f64(wait.as_secs_f64() * fraction * unit.clamp(0.0, 1.0))
        .unwrap_or(Duration::MAX);
    wait.saturating_add(extra)
}

/// `RetryBackoff` from a config file, with the `serde` feature. `initial` and
/// `max` are human durations such as "1s" or "1m 30s". `jitter` is an
/// optional fraction, clamped as [`RetryBackoff::jitter`] clamps it.
/// `max_retries` is optional too.
///
/// ```
/// # #[cfg(feature = "serde")] {
/// use circulation_trigger::policy::RetryBackoff;
///
/// let backoff: RetryBackoff =
///     serde_json::from_str(r#"{ "initial": "1s", "max": "1m", "jitter": 0.1 }"#).unwrap();
/// assert_eq!(backoff.failures(), 0);
/// # }
/// ```
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for RetryBackoff {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Config {
            #[serde(with = "humantime_serde")]
            initial: Duration,
            #[serde(with = "humantime_serde")]
            max: Duration,
            #[serde(default)]
            jitter: f64,
            #[serde(default)]
            max_retries: Option<u32>,
        }
        let config = Config::deserialize(deserializer)?;
        let backoff = RetryBackoff::new(config.initial, config.max).jitter(config.jitter);
        Ok(match config.max_retries {
            Some(retries) => backoff.max_retries(retries),
            None => backoff,
        })
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_caps_and_stops() {
        let mut backoff =
            RetryBackoff::new(Duration::from_secs(1), Duration::from_secs(5)).max_retries(5);
        let delays: Vec<u64> = std::iter::from_fn(|| backoff.failed())
            .map(|d| d.as_secs())
            .collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        assert_eq!(
            backoff.succeeded(Duration::from_secs(30)),
            Some(Duration::from_secs(30))
        );
        assert_eq!(backoff.failures(), 0);
    }

    #[test]
    fn backoff_reaches_a_distant_max_and_stays_there() {
        // 1 µs doubled reaches a day after 37 failures. That is past 2^32 µs,
        // about 71 minutes, where a 32-bit multiplier used to stop for good.
        let day = Duration::from_secs(86_400);
        let mut backoff = RetryBackoff::new(Duration::from_micros(1), day);
        let delays: Vec<Duration> = (0..100).map(|_| backoff.failed().unwrap()).collect();
        assert_eq!(delays[33], Duration::from_micros(1 << 33));
        assert_eq!(delays[36], Duration::from_micros(1 << 36));
        assert!(delays[..37].windows(2).all(|pair| pair[1] == pair[0] * 2));
        assert!(delays[37..].iter().all(|&delay| delay == day));
        // The largest spans neither overflow nor panic, and stay capped at `max`.
        let mut huge = RetryBackoff::new(Duration::MAX, Duration::MAX);
        assert_eq!(huge.failed(), Some(Duration::MAX));
        assert_eq!(huge.failed(), Some(Duration::MAX));
    }

    #[test]
    fn doubling_saturates_exactly() {
        assert_eq!(doubled(Duration::ZERO, u32::MAX), Duration::ZERO);
        assert_eq!(doubled(Duration::from_nanos(3), 0), Duration::from_nanos(3));
        assert_eq!(
            doubled(Duration::from_millis(1500), 2),
            Duration::from_secs(6)
        );
        assert_eq!(doubled(Duration::from_nanos(1), 127), Duration::MAX);
        assert_eq!(doubled(Duration::from_nanos(1), u32::MAX), Duration::MAX);
        // 2^63 ns, about 292 years, is exact. 2^64 s is past Duration::MAX.
        assert_eq!(
            doubled(Duration::from_nanos(1), 63),
            Duration::from_nanos(1 << 63)
        );
        assert_eq!(doubled(Duration::from_secs(1), 64), Duration::MAX);
    }

    #[test]
    fn jitter_stays_in_range_and_is_seedable() {
        let period = Duration::from_secs(10);
        for unit in [0.0, 0.25, 0.5, 0.999] {
            let d = spread(period, 0.2, unit);
            assert!(
                d >= Duration::from_secs(8) && d <= Duration::from_secs(12),
                "{d:?}"
            );
        }
        let a: Vec<_> = {
            let mut b = RetryBackoff::new(period, period * 10).jitter(0.5).seed(7);
            (0..5).map(|_| b.failed()).collect()
        };
        let b: Vec<_> = {
            let mut b = RetryBackoff::new(period, period * 10).jitter(0.5).seed(7);
            (0..5).map(|_| b.failed()).collect()
        };
        assert_eq!(a, b);
        seed_jitter(3);
        let first = jittered(period, 0.3);
        seed_jitter(3);
        assert_eq!(jittered(period, 0.3), first);
    }

    #[test]
    fn seeding_leaves_fastrands_shared_generator_alone() {
        let period = Duration::from_secs(10);
        // Other crates' draws from fastrand's generator do not move ours…
        seed_jitter(11);
        fastrand::seed(1);
        let ours = jittered(period, 0.5);
        seed_jitter(11);
        fastrand::seed(2);
        let _ = fastrand::u64(..);
        assert_eq!(jittered(period, 0.5), ours);
        // …and seeding ours does not reseed theirs.
        fastrand::seed(5);
        let theirs = fastrand::u64(..);
        fastrand::seed(5);
        seed_jitter(12);
        let _ = jittered(period, 0.5);
        assert_eq!(fastrand::u64(..), theirs);
    }

    #[test]
    fn hostile_fractions_and_periods_saturate() {
        let huge = [Duration::MAX, Duration::from_secs(u64::MAX)];
        for period in huge
            .into_iter()
            .chain([Duration::ZERO, Duration::from_nanos(1)])
        {
            for fraction in [f64::NAN, -1.0, -0.0, 0.0, f64::NEG_INFINITY] {
                for unit in [0.0, 0.5, 0.999_999] {
                    assert_eq!(spread(period, fraction, unit), period, "{fraction}");
                }
            }
            for fraction in [1.0, 2.5, f64::INFINITY, f64::MAX] {
                assert_eq!(spread(period, fraction, 0.0), Duration::ZERO);
                let up = spread(period, fraction, 0.999_999);
                assert!(up >= period && up <= period.saturating_mul(2), "{up:?}");
            }
        }
        assert_eq!(spread(Duration::MAX, 1.0, 0.75), Duration::MAX);
        let mut backoff = RetryBackoff::new(Duration::MAX, Duration::ZERO).jitter(f64::NAN);
        for _ in 0..70 {
            assert_eq!(backoff.failed(), Some(Duration::MAX));
        }
        let mut backoff = RetryBackoff::new(Duration::from_nanos(1), Duration::MAX).jitter(1.0);
        let delays: Vec<_> = (0..200).map(|_| backoff.failed().unwrap()).collect();
        assert!(delays.iter().all(|&d| d <= Duration::MAX));
        assert_eq!(backoff.failures(), 200);
        assert!(backoff.succeeded(Duration::MAX).is_some());
        assert_eq!(
            RetryBackoff::new(Duration::ZERO, Duration::ZERO)
                .max_retries(0)
                .failed(),
            None
        );
    }
}
