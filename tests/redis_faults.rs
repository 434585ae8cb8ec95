//! A small fleet against a real `redis-server` (127.0.0.1, a free port)
//! through the store's faults: a restart, a pause, a flood of "refresh
//! now". Each client is the crate's recommended refresher
//! (`tests/common/fleet_client.rs`), on a thread with its own scheduler.
//! Checked whatever the machine's load: every client ends on the latest
//! version, no client ever has two fetches in flight, a hung fetch stalls
//! no other trigger and is reported, a flood is coalesced and memory
//! stays flat. Every wait is bounded; no timing is asserted but generous
//! upper bounds.

#[path = "common/fleet_client.rs"]
mod fleet_client;
#[path = "common/redis_server.rs"]
mod redis_server;

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::{Scheduler, Trigger};
use fleet_client::{Client, Tuning, CHANNEL};
use redis_server::{set_version, RedisServer};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CLIENTS: u64 = 6;
const TUNING: Tuning = Tuning {
    period: Duration::from_millis(600),
    window: Duration::from_millis(200),
    retry: Duration::from_millis(50),
    fetch_timeout: Duration::from_millis(300),
};
/// The bound on every wait: far beyond what an idle machine needs.
const PATIENCE: Duration = Duration::from_secs(60);

fn admin(server: &RedisServer) -> redis::Connection {
    redis::Client::open(server.url())
        .and_then(|c| c.get_connection())
        .expect("admin connection")
}

/// A fleet on version 1.
fn fleet(server: &RedisServer) -> Vec<Client> {
    set_version(&mut admin(server), 1);
    let clients: Vec<Client> = (0..CLIENTS)
        .map(|id| Client::start(&server.url(), id, TUNING))
        .collect();
    converge(&clients, 1);
    clients
}

/// Waits (bounded) until every client holds `version`.
fn converge(clients: &[Client], version: u64) {
    let until = Instant::now() + PATIENCE;
    while clients
        .iter()
        .any(|c| c.stats.version.load(Relaxed) != version)
    {
        assert!(
            Instant::now() < until,
            "not every client reached version {version} within {PATIENCE:?}: {:?}",
            clients
                .iter()
                .map(|c| c.stats.version.load(Relaxed))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_never_two_in_flight(clients: &[Client]) {
    for client in clients {
        assert_eq!(client.stats.max_in_flight.load(Relaxed), 1);
    }
}

#[test_with::executable(redis-server)]
#[test]
fn a_store_restart_is_caught_up_by_every_client() {
    let mut server = RedisServer::start().expect("redis-server");
    let mut clients = fleet(&server);
    server.kill();
    // Down for three periods: every client's fetch fails meanwhile.
    let down_until = Instant::now() + 3 * TUNING.period;
    let until = Instant::now() + PATIENCE;
    while clients.iter().any(|c| c.stats.failures.load(Relaxed) == 0) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(down_until.saturating_duration_since(Instant::now()));
    // Back, empty (no persistence): the new config, and a broadcast that
    // only clients already subscribed again receive — the others catch up
    // on their next refresh.
    server.restart().expect("restart");
    let mut con = admin(&server);
    set_version(&mut con, 2);
    let _: Result<u64, _> = redis::cmd("PUBLISH")
        .arg(CHANNEL)
        .arg("now")
        .query(&mut con);
    converge(&clients, 2);
    assert_never_two_in_flight(&clients);
    assert!(clients.iter().all(|c| c.stats.failures.load(Relaxed) > 0));
    clients.iter_mut().for_each(Client::stop);
}

#[test_with::executable(redis-server)]
#[test]
fn a_paused_store_stalls_nothing_else_piles_up_nothing_and_is_caught_up() {
    let server = RedisServer::start().expect("redis-server");
    let mut clients = fleet(&server);
    // A fetch that waits as long as the store is paused, on a scheduler
    // with one worker, beside a heartbeat (G14), reported stuck.
    let stuck = Arc::new(AtomicU32::new(0));
    let s = stuck.clone();
    let scheduler = Scheduler::builder()
        .workers(1)
        .stuck_hook(move |_| {
            s.fetch_add(1, Relaxed);
        })
        .build()
        .unwrap();
    let mut hung_con = admin(&server);
    let hung = Trigger::builder(&scheduler)
        .name("hung-fetch")
        .policies(TriggerPolicies::new().stuck_after(Duration::from_millis(200)))
        .bind(move || {
            let _: Result<Vec<String>, _> =
                redis::cmd("HGETALL").arg("config").query(&mut hung_con);
            None
        });
    let beats = Arc::new(AtomicU64::new(0));
    let b = beats.clone();
    let heartbeat = Trigger::bind(&scheduler, move || {
        b.fetch_add(1, Relaxed);
        Some(Duration::from_millis(20))
    });
    heartbeat.fire().unwrap();
    let refreshes_before: u64 = clients
        .iter()
        .map(|c| c.stats.refreshes.load(Relaxed))
        .sum();
    let mut con = admin(&server);
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(1_500)
        .arg("ALL")
        .query::<()>(&mut con)
        .expect("CLIENT PAUSE");
    let paused_at = Instant::now();
    hung.fire().unwrap();
    let beats_at_pause = beats.load(Relaxed);
    std::thread::sleep(Duration::from_millis(1_000));
    // Still paused (a loaded machine may have slept longer: then skip the
    // mid-pause looks, which are only meaningful while it lasts).
    if paused_at.elapsed() < Duration::from_millis(1_400) {
        assert!(hung.stats().state == circulation_trigger::report::TriggerState::Running);
        assert!(
            beats.load(Relaxed) > beats_at_pause,
            "the heartbeat stalled behind the hung fetch"
        );
    }
    // After the pause: the new version reaches everyone.
    set_version(&mut con, 2); // queued behind the pause
    converge(&clients, 2);
    let until = Instant::now() + PATIENCE;
    while stuck.load(Relaxed) == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(stuck.load(Relaxed), 1, "the hung fetch was reported once");
    assert_never_two_in_flight(&clients);
    // No pile-up: the fetches that waited out the pause are not followed
    // by a burst of their own — at most a handful per client (one period
    // is 600 ms; a loaded machine only makes fewer).
    let elapsed = paused_at.elapsed();
    let refreshes: u64 = clients
        .iter()
        .map(|c| c.stats.refreshes.load(Relaxed))
        .sum::<u64>()
        - refreshes_before;
    let most = CLIENTS * (elapsed.as_millis() as u64 / 300 + 4);
    assert!(refreshes <= most, "{refreshes} refreshes in {elapsed:?}");
    clients.iter_mut().for_each(Client::stop);
    drop(scheduler);
}

#[test_with::executable(redis-server)]
#[test]
fn a_flood_of_refresh_now_is_coalesced_with_flat_memory() {
    const MESSAGES: u64 = 20_000;
    let server = RedisServer::start().expect("redis-server");
    let mut clients = fleet(&server);
    let rss_before = fleet_client::rss_kib();
    let refreshes_before: Vec<u64> = clients
        .iter()
        .map(|c| c.stats.refreshes.load(Relaxed))
        .collect();
    let mut con = admin(&server);
    set_version(&mut con, 2);
    let mut pipe = redis::pipe();
    for _ in 0..MESSAGES {
        pipe.cmd("PUBLISH").arg(CHANNEL).arg("now").ignore();
    }
    pipe.query::<()>(&mut con).expect("flood");
    // Every client got every message (bounded wait), then the version.
    let until = Instant::now() + PATIENCE;
    while clients
        .iter()
        .any(|c| c.stats.messages.load(Relaxed) < MESSAGES)
    {
        assert!(Instant::now() < until, "the flood was not delivered");
        std::thread::sleep(Duration::from_millis(20));
    }
    converge(&clients, 2);
    for (client, before) in clients.iter().zip(refreshes_before) {
        let refreshes = client.stats.refreshes.load(Relaxed) - before;
        // 20,000 messages: a handful of refreshes (periodic ones included;
        // generous for a slow machine that stretches the flood out).
        assert!(
            refreshes < MESSAGES / 100,
            "{refreshes} refreshes for {MESSAGES} messages"
        );
    }
    assert_never_two_in_flight(&clients);
    let grown = fleet_client::rss_kib().saturating_sub(rss_before);
    assert!(grown < 64 << 10, "RSS grew {grown} KiB through the flood");
    clients.iter_mut().for_each(Client::stop);
}
