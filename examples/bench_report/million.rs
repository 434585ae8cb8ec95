//! Scenario 8, a million triggers: 1,000,000 periodic triggers with a 10 s
//! period, first runs spread over the first period. It measures the time to
//! create them, the heap per trigger, CPU over a window once every chain
//! has run once, and the time to shut down, against `DelayQueue` and the
//! heap timer in the same run.
//!
//! Our shutdown is `shutdown()`, `await_termination` and the report built,
//! which lists every discarded run. The peers' is the drop that stops them.

use crate::alloc::{heap, settled_heap};
use crate::cpu::cpu_time;
use crate::peers::delay_queue::DelayQueueTimers;
use crate::peers::heap_timer::HeapTimer;
use crate::peers::{Fire, Peer};
use circulation_trigger::{Scheduler, Trigger};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// How many triggers.
pub const TRIGGERS: u64 = 1_000_000;
const PERIOD: Duration = Duration::from_secs(10);
/// Time before the window: one period, so every chain has run once and
/// re-armed itself, and the heap has settled. The first runs keep the
/// spread's exact deadlines, one every 10 µs. Their re-arms share the
/// coarse grid of periodic wake-ups, which is the steady state measured.
const WARM_UP: Duration = Duration::from_millis(11_500);

/// What one run at a million measured.
#[derive(Debug, Clone, Copy)]
pub struct Million {
    /// Seconds to create and arm every trigger.
    pub create_s: f64,
    /// Heap bytes per trigger once every chain is armed.
    pub bytes_per_trigger: f64,
    /// CPU seconds (user + system) over the window.
    pub cpu_s: f64,
    /// Task runs per second over the window (≈ 100,000 if it keeps up).
    pub runs_per_s: f64,
    /// Seconds to shut down.
    pub shutdown_s: f64,
}

impl Million {
    /// CPU nanoseconds per run over the window.
    pub fn cpu_per_run_ns(&self, window: Duration) -> f64 {
        self.cpu_s * 1e9 / (self.runs_per_s * window.as_secs_f64())
    }
}

/// The first run of trigger `i`: spread evenly over the first period.
fn first_delay(i: u64) -> Duration {
    Duration::from_micros(1 + i * 10)
}

/// Our scheduler with two workers.
pub fn measure_ours(window: Duration) -> Million {
    let scheduler = Scheduler::builder().workers(2).build().expect("scheduler");
    let runs = Arc::new(AtomicU64::new(0));
    // The user's handles are the user's memory: allocated before counting.
    let mut triggers = Vec::with_capacity(TRIGGERS as usize);
    let before = settled_heap();
    let start = Instant::now();
    for i in 0..TRIGGERS {
        let runs = runs.clone();
        let trigger = Trigger::bind(&scheduler, move || {
            runs.fetch_add(1, Relaxed);
            Some(PERIOD)
        });
        trigger.fire_after(first_delay(i)).expect("armed");
        triggers.push(trigger);
    }
    let create_s = start.elapsed().as_secs_f64();
    let (bytes_per_trigger, cpu_s, runs_per_s) = observe(before, &runs, window);
    let start = Instant::now();
    scheduler.shutdown();
    assert!(scheduler.await_termination(Duration::from_secs(60)));
    let report = scheduler.shutdown_report().expect("shut down");
    let shutdown_s = start.elapsed().as_secs_f64();
    // Every chain is armed or in flight: the report lists each one.
    let listed = report.discarded().len() + report.in_flight().len();
    assert!(listed as u64 >= TRIGGERS - 2, "{listed} listed");
    drop((report, triggers, scheduler));
    Million {
        create_s,
        bytes_per_trigger,
        cpu_s,
        runs_per_s,
        shutdown_s,
    }
}

/// The heap timer through the common interface.
pub fn measure_heap_timer(window: Duration) -> Million {
    let peer = HeapTimer::start(2);
    let runs = Arc::new(AtomicU64::new(0));
    let mut triggers = Vec::with_capacity(TRIGGERS as usize);
    let before = settled_heap();
    let start = Instant::now();
    for i in 0..TRIGGERS {
        let runs = runs.clone();
        let trigger = peer.bind(move || {
            runs.fetch_add(1, Relaxed);
            Some(PERIOD)
        });
        trigger.fire_after(first_delay(i));
        triggers.push(trigger);
    }
    let create_s = start.elapsed().as_secs_f64();
    let (bytes_per_trigger, cpu_s, runs_per_s) = observe(before, &runs, window);
    let start = Instant::now();
    drop(peer);
    let shutdown_s = start.elapsed().as_secs_f64();
    drop(triggers);
    Million {
        create_s,
        bytes_per_trigger,
        cpu_s,
        runs_per_s,
        shutdown_s,
    }
}

/// One `DelayQueue` task owning every timer.
pub fn measure_delay_queue(window: Duration) -> Million {
    let timers = DelayQueueTimers::start(2);
    let before = settled_heap();
    let runs = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let bodies = (0..TRIGGERS)
        .map(|_| {
            let runs = runs.clone();
            Box::new(move || {
                runs.fetch_add(1, Relaxed);
                Some(PERIOD)
            }) as Box<dyn FnMut() -> Option<Duration> + Send>
        })
        .collect();
    let (inserted, armed) = mpsc::channel();
    timers.spawn_then(
        bodies,
        |i| first_delay(i as u64),
        move || {
            let _ = inserted.send(());
        },
    );
    armed.recv().expect("every timer inserted");
    let create_s = start.elapsed().as_secs_f64();
    let (bytes_per_trigger, cpu_s, runs_per_s) = observe(before, &runs, window);
    let start = Instant::now();
    drop(timers);
    let shutdown_s = start.elapsed().as_secs_f64();
    Million {
        create_s,
        bytes_per_trigger,
        cpu_s,
        runs_per_s,
        shutdown_s,
    }
}

/// Warms up, then reads the heap per trigger, CPU seconds and runs per
/// second over `window`.
fn observe(heap_before: isize, runs: &AtomicU64, window: Duration) -> (f64, f64, f64) {
    thread::sleep(WARM_UP);
    let bytes_per_trigger = (heap() - heap_before) as f64 / TRIGGERS as f64;
    let (cpu_before, runs_before) = (cpu_time(), runs.load(Relaxed));
    thread::sleep(window);
    let (cpu_after, runs_after) = (cpu_time(), runs.load(Relaxed));
    let cpu_s = match (cpu_before, cpu_after) {
        (Some(a), Some(b)) => (b - a).as_secs_f64(),
        _ => f64::NAN,
    };
    let runs_per_s = (runs_after - runs_before) as f64 / window.as_secs_f64();
    (bytes_per_trigger, cpu_s, runs_per_s)
}
