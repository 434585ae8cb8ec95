//! A service whose configuration lives in Redis (hash `config`, with a
//! `version` field) and that hears "refresh now" on a Redis pub/sub channel
//! (`config:refresh`). One trigger keeps the local snapshot fresh: every
//! `--period` seconds, and on every message — bursts coalesce into one
//! follow-up refresh, and two refreshes never run at once. While Redis is
//! unreachable the refresh backs off (`RetryBackoff`); Ctrl-C / SIGTERM
//! shut it down cleanly and print the report.
//!
//! ```text
//! cargo run --release --example redis_config_refresh -- --spawn-server --run-for 5
//! cargo run --release --example redis_config_refresh -- --url redis://127.0.0.1:6379/
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

use circulation_trigger::{RetryBackoff, Scheduler, Trigger};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
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

fn main() {
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
    let snapshot = Arc::new(Mutex::new(Snapshot::default()));
    let refreshes = Arc::new(AtomicU64::new(0));
    let refresher = {
        let (snapshot, refreshes, url, period) = (
            snapshot.clone(),
            refreshes.clone(),
            url.clone(),
            options.period,
        );
        let mut con: Option<redis::Connection> = None;
        let mut backoff =
            RetryBackoff::new(Duration::from_millis(100), Duration::from_secs(10)).jitter(0.2);
        Trigger::builder(&scheduler)
            .name("config-refresh")
            .bind(move || {
                let read = (|| {
                    if con.is_none() {
                        con = Some(connect(&url)?);
                    }
                    redis::cmd("HGETALL")
                        .arg("config")
                        .query::<HashMap<String, String>>(con.as_mut().expect("connected"))
                })();
                match read {
                    Ok(fields) => {
                        refreshes.fetch_add(1, SeqCst);
                        let version = fields
                            .get("version")
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0);
                        let mut local = snapshot.lock().expect("snapshot");
                        if version > local.version {
                            println!("applied config v{version} ({} fields)", fields.len());
                            *local = Snapshot { version, fields };
                        }
                        backoff.succeeded(period)
                    }
                    Err(error) => {
                        con = None;
                        let delay = backoff.failed();
                        if let Some(delay) = delay {
                            eprintln!("refresh failed ({error}); retrying in {delay:?}");
                        }
                        delay
                    }
                }
            })
    };
    refresher.fire().expect("running");

    let messages = Arc::new(AtomicU64::new(0));
    let subscriber = {
        let (trigger, stop, url, messages) = (
            refresher.clone(),
            stop.clone(),
            url.clone(),
            messages.clone(),
        );
        thread::spawn(move || subscribe(&url, &trigger, &stop, &messages))
    };
    let publisher_stop = Arc::new(AtomicBool::new(false));
    let publisher = server.is_some().then(|| {
        let (stop, url) = (publisher_stop.clone(), url.clone());
        thread::spawn(move || demo_publisher(&url, &stop))
    });

    let started = Instant::now();
    let in_time = |limit: Option<Duration>| limit.map_or(true, |l| started.elapsed() < l);
    while !stop.load(SeqCst) && in_time(options.run_for) {
        thread::sleep(Duration::from_millis(50));
    }
    let signalled = stop.load(SeqCst);
    publisher_stop.store(true, SeqCst);
    let published = publisher.and_then(|p| p.join().expect("publisher"));
    if let Some(latest) = published.filter(|_| !signalled) {
        // Give the last burst a moment to be served (bounded).
        let waited = Instant::now();
        while snapshot.lock().expect("snapshot").version < latest
            && waited.elapsed() < Duration::from_secs(5)
        {
            thread::sleep(Duration::from_millis(10));
        }
    }
    stop.store(true, SeqCst);
    subscriber.join().expect("subscriber");
    let report = scheduler.shutdown_and_join();
    let stats = refresher.stats();
    let (version, greeting) = {
        let local = snapshot.lock().expect("snapshot");
        (local.version, local.fields.get("greeting").cloned())
    };
    println!("\n{report}");
    println!(
        "{} \"refresh now\" messages, {} refreshes ({} fires coalesced), local config v{version} (greeting {greeting:?})",
        messages.load(SeqCst),
        refreshes.load(SeqCst),
        stats.coalesced_fires
    );
    if let Some(latest) = published.filter(|_| !signalled) {
        // The demo's own check: the service ended on the newest version.
        assert_eq!(version, latest, "the service missed the latest version");
        assert!(
            refreshes.load(SeqCst) < messages.load(SeqCst),
            "no coalescing"
        );
    }
}

/// Fires `trigger` on every message of the channel; reconnects (with a
/// pause) when the connection breaks; until `stop`.
fn subscribe(url: &str, trigger: &Trigger, stop: &AtomicBool, messages: &AtomicU64) {
    while !stop.load(SeqCst) {
        let Ok(mut con) = connect(url) else {
            thread::sleep(Duration::from_millis(200));
            continue;
        };
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
                    let _ = trigger.fire();
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
