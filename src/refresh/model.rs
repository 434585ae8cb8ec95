//! The refresher's shared state for the loom models. It holds the real value
//! cell, confirmation, readiness waiters and outcome. The models drive them
//! as a fetch and its readers do. It exists only under `--cfg loom`.

use super::{Course, Ended, Fetched, Latest, Meta, Pace};
use crate::clock::{Clock, ManualTime};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A value whose contents loom tracks. A reader that reaches it without a
/// happens-before edge to its writer fails the model with a causality
/// violation. That is the model's view of a torn read in a real run.
pub struct Payload(loom::cell::UnsafeCell<u32>);

// SAFETY: the contents are written once, at creation, and only read after.
// The models check that every read happens after that write.
unsafe impl Sync for Payload {}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Payload(..)")
    }
}

impl Payload {
    fn new(value: u32) -> Self {
        Self(loom::cell::UnsafeCell::new(value))
    }

    fn get(&self) -> u32 {
        // SAFETY: no thread writes the contents after creation, as the
        // `Sync` impl above states.
        self.0.with(|value| unsafe { *value })
    }
}

/// A refresher without a trigger. The model's threads play its fetch and
/// its readers.
pub struct RefreshModel {
    latest: Arc<Latest<Payload, String>>,
    course: Mutex<Course>,
    time: Arc<ManualTime>,
}

impl std::fmt::Debug for RefreshModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RefreshModel").finish_non_exhaustive()
    }
}

impl Default for RefreshModel {
    fn default() -> Self {
        Self::new()
    }
}

impl RefreshModel {
    /// A refresher holding nothing, on a clock at zero.
    pub fn new() -> Self {
        let time = Arc::new(ManualTime::default());
        let meta = Meta::new(
            Clock::Manual(Arc::clone(&time)),
            std::time::UNIX_EPOCH,
            None,
            None,
            None,
        );
        Self {
            latest: Latest::new(meta),
            course: Mutex::new(Course::new(Pace::new(Duration::from_secs(30), None), None)),
            time,
        }
    }

    fn settle(&self, ended: Ended<Payload, String>) {
        let mut course = self.course.lock().unwrap();
        self.latest.settle(
            ended,
            &mut course,
            #[cfg(feature = "tokio")]
            self.latest.fetching(),
        );
    }

    /// A fetch answers a new value.
    pub fn publish(&self, value: u32) {
        self.settle(Ended::Answered(Fetched::changed(Payload::new(value))));
    }

    /// A fetch answers "unchanged".
    pub fn unchanged(&self) {
        self.settle(Ended::Answered(Fetched::unchanged()));
    }

    /// Installs a value into an empty refresher, as reading the local copy
    /// at start does. Returns whether the cell was empty.
    pub fn carry(&self, value: u32) -> bool {
        self.latest
            .value
            .install_if_empty(std::sync::Arc::new(Payload::new(value)))
    }

    /// A fetch fails.
    pub fn fail(&self, error: &str) {
        self.settle(Ended::Error(error.to_owned()));
    }

    /// Moves the clock to `us`.
    pub fn set_time_us(&self, us: u64) {
        self.time.set_us(us);
    }

    /// A reader's handle, with its own cache.
    pub fn reader(&self) -> ModelReader {
        ModelReader(super::Reader::new(Arc::clone(&self.latest)))
    }

    /// The value a fresh reader's handle reads.
    pub fn read(&self) -> Option<u32> {
        self.reader().read()
    }

    /// The clock's time of the last confirmation, in µs, if any.
    pub fn confirmed_us(&self) -> Option<u64> {
        self.latest
            .meta
            .age()
            .map(|age| self.time.now_us() - u64::try_from(age.as_micros()).unwrap())
    }

    /// Blocks until a value is confirmed, with no timeout. A lost wake-up is
    /// then a deadlock the model reports.
    pub fn wait_ready(&self) {
        assert!(self.latest.meta.wait_confirmed(Duration::MAX));
    }

    /// What `refresh_and_wait` reports of the last fetch. It is `None` if
    /// none has ended, else its value or why there is none. `Failed(error)`
    /// comes as the error's text, and any other reason by its name.
    pub fn last_outcome(&self) -> Option<Result<u32, String>> {
        self.latest.last_outcome().map(|outcome| match outcome {
            Ok(value) => Ok(value.get()),
            Err(crate::refresh::RefreshError::Failed(error)) => Err((*error).clone()),
            Err(other) => Err(format!("{other:?}")),
        })
    }
}

/// A [`RefreshModel`]'s reader, which is the real `Reader`, its cache and all.
pub struct ModelReader(super::Reader<Payload, String>);

impl std::fmt::Debug for ModelReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelReader(..)")
    }
}

impl ModelReader {
    /// The value the handle reads now.
    pub fn read(&mut self) -> Option<u32> {
        self.0.read().map(|current| current.get())
    }
}
