//! Scenario 2, re-arm storm memory: 1,000,000 `fire_after(1 h)` on one
//! trigger, then the heap bytes still held, per re-arm.

use crate::alloc::settled_heap;
use crate::peers::{Fire, Peer};
use std::time::Duration;

const REARMS: u32 = 1_000_000;
const HOUR: Duration = Duration::from_secs(3600);

/// Heap bytes still held per re-arm, once the scheduler has caught up.
pub fn retained_per_rearm<P: Peer>() -> f64 {
    let peer = P::start(2);
    let trigger = peer.bind(|| None);
    trigger.fire_after(HOUR);
    let before = settled_heap();
    for _ in 0..REARMS {
        trigger.fire_after(HOUR);
    }
    let held = settled_heap() - before; // once timer threads caught up
    drop(trigger);
    drop(peer);
    held as f64 / f64::from(REARMS)
}
