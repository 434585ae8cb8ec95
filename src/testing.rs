//! Virtual time for tests. A [`VirtualScheduler`] is a scheduler whose
//! clock moves only when the test says so. It runs what is due on the
//! calling thread.
//!
//! A [`VirtualScheduler`] dereferences to a [`Scheduler`](crate::Scheduler),
//! so every scheduler method works on it, and triggers bind to it the same
//! way.

pub use crate::virtual_time::{VirtualClock, VirtualScheduler};
