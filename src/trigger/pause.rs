//! The off switch of guarantee G17, with `pause`, `resume` and
//! `resume_after`. `TriggerStats::paused` reads it.

use super::Trigger;
use crate::core::ResumeTo;
use crate::error::FireError;
use std::time::Duration;

/// # Pause and resume
///
/// `pause` is a mode, and `suspend` is not. The timeline shows which one a
/// feature switch wants.
///
/// ```text
///            suspend()              fire() from the bus        period ends
/// suspend:   ──┤ pending run cancelled ──▶ runs again ───────────▶ runs …   (the switch is undone)
///            pause()                fire() → Err(Paused)       period ends
/// pause:     ──┤ pending run cancelled ──▶ nothing ─────────────▶ nothing … until resume()
/// ```
///
/// A feature switch, a maintenance window and an operator's "stop refreshing"
/// want `pause`. "Cancel what is pending, and let the next fire start again"
/// wants `suspend`.
impl Trigger {
    /// Pauses the trigger until [`resume`](Self::resume). Once `pause`
    /// returns, no iteration starts. Every `fire`, `fire_after`, `fire_at`,
    /// `fire_within` and `fire_and_wait` is refused with
    /// [`FireError::Paused`] or [`WaitError::Paused`](crate::WaitError::Paused).
    /// The pending run, due or armed, is cancelled. A delay the iteration in
    /// flight returns is remembered, not armed. An iteration in flight
    /// finishes. A fire that races `pause` is either refused, or accepted
    /// and then cancelled by it, as a fire just before a `suspend` is. It
    /// never runs after `pause` returns, as guarantee G17 promises.
    ///
    /// It is idempotent, and works after shutdown too. Fires never wait for
    /// it. `pause` and `resume` take a lock of their own, and the fire path
    /// takes none.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{FireError, Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::bind(&sim, || Some(Duration::from_secs(30)));
    /// trigger.fire()?;
    /// sim.advance(Duration::from_secs(1)); // ran once, armed for 30 s
    ///
    /// trigger.pause(); // the feature switch is off
    /// assert_eq!(trigger.fire(), Err(FireError::Paused)); // "refresh now" from the bus
    /// sim.advance(Duration::from_secs(120));
    /// assert_eq!(trigger.stats().iterations, 1); // nothing ran while paused
    ///
    /// trigger.resume()?; // back on its 30 s schedule
    /// sim.advance(Duration::from_secs(30));
    /// assert_eq!(trigger.stats().iterations, 2);
    /// # Ok::<(), FireError>(())
    /// ```
    pub fn pause(&self) {
        self.core.pause();
    }

    /// Takes a paused trigger back on its schedule. Its next run is the
    /// delay its last iteration returned, counted from now. If an iteration
    /// that began before the pause is still in flight, the delay it returns
    /// counts from when it returns. A trigger whose last iteration returned
    /// `None`, or that never ran, is unpaused and stays idle until the next
    /// fire. So is one suspended before the pause or while paused. A
    /// [`suspend`](Self::suspend) holds until the next fire, whatever that
    /// iteration in flight returns. A trigger whose last delay is over about
    /// 34 years stays idle too.
    ///
    /// Fires are accepted again from this call on. A fire that races it is
    /// refused because it saw the pause, or served as a fire after the
    /// resume. A fire that began before the pause took effect and ends after
    /// the resume may have been cancelled by the pause. A fire just before a
    /// `suspend` is cancelled the same way.
    ///
    /// Returns whether the trigger was paused. On a trigger that is not, it
    /// changes nothing.
    ///
    /// # Errors
    ///
    /// [`FireError::Shutdown`] after shutdown. The trigger stays paused, also
    /// when shutdown begins during the call.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::bind(&sim, || None);
    /// assert!(!trigger.resume()?); // not paused: nothing to do
    /// trigger.pause();
    /// assert!(trigger.stats().paused);
    /// assert!(trigger.resume()?);
    /// assert!(!trigger.stats().paused);
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn resume(&self) -> Result<bool, FireError> {
        self.core.resume(ResumeTo::Schedule)
    }

    /// Takes a paused trigger back with its next run `delay` from now.
    /// `Duration::ZERO` means at once. It suits a switch that turns back on
    /// with a refresh, or on a schedule of its own. Otherwise it works as
    /// [`resume`](Self::resume).
    ///
    /// # Errors
    ///
    /// [`FireError::Shutdown`] after shutdown. [`FireError::DelayTooLong`]
    /// if the deadline lies past the clock's range. The trigger stays
    /// paused either way.
    ///
    /// # Examples
    ///
    /// ```
    /// use circulation_trigger::{Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// let sim = Scheduler::builder().build_virtual();
    /// let trigger = Trigger::bind(&sim, || Some(Duration::from_secs(30)));
    /// trigger.pause();
    /// trigger.resume_after(Duration::ZERO)?; // refresh at once, then every 30 s
    /// sim.advance(Duration::from_secs(61));
    /// assert_eq!(trigger.stats().iterations, 3);
    /// # Ok::<(), circulation_trigger::FireError>(())
    /// ```
    pub fn resume_after(&self, delay: Duration) -> Result<bool, FireError> {
        self.core.resume(ResumeTo::After(delay))
    }

    /// Whether the trigger is paused. Users read
    /// [`TriggerStats::paused`](crate::report::TriggerStats::paused).
    pub(crate) fn is_paused(&self) -> bool {
        self.core.is_paused()
    }
}
