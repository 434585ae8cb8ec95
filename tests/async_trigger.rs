//! Async triggers on Tokio's multi-thread runtime: every guarantee of the
//! sync API, for tasks whose iterations are futures.

#![cfg(feature = "tokio")]

mod common;

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::{
    is_cancelled,
    policy::{PanicPolicy, RetryBackoff},
    report::TriggerState,
    scheduler_time, Outcome, Scheduler, Trigger, WaitError,
};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

const PATIENCE: Duration = common::PATIENCE;

/// Polls `condition` every millisecond until it holds, without blocking
/// the runtime; fails after `PATIENCE`.
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !condition() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A gate an iteration waits at until the test opens it, and that tells
/// the test when an iteration has reached it.
#[derive(Clone, Default)]
struct AsyncGate {
    open: Arc<Notify>,
    arrived: Arc<AtomicUsize>,
}

impl AsyncGate {
    async fn pass(&self) {
        self.arrived.fetch_add(1, Ordering::SeqCst);
        self.open.notified().await;
    }

    fn arrived(&self) -> usize {
        self.arrived.load(Ordering::SeqCst)
    }

    fn open_once(&self) {
        self.open.notify_one();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_task_runs_and_fire_and_wait_async_sees_it_done() {
    let scheduler = Scheduler::new();
    let runs = common::Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind_async(&scheduler, move || {
        let r = r.clone();
        async move {
            tokio::task::yield_now().await;
            r.bump();
            None
        }
    });
    let outcome = trigger.fire_and_wait_async(PATIENCE).await.unwrap();
    assert_eq!(outcome, Outcome::Completed);
    assert_eq!(runs.get(), 1);
    assert_eq!(trigger.stats().iterations, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fires_during_an_await_coalesce_into_exactly_one_follow_up() {
    let scheduler = Scheduler::new();
    let gate = AsyncGate::default();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicBool::new(false));
    let runs = common::Counter::default();
    let (g, i, o, r) = (
        gate.clone(),
        in_flight.clone(),
        overlaps.clone(),
        runs.clone(),
    );
    let trigger = Trigger::bind_async(&scheduler, move || {
        let (g, i, o, r) = (g.clone(), i.clone(), o.clone(), r.clone());
        async move {
            if i.fetch_add(1, Ordering::SeqCst) != 0 {
                o.store(true, Ordering::SeqCst);
            }
            r.bump();
            g.pass().await;
            i.fetch_sub(1, Ordering::SeqCst);
            None
        }
    });
    trigger.fire().unwrap();
    eventually("the first iteration awaits", || gate.arrived() == 1).await;
    // A storm from other tasks and threads while it awaits.
    let mut firers = Vec::new();
    for _ in 0..4 {
        let t = trigger.clone();
        firers.push(tokio::spawn(async move {
            for _ in 0..250 {
                t.fire().unwrap();
                tokio::task::yield_now().await;
            }
        }));
    }
    let t = trigger.clone();
    let thread = std::thread::spawn(move || (0..1_000).for_each(|_| t.fire().unwrap()));
    for firer in firers {
        firer.await.unwrap();
    }
    thread.join().unwrap();
    assert_eq!(runs.get(), 1, "no second iteration while one is in flight");
    gate.open_once();
    eventually("the follow-up awaits", || gate.arrived() == 2).await;
    gate.open_once();
    eventually("the follow-up ended", || {
        trigger.stats().iterations == 2 && in_flight.load(Ordering::SeqCst) == 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(runs.get(), 2, "exactly one follow-up for 2,000 fires");
    assert!(!overlaps.load(Ordering::SeqCst));
    let stats = trigger.stats();
    assert_eq!(stats.fires, 2_001);
    assert_eq!(stats.coalesced_fires, 1_999);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_periodic_async_task_never_overlaps_under_a_storm() {
    let scheduler = Scheduler::new();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicBool::new(false));
    let runs = common::Counter::default();
    let (i, o, r) = (in_flight.clone(), overlaps.clone(), runs.clone());
    let trigger = Trigger::bind_async(&scheduler, move || {
        let (i, o, r) = (i.clone(), o.clone(), r.clone());
        async move {
            if i.fetch_add(1, Ordering::SeqCst) != 0 {
                o.store(true, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
            r.bump();
            i.fetch_sub(1, Ordering::SeqCst);
            Some(Duration::from_millis(1))
        }
    });
    trigger.fire().unwrap();
    let storm = common::Storm::start(&trigger, 2, |t| {
        let _ = t.fire();
    });
    eventually("many runs", || runs.get() >= 200).await;
    let fires = storm.stop();
    assert!(
        !overlaps.load(Ordering::SeqCst),
        "two iterations in flight at once"
    );
    assert!((runs.get() as u64) < fires, "fires coalesced");
    trigger.suspend();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_during_an_await_lets_it_finish_and_ignores_its_delay() {
    let scheduler = Scheduler::new();
    let gate = AsyncGate::default();
    let runs = common::Counter::default();
    let (g, r) = (gate.clone(), runs.clone());
    let trigger = Trigger::bind_async(&scheduler, move || {
        let (g, r) = (g.clone(), r.clone());
        async move {
            g.pass().await;
            r.bump();
            Some(Duration::from_millis(1)) // ignored: suspended meanwhile
        }
    });
    trigger.fire().unwrap();
    eventually("it awaits", || gate.arrived() == 1).await;
    trigger.suspend();
    gate.open_once();
    eventually("it finished", || runs.get() == 1).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(runs.get(), 1, "the returned delay was ignored");
    assert_eq!(gate.arrived(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_inside_the_future_is_caught_reported_and_stops_it() {
    common::quiet_panics();
    let scheduler = Scheduler::new();
    let calls = common::Counter::default();
    let c = calls.clone();
    let trigger = Trigger::builder(&scheduler)
        .name("panicky")
        .bind_async(move || {
            let c = c.clone();
            async move {
                tokio::task::yield_now().await;
                if c.bump() == 1 {
                    panic!("boom in a future");
                }
                Some(Duration::from_millis(1))
            }
        });
    let outcome = trigger.fire_and_wait_async(PATIENCE).await.unwrap();
    assert_eq!(outcome, Outcome::Panicked);
    assert_eq!(scheduler.stats().panics, 1);
    assert_eq!(trigger.stats().panics, 1);
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(calls.get(), 1, "a panic stops circulating (G8)");
    // Still usable.
    let outcome = trigger.fire_and_wait_async(PATIENCE).await.unwrap();
    assert_eq!(outcome, Outcome::Completed);
    trigger.suspend();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_policy_retries_an_async_task() {
    common::quiet_panics();
    let scheduler = Scheduler::new();
    let calls = common::Counter::default();
    let c = calls.clone();
    let trigger = Trigger::builder(&scheduler)
        .policies(
            TriggerPolicies::new().on_panic(PanicPolicy::Retry(RetryBackoff::new(
                Duration::from_millis(2),
                Duration::from_millis(20),
            ))),
        )
        .bind_async(move || {
            let c = c.clone();
            async move {
                if c.bump() <= 3 {
                    panic!("boom {}", c.get());
                }
                None
            }
        });
    trigger.fire().unwrap();
    eventually("three retries, then a success", || calls.get() == 4).await;
    eventually("counted", || trigger.stats().iterations == 4).await;
    assert_eq!(trigger.stats().panics, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_and_scheduler_time_answer_inside_the_future() {
    let scheduler = Scheduler::new();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let s = seen.clone();
    let trigger = Trigger::bind_async(&scheduler, move || {
        let s = s.clone();
        async move {
            tokio::task::yield_now().await;
            *s.lock().unwrap() = Some((scheduler_time().is_some(), is_cancelled()));
            None
        }
    });
    trigger.fire_and_wait_async(PATIENCE).await.unwrap();
    assert_eq!(*seen.lock().unwrap(), Some((true, false)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_and_wait_from_inside_its_own_future_is_an_error() {
    let scheduler = Scheduler::new();
    let me = Arc::new(std::sync::OnceLock::<Trigger>::new());
    let result = Arc::new(std::sync::Mutex::new(None));
    let (m, r) = (me.clone(), result.clone());
    let trigger = Trigger::bind_async(&scheduler, move || {
        let (m, r) = (m.clone(), r.clone());
        async move {
            let me = m.get().unwrap().clone();
            let sync = me.fire_and_wait(Duration::from_secs(1));
            let awaited = me.fire_and_wait_async(Duration::from_secs(1)).await;
            *r.lock().unwrap() = Some((sync, awaited));
            None
        }
    });
    me.set(trigger.clone()).unwrap();
    trigger.fire_and_wait_async(PATIENCE).await.unwrap();
    assert_eq!(
        *result.lock().unwrap(),
        Some((Err(WaitError::OwnTask), Err(WaitError::OwnTask)))
    );
    trigger.suspend();
    drop(me);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fire_and_wait_async_errors_never_hang() {
    let scheduler = Scheduler::new();
    let gate = AsyncGate::default();
    let g = gate.clone();
    let trigger = Trigger::bind_async(&scheduler, move || {
        let g = g.clone();
        async move {
            g.pass().await;
            None
        }
    });
    // Timeout: the run serving the fire waits at the gate.
    let timed_out = trigger.fire_and_wait_async(Duration::from_millis(20)).await;
    assert_eq!(timed_out, Err(WaitError::Timeout));
    // Superseded by a suspend before any run served it: the one in flight
    // is older, and its follow-up is cancelled by the suspend.
    let waiting = tokio::spawn(trigger.fire_and_wait_async(PATIENCE));
    tokio::time::sleep(Duration::from_millis(10)).await;
    trigger.suspend();
    assert_eq!(waiting.await.unwrap(), Err(WaitError::Suspended));
    // Shutdown before a run serves it: the waiter is woken, not left.
    let waiting = tokio::spawn(trigger.fire_and_wait_async(Duration::MAX));
    tokio::time::sleep(Duration::from_millis(10)).await;
    scheduler.shutdown();
    let result = tokio::time::timeout(PATIENCE, waiting).await;
    assert_eq!(result.unwrap().unwrap(), Err(WaitError::Shutdown));
    gate.open_once();
    // Refused after shutdown.
    assert_eq!(
        trigger.fire_and_wait_async(PATIENCE).await,
        Err(WaitError::Shutdown)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_async_waiters_share_one_run() {
    let scheduler = Scheduler::new();
    let gate = AsyncGate::default();
    let runs = common::Counter::default();
    let (g, r) = (gate.clone(), runs.clone());
    let trigger = Trigger::bind_async(&scheduler, move || {
        let (g, r) = (g.clone(), r.clone());
        async move {
            r.bump();
            g.pass().await;
            None
        }
    });
    trigger.fire().unwrap();
    eventually("in flight", || gate.arrived() == 1).await;
    let waiters: Vec<_> = (0..8)
        .map(|_| tokio::spawn(trigger.fire_and_wait_async(PATIENCE)))
        .collect();
    gate.open_once(); // the run in flight ends: it serves none of them
    eventually("the follow-up", || gate.arrived() == 2).await;
    gate.open_once();
    for waiter in waiters {
        assert_eq!(waiter.await.unwrap(), Ok(Outcome::Completed));
    }
    assert_eq!(runs.get(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_now_drops_in_flight_futures_and_lists_them_cancelled() {
    let scheduler = Scheduler::builder()
        .shutdown_grace(PATIENCE)
        .build()
        .unwrap();
    let dropped = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let (d, s) = (dropped.clone(), started.clone());
    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let trigger = Trigger::builder(&scheduler)
        .name("hangs")
        .bind_async(move || {
            let (d, s) = (d.clone(), s.clone());
            async move {
                let _guard = SetOnDrop(d);
                s.store(true, Ordering::SeqCst);
                std::future::pending::<()>().await;
                None
            }
        });
    trigger.fire().unwrap();
    eventually("in flight", || started.load(Ordering::SeqCst)).await;
    let report = tokio::task::spawn_blocking(move || scheduler.shutdown_now())
        .await
        .unwrap();
    assert!(dropped.load(Ordering::SeqCst), "the future was dropped");
    assert_eq!(report.in_flight().len(), 1);
    assert_eq!(report.in_flight()[0].trigger(), Some("hangs"));
    assert_eq!(report.in_flight()[0].outcome(), Outcome::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_waits_for_an_in_flight_future() {
    let scheduler = Scheduler::new();
    let gate = AsyncGate::default();
    let g = gate.clone();
    let trigger = Trigger::builder(&scheduler)
        .name("slow")
        .bind_async(move || {
            let g = g.clone();
            async move {
                g.pass().await;
                Some(Duration::from_millis(1))
            }
        });
    trigger.fire().unwrap();
    eventually("in flight", || gate.arrived() == 1).await;
    scheduler.shutdown();
    assert!(!scheduler.await_termination(Duration::from_millis(50)));
    assert!(
        !scheduler.await_termination(std::time::Duration::ZERO),
        "the future keeps it alive"
    );
    gate.open_once();
    let done = tokio::task::spawn_blocking(move || {
        let terminated = scheduler.await_termination(PATIENCE);
        (terminated, scheduler.shutdown_report().unwrap())
    })
    .await
    .unwrap();
    assert!(done.0);
    assert_eq!(done.1.in_flight()[0].outcome(), Outcome::Completed);
    assert_eq!(gate.arrived(), 1, "its re-arm was discarded");
}

#[test]
fn a_runtime_shut_down_mid_iteration_ends_it_cancelled() {
    let scheduler = Scheduler::new();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let s = started.clone();
    let trigger = Trigger::builder(&scheduler)
        .runtime(runtime.handle().clone())
        .bind_async(move || {
            let s = s.clone();
            async move {
                s.store(true, Ordering::SeqCst);
                std::future::pending::<()>().await;
                None
            }
        });
    trigger.fire().unwrap();
    common::eventually("in flight", || started.load(Ordering::SeqCst));
    drop(runtime);
    common::eventually("ended", || {
        !matches!(
            trigger.stats().state,
            TriggerState::Running | TriggerState::RunningWithRerun
        )
    });
    // Fired again with the runtime gone: the iteration cannot run and
    // ends cancelled at once; nothing hangs.
    assert_eq!(trigger.fire_and_wait(PATIENCE), Ok(Outcome::Cancelled));
}

#[test]
fn a_handle_names_the_runtime_outside_one_and_sync_waiters_work() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let scheduler = Scheduler::new();
    let trigger = Trigger::builder(&scheduler)
        .runtime(runtime.handle().clone())
        .bind_async(|| async {
            tokio::time::sleep(Duration::from_millis(2)).await;
            None
        });
    assert_eq!(trigger.fire_and_wait(PATIENCE), Ok(Outcome::Completed));
}

#[test]
#[should_panic(expected = "context of a Tokio runtime")]
fn bind_async_outside_a_runtime_panics_like_tokio_spawn() {
    let scheduler = Scheduler::new();
    let _trigger = Trigger::bind_async(&scheduler, || async { None });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_frees_the_task() {
    let scheduler = Scheduler::new();
    let token = Arc::new(());
    let t = token.clone();
    let trigger = Trigger::bind_async(&scheduler, move || {
        let t = t.clone();
        async move {
            tokio::task::yield_now().await;
            drop(t);
            Some(Duration::from_millis(1))
        }
    });
    trigger.fire_and_wait_async(PATIENCE).await.unwrap();
    drop(trigger);
    eventually("the task was freed", || Arc::strong_count(&token) == 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_version_wrap_is_unaffected() {
    let scheduler = Scheduler::new();
    let runs = common::Counter::default();
    let r = runs.clone();
    let trigger = Trigger::builder(&scheduler)
        .start_version((1 << 30) - 3)
        .bind_async(move || {
            let r = r.clone();
            async move {
                r.bump();
                None
            }
        });
    for round in 1..=8 {
        assert_eq!(
            trigger.fire_and_wait_async(PATIENCE).await,
            Ok(Outcome::Completed)
        );
        assert_eq!(runs.get(), round);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_apply_to_async_tasks() {
    let scheduler = Scheduler::new();
    let cooldown = Duration::from_millis(30);
    // Each iteration logs its start as the scheduler recorded it.
    let me = Arc::new(std::sync::OnceLock::<circulation_trigger::WeakTrigger>::new());
    let starts = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (m, s) = (me.clone(), starts.clone());
    let trigger = Trigger::builder(&scheduler)
        .policies(TriggerPolicies::new().min_interval(cooldown))
        .bind_async(move || {
            let (m, s) = (m.clone(), s.clone());
            async move {
                let me = m.get().and_then(|weak| weak.upgrade()).unwrap();
                s.lock().unwrap().push(me.stats().last_start.unwrap());
                None
            }
        });
    me.set(trigger.downgrade()).unwrap();
    for _ in 0..3 {
        trigger.fire_and_wait_async(PATIENCE).await.unwrap();
    }
    let starts = starts.lock().unwrap();
    assert_eq!(starts.len(), 3);
    for pair in starts.windows(2) {
        assert!(pair[1] - pair[0] >= cooldown, "started within the cooldown");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_timeouts_never_panic_or_hang() {
    let scheduler = Scheduler::new();
    let trigger = Trigger::bind_async(&scheduler, || async {
        tokio::time::sleep(Duration::from_millis(2)).await;
        None
    });
    // Zero: the deadline has passed before the run ends; the fire stands.
    let zero = trigger.fire_and_wait_async(Duration::ZERO).await;
    assert!(matches!(
        zero,
        Err(WaitError::Timeout) | Ok(Outcome::Completed)
    ));
    // Past the clock's range: no timer at all, waits for the run.
    for timeout in [Duration::MAX, Duration::from_secs(u64::MAX)] {
        let outcome = trigger.fire_and_wait_async(timeout).await;
        assert_eq!(outcome, Ok(Outcome::Completed));
    }
    // The sync form from a blocking thread, same values.
    let t = trigger.clone();
    let sync = tokio::task::spawn_blocking(move || t.fire_and_wait(Duration::MAX))
        .await
        .unwrap();
    assert_eq!(sync, Ok(Outcome::Completed));
}

#[test]
fn shutdown_now_waits_for_a_task_still_building_its_future() {
    // Fired from outside, an async trigger's dispatch runs on its
    // executor, which calls the task for its future: that call is part of
    // the iteration, and shutdown waits for it.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let scheduler = Scheduler::new();
    let (tx, rx) = std::sync::mpsc::channel();
    let trigger = Trigger::builder(&scheduler)
        .runtime(runtime.handle().clone())
        .bind_async(move || {
            tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(300)); // the task's sync part
            async { None }
        });
    trigger.fire().unwrap();
    rx.recv().unwrap();
    let report = scheduler.shutdown_now();
    assert_eq!(report.in_flight().len(), 1);
    assert_ne!(report.in_flight()[0].outcome(), Outcome::StillRunning);
}

/// Panics when dropped before it is forgotten.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("a guard dropped before completion");
        }
    }
}

#[test]
fn a_future_that_panics_as_it_is_dropped_hands_the_trigger_on() {
    common::quiet_panics();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let scheduler = Scheduler::builder()
        .shutdown_grace(Duration::from_secs(10))
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let trigger = Trigger::builder(&scheduler)
        .runtime(runtime.handle().clone())
        .bind_async(move || {
            let tx = tx.clone();
            async move {
                let guard = PanicOnDrop;
                tx.send(()).unwrap();
                tokio::time::sleep(Duration::from_secs(60)).await;
                std::mem::forget(guard);
                None
            }
        });
    trigger.fire().unwrap();
    rx.recv().unwrap();
    let started = std::time::Instant::now();
    let report = scheduler.shutdown_now();
    // Not the whole grace period: the iteration ended, with a panic.
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(report.in_flight()[0].outcome(), Outcome::Panicked);
    assert_eq!(scheduler.stats().panics, 1);
    assert!(!matches!(
        trigger.stats().state,
        circulation_trigger::report::TriggerState::Running
            | circulation_trigger::report::TriggerState::RunningWithRerun
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_async_iteration_is_reported_stuck_after_a_quiet_spell() {
    // An async iteration occupies no worker, so the pool looks idle while
    // it hangs (the monitor parks after two quiet looks when it has
    // nothing to watch); the monitor must keep watching it all the
    // same, however long `stuck_after` is.
    let (tx, rx) = std::sync::mpsc::channel();
    let scheduler = Scheduler::builder()
        .stuck_hook(move |stuck| {
            let _ = tx.send(stuck.running_for());
        })
        .build()
        .unwrap();
    let gate = AsyncGate::default();
    let g = gate.clone();
    let trigger = Trigger::builder(&scheduler)
        .policies(TriggerPolicies::new().stuck_after(Duration::from_secs(3)))
        .bind_async(move || {
            let g = g.clone();
            async move {
                g.pass().await;
                None
            }
        });
    trigger.fire().unwrap();
    let running_for = tokio::task::spawn_blocking(move || rx.recv_timeout(PATIENCE))
        .await
        .unwrap()
        .expect("the hung iteration is reported");
    assert!(running_for >= Duration::from_secs(3));
    assert!(trigger.stats().stuck);
    gate.open_once();
    eventually("the iteration ended", || !trigger.stats().stuck).await;
}

/// An async trigger with `stuck_after` bound (and fired) after the monitor
/// parked: its `fire` goes straight to the Tokio runtime and never wakes a
/// worker, so binding it must wake the monitor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_trigger_bound_after_the_monitor_parked_is_reported_stuck() {
    let (tx, rx) = std::sync::mpsc::channel();
    let scheduler = Scheduler::builder()
        // Tick 1 ms: the monitor parks after two quiet looks (~2 ms).
        .stall_threshold(Duration::from_millis(2))
        .stuck_hook(move |stuck| {
            let _ = tx.send(stuck.running_for());
        })
        .build()
        .unwrap();
    // Nothing runs, nothing is watched: the monitor parks.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let trigger = Trigger::builder(&scheduler)
        .policies(TriggerPolicies::new().stuck_after(Duration::from_millis(100)))
        .bind_async(|| async {
            std::future::pending::<()>().await; // hangs
            None
        });
    trigger.fire().unwrap();
    let reported = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(
        reported.is_ok(),
        "a hung async iteration (stuck_after 100 ms) went unreported for 5 s: {:?}",
        trigger.stats()
    );
    drop(trigger);
    scheduler.shutdown_now();
}

/// A run's recorded start is read when it starts: not, say, taken from
/// the worker's reading at its previous run's end, which user code (here
/// an async waiter's `Waker::wake`, called as that run ends) can make
/// older than the next run's fire.
#[test]
fn a_run_is_never_recorded_as_starting_before_its_fire() {
    use common::{Counter, Gate};
    use std::future::Future;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    use std::task::{Context, Wake, Waker};

    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let b = Trigger::bind(&scheduler, || None);
    let (gate, in_task) = (Gate::default(), Counter::default());
    let (g, t) = (gate.clone(), in_task.clone());
    let a = Trigger::bind(&scheduler, move || {
        t.bump(); // after `Waiters::started` woke the waiter
        g.wait();
        Some(Duration::from_secs(3_600))
    });
    struct SlowWaker {
        armed: AtomicBool,
        once: AtomicBool,
        b: Trigger,
        fired_at: Mutex<Option<Duration>>,
    }
    impl Wake for SlowWaker {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            if self.armed.load(Ordering::SeqCst) && !self.once.swap(true, Ordering::SeqCst) {
                // On the worker, after A's end was read and before its
                // re-arm is delivered.
                std::thread::sleep(Duration::from_millis(50));
                *self.fired_at.lock().unwrap() = circulation_trigger::scheduler_time();
                self.b.fire().unwrap();
            }
        }
    }
    let slow = Arc::new(SlowWaker {
        armed: AtomicBool::new(false),
        once: AtomicBool::new(false),
        b: b.clone(),
        fired_at: Mutex::new(None),
    });
    let waker = Waker::from(slow.clone());
    let mut wait = Box::pin(a.fire_and_wait_async(Duration::MAX));
    let mut cx = Context::from_waker(&waker);
    assert!(wait.as_mut().poll(&mut cx).is_pending());
    common::eventually("A runs its task", || in_task.get() == 1);
    // Registered again while A runs: woken by `Waiters::finished`, after
    // A's end was read.
    slow.armed.store(true, Ordering::SeqCst);
    assert!(wait.as_mut().poll(&mut cx).is_pending());
    gate.open();
    common::eventually("B ran", || b.stats().iterations == 1);
    let (a_end, b_start) = (a.stats().last_end.unwrap(), b.stats().last_start.unwrap());
    let fired_at = slow
        .fired_at
        .lock()
        .unwrap()
        .expect("fired from the worker");
    assert!(
        b_start >= fired_at,
        "B recorded as starting at {b_start:?}, before it was fired at {fired_at:?} (A ended at {a_end:?})"
    );
}

/// G9: an async waiter dropped unfinished (timed out, a `select!` branch
/// not taken) leaves no waker behind, even while the run it waits for
/// hangs: memory stays O(triggers), not O(waits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_async_waiters_leave_no_waker_behind() {
    use common::{Counter, Gate};
    use std::future::Future;
    use std::task::{Context, Poll, Wake, Waker};

    struct NoopWake;
    impl Wake for NoopWake {
        fn wake(self: Arc<Self>) {}
    }

    let scheduler = Scheduler::new();
    let (gate, started) = (Gate::default(), Counter::default());
    let (g, s) = (gate.clone(), started.clone());
    let trigger = Trigger::bind(&scheduler, move || {
        s.bump();
        g.wait(); // a hung refresh
        None
    });
    trigger.fire().unwrap();
    common::eventually("running", || started.get() == 1);
    let wakers: Vec<Arc<NoopWake>> = (0..1_000).map(|_| Arc::new(NoopWake)).collect();
    for w in &wakers {
        let waker = Waker::from(w.clone());
        let mut cx = Context::from_waker(&waker);
        let mut wait = Box::pin(trigger.fire_and_wait_async(Duration::from_secs(60)));
        assert!(matches!(wait.as_mut().poll(&mut cx), Poll::Pending));
        drop(wait); // the caller gives up
    }
    let retained = wakers.iter().filter(|w| Arc::strong_count(w) > 1).count();
    gate.open();
    assert_eq!(
        retained, 0,
        "wakers of dropped waiters still held by the trigger"
    );
}

/// `scheduler_time()` (and `is_cancelled()`) answer in an async task's
/// closure also when a `fire` calls it on the runtime, not a worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_time_answers_in_an_async_task_closure_on_the_fire_path() {
    let scheduler = Scheduler::new();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let trigger = Trigger::bind_async(&scheduler, move || {
        s.lock().unwrap().push(scheduler_time().is_some());
        async { None }
    });
    trigger
        .fire_and_wait_async(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [true]);
}
