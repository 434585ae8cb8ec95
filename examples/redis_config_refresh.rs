//! A service whose configuration lives in Redis (hash `config`, with a
//! `version` field) and that hears "refresh now" on a Redis pub/sub channel
//! (`config:refresh`). An async `Refresh` keeps the local snapshot fresh:
//! every `--period` seconds, and on every message — a burst costs one
//! fetch at once and at most one more at the cooldown's end, and two
//! fetches never run at once. Its fetch owns the async connection (lent
//! to each fetch, no `Mutex`) and asks for the `version` field first:
//! when it is the version held, the fetch answers "unchanged" — one small
//! read, nothing published, no reader woken. While Redis is unreachable the refresh backs
//! off (`RetryBackoff`); Ctrl-C / SIGTERM shut it down cleanly and print
//! the report.
//!
//! ```text
//! cargo run --release --features tokio --example redis_config_refresh -- --spawn-server --run-for 5
//! cargo run --release --features tokio --example redis_config_refresh -- --url redis://127.0.0.1:6379/
//! ```
//!
//! `--spawn-server` starts a private `redis-server` on a free loopback port
//! and a demo publisher that bumps the version twice a second and then
//! publishes a burst of five "refresh now" messages. Without it the
//! example uses `--url` (or `REDIS_URL`, default `redis://127.0.0.1:6379/`):
//! try `redis-cli hset config version 42` and `redis-cli publish
//! config:refresh now` beside it.

#[path = "../tests/common/redis_server.rs"]
mod redis_server;

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::refresh::{Fetched, Validator};
use circulation_trigger::{policy::RetryBackoff, Refresh, Scheduler};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const CHANNEL: &str = "config:refresh";
const IO_TIMEOUT: Duration = Duration::from_millis(500);

struct Options {
    url: String,
    period: Duration,
    spawn_server: bool,
    run_for: Option<Duration>,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        url: std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into()),
        period: Duration::from_secs(10),
        spawn_server: false,
        run_for: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        let seconds = |text: String| {
            text.parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0 && *s < 1e9)
                .map(Duration::from_secs_f64)
                .ok_or(format!("bad number of seconds {text:?}"))
        };
        match arg.as_str() {
            "--url" => options.url = value()?,
            "--period" => options.period = seconds(value()?)?,
            "--run-for" => options.run_for = Some(seconds(value()?)?),
            "--spawn-server" => options.spawn_server = true,
            "-h" | "--help" => {
                return Err(
                    "options: --url URL | --spawn-server, --period SECS (10), --run-for SECS"
                        .into(),
                )
            }
            other => return Err(format!("unknown option {other:?} (try --help)")),
        }
    }
    Ok(options)
}

fn connect(url: &str) -> redis::RedisResult<redis::Connection> {
    let con = redis::Client::open(url)?.get_connection_with_timeout(IO_TIMEOUT)?;
    con.set_read_timeout(Some(IO_TIMEOUT))?;
    con.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(con)
}

/// The local copy of the configuration.
#[derive(Debug, Default)]
struct Snapshot {
    version: u64,
    fields: HashMap<String, String>,
}

/// The fetch's own state: the store's address and its async connection,
/// opened on first use and dropped after an error.
struct Store {
    client: redis::Client,
    con: Option<redis::aio::MultiplexedConnection>,
}

impl Store {
    /// One fetch: "unchanged" if the store's version is `last`, else the
    /// whole hash, with its version as the next fetch's validator.
    async fn read(&mut self, last: Option<Validator>) -> redis::RedisResult<Fetched<Snapshot>> {
        let read = async {
            if self.con.is_none() {
                self.con = Some(self.client.get_multiplexed_async_connection().await?);
            }
            let con = self.con.as_mut().expect("connected");
            let version: Option<String> = redis::cmd("HGET")
                .arg("config")
                .arg("version")
                .query_async(&mut *con)
                .await?;
            if let (Some(last), Some(version)) = (&last, &version) {
                if last == version.as_str() {
                    return Ok(None);
                }
            }
            redis::cmd("HGETALL")
                .arg("config")
                .query_async::<HashMap<String, String>>(con)
                .await
                .map(Some)
        };
        let fields = match tokio::time::timeout(IO_TIMEOUT, read).await {
            Ok(Ok(Some(fields))) => fields,
            Ok(Ok(None)) => return Ok(Fetched::unchanged()),
            Ok(Err(error)) => {
                self.con = None;
                return Err(error);
            }
            Err(_) => {
                self.con = None;
                let timeout = std::io::Error::from(std::io::ErrorKind::TimedOut);
                return Err(timeout.into());
            }
        };
        let version = fields
            .get("version")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let snapshot = Snapshot { version, fields };
        Ok(Fetched::changed(snapshot).validator(version))
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let server = options
        .spawn_server
        .then(|| match redis_server::RedisServer::start() {
            Ok(server) => server,
            Err(error) => {
                eprintln!("could not start redis-server: {error}");
                std::process::exit(1);
            }
        });
    let url = server.as_ref().map_or(options.url.clone(), |s| s.url());
    println!("config store and bus: {url}");

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone()).expect("signal handler");
    }

    let scheduler = Scheduler::new();
    let store = Store {
        client: redis::Client::open(url.as_str()).expect("a redis:// URL"),
        con: None,
    };
    let config = Refresh::builder(&scheduler)
        .every(options.period)
        .retry(RetryBackoff::new(Duration::from_millis(100), Duration::from_secs(10)).jitter(0.2))
        .trigger(|t| {
            t.name("config-refresh")
                .policies(TriggerPolicies::new().min_interval(Duration::from_millis(200)))
        })
        .bind_async_conditional(store, |store, last| Box::pin(store.read(last)));
    config.refresh_now().expect("running");
    // Readers learn of each new value; this one logs it.
    let mut updates = config.subscribe();
    let logger = tokio::spawn(async move {
        let mut applied = 0;
        while updates.changed().await.is_ok() {
            let latest = updates.borrow_and_update().clone();
            if let Some(snapshot) = latest.filter(|s| s.version > applied) {
                applied = snapshot.version;
                println!(
                    "applied config v{applied} ({} fields)",
                    snapshot.fields.len()
                );
            }
        }
    });

    let messages = Arc::new(AtomicU64::new(0));
    // The bus: a blocking pub/sub reader on a thread of its own.
    let subscriber = {
        let (config, stop, url, messages) =
            (config.clone(), stop.clone(), url.clone(), messages.clone());
        thread::spawn(move || subscribe(&url, &config, &stop, &messages))
    };
    let publisher_stop = Arc::new(AtomicBool::new(false));
    let publisher = server.is_some().then(|| {
        let (stop, url) = (publisher_stop.clone(), url.clone());
        thread::spawn(move || demo_publisher(&url, &stop))
    });

    let started = Instant::now();
    let in_time = |limit: Option<Duration>| limit.map_or(true, |l| started.elapsed() < l);
    let version = || config.get().map_or(0, |snapshot| snapshot.version);
    while !stop.load(SeqCst) && in_time(options.run_for) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let signalled = stop.load(SeqCst);
    publisher_stop.store(true, SeqCst);
    let published = match publisher {
        Some(publisher) => {
            tokio::task::spawn_blocking(move || publisher.join().expect("publisher"))
                .await
                .expect("publisher")
        }
        None => None,
    };
    if let Some(latest) = published.filter(|_| !signalled) {
        // Give the last burst a moment to be served (bounded).
        let waited = Instant::now();
        while version() < latest && waited.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    stop.store(true, SeqCst);
    tokio::task::spawn_blocking(move || subscriber.join().expect("subscriber"))
        .await
        .expect("subscriber");
    let report = scheduler.shutdown_async().await;
    logger.await.expect("the log ends with the scheduler");
    let stats = config.trigger().stats();
    let greeting = config
        .get()
        .and_then(|snapshot| snapshot.fields.get("greeting").cloned());
    println!("\n{report}");
    let refresh = config.stats();
    println!(
        "{} \"refresh now\" messages, {} fetches ({} new, {} unchanged, {} failed, {} fires coalesced), local config v{} (greeting {greeting:?})",
        messages.load(SeqCst),
        stats.iterations,
        refresh.refreshes,
        refresh.unchanged,
        refresh.failures,
        stats.coalesced_fires,
        version(),
    );
    if let Some(latest) = published.filter(|_| !signalled) {
        // The demo's own check: the service ended on the newest version.
        assert_eq!(version(), latest, "the service missed the latest version");
        assert!(stats.iterations < messages.load(SeqCst), "no coalescing");
    }
}

/// Calls `refresh_now` on every message of the channel; reconnects when
/// the connection breaks, after a jittered back-off (a fleet whose store
/// restarts does not reconnect in step); until `stop`. A message lost
/// while disconnected is caught by the next periodic refresh.
fn subscribe(
    url: &str,
    config: &Refresh<Snapshot, redis::RedisError>,
    stop: &AtomicBool,
    messages: &AtomicU64,
) {
    let mut backoff =
        RetryBackoff::new(Duration::from_millis(100), Duration::from_secs(5)).jitter(0.5);
    while !stop.load(SeqCst) {
        let Ok(mut con) = connect(url) else {
            thread::sleep(backoff.failed().unwrap_or(Duration::from_secs(5)));
            continue;
        };
        backoff.reset();
        let mut pubsub = con.as_pubsub();
        if pubsub.subscribe(CHANNEL).is_err()
            || pubsub
                .set_read_timeout(Some(Duration::from_millis(100)))
                .is_err()
        {
            continue;
        }
        while !stop.load(SeqCst) {
            match pubsub.get_message() {
                Ok(_) => {
                    messages.fetch_add(1, SeqCst);
                    let _ = config.refresh_now();
                }
                Err(error) if error.is_timeout() => {}
                Err(_) => break,
            }
        }
    }
}

/// `--spawn-server`'s publisher: bumps the version twice a second, each
/// time followed by a burst of five "refresh now", until `stop`; returns
/// the last version it set.
fn demo_publisher(url: &str, stop: &AtomicBool) -> Option<u64> {
    let mut con = connect(url).ok()?;
    let mut version = 0u64;
    while !stop.load(SeqCst) {
        version += 1;
        redis::pipe()
            .cmd("HSET")
            .arg("config")
            .arg("version")
            .arg(version)
            .arg("greeting")
            .arg(format!("hello #{version}"))
            .ignore()
            .query::<()>(&mut con)
            .ok()?;
        for _ in 0..5 {
            redis::cmd("PUBLISH")
                .arg(CHANNEL)
                .arg("now")
                .query::<()>(&mut con)
                .ok()?;
        }
        thread::sleep(Duration::from_millis(500));
    }
    Some(version)
}
