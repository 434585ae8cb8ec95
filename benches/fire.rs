//! The cost of the fire path on one trigger, single-threaded: `fire_after`
//! re-arming an idle trigger (the timer sleeps on an earlier deadline, so
//! no wake-up), `fire` on a trigger whose run is already queued, and
//! `suspend`.

use circulation_trigger::{Scheduler, Trigger};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use std::time::Duration;

fn fire_path(c: &mut Criterion) {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    // An early deadline elsewhere keeps the timer's sleep target below 1 h.
    let anchor = Trigger::bind(&scheduler, || None);
    anchor.fire_after(Duration::from_secs(60)).unwrap();
    let trigger = Trigger::bind(&scheduler, || None);
    let hour = Duration::from_secs(3600);

    let mut group = c.benchmark_group("fire_path");
    group.bench_function("fire_after(1h) re-arm", |b| {
        b.iter(|| trigger.fire_after(black_box(hour)).unwrap())
    });
    group.bench_function("suspend", |b| b.iter(|| trigger.suspend()));

    // A busy single worker keeps `fire()` on the coalescing path.
    let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
    let blocker = Trigger::bind(&scheduler, move || {
        let _ = gate_rx.recv();
        None
    });
    blocker.fire().unwrap();
    group.bench_function("fire() coalesced", |b| b.iter(|| trigger.fire().unwrap()));
    group.finish();
    drop(gate_tx);
}

criterion_group!(benches, fire_path);
criterion_main!(benches);
