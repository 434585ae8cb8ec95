//! G9 and G13 memory: a counting global allocator measures the live heap of
//! this test binary, so "memory stays flat" is an exact byte count rather
//! than a noisy RSS reading. Each test holds a lock so they measure alone.

mod common;

use circulation_trigger::{Scheduler, Task, Trigger};
use common::{eventually, Counter, Storm};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    /// Allocations made by this thread (no other thread's: a scheduler's
    /// threads allocate at their own times).
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // `try_with`: a thread being torn down has no counter any more.
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

static ALONE: Mutex<()> = Mutex::new(());

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// The allocations this thread makes in `f`.
fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// Binds `task`; returns the trigger and the allocations binding made.
fn bind_counted<S: AsRef<Scheduler>>(scheduler: &S, task: impl Task) -> (Trigger, usize) {
    let mut trigger = None;
    let allocations = allocations_in(|| trigger = Some(Trigger::bind(scheduler, task)));
    (trigger.unwrap(), allocations)
}

#[test]
fn a_trigger_whose_task_fits_in_a_pointer_is_one_allocation() {
    let _alone = ALONE.lock().unwrap();
    let sim = Scheduler::builder().build_virtual();
    let runs = Arc::new(AtomicU64::new(0));
    // The first binding sets up the registry's first tables of slots.
    let first = Trigger::bind(&sim, || None);
    // A closure capturing one `Arc`: kept inside the trigger's allocation.
    let counted = Arc::clone(&runs);
    let small = move || {
        counted.fetch_add(1, Ordering::Relaxed);
        Some(Duration::from_secs(1))
    };
    assert_eq!(
        std::mem::size_of_val(&small),
        std::mem::size_of::<*const ()>()
    );
    let (small, allocations) = bind_counted(&sim, small);
    assert_eq!(
        allocations, 1,
        "one allocation for the trigger and its task"
    );
    // Two `Arc`s: too large for the trigger's slot, boxed apart.
    let (a, b) = (Arc::clone(&runs), Arc::clone(&runs));
    let (large, allocations) = bind_counted(&sim, move || {
        a.fetch_add(1, Ordering::Relaxed);
        b.fetch_add(1, Ordering::Relaxed);
        None
    });
    assert_eq!(allocations, 2, "the trigger, and its task's box");
    // Both run their task, and each task goes with its trigger.
    small.fire().unwrap();
    large.fire().unwrap();
    sim.advance(Duration::from_millis(1));
    assert_eq!(runs.load(Ordering::Relaxed), 3);
    drop((first, small, large));
    sim.shutdown();
    assert_eq!(Arc::strong_count(&runs), 1, "the tasks were dropped");
}

#[test]
fn g9_a_million_rearms_retain_no_memory() {
    let _alone = ALONE.lock().unwrap();
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let trigger = Trigger::bind(&scheduler, || None);
    // Warm up: the first re-arms allocate the wheel entry and queues.
    for _ in 0..1_000 {
        trigger.fire_after(Duration::from_secs(3600)).unwrap();
    }
    thread::sleep(Duration::from_millis(50));
    let before = live();
    for _ in 0..1_000_000 {
        trigger.fire_after(Duration::from_secs(3600)).unwrap();
    }
    thread::sleep(Duration::from_millis(50));
    let grown = live() - before;
    assert!(
        grown < 16 * 1024,
        "1M re-arms grew the heap by {grown} bytes"
    );
}

#[test]
fn g13_a_fire_storm_keeps_memory_flat() {
    let _alone = ALONE.lock().unwrap();
    let scheduler = Scheduler::builder().workers(2).build().unwrap();
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        r.bump();
        thread::sleep(Duration::from_millis(1));
        None
    });
    let storm = Storm::start(&trigger, 2, |t| {
        t.fire().unwrap();
        t.fire_after(Duration::from_secs(3600)).unwrap();
        t.fire().unwrap();
    });
    eventually("the storm is under way", || runs.get() >= 20);
    let before = live();
    let runs_before = runs.get();
    thread::sleep(Duration::from_millis(300));
    let grown = live() - before;
    storm.stop();
    assert!(runs.get() > runs_before, "the task kept running");
    assert!(
        grown < 64 * 1024,
        "the storm grew the heap by {grown} bytes"
    );
}

#[test]
fn a_burst_gives_its_buffers_back() {
    // While the only worker is busy, 20,000 re-arms pile up in the timer's
    // inbox and 20,000 fires in the run queue (no thread takes the role:
    // the worker count is capped). Once the worker is free it files the
    // re-arms and serves the fires; what stays is the wheel's entries,
    // not the buffers' peak room.
    const N: usize = 20_000;
    let _alone = ALONE.lock().unwrap();
    let scheduler = Scheduler::builder()
        .workers(1)
        .max_workers(1)
        .build()
        .unwrap();
    let (entered_tx, entered_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let blocker = Trigger::bind(&scheduler, move || {
        entered_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        None
    });
    let runs = Counter::default();
    let armed: Vec<Trigger> = (0..N).map(|_| Trigger::bind(&scheduler, || None)).collect();
    let fired: Vec<Trigger> = (0..N)
        .map(|_| {
            let r = runs.clone();
            Trigger::bind(&scheduler, move || {
                r.bump();
                None
            })
        })
        .collect();
    blocker.fire().unwrap();
    entered_rx.recv_timeout(common::PATIENCE).unwrap();
    let before = live();
    for trigger in &armed {
        trigger.fire_after(Duration::from_secs(3600)).unwrap();
    }
    for trigger in &fired {
        trigger.fire().unwrap();
    }
    let peak = live() - before;
    release_tx.send(()).unwrap();
    eventually("every fire served", || runs.get() == N);
    // The wheel's entries (12 B each, in chunks of 1,024) stay; the
    // inbox's and the run queue's room for 20,000 each goes back.
    let bound = (N as isize + 1_024) * 12 + 64 * 1_024;
    eventually("the burst's room given back", || live() - before < bound);
    assert!(
        peak > bound,
        "no burst to give back: {peak} bytes at the peak"
    );
    drop((armed, fired, blocker));
}

#[test]
fn an_idle_periodic_trigger_holds_at_most_128_bytes() {
    // Guarantee G9's bound made a figure: the trigger's allocation, its wheel
    // entry and its registry slot, with a task that fits in a pointer. The
    // handles' vector is the user's, made before counting.
    const N: usize = 16_384;
    let _alone = ALONE.lock().unwrap();
    let sim = Scheduler::builder().build_virtual();
    let runs = Arc::new(AtomicU64::new(0));
    let mut triggers = Vec::with_capacity(N);
    let before = live();
    for i in 0..N {
        let runs = Arc::clone(&runs);
        let trigger = Trigger::bind(&sim, move || {
            runs.fetch_add(1, Ordering::Relaxed);
            Some(Duration::from_secs(1))
        });
        trigger
            .fire_after(Duration::from_micros(1 + (i as u64 * 1_000_000) / N as u64))
            .unwrap();
        triggers.push(trigger);
    }
    // Three periods: every trigger has run and re-armed itself.
    sim.advance(Duration::from_secs(3));
    assert!(runs.load(Ordering::Relaxed) >= 2 * N as u64);
    let per_trigger = (live() - before) as f64 / N as f64;
    // Feature `metrics` adds 16 B to the core, for the counts it last reported.
    let bound = if cfg!(feature = "metrics") {
        144.0
    } else {
        128.0
    };
    assert!(per_trigger <= bound, "{per_trigger:.1} bytes a trigger");
    drop(triggers);
}
