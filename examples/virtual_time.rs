//! Testing periodic logic without sleeping: a refresher that backs off
//! exponentially (with a cap) while its config center is down, checked in
//! virtual time. Two simulated hours run in milliseconds, deterministically.
//!
//! Run: `cargo run --example virtual_time`

use circulation_trigger::{Scheduler, Trigger};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The logic under test: refresh every 30 s; on failure back off 1 s, 2 s,
/// 4 s, … capped at 60 s; back to 30 s after a success.
fn next_delay(ok: bool, failures: &mut u32) -> Duration {
    if ok {
        *failures = 0;
        return Duration::from_secs(30);
    }
    *failures += 1;
    Duration::from_secs(1 << (*failures - 1).min(6)).min(Duration::from_secs(60))
}

fn main() {
    let sim = Scheduler::builder().build_virtual();
    let clock = sim.clock();
    // The config center is down from 10 s to 5 min.
    let down = |t: Duration| t >= Duration::from_secs(10) && t < Duration::from_secs(300);
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let log = attempts.clone();
    let mut failures = 0;
    let refresher = Trigger::builder(&sim).name("refresher").bind(move || {
        let now = clock.now();
        let ok = !down(now);
        log.lock().unwrap().push((now.as_secs(), ok));
        Some(next_delay(ok, &mut failures))
    });
    refresher.fire().expect("virtual scheduler is running");
    sim.advance(Duration::from_secs(2 * 3600));

    let attempts = attempts.lock().unwrap();
    let during_outage: Vec<u64> = attempts
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|&(t, _)| t)
        .collect();
    println!("attempts during the outage at: {during_outage:?} s");
    assert_eq!(during_outage, [30, 31, 33, 37, 45, 61, 93, 153, 213, 273]);
    let first_success_after = attempts.iter().find(|&&(t, ok)| ok && t > 10).unwrap().0;
    assert_eq!(first_success_after, 333, "first retry after recovery");
    println!("first success after the outage: {first_success_after} s");
    println!(
        "{} attempts in 2 simulated hours, all checked — no sleeping",
        attempts.len()
    );
}
