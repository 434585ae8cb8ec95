// The crate docs are README.md, so docs.rs, crates.io and the repository
// show one front page, and its examples run as doctests.
#![doc = include_str!("../README.md")]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, missing_debug_implementations)]
// docs.rs builds with nightly and `--cfg docsrs`. There, label feature-gated
// items with their feature. `doc_cfg` does it automatically since it absorbed
// `doc_auto_cfg`, which nightly no longer accepts.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod async_task;
mod chunked;
mod clock;
mod context;
mod core;
mod error;
mod jitter;
mod metrics;
#[cfg(loom)]
#[doc(hidden)]
pub mod model;
mod phase;
mod policy;
pub mod refresh;
mod request;
mod scheduler;
mod shutdown;
mod state;
mod stats;
mod sync;
mod task;
mod trigger;
mod virtual_time;
mod wait;
mod wheel;
mod word;

pub use context::{is_cancelled, scheduler_time, Outcome};
pub use error::{BuildError, FireError, RefreshError, WaitError};
pub use jitter::{jittered, seed_jitter, RetryBackoff};
pub use phase::PhaseKeeper;
pub use policy::{DebouncePolicy, PanicPolicy, StuckRun, TriggerPolicies};
#[cfg(feature = "tokio")]
pub use refresh::FetchFuture;
pub use refresh::{Reader, Refresh, RefreshBuilder};
pub use scheduler::{Builder, Scheduler, TaskPanic};
pub use shutdown::{DiscardedRun, InFlightRun, ShutdownReport};
pub use state::Snapshot;
pub use stats::{SchedulerStats, TriggerState, TriggerStats};
pub use task::Task;
pub use trigger::{Trigger, TriggerBuilder, WeakTrigger};
pub use virtual_time::{VirtualClock, VirtualScheduler};

// Every public type can be shared across threads. This block checks it at
// compile time, so a user's `thread::spawn` never has to discover it.
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
};
