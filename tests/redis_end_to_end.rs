//! End to end with a real Redis as config store (a hash with a `version`
//! field) and bus (pub/sub channel `config:refresh`): a trigger refreshes
//! the local copy on a period and on every "refresh now" message.
//!
//! Each test starts its own `redis-server` on 127.0.0.1 on a free port and
//! stops it at the end, even on failure. Without `redis-server` the tests
//! skip with a message — except in CI (`CI` set), where they fail.

mod common;
#[path = "common/redis_server.rs"]
mod redis_server;

use circulation_trigger::{is_cancelled, policy::RetryBackoff, Outcome, Scheduler, Trigger};
use common::{eventually, Counter};
use redis_server::{set_version, RedisServer};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

const CHANNEL: &str = "config:refresh";
const IO_TIMEOUT: Duration = Duration::from_millis(500);

fn connect(url: &str) -> redis::RedisResult<redis::Connection> {
    let con = redis::Client::open(url)?.get_connection_with_timeout(IO_TIMEOUT)?;
    con.set_read_timeout(Some(IO_TIMEOUT))?;
    con.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(con)
}

fn publish(con: &mut redis::Connection) {
    redis::cmd("PUBLISH")
        .arg(CHANNEL)
        .arg("refresh")
        .query::<()>(con)
        .expect("PUBLISH");
}

/// Subscribers of the channel, as Redis counts them.
fn subscribers(con: &mut redis::Connection) -> usize {
    let (_, count): (String, usize) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(CHANNEL)
        .query(con)
        .expect("PUBSUB NUMSUB");
    count
}

/// What the service under test observed.
#[derive(Clone, Default)]
struct Observed {
    /// The newest version the refresher has read.
    seen: Arc<AtomicU64>,
    refreshes: Counter,
    attempts: Counter,
    overlaps: Counter,
    running: Arc<AtomicUsize>,
    messages: Counter,
}

/// The service: a refresher trigger and a subscriber thread that fires it.
struct Service {
    trigger: Trigger,
    observed: Observed,
    stop: Arc<AtomicBool>,
    subscriber: Option<JoinHandle<()>>,
}

impl Service {
    /// `slow`: applying each refresh takes this long (polling `is_cancelled()`).
    fn start(scheduler: &Scheduler, url: &str, period: Duration, slow: Duration) -> Self {
        let observed = Observed::default();
        let o = observed.clone();
        let url_for_task = url.to_owned();
        let mut con: Option<redis::Connection> = None;
        let mut backoff = RetryBackoff::new(Duration::from_millis(10), Duration::from_millis(200));
        let trigger = Trigger::builder(scheduler).name("refresher").bind(move || {
            o.attempts.bump();
            if o.running.fetch_add(1, SeqCst) != 0 {
                o.overlaps.bump();
            }
            let read = (|| {
                if con.is_none() {
                    con = Some(connect(&url_for_task)?);
                }
                let con = con.as_mut().expect("connected");
                redis::cmd("HGET")
                    .arg("config")
                    .arg("version")
                    .query::<Option<u64>>(con)
            })();
            let started = Instant::now();
            while started.elapsed() < slow && !is_cancelled() {
                thread::sleep(Duration::from_millis(5));
            }
            o.running.fetch_sub(1, SeqCst);
            match read {
                Ok(version) => {
                    o.seen.fetch_max(version.unwrap_or(0), SeqCst);
                    o.refreshes.bump();
                    backoff.succeeded(period)
                }
                Err(_) => {
                    con = None; // reconnect next time
                    backoff.failed()
                }
            }
        });
        let stop = Arc::new(AtomicBool::new(false));
        let subscriber = {
            let (trigger, stop, url, o) = (
                trigger.clone(),
                stop.clone(),
                url.to_owned(),
                observed.clone(),
            );
            thread::spawn(move || subscribe(&url, &trigger, &stop, &o))
        };
        trigger.fire().expect("running");
        Self {
            trigger,
            observed,
            stop,
            subscriber: Some(subscriber),
        }
    }

    fn stop(&mut self) {
        self.stop.store(true, SeqCst);
        if let Some(subscriber) = self.subscriber.take() {
            subscriber.join().expect("subscriber");
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Fires `trigger` on every message of the channel; reconnects (with a
/// pause) whenever the connection breaks; until `stop`.
fn subscribe(url: &str, trigger: &Trigger, stop: &AtomicBool, o: &Observed) {
    while !stop.load(SeqCst) {
        let Ok(mut con) = connect(url) else {
            thread::sleep(Duration::from_millis(50));
            continue;
        };
        let mut pubsub = con.as_pubsub();
        if pubsub.subscribe(CHANNEL).is_err()
            || pubsub
                .set_read_timeout(Some(Duration::from_millis(50)))
                .is_err()
        {
            continue;
        }
        while !stop.load(SeqCst) {
            match pubsub.get_message() {
                Ok(_) => {
                    o.messages.bump();
                    let _ = trigger.fire();
                }
                Err(error) if error.is_timeout() => {}
                Err(_) => break, // the server went away: reconnect
            }
        }
    }
}

fn wait_subscribed(con: &mut redis::Connection) {
    eventually("the service subscribed", || subscribers(con) == 1);
}

#[test_with::executable(redis-server)]
#[test]
fn bursts_of_refresh_now_coalesce_and_the_final_version_is_seen() {
    let server = RedisServer::start().expect("redis-server is on PATH: it must start");
    let scheduler = Scheduler::new();
    let mut admin = connect(&server.url()).expect("connect");
    set_version(&mut admin, 0);
    // Applying a configuration takes 1 ms: messages arriving meanwhile
    // coalesce into the one follow-up refresh.
    let mut service = Service::start(
        &scheduler,
        &server.url(),
        Duration::from_secs(1),
        Duration::from_millis(1),
    );
    wait_subscribed(&mut admin);
    const UPDATES: u64 = 1_000;
    const PUBLISHERS: usize = 4;
    const BURST: usize = 5;
    let mut publishers: Vec<_> = (0..PUBLISHERS)
        .map(|_| connect(&server.url()).expect("connect"))
        .collect();
    for version in 1..=UPDATES {
        set_version(&mut admin, version);
        thread::scope(|scope| {
            for con in &mut publishers {
                scope.spawn(move || (0..BURST).for_each(|_| publish(con)));
            }
        });
    }
    let sent = UPDATES as usize * PUBLISHERS * BURST;
    let o = service.observed.clone();
    eventually("the final version is seen", || {
        o.seen.load(SeqCst) == UPDATES
    });
    eventually("every message arrived", || o.messages.get() == sent);
    service.stop();
    let refreshes = o.refreshes.get();
    assert!(
        refreshes * 4 < sent,
        "{refreshes} refreshes for {sent} messages: fires did not coalesce"
    );
    assert_eq!(o.overlaps.get(), 0, "two refreshes ran at once");
    eprintln!("{sent} messages, {refreshes} refreshes");
}

#[test_with::executable(redis-server)]
#[test]
fn redis_down_backs_off_then_converges_to_the_latest_version() {
    let mut server = RedisServer::start().expect("redis-server is on PATH: it must start");
    let scheduler = Scheduler::new();
    let mut admin = connect(&server.url()).expect("connect");
    set_version(&mut admin, 1);
    let period = Duration::from_millis(100);
    let service = Service::start(&scheduler, &server.url(), period, Duration::ZERO);
    let o = &service.observed;
    eventually("version 1 is seen", || o.seen.load(SeqCst) == 1);
    server.kill();
    let before = o.attempts.get();
    thread::sleep(Duration::from_secs(1));
    let attempts = o.attempts.get() - before;
    // Back-off 10, 20, 40, 80, 160, 200, 200 … ms: about ten attempts in a
    // second, never a hot loop (a generous bound: a loaded machine only
    // makes fewer).
    assert!(
        (1..=30).contains(&attempts),
        "{attempts} attempts in 1 s while Redis was down"
    );
    server.restart().expect("restart");
    let mut admin = connect(&server.url()).expect("reconnect");
    set_version(&mut admin, 2_000); // the store is empty again: the newest
    wait_subscribed(&mut admin);
    publish(&mut admin);
    eventually("the latest version is seen", || {
        o.seen.load(SeqCst) == 2_000
    });
    assert_eq!(o.overlaps.get(), 0);
}

#[test_with::executable(redis-server)]
#[test]
fn shutdown_during_a_refresh_lists_it_and_exits_cleanly() {
    let server = RedisServer::start().expect("redis-server is on PATH: it must start");
    let scheduler = Scheduler::new();
    let mut admin = connect(&server.url()).expect("connect");
    set_version(&mut admin, 7);
    // A slow refresh: 10 s unless cancelled.
    let mut service = Service::start(
        &scheduler,
        &server.url(),
        Duration::from_secs(60),
        Duration::from_secs(10),
    );
    let o = service.observed.clone();
    eventually("a refresh in flight", || o.running.load(SeqCst) == 1);
    let report = scheduler.shutdown_now();
    assert_eq!(report.in_flight().len(), 1, "{report}");
    assert_eq!(report.in_flight()[0].trigger(), Some("refresher"));
    assert_eq!(report.in_flight()[0].outcome(), Outcome::Cancelled);
    assert!(scheduler.await_termination(common::PATIENCE));
    assert_eq!(o.seen.load(SeqCst), 7, "the refresh read the store");
    service.stop();
    assert!(
        service.trigger.fire().is_err(),
        "fires after shutdown are refused"
    );
}
