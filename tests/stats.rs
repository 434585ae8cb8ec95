//! Statistics: exact counts under deterministic (virtual-time) scenarios,
//! and the aggregate view of a scheduler.

use circulation_trigger::{policy::RetryBackoff, report::TriggerState, Scheduler, Trigger};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[test]
fn counts_are_exact_in_a_deterministic_scenario() {
    let sim = Scheduler::builder().build_virtual();
    let entered = Arc::new(Mutex::new(0u32));
    let e = entered.clone();
    let trigger = Trigger::builder(&sim).name("exact").bind(move || {
        let mut n = e.lock().unwrap();
        *n += 1;
        if *n == 3 {
            panic!("third run fails");
        }
        Some(Duration::from_millis(100))
    });
    assert_eq!(trigger.stats().state, TriggerState::Idle);
    // 5 fires before any run: 1 iteration serves them, 4 coalesced.
    for _ in 0..5 {
        trigger.fire().unwrap();
    }
    assert_eq!(trigger.stats().state, TriggerState::Due);
    sim.advance(Duration::ZERO);
    let s = trigger.stats();
    assert_eq!(
        (s.fires, s.coalesced_fires, s.iterations, s.panics),
        (5, 4, 1, 0)
    );
    assert_eq!(s.state, TriggerState::Armed(Duration::from_millis(100)));
    assert_eq!(s.last_start, Some(Duration::ZERO));
    // The periodic re-run at 100 ms is on time; the one at 200 ms panics.
    sim.advance(Duration::from_millis(250));
    let s = trigger.stats();
    assert_eq!(
        (s.fires, s.coalesced_fires, s.iterations, s.panics),
        (5, 4, 3, 1)
    );
    assert_eq!(s.last_lateness, Some(Duration::ZERO));
    assert_eq!(s.max_lateness, Some(Duration::ZERO));
    assert_eq!(s.state, TriggerState::Idle, "a panic stops the chain");
    // fire_after counts as a fire; suspend does not (it supersedes it).
    trigger.fire_after(Duration::from_secs(1)).unwrap();
    trigger.suspend();
    let s = trigger.stats();
    assert_eq!((s.fires, s.coalesced_fires), (6, 5));
    assert_eq!(s.state, TriggerState::Suspended);
    assert_eq!(sim.stats().panics, 1);
}

#[test]
fn lateness_is_measured_against_the_deadline() {
    // A coarse tick rounds the deadline up: the run is never early, and the
    // lateness is measured from the rounded deadline the timer armed.
    let sim = Scheduler::builder().build_virtual();
    let trigger = Trigger::bind(&sim, || None);
    trigger.fire_after(Duration::from_micros(1_500)).unwrap();
    sim.advance(Duration::from_millis(1));
    assert_eq!(trigger.stats().iterations, 0);
    sim.advance(Duration::from_millis(1));
    let s = trigger.stats();
    assert_eq!(s.iterations, 1);
    assert_eq!(s.last_start, Some(Duration::from_micros(1_500)));
    assert_eq!(s.last_lateness, Some(Duration::ZERO));
}

#[test]
fn the_scheduler_lists_triggers_by_name_with_totals() {
    let sim = Scheduler::builder().build_virtual();
    let b = Trigger::builder(&sim).name("b").bind(|| None);
    let a = Trigger::builder(&sim).name("a").bind(|| None);
    let unnamed = Trigger::bind(&sim, || None);
    a.fire().unwrap();
    b.fire().unwrap();
    b.fire().unwrap();
    unnamed.fire_within(Duration::from_secs(5)).unwrap();
    sim.advance(Duration::from_secs(5));
    let stats = sim.stats();
    let names: Vec<_> = stats.triggers.iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, [Some("a".to_owned()), Some("b".to_owned()), None]);
    assert_eq!(
        (stats.fires, stats.coalesced_fires, stats.iterations),
        (4, 1, 3)
    );
    drop((a, b, unnamed));
    assert!(
        sim.stats().triggers.is_empty(),
        "dropped triggers leave the registry"
    );
}

#[test]
fn running_state_and_real_time_stats() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let trigger = Trigger::bind(&scheduler, move || {
        entered_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        None
    });
    trigger.fire().unwrap();
    entered_rx.recv().unwrap();
    assert_eq!(trigger.stats().state, TriggerState::Running);
    trigger.fire().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while trigger.stats().state != TriggerState::RunningWithRerun {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            trigger.stats()
        );
        std::thread::yield_now();
    }
    release_tx.send(()).unwrap();
    entered_rx.recv().unwrap();
    release_tx.send(()).unwrap();
}

#[test]
fn backoff_drives_a_failing_task_in_virtual_time() {
    let sim = Scheduler::builder().build_virtual();
    let clock = sim.clock();
    let mut backoff =
        RetryBackoff::new(Duration::from_secs(1), Duration::from_secs(8)).max_retries(6);
    let trigger = Trigger::bind(&sim, move || {
        let _ = clock.now();
        backoff.failed() // never recovers: 1, 2, 4, 8, 8, 8 s, then stop
    });
    trigger.fire().unwrap();
    sim.advance(Duration::from_secs(3_600));
    let s = trigger.stats();
    assert_eq!(s.iterations, 7);
    assert_eq!(
        s.last_start,
        Some(Duration::from_secs(1 + 2 + 4 + 8 + 8 + 8))
    );
    assert_eq!(s.state, TriggerState::Idle);
}

#[test]
fn after_shutdown_the_state_reads_shut_down() {
    let sim = Scheduler::builder().build_virtual();
    let trigger = Trigger::bind(&sim, || Some(Duration::from_secs(1)));
    trigger.fire().unwrap();
    sim.advance(Duration::ZERO);
    assert!(matches!(trigger.stats().state, TriggerState::Armed(_)));
    sim.shutdown();
    assert_eq!(trigger.stats().state, TriggerState::ShutDown);
}
