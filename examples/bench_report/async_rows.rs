//! Scenario 7 (feature `tokio`): async triggers (`bind_async`) against the
//! hand-rolled Tokio loop a user writes today (`benches/peers/async_loop.rs`:
//! a task per trigger, `select!` over a `Sleep` and a channel), on one
//! two-thread Tokio runtime. Fires per second from other tasks, heap per
//! idle trigger at 10,000 triggers, and lateness of one-shot delays.

use crate::alloc;
use crate::peers::async_loop::{AsyncLoop, NotifyLoop};
use circulation_trigger::{Scheduler, Trigger};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Triggers of the idle-memory measurement.
const IDLE: usize = 10_000;
/// One-shot triggers of the lateness measurement, delays in [5, 200] ms.
const ONE_SHOTS: usize = 1_000;

/// One measurement for the three implementations: ours, the channel
/// loop, the `Notify` loop.
pub struct Pair {
    pub metric: &'static str,
    pub unit: &'static str,
    pub ours: f64,
    pub peer: f64,
    pub notify: f64,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime")
}

/// Two Tokio tasks on `rt` (the runtime the trigger's iterations run on)
/// fire flat out for `window`; returns (fires/s, runs/s).
fn storm(
    rt: &tokio::runtime::Runtime,
    window: Duration,
    fire: Arc<dyn Fn() + Send + Sync>,
    runs: &AtomicU64,
) -> (f64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let fires = Arc::new(AtomicU64::new(0));
    let runs_before = runs.load(Ordering::Relaxed);
    let start = Instant::now();
    let firers: Vec<_> = (0..2)
        .map(|_| {
            let (fire, stop, fires) = (fire.clone(), stop.clone(), fires.clone());
            rt.spawn(async move {
                let mut count = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    fire();
                    count += 1;
                    if count % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                fires.fetch_add(count, Ordering::Relaxed);
            })
        })
        .collect();
    std::thread::sleep(window);
    stop.store(true, Ordering::Relaxed);
    for firer in firers {
        rt.block_on(firer).expect("a firer");
    }
    let secs = start.elapsed().as_secs_f64();
    let ran = runs.load(Ordering::Relaxed) - runs_before;
    (
        fires.load(Ordering::Relaxed) as f64 / secs,
        ran as f64 / secs,
    )
}

/// An async task that counts its runs and yields once.
fn counting(
    runs: &Arc<AtomicU64>,
) -> impl FnMut() -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Duration>> + Send>>
       + Send
       + 'static {
    let runs = runs.clone();
    move || {
        let runs = runs.clone();
        Box::pin(async move {
            tokio::task::yield_now().await;
            runs.fetch_add(1, Ordering::Relaxed);
            None
        })
    }
}

fn storm_rows(window: Duration) -> [Pair; 2] {
    let ours = {
        let rt = runtime();
        let scheduler = Scheduler::new();
        let runs = Arc::new(AtomicU64::new(0));
        let trigger = Trigger::builder(&scheduler)
            .runtime(rt.handle().clone())
            .bind_async(counting(&runs));
        let t = trigger.clone();
        let result = storm(
            &rt,
            window,
            Arc::new(move || {
                let _ = t.fire();
            }),
            &runs,
        );
        trigger.suspend();
        result
    };
    let peer = {
        let rt = runtime();
        let runs = Arc::new(AtomicU64::new(0));
        let peer = Arc::new(AsyncLoop::spawn(rt.handle(), counting(&runs)));
        let p = peer.clone();
        storm(&rt, window, Arc::new(move || p.fire()), &runs)
    };
    let notify = {
        let rt = runtime();
        let runs = Arc::new(AtomicU64::new(0));
        let peer = Arc::new(NotifyLoop::spawn(rt.handle(), counting(&runs)));
        let p = peer.clone();
        storm(&rt, window, Arc::new(move || p.fire()), &runs)
    };
    [
        Pair {
            metric: "fire storm from 2 tasks: fires/s",
            unit: "/s",
            ours: ours.0,
            peer: peer.0,
            notify: notify.0,
        },
        Pair {
            metric: "fire storm: iterations/s",
            unit: "/s",
            ours: ours.1,
            peer: peer.1,
            notify: notify.1,
        },
    ]
}

fn idle_row() -> Pair {
    let per = |heap: isize| heap as f64 / IDLE as f64;
    let ours = {
        let rt = runtime();
        let scheduler = Scheduler::new();
        let before = alloc::settled_heap();
        let triggers: Vec<_> = (0..IDLE)
            .map(|_| {
                let trigger = Trigger::builder(&scheduler)
                    .runtime(rt.handle().clone())
                    .bind_async(|| async { Some(Duration::from_secs(3600)) });
                trigger.fire_after(Duration::from_secs(3600)).unwrap();
                trigger
            })
            .collect();
        let bytes = per(alloc::settled_heap() - before);
        drop(triggers);
        bytes
    };
    let peer = {
        let rt = runtime();
        let before = alloc::settled_heap();
        let loops: Vec<_> = (0..IDLE)
            .map(|_| {
                let peer =
                    AsyncLoop::spawn(rt.handle(), || async { Some(Duration::from_secs(3600)) });
                rt.block_on(peer.fire_after(Duration::from_secs(3600)));
                peer
            })
            .collect();
        let bytes = per(alloc::settled_heap() - before);
        drop(loops);
        bytes
    };
    let notify = {
        let rt = runtime();
        let before = alloc::settled_heap();
        let loops: Vec<_> = (0..IDLE)
            .map(|_| {
                let peer =
                    NotifyLoop::spawn(rt.handle(), || async { Some(Duration::from_secs(3600)) });
                peer.fire_after(Duration::from_secs(3600));
                peer
            })
            .collect();
        let bytes = per(alloc::settled_heap() - before);
        drop(loops);
        bytes
    };
    Pair {
        metric: "heap per idle trigger (10,000 armed for 1 h)",
        unit: "B",
        ours,
        peer,
        notify,
    }
}

/// Lateness of `ONE_SHOTS` delays in [5, 200] ms: (p50, p99) in µs.
fn lateness_rows() -> [Pair; 2] {
    let delays: Vec<Duration> = (0..ONE_SHOTS)
        .map(|i| Duration::from_micros(5_000 + (i as u64 * 7_919) % 195_000))
        .collect();
    let quantiles = |mut late: Vec<f64>| {
        late.sort_by(f64::total_cmp);
        let at = |q: f64| late[((late.len() - 1) as f64 * q) as usize];
        (at(0.5), at(0.99))
    };
    let ours = {
        let rt = runtime();
        let scheduler = Scheduler::new();
        let late = Arc::new(Mutex::new(Vec::new()));
        let triggers: Vec<_> = delays
            .iter()
            .map(|&delay| {
                let target = Arc::new(Mutex::new(Instant::now()));
                let (t, l) = (target.clone(), late.clone());
                let trigger = Trigger::builder(&scheduler)
                    .runtime(rt.handle().clone())
                    .bind_async(move || {
                        let at = Instant::now();
                        let target = *t.lock().unwrap();
                        l.lock()
                            .unwrap()
                            .push(at.saturating_duration_since(target).as_secs_f64() * 1e6);
                        async { None }
                    });
                *target.lock().unwrap() = Instant::now() + delay;
                trigger.fire_after(delay).unwrap();
                trigger
            })
            .collect();
        wait_until_full(&late);
        drop(triggers);
        let samples = late.lock().unwrap().clone();
        quantiles(samples)
    };
    let peer = {
        let rt = runtime();
        let late = Arc::new(Mutex::new(Vec::new()));
        let loops: Vec<_> = delays
            .iter()
            .map(|&delay| {
                let target = Arc::new(Mutex::new(Instant::now()));
                let (t, l) = (target.clone(), late.clone());
                let peer = AsyncLoop::spawn(rt.handle(), move || {
                    let at = Instant::now();
                    let target = *t.lock().unwrap();
                    l.lock()
                        .unwrap()
                        .push(at.saturating_duration_since(target).as_secs_f64() * 1e6);
                    async { None }
                });
                *target.lock().unwrap() = Instant::now() + delay;
                rt.block_on(peer.fire_after(delay));
                peer
            })
            .collect();
        wait_until_full(&late);
        drop(loops);
        let samples = late.lock().unwrap().clone();
        quantiles(samples)
    };
    let notify = {
        let rt = runtime();
        let late = Arc::new(Mutex::new(Vec::new()));
        let loops: Vec<_> = delays
            .iter()
            .map(|&delay| {
                let target = Arc::new(Mutex::new(Instant::now()));
                let (t, l) = (target.clone(), late.clone());
                let peer = NotifyLoop::spawn(rt.handle(), move || {
                    let at = Instant::now();
                    let target = *t.lock().unwrap();
                    l.lock()
                        .unwrap()
                        .push(at.saturating_duration_since(target).as_secs_f64() * 1e6);
                    async { None }
                });
                *target.lock().unwrap() = Instant::now() + delay;
                peer.fire_after(delay);
                peer
            })
            .collect();
        wait_until_full(&late);
        drop(loops);
        let samples = late.lock().unwrap().clone();
        quantiles(samples)
    };
    [
        Pair {
            metric: "lateness p50 (1,000 one-shots in [5, 200] ms)",
            unit: "µs",
            ours: ours.0,
            peer: peer.0,
            notify: notify.0,
        },
        Pair {
            metric: "lateness p99",
            unit: "µs",
            ours: ours.1,
            peer: peer.1,
            notify: notify.1,
        },
    ]
}

fn wait_until_full(late: &Mutex<Vec<f64>>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while late.lock().unwrap().len() < ONE_SHOTS && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Every row of the scenario.
pub fn measure(storm_window: Duration) -> Vec<Pair> {
    let mut pairs = Vec::new();
    pairs.extend(storm_rows(storm_window));
    pairs.push(idle_row());
    pairs.extend(lateness_rows());
    pairs
}

/// The scenario's own markdown table.
pub fn render(pairs: &[Pair]) -> String {
    let mut out = String::from(
        "| 7 async (Tokio, 2 threads) | ours `bind_async` | `select!` loop, channel (loses a fire during a run) | `select!` loop, `Notify` |\n|---|---|---|---|\n",
    );
    for pair in pairs {
        out += &format!(
            "| {} | {:.0} {} | {:.0} {} ({:.2}×) | {:.0} {} ({:.2}×) |\n",
            pair.metric,
            pair.ours,
            pair.unit,
            pair.peer,
            pair.unit,
            pair.peer / pair.ours,
            pair.notify,
            pair.unit,
            pair.notify / pair.ours,
        );
    }
    out
}
