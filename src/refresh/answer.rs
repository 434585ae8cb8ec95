//! What a conditional fetch is given and what it answers. It is given the
//! validator of the value held, such as a version or an ETag. It answers
//! "changed" with a new value, or "unchanged".

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// What identifies a value at its store, such as a version, an ETag or a
/// release key. A conditional fetch is handed the one it returned last. It
/// may answer [`Fetched::unchanged`] when the store still has it.
/// [`bind_conditional`](crate::RefreshBuilder::bind_conditional) and
/// [`bind_async_conditional`](crate::RefreshBuilder::bind_async_conditional)
/// bind such a fetch.
///
/// Cheap to clone, since it is a shared string.
///
/// # Examples
///
/// ```
/// use circulation_trigger::refresh::Validator;
///
/// let etag = Validator::from("\"33a64df5\"");
/// assert_eq!(etag.as_str(), "\"33a64df5\"");
/// assert_eq!(Validator::from(42_u64), "42");
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Validator(Arc<str>);

impl Validator {
    /// The validator as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Validator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Validator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Validator {
    fn from(text: &str) -> Self {
        Self(Arc::from(text))
    }
}

impl From<String> for Validator {
    fn from(text: String) -> Self {
        Self(Arc::from(text))
    }
}

impl From<u64> for Validator {
    fn from(version: u64) -> Self {
        Self(Arc::from(version.to_string()))
    }
}

impl PartialEq<str> for Validator {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Validator {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

/// A conditional fetch's answer, each with what to remember until the next
/// fetch. It is a new value, or "unchanged" when the store still has the
/// value held.
///
/// "Unchanged" renews the value's freshness and publishes nothing. No
/// subscriber wakes, and readers keep the value they have. With no value
/// held it is a failure.
///
/// # Examples
///
/// ```
/// use circulation_trigger::refresh::{Fetched, Validator};
/// use circulation_trigger::{Refresh, Scheduler};
/// use std::time::Duration;
///
/// let sim = Scheduler::builder().build_virtual();
/// let store_version = 7_u64; // the store's version key
/// let config = Refresh::builder(&sim).bind_conditional(move |last: Option<Validator>| {
///     if last.is_some_and(|seen| seen == store_version.to_string().as_str()) {
///         return Ok::<_, String>(Fetched::unchanged());
///     }
///     Ok(Fetched::changed(format!("config v{store_version}")).validator(store_version))
/// });
/// config.refresh_now()?;
/// sim.advance(Duration::from_secs(30)); // fetched at 0 s, unchanged at 30 s
/// assert_eq!(config.stats().refreshes, 1);
/// assert_eq!(config.stats().unchanged, 1);
/// # Ok::<(), circulation_trigger::FireError>(())
/// ```
#[must_use = "a fetch's answer does nothing unless returned"]
pub struct Fetched<T> {
    pub(super) value: Option<T>,
    pub(super) validator: Option<Validator>,
    pub(super) next: Option<Duration>,
}

impl<T> Fetched<T> {
    /// A new value, stored and published to readers and subscribers.
    pub fn changed(value: T) -> Self {
        Self {
            value: Some(value),
            validator: None,
            next: None,
        }
    }

    /// The store still has the value held. Its freshness is renewed, and
    /// nothing is published.
    pub fn unchanged() -> Self {
        Self {
            value: None,
            validator: None,
            next: None,
        }
    }

    /// The validator to hand the next fetch. A changed value without one
    /// forgets the last. An unchanged answer without one keeps it.
    pub fn validator(mut self, validator: impl Into<Validator>) -> Self {
        self.validator = Some(validator.into());
        self
    }

    /// The delay before the next fetch, instead of the period that
    /// [`RefreshBuilder::every`](crate::RefreshBuilder::every) sets. It
    /// serves a value that names its own refresh interval.
    pub fn next_after(mut self, delay: Duration) -> Self {
        self.next = Some(delay);
        self
    }

    /// Whether this answer carries a new value.
    pub fn is_changed(&self) -> bool {
        self.value.is_some()
    }
}

impl<T: fmt::Debug> fmt::Debug for Fetched<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => f.debug_tuple("Changed").field(value).finish()?,
            None => f.write_str("Unchanged")?,
        }
        if let Some(validator) = &self.validator {
            write!(f, " (validator {validator:?})")?;
        }
        Ok(())
    }
}
