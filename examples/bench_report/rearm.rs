//! Scenario 1, request cost: `fire_after(1 h)` re-arming an idle trigger
//! and `fire()` on a trigger whose run is already pending, single-threaded.
//!
//! Every peer is measured in the same rounds, one after the other, and the
//! best round counts (the least disturbed by other jobs on the machine).

use crate::peers::{Fire, Peer};
use std::hint::black_box;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Calls per round and operation.
const CALLS: u32 = 100_000;
const HOUR: Duration = Duration::from_secs(3600);

/// The cost of one call, in ns.
#[derive(Debug, Clone, Copy)]
pub struct RearmCost {
    /// `fire_after(1 h)` on an idle trigger (the timer sleeps toward an
    /// earlier deadline).
    pub fire_after_ns: f64,
    /// `fire()` while the trigger's run is pending behind a busy worker.
    pub fire_ns: f64,
}

/// One round for `P`: a fresh scheduler with one worker, both operations.
pub fn round<P: Peer>() -> RearmCost {
    let peer = P::start(1);
    let anchor = peer.bind(|| None);
    anchor.fire_after(Duration::from_secs(60));
    let trigger = peer.bind(|| None);
    for _ in 0..CALLS / 10 {
        trigger.fire_after(HOUR); // warm-up
    }
    let start = Instant::now();
    for _ in 0..CALLS {
        trigger.fire_after(black_box(HOUR));
    }
    let fire_after_ns = start.elapsed().as_nanos() as f64 / f64::from(CALLS);
    drop((trigger, anchor, peer)); // peers that keep stale entries free them

    let peer = P::start(1);
    let trigger = peer.bind(|| None);
    let (release, gate) = mpsc::channel::<()>();
    let (started_tx, started) = mpsc::channel::<()>();
    let blocker = peer.bind(move || {
        let _ = started_tx.send(());
        let _ = gate.recv();
        None
    });
    blocker.fire();
    started.recv().expect("blocker started");
    trigger.fire();
    let start = Instant::now();
    for _ in 0..CALLS {
        black_box(&trigger).fire();
    }
    let fire_ns = start.elapsed().as_nanos() as f64 / f64::from(CALLS);
    drop(release);
    drop((trigger, blocker, peer));
    RearmCost {
        fire_after_ns,
        fire_ns,
    }
}

/// The floor under a re-arm, in ns: one monotonic clock read (the one
/// `Instant` and the scheduler read) plus one uncontended read-modify-write
/// — the least a request that must be timed and published costs.
pub fn floor() -> f64 {
    let word = std::sync::atomic::AtomicU64::new(0);
    let round = || {
        let start = Instant::now();
        for _ in 0..CALLS {
            black_box(Instant::now());
            word.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
        start.elapsed().as_nanos() as f64 / f64::from(CALLS)
    };
    (0..5).map(|_| round()).fold(f64::INFINITY, f64::min)
}

/// The floor of the fire path's own clock, in ns, on x86-64: one
/// unfenced time-stamp counter read (what `fire_after` reads, through a
/// per-thread anchor that turns it into a deadline never early) plus one
/// uncontended read-modify-write.
#[cfg(target_arch = "x86_64")]
pub fn floor_tsc() -> Option<f64> {
    let word = std::sync::atomic::AtomicU64::new(0);
    let round = || {
        let start = Instant::now();
        for _ in 0..CALLS {
            // SAFETY: `rdtsc` reads a register and touches no memory.
            #[allow(unused_unsafe)]
            black_box(unsafe { std::arch::x86_64::_rdtsc() });
            word.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
        start.elapsed().as_nanos() as f64 / f64::from(CALLS)
    };
    Some((0..5).map(|_| round()).fold(f64::INFINITY, f64::min))
}

/// See the x86-64 version: no such clock elsewhere.
#[cfg(not(target_arch = "x86_64"))]
pub fn floor_tsc() -> Option<f64> {
    None
}

/// The best of `rounds` rounds, field by field.
pub fn best(rounds: &[RearmCost]) -> RearmCost {
    RearmCost {
        fire_after_ns: rounds
            .iter()
            .map(|r| r.fire_after_ns)
            .fold(f64::INFINITY, f64::min),
        fire_ns: rounds
            .iter()
            .map(|r| r.fire_ns)
            .fold(f64::INFINITY, f64::min),
    }
}
