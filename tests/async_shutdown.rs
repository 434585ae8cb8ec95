//! Shutdown as futures, on a current-thread runtime: the thread that
//! awaits the shutdown is the one that polls the async iteration in
//! flight, so a shutdown that blocked it would never return.

#![cfg(feature = "tokio")]

mod common;

use circulation_trigger::{Outcome, Scheduler, Trigger};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Yields until `condition` holds, without blocking the runtime; fails
/// after the shared patience.
async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < common::PATIENCE,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// An async trigger whose iteration signals its start, then waits for
/// `open` (or for ever, if nobody opens it).
fn waiting_trigger(
    scheduler: &Scheduler,
    open: Arc<Notify>,
) -> (Trigger, Arc<AtomicUsize>, Arc<AtomicBool>) {
    let started = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let (s, f) = (Arc::clone(&started), Arc::clone(&finished));
    let trigger = Trigger::builder(scheduler)
        .name("in-flight")
        .bind_async(move || {
            let (s, f, open) = (Arc::clone(&s), Arc::clone(&f), Arc::clone(&open));
            async move {
                s.fetch_add(1, Ordering::SeqCst);
                open.notified().await;
                f.store(true, Ordering::SeqCst);
                None
            }
        });
    (trigger, started, finished)
}

#[tokio::test(flavor = "current_thread")]
async fn a_graceful_async_shutdown_lets_the_iteration_on_this_thread_finish() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let open = Arc::new(Notify::new());
    let (trigger, started, finished) = waiting_trigger(&scheduler, Arc::clone(&open));
    trigger.fire().unwrap();
    eventually("the iteration starts", || {
        started.load(Ordering::SeqCst) == 1
    })
    .await;
    // The shutdown waits for the iteration, which this same thread polls:
    // it is let through only while the shutdown is pending.
    let (report, ()) = tokio::join!(scheduler.shutdown_async(), async {
        tokio::task::yield_now().await;
        assert!(
            scheduler.shutdown_report().is_some()
                && !scheduler.await_termination(std::time::Duration::ZERO)
        );
        open.notify_one();
    });
    assert!(finished.load(Ordering::SeqCst));
    assert!(scheduler.await_termination(std::time::Duration::ZERO));
    assert_eq!(report.in_flight().len(), 1);
    assert_eq!(report.in_flight()[0].outcome(), Outcome::Completed);
}

#[tokio::test(flavor = "current_thread")]
async fn an_abrupt_async_shutdown_cancels_the_iteration_in_flight() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let never = Arc::new(Notify::new());
    let (trigger, started, finished) = waiting_trigger(&scheduler, never);
    trigger.fire_after(Duration::from_secs(3_600)).unwrap();
    let other = Trigger::builder(&scheduler).name("armed").bind(|| None);
    other.fire_after(Duration::from_secs(3_600)).unwrap();
    trigger.fire().unwrap();
    eventually("the iteration starts", || {
        started.load(Ordering::SeqCst) == 1
    })
    .await;
    let report = scheduler.shutdown_now_async().await;
    assert!(!finished.load(Ordering::SeqCst), "dropped at its `.await`");
    assert!(scheduler.await_termination(std::time::Duration::ZERO));
    assert_eq!(report.in_flight()[0].outcome(), Outcome::Cancelled);
    assert_eq!(report.discarded().len(), 1);
    assert_eq!(report.discarded()[0].trigger(), Some("armed"));
}

#[tokio::test(flavor = "current_thread")]
async fn shutdown_async_waits_for_every_thread() {
    let scheduler = Scheduler::builder().workers(2).build().unwrap();
    let trigger = Trigger::builder(&scheduler).name("hourly").bind(|| None);
    trigger.fire_after(Duration::from_secs(3_600)).unwrap();
    let probe = scheduler.await_termination_async();
    let report = scheduler.shutdown_async().await;
    assert!(scheduler.await_termination(Duration::ZERO));
    assert_eq!(report.discarded().len(), 1);
    // A waiter made before resolves too (and at once, now).
    probe.await;
    assert_eq!(
        trigger.fire(),
        Err(circulation_trigger::FireError::Shutdown)
    );
}

#[tokio::test(flavor = "current_thread")]
async fn terminated_does_not_resolve_before_a_shutdown() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    // Resolving here would be the bug; not resolving cannot be a fluke.
    let early = tokio::time::timeout(
        Duration::from_millis(50),
        scheduler.await_termination_async(),
    )
    .await;
    assert!(early.is_err(), "resolved while the scheduler runs");
    let waiters: Vec<_> = (0..3)
        .map(|_| tokio::spawn(scheduler.await_termination_async()))
        .collect();
    scheduler.shutdown();
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert!(scheduler.await_termination(std::time::Duration::ZERO));
}
