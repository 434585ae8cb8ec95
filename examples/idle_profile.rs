use circulation_trigger::{Scheduler, Trigger};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
fn main() {
    let s = Scheduler::new();
    let runs = Arc::new(AtomicU64::new(0));
    let mut v = Vec::new();
    for i in 0..100_000u64 {
        let runs = runs.clone();
        let t = Trigger::bind(&s, move || { runs.fetch_add(1, Relaxed); Some(Duration::from_secs(1)) });
        let _ = t.fire_after(Duration::from_micros(1 + i * 10));
        v.push(t);
    }
    std::thread::sleep(Duration::from_secs(8));
    println!("{}", runs.load(Relaxed));
}
