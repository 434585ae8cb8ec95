// The crate docs are README.md, so docs.rs, crates.io and the repository
// show one front page, and its examples run as doctests.
#![doc = include_str!("../README.md")]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, missing_debug_implementations)]
// docs.rs builds with nightly and `--cfg docsrs`. There, label feature-gated
// items with their feature. `doc_cfg` does it automatically since it absorbed
// `doc_auto_cfg`, which nightly no longer accepts.
#![cfg_attr(docsrs, feature(doc_cfg))]
// Some docs link items that exist only with feature `tokio` or `serde`. Built
// without them, those links cannot resolve. CI and docs.rs build the docs with
// every feature, and there the lint stays on and fails the build.
#![cfg_attr(
    not(all(feature = "tokio", feature = "serde")),
    allow(rustdoc::broken_intra_doc_links)
)]

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
pub mod policy;
pub mod refresh;
pub mod report;
mod request;
mod scheduler;
mod shutdown;
mod state;
mod stats;
mod sync;
mod task;
pub mod testing;
mod trigger;
mod virtual_time;
mod wait;
mod wheel;
mod word;

pub use context::{is_cancelled, scheduler_time, Outcome};
pub use error::{BuildError, FireError, WaitError};
pub use refresh::{Refresh, RefreshBuilder};
pub use scheduler::{Builder, Scheduler};
pub use task::Task;
pub use trigger::{Trigger, TriggerBuilder, WeakTrigger};

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Scheduler>();
    assert_send_sync::<Builder>();
    assert_send_sync::<testing::VirtualScheduler>();
    assert_send_sync::<testing::VirtualClock>();
    assert_send_sync::<Trigger>();
    assert_send_sync::<WeakTrigger>();
    assert_send_sync::<TriggerBuilder<'static>>();
    assert_send_sync::<FireError>();
    assert_send_sync::<BuildError>();
    assert_send_sync::<report::TaskPanic>();
    assert_send_sync::<report::ShutdownReport>();
    assert_send_sync::<report::DiscardedRun>();
    assert_send_sync::<report::InFlightRun>();
    assert_send_sync::<Outcome>();
    assert_send_sync::<report::TriggerStats>();
    assert_send_sync::<report::SchedulerStats>();
    assert_send_sync::<report::TriggerState>();
    assert_send_sync::<policy::RetryBackoff>();
    assert_send_sync::<policy::PhaseKeeper>();
    assert_send_sync::<policy::PanicPolicy>();
    assert_send_sync::<policy::StuckRun>();
    assert_send_sync::<WaitError>();
};
