//! An async service's configuration refresh on Tokio, with one trigger:
//!
//! * a simulated async config client (5–20 ms latency, one call in five
//!   fails) is called every `--period` seconds, backing off with
//!   `RetryBackoff` while it fails;
//! * "refresh now" messages arrive in bursts on an async message stream
//!   (a Tokio channel standing in for a bus) and coalesce: a refresh never
//!   overlaps another, and a burst during one costs one more;
//! * a feature switch turns the refresh off and on again;
//! * a request handler asks for a refresh and awaits it
//!   (`fire_and_wait_async`) before answering;
//! * Ctrl-C (or `--run-for N` seconds) shuts down gracefully and prints the
//!   report.
//!
//! ```text
//! cargo run --release --features tokio --example async_refresh -- --run-for 3
//! ```

use circulation_trigger::{FireError, Outcome, RetryBackoff, Scheduler, Trigger};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The remote config center, as an async client sees it.
#[derive(Default)]
struct ConfigCenter {
    version: AtomicU64,
    calls: AtomicU64,
    failures: AtomicU64,
}

impl ConfigCenter {
    /// One async fetch: some latency, and sometimes an error.
    async fn fetch(&self) -> Result<u64, &'static str> {
        self.calls.fetch_add(1, SeqCst);
        tokio::time::sleep(Duration::from_millis(fastrand::u64(5..=20))).await;
        if fastrand::u8(..5) == 0 {
            self.failures.fetch_add(1, SeqCst);
            return Err("config center unavailable");
        }
        Ok(self.version.load(SeqCst))
    }
}

/// What the refresh keeps: the local snapshot and its bookkeeping.
#[derive(Default)]
struct Local {
    version: AtomicU64,
    refreshing: AtomicBool,
    overlaps: AtomicU64,
}

fn run_for() -> Option<Duration> {
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--run-for" {
            let secs = args.next().and_then(|s| s.parse::<u64>().ok());
            return Some(Duration::from_secs(secs.unwrap_or(3)));
        }
    }
    None
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let period = Duration::from_millis(500);
    let scheduler = Scheduler::builder()
        .shutdown_grace(Duration::from_secs(2))
        .build()
        .expect("start the scheduler");
    let center = Arc::new(ConfigCenter::default());
    let local = Arc::new(Local::default());

    // The refresh: runs never overlap, so the back-off needs no contention
    // (the Mutex only satisfies the borrow checker across futures).
    let backoff = Arc::new(Mutex::new(RetryBackoff::new(
        Duration::from_millis(20),
        Duration::from_secs(2),
    )));
    let refresher = {
        let (center, local) = (center.clone(), local.clone());
        Trigger::builder(&scheduler)
            .name("config-refresh")
            .bind_async(move || {
                let (center, local, backoff) = (center.clone(), local.clone(), backoff.clone());
                async move {
                    if local.refreshing.swap(true, SeqCst) {
                        local.overlaps.fetch_add(1, SeqCst); // never happens
                    }
                    let fetched = center.fetch().await;
                    local.refreshing.store(false, SeqCst);
                    let mut backoff = backoff.lock().unwrap();
                    match fetched {
                        Ok(version) => {
                            local.version.fetch_max(version, SeqCst);
                            backoff.succeeded(period)
                        }
                        Err(_) => backoff.failed(),
                    }
                }
            })
    };
    refresher.fire().expect("scheduler running");

    // The message bus: a publisher bumps the version and sends a burst of
    // "refresh now" messages; a consumer task fires the trigger per message.
    let (bus, mut messages) = tokio::sync::mpsc::channel::<&'static str>(64);
    let messages_seen = Arc::new(AtomicU64::new(0));
    let consumer = {
        let (refresher, seen) = (refresher.clone(), messages_seen.clone());
        tokio::spawn(async move {
            while let Some(_message) = messages.recv().await {
                seen.fetch_add(1, SeqCst);
                match refresher.fire() {
                    Ok(()) | Err(FireError::Paused) => {} // paused: refused
                    Err(_) => break,                      // shut down
                }
            }
        })
    };
    let publisher = {
        let center = center.clone();
        tokio::spawn(async move {
            for _ in 0..40 {
                center.version.fetch_add(1, SeqCst);
                for _ in 0..5 {
                    if bus.send("refresh now").await.is_err() {
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(70)).await;
            }
        })
    };

    // A request handler: "refresh, then answer with what you have".
    let handler = {
        let (refresher, local) = (refresher.clone(), local.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            for request in 1..=3 {
                match refresher.fire_and_wait_async(Duration::from_secs(2)).await {
                    Ok(Outcome::Completed) => println!(
                        "request {request}: refreshed, answering with config v{}",
                        local.version.load(SeqCst)
                    ),
                    Ok(other) => println!("request {request}: refresh ended {other:?}"),
                    Err(error) => println!("request {request}: {error}"),
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };

    // The feature switch: off for a moment, then on again.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    refresher.pause(); // "refresh now" messages are refused meanwhile
    println!("feature switch off: refresh paused");
    tokio::time::sleep(Duration::from_millis(300)).await;
    refresher
        .resume_after(Duration::ZERO)
        .expect("scheduler running");
    println!("feature switch on: refresh resumed");

    match run_for() {
        Some(limit) => tokio::time::sleep(limit.saturating_sub(Duration::from_millis(1_500))).await,
        None => {
            println!("running; Ctrl-C to stop");
            let _ = tokio::signal::ctrl_c().await;
        }
    }

    // Graceful shutdown: the refresh in flight (if any) finishes; awaited,
    // so no runtime thread blocks on it.
    handler.abort();
    publisher.abort();
    let report = scheduler.shutdown_and_join_async().await;
    consumer.await.ok();
    println!("{report}");
    let stats = refresher.stats();
    println!(
        "{} \"refresh now\" messages, {} refreshes ({} fires coalesced), \
         {} fetches failed and backed off, overlapping refreshes: {}, \
         local config v{} of v{}",
        messages_seen.load(SeqCst),
        stats.iterations,
        stats.coalesced_fires,
        center.failures.load(SeqCst),
        local.overlaps.load(SeqCst),
        local.version.load(SeqCst),
        center.version.load(SeqCst),
    );
    assert_eq!(local.overlaps.load(SeqCst), 0);
}
