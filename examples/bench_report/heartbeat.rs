//! Scenario 6: a 20 ms heartbeat on the same scheduler as `cores + 2` tasks
//! that block for 1.5 s (a config center hanging until its RPC timeout),
//! on each implementation's default worker count. Reports the worst gap
//! between two heartbeat starts around the blocking spell.

use crate::peers::{Fire, Peer};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const PERIOD: Duration = Duration::from_millis(20);
const BLOCK: Duration = Duration::from_millis(1_500);

/// The worst gap between heartbeat starts from just before the blocking
/// tasks are fired until they have all returned.
pub fn worst_gap<P: Peer>() -> Duration {
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let peer = P::start(cores);
    let starts = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let log = starts.clone();
    let heartbeat = peer.bind(move || {
        log.lock().unwrap().push(Instant::now());
        Some(PERIOD)
    });
    heartbeat.fire();
    thread::sleep(Duration::from_millis(200));
    let blocked_at = Instant::now();
    let blockers: Vec<_> = (0..cores + 2)
        .map(|_| {
            peer.bind(|| {
                thread::sleep(BLOCK);
                None
            })
        })
        .collect();
    for blocker in &blockers {
        blocker.fire();
    }
    thread::sleep(BLOCK + Duration::from_millis(700));
    heartbeat.suspend();
    let starts = starts.lock().unwrap().clone();
    drop(blockers);
    drop(peer);
    let window_end = blocked_at + BLOCK + Duration::from_millis(500);
    // Gaps overlapping the blocking spell, counting a heartbeat that never
    // came back as silent until the window's end.
    let mut worst = Duration::ZERO;
    let mut previous = starts.iter().copied().rfind(|&s| s <= blocked_at);
    for start in starts.into_iter().filter(|&s| s > blocked_at) {
        if let Some(previous) = previous.filter(|&p| p < window_end) {
            worst = worst.max(start - previous);
        }
        previous = Some(start);
    }
    if let Some(last) = previous.filter(|&p| p < window_end) {
        worst = worst.max(window_end - last);
    }
    worst
}
