//! A **circulation trigger**: a periodic task that can be fired now, fired
//! later, or suspended, from any thread, any number of times — and never
//! runs twice at once.
//!
//! A service that refreshes remote configuration every 30 s, refreshes at
//! once on an urgent "refresh now" message (which arrive in bursts), and can
//! be switched off and on, is usually built from a scheduled thread pool
//! plus "cancel and reschedule". That gets overlapping runs, racing cancels
//! and leaked timers; fixing it with locks invites deadlock. A trigger gets
//! it right once: one `AtomicU32` per trigger decides, lock-free, which run
//! may start, and a timing-wheel scheduler runs it.
//!
//! # Examples
//!
//! ```
//! use circulation_trigger::{Scheduler, Trigger};
//! use std::time::Duration;
//!
//! let scheduler = Scheduler::new();
//! let mut refreshes = 0u64; // task state: no Mutex needed, runs never overlap
//! let trigger = Trigger::bind(&scheduler, move || {
//!     refreshes += 1; // refresh_config(); task state lives across runs
//!     println!("refresh #{refreshes}");
//!     Some(Duration::from_secs(30)) // next run in 30 s; `None` stops
//! });
//! trigger.fire()?; // run now (e.g. on a "refresh now" message)
//! trigger.fire_after(Duration::from_secs(5))?; // or in 5 s: the latest call wins
//! trigger.suspend(); // feature switch off: nothing new starts
//! scheduler.shutdown();
//! assert!(scheduler.await_termination(Duration::from_secs(5)));
//! # Ok::<(), circulation_trigger::FireError>(())
//! ```
//!
//! # Features
//!
//! | feature | adds |
//! |---|---|
//! | `tokio` | async tasks (`Trigger::bind_async`), `fire_and_wait_async`, `Refresh::subscribe` |
//! | `tracing` | a DEBUG span per iteration (trigger, version, lateness, outcome; async ones entered at every poll) and events for panics, coalesced fires, shutdown |
//! | `metrics` | counters, histograms and gauges through the `metrics` facade: iterations by outcome, fires, coalesced and refused fires, run duration, lateness, live triggers, workers (names and labels in the table below) |
//! | `serde` | `Serialize` for statistics and the shutdown report; `Deserialize` for [`RetryBackoff`], [`PhaseKeeper`], [`PanicPolicy`], [`TriggerPolicies`], durations in human form ("30s") |
//!
//! None is on by default; without them nothing of theirs is compiled.
//!
//! The metrics (feature `metrics`; the application installs the
//! recorder or exporter it wants, e.g. `metrics-exporter-prometheus`):
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `circulation_trigger_iterations_total` | counter | `trigger`, `outcome` (`completed`, `panicked`, `cancelled`) |
//! | `circulation_trigger_fires_total`, `…_coalesced_fires_total` | counter | `trigger` (counted when an iteration ends) |
//! | `circulation_trigger_refused_fires_total` | counter | `trigger`, `reason` (`paused`, `shutdown`) |
//! | `circulation_trigger_run_duration_seconds`, `…_lateness_seconds` | histogram | `trigger` (lateness: timed runs) |
//! | `circulation_trigger_triggers`, `…_workers` | gauge | — (every scheduler of the process) |
//!
//! # Guarantees
//!
//! * **G1 mutual exclusion**: two iterations of one trigger never overlap.
//! * **G2 happens-before**: iteration N's writes are visible to iteration
//!   N+1; what a thread wrote before `fire` is visible to the iteration
//!   that serves it.
//! * **G3 latest wins**: each `fire`/`fire_after`/`suspend` supersedes every
//!   earlier one on that trigger.
//! * **G4 no lost fire**: after `fire_after(d)` returns (and unless
//!   superseded) an iteration starts no earlier than `d`; fired while
//!   running, exactly one more iteration follows.
//! * **G5 coalescing**: any number of fires during a run give one follow-up.
//! * **G6 suspend**: after `suspend` returns no new iteration starts.
//! * **G7 self-stop**: a task returning `None` stops until fired.
//! * **G8 panic isolation**: a panic is caught and reported; the trigger
//!   stops circulating (unless its `PanicPolicy` retries) but stays usable.
//! * **G9 bounded memory**: O(triggers), never O(fires): one timer entry and
//!   one queued run per trigger at most.
//! * **G10 no starvation**: a task that always asks to run again at once
//!   does not starve other triggers.
//! * **G11 re-entrancy**: tasks may fire or suspend any trigger, their own
//!   included, and fire each other forever, without deadlock.
//! * **G12 version wrap**: behaviour is unchanged across the 30-bit version
//!   wrap-around.
//! * **G13 progress under a storm**: threads firing flat out do not stop
//!   the task from running back to back, and memory stays flat.
//! * **G14 no stall**: no task, however long it blocks, delays another
//!   trigger's start by more than about the stall threshold
//!   ([`Builder::stall_threshold`], 10 ms; per task blocking at the same
//!   time, each needing a worker started) while the worker limit
//!   ([`Builder::max_workers`]) is not reached; reaching it is reported.
//! * **G15 never early**: coalesced periodic wake-ups
//!   ([`Builder::coalesce_periodic`]) and coarse ticks only move a start
//!   later, within a documented tolerance.
//! * **G16 every input survives**: no public function panics on an
//!   argument value (`Duration::MAX`, NaN, zero, huge counts, any name):
//!   it returns a clear error that changes nothing, or saturates as its
//!   `# Errors` or `# Edge cases` section documents.
//! * **G17 pause is a mode**: after [`Trigger::pause`] returns, no fire,
//!   delayed request or re-run starts an iteration until
//!   [`Trigger::resume`], which puts the trigger back on its schedule and
//!   loses no fire it kept; fires meanwhile are refused
//!   ([`FireError::Paused`]). `suspend` is not a mode: the next fire
//!   restarts (a feature switch wants `pause`).
//!
//! # Testing your periodic logic
//!
//! [`Builder::build_virtual`] gives a [`VirtualScheduler`]: the same
//! triggers, the same code paths, but no threads and a clock that moves only
//! when the test calls [`advance`](VirtualScheduler::advance). Every
//! iteration due by then runs on the test's thread, in deadline order, so a
//! test of "retry with back-off, refresh every 30 s" is deterministic and
//! takes microseconds:
//!
//! ```
//! use circulation_trigger::{Scheduler, Trigger};
//! use std::sync::{Arc, Mutex};
//! use std::time::Duration;
//!
//! // The logic under test: back off 1, 2, 4, … s (cap 60 s) while failing.
//! fn next_delay(ok: bool, failures: &mut u32) -> Duration {
//!     if ok {
//!         *failures = 0;
//!         return Duration::from_secs(30);
//!     }
//!     *failures += 1;
//!     Duration::from_secs(1 << (*failures - 1).min(6)).min(Duration::from_secs(60))
//! }
//!
//! let sim = Scheduler::builder().build_virtual();
//! let (clock, seen) = (sim.clock(), Arc::new(Mutex::new(Vec::new())));
//! let log = seen.clone();
//! let mut failures = 0;
//! let refresher = Trigger::bind(&sim, move || {
//!     let ok = clock.now() >= Duration::from_secs(20); // down for 20 s
//!     log.lock().unwrap().push(clock.now().as_secs());
//!     Some(next_delay(ok, &mut failures))
//! });
//! refresher.fire()?;
//! sim.advance(Duration::from_secs(60));
//! assert_eq!(*seen.lock().unwrap(), [0, 1, 3, 7, 15, 31]);
//! # Ok::<(), circulation_trigger::FireError>(())
//! ```
//!
//! `examples/virtual_time.rs` is the same, longer.
//!
//! # Shutdown
//!
//! | | new fires | armed runs | runs in flight |
//! |---|---|---|---|
//! | [`Scheduler::shutdown`] | refused ([`FireError::Shutdown`]) | discarded and listed | finish |
//! | [`Scheduler::shutdown_now`] | refused | discarded and listed | told to stop ([`cancelled`]), waited for up to the grace period |
//! | drop | refused | discarded | finish, waited for up to the grace period, then detached |
//!
//! Both kinds of shutdown produce a [`ShutdownReport`]
//! ([`Scheduler::shutdown_report`]; `shutdown_now` returns it): every
//! trigger that had an armed run and every iteration in flight with its
//! [`Outcome`]. It is exact — a fire racing the shutdown is either refused
//! to its caller or listed, never both and never neither — because the
//! state and request words say precisely what is armed and what runs.
//! Shutting down or dropping the scheduler from inside a task does not
//! deadlock.
//!
//! # Safety and correctness
//!
//! The crate has one `unsafe` block: the call of the task, stored in an
//! `UnsafeCell` because it is `FnMut` and shared by all the trigger's
//! handles. It is sound because only the worker that set the RUNNING bit of
//! the state word touches it, until it clears the bit; the loom models in
//! `loom-tests/` check that access with loom's `UnsafeCell`, which fails on
//! any concurrent access.
//!
//! # Implementation
//!
//! The crate is layered; a file imports only from lower layers (or lower
//! files of its own), so each layer can be read, and tested, without the
//! ones above it:
//!
//! ```text
//! front     lib.rs, trigger/, refresh.rs, virtual_time.rs, phase.rs
//!                                                              the public handles
//! runtime   scheduler/                                         workers, timer role, shutdown
//!              │ implements core::Runtime (scheduler/door.rs)
//! core      core/                                              Core<R: Runtime>: fire side, run side, async iterations
//! parts     stats, wait, policy, async_task, context           plain pieces the core is made of
//! words     state.rs, request.rs, word.rs                      the two atomic words, one CAS loop
//! leaves    sync, error, task, jitter, clock, wheel/            no crate imports above them
//! ```
//!
//! * `state.rs` — the state word (reservation, running, 30-bit version) and
//!   its three transitions: advance, enter, exit.
//! * `request.rs` — a second word pairing the live version with what it
//!   asks for (nothing / now / at T), so a queued dispatch serves the live
//!   request instead of a stale version, and the timer holds one entry per
//!   trigger.
//! * `core/` — a trigger's shared heart, generic over the runtime that
//!   runs it: it names what it needs as a `Runtime` trait (as tokio's task
//!   layer names its scheduler with `Schedule`) and never imports the
//!   scheduler.
//! * `wheel/` — the hierarchical timing wheel (µs resolution).
//! * `scheduler/` — the elastic worker pool that takes turns holding the
//!   timer role (the wheel), the run queue and inbox, lifecycle; it
//!   implements `Runtime` in `scheduler/door.rs`.
//!
//! The design notes — the guarantees in detail, the state-word procedures,
//! the memory orderings with the audit that checked each one against the
//! loom models, the pitfalls the design avoids, and the edge behaviour of
//! every entry point — are in `docs/DESIGN.md` in the repository.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, missing_debug_implementations)]
// docs.rs (nightly, `--cfg docsrs`): label feature-gated items with their
// feature. `doc_cfg` does it automatically since it absorbed `doc_auto_cfg`,
// which nightly no longer accepts.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod async_task;
mod clock;
mod context;
mod core;
mod error;
mod jitter;
mod metrics;
mod phase;
mod policy;
mod refresh;
mod request;
mod scheduler;
mod state;
mod stats;
mod sync;
mod task;
mod trigger;
mod virtual_time;
mod wait;
mod word;
#[cfg(loom)]
#[doc(hidden)]
pub use scheduler::model;
// Test-only: public so that `tests/wheel.rs` and `benches/wheel.rs` can
// drive the wheel alone, hidden because it is no part of the supported API.
#[doc(hidden)]
pub mod wheel;

pub use context::{cancelled, scheduler_time, Outcome};
pub use error::{BuildError, FireError, WaitError};
pub use jitter::{jittered, seed_jitter, RetryBackoff};
pub use phase::PhaseKeeper;
pub use policy::{DebouncePolicy, PanicPolicy, StuckRun, TriggerPolicies};
pub use refresh::{Reader, Refresh, RefreshBuilder};
pub use scheduler::{Builder, Scheduler, TaskPanic};
pub use scheduler::{DiscardedRun, InFlightRun, ShutdownReport};
// Test-only: the state word as `Trigger::snapshot` returns it, for tests
// and models; hidden like that method.
#[doc(hidden)]
pub use state::Snapshot;
pub use stats::{SchedulerStats, TriggerState, TriggerStats};
pub use task::Task;
pub use trigger::{Trigger, TriggerBuilder, WeakTrigger};
pub use virtual_time::{VirtualClock, VirtualScheduler};

// Every public type can be shared across threads: checked here, at compile
// time, rather than discovered in a user's `thread::spawn`.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Scheduler>();
    assert_send_sync::<Builder>();
    assert_send_sync::<VirtualScheduler>();
    assert_send_sync::<VirtualClock>();
    assert_send_sync::<Trigger>();
    assert_send_sync::<WeakTrigger>();
    assert_send_sync::<TriggerBuilder<'static>>();
    assert_send_sync::<FireError>();
    assert_send_sync::<BuildError>();
    assert_send_sync::<TaskPanic>();
    assert_send_sync::<ShutdownReport>();
    assert_send_sync::<DiscardedRun>();
    assert_send_sync::<InFlightRun>();
    assert_send_sync::<Outcome>();
    assert_send_sync::<TriggerStats>();
    assert_send_sync::<SchedulerStats>();
    assert_send_sync::<TriggerState>();
    assert_send_sync::<RetryBackoff>();
    assert_send_sync::<PhaseKeeper>();
    assert_send_sync::<PanicPolicy>();
    assert_send_sync::<StuckRun>();
    assert_send_sync::<WaitError>();
    assert_send_sync::<Snapshot>();
    assert_send_sync::<wheel::Wheel<()>>();
    assert_send_sync::<wheel::Key>();
};

// The README's Rust examples run as doctests, so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
