//! What the scheduler reports to its user besides shutdown.
//! That is the [`TaskPanic`] handed to the panic hook, as plain public data.

use std::any::Any;
use std::fmt;

/// A panic caught in a task, as handed to the builder's panic hook.
#[derive(Debug, Clone)]
pub struct TaskPanic {
    pub(super) trigger: Option<String>,
    pub(super) message: String,
}

impl TaskPanic {
    /// The name of the trigger whose task panicked, if it has one.
    pub fn trigger(&self) -> Option<&str> {
        self.trigger.as_deref()
    }

    /// The panic message.
    /// It reads `"<non-string panic payload>"` if the payload held no string.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for TaskPanic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.trigger {
            Some(name) => write!(f, "task of trigger `{name}` panicked: {}", self.message),
            None => write!(f, "task panicked: {}", self.message),
        }
    }
}

pub(crate) type PanicHook = Box<dyn Fn(&TaskPanic) + Send + Sync>;
pub(crate) type StuckHook = Box<dyn Fn(&crate::policy::trigger::StuckRun) + Send + Sync>;

/// The text of a panic payload.
pub(super) fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<non-string panic payload>".to_owned())
}
