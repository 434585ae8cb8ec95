//! A real multi-process fleet against a real Redis: one `redis-server`, and
//! N client processes (this program, re-run with `--client`), each with its
//! own scheduler and one trigger that refreshes the configuration (`HGETALL
//! config`) on a jittered period and listens for "refresh now" on the
//! broadcast channel. The parent samples Redis's own command counters
//! (`INFO commandstats`) every 100 ms, broadcasts once under each policy —
//! `fire()`, `fire_within(window)`, and `fire_within(window)` with
//! phase-keeping periods — and prints the peak and mean load per policy.
//! It then runs the same fleet on virtual time, to see whether the
//! simulation predicts the real run, and writes an SVG of both.
//!
//! The fleet's clock is scaled: a 3 s period stands for a minute and a
//! 0.5 s broadcast window for 10 s (the `fleet_simulation` example's
//! 60 s and 10 s), so the whole run takes about a minute and a quarter.
//!
//! ```text
//! cargo run --release --example fleet_redis [-- --clients 200 --svg target/fleet_redis.svg]
//! ```

#[path = "../tests/common/fleet_chart.rs"]
mod fleet_chart;
#[path = "../tests/common/redis_server.rs"]
mod redis_server;

use circulation_trigger::{
    policy::{jittered, seed_jitter, PhaseKeeper},
    Scheduler, Trigger,
};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const CHANNEL: &str = "config:broadcast";
/// The refresh period (a minute, scaled).
const PERIOD: Duration = Duration::from_secs(3);
/// The broadcast window of `fire_within` (10 s, scaled).
const WINDOW: Duration = Duration::from_millis(500);
/// Flat running before the broadcast.
const WARM_UP: Duration = Duration::from_secs(6);
/// Watched after the broadcast window: five periods.
const WATCH: Duration = Duration::from_secs(15);
/// Redis's counters are sampled, and load counted, every bucket.
const BUCKET: Duration = Duration::from_millis(100);
/// Peak and mean load are judged over windows of this many buckets (half a
/// second, 10 s of the full-scale fleet): with a few hundred clients, a
/// tenth of a second holds too few refreshes to tell a wave from noise.
const JUDGED: usize = 5;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Policy {
    Fire,
    FireWithin,
    FireWithinPhase,
}

impl Policy {
    const ALL: [Policy; 3] = [Policy::Fire, Policy::FireWithin, Policy::FireWithinPhase];

    fn name(self) -> &'static str {
        match self {
            Policy::Fire => "fire",
            Policy::FireWithin => "fire_within",
            Policy::FireWithinPhase => "fire_within+phase",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == text)
    }
}

/// One client's task: its refresh, and the delay to the next one.
fn client_task(
    policy: Policy,
    mut refresh: impl FnMut() + Send + 'static,
) -> (
    impl FnMut() -> Option<Duration> + Send + 'static,
    PhaseKeeper,
) {
    let phase = PhaseKeeper::new(PERIOD).random_offset();
    let task = move || {
        refresh();
        Some(if policy == Policy::FireWithinPhase {
            phase.next_delay()
        } else {
            jittered(PERIOD, 0.1)
        })
    };
    (task, phase)
}

/// Arms a client's first refresh (spread over a period) and answers a
/// broadcast by the policy.
fn arm(trigger: &Trigger, policy: Policy, phase: &PhaseKeeper) {
    let armed = match policy {
        Policy::FireWithinPhase => trigger.fire_after(phase.first_delay_from(Duration::ZERO)),
        _ => trigger.fire_within(PERIOD),
    };
    armed.expect("running");
}

fn on_broadcast(trigger: &Trigger, policy: Policy) {
    let _ = match policy {
        Policy::Fire => trigger.fire(),
        Policy::FireWithin | Policy::FireWithinPhase => trigger.fire_within(WINDOW),
    };
}

/// `--client URL SEED POLICY`: one member of the fleet, until killed.
fn run_client(url: &str, seed: u64, policy: Policy) {
    seed_jitter(seed);
    let scheduler = Scheduler::builder().workers(1).build().expect("scheduler");
    let client = redis::Client::open(url).expect("url");
    let mut con = client.get_connection().expect("connect");
    let (task, phase) = client_task(policy, move || {
        let _: Result<Vec<String>, _> = redis::cmd("HGETALL").arg("config").query(&mut con);
    });
    let trigger = Trigger::bind(&scheduler, task);
    arm(&trigger, policy, &phase);
    let mut sub = client.get_connection().expect("connect");
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe(CHANNEL).expect("subscribe");
    // Until the parent kills this process (or the server goes away).
    while pubsub.get_message().is_ok() {
        on_broadcast(&trigger, policy);
    }
}

/// `HGETALL` calls Redis has served so far.
fn hgetall_calls(con: &mut redis::Connection) -> u64 {
    fleet_chart::hgetall_calls(con).unwrap_or(0)
}

/// One policy's load: refreshes per bucket, from the start of the fleet.
struct Load {
    policy: Policy,
    buckets: Vec<u64>,
}

impl Load {
    /// The bucket index of an instant since the fleet's start.
    fn bucket(at: Duration) -> usize {
        (at.as_nanos() / BUCKET.as_nanos()) as usize
    }

    /// (peak, mean, peak / mean) per second over the watch after the
    /// window, judged on windows of [`JUDGED`] buckets.
    fn after_broadcast(&self) -> (f64, f64, f64) {
        let from = Self::bucket(WARM_UP + WINDOW);
        let to = Self::bucket(WARM_UP + WINDOW + WATCH);
        fleet_chart::peak_over_mean(&self.buckets, from, to, JUDGED, BUCKET)
    }

    fn peak(&self) -> u64 {
        self.buckets.iter().copied().max().unwrap_or(0)
    }
}

/// The real fleet under `policy`: `clients` processes against a fresh
/// server; Redis's counters sampled every bucket.
fn real(policy: Policy, clients: usize) -> Load {
    let server = redis_server::RedisServer::start().expect("redis-server");
    let mut admin = redis::Client::open(server.url())
        .and_then(|c| c.get_connection())
        .expect("connect");
    let exe = std::env::current_exe().expect("own path");
    let mut children: Vec<Child> = (0..clients)
        .map(|seed| {
            Command::new(&exe)
                .args(["--client", &server.url(), &seed.to_string(), policy.name()])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("client process")
        })
        .collect();
    // Wait until every client listens (bounded).
    let ready_by = Instant::now() + Duration::from_secs(60);
    while subscribers(&mut admin) < clients && Instant::now() < ready_by {
        thread::sleep(Duration::from_millis(20));
    }
    let start = Instant::now();
    let base = hgetall_calls(&mut admin);
    let mut buckets = Vec::new();
    let mut last = base;
    let mut broadcast = false;
    let end = WARM_UP + WINDOW + WATCH + BUCKET;
    let mut next = BUCKET;
    while next <= end {
        thread::sleep((start + next).saturating_duration_since(Instant::now()));
        if !broadcast && next >= WARM_UP {
            let _: Result<(), _> = redis::cmd("PUBLISH")
                .arg(CHANNEL)
                .arg("now")
                .query(&mut admin);
            broadcast = true;
        }
        let calls = hgetall_calls(&mut admin);
        buckets.push(calls - last);
        last = calls;
        next += BUCKET;
    }
    for child in &mut children {
        let _ = child.kill();
    }
    for child in &mut children {
        let _ = child.wait();
    }
    Load { policy, buckets }
}

fn subscribers(con: &mut redis::Connection) -> usize {
    redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(CHANNEL)
        .query::<(String, usize)>(con)
        .map_or(0, |(_, n)| n)
}

/// The same fleet on virtual time: the same tasks, counted per bucket.
fn simulated(policy: Policy, clients: usize) -> Load {
    let sim = Scheduler::builder().seed(7).build_virtual();
    let clock = sim.clock();
    let buckets = Arc::new(Mutex::new(Vec::<u64>::new()));
    let triggers: Vec<Trigger> = (0..clients as u64)
        .map(|seed| {
            seed_jitter(seed);
            let (buckets, clock) = (buckets.clone(), clock.clone());
            let (task, phase) = client_task(policy, move || {
                let bucket = Load::bucket(clock.now());
                let mut buckets = buckets.lock().unwrap();
                if buckets.len() <= bucket {
                    buckets.resize(bucket + 1, 0);
                }
                buckets[bucket] += 1;
            });
            let trigger = Trigger::bind(&sim, task);
            arm(&trigger, policy, &phase);
            trigger
        })
        .collect();
    sim.advance_to(WARM_UP);
    for trigger in &triggers {
        on_broadcast(trigger, policy);
    }
    sim.advance_to(WARM_UP + WINDOW + WATCH + BUCKET);
    let buckets = buckets.lock().unwrap().clone();
    Load { policy, buckets }
}

fn svg(real: &[Load], simulated: &[Load], clients: usize) -> String {
    const COLORS: [&str; 3] = ["#e67e22", "#2471a3", "#1e8449"];
    let span = (WARM_UP + WINDOW + WATCH).as_secs_f64();
    let max = real
        .iter()
        .chain(simulated)
        .map(Load::peak)
        .max()
        .unwrap_or(1);
    let title = format!(
        "Redis HGETALL per second: {clients} client processes, broadcast at t = {} s (solid: real, dashed: virtual time)",
        WARM_UP.as_secs()
    );
    let mut chart = fleet_chart::Chart::new(&title, span, max, BUCKET);
    for (loads, dash) in [(real, ""), (simulated, r#" stroke-dasharray="5 3""#)] {
        for (load, color) in loads.iter().zip(COLORS) {
            chart.line(&load.buckets, color, dash);
        }
    }
    for (i, (load, color)) in real.iter().zip(COLORS).enumerate() {
        let (_, _, ratio) = load.after_broadcast();
        let text = format!(
            "{} (after the broadcast, peak/mean {ratio:.2})",
            load.policy.name()
        );
        chart.legend(i, color, &text);
    }
    chart.finish()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--client") {
        let (url, seed, policy) = (&args[1], &args[2], &args[3]);
        run_client(
            url,
            seed.parse().expect("seed"),
            Policy::parse(policy).expect("policy"),
        );
        return;
    }
    let mut clients = 200usize;
    let mut path = "target/fleet_redis.svg".to_owned();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match (arg.as_str(), rest.next()) {
            ("--clients", Some(n)) => clients = n.parse().expect("--clients N"),
            ("--svg", Some(p)) => path = p.clone(),
            _ => {
                eprintln!("options: --clients N (200), --svg PATH");
                std::process::exit(2);
            }
        }
    }
    let per_second = 1.0 / BUCKET.as_secs_f64();
    let mut reals = Vec::new();
    let mut sims = Vec::new();
    for policy in Policy::ALL {
        let load = real(policy, clients);
        let sim = simulated(policy, clients);
        for (kind, load) in [("real", &load), ("virtual", &sim)] {
            let (peak, mean, ratio) = load.after_broadcast();
            println!(
                "policy={} run={kind} peak_qps={:.0} after_broadcast_peak_qps={peak:.0} after_broadcast_mean_qps={mean:.0} after_broadcast_peak_over_mean={ratio:.2}",
                policy.name(),
                load.peak() as f64 * per_second,
            );
        }
        reals.push(load);
        sims.push(sim);
    }
    if let Some(parent) = std::path::Path::new(&path).parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::write(&path, svg(&reals, &sims, clients)) {
        Ok(()) => println!("plot: {path}"),
        Err(error) => eprintln!("could not write {path}: {error}"),
    }
}
