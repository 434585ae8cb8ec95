//! The task a trigger runs, which is anything `FnMut() -> Option<Duration>`.

use std::time::Duration;

/// A unit of periodic work.
///
/// Each run returns the delay until its next run, or `None` to stop
/// circulating until the trigger is fired again. The trigger guarantees two
/// runs never overlap, so `run` takes `&mut self` and the task's state needs
/// no lock.
///
/// Every return value is accepted. `Some(Duration::ZERO)` runs again at once. It goes
/// through the run queue, so other triggers still get their turn. A delay whose deadline
/// lies past the clock's range, such as `Duration::MAX`, stops circulating, as `None`
/// does. A panic is caught and reported, and stops circulating. The exception is a
/// trigger whose [`PanicPolicy`](crate::policy::PanicPolicy) says to retry.
///
/// Implemented for every `FnMut() -> Option<Duration> + Send + 'static`.
///
/// # Examples
///
/// ```
/// use circulation_trigger::Task;
/// use std::time::Duration;
///
/// struct Poll {
///     misses: u32,
/// }
///
/// impl Task for Poll {
///     fn run(&mut self) -> Option<Duration> {
///         self.misses += 1;
///         (self.misses < 3).then(|| Duration::from_millis(10))
///     }
/// }
///
/// let mut poll = Poll { misses: 0 };
/// assert_eq!(poll.run(), Some(Duration::from_millis(10)));
/// ```
pub trait Task: Send + 'static {
    /// Runs one iteration and returns the delay to the next one, or `None`.
    fn run(&mut self) -> Option<Duration>;
}

impl<F> Task for F
where
    F: FnMut() -> Option<Duration> + Send + 'static,
{
    #[inline]
    fn run(&mut self) -> Option<Duration> {
        self()
    }
}
