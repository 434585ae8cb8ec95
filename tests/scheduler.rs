//! Integration tests of the scheduler's lifecycle: builder errors,
//! shutdown, termination, drop (also from inside a task), panic hook.

mod common;

use circulation_trigger::{BuildError, FireError, Scheduler, Trigger};
use common::{eventually, Counter};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

#[test]
fn builder_rejects_bad_configuration_with_errors() {
    assert!(matches!(
        Scheduler::builder().workers(0).build(),
        Err(BuildError::NoWorkers)
    ));
    let error = Scheduler::builder().workers(1_025).build().unwrap_err();
    assert!(
        matches!(
            error,
            BuildError::TooManyWorkers {
                requested: 1_025,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("1025"), "{error}");
    let error = Scheduler::builder()
        .thread_name_prefix("a\0b")
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("NUL"), "{error}");
}

#[test]
fn a_tick_below_a_microsecond_is_one_microsecond() {
    for tick in [Duration::ZERO, Duration::from_nanos(10)] {
        let scheduler = Scheduler::builder().workers(1).tick(tick).build().unwrap();
        let (tx, rx) = mpsc::channel();
        let trigger = Trigger::bind(&scheduler, move || {
            tx.send(()).unwrap();
            None
        });
        trigger.fire_after(Duration::from_nanos(1)).unwrap();
        rx.recv_timeout(common::PATIENCE).unwrap();
    }
}

#[test]
fn threads_carry_the_name_prefix() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .thread_name_prefix("cfg-")
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let trigger = Trigger::bind(&scheduler, move || {
        tx.send(thread::current().name().map(str::to_owned))
            .unwrap();
        None
    });
    trigger.fire().unwrap();
    assert_eq!(
        rx.recv_timeout(common::PATIENCE).unwrap().as_deref(),
        Some("cfg-worker-0")
    );
}

#[test]
fn coarse_ticks_round_deadlines_up() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .tick(Duration::from_millis(50))
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let trigger = Trigger::bind(&scheduler, move || {
        tx.send(std::time::Instant::now()).unwrap();
        None
    });
    let called = std::time::Instant::now();
    trigger.fire_after(Duration::from_millis(1)).unwrap();
    let started = rx.recv_timeout(common::PATIENCE).unwrap();
    assert!(started - called >= Duration::from_millis(1));
}

#[test]
fn graceful_shutdown_lets_the_run_in_flight_finish_and_discards_armed_runs() {
    let scheduler = Scheduler::builder().workers(2).build().unwrap();
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let finished = Arc::new(AtomicBool::new(false));
    let f = finished.clone();
    let busy = Trigger::bind(&scheduler, move || {
        entered_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        f.store(true, Ordering::SeqCst);
        Some(Duration::ZERO)
    });
    let armed_runs = Counter::default();
    let a = armed_runs.clone();
    let armed = Trigger::bind(&scheduler, move || {
        a.bump();
        None
    });
    busy.fire().unwrap();
    entered_rx.recv().unwrap();
    armed.fire_after(Duration::from_millis(50)).unwrap();
    scheduler.shutdown();
    scheduler.shutdown(); // idempotent
    assert!(scheduler.shutdown_report().is_some());
    assert!(
        !scheduler.await_termination(Duration::from_millis(50)),
        "a run is in flight"
    );
    assert!(!scheduler.await_termination(std::time::Duration::ZERO));
    release_tx.send(()).unwrap();
    assert!(scheduler.await_termination(common::PATIENCE));
    assert!(scheduler.await_termination(std::time::Duration::ZERO));
    assert!(finished.load(Ordering::SeqCst));
    thread::sleep(Duration::from_millis(100));
    assert_eq!(armed_runs.get(), 0, "armed runs are discarded");
    assert_eq!(armed.fire(), Err(FireError::Shutdown));
}

#[test]
fn shutdown_from_inside_a_task_does_not_deadlock() {
    let scheduler = Arc::new(Scheduler::builder().workers(2).build().unwrap());
    let s = Arc::downgrade(&scheduler);
    let (tx, rx) = mpsc::channel();
    let trigger = Trigger::bind(&scheduler, move || {
        let scheduler = s.upgrade().unwrap();
        scheduler.shutdown();
        // From inside a task it waits for the other threads, not for itself.
        tx.send(scheduler.await_termination(common::PATIENCE))
            .unwrap();
        None
    });
    trigger.fire().unwrap();
    assert_eq!(rx.recv_timeout(common::PATIENCE), Ok(true));
    assert!(scheduler.await_termination(common::PATIENCE));
}

#[test]
fn dropping_the_scheduler_from_inside_a_task_does_not_deadlock() {
    let slot: Arc<Mutex<Option<Scheduler>>> = Arc::default();
    let scheduler = Scheduler::builder().workers(2).build().unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    let s = slot.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        let owned = s.lock().unwrap().take();
        drop(owned); // joins the other threads, skips this one
        done_tx.send(()).unwrap();
        None
    });
    *slot.lock().unwrap() = Some(scheduler);
    trigger.fire().unwrap();
    done_rx.recv_timeout(common::PATIENCE).unwrap();
    assert_eq!(trigger.fire(), Err(FireError::Shutdown));
}

#[test]
fn dropping_the_scheduler_joins_its_threads() {
    let scheduler = Scheduler::builder().workers(3).build().unwrap();
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        r.bump();
        thread::sleep(Duration::from_millis(20));
        Some(Duration::ZERO)
    });
    trigger.fire().unwrap();
    eventually("it runs", || runs.get() >= 1);
    drop(scheduler); // waits for the run in flight, then joins
    let after = runs.get();
    thread::sleep(Duration::from_millis(60));
    assert_eq!(
        runs.get(),
        after,
        "nothing runs after the scheduler is dropped"
    );
    assert_eq!(trigger.fire(), Err(FireError::Shutdown));
}

#[test]
fn a_panicking_hook_does_not_kill_the_worker() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .panic_hook(|_| panic!("the hook itself panics"))
        .build()
        .unwrap();
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        if r.bump() == 1 {
            std::panic::panic_any(42u32);
        }
        None
    });
    trigger.fire().unwrap();
    eventually("counted", || scheduler.stats().panics == 1);
    eventually("idle again", || {
        !matches!(
            trigger.stats().state,
            circulation_trigger::report::TriggerState::Running
                | circulation_trigger::report::TriggerState::RunningWithRerun
        )
    });
    trigger.fire().unwrap();
    eventually("the worker still serves", || runs.get() == 2);
}

#[test]
fn many_triggers_share_one_scheduler() {
    let scheduler = Scheduler::builder().workers(2).build().unwrap();
    let runs = Counter::default();
    let triggers: Vec<_> = (0..2_000)
        .map(|i| {
            let r = runs.clone();
            let t = Trigger::bind(&scheduler, move || {
                r.bump();
                None
            });
            t.fire_after(Duration::from_micros(100 + (i % 50) * 100))
                .unwrap();
            t
        })
        .collect();
    eventually("every trigger ran once", || runs.get() == triggers.len());
    thread::sleep(Duration::from_millis(50));
    assert_eq!(runs.get(), triggers.len());
}
