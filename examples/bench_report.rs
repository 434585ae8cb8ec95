//! Measures the performance goals on this machine and prints a markdown
//! table: re-arm cost, bytes retained per re-arm, timer lateness, progress
//! under a fire storm, and idle cost of 100,000 periodic triggers.
//!
//! Run: `cargo run --release --example bench_report` (about 30 s).
//! A counting global allocator gives exact heap figures.

use circulation_trigger::{Scheduler, Trigger};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

struct Counting;
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn heap() -> isize {
    LIVE.load(Relaxed)
}

/// User + system CPU time of this process, from `/proc/self/stat`.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10)) // USER_HZ = 100
}

fn rearm_cost(scheduler: &Scheduler) -> (f64, f64) {
    let anchor = Trigger::bind(scheduler, || None);
    anchor.fire_after(Duration::from_secs(60)).unwrap();
    let trigger = Trigger::bind(scheduler, || None);
    let hour = Duration::from_secs(3600);
    let n = 2_000_000;
    for _ in 0..n / 10 {
        trigger.fire_after(hour).unwrap();
    }
    let start = Instant::now();
    for _ in 0..n {
        trigger.fire_after(black_box(hour)).unwrap();
    }
    let rearm = start.elapsed().as_nanos() as f64 / n as f64;
    let before = heap();
    for _ in 0..1_000_000 {
        trigger.fire_after(hour).unwrap();
    }
    thread::sleep(Duration::from_millis(20));
    let retained = (heap() - before) as f64 / 1_000_000.0;
    (rearm, retained)
}

fn lateness(scheduler: &Scheduler) -> (Duration, Duration, Duration, bool) {
    let samples = Arc::new(Mutex::new(Vec::with_capacity(2_000)));
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut triggers = Vec::new();
    let mut early = false;
    let early_flag = Arc::new(AtomicBool::new(false));
    for _ in 0..2_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let delay = Duration::from_micros(5_000 + seed % 495_000);
        let samples = samples.clone();
        let early_flag = early_flag.clone();
        let armed_at = Arc::new(Mutex::new(None::<Instant>));
        let a = armed_at.clone();
        let trigger = Trigger::bind(scheduler, move || {
            let now = Instant::now();
            let deadline = a.lock().unwrap().expect("armed") + delay;
            match now.checked_duration_since(deadline) {
                Some(late) => samples.lock().unwrap().push(late),
                None => early_flag.store(true, Relaxed),
            }
            None
        });
        *armed_at.lock().unwrap() = Some(Instant::now());
        trigger.fire_after(delay).unwrap();
        triggers.push(trigger);
    }
    while samples.lock().unwrap().len() < 2_000 && !early_flag.load(Relaxed) {
        thread::sleep(Duration::from_millis(20));
    }
    early |= early_flag.load(Relaxed);
    let mut samples = samples.lock().unwrap().clone();
    samples.sort_unstable();
    let pick = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    (pick(0.5), pick(0.99), *samples.last().unwrap(), early)
}

fn fire_storm(scheduler: &Scheduler) -> (f64, f64, isize) {
    let runs = Arc::new(AtomicU64::new(0));
    let r = runs.clone();
    let trigger = Trigger::bind(scheduler, move || {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(1) {
            std::hint::spin_loop();
        }
        r.fetch_add(1, Relaxed);
        None
    });
    let stop = Arc::new(AtomicBool::new(false));
    let before = heap();
    let start = Instant::now();
    let firers: Vec<_> = (0..2)
        .map(|_| {
            let (t, s) = (trigger.clone(), stop.clone());
            thread::spawn(move || {
                let mut fires = 0u64;
                while !s.load(Relaxed) {
                    t.fire().unwrap();
                    fires += 1;
                }
                fires
            })
        })
        .collect();
    thread::sleep(Duration::from_secs(2));
    stop.store(true, Relaxed);
    let fires: u64 = firers.into_iter().map(|f| f.join().unwrap()).sum();
    let secs = start.elapsed().as_secs_f64();
    let grown = heap() - before;
    (
        runs.load(Relaxed) as f64 / secs,
        fires as f64 / secs / 2.0,
        grown,
    )
}

fn idle_scale() -> (f64, f64) {
    let scheduler = Scheduler::builder().workers(2).build().unwrap();
    let before = heap();
    let triggers: Vec<_> = (0..100_000u64)
        .map(|i| {
            let t = Trigger::bind(&scheduler, || Some(Duration::from_secs(1)));
            t.fire_after(Duration::from_micros(i * 10)).unwrap();
            t
        })
        .collect();
    thread::sleep(Duration::from_secs(2)); // every chain is armed
    let per_trigger = (heap() - before) as f64 / triggers.len() as f64;
    let cpu_before = cpu_time();
    thread::sleep(Duration::from_secs(10));
    let cpu = match (cpu_before, cpu_time()) {
        (Some(a), Some(b)) => (b - a).as_secs_f64(),
        _ => f64::NAN,
    };
    drop(triggers);
    (per_trigger, cpu)
}

fn main() {
    let scheduler = Scheduler::builder().workers(2).build().unwrap();
    let (rearm, retained) = rearm_cost(&scheduler);
    let (p50, p99, max, early) = lateness(&scheduler);
    let (runs, fires_per_thread, storm_heap) = fire_storm(&scheduler);
    drop(scheduler);
    let (bytes, cpu) = idle_scale();
    println!("| scenario | circulation-trigger | goal |");
    println!("|---|---|---|");
    println!("| `fire_after(1 h)` re-arm, idle trigger | {rearm:.1} ns | ≤ 50 ns |");
    println!("| bytes retained per re-arm (1M re-arms) | {retained:.3} B | 0 B |");
    println!(
        "| lateness, 2,000 timers in [5, 500] ms: p50 / p99 / max | {:.0} / {:.0} / {:.0} µs{} | ~80 / ~130 µs, never early |",
        p50.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        max.as_secs_f64() * 1e6,
        if early { " (EARLY RUN SEEN)" } else { ", none early" },
    );
    println!("| fire storm, 1 ms task, 2 firing threads: iterations/s | {runs:.0} | ≥ 900 |");
    println!("| fire storm: fires/s per thread | {fires_per_thread:.0} | |");
    println!("| fire storm: heap growth over 2 s | {storm_heap} B | flat |");
    println!("| 100,000 idle periodic triggers (1 s): heap per trigger | {bytes:.0} B | ≤ 128 B |");
    println!(
        "| 100,000 idle periodic triggers: CPU over 10 s | {cpu:.2} s | ≤ DelayQueue's (~0.4 s) |"
    );
}
