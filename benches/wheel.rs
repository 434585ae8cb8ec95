//! Scenario 7, the timing wheel alone (the crate's private `wheel` module,
//! compiled into this bench from its source: it is no part of the API)
//! at 10^3 … 10^6 entries: `insert`, `reschedule` and expiry by `poll` do
//! the same work per entry whatever the wheel's size (O(1)); what grows with
//! size is cache misses once the entry array (24 B per entry) outgrows the
//! caches. A `BTreeMap` keyed by (deadline, id), the usual ordered
//! structure, is measured beside it as an O(log n) reference with the same
//! memory effects.

// Its own unit tests come along (benches compile with cfg(test)) unused.
#[allow(unused)]
#[path = "../src/wheel/mod.rs"]
mod wheel;
// The chunked vector its entries live in (`crate::chunked` there).
#[allow(unused)]
#[path = "../src/chunked.rs"]
mod chunked;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};
use wheel::{Key, Wheel};

const SIZES: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];
/// Deadlines for insert / reschedule: anywhere in the next hour (µs).
const HOUR_US: u64 = 3_600_000_000;
/// Deadlines for the poll bench: the next second, polled in 1 ms steps.
const SECOND_US: u64 = 1_000_000;
const NOW: u64 = 1 << 40;

/// A xorshift64 stream: cheap, deterministic pseudo-random deadlines.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// A wheel at time `NOW` with `n` entries due within `span` µs.
fn filled(n: usize, span: u64, rng: &mut Rng) -> (Wheel<u64>, Vec<Key>) {
    let mut wheel = Wheel::new(NOW);
    let keys = (0..n as u64)
        .map(|i| {
            let when = NOW + 1 + rng.below(span);
            wheel.insert_at(i as u32, when, i).expect("vacant")
        })
        .collect();
    (wheel, keys)
}

/// The reference: entries ordered by (deadline, id), plus each id's deadline.
fn filled_btree(n: usize, span: u64, rng: &mut Rng) -> (BTreeMap<(u64, u32), ()>, Vec<u64>) {
    let deadlines: Vec<u64> = (0..n).map(|_| NOW + 1 + rng.below(span)).collect();
    let map = deadlines
        .iter()
        .enumerate()
        .map(|(id, &when)| ((when, id as u32), ()))
        .collect();
    (map, deadlines)
}

fn insert(c: &mut Criterion) {
    let mut group = c.benchmark_group("wheel insert");
    for n in SIZES {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let (mut wheel, _) = filled(n, HOUR_US, &mut rng);
        let mut fresh = Vec::with_capacity(1024);
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            // Insert in batches of 1,024 (timed), then remove them (not
            // timed), so the wheel stays at `n` entries.
            b.iter_custom(|iters| {
                let (mut left, mut total) = (iters, Duration::ZERO);
                while left > 0 {
                    let batch = left.min(1024);
                    let deadlines: Vec<u64> =
                        (0..batch).map(|_| NOW + 1 + rng.below(HOUR_US)).collect();
                    let start = Instant::now();
                    // The indices just past the `n` filled, as new triggers' slots.
                    for (i, &when) in deadlines.iter().enumerate() {
                        let index = (n + i) as u32;
                        fresh.push(wheel.insert_at(index, black_box(when), 0).expect("vacant"));
                    }
                    total += start.elapsed();
                    fresh.drain(..).for_each(|key| {
                        wheel.remove(key);
                    });
                    left -= batch;
                }
                total
            })
        });
    }
    group.finish();
}

fn reschedule(c: &mut Criterion) {
    let mut group = c.benchmark_group("wheel reschedule");
    for n in SIZES {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        let (mut wheel, keys) = filled(n, HOUR_US, &mut rng);
        group.bench_function(BenchmarkId::new("wheel", n), |b| {
            b.iter(|| {
                let key = keys[rng.below(n as u64) as usize];
                wheel.reschedule(key, NOW + 1 + rng.below(HOUR_US));
            })
        });
        drop((wheel, keys));
        let (mut map, mut deadlines) = filled_btree(n, HOUR_US, &mut rng);
        group.bench_function(BenchmarkId::new("btreemap (reference)", n), |b| {
            b.iter(|| {
                let id = rng.below(n as u64) as usize;
                let when = NOW + 1 + rng.below(HOUR_US);
                map.remove(&(deadlines[id], id as u32));
                map.insert((when, id as u32), ());
                deadlines[id] = when;
            })
        });
    }
    group.finish();
}

fn poll(c: &mut Criterion) {
    let mut group = c.benchmark_group("wheel poll (expire all, per entry)");
    group.sample_size(10);
    for n in SIZES {
        let mut rng = Rng(0xD1B5_4A32_D192_ED03);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("wheel", n), |b| {
            b.iter_batched(
                || filled(n, SECOND_US, &mut rng).0,
                |mut wheel| {
                    let mut expired = 0usize;
                    let mut now = NOW;
                    while !wheel.is_empty() {
                        now += 1_000;
                        wheel.poll(now, |_, _, value| expired += black_box(value) as usize & 1);
                    }
                    black_box(expired);
                    wheel
                },
                BatchSize::LargeInput,
            )
        });
        group.bench_function(BenchmarkId::new("btreemap (reference)", n), |b| {
            b.iter_batched(
                || filled_btree(n, SECOND_US, &mut rng).0,
                |mut map| {
                    let mut expired = 0usize;
                    let mut now = NOW;
                    while !map.is_empty() {
                        now += 1_000;
                        while let Some(entry) = map.first_entry() {
                            if entry.key().0 > now {
                                break;
                            }
                            expired += black_box(entry.remove_entry().0 .1) as usize & 1;
                        }
                    }
                    black_box(expired);
                    map
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20);
    targets = insert, reschedule, poll
}
criterion_main!(benches);
