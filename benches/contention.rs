//! Scenario 6, contention scaling: `fire()` throughput with 1, 2 and 4
//! threads firing flat out, all on one trigger or each on its own, for our
//! crate and the peers (two workers, trivial task). Criterion's throughput
//! is total fires per second across the threads.

#[allow(dead_code)] // shared with the report; not every item is used here
#[path = "peers/mod.rs"]
mod peers;

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use peers::heap_timer::HeapTimer;
use peers::ours::Ours;
use peers::stp::Stp;
use peers::tokio_watch::TokioWatch;
use peers::{Fire, Peer};
use std::hint::black_box;
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

/// Fires per thread per chunk: each chunk gets a fresh scheduler, so peers
/// that queue one entry per fire stay within bounded memory.
const CHUNK: u64 = 200_000;

/// Wall time for `threads` threads to fire `n` times each, on one shared
/// trigger (`shared`) or on one trigger each.
fn timed_chunk<P: Peer>(threads: usize, shared: bool, n: u64) -> Duration {
    let peer = P::start(2);
    let one = peer.bind(|| None);
    let triggers: Vec<P::Trigger> = (0..threads)
        .map(|_| {
            if shared {
                one.clone()
            } else {
                peer.bind(|| None)
            }
        })
        .collect();
    let barrier = Barrier::new(threads + 1);
    let elapsed = thread::scope(|scope| {
        for trigger in &triggers {
            let barrier = &barrier;
            scope.spawn(move || {
                barrier.wait();
                for _ in 0..n {
                    black_box(trigger).fire();
                }
                barrier.wait();
            });
        }
        barrier.wait();
        let start = Instant::now();
        barrier.wait();
        start.elapsed()
    });
    drop((triggers, one));
    drop(peer);
    elapsed
}

fn bench_peer<P: Peer>(group: &mut BenchmarkGroup<'_, WallTime>, threads: usize, shared: bool) {
    group.throughput(Throughput::Elements(threads as u64));
    group.bench_with_input(
        BenchmarkId::new(P::NAME, threads),
        &threads,
        |b, &threads| {
            b.iter_custom(|iters| {
                let (mut left, mut total) = (iters, Duration::ZERO);
                while left > 0 {
                    let n = left.min(CHUNK);
                    total += timed_chunk::<P>(threads, shared, n);
                    left -= n;
                }
                total
            })
        },
    );
}

fn contention(c: &mut Criterion) {
    for (name, shared) in [
        ("fire() one trigger", true),
        ("fire() distinct triggers", false),
    ] {
        let mut group = c.benchmark_group(name);
        for threads in [1, 2, 4] {
            bench_peer::<Ours>(&mut group, threads, shared);
            bench_peer::<TokioWatch>(&mut group, threads, shared);
            bench_peer::<Stp>(&mut group, threads, shared);
            bench_peer::<HeapTimer>(&mut group, threads, shared);
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(10);
    targets = contention
}
criterion_main!(benches);
