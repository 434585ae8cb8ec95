//! Scenario 1, the cost of one request on one trigger, single-threaded, for
//! our crate and every peer side by side:
//!
//! * `fire_after(1h)` re-arming an idle trigger (another trigger is armed at
//!   60 s, so the timer already sleeps toward an earlier deadline);
//! * `fire()` on a trigger whose run is already pending (the single worker
//!   is held busy, so the fire only has to record the request);
//! * `suspend()` of an idle trigger.
//!
//! Each sample runs in chunks of at most 100,000 calls, each on a fresh
//! scheduler (created and dropped outside the timed part), so peers that
//! keep one heap entry per request (the thread pool, the binary heap) stay
//! within bounded memory.

#[allow(dead_code)] // shared with the report; not every item is used here
#[path = "peers/mod.rs"]
mod peers;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion};
use peers::heap_timer::HeapTimer;
use peers::ours::Ours;
use peers::stp::Stp;
use peers::tokio_watch::TokioWatch;
use peers::{Fire, Peer};
use std::hint::black_box;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const CHUNK: u64 = 100_000;
const HOUR: Duration = Duration::from_secs(3600);

/// Which request to time.
#[derive(Clone, Copy)]
enum Op {
    FireAfterHour,
    FirePending,
    Suspend,
}

/// Times `n` calls of `op` on a fresh `P` (one worker).
fn timed_chunk<P: Peer>(op: Op, n: u64) -> Duration {
    let peer = P::start(1);
    let anchor = peer.bind(|| None);
    anchor.fire_after(Duration::from_secs(60));
    let trigger = peer.bind(|| None);
    // For `FirePending`: a task that holds the only worker until released.
    let (release, gate) = mpsc::channel::<()>();
    let (started_tx, started) = mpsc::channel::<()>();
    let blocker = peer.bind(move || {
        let _ = started_tx.send(());
        let _ = gate.recv();
        None
    });
    if let Op::FirePending = op {
        blocker.fire();
        started.recv().expect("blocker started");
        trigger.fire(); // now pending behind the blocker
    }
    let start = Instant::now();
    match op {
        Op::FireAfterHour => (0..n).for_each(|_| trigger.fire_after(black_box(HOUR))),
        Op::FirePending => (0..n).for_each(|_| black_box(&trigger).fire()),
        Op::Suspend => (0..n).for_each(|_| black_box(&trigger).suspend()),
    }
    let elapsed = start.elapsed();
    drop(release);
    drop((trigger, anchor, blocker));
    drop(peer);
    elapsed
}

fn bench_peer<P: Peer>(group: &mut BenchmarkGroup<'_, WallTime>, op: Op) {
    group.bench_function(P::NAME, |b| {
        b.iter_custom(|iters| {
            let mut left = iters;
            let mut total = Duration::ZERO;
            while left > 0 {
                let n = left.min(CHUNK);
                total += timed_chunk::<P>(op, n);
                left -= n;
            }
            total
        })
    });
}

fn rearm(c: &mut Criterion) {
    for (name, op) in [
        ("fire_after(1h) re-arm", Op::FireAfterHour),
        ("fire() run pending", Op::FirePending),
        ("suspend()", Op::Suspend),
    ] {
        let mut group = c.benchmark_group(name);
        bench_peer::<Ours>(&mut group, op);
        bench_peer::<TokioWatch>(&mut group, op);
        bench_peer::<Stp>(&mut group, op);
        bench_peer::<HeapTimer>(&mut group, op);
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20);
    targets = rearm
}
criterion_main!(benches);
