//! Scenario 8, a million triggers: 1,000,000 periodic triggers with a 10 s
//! period, first runs spread over the first period. It measures the time to
//! create them, the heap per trigger, CPU over a window once every chain
//! has run once, and the time to shut down, against `DelayQueue` and the
//! heap timer in the same run.
//!
//! Our shutdown is `shutdown()`, `await_termination` and the report built,
//! which lists every discarded run. The peers' is the drop that stops them.
//! Before it, ours also takes `Scheduler::stats()` once, a snapshot of every
//! trigger, which the peers have no counterpart of.

use crate::alloc::{heap, settled_heap};
use crate::idle_scale::{arm_and_observe, first_delay, observe, Idle};
use crate::peers::delay_queue::DelayQueueTimers;
use crate::peers::heap_timer::HeapTimer;
use crate::peers::ours::Ours;
use crate::peers::Peer;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
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
    /// Heap, CPU and runs over the window.
    pub idle: Idle,
    /// Seconds to shut down.
    pub shutdown_s: f64,
    /// Ours only: seconds `Scheduler::stats()` took, and the heap bytes its
    /// result holds.
    pub stats: Option<(f64, f64)>,
}

impl Million {
    /// CPU nanoseconds per run over the window.
    pub fn cpu_per_run_ns(&self, window: Duration) -> f64 {
        self.idle.cpu_s * 1e9 / (self.idle.runs_per_s * window.as_secs_f64())
    }
}

/// Our scheduler with two workers.
pub fn measure_ours(window: Duration) -> Million {
    let peer = Ours::start(2);
    let (triggers, create_s, idle) =
        arm_and_observe::<_, { PERIOD.as_secs() }>(&peer, TRIGGERS, WARM_UP, window);
    let before = heap();
    let start = Instant::now();
    let stats = peer.scheduler.stats();
    let stats_s = start.elapsed().as_secs_f64();
    let stats_bytes = (heap() - before) as f64;
    assert_eq!(stats.triggers.len() as u64, TRIGGERS);
    drop(stats);
    let start = Instant::now();
    peer.scheduler.shutdown();
    assert!(peer.scheduler.await_termination(Duration::from_secs(60)));
    let report = peer.scheduler.shutdown_report().expect("shut down");
    let shutdown_s = start.elapsed().as_secs_f64();
    // Every chain is armed or in flight: the report lists each one.
    let listed = report.discarded().len() + report.in_flight().len();
    assert!(listed as u64 >= TRIGGERS - 2, "{listed} listed");
    drop((report, triggers, peer));
    Million {
        create_s,
        idle,
        shutdown_s,
        stats: Some((stats_s, stats_bytes)),
    }
}

/// The heap timer through the common interface.
pub fn measure_heap_timer(window: Duration) -> Million {
    let peer = HeapTimer::start(2);
    let (triggers, create_s, idle) =
        arm_and_observe::<_, { PERIOD.as_secs() }>(&peer, TRIGGERS, WARM_UP, window);
    let start = Instant::now();
    drop(peer);
    let shutdown_s = start.elapsed().as_secs_f64();
    drop(triggers);
    Million {
        create_s,
        idle,
        shutdown_s,
        stats: None,
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
    let idle = observe(before, TRIGGERS, &runs, WARM_UP, window);
    let start = Instant::now();
    drop(timers);
    let shutdown_s = start.elapsed().as_secs_f64();
    Million {
        create_s,
        idle,
        shutdown_s,
        stats: None,
    }
}
