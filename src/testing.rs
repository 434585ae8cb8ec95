//! Virtual time for tests. A [`VirtualScheduler`] is a scheduler whose
//! clock moves only when the test says so. It runs what is due on the
//! calling thread.
//!
//! A [`VirtualScheduler`] dereferences to a [`Scheduler`](crate::Scheduler),
//! so every scheduler method works on it, and triggers bind to it the same
//! way.
//!
//! # A fetch that does Tokio I/O
//!
//! Call [`advance`](VirtualScheduler::advance) inside a Tokio runtime,
//! which `#[tokio::test]` gives a test. The fetch's I/O then runs on that
//! runtime. `advance` waits for it in real time and moves no virtual time
//! meanwhile, so every fetch starts at its exact instant. A sleep inside
//! the fetch takes [`VirtualClock::sleep`], since a Tokio timer would wait
//! in real time.
//!
//! ```
//! # #[cfg(feature = "tokio")] {
//! use circulation_trigger::{Refresh, Scheduler};
//! use std::path::PathBuf;
//! use std::time::Duration;
//!
//! // In a test file this is `#[tokio::test] async fn …`.
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! runtime.block_on(async {
//!     let path = std::env::temp_dir().join(format!("testing-recipe-{}", std::process::id()));
//!     std::fs::write(&path, "v1")?;
//!     let sim = Scheduler::builder().build_virtual();
//!     let config = Refresh::builder(&sim)
//!         .every(Duration::from_secs(30))
//!         .bind_async(path.clone(), |path: &mut PathBuf| {
//!             Box::pin(async move { tokio::fs::read_to_string(&*path).await })
//!         });
//!     config.refresh_now()?;
//!     sim.advance(Duration::ZERO); // the read takes real time, no virtual time
//!     assert_eq!(config.get().as_deref().map(String::as_str), Some("v1"));
//!     std::fs::write(&path, "v2")?;
//!     sim.advance(Duration::from_secs(30)); // the period's fetch, at 30 s exactly
//!     assert_eq!(config.get().as_deref().map(String::as_str), Some("v2"));
//!     assert_eq!(config.refreshes(), 2);
//!     std::fs::remove_file(&path)?;
//!     Ok::<(), Box<dyn std::error::Error>>(())
//! })?;
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use crate::virtual_time::{VirtualClock, VirtualScheduler};
