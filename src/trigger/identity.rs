//! A trigger's identity, and the non-owning handle. Equality and hashing go
//! by the trigger, not by its task. Two handles are equal when they drive
//! the same trigger, as the core's address tells.

use super::{Trigger, TriggerCore};
use crate::core::{Counted, WeakCounted};
use std::fmt;
use std::hash::{Hash, Hasher};

/// Two handles are equal when they are handles to the same trigger, such as
/// a clone or an upgraded [`WeakTrigger`]. So triggers can be map keys.
///
/// # Examples
///
/// ```
/// use circulation_trigger::{Scheduler, Trigger};
/// use std::collections::HashSet;
///
/// let sim = Scheduler::builder().build_virtual();
/// let (a, b) = (Trigger::bind(&sim, || None), Trigger::bind(&sim, || None));
/// assert_eq!(a, a.clone());
/// assert_eq!(a, a.downgrade().upgrade().unwrap());
/// assert_ne!(a, b); // same task, different triggers
/// let set: HashSet<Trigger> = [a.clone(), a.clone(), b].into_iter().collect();
/// assert_eq!(set.len(), 2);
/// ```
impl PartialEq for Trigger {
    fn eq(&self, other: &Self) -> bool {
        Counted::ptr_eq(&self.core, &other.core)
    }
}

impl Eq for Trigger {}

impl Hash for Trigger {
    fn hash<H: Hasher>(&self, state: &mut H) {
        Counted::as_ptr(&self.core).hash(state);
    }
}

/// A non-owning handle to a [`Trigger`], which does not keep it alive.
///
/// # Examples
///
/// ```
/// use circulation_trigger::{Scheduler, Trigger, WeakTrigger};
/// use std::sync::{Arc, OnceLock};
///
/// let scheduler = Scheduler::new();
/// let me: Arc<OnceLock<WeakTrigger>> = Arc::default();
/// let cell = me.clone();
/// let trigger = Trigger::bind(&scheduler, move || {
///     // A task may re-fire or suspend its own trigger.
///     if let Some(me) = cell.get().and_then(WeakTrigger::upgrade) {
///         me.suspend();
///     }
///     None
/// });
/// me.set(trigger.downgrade()).unwrap();
/// drop(trigger);
/// assert!(me.get().unwrap().upgrade().is_none());
/// ```
#[derive(Clone, Default)]
pub struct WeakTrigger {
    pub(super) core: WeakCounted<TriggerCore>,
}

impl WeakTrigger {
    /// The trigger, if some handle to it is still alive.
    pub fn upgrade(&self) -> Option<Trigger> {
        let core = self.core.upgrade()?;
        // The core may outlive its handles, since a run in flight holds it.
        // A handle comes back only while another is alive.
        core.upgrade_handle().then(|| Trigger { core })
    }
}

impl fmt::Debug for WeakTrigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(WeakTrigger)")
    }
}
