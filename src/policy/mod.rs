//! How a trigger behaves: its cooldown, debounce, panic policy and stuck-run
//! report, the retry back-off, and the jitter and phase a fleet spreads its
//! load with.
//!
//! A trigger takes its policies as one value, [`TriggerPolicies`], through
//! [`TriggerBuilder::policies`](crate::TriggerBuilder::policies). With the
//! `serde` feature that value reads from a config file.

pub(crate) mod trigger;

pub use crate::jitter::{jittered, seed_jitter, RetryBackoff};
pub use crate::phase::PhaseKeeper;
pub use trigger::{DebouncePolicy, PanicPolicy, StuckRun, TriggerPolicies};
