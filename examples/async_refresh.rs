//! An async service's configuration, kept fresh by an async `Refresh`:
//!
//! * a simulated async config client (5–20 ms latency, one call in five
//!   fails) is the fetch's own state, lent to each fetch (no `Mutex`);
//!   fetched every 500 ms, backing off with `RetryBackoff` while it fails;
//! * "refresh now" messages arrive in bursts on an async message stream
//!   (a Tokio channel standing in for a bus): a burst costs one fetch at
//!   once and at most one more at the cooldown's end;
//! * a feature switch pauses the refresh and resumes it;
//! * a request handler refreshes and awaits the new value
//!   (`refresh_and_wait_async`) before answering; readers `get()` it;
//! * Ctrl-C (or `--run-for N` seconds) shuts down gracefully and prints the
//!   report.
//!
//! ```text
//! cargo run --release --features tokio --example async_refresh -- --run-for 3
//! ```

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::{policy::RetryBackoff, FireError, Refresh, Scheduler};
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// The remote config center's current version (what the publisher bumps).
type Center = Arc<AtomicU64>;

/// The async client: the fetch's own state.
struct Client {
    center: Center,
    calls: u64,
    failures: u64,
}

impl Client {
    /// One async fetch: some latency, and sometimes an error.
    async fn fetch(&mut self) -> Result<u64, &'static str> {
        self.calls += 1;
        tokio::time::sleep(Duration::from_millis(fastrand::u64(5..=20))).await;
        if fastrand::u8(..5) == 0 {
            self.failures += 1;
            return Err("config center unavailable");
        }
        Ok(self.center.load(SeqCst))
    }
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
    let scheduler = Scheduler::builder()
        .shutdown_grace(Duration::from_secs(2))
        .build()
        .expect("start the scheduler");
    let center = Center::default();
    let client = Client {
        center: center.clone(),
        calls: 0,
        failures: 0,
    };
    let config = Refresh::builder(&scheduler)
        .every(Duration::from_millis(500))
        .retry(RetryBackoff::new(
            Duration::from_millis(20),
            Duration::from_secs(2),
        ))
        .trigger(|t| {
            t.name("config-refresh")
                .policies(TriggerPolicies::new().min_interval(Duration::from_millis(100)))
        })
        .bind_async(client, |client| Box::pin(client.fetch()));
    config.refresh_now().expect("scheduler running");

    // The message bus: a publisher bumps the version and sends a burst of
    // "refresh now" messages; a consumer calls `refresh_now` per message.
    let (bus, mut messages) = tokio::sync::mpsc::channel::<&'static str>(64);
    let messages_seen = Arc::new(AtomicU64::new(0));
    let consumer = {
        let (config, seen) = (config.clone(), messages_seen.clone());
        tokio::spawn(async move {
            while let Some(_message) = messages.recv().await {
                seen.fetch_add(1, SeqCst);
                match config.refresh_now() {
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
                center.fetch_add(1, SeqCst);
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
        let config = config.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            for request in 1..=3 {
                match config.refresh_and_wait_async(Duration::from_secs(2)).await {
                    Ok(version) => println!("request {request}: refreshed, config v{version}"),
                    Err(error) => println!(
                        "request {request}: {error}; answering with v{:?}",
                        config.get().as_deref()
                    ),
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };

    // The feature switch: off for a moment, then on again.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    config.pause(); // "refresh now" messages are refused meanwhile
    println!("feature switch off: refresh paused");
    tokio::time::sleep(Duration::from_millis(300)).await;
    config.resume().expect("scheduler running");
    println!("feature switch on: refresh resumed");

    match run_for() {
        Some(limit) => tokio::time::sleep(limit.saturating_sub(Duration::from_millis(1_500))).await,
        None => {
            println!("running; Ctrl-C to stop");
            let _ = tokio::signal::ctrl_c().await;
        }
    }

    // Graceful shutdown: the fetch in flight (if any) finishes; awaited,
    // so no runtime thread blocks on it.
    handler.abort();
    publisher.abort();
    let report = scheduler.shutdown_async().await;
    consumer.await.ok();
    println!("{report}");
    let stats = config.trigger().stats();
    println!(
        "{} \"refresh now\" messages ({} refused while paused), {} fetches \
         ({} fires coalesced), {} failed and backed off, local config v{:?} of v{}",
        messages_seen.load(SeqCst),
        config.refused_fires(),
        stats.iterations,
        stats.coalesced_fires,
        config.failures(),
        config.get().as_deref(),
        center.load(SeqCst),
    );
    assert!(stats.iterations >= 2, "fetched on its period and on demand");
}
