//! One member of a config-refresh fleet against a real Redis, as the
//! crate recommends building it: a `Refresh` fetches `HGETALL config` on
//! the slots of a phase kept from its number in the fleet
//! (`PhaseKeeper::ordinal`), answers "unchanged" when the version is the one
//! it holds, takes "refresh now" on the broadcast channel as
//! `fire_within(window)`, and after a failed fetch retries with a jittered
//! back-off that never waits past its next slot — so a store that comes
//! back meets the fleet spread over its phases, not a herd. A listener
//! thread keeps the subscription, reconnecting when the store goes away. Shared by `examples/fleet_faults.rs` (one process per
//! client) and `tests/redis_faults.rs` (one thread each).

#![allow(dead_code)]

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::refresh::{Fetched, LocalCopy, Origin, Validator};
use circulation_trigger::{
    policy::{seed_jitter, PhaseKeeper, RetryBackoff},
    Refresh, Scheduler, Trigger,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// The broadcast channel.
pub const CHANNEL: &str = "config:broadcast";

/// How a client refreshes.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// The refresh period.
    pub period: Duration,
    /// A broadcast's `fire_within` window.
    pub window: Duration,
    /// The first retry after a failed fetch (doubling, jittered ± 50 %).
    pub retry: Duration,
    /// A fetch (connect, or a command) that takes longer has failed.
    pub fetch_timeout: Duration,
}

/// What a client saw; read by the test or reported by the process.
#[derive(Debug, Default)]
pub struct ClientStats {
    /// The config version of the last good fetch.
    pub version: AtomicU64,
    /// Fetches under way now, and the most at once (G1: never 2).
    pub in_flight: AtomicU32,
    pub max_in_flight: AtomicU32,
    /// Good and failed fetches.
    pub refreshes: AtomicU64,
    pub failures: AtomicU64,
    /// Broadcast messages received.
    pub messages: AtomicU64,
    /// The client started serving its local copy (the store was down).
    pub from_copy: AtomicBool,
}

/// A client's local copy: its config version, as text.
pub fn local_copy(path: &std::path::Path) -> LocalCopy<u64> {
    LocalCopy::new(
        path,
        "fleet-config-v1",
        |version: &u64| Ok::<_, std::io::Error>(version.to_string().into_bytes()),
        |bytes| {
            std::str::from_utf8(bytes)
                .map_err(|e| e.to_string())?
                .parse::<u64>()
                .map_err(|e| e.to_string())
        },
    )
}

/// A running client.
pub struct Client {
    pub stats: Arc<ClientStats>,
    pub config: Refresh<u64, String>,
    pub trigger: Trigger,
    stop: Arc<AtomicBool>,
    listener: Option<JoinHandle<()>>,
    scheduler: Option<Scheduler>,
}

impl Client {
    /// Starts client `id` (its jitter seed) against `url`.
    pub fn start(url: &str, id: u64, tuning: Tuning) -> Client {
        Self::start_with_copy(url, id, tuning, None)
    }

    /// Starts client `id`, keeping a local copy at `copy` if given: a
    /// client started while the store is down serves it.
    pub fn start_with_copy(
        url: &str,
        id: u64,
        tuning: Tuning,
        copy: Option<&std::path::Path>,
    ) -> Client {
        seed_jitter(id);
        let scheduler = Scheduler::builder().workers(1).build().expect("scheduler");
        let stats = Arc::new(ClientStats::default());
        // A slot is skipped only when a broadcast's fetch came within its
        // window: with the default half-period gap, every client that
        // heard a broadcast would skip the same stretch of slots, and the
        // fleet's load would drop there and come back together.
        let phase = PhaseKeeper::ordinal(tuning.period, id, &scheduler).min_gap(tuning.window);
        let fetch = fetch_task(url.to_owned(), id, tuning, stats.clone());
        let config = Refresh::builder(&scheduler)
            .phase(phase)
            .retry(RetryBackoff::new(tuning.retry, tuning.period).jitter(0.5))
            .trigger(|t| {
                t.name(format!("client-{id}"))
                    .policies(TriggerPolicies::new().min_interval(Duration::from_millis(200)))
            })
            .bind_conditional(fetch);
        let config = match copy {
            Some(path) => config.local_copy(local_copy(path)),
            None => config,
        };
        if config.stats().origin == Some(Origin::LocalCopy) {
            stats.from_copy.store(true, Relaxed);
            if let Some(version) = config.get() {
                stats.version.store(*version, Relaxed);
            }
        }
        let trigger = config.trigger().clone();
        trigger
            .fire_after(phase.first_delay_from(Duration::ZERO))
            .expect("running");
        let stop = Arc::new(AtomicBool::new(false));
        let listener = {
            let (url, trigger, stats, stop) =
                (url.to_owned(), trigger.clone(), stats.clone(), stop.clone());
            thread::spawn(move || listen(&url, &trigger, tuning, &stats, &stop))
        };
        Client {
            stats,
            config,
            trigger,
            stop,
            listener: Some(listener),
            scheduler: Some(scheduler),
        }
    }

    /// Stops listening and shuts the client's scheduler down.
    pub fn stop(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(listener) = self.listener.take() {
            let _ = listener.join();
        }
        if let Some(scheduler) = self.scheduler.take() {
            drop(scheduler);
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The refresher's fetch: the config's version, "unchanged" if it is the
/// one held. The refresher does the rest: the slots, the back-off capped
/// at the next slot, never two fetches at once.
fn fetch_task(
    url: String,
    id: u64,
    tuning: Tuning,
    stats: Arc<ClientStats>,
) -> impl FnMut(Option<Validator>) -> Result<Fetched<u64>, String> + Send + 'static {
    let mut con: Option<redis::Connection> = None;
    move |last| {
        let now = stats.in_flight.fetch_add(1, Relaxed) + 1;
        stats.max_in_flight.fetch_max(now, Relaxed);
        let fetched = fetch(&url, &mut con, tuning.fetch_timeout).and_then(|version| {
            // Where the test (or the parent) sees who holds what.
            let con = con.as_mut().ok_or("no connection")?;
            redis::cmd("HSET")
                .arg("fleet:seen")
                .arg(id)
                .arg(version)
                .query::<()>(con)
                .map_err(|e| e.to_string())?;
            Ok(version)
        });
        stats.in_flight.fetch_sub(1, Relaxed);
        match fetched {
            Ok(version) => {
                stats.version.store(version, Relaxed);
                stats.refreshes.fetch_add(1, Relaxed);
                let validator = Validator::from(version);
                if last.as_ref() == Some(&validator) {
                    return Ok(Fetched::unchanged());
                }
                Ok(Fetched::changed(version).validator(validator))
            }
            Err(error) => {
                con = None; // reconnect next time
                stats.failures.fetch_add(1, Relaxed);
                Err(error)
            }
        }
    }
}

/// `HGETALL config` (connecting first if needed); the `version` field.
fn fetch(url: &str, con: &mut Option<redis::Connection>, timeout: Duration) -> Result<u64, String> {
    if con.is_none() {
        *con = Some(connect(url, timeout)?);
    }
    let con = con.as_mut().ok_or("no connection")?;
    let config: HashMap<String, String> = redis::cmd("HGETALL")
        .arg("config")
        .query(con)
        .map_err(|e| e.to_string())?;
    config
        .get("version")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| "no version in config".to_owned())
}

fn connect(url: &str, timeout: Duration) -> Result<redis::Connection, String> {
    let con = redis::Client::open(url)
        .and_then(|client| client.get_connection_with_timeout(timeout))
        .map_err(|e| e.to_string())?;
    con.set_read_timeout(Some(timeout))
        .and_then(|()| con.set_write_timeout(Some(timeout)))
        .map_err(|e| e.to_string())?;
    Ok(con)
}

/// Keeps a subscription to [`CHANNEL`] until `stop`, re-subscribing after
/// the store went away (pub/sub keeps nothing for a disconnected client:
/// the next periodic refresh catches up what it missed).
fn listen(url: &str, trigger: &Trigger, tuning: Tuning, stats: &ClientStats, stop: &AtomicBool) {
    while !stop.load(Relaxed) {
        let Ok(mut con) = connect(url, tuning.fetch_timeout) else {
            thread::sleep(circulation_trigger::policy::jittered(
                Duration::from_millis(200),
                0.5,
            ));
            continue;
        };
        // Short reads: the loop looks at `stop` between messages.
        let _ = con.set_read_timeout(Some(Duration::from_millis(100)));
        let mut pubsub = con.as_pubsub();
        if pubsub.subscribe(CHANNEL).is_err() {
            continue;
        }
        while !stop.load(Relaxed) {
            match pubsub.get_message() {
                Ok(_) => {
                    stats.messages.fetch_add(1, Relaxed);
                    let _ = trigger.fire_within(tuning.window);
                }
                Err(error) if error.is_timeout() => {}
                Err(_) => break, // the store went away: subscribe again
            }
        }
    }
}

/// Resident set size of this process, in KiB (Linux).
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4)
}
