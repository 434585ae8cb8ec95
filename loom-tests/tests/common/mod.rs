//! Shared by the loom models: `run_model` with the CI preemption bound, and
//! small task-state helpers built on loom's primitives.

#![allow(dead_code)]

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;

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
