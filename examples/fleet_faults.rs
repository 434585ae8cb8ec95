//! A real multi-process fleet against a real Redis through the store's
//! faults: one `redis-server` and N client processes (this program, re-run
//! with `--client`), each the crate's recommended refresher
//! (`tests/common/fleet_client.rs`: phase-keeping periods, `fire_within`
//! on a broadcast, a jittered back-off that never waits past its next
//! phase slot, a listener that resubscribes). Five runs, each on a fresh
//! server:
//!
//! * **restart**: the server is killed (SIGKILL) for two periods and
//!   restarted empty; the parent then writes a new version and broadcasts
//!   it — clients not yet subscribed again catch up on their next refresh;
//! * **pause**: `CLIENT PAUSE` for two periods (fetches time out), then a
//!   new version;
//! * **flood**: 20,000 "refresh now" messages (`--flood N`), pipelined —
//!   4 million deliveries to 200 clients, which a 2-core machine running
//!   the server and every client takes seconds to deliver; once the last
//!   is delivered, a new version and one broadcast;
//! * **cold_start**: the fleet starts while the server is down, each
//!   client with the local copy a previous run saved (version 1): every
//!   client serves it at once; the server comes back with version 2;
//! * **rolling_restart**: the clients restart in four waves, a quarter at
//!   a time in the order of their numbers, then a new version; its second
//!   line gives the load's peak/mean through the waves and how evenly the
//!   fetches fall over ten bins of the period afterwards.
//!
//! The parent samples Redis's own counters (`INFO commandstats`) every
//! 100 ms and prints one `key=value` line per fault: the load's peak/mean
//! over the four periods after the store returns and the broadcast window
//! that follows it, the time until every client holds the new version
//! (from `fleet:seen`, which each client writes after a good fetch)
//! against the goal of one period plus the window, and, from each client's
//! own report as it exits, the most fetches it ever had in flight (1 by
//! G1) and how much its RSS grew through the run. It writes an SVG of the
//! runs' load.
//!
//! ```text
//! cargo run --release --example fleet_faults [-- --clients 200 --svg target/fleet_faults.svg]
//! ```

#[path = "../tests/common/fleet_chart.rs"]
mod fleet_chart;
#[path = "../tests/common/fleet_client.rs"]
mod fleet_client;
#[path = "../tests/common/redis_server.rs"]
mod redis_server;

use fleet_client::{Client, Tuning, CHANNEL};
use redis_server::{set_version, RedisServer};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering::Relaxed;
use std::thread;
use std::time::{Duration, Instant};

/// A minute, scaled (as in `fleet_redis.rs`).
const PERIOD: Duration = Duration::from_secs(3);
const TUNING: Tuning = Tuning {
    period: PERIOD,
    window: Duration::from_millis(500),
    retry: Duration::from_secs(1),
    fetch_timeout: Duration::from_millis(300),
};
/// Flat running before the fault.
const WARM_UP: Duration = Duration::from_secs(6);
/// How long the store is away (restart, pause).
const AWAY: Duration = Duration::from_secs(6);
/// Waves of a rolling restart, spread over [`AWAY`].
const WAVES: u32 = 4;
/// Watched after the store returns: four periods.
const WATCH: Duration = Duration::from_secs(12);
const BUCKET: Duration = Duration::from_millis(100);
/// Peak and mean are judged over windows of this many buckets.
const JUDGED: usize = 5;
/// "Refresh now" messages in the flood (`--flood N`): each reaches every
/// client, so the store delivers `clients ×` this many.
const FLOOD: u64 = 20_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fault {
    Restart,
    Pause,
    Flood,
    ColdStart,
    RollingRestart,
}

impl Fault {
    const ALL: [Fault; 5] = [
        Fault::Restart,
        Fault::Pause,
        Fault::Flood,
        Fault::ColdStart,
        Fault::RollingRestart,
    ];

    fn name(self) -> &'static str {
        match self {
            Fault::Restart => "restart",
            Fault::Pause => "pause",
            Fault::Flood => "flood",
            Fault::ColdStart => "cold_start",
            Fault::RollingRestart => "rolling_restart",
        }
    }

    /// How long the store is away (the flood: while it is sent; a cold
    /// start: from the start, through the warm-up; a rolling restart: the
    /// waves).
    fn away(self) -> Duration {
        match self {
            Fault::Restart | Fault::Pause | Fault::ColdStart | Fault::RollingRestart => AWAY,
            Fault::Flood => Duration::ZERO,
        }
    }
}

/// `--client URL ID FLOOD [COPY]`: one member of the fleet (keeping its
/// local copy at `COPY`, if given), until its stdin closes (counting itself
/// in `fleet:drained` once it received `FLOOD` messages);
/// then prints `max_in_flight=… rss_growth_kib=… refreshes=… from_copy=…`.
fn run_client(url: &str, id: u64, flood: u64, copy: Option<&str>) {
    let rss_start = fleet_client::rss_kib();
    let mut client = Client::start_with_copy(url, id, TUNING, copy.map(std::path::Path::new));
    let mut rss_max = rss_start;
    let mut drained = false;
    let (done_tx, done) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        let _ = done_tx.send(());
    });
    while done.recv_timeout(Duration::from_millis(50)).is_err() {
        rss_max = rss_max.max(fleet_client::rss_kib());
        // Tell the parent once this client has taken in the whole flood.
        if !drained && client.stats.messages.load(Relaxed) >= flood {
            drained = redis::Client::open(url)
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(1)))
                .and_then(|mut con| {
                    redis::cmd("INCR")
                        .arg("fleet:drained")
                        .query::<u64>(&mut con)
                })
                .is_ok();
        }
    }
    client.stop();
    let stats = &client.stats;
    println!(
        "max_in_flight={} rss_growth_kib={} refreshes={} failures={} messages={} from_copy={}",
        stats.max_in_flight.load(Relaxed),
        rss_max.saturating_sub(rss_start),
        stats.refreshes.load(Relaxed),
        stats.failures.load(Relaxed),
        stats.messages.load(Relaxed),
        u8::from(stats.from_copy.load(Relaxed)),
    );
}

/// A client process, with the pipe whose closing stops it.
struct Member(Child);

impl Member {
    /// Closes its stdin: it stops.
    fn close(&mut self) {
        drop(self.0.stdin.take());
    }

    /// Closes its stdin and reads its report.
    fn finish(mut self) -> String {
        self.close();
        let mut report = String::new();
        if let Some(stdout) = self.0.stdout.take() {
            let _ = BufReader::new(stdout).read_line(&mut report);
        }
        let _ = self.0.wait();
        report
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `key=value` of a client's report line.
fn field(report: &str, key: &str) -> u64 {
    report
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn admin(server: &RedisServer) -> redis::Connection {
    let con = redis::Client::open(server.url())
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .expect("admin connection");
    con.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    con
}

/// Clients that have taken in the whole flood (each counts itself).
fn drained_clients(con: &mut redis::Connection) -> usize {
    redis::cmd("GET")
        .arg("fleet:drained")
        .query::<Option<usize>>(con)
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// Clients whose last good fetch saw `version`.
fn holding(con: &mut redis::Connection, version: u64) -> usize {
    let seen: Vec<String> = redis::cmd("HVALS")
        .arg("fleet:seen")
        .query(con)
        .unwrap_or_default();
    seen.iter().filter(|v| **v == version.to_string()).count()
}

/// What one fault's run measured.
struct Run {
    fault: Fault,
    buckets: Vec<u64>,
    /// Bucket index at which the store returned (the flood: was delivered).
    returned: usize,
    /// How long the store was away (the flood: took to deliver).
    away: Duration,
    converged_after: Option<Duration>,
    reports: Vec<String>,
}

impl Run {
    /// (peak, mean, peak/mean) of HGETALL/s over [`WATCH`] from `from`.
    fn load_after(&self, from: usize) -> (f64, f64, f64) {
        let to = from + (WATCH.as_millis() / BUCKET.as_millis()) as usize;
        fleet_chart::peak_over_mean(&self.buckets, from, to, JUDGED, BUCKET)
    }
}

impl Run {
    /// max/mean of the calls in ten bins of the period (by the time of
    /// each call modulo the period) over [`WATCH`] from `from`: how evenly
    /// the fleet's fetches are spread over its phases.
    fn phase_bins_max_over_mean(&self, from: usize) -> f64 {
        let per_period = (PERIOD.as_millis() / BUCKET.as_millis()) as usize;
        let to = (from + (WATCH.as_millis() / BUCKET.as_millis()) as usize).min(self.buckets.len());
        let mut bins = [0_u64; 10];
        for (i, calls) in self.buckets[from.min(to)..to].iter().enumerate() {
            bins[i % per_period * 10 / per_period] += calls;
        }
        let mean = bins.iter().sum::<u64>() as f64 / 10.0;
        bins.iter().copied().max().unwrap_or(0) as f64 / mean.max(f64::MIN_POSITIVE)
    }
}

fn run(fault: Fault, clients: usize, flood: u64) -> Run {
    let mut server = RedisServer::start().expect("redis-server");
    let mut con = admin(&server);
    set_version(&mut con, 1);
    let exe = std::env::current_exe().expect("own path");
    // A cold start: each client's copy of version 1, as a previous run
    // left it, and no server until the fault's end.
    let copies = std::env::temp_dir().join(format!("fleet-copies-{}", std::process::id()));
    let copy_of = |id: u64| copies.join(format!("client-{id}.copy"));
    if fault == Fault::ColdStart {
        std::fs::create_dir_all(&copies).expect("copies directory");
        for id in 0..clients as u64 {
            fleet_client::local_copy(&copy_of(id))
                .save(
                    &1,
                    Some(&circulation_trigger::refresh::Validator::from(1_u64)),
                )
                .expect("a client's copy");
        }
        server.kill();
    }
    let url = server.url();
    let spawn = |id: u64| {
        let mut command = Command::new(&exe);
        command
            .args(["--client", &url, &id.to_string()])
            .arg(flood.to_string());
        if fault == Fault::ColdStart {
            command.arg(copy_of(id));
        }
        Member(
            command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("client process"),
        )
    };
    let mut members: Vec<Member> = (0..clients as u64).map(spawn).collect();
    let mut reports = Vec::new();
    // Every client on version 1 (bounded; a cold start has no store).
    let ready_by = Instant::now() + Duration::from_secs(60);
    while fault != Fault::ColdStart && holding(&mut con, 1) < clients && Instant::now() < ready_by {
        thread::sleep(Duration::from_millis(50));
    }
    // For the flood: a subscriber of the parent's own says when the last
    // message is delivered — the flood is over then, not when sent.
    let delivered = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    if fault == Fault::Flood {
        let (url, delivered) = (server.url(), delivered.clone());
        let (subscribed_tx, subscribed) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let mut sub = redis::Client::open(url)
                .and_then(|c| c.get_connection())
                .expect("subscriber");
            let _ = sub.set_read_timeout(Some(Duration::from_secs(120)));
            let mut pubsub = sub.as_pubsub();
            pubsub.subscribe(CHANNEL).expect("subscribe");
            let _ = subscribed_tx.send(());
            let mut got = 0;
            while got < flood && pubsub.get_message().is_ok() {
                got += 1;
            }
            delivered.store(true, Relaxed);
        });
        subscribed
            .recv_timeout(Duration::from_secs(10))
            .expect("subscribed");
    }
    let start = Instant::now();
    let mut buckets = Vec::new();
    let mut last = if fault == Fault::ColdStart {
        0
    } else {
        fleet_chart::hgetall_calls(&mut con).unwrap_or(0)
    };
    let mut returned_at = WARM_UP + fault.away();
    // The flood's end is known when it comes (bounded: two minutes).
    let mut end = returned_at
        + WATCH
        + PERIOD
        + if fault == Fault::Flood {
            Duration::from_secs(120)
        } else {
            Duration::ZERO
        };
    let (mut faulted, mut returned, mut converged_after) = (false, false, None);
    let mut waves = 0;
    // The loop keeps real time: a fault's own step (the flood's pipeline,
    // a restart) can block it for seconds, and the buckets it was blocked
    // through share the calls made then, at their real times.
    while buckets.len() * BUCKET.as_millis() as usize <= end.as_millis() as usize {
        let next = BUCKET * (buckets.len() as u32 + 1);
        thread::sleep((start + next).saturating_duration_since(Instant::now()));
        if !faulted && next >= WARM_UP {
            faulted = true;
            match fault {
                Fault::Restart => server.kill(),
                Fault::Pause => {
                    let _: Result<(), _> = redis::cmd("CLIENT")
                        .arg("PAUSE")
                        .arg(AWAY.as_millis() as u64)
                        .arg("ALL")
                        .query(&mut con);
                }
                // Away since the start; the waves are below.
                Fault::ColdStart | Fault::RollingRestart => {}
                Fault::Flood => {
                    let mut pipe = redis::pipe();
                    for _ in 0..flood {
                        pipe.cmd("PUBLISH").arg(CHANNEL).arg("now").ignore();
                    }
                    let _: Result<(), _> = pipe.query(&mut con);
                }
            }
        }
        // A rolling restart: each wave stops a quarter of the fleet (in
        // the order of their numbers, as a deploy goes) and starts it again.
        if fault == Fault::RollingRestart && waves < WAVES && next >= WARM_UP + AWAY / WAVES * waves
        {
            let wave = clients * waves as usize / WAVES as usize
                ..clients * (waves as usize + 1) / WAVES as usize;
            let mut stopping: Vec<Member> =
                members.splice(wave.clone(), std::iter::empty()).collect();
            // All of the wave stop at once; then their reports are read.
            stopping.iter_mut().for_each(Member::close);
            reports.extend(stopping.into_iter().map(Member::finish));
            let started: Vec<Member> = wave.clone().map(|id| spawn(id as u64)).collect();
            members.splice(wave.start..wave.start, started);
            waves += 1;
        }
        // The flood is over when every client has taken it all in.
        let flood_over = fault == Fault::Flood
            && faulted
            && !returned
            && delivered.load(Relaxed)
            && drained_clients(&mut con) >= clients;
        if flood_over {
            returned_at = start.elapsed();
            end = returned_at + WATCH + PERIOD;
        }
        if faulted
            && !returned
            && start.elapsed() >= returned_at
            && (fault != Fault::Flood || flood_over)
        {
            returned = true;
            returned_at = start.elapsed();
            if matches!(fault, Fault::Restart | Fault::ColdStart) {
                server.restart().expect("restart");
                con = admin(&server);
            }
            // The new version, and a broadcast: only clients subscribed
            // (again) hear it; the others catch up on their next refresh.
            set_version(&mut con, 2);
            let _: Result<u64, _> = redis::cmd("PUBLISH")
                .arg(CHANNEL)
                .arg("now")
                .query(&mut con);
        }
        let calls = if fault == Fault::ColdStart && !returned {
            0
        } else {
            fleet_chart::hgetall_calls(&mut con).unwrap_or(last)
        };
        // A restarted server counts from zero again.
        let gained = calls.checked_sub(last).unwrap_or(calls);
        last = calls;
        let now = start.elapsed();
        let due = (now.as_millis() / BUCKET.as_millis()) as usize;
        let spanned = due.saturating_sub(buckets.len()).max(1) as u64;
        for i in 0..spanned {
            buckets.push(gained / spanned + u64::from(i < gained % spanned));
        }
        if returned && converged_after.is_none() && holding(&mut con, 2) == clients {
            converged_after = Some(start.elapsed().saturating_sub(returned_at));
        }
    }
    reports.extend(members.into_iter().map(Member::finish));
    if fault == Fault::ColdStart {
        let _ = std::fs::remove_dir_all(&copies);
    }
    Run {
        fault,
        buckets,
        returned: (returned_at.as_millis() / BUCKET.as_millis()) as usize,
        away: returned_at.saturating_sub(WARM_UP),
        converged_after,
        reports,
    }
}

fn svg(runs: &[Run], clients: usize) -> String {
    const COLORS: [&str; 5] = ["#c0392b", "#2471a3", "#1e8449", "#7d3c98", "#b7950b"];
    let buckets = runs.iter().map(|r| r.buckets.len()).max().unwrap_or(1);
    let span = buckets as f64 * BUCKET.as_secs_f64();
    let max = runs
        .iter()
        .flat_map(|r| r.buckets.iter().copied())
        .max()
        .unwrap_or(1);
    let title = format!(
        "Redis HGETALL per second: {clients} client processes through a store restart, a pause, a flood, a cold start and a rolling restart"
    );
    let mut chart = fleet_chart::Chart::new(&title, span, max, BUCKET);
    chart.shade(
        WARM_UP.as_secs_f64(),
        (WARM_UP + AWAY).as_secs_f64(),
        "store away (restart, pause); the flood is sent at its start",
    );
    for (i, (run, color)) in runs.iter().zip(COLORS).enumerate() {
        chart.line(&run.buckets, color, "");
        let (_, _, ratio) = run.load_after(judged_from(run));
        let text = format!(
            "{} (after the store returns, peak/mean {ratio:.2})",
            run.fault.name()
        );
        chart.legend(i, color, &text);
    }
    chart.finish()
}

/// Where the load is judged from: the store's return plus the broadcast
/// window, as `fleet_redis.rs` judges a broadcast — the broadcast sent on
/// the return is meant to bring the fleet in within the window; what
/// follows shows whether it (and the clients' reconnections and retries)
/// left a herd behind.
fn judged_from(run: &Run) -> usize {
    run.returned + (TUNING.window.as_millis() / BUCKET.as_millis()) as usize
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--client") {
        run_client(
            &args[1],
            args[2].parse().expect("client id"),
            args[3].parse().expect("flood size"),
            args.get(4).map(String::as_str),
        );
        return;
    }
    let mut clients = 200usize;
    let mut flood = FLOOD;
    let mut only: Option<String> = None;
    let mut path = "target/fleet_faults.svg".to_owned();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match (arg.as_str(), rest.next()) {
            ("--clients", Some(n)) => clients = n.parse().expect("--clients N"),
            ("--svg", Some(p)) => path = p.clone(),
            ("--flood", Some(n)) => flood = n.parse().expect("--flood N"),
            ("--only", Some(name)) => only = Some(name.clone()),
            _ => {
                eprintln!(
                    "options: --clients N (200), --flood N (20000), --only restart|pause|flood|cold_start|rolling_restart, --svg PATH"
                );
                std::process::exit(2);
            }
        }
    }
    let goal = PERIOD + TUNING.window;
    let mut runs = Vec::new();
    let mut failed = false;
    for fault in Fault::ALL {
        if only.as_deref().is_some_and(|name| name != fault.name()) {
            continue;
        }
        let started = Instant::now();
        let run = run(fault, clients, flood);
        let (peak, mean, ratio) = run.load_after(judged_from(&run));
        let max_in_flight = run
            .reports
            .iter()
            .map(|r| field(r, "max_in_flight"))
            .max()
            .unwrap_or(0);
        let rss = run
            .reports
            .iter()
            .map(|r| field(r, "rss_growth_kib"))
            .max()
            .unwrap_or(0);
        let refreshes: u64 = run.reports.iter().map(|r| field(r, "refreshes")).sum();
        let messages: u64 = run.reports.iter().map(|r| field(r, "messages")).sum();
        let converged = run
            .converged_after
            .map_or("never".to_owned(), |d| format!("{:.1}", d.as_secs_f64()));
        println!(
            "fault={} clients={clients} away_s={:.1} after_return_peak_qps={peak:.0} after_return_mean_qps={mean:.0} after_return_peak_over_mean={ratio:.2} converged_after_s={converged} goal_s={:.1} max_in_flight={max_in_flight} rss_growth_kib_max={rss} refreshes_per_client={:.1} messages_per_client={:.0} run_s={:.0}",
            fault.name(),
            run.away.as_secs_f64(),
            goal.as_secs_f64(),
            refreshes as f64 / clients as f64,
            messages as f64 / clients as f64,
            started.elapsed().as_secs_f64(),
        );
        let from_copy = run
            .reports
            .iter()
            .filter(|r| field(r, "from_copy") == 1)
            .count();
        if fault == Fault::ColdStart {
            println!("fault=cold_start clients_serving_their_copy_at_start={from_copy}");
        }
        if fault == Fault::RollingRestart {
            let waves = (WARM_UP.as_millis() / BUCKET.as_millis()) as usize;
            let (_, _, during) =
                fleet_chart::peak_over_mean(&run.buckets, waves, run.returned, JUDGED, BUCKET);
            println!(
                "fault=rolling_restart during_waves_peak_over_mean={during:.2} phase_bins_max_over_mean={:.2}",
                run.phase_bins_max_over_mean(judged_from(&run))
            );
        }
        // Hard failures only: overlap, a report missing, no convergence,
        // a cold start without the copy.
        failed |= max_in_flight != 1 || run.reports.iter().any(|r| r.is_empty());
        failed |= fault == Fault::ColdStart && from_copy != clients;
        failed |= run.converged_after.is_none();
        runs.push(run);
    }
    if let Some(parent) = std::path::Path::new(&path).parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::write(&path, svg(&runs, clients)) {
        Ok(()) => println!("plot: {path}"),
        Err(error) => eprintln!("could not write {path}: {error}"),
    }
    if failed {
        eprintln!("a fault run broke a guarantee: see the lines above");
        std::process::exit(1);
    }
}
