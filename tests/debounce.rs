//! `TriggerBuilder::debounce` (trailing edge) beside `min_interval`, on
//! virtual time: bursts at one instant, bursts that arrive paced, steady
//! streams capped by `max_wait`, and the interplay with pause, suspend and
//! the explicit-time fires.

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::{testing::VirtualScheduler, Scheduler, Trigger};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MS: Duration = Duration::from_millis(1);

/// A trigger whose runs are logged (ms since the scheduler started).
fn logged(
    sim: &VirtualScheduler,
    configure: impl FnOnce(
        circulation_trigger::TriggerBuilder<'_>,
    ) -> circulation_trigger::TriggerBuilder<'_>,
) -> (Trigger, Arc<Mutex<Vec<u64>>>) {
    let runs = Arc::new(Mutex::new(Vec::new()));
    let (log, clock) = (runs.clone(), sim.clock());
    let trigger = configure(Trigger::builder(sim)).bind(move || {
        log.lock().unwrap().push(clock.now().as_millis() as u64);
        None
    });
    (trigger, runs)
}

/// Fires at each of `at` (ms), then lets 10 s pass.
fn fire_at(sim: &VirtualScheduler, trigger: &Trigger, at: &[u64]) {
    for &ms in at {
        sim.advance_to(MS * ms as u32);
        trigger.fire().unwrap();
    }
    sim.advance(Duration::from_secs(10));
}

#[test]
fn a_burst_at_one_instant_is_one_run_a_window_later() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().debounce(MS * 100, MS * 1_000))
    });
    sim.advance(MS * 5);
    for _ in 0..1_000 {
        trigger.fire().unwrap();
    }
    sim.advance(Duration::from_secs(1));
    assert_eq!(*runs.lock().unwrap(), [105]);
    let stats = trigger.stats();
    assert_eq!((stats.fires, stats.iterations), (1_000, 1));
}

#[test]
fn a_paced_burst_is_one_run_a_window_after_its_last_fire() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().debounce(MS * 100, MS * 1_000))
    });
    // One fire every 30 ms for 300 ms: each pushes the run back.
    let at: Vec<u64> = (0..10).map(|i| i * 30).collect();
    fire_at(&sim, &trigger, &at);
    assert_eq!(*runs.lock().unwrap(), [270 + 100]);

    // Without debounce the same paced burst runs on every fire; with only
    // a cooldown, on the first and then once per interval.
    let sim = Scheduler::builder().build_virtual();
    let (plain, plain_runs) = logged(&sim, |b| b);
    fire_at(&sim, &plain, &at);
    assert_eq!(plain_runs.lock().unwrap().len(), 10);
    let sim = Scheduler::builder().build_virtual();
    let (cooled, cooled_runs) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().min_interval(MS * 100))
    });
    fire_at(&sim, &cooled, &at);
    assert_eq!(*cooled_runs.lock().unwrap(), [0, 100, 200, 300]);
}

#[test]
fn a_steady_stream_runs_every_max_wait() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().debounce(MS * 100, MS * 500))
    });
    // A fire every 50 ms for 2 s: never a 100 ms quiet window.
    let at: Vec<u64> = (0..40).map(|i| i * 50).collect();
    fire_at(&sim, &trigger, &at);
    // Each burst runs 500 ms after its first fire; the run closes it, and
    // the fire at that same instant (after the run) opens the next: first
    // fires at 0, 500, 1000, 1500.
    assert_eq!(*runs.lock().unwrap(), [500, 1000, 1500, 2000]);
    // A stream that stops early ends with a quiet window instead.
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().debounce(MS * 100, MS * 500))
    });
    let at: Vec<u64> = (0..14).map(|i| i * 50).collect(); // the last at 650
    fire_at(&sim, &trigger, &at);
    assert_eq!(*runs.lock().unwrap(), [500, 750]);
}

#[test]
fn a_max_wait_under_the_window_caps_every_burst() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().debounce(MS * 100, MS * 30))
    });
    fire_at(&sim, &trigger, &[10, 20]);
    assert_eq!(*runs.lock().unwrap(), [40]);
    // Zero max_wait: at once.
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().debounce(MS * 100, Duration::ZERO))
    });
    fire_at(&sim, &trigger, &[10]);
    assert_eq!(*runs.lock().unwrap(), [10]);
    // Zero window: no debounce at all.
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().debounce(Duration::ZERO, Duration::MAX))
    });
    fire_at(&sim, &trigger, &[10, 20]);
    assert_eq!(*runs.lock().unwrap(), [10, 20]);
    // Huge values saturate: the run comes a window after the last fire.
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().debounce(MS * 100, Duration::MAX))
    });
    fire_at(&sim, &trigger, &[10, 20]);
    assert_eq!(*runs.lock().unwrap(), [120]);
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().debounce(Duration::MAX, MS * 100))
    });
    fire_at(&sim, &trigger, &[10, 20]);
    assert_eq!(*runs.lock().unwrap(), [110]);
    // Both past the clock: refused as `fire_after` would be.
    let sim = Scheduler::builder().build_virtual();
    let (trigger, _) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().debounce(Duration::MAX, Duration::MAX))
    });
    assert!(matches!(
        trigger.fire(),
        Err(circulation_trigger::FireError::DelayTooLong(_))
    ));
    assert_eq!(sim.next_deadline(), None);
}

#[test]
fn explicit_times_are_not_debounced() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().debounce(MS * 100, MS * 1_000))
    });
    trigger.fire_after(MS * 10).unwrap();
    sim.advance(MS * 20);
    trigger.fire_at_elapsed(MS * 30).unwrap();
    sim.advance(MS * 20);
    trigger.fire_within(Duration::ZERO).unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(*runs.lock().unwrap(), [10, 30, 40]);
}

#[test]
fn a_cancelled_burst_does_not_cap_the_next_one() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = logged(&sim, |b| {
        b.policies(TriggerPolicies::new().debounce(MS * 100, MS * 300))
    });
    trigger.fire().unwrap(); // a burst opens at 0 (cap 300)…
    sim.advance(MS * 50);
    trigger.suspend(); // …and is cancelled
    sim.advance(MS * 950);
    trigger.fire().unwrap(); // a new burst at 1000, not capped by the old
    sim.advance(Duration::from_secs(10));
    assert_eq!(*runs.lock().unwrap(), [1_100]);

    trigger.fire().unwrap();
    trigger.pause();
    sim.advance(Duration::from_secs(10));
    trigger.resume().unwrap(); // returned None: stays idle
    trigger.fire().unwrap();
    sim.advance(Duration::from_secs(10));
    assert_eq!(*runs.lock().unwrap(), [1_100, 21_100]);
}

#[test]
fn fire_and_wait_waits_for_the_debounced_run() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let trigger = Trigger::builder(&scheduler)
        .policies(TriggerPolicies::new().debounce(MS * 20, MS * 1_000))
        .bind(|| None);
    let started = std::time::Instant::now();
    assert!(trigger.fire_and_wait(Duration::from_secs(20)).is_ok());
    assert!(
        started.elapsed() >= MS * 20,
        "the run waited for the window"
    );
    assert_eq!(trigger.stats().iterations, 1);
    scheduler.shutdown();
}
