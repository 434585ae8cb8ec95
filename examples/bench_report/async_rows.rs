//! Scenario 7 (feature `tokio`): async triggers (`bind_async`) against the
//! loops a Tokio user hand-rolls today (`benches/peers/async_loop.rs`: a
//! task per trigger, `select!` over a `Sleep` and a channel or a `Notify`),
//! on one two-thread Tokio runtime. Fires per second from other tasks, heap
//! per idle trigger at 10,000 triggers, and lateness of one-shot delays.

use crate::alloc;
use crate::peers::async_loop::{AsyncLoop, NotifyLoop};
use circulation_trigger::{Scheduler, Trigger};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Triggers of the idle-memory measurement.
const IDLE: usize = 10_000;
/// One-shot triggers of the lateness measurement, delays in [5, 200] ms.
const ONE_SHOTS: usize = 1_000;

type BoxTask = Box<dyn FnMut() -> Pin<Box<dyn Future<Output = Option<Duration>> + Send>> + Send>;

/// An async trigger implementation under test.
trait AsyncPeer: Send + Sync + 'static {
    /// Binds `task`, its iterations polled on `rt`.
    fn bind(rt: &tokio::runtime::Runtime, scheduler: &Scheduler, task: BoxTask) -> Self;
    fn fire(&self);
    fn fire_after(&self, rt: &tokio::runtime::Runtime, delay: Duration);
}

impl AsyncPeer for Trigger {
    fn bind(rt: &tokio::runtime::Runtime, scheduler: &Scheduler, task: BoxTask) -> Self {
        Trigger::builder(scheduler)
            .runtime(rt.handle().clone())
            .bind_async(task)
    }

    fn fire(&self) {
        let _ = Trigger::fire(self);
    }

    fn fire_after(&self, _rt: &tokio::runtime::Runtime, delay: Duration) {
        let _ = Trigger::fire_after(self, delay);
    }
}

impl AsyncPeer for AsyncLoop {
    fn bind(rt: &tokio::runtime::Runtime, _: &Scheduler, task: BoxTask) -> Self {
        AsyncLoop::spawn(rt.handle(), task)
    }

    fn fire(&self) {
        AsyncLoop::fire(self);
    }

    fn fire_after(&self, rt: &tokio::runtime::Runtime, delay: Duration) {
        rt.block_on(AsyncLoop::fire_after(self, delay));
    }
}

impl AsyncPeer for NotifyLoop {
    fn bind(rt: &tokio::runtime::Runtime, _: &Scheduler, task: BoxTask) -> Self {
        NotifyLoop::spawn(rt.handle(), task)
    }

    fn fire(&self) {
        NotifyLoop::fire(self);
    }

    fn fire_after(&self, _rt: &tokio::runtime::Runtime, delay: Duration) {
        NotifyLoop::fire_after(self, delay);
    }
}

/// One measurement for the three implementations: ours, the channel
/// loop, the `Notify` loop.
pub struct Pair {
    pub metric: &'static str,
    pub unit: &'static str,
    pub values: [f64; 3],
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime")
}

/// An async task that counts its runs and yields once.
fn counting(runs: &Arc<AtomicU64>) -> BoxTask {
    let runs = runs.clone();
    Box::new(move || {
        let runs = runs.clone();
        Box::pin(async move {
            tokio::task::yield_now().await;
            runs.fetch_add(1, Ordering::Relaxed);
            None
        })
    })
}

/// Two Tokio tasks on the trigger's own runtime fire flat out for
/// `window`; returns (fires/s, runs/s).
fn storm<P: AsyncPeer>(window: Duration) -> (f64, f64) {
    let rt = runtime();
    let scheduler = Scheduler::new();
    let runs = Arc::new(AtomicU64::new(0));
    let peer = Arc::new(P::bind(&rt, &scheduler, counting(&runs)));
    let stop = Arc::new(AtomicBool::new(false));
    let fires = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let firers: Vec<_> = (0..2)
        .map(|_| {
            let (peer, stop, fires) = (peer.clone(), stop.clone(), fires.clone());
            rt.spawn(async move {
                let mut count = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    peer.fire();
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
    let ran = runs.load(Ordering::Relaxed);
    (
        fires.load(Ordering::Relaxed) as f64 / secs,
        ran as f64 / secs,
    )
}

/// Heap per trigger with `IDLE` of them armed for an hour.
fn idle<P: AsyncPeer>() -> f64 {
    let rt = runtime();
    let scheduler = Scheduler::new();
    let before = alloc::settled_heap();
    let peers: Vec<P> = (0..IDLE)
        .map(|_| {
            let task: BoxTask = Box::new(|| Box::pin(async { Some(Duration::from_secs(3600)) }));
            let peer = P::bind(&rt, &scheduler, task);
            peer.fire_after(&rt, Duration::from_secs(3600));
            peer
        })
        .collect();
    let bytes = (alloc::settled_heap() - before) as f64 / IDLE as f64;
    drop(peers);
    bytes
}

/// Lateness of `ONE_SHOTS` delays in [5, 200] ms: (p50, p99) in µs.
fn lateness<P: AsyncPeer>() -> (f64, f64) {
    let rt = runtime();
    let scheduler = Scheduler::new();
    let late = Arc::new(Mutex::new(Vec::new()));
    let peers: Vec<P> = (0..ONE_SHOTS)
        .map(|i| {
            let delay = Duration::from_micros(5_000 + (i as u64 * 7_919) % 195_000);
            let target = Arc::new(Mutex::new(Instant::now()));
            let (t, l) = (target.clone(), late.clone());
            let task: BoxTask = Box::new(move || {
                let at = Instant::now();
                let target = *t.lock().unwrap();
                let us = at.saturating_duration_since(target).as_secs_f64() * 1e6;
                l.lock().unwrap().push(us);
                Box::pin(async { None })
            });
            let peer = P::bind(&rt, &scheduler, task);
            *target.lock().unwrap() = Instant::now() + delay;
            peer.fire_after(&rt, delay);
            peer
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while late.lock().unwrap().len() < ONE_SHOTS && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(peers);
    let mut samples = late.lock().unwrap().clone();
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    (at(0.5), at(0.99))
}

/// Every row of the scenario.
pub fn measure(storm_window: Duration) -> Vec<Pair> {
    let storms = [
        storm::<Trigger>(storm_window),
        storm::<AsyncLoop>(storm_window),
        storm::<NotifyLoop>(storm_window),
    ];
    let idles = [idle::<Trigger>(), idle::<AsyncLoop>(), idle::<NotifyLoop>()];
    let late = [
        lateness::<Trigger>(),
        lateness::<AsyncLoop>(),
        lateness::<NotifyLoop>(),
    ];
    vec![
        Pair {
            metric: "fire storm from 2 tasks: fires/s",
            unit: "/s",
            values: storms.map(|s| s.0),
        },
        Pair {
            metric: "fire storm: iterations/s",
            unit: "/s",
            values: storms.map(|s| s.1),
        },
        Pair {
            metric: "heap per idle trigger (10,000 armed for 1 h)",
            unit: "B",
            values: idles,
        },
        Pair {
            metric: "lateness p50 (1,000 one-shots in [5, 200] ms)",
            unit: "µs",
            values: late.map(|l| l.0),
        },
        Pair {
            metric: "lateness p99",
            unit: "µs",
            values: late.map(|l| l.1),
        },
    ]
}

/// The scenario's own markdown table.
pub fn render(pairs: &[Pair]) -> String {
    let mut out = String::from(
        "| 7 async (Tokio, 2 threads) | ours `bind_async` | `select!` loop, channel (loses a fire during a run) | `select!` loop, `Notify` |\n|---|---|---|---|\n",
    );
    for pair in pairs {
        let [ours, channel, notify] = pair.values;
        let unit = pair.unit;
        out += &format!(
            "| {} | {ours:.0} {unit} | {channel:.0} {unit} ({:.2}×) | {notify:.0} {unit} ({:.2}×) |\n",
            pair.metric,
            channel / ours,
            notify / ours,
        );
    }
    out
}
