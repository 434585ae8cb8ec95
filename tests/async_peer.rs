//! The guarantee the hand-rolled async loop (`benches/peers/async_loop.rs`)
//! breaks and an async trigger keeps: a fire that arrives during a run is
//! served by one more run (G4).

#![cfg(feature = "tokio")]

#[path = "../benches/peers/async_loop.rs"]
mod async_loop;
mod common;

use circulation_trigger::{Scheduler, Trigger};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// A task whose first run waits for `release`; counts its runs.
fn gated(
    runs: &Arc<AtomicUsize>,
    release: &Arc<Notify>,
) -> impl FnMut() -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Duration>> + Send>>
       + Send
       + 'static {
    let (runs, release) = (runs.clone(), release.clone());
    move || {
        let (runs, release) = (runs.clone(), release.clone());
        Box::pin(async move {
            if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                release.notified().await;
            }
            None
        })
    }
}

async fn wait_for(runs: &AtomicUsize, at_least: usize) {
    let start = std::time::Instant::now();
    while runs.load(Ordering::SeqCst) < at_least {
        assert!(start.elapsed() < common::PATIENCE, "no run {at_least}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hand_rolled_loop_loses_a_fire_during_a_run_the_trigger_serves_it() {
    // The hand-rolled loop: the fire during the run is drained with the
    // burst it is meant to coalesce, and never served.
    let (runs, release) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
    let peer =
        async_loop::AsyncLoop::spawn(&tokio::runtime::Handle::current(), gated(&runs, &release));
    peer.fire();
    wait_for(&runs, 1).await; // the run is in flight
    peer.fire(); // "config changed again": must be served
    release.notify_one();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the peer lost the fire");

    // The trigger, same scenario: exactly one follow-up run.
    let scheduler = Scheduler::new();
    let (runs, release) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
    let trigger = Trigger::bind_async(&scheduler, gated(&runs, &release));
    trigger.fire().unwrap();
    wait_for(&runs, 1).await;
    trigger.fire().unwrap();
    release.notify_one();
    wait_for(&runs, 2).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2,
        "served by exactly one more run"
    );
}
