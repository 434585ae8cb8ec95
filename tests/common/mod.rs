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
