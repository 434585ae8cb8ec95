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

/// Two words on cache lines of their own, so the floor's two writes touch
/// two lines as a re-arm's do: the state word and the request word.
#[repr(align(128))]
struct Line(std::sync::atomic::AtomicU64);

/// The floor under a re-arm, in ns: one read of the fire path's clock plus
/// two uncontended read-modify-writes on distinct cache lines. On x86-64
/// the clock is one unfenced time-stamp counter read, which is what
/// `fire_after` reads through a per-thread anchor. Elsewhere it is
/// `Instant::now()`. It is measured in the same run as the re-arm, so the
/// ratio holds across machines where absolute times do not.
pub fn floor() -> f64 {
    let (state, request) = (Line(0.into()), Line(0.into()));
    let round = || {
        let start = Instant::now();
        for _ in 0..CALLS {
            black_box(clock_read());
            state.0.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            request.0.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        }
        start.elapsed().as_nanos() as f64 / f64::from(CALLS)
    };
    (0..5).map(|_| round()).fold(f64::INFINITY, f64::min)
}

/// One read of the fire path's clock.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn clock_read() -> u64 {
    // SAFETY: `rdtsc` reads a register and touches no memory.
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_rdtsc()
    }
}

/// See the x86-64 version.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn clock_read() -> Instant {
    Instant::now()
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
