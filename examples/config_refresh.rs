//! The main demo: a service keeps its configuration fresh from a config
//! center that caps its query rate.
//!
//! * a periodic refresh (every 500 ms, later retuned to 200 ms at run time);
//! * bursts of "refresh now" messages from three message-bus threads;
//! * a feature switch that pauses the job at 4 s (the bus's messages are
//!   then refused) and resumes it at 6 s.
//!
//! The fetch owns its state (`ConfigCenter` with a call counter, a rate
//! limiter) as plain `FnMut` state: fetches never overlap, so no `Mutex`
//! is needed — and the demo counts overlaps to show it (always 0). The
//! refresher's cooldown, set to 150 ms, keeps the bursts from overrunning
//! the store: at most 7 fetches start in any second, under its 10 QPS cap,
//! however the machine delays the bus.
//!
//! Run: `cargo run --release --example config_refresh`

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::refresh::Fetched;
use circulation_trigger::{FireError, Refresh, Scheduler};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const RUN_FOR: Duration = Duration::from_secs(10);
const LATENCY: Duration = Duration::from_millis(3);
const QPS_CAP: u32 = 10;

/// A simulated remote config center: answers after `LATENCY`, at most
/// `QPS_CAP` queries per second; the rest are rejected.
struct ConfigCenter {
    calls: u64,
    window: Instant,
    in_window: u32,
}

impl ConfigCenter {
    fn new() -> Self {
        Self {
            calls: 0,
            window: Instant::now(),
            in_window: 0,
        }
    }

    /// Fetches the configuration version, or `None` if rate-limited.
    fn fetch(&mut self) -> Option<u64> {
        self.calls += 1;
        if self.window.elapsed() >= Duration::from_secs(1) {
            self.window = Instant::now();
            self.in_window = 0;
        }
        if self.in_window >= QPS_CAP {
            return None;
        }
        self.in_window += 1;
        thread::sleep(LATENCY);
        Some(self.calls / 10)
    }
}

/// Counters the demo prints; the task and the bus threads update them.
#[derive(Default)]
struct Stats {
    refreshes: AtomicU64,
    urgent_refreshes: AtomicU64,
    rejected: AtomicU64,
    fires: AtomicU64,
    /// "Refresh now" messages refused while the switch was off.
    refused: AtomicU64,
    overlaps: AtomicU64,
}

fn main() {
    let scheduler = Scheduler::builder()
        .thread_name_prefix("config-")
        .build()
        .expect("start the scheduler");
    let stats = Arc::new(Stats::default());
    let period_ms = Arc::new(AtomicU64::new(500));
    let urgent = Arc::new(AtomicBool::new(false));
    let inside = Arc::new(AtomicBool::new(false));

    let refresh = {
        let (stats, period_ms, urgent, inside) = (
            stats.clone(),
            period_ms.clone(),
            urgent.clone(),
            inside.clone(),
        );
        let mut center = ConfigCenter::new(); // the fetch's state, no lock
        Refresh::builder(&scheduler)
            // The store takes 10 QPS: one fetch start per 150 ms at most.
            .trigger(|t| {
                t.name("config-refresh")
                    .policies(TriggerPolicies::new().min_interval(Duration::from_millis(150)))
            })
            // The period, tuned at run time, comes with each fetch.
            .bind_conditional(move |_| {
                if inside.swap(true, Relaxed) {
                    stats.overlaps.fetch_add(1, Relaxed);
                }
                if urgent.swap(false, Relaxed) {
                    stats.urgent_refreshes.fetch_add(1, Relaxed);
                }
                let fetched = center.fetch();
                if fetched.is_none() {
                    stats.rejected.fetch_add(1, Relaxed);
                }
                stats.refreshes.fetch_add(1, Relaxed);
                inside.store(false, Relaxed);
                let period = Duration::from_millis(period_ms.load(Relaxed));
                fetched
                    .map(|version| Fetched::changed(version).next_after(period))
                    .ok_or("rate-limited")
            })
    };
    refresh.refresh_now().expect("scheduler is running");

    // The message bus: three threads deliver bursts of "refresh now".
    let start = Instant::now();
    let bus: Vec<_> = (0..3u64)
        .map(|i| {
            let (refresh, stats, urgent) = (refresh.clone(), stats.clone(), urgent.clone());
            thread::spawn(move || {
                thread::sleep(Duration::from_millis(100 * i));
                while start.elapsed() < RUN_FOR {
                    for _ in 0..25 {
                        on_refresh_now(&refresh, &urgent, &stats);
                    }
                    thread::sleep(Duration::from_millis(300));
                }
            })
        })
        .collect();

    println!("circulation-trigger demo: periodic config refresh + bursts of refresh-now messages (counts are cumulative)");
    let mut switch_on = true;
    // Refreshes counted when the switch went off, and while it was off
    // (at most the one in flight at the pause may still end then).
    let (mut at_pause, mut while_off) = (0, 0);
    for second in 1..=RUN_FOR.as_secs() {
        thread::sleep(
            (start + Duration::from_secs(second)).saturating_duration_since(Instant::now()),
        );
        match second {
            4 => {
                // Feature switch off: a mode, not a cancel — the bus's
                // "refresh now" messages are refused until `resume`.
                refresh.pause();
                at_pause = stats.refreshes.load(Relaxed);
                switch_on = false;
            }
            6 => {
                while_off = stats.refreshes.load(Relaxed) - at_pause;
                // Feature switch on: refresh at once, then on the period.
                refresh
                    .trigger()
                    .resume_after(Duration::ZERO)
                    .expect("scheduler is running");
                switch_on = true;
            }
            7 => {
                period_ms.store(200, Relaxed); // retune at run time...
                refresh
                    .trigger()
                    .fire_after(Duration::from_millis(200))
                    .expect("running"); // ...effective now
            }
            _ => {}
        }
        print_line(second, &stats, switch_on, period_ms.load(Relaxed));
    }
    bus.into_iter().for_each(|b| b.join().expect("bus thread"));
    refresh.trigger().suspend();
    scheduler.shutdown();
    let terminated = scheduler.await_termination(Duration::from_secs(5));

    let fires = stats.fires.load(Relaxed);
    let urgent_refreshes = stats.urgent_refreshes.load(Relaxed);
    let overlaps = stats.overlaps.load(Relaxed);
    println!("---");
    println!(
        "summary: {} refreshes ({} served refresh-now bursts), {} fires ({} of them coalesced), {} rejected by the QPS cap, {} overlaps, {} refreshes ended while switched off (at most the one in flight), clean shutdown: {}",
        stats.refreshes.load(Relaxed),
        urgent_refreshes,
        fires,
        fires.saturating_sub(urgent_refreshes),
        stats.rejected.load(Relaxed),
        overlaps,
        while_off,
        terminated,
    );
    println!("config version served: {:?}", refresh.get().as_deref());
    if overlaps != 0 || while_off > 1 || stats.rejected.load(Relaxed) != 0 || !terminated {
        std::process::exit(1);
    }
}

/// The bus's message handler: just `refresh_now`. A burst costs one fetch
/// now and at most one more at the cooldown's end. While the switch is off
/// the refresh is paused and refuses the call (`FireError::Paused`): no
/// gate to write, and a message racing the switch cannot restart the job.
fn on_refresh_now(refresh: &Refresh<u64, &'static str>, urgent: &AtomicBool, stats: &Stats) {
    match refresh.refresh_now() {
        Ok(()) => {
            urgent.store(true, Relaxed);
            stats.fires.fetch_add(1, Relaxed);
        }
        Err(FireError::Paused) => {
            stats.refused.fetch_add(1, Relaxed); // the switch is off
        }
        Err(error) => eprintln!("refresh now refused: {error}"),
    }
}

fn print_line(second: u64, stats: &Stats, on: bool, period_ms: u64) {
    let fires = stats.fires.load(Relaxed);
    let urgent = stats.urgent_refreshes.load(Relaxed);
    println!(
        "t={second:>2}s  refreshes={:>4}  fires={:>5}  coalesced={:>5}  refused={:>4}  rejected={:>3}  overlaps={}  switch={}  period={}ms",
        stats.refreshes.load(Relaxed),
        fires,
        fires.saturating_sub(urgent),
        stats.refused.load(Relaxed),
        stats.rejected.load(Relaxed),
        stats.overlaps.load(Relaxed),
        if on { "on " } else { "off" },
        period_ms,
    );
}
