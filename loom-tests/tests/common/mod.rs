//! Shared by the loom models: `run_model` with the CI preemption bound, and
//! small task-state helpers built on loom's primitives, and the race a
//! `fire_and_wait` waiter runs against a suspend, a pause or shutdown.

#![allow(dead_code)]

use circulation_trigger::model::Harness;
use circulation_trigger::{Trigger, WaitError};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

/// Runs `model` under loom with the CI preemption bound of 2, unless
/// `LOOM_MAX_PREEMPTIONS` asks for another (3 for a deeper local search);
/// loom's other environment variables (checkpoints, logging) work as
/// documented in `loom-tests/README.md`.
pub fn run_model(model: impl Fn() + Sync + Send + 'static) {
    run_model_bounded(2, model);
}

/// [`run_model`] with a different default bound, for small models whose
/// subtle interleavings need a deeper search and still finish in seconds.
pub fn run_model_bounded(bound: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(bound);
    }
    builder.check(model);
}

/// A counter shared between a task and the model's assertions.
#[derive(Clone, Default)]
pub struct Count(Arc<AtomicUsize>);

impl Count {
    pub fn bump(&self) -> usize {
        // SeqCst: test bookkeeping only; the properties under test never
        // lean on it (task state lives in loom UnsafeCells).
        self.0.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Task state that loom checks for concurrent access: two iterations
/// touching it at once fail the model (G1).
#[derive(Clone)]
pub struct Exclusive(Arc<Cell>);

pub struct Cell(loom::cell::UnsafeCell<usize>);

// SAFETY: shared on purpose so that loom can catch a concurrent access: the
// property under test is that the trigger never lets two iterations in.
unsafe impl Sync for Cell {}

impl Default for Exclusive {
    fn default() -> Self {
        Self(Arc::new(Cell(loom::cell::UnsafeCell::new(0))))
    }
}

impl Exclusive {
    /// Increments the state: a write loom tracks.
    pub fn touch(&self) -> usize {
        // SAFETY: the trigger promises one iteration at a time (G1); loom
        // fails the model if that promise is broken.
        self.0 .0.with_mut(|p| unsafe {
            *p += 1;
            *p
        })
    }

    /// Reads the state after every thread has joined.
    pub fn get(&self) -> usize {
        // SAFETY: called once the model's threads have joined.
        self.0 .0.with(|p| unsafe { *p })
    }
}

/// A trigger whose task counts its runs and returns `next`.
pub fn counted(h: &Harness, start: u32, next: Option<Duration>) -> (Trigger, Count) {
    let runs = Count::default();
    let r = runs.clone();
    let trigger = h.trigger(start, move || {
        r.bump();
        next
    });
    (trigger, runs)
}

/// A waiter racing its fire's run and `cancel` (a suspend, a pause,
/// shutdown), run on a thread of its own beside a worker's thread for one
/// run: the waiter looks once at some point of the race (a step of the
/// model's own first: the look itself has none before its verdict) and
/// once both are done. It is told `verdict` only if no run served its
/// fire, and in the end gets the run's outcome or `verdict`.
pub fn a_waiter_racing(verdict: WaitError, cancel: fn(&Harness, &Trigger)) {
    let h = Arc::new(Harness::new());
    let (trigger, runs) = counted(&h, 0, None);
    let fired = Harness::fire_for_wait(&trigger).unwrap();
    let worker = {
        let h = h.clone();
        thread::spawn(move || {
            h.run_one();
        })
    };
    let canceller = {
        let (h, t) = (h.clone(), trigger.clone());
        thread::spawn(move || cancel(&h, &t))
    };
    thread::yield_now();
    let during = Harness::wait_now(&trigger, fired);
    worker.join().unwrap();
    canceller.join().unwrap();
    let after = Harness::wait_now(&trigger, fired);
    let ran = runs.get() == 1;
    for answer in [during, after] {
        assert!(
            answer != Err(verdict) || !ran,
            "told {verdict:?}, but its run ran: {answer:?}"
        );
    }
    assert_eq!(after.is_ok(), ran, "{after:?}");
    assert!(ran || after == Err(verdict), "{after:?}");
}
