//! G16, every input survives (docs/DESIGN.md, "Guarantees" and "Edge
//! behaviour of every entry point"): hostile values — zero, one
//! nanosecond, `Duration::MAX`, `Duration::from_secs(u64::MAX)`, NaN, ±∞,
//! huge and negative fractions, huge counts, empty, very long and
//! NUL-carrying names — thrown at every public entry point, on the virtual
//! and on the real scheduler. Each call must return a clear error that
//! changed nothing, or saturate as documented; afterwards a trigger must
//! still fire and the scheduler must still shut down cleanly.

mod common;

use circulation_trigger::{
    policy::{jittered, seed_jitter, RetryBackoff},
    testing::VirtualScheduler,
    BuildError, Builder, FireError, Outcome, Scheduler, Trigger,
};
use common::{eventually, Counter, PATIENCE};
use proptest::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The largest tick a builder keeps: coarser ticks are clamped to it
/// (`Builder::tick`'s documented saturation).
const MAX_TICK: Duration = Duration::from_secs(3_600);
/// The most worker threads a builder starts (`Builder::workers`).
const MAX_WORKERS: usize = 1_024;
/// Longer than any test's real-time run since its scheduler was built.
const DAY: Duration = Duration::from_secs(86_400);

// ---------------------------------------------------------------- inputs

/// Durations from the edges of the range, and from all over it.
fn duration() -> impl Strategy<Value = Duration> {
    let horizon = VirtualScheduler::HORIZON;
    let edges = vec![
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_nanos(999),
        Duration::from_micros(1),
        Duration::from_nanos(1_001),
        Duration::MAX,
        Duration::from_secs(u64::MAX),
        Duration::from_nanos(u64::MAX),
        Duration::from_micros(u64::MAX),
        horizon,
        horizon - Duration::from_nanos(1),
        horizon + Duration::from_nanos(1),
        MAX_TICK,
        MAX_TICK + Duration::from_nanos(1),
    ];
    prop_oneof![
        3 => prop::sample::select(edges),
        1 => any::<u64>().prop_map(Duration::from_nanos),
        1 => (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        2 => (0u64..10_000_000).prop_map(Duration::from_micros),
    ]
}

/// Fractions: NaN, the infinities, signed zeros, extremes, and ordinary
/// values inside and outside `0.0..=1.0`.
fn fraction() -> impl Strategy<Value = f64> {
    let edges = vec![
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        1.0,
        -1.0,
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        f64::EPSILON,
        1e300,
        -1e-300,
    ];
    prop_oneof![
        2 => prop::sample::select(edges),
        1 => any::<f64>(),
        1 => -2.0..2.0f64,
    ]
}

/// Names: empty, with NUL bytes, multi-byte, very long, arbitrary.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("\0".to_owned()),
        Just("tail\0".to_owned()),
        Just("é".repeat(40)),
        Just("x".repeat(100_000)),
        "\\PC{0,40}",
    ]
}

/// Builder settings, with the worker count limited to what the machine
/// can start quickly (huge counts have their own test below).
#[derive(Debug, Clone)]
struct Settings {
    workers: usize,
    tick: Duration,
    grace: Duration,
    prefix: String,
    seed: u64,
}

fn settings() -> impl Strategy<Value = Settings> {
    (0usize..3, duration(), duration(), name(), any::<u64>()).prop_map(
        |(workers, tick, grace, prefix, seed)| Settings {
            workers,
            tick,
            grace,
            prefix,
            seed,
        },
    )
}

impl Settings {
    fn builder(&self) -> Builder {
        Scheduler::builder()
            .workers(self.workers)
            .tick(self.tick)
            .shutdown_grace(self.grace)
            .thread_name_prefix(self.prefix.clone())
            .seed(self.seed)
            .panic_hook(|_| panic!("a panicking hook must not matter"))
    }
}

/// What a scripted task returns, run after run; `None` once the script
/// is over (so no chain circulates forever, whatever the delays).
fn script() -> impl Strategy<Value = Vec<Option<Duration>>> {
    prop::collection::vec(prop::option::weighted(0.8, duration()), 0..6)
}

/// A trigger named `name` running `script`; counts its iterations.
fn scripted(
    scheduler: &(impl AsRef<Scheduler> + ?Sized),
    name: &str,
    version: u32,
    script: Vec<Option<Duration>>,
) -> (Trigger, Counter) {
    let runs = Counter::default();
    let counter = runs.clone();
    let mut steps = script.into_iter();
    let trigger = Trigger::builder(scheduler)
        .name(name)
        .start_version(version)
        .bind(move || {
            counter.bump();
            steps.next().flatten()
        });
    (trigger, runs)
}

// ---------------------------------------------------------------- checks

/// `fire_after(delay)` or `fire_within(delay)` answered `result` at a time
/// between `earliest` and `latest` since the scheduler started.
fn check_timed_fire(
    trigger: &Trigger,
    delay: Duration,
    call: impl FnOnce(&Trigger, Duration) -> Result<(), FireError>,
    (earliest, latest): (Duration, Duration),
) {
    let horizon = VirtualScheduler::HORIZON;
    let version = trigger.stats().version;
    match call(trigger, delay) {
        Ok(()) => assert!(
            earliest
                .checked_add(delay)
                .is_some_and(|end| end <= horizon),
            "{delay:?} accepted at {earliest:?}: its deadline is past the horizon"
        ),
        Err(FireError::DelayTooLong(reported)) => {
            assert_eq!(reported, delay, "the error names the caller's delay");
            assert!(
                latest
                    .checked_add(delay)
                    .and_then(|end| end.checked_add(MAX_TICK))
                    .map_or(true, |end| end > horizon),
                "{delay:?} refused at {latest:?}, though it fits the clock"
            );
            assert_eq!(
                trigger.stats().version,
                version,
                "a refusal changes nothing"
            );
        }
        Err(other) => panic!("{delay:?} gave {other:?} before shutdown"),
    }
}

/// `jittered(period, fraction)` gave `got`: `period ± fraction` of it,
/// with the fraction clamped (NaN: none) and the result saturated.
fn check_jitter(period: Duration, fraction: f64, got: Duration) {
    let fraction = if fraction.is_nan() {
        0.0
    } else {
        fraction.clamp(0.0, 1.0)
    };
    if fraction == 0.0 {
        assert_eq!(got, period, "no jitter");
        return;
    }
    let (p, g) = (period.as_secs_f64(), got.as_secs_f64());
    let slack = p * 1e-9 + 1e-9;
    assert!(
        g >= p * (1.0 - fraction) - slack && g <= p * (1.0 + fraction) + slack,
        "jittered({period:?}, {fraction}) = {got:?}"
    );
}

/// A back-off built from hostile values, failing `failures` times, then
/// succeeding with `period`.
#[derive(Debug, Clone)]
struct BackoffCase {
    initial: Duration,
    max: Duration,
    jitter: f64,
    retries: u32,
    seed: u64,
    failures: usize,
    period: Duration,
}

fn backoff_case() -> impl Strategy<Value = BackoffCase> {
    (
        (duration(), duration(), fraction()),
        prop_oneof![0u32..4, any::<u32>()],
        (any::<u64>(), 0usize..70, duration()),
    )
        .prop_map(
            |((initial, max, jitter), retries, (seed, failures, period))| BackoffCase {
                initial,
                max,
                jitter,
                retries,
                seed,
                failures,
                period,
            },
        )
}

fn check_backoff(case: &BackoffCase) {
    let mut backoff = RetryBackoff::new(case.initial, case.max)
        .jitter(case.jitter)
        .max_retries(case.retries)
        .seed(case.seed);
    let cap = case.max.max(case.initial);
    for attempt in 0..case.failures {
        match backoff.failed() {
            Some(delay) => {
                assert!(
                    u32::try_from(attempt).unwrap() < case.retries,
                    "past the limit"
                );
                assert!(delay <= cap, "{delay:?} above the cap {cap:?}");
            }
            None => assert!(u32::try_from(attempt).unwrap() >= case.retries),
        }
    }
    let expected = u32::try_from(case.failures).unwrap().min(case.retries);
    assert_eq!(backoff.failures(), expected);
    let period = backoff
        .succeeded(case.period)
        .expect("a success always circulates");
    check_jitter(case.period, case.jitter, period);
    assert_eq!(backoff.failures(), 0);
}

/// The scheduler shut down cleanly: every thread exits (a short hostile
/// timeout may expire first), fires are refused, and nothing was left
/// running or detached.
fn check_shut_down(scheduler: Scheduler, trigger: &Trigger, timeout: Duration) {
    assert!(scheduler.shutdown_report().is_some());
    if !scheduler.await_termination(timeout) {
        assert!(timeout < PATIENCE, "await_termination({timeout:?}) gave up");
        assert!(scheduler.await_termination(PATIENCE), "threads still alive");
    }
    assert!(scheduler.await_termination(std::time::Duration::ZERO));
    assert_eq!(trigger.fire(), Err(FireError::Shutdown));
    assert!(trigger.fire_after(Duration::from_secs(1)).is_err());
    let late = Trigger::bind(&scheduler, || None);
    assert_eq!(
        late.fire(),
        Err(FireError::Shutdown),
        "bound after shutdown"
    );
    assert!(scheduler.await_termination(PATIENCE));
    let report = scheduler.shutdown_report().unwrap();
    assert!(report
        .in_flight()
        .iter()
        .all(|run| run.outcome() == Outcome::Completed));
}

// ------------------------------------------------------- virtual scheduler

/// Every public entry point that takes an argument, plus the getters.
#[derive(Debug, Clone)]
enum Call {
    Fire,
    FireAfter(Duration),
    FireWithin(Duration),
    Suspend,
    /// `pause`, then `resume_after(delay)` (and `resume` if refused).
    PauseResume(Duration),
    Advance(Duration),
    AdvanceTo(Duration),
    NextDeadline,
    AwaitTermination(Duration),
    Bind(String, u32),
    Jittered(Duration, f64),
    SeedJitter(u64),
    RetryBackoff(BackoffCase),
    Observe,
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        2 => Just(Call::Fire),
        4 => duration().prop_map(Call::FireAfter),
        3 => duration().prop_map(Call::FireWithin),
        1 => Just(Call::Suspend),
        2 => duration().prop_map(Call::PauseResume),
        3 => duration().prop_map(Call::Advance),
        2 => duration().prop_map(Call::AdvanceTo),
        1 => Just(Call::NextDeadline),
        1 => duration().prop_map(Call::AwaitTermination),
        1 => (name(), any::<u32>()).prop_map(|(n, v)| Call::Bind(n, v)),
        2 => (duration(), fraction()).prop_map(|(d, f)| Call::Jittered(d, f)),
        1 => any::<u64>().prop_map(Call::SeedJitter),
        1 => backoff_case().prop_map(Call::RetryBackoff),
        1 => Just(Call::Observe),
    ]
}

/// Runs `call` against `sim` and `trigger`, checking its documented answer.
fn apply(sim: &VirtualScheduler, trigger: &Trigger, bound: &mut Vec<Trigger>, call: Call) {
    let now = sim.now();
    let horizon = VirtualScheduler::HORIZON;
    match call {
        Call::Fire => assert_eq!(trigger.fire(), Ok(())),
        Call::FireAfter(delay) => {
            check_timed_fire(trigger, delay, |t, d| t.fire_after(d), (now, now));
        }
        Call::FireWithin(window) => {
            check_timed_fire(trigger, window, |t, d| t.fire_within(d), (now, now));
        }
        Call::Suspend => trigger.suspend(),
        Call::PauseResume(delay) => {
            trigger.pause();
            assert_eq!(trigger.fire(), Err(FireError::Paused));
            match trigger.resume_after(delay) {
                Ok(resumed) => assert!(resumed),
                Err(FireError::DelayTooLong(reported)) => {
                    assert_eq!(reported, delay);
                    assert!(
                        now.checked_add(delay)
                            .and_then(|end| end.checked_add(MAX_TICK))
                            .map_or(true, |end| end > horizon),
                        "{delay:?} refused at {now:?}, though it fits the clock"
                    );
                    assert!(trigger.stats().paused, "a refusal changes nothing");
                    // Back on the schedule (any delay: resumes idle if
                    // it is past the clock).
                    assert_eq!(trigger.resume(), Ok(true));
                }
                Err(other) => panic!("{delay:?} gave {other:?} before shutdown"),
            }
            assert!(!trigger.stats().paused);
        }
        Call::Advance(delay) => {
            let _ = sim.advance(delay);
            let step = Duration::from_micros(micros_up(delay));
            assert_eq!(sim.now(), now.saturating_add(step).min(horizon));
        }
        Call::AdvanceTo(at) => {
            let _ = sim.advance_to(at);
            let at = Duration::from_micros(micros_up(at)).min(horizon);
            assert_eq!(sim.now(), now.max(at));
        }
        Call::NextDeadline => {
            if let Some(next) = sim.next_deadline() {
                assert!(next <= horizon, "{next:?}");
            }
        }
        Call::AwaitTermination(timeout) => {
            assert!(sim.await_termination(timeout), "no thread to wait for");
        }
        Call::Bind(name, version) => {
            let new = Trigger::builder(sim)
                .name(name.clone())
                .start_version(version);
            let new = new.bind(|| None);
            assert_eq!(new.name(), Some(name.as_str()));
            assert_eq!(new.fire(), Ok(()));
            bound.push(new);
        }
        Call::Jittered(period, fraction) => {
            check_jitter(period, fraction, jittered(period, fraction))
        }
        Call::SeedJitter(seed) => seed_jitter(seed),
        Call::RetryBackoff(case) => check_backoff(&case),
        Call::Observe => {
            let _ = (trigger.stats(), sim.stats(), sim.stats().panics);
            assert_eq!(sim.clock().now(), sim.now());
            assert!(sim.shutdown_report().is_none());
            let weak = trigger.downgrade();
            assert!(weak.upgrade().is_some());
        }
    }
}

/// `duration` in whole microseconds, rounded up, saturating.
fn micros_up(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_024))]

    #[test]
    fn the_virtual_scheduler_survives_hostile_inputs(
        settings in settings(),
        (name, version) in (name(), any::<u32>()),
        script in script(),
        calls in prop::collection::vec(call(), 0..40),
        abrupt in any::<bool>(),
        timeout in duration(),
    ) {
        let sim = settings.builder().build_virtual();
        let (trigger, runs) = scripted(&sim, &name, version, script);
        let mut bound = Vec::new();
        for call in calls {
            apply(&sim, &trigger, &mut bound, call);
        }
        // Still fires, wherever time stands (even at the horizon).
        let (probe, probed) = scripted(&sim, "probe", 0, Vec::new());
        let before = runs.get();
        prop_assert_eq!(trigger.fire(), Ok(()));
        prop_assert_eq!(probe.fire(), Ok(()));
        let _ = sim.advance(Duration::ZERO);
        prop_assert!(runs.get() > before, "the trigger ran again");
        prop_assert_eq!(probed.get(), 1);
        // Still shuts down cleanly.
        if abrupt {
            prop_assert!(sim.shutdown_now().in_flight().is_empty());
        } else {
            sim.shutdown();
        }
        prop_assert!(sim.await_termination(timeout));
        prop_assert_eq!(trigger.fire(), Err(FireError::Shutdown));
        let late = Trigger::bind(&sim, || None);
        prop_assert_eq!(late.fire(), Err(FireError::Shutdown));
        prop_assert!(late.fire_within(timeout).is_err());
        prop_assert!(sim.shutdown_report().is_some());
    }
}

// ---------------------------------------------------------- real scheduler

proptest! {
    // Real threads: few cases, each short.
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn the_real_scheduler_survives_hostile_inputs(
        settings in settings(),
        (name, version) in (name(), any::<u32>()),
        script in script(),
        delays in prop::collection::vec((any::<bool>(), duration()), 0..8),
        abrupt in any::<bool>(),
        timeout in duration(),
    ) {
        let scheduler = match settings.builder().build() {
            Ok(scheduler) => scheduler,
            Err(error) => {
                // The only refusals: no worker, or a name no thread can have.
                let expected = match &error {
                    BuildError::NoWorkers => settings.workers == 0,
                    BuildError::InvalidThreadName(prefix) => {
                        prefix.contains('\0') && *prefix == settings.prefix
                    }
                    _ => false,
                };
                prop_assert!(expected, "{:?} gave {:?}", settings, error);
                return Ok(());
            }
        };
        prop_assert!(settings.workers > 0 && !settings.prefix.contains('\0'));
        let (trigger, runs) = scripted(&scheduler, &name, version, script);
        for (within, delay) in delays {
            let call = if within { Trigger::fire_within } else { Trigger::fire_after };
            check_timed_fire(&trigger, delay, call, (Duration::ZERO, DAY));
        }
        // Still fires.
        let before = runs.get();
        prop_assert_eq!(trigger.fire(), Ok(()));
        eventually("the trigger runs again", || runs.get() > before);
        // Still shuts down cleanly.
        if abrupt {
            let _report = scheduler.shutdown_now();
        } else {
            scheduler.shutdown();
        }
        check_shut_down(scheduler, &trigger, timeout);
    }
}

// ------------------------------------------------- settings, one by one

/// A tick under a microsecond means one microsecond and a tick over the
/// cap means the cap, on both schedulers alike.
#[test]
fn both_schedulers_clamp_the_tick_alike() {
    let cases = [
        (Duration::ZERO, Duration::from_micros(1)),
        (Duration::from_nanos(1), Duration::from_micros(1)),
        (Duration::MAX, MAX_TICK),
        (Duration::from_secs(u64::MAX), MAX_TICK),
    ];
    for (tick, effective) in cases {
        let real = Scheduler::builder().workers(1).tick(tick).build();
        let real = real.unwrap_or_else(|error| panic!("tick({tick:?}): {error}"));
        let runs = Counter::default();
        let r = runs.clone();
        let trigger = Trigger::bind(&real, move || {
            r.bump();
            None
        });
        trigger.fire().unwrap();
        eventually("a fire runs whatever the tick", || runs.get() == 1);
        drop(real);

        let sim = Scheduler::builder().tick(tick).build_virtual();
        let (trigger, runs) = scripted(&sim, "tick", 0, Vec::new());
        trigger.fire_after(Duration::from_nanos(1)).unwrap();
        let _ = sim.advance(effective - Duration::from_micros(1));
        assert_eq!(runs.get(), 0, "tick({tick:?}): not before one tick");
        let _ = sim.advance(Duration::from_micros(1));
        assert_eq!(
            runs.get(),
            1,
            "tick({tick:?}): the deadline rounds up to {effective:?}"
        );
    }
}

#[test]
fn worker_counts_beyond_the_limit_are_refused() {
    // Just past the limit first: a builder without the check starts that
    // many threads and fails here, before the extremes below.
    for requested in [MAX_WORKERS + 1, usize::MAX, 1 << 40] {
        match Scheduler::builder().workers(requested).build() {
            Err(BuildError::TooManyWorkers { requested: r, max }) => {
                assert_eq!(r, requested);
                assert_eq!(max, MAX_WORKERS);
            }
            other => panic!("workers({requested}) gave {other:?}"),
        }
    }
    let sim = Scheduler::builder().workers(usize::MAX).build_virtual();
    let (trigger, runs) = scripted(&sim, "virtual", 0, Vec::new());
    trigger.fire().unwrap();
    let _ = sim.advance(Duration::ZERO);
    assert_eq!(runs.get(), 1, "workers do not apply to virtual time");
}

#[test]
fn a_thread_name_prefix_with_nul_is_refused() {
    for prefix in ["\0", "worker\0", "\0\0x"] {
        let built = Scheduler::builder()
            .thread_name_prefix(prefix)
            .shutdown_grace(Duration::ZERO) // a failure must not wait
            .build();
        match built {
            Err(BuildError::InvalidThreadName(got)) => assert_eq!(got, prefix),
            other => panic!("thread_name_prefix({prefix:?}) gave {other:?}"),
        }
    }
}

/// Every wait that takes a timeout accepts any timeout: `Duration::MAX`
/// waits as long as it takes, which here is not long.
#[test]
fn any_grace_and_any_timeout_are_waited_out() {
    for grace in [Duration::MAX, Duration::from_secs(u64::MAX), Duration::ZERO] {
        let scheduler = Scheduler::builder()
            .workers(2)
            .shutdown_grace(grace)
            .build()
            .unwrap();
        let started = Arc::new(Mutex::new(false));
        let s = started.clone();
        let trigger = Trigger::bind(&scheduler, move || {
            *s.lock().unwrap() = true;
            Some(Duration::from_millis(1))
        });
        trigger.fire().unwrap();
        eventually("the chain circulates", || *started.lock().unwrap());
        let report = scheduler.shutdown_now();
        assert!(report.in_flight().len() <= 1);
        assert!(scheduler.await_termination(Duration::MAX));
        assert!(scheduler.await_termination(Duration::from_secs(u64::MAX)));
        check_shut_down(scheduler, &trigger, Duration::MAX);
    }
    let sim = Scheduler::builder()
        .shutdown_grace(Duration::MAX)
        .build_virtual();
    assert!(sim.await_termination(Duration::MAX));
    let _ = sim.shutdown_now();
    drop(sim);
}

/// `fire_within` judges the whole window, not the random draw: a window
/// past the clock's range is refused every time, and changes nothing.
#[test]
fn fire_within_refuses_a_window_past_the_horizon_every_time() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = scripted(&sim, "within", 0, vec![Some(Duration::from_secs(1))]);
    trigger.fire().unwrap();
    let _ = sim.advance(Duration::ZERO);
    let version = trigger.stats().version;
    for window in [
        Duration::MAX,
        Duration::from_secs(u64::MAX),
        VirtualScheduler::HORIZON * 2,
    ] {
        for _ in 0..100 {
            assert_eq!(
                trigger.fire_within(window),
                Err(FireError::DelayTooLong(window))
            );
        }
    }
    assert_eq!(trigger.stats().version, version, "nothing changed");
    let _ = sim.advance(Duration::from_secs(1));
    assert_eq!(runs.get(), 2, "the chain kept its period");
}

/// A task's own return value is an input too: delays past the clock's
/// range stop the chain (as `None` does); zero re-runs at once.
#[test]
fn a_task_may_return_any_delay() {
    let sim = Scheduler::builder().build_virtual();
    let script = vec![
        Some(Duration::ZERO),
        Some(Duration::from_nanos(1)),
        Some(Duration::from_secs(u64::MAX)),
    ];
    let (trigger, runs) = scripted(&sim, "returns", 0, script);
    trigger.fire().unwrap();
    let _ = sim.advance(Duration::from_micros(1));
    assert_eq!(
        runs.get(),
        3,
        "zero re-runs at once, 1 ns after a microsecond"
    );
    let _ = sim.advance(Duration::MAX);
    assert_eq!(runs.get(), 3, "from_secs(u64::MAX) stopped the chain");
    assert_eq!(sim.now(), VirtualScheduler::HORIZON);
    let (late, late_runs) = scripted(&sim, "late", 0, vec![Some(Duration::from_secs(1))]);
    assert!(matches!(
        late.fire_after(Duration::from_nanos(1)),
        Err(FireError::DelayTooLong(_))
    ));
    late.fire().unwrap();
    let _ = sim.advance(Duration::MAX);
    assert_eq!(
        late_runs.get(),
        1,
        "at the horizon fire still runs; the re-arm stops"
    );
}
