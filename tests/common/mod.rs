//! Helpers shared by the integration tests: polling with generous bounds
//! (never a tight timing assertion) and counters.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// How long any "eventually" may take on a loaded 2-core machine.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Polls `condition` until it holds or `PATIENCE` runs out.
pub fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for: {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

/// A shared counter.
#[derive(Clone, Default)]
pub struct Counter(Arc<AtomicUsize>);

impl Counter {
    pub fn bump(&self) -> usize {
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Threads that call `each(trigger)` flat out until stopped.
pub struct Storm {
    stop: Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl Storm {
    /// Starts `threads` threads hammering `trigger` with `each`.
    pub fn start(
        trigger: &circulation_trigger::Trigger,
        threads: usize,
        each: fn(&circulation_trigger::Trigger),
    ) -> Self {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..threads)
            .map(|_| {
                let (trigger, stop) = (trigger.clone(), stop.clone());
                thread::spawn(move || {
                    let mut calls = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        each(&trigger);
                        calls += 1;
                    }
                    calls
                })
            })
            .collect();
        Self { stop, threads }
    }

    /// Stops the threads; returns how many times `each` ran in all.
    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.threads.into_iter().map(|t| t.join().unwrap()).sum()
    }
}

/// Silences the default panic message of panics a test provokes on purpose
/// (their payload starts with "boom" or is "once"); any other panic is
/// printed as usual.
pub fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !(message.starts_with("boom") || message == "once") {
                default(info);
            }
        }));
    });
}

/// A gate tasks block on until the test opens it.
#[derive(Clone, Default)]
pub struct Gate(Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl Gate {
    /// Blocks until the gate is open.
    pub fn wait(&self) {
        let (open, bed) = &*self.0;
        let mut open = open.lock().unwrap();
        while !*open {
            open = bed.wait(open).unwrap();
        }
    }

    /// Opens the gate for good, releasing every waiter.
    pub fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }
}

/// Runs `wait` on this thread while another moves `sim`'s time on in
/// `step`s, a millisecond of real time apart, until `wait` returns (or
/// `PATIENCE` runs out): for a blocking wait on virtual time.
pub fn while_time_moves<R>(
    sim: &circulation_trigger::testing::VirtualScheduler,
    step: Duration,
    wait: impl FnOnce() -> R,
) -> R {
    let done = std::sync::atomic::AtomicBool::new(false);
    thread::scope(|scope| {
        scope.spawn(|| {
            let start = Instant::now();
            while !done.load(Ordering::SeqCst) && start.elapsed() < PATIENCE {
                sim.advance(step);
                thread::sleep(Duration::from_millis(1));
            }
        });
        let answer = wait();
        done.store(true, Ordering::SeqCst);
        answer
    })
}
