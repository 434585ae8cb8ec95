//! `fire_and_wait`: the outcome of the iteration serving the fire; shared
//! by concurrent waiters; never a hang (timeout, suspend, shutdown, own
//! task).

mod common;

use circulation_trigger::{report::TriggerState, Outcome, Scheduler, Trigger, WaitError};
use common::{eventually, Counter, Gate, PATIENCE};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

#[test]
fn returns_the_outcome_of_the_run_serving_the_fire() {
    let scheduler = Scheduler::new();
    let seen = Arc::new(AtomicU64::new(0));
    let written = Arc::new(AtomicU64::new(0));
    let (s, w) = (seen.clone(), written.clone());
    let trigger = Trigger::bind(&scheduler, move || {
        s.store(w.load(SeqCst), SeqCst);
        None
    });
    for round in 1..=20 {
        written.store(round, SeqCst);
        assert_eq!(trigger.fire_and_wait(PATIENCE), Ok(Outcome::Completed));
        assert_eq!(
            seen.load(SeqCst),
            round,
            "the run saw what preceded the call"
        );
    }
}

#[test]
fn a_panic_is_the_outcome() {
    common::quiet_panics();
    let scheduler = Scheduler::new();
    let trigger = Trigger::bind(&scheduler, || panic!("boom: refresh failed"));
    assert_eq!(trigger.fire_and_wait(PATIENCE), Ok(Outcome::Panicked));
    assert_eq!(trigger.fire_and_wait(PATIENCE), Ok(Outcome::Panicked));
}

#[test]
fn the_statistics_are_updated_when_the_wait_returns() {
    // The run's end is recorded before its waiters are told: a caller that
    // reads the statistics right after the wait sees its own run in them.
    // (Racy when broken, so many rounds; each round is a few µs.)
    common::quiet_panics();
    let scheduler = Scheduler::new();
    let trigger = Trigger::bind(&scheduler, || panic!("boom: refresh failed"));
    for round in 1..=5_000 {
        assert_eq!(trigger.fire_and_wait(PATIENCE), Ok(Outcome::Panicked));
        let stats = trigger.stats();
        assert_eq!((stats.iterations, stats.panics), (round, round));
        assert!(stats.last_end.is_some());
    }
}

#[test]
fn a_run_in_flight_at_the_call_does_not_count() {
    let scheduler = Scheduler::new();
    let (gate, runs) = (Gate::default(), Counter::default());
    let (g, r) = (gate.clone(), runs.clone());
    let trigger = Trigger::bind(&scheduler, move || {
        if r.bump() == 1 {
            g.wait(); // the first run blocks until the gate opens
        }
        None
    });
    trigger.fire().unwrap();
    eventually("the first run is in flight", || runs.get() == 1);
    let waiter = {
        let trigger = trigger.clone();
        thread::spawn(move || trigger.fire_and_wait(PATIENCE))
    };
    thread::sleep(Duration::from_millis(20));
    assert!(
        !waiter.is_finished(),
        "returned with the run already in flight"
    );
    gate.open();
    assert_eq!(waiter.join().unwrap(), Ok(Outcome::Completed));
    assert_eq!(runs.get(), 2, "the waiter was served by the follow-up run");
}

#[test]
fn concurrent_waiters_share_one_run() {
    let scheduler = Scheduler::new();
    let (gate, runs) = (Gate::default(), Counter::default());
    let (g, r) = (gate.clone(), runs.clone());
    let trigger = Trigger::bind(&scheduler, move || {
        if r.bump() == 1 {
            g.wait();
        }
        None
    });
    trigger.fire().unwrap();
    eventually("the first run is in flight", || runs.get() == 1);
    let waiters: Vec<_> = (0..8)
        .map(|_| {
            let trigger = trigger.clone();
            thread::spawn(move || trigger.fire_and_wait(PATIENCE))
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    gate.open();
    for waiter in waiters {
        assert_eq!(waiter.join().unwrap(), Ok(Outcome::Completed));
    }
    assert_eq!(runs.get(), 2, "eight waiters, one follow-up run");
}

#[test]
fn never_a_hang() {
    let scheduler = Scheduler::new();
    let gate = Gate::default();
    let g = gate.clone();
    let blocked = Trigger::bind(&scheduler, move || {
        g.wait();
        None
    });
    // Timeout: the run is held up; the fire stands.
    blocked.fire().unwrap();
    assert_eq!(
        blocked.fire_and_wait(Duration::from_millis(30)),
        Err(WaitError::Timeout)
    );
    // Suspended: the follow-up the waiter asked for is superseded.
    let waiter = {
        let blocked = blocked.clone();
        thread::spawn(move || blocked.fire_and_wait(PATIENCE))
    };
    thread::sleep(Duration::from_millis(20));
    blocked.suspend();
    assert_eq!(waiter.join().unwrap(), Err(WaitError::Suspended));
    gate.open();
    // Own task: an error, not a deadlock.
    let me: Arc<std::sync::OnceLock<circulation_trigger::WeakTrigger>> = Arc::default();
    let (cell, result) = (me.clone(), Arc::new(Mutex::new(None)));
    let r = result.clone();
    let own = Trigger::bind(&scheduler, move || {
        let me = cell.get().and_then(|w| w.upgrade()).expect("alive");
        *r.lock().unwrap() = Some(me.fire_and_wait(PATIENCE));
        None
    });
    me.set(own.downgrade()).unwrap();
    own.fire().unwrap();
    eventually("the task asked", || result.lock().unwrap().is_some());
    assert_eq!(result.lock().unwrap().unwrap(), Err(WaitError::OwnTask));
    // Shutdown: refused.
    scheduler.shutdown();
    assert_eq!(own.fire_and_wait(PATIENCE), Err(WaitError::Shutdown));
}

#[test]
fn shutdown_while_waiting_for_a_run_that_cannot_start() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .max_workers(1)
        .build()
        .unwrap();
    let gate = Gate::default();
    let g = gate.clone();
    let hog = Trigger::bind(&scheduler, move || {
        g.wait();
        None
    });
    hog.fire().unwrap(); // occupies the only worker
    let waiting = Trigger::bind(&scheduler, || None);
    let waiter = {
        let waiting = waiting.clone();
        thread::spawn(move || waiting.fire_and_wait(PATIENCE))
    };
    thread::sleep(Duration::from_millis(30));
    scheduler.shutdown();
    assert_eq!(waiter.join().unwrap(), Err(WaitError::Shutdown));
    gate.open();
}

#[test]
fn on_virtual_time_another_thread_advances() {
    let sim = Arc::new(Scheduler::builder().build_virtual());
    let trigger = Trigger::bind(&*sim, || None);
    let waiter = {
        let trigger = trigger.clone();
        thread::spawn(move || trigger.fire_and_wait(PATIENCE))
    };
    eventually("the waiter fired", || trigger.stats().fires == 1);
    sim.advance(Duration::ZERO);
    assert_eq!(waiter.join().unwrap(), Ok(Outcome::Completed));
    assert_eq!(
        trigger.fire_and_wait(Duration::from_millis(10)),
        Err(WaitError::Timeout),
        "nobody advances time"
    );
}

#[test]
fn a_waiter_reads_its_outcome_in_the_shutdown_report() {
    // A run in flight at shutdown completes: its waiter, once back, finds
    // the report saying so (not `StillRunning`). Racy when broken.
    for _ in 0..300 {
        let scheduler = Arc::new(Scheduler::builder().workers(1).build().unwrap());
        let entered = Gate::default();
        let release = Gate::default();
        let (e, r) = (entered.clone(), release.clone());
        let trigger = Trigger::bind(&*scheduler, move || {
            e.open();
            r.wait();
            None
        });
        let (t, s) = (trigger.clone(), scheduler.clone());
        let waiter = thread::spawn(move || (t.fire_and_wait(PATIENCE), s.shutdown_report()));
        entered.wait();
        scheduler.shutdown();
        release.open();
        let (outcome, report) = waiter.join().unwrap();
        assert_eq!(outcome, Ok(Outcome::Completed));
        assert_eq!(report.unwrap().in_flight()[0].outcome(), Outcome::Completed);
    }
}

#[test]
fn a_waiter_told_suspended_reads_the_trigger_suspended() {
    // Racy when broken: `suspend` told the waiters before installing its
    // idle request.
    for _ in 0..300 {
        let sim = Arc::new(Scheduler::builder().build_virtual());
        let trigger = Trigger::bind(&*sim, || None);
        let t = trigger.clone();
        let waiter = thread::spawn(move || {
            let waited = t.fire_and_wait(PATIENCE);
            (waited, t.stats().state)
        });
        // The fire is in (nothing runs it: virtual time stands still), and
        // the waiter about to wait or waiting.
        let deadline = std::time::Instant::now() + PATIENCE;
        while trigger.stats().fires == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the waiter never fired"
            );
            std::hint::spin_loop();
        }
        trigger.suspend();
        let (waited, state) = waiter.join().unwrap();
        assert_eq!(waited, Err(WaitError::Suspended));
        assert_eq!(state, TriggerState::Suspended);
    }
}
