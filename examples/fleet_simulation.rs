//! A fleet of 100,000 clients refreshing their configuration from one
//! config center with a QPS cap, in virtual time. At t = 60 s a "refresh
//! now" broadcast reaches every client at once. Compares three ways of
//! answering it: `fire()` (a stampede), `fire_within(10 s)` (spread over
//! 10 s), and `fire_within(10 s)` with phase-keeping periods
//! ([`PhaseKeeper`]): peak load on the config center, requests rejected by
//! its cap, time until every client has the new configuration, and — over
//! the 300 s after the broadcast window — the highest one-second load over
//! the mean load. A client whose periodic chain restarts from the
//! broadcast refreshes in lockstep with the whole fleet ever after; one
//! that keeps its phase does not. Rejected clients retry with jittered
//! exponential back-off. At 370 s half the fleet restarts within 5 s (a
//! node's reboot): a client whose phase comes from its name and the wall
//! clock (`PhaseKeeper::keyed`) finds its old slots again; the others
//! restart their chains together.
//!
//! Prints one line per policy, then a markdown table, and writes an SVG
//! plot of the offered load per second.
//!
//! Run: `cargo run --release --example fleet_simulation [-- --svg PATH]`

use circulation_trigger::{
    policy::{jittered, seed_jitter, PhaseKeeper, RetryBackoff},
    Scheduler, Trigger,
};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CLIENTS: usize = 100_000;
const QPS_CAP: u64 = 15_000;
const PERIOD: Duration = Duration::from_secs(60);
const BROADCAST_AT: Duration = Duration::from_secs(60);
const SPREAD: Duration = Duration::from_secs(10);
/// How long after the broadcast window (and after the restart) the load
/// is watched.
const AFTER: Duration = Duration::from_secs(300);
/// Half the fleet restarts, each client starting within `START_SPREAD`.
const RESTART_AT: Duration = Duration::from_secs(60 + 10 + 300);
const START_SPREAD: Duration = Duration::from_secs(5);
const END: Duration = Duration::from_secs(60 + 10 + 300 + 5 + 300);

/// The config center: answers at most `QPS_CAP` queries per (virtual)
/// second and rejects the rest.
struct Center {
    version: u64,
    /// (accepted, rejected) per second.
    seconds: Vec<(u64, u64)>,
}

impl Center {
    fn query(&mut self, now: Duration) -> Option<u64> {
        let second = now.as_secs() as usize;
        if self.seconds.len() <= second {
            self.seconds.resize(second + 1, (0, 0));
        }
        let (accepted, rejected) = &mut self.seconds[second];
        if *accepted >= QPS_CAP {
            *rejected += 1;
            return None;
        }
        *accepted += 1;
        Some(self.version)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Policy {
    Fire,
    FireWithin,
    /// `fire_within`, and periods that keep their phase.
    FireWithinPhase,
}

impl Policy {
    fn name(self) -> &'static str {
        match self {
            Policy::Fire => "fire",
            Policy::FireWithin => "fire_within",
            Policy::FireWithinPhase => "fire_within+phase",
        }
    }
}

struct Run {
    name: &'static str,
    /// Offered load (accepted + rejected) per second.
    offered: Vec<u64>,
    peak: u64,
    rejected_after_broadcast: u64,
    all_updated_after: Option<Duration>,
    /// Highest one-second load over the mean, in the 300 s after the
    /// broadcast window.
    peak_over_mean: f64,
    /// The same, in the 300 s after half the fleet restarted.
    restart_peak_over_mean: f64,
    wall: Duration,
}

fn simulate(policy: Policy) -> Run {
    let started = Instant::now();
    seed_jitter(7); // tasks run on this thread in virtual time: deterministic
    let sim = Scheduler::builder().seed(42).build_virtual();
    let clock = sim.clock();
    let center = Arc::new(Mutex::new(Center {
        version: 0,
        seconds: Vec::new(),
    }));
    let updated = Arc::new(AtomicUsize::new(0));
    let all_updated_at = Arc::new(AtomicU64::new(u64::MAX));
    // A client's process starting, within `spread`: at time zero (over a
    // period), or again on a restart (a node's reboot).
    let start = |client: u64, spread: Duration| {
        let (center, updated, all_at, clock) = (
            center.clone(),
            updated.clone(),
            all_updated_at.clone(),
            clock.clone(),
        );
        let mut backoff = RetryBackoff::new(Duration::from_secs(1), Duration::from_secs(30))
            .jitter(0.5)
            .seed(client);
        let mut have = 0;
        // Each client's own phase, from its name and the wall clock: a
        // restarted client finds the same slots again.
        let phase = PhaseKeeper::keyed(PERIOD, &format!("client-{client}"), &sim);
        let keep_phase = policy == Policy::FireWithinPhase;
        let trigger = Trigger::bind(&sim, move || {
            let now = clock.now();
            let answer = center.lock().unwrap().query(now);
            match answer {
                Some(version) => {
                    if version > have {
                        have = version;
                        if updated.fetch_add(1, Relaxed) + 1 == CLIENTS {
                            all_at.store(now.as_micros() as u64, Relaxed);
                        }
                    }
                    backoff.succeeded(PERIOD);
                    if keep_phase {
                        Some(phase.next_delay())
                    } else {
                        Some(jittered(PERIOD, 0.1))
                    }
                }
                None => backoff.failed(),
            }
        });
        // The first fetch: within the spread, or on the client's own slot.
        if keep_phase {
            trigger.fire_after(phase.first_delay_from(sim.now()))
        } else {
            trigger.fire_within(spread)
        }
        .expect("running");
        trigger
    };
    let mut triggers: Vec<Trigger> = (0..CLIENTS as u64)
        .map(|client| start(client, PERIOD))
        .collect();

    sim.advance_to(BROADCAST_AT);
    center.lock().unwrap().version = 1;
    for trigger in &triggers {
        match policy {
            Policy::Fire => trigger.fire(),
            Policy::FireWithin | Policy::FireWithinPhase => trigger.fire_within(SPREAD),
        }
        .expect("running");
    }
    // Half the fleet restarts (its clients already updated: the counts
    // of the broadcast stay as they are).
    sim.advance_to(RESTART_AT);
    for (client, trigger) in triggers.iter_mut().take(CLIENTS / 2).enumerate() {
        *trigger = start(client as u64, START_SPREAD);
    }
    sim.advance_to(END);

    let center = center.lock().unwrap();
    let offered: Vec<u64> = center.seconds.iter().map(|(a, r)| a + r).collect();
    let broadcast_second = BROADCAST_AT.as_secs() as usize;
    let all_at = all_updated_at.load(Relaxed);
    let window_end = (BROADCAST_AT + SPREAD).as_secs() as usize;
    let after = &offered[window_end..window_end + AFTER.as_secs() as usize];
    let mean = after.iter().sum::<u64>() as f64 / after.len() as f64;
    let peak_after = after.iter().copied().max().unwrap_or(0);
    let restarted = RESTART_AT.as_secs() as usize + START_SPREAD.as_secs() as usize;
    let after_restart = &offered[restarted..restarted + AFTER.as_secs() as usize];
    let restart_mean = after_restart.iter().sum::<u64>() as f64 / after_restart.len() as f64;
    Run {
        name: policy.name(),
        peak_over_mean: peak_after as f64 / mean,
        restart_peak_over_mean: after_restart.iter().copied().max().unwrap_or(0) as f64
            / restart_mean,
        peak: offered.iter().copied().max().unwrap_or(0),
        rejected_after_broadcast: center.seconds[broadcast_second..]
            .iter()
            .map(|(_, r)| r)
            .sum(),
        all_updated_after: (all_at != u64::MAX)
            .then(|| Duration::from_micros(all_at) - BROADCAST_AT),
        offered,
        wall: started.elapsed(),
    }
}

/// One color per policy, in `Policy` order.
const COLORS: [&str; 3] = ["#e67e22", "#2471a3", "#1e8449"];

fn svg(runs: &[Run]) -> String {
    const W: f64 = 760.0;
    const H: f64 = 360.0;
    const LEFT: f64 = 70.0;
    const BOTTOM: f64 = 40.0;
    let seconds = END.as_secs() as f64;
    let max_log = 6.0; // 10^6 QPS
    let x = |s: f64| LEFT + s / seconds * (W - LEFT - 20.0);
    let y = |qps: f64| H - BOTTOM - (qps.max(1.0).log10() / max_log) * (H - BOTTOM - 20.0);
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="16" text-anchor="middle" font-size="14">Config-center load per second: 100,000 clients, broadcast at t = 60 s</text>
"#,
        W / 2.0
    );
    for power in 0..=6 {
        let qps = 10f64.powi(power);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" x2="{}" y1="{y0}" y2="{y0}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            W - 20.0,
            LEFT - 6.0,
            y(qps) + 4.0,
            qps,
            y0 = y(qps)
        );
    }
    for second in (0..=END.as_secs()).step_by(60) {
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">{second} s</text>"#,
            x(second as f64),
            H - BOTTOM + 16.0
        );
    }
    let _ = writeln!(
        out,
        r##"<line x1="{LEFT}" x2="{}" y1="{c}" y2="{c}" stroke="#c00" stroke-dasharray="6 4"/><text x="{}" y="{}" fill="#c00">QPS cap {QPS_CAP}</text>"##,
        W - 20.0,
        W - 150.0,
        y(QPS_CAP as f64) - 6.0,
        c = y(QPS_CAP as f64)
    );
    for (run, color) in runs.iter().zip(COLORS) {
        let points: Vec<String> = run
            .offered
            .iter()
            .enumerate()
            .map(|(s, &q)| format!("{:.1},{:.1}", x(s as f64 + 0.5), y(q as f64)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            points.join(" ")
        );
    }
    for (i, (run, color)) in runs.iter().zip(COLORS).enumerate() {
        let ly = 40.0 + 18.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{}" y="{}" width="14" height="4" fill="{color}"/><text x="{}" y="{}">{} (peak {} QPS; after the broadcast, peak/mean {:.2})</text>"#,
            LEFT + 20.0,
            ly - 4.0,
            LEFT + 40.0,
            ly,
            run.name,
            run.peak,
            run.peak_over_mean
        );
    }
    out.push_str("</svg>\n");
    out
}

fn main() {
    let path = std::env::args()
        .skip_while(|arg| arg != "--svg")
        .nth(1)
        .unwrap_or_else(|| "target/fleet_qps.svg".to_owned());
    let runs = [
        simulate(Policy::Fire),
        simulate(Policy::FireWithin),
        simulate(Policy::FireWithinPhase),
    ];
    for run in &runs {
        println!(
            "policy={} peak_qps={} rejected={} all_updated_s={} after_broadcast_peak_over_mean={:.2} after_restart_peak_over_mean={:.2}",
            run.name,
            run.peak,
            run.rejected_after_broadcast,
            run.all_updated_after
                .map_or("never".to_owned(), |d| format!("{:.1}", d.as_secs_f64())),
            run.peak_over_mean,
            run.restart_peak_over_mean
        );
    }
    println!(
        "\n{CLIENTS} clients, QPS cap {QPS_CAP}, period 60 s (± 10 %, or phase-keeping), \
         broadcast at 60 s, watched until {} s\n",
        END.as_secs()
    );
    println!("| broadcast policy | peak QPS offered | rejected by the cap | every client updated after | after the broadcast: peak / mean load | after half the fleet restarts: peak / mean | simulation wall time |");
    println!("|---|---|---|---|---|---|---|");
    for run in &runs {
        println!(
            "| `{}` | {} | {} | {} | {:.2} | {:.2} | {:.1} s |",
            run.name,
            run.peak,
            run.rejected_after_broadcast,
            run.all_updated_after
                .map_or("never".to_owned(), |d| format!("{:.1} s", d.as_secs_f64())),
            run.peak_over_mean,
            run.restart_peak_over_mean,
            run.wall.as_secs_f64()
        );
    }
    if let Some(parent) = std::path::Path::new(&path).parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::write(&path, svg(&runs)) {
        Ok(()) => println!("\nplot: {path}"),
        Err(error) => eprintln!("could not write {path}: {error}"),
    }
    let (stampede, spread, phased) = (&runs[0], &runs[1], &runs[2]);
    assert!(stampede.peak > QPS_CAP, "fire() should stampede");
    assert!(
        spread.peak <= QPS_CAP && phased.peak <= QPS_CAP,
        "fire_within should stay under the cap"
    );
    assert!(
        spread.peak_over_mean > 2.0,
        "without phase-keeping the fleet should refresh in lockstep"
    );
    assert!(
        phased.peak_over_mean <= 1.5,
        "with phase-keeping the load should return to flat: {:.2}",
        phased.peak_over_mean
    );
    assert!(
        spread.restart_peak_over_mean > 2.0,
        "clients restarted together without a kept phase should refresh together"
    );
    assert!(
        phased.restart_peak_over_mean <= 1.5,
        "a phase kept from the key and the wall clock should survive a restart: {:.2}",
        phased.restart_peak_over_mean
    );
}
