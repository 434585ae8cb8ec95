//! G18: a burst of "refresh now" is one fetch, by default. The first call
//! after a quiet spell fetches at once; calls during the fetch or its
//! cooldown (1 s unless set) cost one more fetch, at the cooldown's end —
//! through every path to a fetch.

mod common;

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::{FireError, Refresh, Scheduler, WaitError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECOND: Duration = Duration::from_secs(1);

/// A refresher on virtual time whose fetch logs the virtual time it ran.
fn logged(
    sim: &circulation_trigger::testing::VirtualScheduler,
    configure: impl FnOnce(
        circulation_trigger::RefreshBuilder<'_>,
    ) -> circulation_trigger::RefreshBuilder<'_>,
) -> (Refresh<u32, String>, Arc<Mutex<Vec<Duration>>>) {
    let (clock, log) = (sim.clock(), Arc::new(Mutex::new(Vec::new())));
    let l = Arc::clone(&log);
    let config = configure(Refresh::builder(sim).every(30 * SECOND)).bind(move || {
        let mut log = l.lock().unwrap();
        log.push(clock.now());
        Ok(u32::try_from(log.len()).unwrap())
    });
    (config, log)
}

#[test]
fn a_thousand_calls_10_us_apart_cost_two_fetches_the_first_at_once() {
    let sim = Scheduler::builder().build_virtual();
    let (config, log) = logged(&sim, |b| b);
    for _ in 0..1_000 {
        config.refresh_now().unwrap();
        sim.advance(Duration::from_micros(10));
    }
    assert_eq!(*log.lock().unwrap(), [Duration::ZERO], "the first at once");
    sim.advance(5 * SECOND);
    assert_eq!(
        *log.lock().unwrap(),
        [Duration::ZERO, SECOND],
        "one more, at the cooldown's end"
    );
    assert_eq!(config.refreshes(), 2);
    // After a quiet spell, the first call fetches at once again.
    sim.advance(10 * SECOND); // now 15.01 s
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(log.lock().unwrap().len(), 3);
    assert_eq!(log.lock().unwrap()[2], sim.now());
}

#[test]
fn a_burst_stretched_over_900_ms_still_costs_two_fetches() {
    let sim = Scheduler::builder().build_virtual();
    let (config, log) = logged(&sim, |b| b);
    for _ in 0..1_000 {
        config.refresh_now().unwrap();
        sim.advance(Duration::from_micros(900));
    }
    sim.advance(5 * SECOND);
    assert_eq!(*log.lock().unwrap(), [Duration::ZERO, SECOND]);
}

#[test]
fn every_path_to_a_fetch_waits_for_the_cooldown() {
    let sim = Scheduler::builder().build_virtual();
    let (config, log) = logged(&sim, |b| b);
    config.refresh_now().unwrap();
    sim.advance(Duration::from_millis(100));
    // Each of these alone asks for a fetch sooner than 1 s after the first.
    config.trigger().fire().unwrap();
    sim.advance(Duration::from_millis(100));
    config
        .trigger()
        .fire_after(Duration::from_millis(50))
        .unwrap();
    sim.advance(Duration::from_millis(100));
    config
        .trigger()
        .fire_within(Duration::from_millis(10))
        .unwrap();
    sim.advance(Duration::from_millis(100));
    config.pause();
    assert_eq!(config.trigger().resume_after(Duration::ZERO), Ok(true));
    sim.advance(Duration::from_millis(100));
    assert_eq!(log.lock().unwrap().len(), 1, "all wait for the cooldown");
    sim.advance(SECOND);
    assert_eq!(*log.lock().unwrap(), [Duration::ZERO, SECOND]);
}

#[test]
fn refresh_and_wait_is_served_at_the_cooldowns_end() {
    let sim = Scheduler::builder().build_virtual();
    let (config, log) = logged(&sim, |b| b);
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    // Another thread moves time in 100 ms steps; the wait is served by the
    // fetch at 1 s, not one at once.
    let value = common::while_time_moves(&sim, Duration::from_millis(100), || {
        config.refresh_and_wait(common::PATIENCE)
    })
    .unwrap();
    assert_eq!(*value, 2);
    assert_eq!(log.lock().unwrap()[..2], [Duration::ZERO, SECOND]);
}

#[test]
fn the_cooldown_is_the_triggers_min_interval_and_can_be_changed_or_turned_off() {
    let sim = Scheduler::builder().build_virtual();
    let (config, log) = logged(&sim, |b| {
        b.trigger(|t| t.policies(TriggerPolicies::new().min_interval(5 * SECOND)))
    });
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    // Calls before a fetch starts are served by it; these come after.
    for _ in 0..100 {
        config.refresh_now().unwrap();
    }
    sim.advance(10 * SECOND);
    assert_eq!(*log.lock().unwrap(), [Duration::ZERO, 5 * SECOND]);

    let sim = Scheduler::builder().build_virtual();
    let (config, log) = logged(&sim, |b| {
        b.trigger(|t| t.policies(TriggerPolicies::new().min_interval(Duration::ZERO)))
    });
    for _ in 0..3 {
        config.refresh_now().unwrap();
        sim.advance(Duration::from_millis(10));
    }
    assert_eq!(
        log.lock().unwrap().len(),
        3,
        "off: every call after a fetch ended fetches"
    );
}

#[test]
fn calls_refused_while_paused_are_counted_by_the_refresh_and_the_scheduler() {
    let sim = Scheduler::builder().build_virtual();
    let (config, _) = logged(&sim, |b| b);
    assert!(!config.is_paused());
    config.pause();
    assert!(config.is_paused());
    assert_eq!(config.refresh_now(), Err(FireError::Paused));
    assert_eq!(config.refresh_now(), Err(FireError::Paused));
    assert!(matches!(
        config.refresh_and_wait(SECOND),
        Err(circulation_trigger::refresh::RefreshError::Wait(
            WaitError::Paused
        ))
    ));
    assert_eq!(config.trigger().fire(), Err(FireError::Paused));
    assert_eq!(config.refused_fires(), 3, "its own calls");
    assert_eq!(sim.stats().refused_paused, 4, "every trigger's fires");
    assert_eq!(config.resume(), Ok(true));
    assert!(!config.is_paused());
    config.refresh_now().unwrap();
    assert_eq!(config.refused_fires(), 3);
}

/// On real time: 1,000 calls about 10 µs apart, however the machine
/// stretches them, fetch at once and then at most once more.
#[test]
fn on_real_time_a_burst_costs_at_most_two_fetches() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let fetches = common::Counter::default();
    let f = fetches.clone();
    let started = Instant::now();
    let first = Arc::new(Mutex::new(None));
    let fi = Arc::clone(&first);
    let config = Refresh::builder(&scheduler).bind(move || {
        fi.lock().unwrap().get_or_insert_with(|| started.elapsed());
        Ok::<_, String>(f.bump())
    });
    for _ in 0..1_000 {
        config.refresh_now().unwrap();
        let pause = Instant::now();
        while pause.elapsed() < Duration::from_micros(10) {
            std::hint::spin_loop();
        }
    }
    let burst = started.elapsed();
    common::eventually("the first fetch", || fetches.get() >= 1);
    // Generous: "at once" is well under the cooldown on any machine.
    assert!(first.lock().unwrap().unwrap() < Duration::from_millis(500));
    if burst < Duration::from_millis(900) {
        // The burst fits in one cooldown: exactly one more fetch, at its end.
        common::eventually("the follow-up", || fetches.get() == 2);
        std::thread::sleep(Duration::from_millis(1_500));
        assert_eq!(fetches.get(), 2, "burst of {burst:?}");
    } else {
        // A machine that stretched the burst past a cooldown: one fetch
        // per cooldown at most, plus the first.
        std::thread::sleep(Duration::from_millis(1_500));
        let bound = 2 + burst.as_secs() as usize;
        assert!(
            fetches.get() <= bound,
            "{} fetches for a burst of {burst:?}",
            fetches.get()
        );
    }
    scheduler.shutdown();
    assert!(scheduler.await_termination(common::PATIENCE));
}
