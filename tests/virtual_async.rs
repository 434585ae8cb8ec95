//! Async triggers on virtual time: `advance` polls their iterations on the
//! calling thread, `VirtualClock::sleep` stands in for a real timer, and
//! every run, end and re-arm happens at the virtual time it is due — no
//! Tokio runtime, no real waiting.
#![cfg(feature = "tokio")]

use circulation_trigger::{report::TriggerState, FireError, Outcome, Scheduler, Trigger};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECOND: Duration = Duration::from_secs(1);

/// Virtual seconds at which each iteration started.
type Starts = Arc<Mutex<Vec<u64>>>;

#[test]
fn a_30_s_async_trigger_advanced_95_s_runs_exactly_4_times() {
    let wall = Instant::now();
    let sim = Scheduler::builder().build_virtual();
    let runs = Arc::new(AtomicU32::new(0));
    let r = runs.clone();
    let trigger = Trigger::bind_async(&sim, move || {
        let r = r.clone();
        async move {
            r.fetch_add(1, Ordering::Relaxed);
            Some(30 * SECOND)
        }
    });
    trigger.fire().unwrap();
    sim.advance(95 * SECOND);
    assert_eq!(runs.load(Ordering::Relaxed), 4, "runs at 0, 30, 60, 90 s");
    assert_eq!(trigger.stats().iterations, 4);
    assert_eq!(sim.next_deadline(), Some(120 * SECOND));
    // Generous: the whole test takes microseconds of real time.
    assert!(wall.elapsed() < SECOND, "took {:?}", wall.elapsed());
}

/// An async task whose fetch takes `fetch` of virtual time, every `period`
/// after the previous fetch ended, logging its starts.
fn slow_refresher(
    sim: &circulation_trigger::testing::VirtualScheduler,
    fetch: Duration,
) -> (Trigger, Starts) {
    let (clock, starts) = (sim.clock(), Starts::default());
    let s = starts.clone();
    let running = Arc::new(AtomicU32::new(0));
    let trigger = Trigger::bind_async(sim, move || {
        let (clock, s, running) = (clock.clone(), s.clone(), running.clone());
        async move {
            assert_eq!(running.fetch_add(1, Ordering::Relaxed), 0, "overlap");
            s.lock().unwrap().push(clock.now().as_secs());
            clock.sleep(fetch).await;
            running.fetch_sub(1, Ordering::Relaxed);
            Some(30 * SECOND)
        }
    });
    (trigger, starts)
}

#[test]
fn an_iteration_ends_when_its_virtual_sleep_does() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, starts) = slow_refresher(&sim, 10 * SECOND);
    trigger.fire().unwrap();
    sim.advance(5 * SECOND);
    assert_eq!(trigger.stats().state, TriggerState::Running);
    assert_eq!(sim.next_deadline(), Some(10 * SECOND), "the sleep's end");
    sim.advance(90 * SECOND);
    assert_eq!(*starts.lock().unwrap(), [0, 40, 80]);
    assert_eq!(sim.now(), 95 * SECOND);
}

#[test]
fn fires_during_an_await_coalesce_into_one_follow_up() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, starts) = slow_refresher(&sim, 10 * SECOND);
    trigger.fire().unwrap();
    sim.advance(2 * SECOND);
    for _ in 0..100 {
        trigger.fire().unwrap();
    }
    sim.advance(3 * SECOND);
    for _ in 0..100 {
        trigger.fire().unwrap();
    }
    // The follow-up starts when the first iteration ends, at 10 s; its own
    // fetch ends at 20 s and asks for 30 s more: 50 s.
    sim.advance(44 * SECOND);
    assert_eq!(*starts.lock().unwrap(), [0, 10]);
    assert_eq!(sim.next_deadline(), Some(50 * SECOND));
    let stats = trigger.stats();
    assert_eq!(stats.iterations, 2);
    assert_eq!(stats.coalesced_fires, 199);
}

#[test]
fn shutdown_now_cancels_an_iteration_waiting_in_a_virtual_sleep() {
    let sim = Scheduler::builder().build_virtual();
    let trigger = Trigger::builder(&sim).name("fetch").bind_async({
        let clock = sim.clock();
        move || {
            let clock = clock.clone();
            async move {
                clock.sleep(3600 * SECOND).await;
                Some(SECOND)
            }
        }
    });
    trigger.fire().unwrap();
    sim.advance(SECOND);
    assert!(
        !sim.await_termination(std::time::Duration::ZERO),
        "the iteration is in flight"
    );
    let report = sim.shutdown_now();
    assert_eq!(report.in_flight().len(), 1);
    assert_eq!(report.in_flight()[0].outcome(), Outcome::Cancelled);
    assert!(sim.await_termination(std::time::Duration::ZERO));
    assert_eq!(trigger.fire(), Err(FireError::Shutdown));
}

#[test]
fn dropping_the_scheduler_ends_iterations_in_flight_as_cancelled() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, starts) = slow_refresher(&sim, 3600 * SECOND);
    trigger.fire().unwrap();
    sim.advance(SECOND);
    assert_eq!(trigger.stats().state, TriggerState::Running);
    let wall = Instant::now();
    drop(sim);
    // Nothing waits out a grace period for a future no one will poll.
    assert!(wall.elapsed() < 5 * SECOND, "took {:?}", wall.elapsed());
    assert_ne!(trigger.stats().state, TriggerState::Running);
    assert_eq!(*starts.lock().unwrap(), [0]);
}

#[test]
fn sync_and_async_triggers_interleave_in_deadline_order() {
    let sim = Scheduler::builder().build_virtual();
    let log: Arc<Mutex<Vec<(&str, u64)>>> = Arc::default();
    let (l, clock) = (log.clone(), sim.clock());
    let sync = Trigger::bind(&sim, move || {
        l.lock().unwrap().push(("sync", clock.now().as_secs()));
        Some(20 * SECOND)
    });
    let (l, clock) = (log.clone(), sim.clock());
    let asynchronous = Trigger::bind_async(&sim, move || {
        let (l, clock) = (l.clone(), clock.clone());
        async move {
            clock.sleep(5 * SECOND).await;
            l.lock().unwrap().push(("async", clock.now().as_secs()));
            Some(10 * SECOND)
        }
    });
    sync.fire().unwrap();
    asynchronous.fire().unwrap();
    sim.advance(50 * SECOND);
    assert_eq!(
        *log.lock().unwrap(),
        [
            ("sync", 0),
            ("async", 5),
            ("sync", 20), // at one instant: runs due, then sleeps ending
            ("async", 20),
            ("async", 35),
            ("sync", 40),
            ("async", 50),
        ]
    );
}

/// The set-up: a test on Tokio's paused clock. The virtual
/// scheduler keeps its own time, so the test needs no `tokio::time::advance`
/// and nothing waits in real time.
#[tokio::test(start_paused = true)]
async fn a_virtual_test_runs_inside_a_paused_tokio_test_too() {
    let sim = Scheduler::builder().build_virtual();
    let runs = Arc::new(AtomicU32::new(0));
    let (r, clock) = (runs.clone(), sim.clock());
    // Bound inside a runtime: still polled by `advance`, on virtual time.
    let trigger = Trigger::bind_async(&sim, move || {
        let (r, clock) = (r.clone(), clock.clone());
        async move {
            clock.sleep(SECOND).await;
            r.fetch_add(1, Ordering::Relaxed);
            Some(30 * SECOND)
        }
    });
    trigger.fire().unwrap();
    sim.advance(95 * SECOND);
    assert_eq!(runs.load(Ordering::Relaxed), 4, "ends at 1, 32, 63, 94 s");
}
