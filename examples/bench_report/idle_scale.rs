//! Scenario 5, idle scale: 100,000 periodic triggers (1 s period, trivial
//! body, first runs spread over the first second); CPU time over a window
//! and heap bytes per trigger.

use crate::alloc::{heap, settled_heap};
use crate::cpu::{context_switches, cpu_time};
use crate::peers::delay_queue::DelayQueueTimers;
use crate::peers::{Fire, Peer};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

const TRIGGERS: u64 = 100_000;
const PERIOD: Duration = Duration::from_secs(1);
/// Time for every chain to start and settle before measuring.
const WARM_UP: Duration = Duration::from_millis(1_500);

/// What one idle run measured.
#[derive(Debug, Clone, Copy)]
pub struct Idle {
    /// CPU seconds (user + system) over the window.
    pub cpu_s: f64,
    /// Heap bytes per trigger once every chain is armed.
    pub bytes_per_trigger: f64,
    /// Task runs per second over the window (≈ 100,000 if the peer keeps up).
    pub runs_per_s: f64,
    /// Context switches per second over the window (thread wake-ups).
    pub switches_per_s: f64,
}

/// The first run of trigger `i`: one every 10 µs from the start.
pub fn first_delay(i: u64) -> Duration {
    Duration::from_micros(1 + i * 10)
}

/// Measures `P` with `TRIGGERS` triggers over `window`.
pub fn measure<P: Peer>(window: Duration) -> Idle {
    let peer = P::start(2);
    let (triggers, _, idle) =
        arm_and_observe::<P, { PERIOD.as_secs() }>(&peer, TRIGGERS, WARM_UP, window);
    drop(triggers);
    drop(peer);
    idle
}

/// Binds `triggers` periodic triggers of `PERIOD_S` seconds on `peer`,
/// their first runs one every 10 µs, then observes after `warm_up`. Returns
/// the handles, the seconds the binding and arming took, and what was
/// observed. The period is a constant, so each task captures only its
/// counter, as a user's would, and the heap per trigger counts no more.
pub fn arm_and_observe<P: Peer, const PERIOD_S: u64>(
    peer: &P,
    triggers: u64,
    warm_up: Duration,
    window: Duration,
) -> (Vec<P::Trigger>, f64, Idle) {
    let runs = Arc::new(AtomicU64::new(0));
    // The user's handles are the user's memory: allocated before counting.
    let mut handles = Vec::with_capacity(triggers as usize);
    let before = settled_heap();
    let start = Instant::now();
    for i in 0..triggers {
        let runs = runs.clone();
        let trigger = peer.bind(move || {
            runs.fetch_add(1, Relaxed);
            Some(Duration::from_secs(PERIOD_S))
        });
        trigger.fire_after(first_delay(i));
        handles.push(trigger);
    }
    let create_s = start.elapsed().as_secs_f64();
    let idle = observe(before, triggers, &runs, warm_up, window);
    (handles, create_s, idle)
}

/// The same with one `DelayQueue` task owning every timer.
pub fn measure_delay_queue(window: Duration) -> Idle {
    let timers = DelayQueueTimers::start(2);
    let before = settled_heap();
    let runs = Arc::new(AtomicU64::new(0));
    let bodies = (0..TRIGGERS)
        .map(|_| {
            let runs = runs.clone();
            Box::new(move || {
                runs.fetch_add(1, Relaxed);
                Some(PERIOD)
            }) as Box<dyn FnMut() -> Option<Duration> + Send>
        })
        .collect();
    timers.spawn(bodies, |i| first_delay(i as u64));
    let idle = observe(before, TRIGGERS, &runs, WARM_UP, window);
    drop(timers);
    idle
}

/// Waits `warm_up`, then reads the heap per trigger of `triggers`, and
/// CPU, runs and context switches over `window`.
pub fn observe(
    heap_before: isize,
    triggers: u64,
    runs: &AtomicU64,
    warm_up: Duration,
    window: Duration,
) -> Idle {
    thread::sleep(warm_up);
    let bytes_per_trigger = (heap() - heap_before) as f64 / triggers as f64;
    let (cpu_before, runs_before) = (cpu_time(), runs.load(Relaxed));
    let switches_before = context_switches();
    thread::sleep(window);
    let switches_after = context_switches();
    let (cpu_after, runs_after) = (cpu_time(), runs.load(Relaxed));
    let cpu_s = match (cpu_before, cpu_after) {
        (Some(a), Some(b)) => (b - a).as_secs_f64(),
        _ => f64::NAN,
    };
    Idle {
        cpu_s,
        bytes_per_trigger,
        runs_per_s: (runs_after - runs_before) as f64 / window.as_secs_f64(),
        switches_per_s: match (switches_before, switches_after) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64 / window.as_secs_f64(),
            _ => f64::NAN,
        },
    }
}
