//! What a trigger and a scheduler report: statistics, the exact shutdown
//! report and the panics caught.
//!
//! [`Trigger::stats`](crate::Trigger::stats) is the one view of a trigger,
//! and [`Scheduler::stats`](crate::Scheduler::stats) the one view of a
//! scheduler. [`Scheduler::shutdown_report`](crate::Scheduler::shutdown_report)
//! gives the [`ShutdownReport`].

pub use crate::scheduler::TaskPanic;
pub use crate::shutdown::{DiscardedRun, InFlightRun, ShutdownReport};
pub use crate::stats::{SchedulerStats, TriggerState, TriggerStats};
