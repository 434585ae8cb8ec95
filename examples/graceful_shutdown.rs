//! A message-consumer service that shuts down gracefully on SIGTERM or
//! Ctrl-C (SIGINT): stop the subscription, shut the scheduler down, wait
//! with a timeout, print the shutdown report, exit 0.
//!
//! Run: `cargo run --release --example graceful_shutdown`, then Ctrl-C
//! (or `kill -TERM <pid>`). `--run-for <seconds>` stops by itself.

use circulation_trigger::{is_cancelled, Scheduler, Trigger};
use signal_hook::consts::{SIGINT, SIGTERM};
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn main() {
    let run_for = std::env::args()
        .skip_while(|arg| arg != "--run-for")
        .nth(1)
        .and_then(|secs| secs.parse().ok())
        .map(Duration::from_secs);

    // Signals only set a flag; all the work happens on this thread.
    let terminate = Arc::new(AtomicBool::new(false));
    for signal in [SIGTERM, SIGINT] {
        signal_hook::flag::register(signal, terminate.clone()).expect("install signal handler");
    }

    let scheduler = Scheduler::builder()
        .thread_name_prefix("consumer-")
        .shutdown_grace(Duration::from_secs(3))
        .build()
        .expect("start the scheduler");
    let handled = Arc::new(AtomicU64::new(0));
    let consume = {
        let handled = handled.clone();
        Trigger::builder(&scheduler)
            .name("consume-batch")
            .bind(move || {
                // Drain a batch of messages, stopping early on shutdown_now.
                for _ in 0..10 {
                    if is_cancelled() {
                        return None;
                    }
                    thread::sleep(Duration::from_millis(2));
                }
                handled.fetch_add(1, Relaxed);
                None
            })
    };
    let refresh = Trigger::builder(&scheduler)
        .name("config-refresh")
        .bind(|| Some(Duration::from_secs(30)));
    let heartbeat = Trigger::builder(&scheduler)
        .name("heartbeat")
        .bind(|| Some(Duration::from_millis(500)));
    refresh.fire().expect("running");
    heartbeat.fire().expect("running");

    // The subscription: a message every 20 ms fires the consumer.
    let subscribed = Arc::new(AtomicBool::new(true));
    let subscription = {
        let (consume, subscribed) = (consume.clone(), subscribed.clone());
        thread::spawn(move || {
            let mut delivered = 0u64;
            while subscribed.load(Relaxed) {
                if consume.fire().is_ok() {
                    delivered += 1;
                }
                thread::sleep(Duration::from_millis(20));
            }
            delivered
        })
    };

    println!(
        "ready: pid {} (send SIGTERM or press Ctrl-C)",
        std::process::id()
    );
    std::io::stdout().flush().ok();
    let started = Instant::now();
    while !terminate.load(Relaxed) && run_for.map_or(true, |limit| started.elapsed() < limit) {
        thread::sleep(Duration::from_millis(10));
    }
    println!(
        "stopping: {}",
        if terminate.load(Relaxed) {
            "signal received"
        } else {
            "time is up"
        }
    );

    // 1. Stop consuming: no new messages arrive.
    subscribed.store(false, Relaxed);
    let delivered = subscription.join().expect("subscription thread");
    // 2. Shut down: armed runs are discarded, the batch in flight finishes.
    scheduler.shutdown();
    // 3. Wait, with a timeout.
    let terminated = scheduler.await_termination(Duration::from_secs(5));
    // 4. Report exactly what was discarded and what finished.
    let report = scheduler.shutdown_report().expect("shut down");
    println!("{report}");
    println!(
        "messages delivered: {delivered}, batches handled: {}, terminated: {terminated}",
        handled.load(Relaxed)
    );
    std::process::exit(if terminated { 0 } else { 1 });
}
