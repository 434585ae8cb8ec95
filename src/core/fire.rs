//! The firer side of a trigger: `fire`, `fire_after` and their kin, `fire_and_wait` and
//! `suspend`. Any thread may call them, any number at once. A firer hands the trigger on
//! through the doors in `hand_off.rs`. What meets the request word that the shutdown scan
//! closed is in `closed.rs`.
//!
//! # Ground rules
//!
//! A firer only ever does read-modify-writes on the state word and the request word,
//! then hands the trigger on. On the state word these are `advance`, `advance_fire` and
//! `reserve`. On the request word they are `install` and `take_due`. A firer never
//! touches the task cell.
//!
//! Its install decides a race with shutdown. An install before the scan's close of the
//! word is accepted. Then the scan lists it, or its claim's run is run or listed. An
//! install after the close is refused. See the `shutdown` module.
//!
//! A firer whose fire only lands on a pending run gives way now and then
//! ([`give_way_in_a_storm`]), so a storm's firers leave the worker its core.

use super::hand_off::OnClosed;
use super::Counted;
use super::{Core, Runtime};
use crate::clock::deadline_us;
use crate::context::{self, Outcome};
use crate::error::{FireError, WaitError};
use crate::request::{is_newer, Installer, Kind, Refused, Word};
use crate::state::Reserve;
use std::time::Duration;

impl<R: Runtime> Counted<Core<R>> {
    /// Requests a run as soon as a worker is free.
    pub(crate) fn fire(&self) -> Result<(), FireError> {
        self.fire_version().map(|_| ())
    }

    /// [`fire`](Self::fire), returning the version it installed. That is a run now, or for
    /// a debounced trigger the burst's run.
    pub(super) fn fire_version(&self) -> Result<u32, FireError> {
        match self.debounce() {
            Some(debounce) => self.fire_debounced(debounce),
            None => self.fire_now(),
        }
    }

    /// A debounced fire. It asks for a run `window` from now, capped at the burst's
    /// `max_wait`. See `policy::Debounce`.
    ///
    /// The cap may come from a burst that a starting run closed meanwhile. It could then be
    /// early for the new burst this fire belongs to. So the call fires again, `window` from
    /// now, and the latest wins.
    fn fire_debounced(
        &self,
        debounce: &crate::policy::trigger::Debounce,
    ) -> Result<u32, FireError> {
        let now_ns = self.runtime.timing().clock.now_ns();
        let (delay_us, start, opened) = debounce.delay_us(now_ns / 1_000);
        let version = match self.fire_after_version(now_ns, Duration::from_micros(delay_us)) {
            Ok(version) => version,
            Err(error) => {
                if opened {
                    debounce.unopen(start); // refused, so no burst began
                }
                return Err(error);
            }
        };
        // The cap came from a burst that a claimed run closed meanwhile. That run was
        // not this fire's own. So this fire begins the next burst.
        let served = |closed_by: u32| closed_by == version || is_newer(closed_by, version);
        if delay_us == debounce.window_us()
            || debounce.is_open(start)
            || served(debounce.closed_by())
        {
            return Ok(version);
        }
        self.rare().counters.not_a_fire(); // one call, one fire
        let now_ns = self.runtime.timing().clock.now_ns();
        let (delay_us, _, _) = debounce.delay_us(now_ns / 1_000);
        self.fire_after_version(now_ns, Duration::from_micros(delay_us))
    }

    /// A run as soon as a worker is free, not debounced.
    fn fire_now(&self) -> Result<u32, FireError> {
        if self.runtime.is_closed() {
            return Err(self.refused_shutdown());
        }
        self.check_paused()?;
        let (version, coalesced) = self.state.advance_fire();
        self.advanced(version, coalesced);
        if coalesced {
            // A re-run was already reserved and now serves this fire, in one RMW in all.
            // The request word keeps the reservation's claim. `exit` re-runs the live
            // version, this one or newer, and `advanced` keeps that version within reach.
            // If shutdown began meanwhile, the fire is refused. The reserved re-run stands
            // for the earlier, accepted fire, and `exit` lists it.
            if self.runtime.is_closed() {
                return Err(FireError::Shutdown);
            }
            give_way_in_a_storm();
            return Ok(version);
        }
        let installed = self.request.install(version, Kind::Due, Installer::Publish);
        // Installed, the fire is accepted. The install came before the shutdown scan's
        // close of the word. So the scan lists the request, or whoever claims it first
        // runs it or lists it. See `Request::close`.
        let replaced = self.accepted(installed)?;
        let queued_here = replaced.is_some() && !self.reserve_inline() && self.schedule_run(true);
        if !queued_here && replaced.is_some_and(|old| old.kind() == Kind::Due) {
            // The run was already pending, queued and not yet taken. It now serves this
            // fire too, so this fire handed nothing on.
            give_way_in_a_storm();
        }
        Ok(version)
    }

    /// Fires, then waits at most `timeout` for the iteration that serves this fire. See
    /// `wait.rs`.
    pub(crate) fn fire_and_wait(&self, timeout: Duration) -> Result<Outcome, WaitError> {
        let fired = self.fire_for_wait()?;
        let deadline = std::time::Instant::now().checked_add(timeout);
        self.waiters().wait(fired, deadline)
    }

    /// A waiter's fire, refused from inside this trigger's own task. Returns the version
    /// whose run the waiter waits for.
    pub(crate) fn fire_for_wait(&self) -> Result<u32, WaitError> {
        if context::is_running_here(self.address()) {
            return Err(WaitError::OwnTask);
        }
        // Created before the fire, so the run serving it reports to them.
        self.waiters();
        self.fire_version().map_err(|error| match error {
            FireError::Paused => WaitError::Paused,
            FireError::DelayTooLong(delay) => WaitError::DelayTooLong(delay),
            _ => WaitError::Shutdown,
        })
    }
}

impl<R: Runtime> Core<R> {
    /// A fire's first look, which refuses it at once while the trigger is paused, as G17
    /// requires.
    ///
    /// Only the answer depends on this Relaxed look. A fire may pass it as `pause` begins.
    /// Then the paused word refuses it, or the pause's advance makes its run stale. See
    /// [`pause`](Self::pause).
    #[inline]
    fn check_paused(&self) -> Result<(), FireError> {
        if self.request.peek().kind() == Kind::Paused {
            return Err(self.refused_paused());
        }
        Ok(())
    }

    /// A fire refused because the trigger is paused.
    ///
    /// It is counted out of line, so the fire path it branches off stays as small as before.
    #[cold]
    #[inline(never)]
    fn refused_paused(&self) -> FireError {
        crate::metrics::refused(self.name(), "paused");
        self.runtime.refused_paused();
        FireError::Paused
    }

    /// A fire refused because the scheduler shut down.
    #[cold]
    fn refused_shutdown(&self) -> FireError {
        crate::metrics::refused(self.name(), "shutdown");
        FireError::Shutdown
    }

    /// Fired while an iteration runs, this does the dispatcher's job right here.
    ///
    /// It claims the due request and sets RESERVED, instead of waking a worker only to find
    /// the trigger busy. Under a fire storm this keeps the second worker asleep and the queue
    /// empty, as G13 requires. Returns `false` if a worker must still be given the run.
    pub(super) fn reserve_inline(&self) -> bool {
        if !self.state.snapshot().is_running() {
            return false;
        }
        // `None` means a worker already took it, or a newer non-due request replaced it.
        // Either way someone else is in charge.
        let Some(version) = self.request.take_due() else {
            return true;
        };
        match self.state.reserve(version) {
            Reserve::Reserved | Reserve::Stale => true,
            // The iteration ended meanwhile, so hand the request back. If the closed word
            // refuses it, there is nothing to hand on. The scan lists this claim if it found
            // it idle. Otherwise the iteration that ran as the scan closed the word lists it
            // on ending, in `list_marked_claim`. The scheduler's own threads list, never a
            // firer's.
            Reserve::NotRunning => self
                .request
                .install(version, Kind::Due, Installer::Publish)
                .is_err(),
        }
    }
}

impl<R: Runtime> Counted<Core<R>> {
    /// Requests a run `delay` from now. The latest request wins.
    #[inline]
    pub(crate) fn fire_after(&self, delay: Duration) -> Result<(), FireError> {
        self.fire_after_from(self.runtime.timing().clock.deadline_base_ns(), delay)
    }

    /// Requests a run `delay` after `now_ns`.
    #[inline]
    pub(super) fn fire_after_from(&self, now_ns: u64, delay: Duration) -> Result<(), FireError> {
        self.fire_after_version(now_ns, delay).map(|_| ())
    }

    /// [`fire_after_from`](Self::fire_after_from), returning the version
    /// it installed. A zero delay is a run now, never debounced.
    #[inline]
    fn fire_after_version(&self, now_ns: u64, delay: Duration) -> Result<u32, FireError> {
        if delay.is_zero() {
            return self.fire_now();
        }
        // The deadline is computed and checked before the version moves. An overflowing
        // delay must not cancel the live chain. See "Pitfalls" in docs/DESIGN.md.
        let deadline = deadline_us(now_ns, delay, self.runtime.timing().tick_us)
            .ok_or(FireError::DelayTooLong(delay))?;
        if self.runtime.is_closed() {
            return Err(self.refused_shutdown());
        }
        self.check_paused()?;
        let version = self.advance();
        let installed = self.publish_at(version, deadline, now_ns / 1_000, OnClosed::Refuse);
        // Installed means accepted, as in `fire_now`.
        self.accepted(installed)?;
        Ok(version)
    }

    /// Requests a run when the scheduler's clock shows `at_ns`, or now if it already has.
    pub(crate) fn fire_at_ns(&self, at_ns: u64) -> Result<(), FireError> {
        let now_ns = self.runtime.timing().clock.now_ns();
        match at_ns.checked_sub(now_ns) {
            Some(delay) if delay > 0 => self.fire_after_from(now_ns, Duration::from_nanos(delay)),
            _ => self.fire_now().map(|_| ()),
        }
    }

    /// Requests a run at `at` on the real clock. See `Trigger::fire_at`.
    pub(crate) fn fire_at(&self, at: std::time::Instant) -> Result<(), FireError> {
        match self.runtime.timing().clock.instant_ns(at) {
            Some(at_ns) => self.fire_at_ns(at_ns),
            // On virtual time, the instant counts from the real now.
            None => self.fire_after(at.saturating_duration_since(std::time::Instant::now())),
        }
    }

    /// Requests a run after a uniformly random delay in `[0, window)`.
    /// The whole window must fit the clock's range, so whether the fire is
    /// refused never depends on the draw.
    pub(crate) fn fire_within(&self, window: Duration) -> Result<(), FireError> {
        let nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return self.fire_now().map(|_| ());
        }
        let now_ns = self.runtime.timing().clock.deadline_base_ns();
        if deadline_us(now_ns, window, self.runtime.timing().tick_us).is_none() {
            return Err(FireError::DelayTooLong(window));
        }
        let delay = Duration::from_nanos(self.runtime.random_below(nanos));
        self.fire_after_from(now_ns, delay)
    }
}

impl<R: Runtime> Core<R> {
    /// A debounced burst whose run is cancelled is over. The next fire opens a new one.
    pub(super) fn close_burst(&self) {
        if let Some(debounce) = self.debounce() {
            debounce.close();
        }
    }

    /// A firer's install. Returns `Ok(Some(replaced))`, or `Ok(None)` if a newer request won.
    ///
    /// A paused or shut-down trigger returns its error. That fire advanced the version but is
    /// refused, so it is not counted as a fire.
    fn accepted(&self, installed: Result<Word, Refused>) -> Result<Option<Word>, FireError> {
        match installed {
            Ok(replaced) => Ok(Some(replaced)),
            Err(Refused::Paused) => {
                self.rare().counters.not_a_fire();
                crate::metrics::refused(self.name(), "paused");
                Err(FireError::Paused)
            }
            Err(Refused::Closed) => {
                self.rare().counters.not_a_fire();
                Err(self.refused_shutdown())
            }
            Err(Refused::Newer | Refused::NotPaused) => Ok(None),
        }
    }

    /// Cancels every pending request. An iteration in flight finishes.
    pub(crate) fn suspend(&self) {
        self.close_burst();
        let version = if self.request.peek().kind() == Kind::Paused {
            // The pause told the waiters of what it cancelled already.
            match self.suspend_paused(None) {
                Some(version) => version,
                None => return,
            }
        } else {
            let (version, refused) = self.advance_to_idle();
            match refused {
                // A pause came in between and took what was pending.
                Some(Refused::Paused) => self.suspend_paused(None).unwrap_or(version),
                // A newer request won, as the later call. The exception is a resume
                // installed after this advance. The pause before it took or met what
                // was pending. The resume restored the schedule that this suspend
                // cancels under G6. So suspend again.
                Some(Refused::Newer) => self.suspend_paused(Some(version)).unwrap_or(version),
                _ => version,
            }
        };
        // After the publish, so a waiter told "suspended" reads the trigger so. It
        // gets the newest version this suspend installed. A fire accepted after a
        // resume that it cancelled has a waiter too.
        if let Some(waiters) = self.existing_waiters() {
            waiters.suspended(version);
        }
    }

    /// Advances and installs IDLE. Returns the version, and why the install was refused, if
    /// it was.
    ///
    /// A refusal comes from a pause that came in between, or from a newer request. The pause
    /// took what was pending. The suspend then only cancels the schedule that a resume would
    /// restore, in [`suspend_paused`](Self::suspend_paused).
    fn advance_to_idle(&self) -> (u32, Option<Refused>) {
        let version = self.advance();
        self.rare().counters.suspended(version);
        let installed = self
            .request
            .install(version, Kind::Idle, Installer::Publish);
        (version, installed.err())
    }

    /// A suspend that meets a pause.
    ///
    /// Nothing is pending. But a resume onto the schedule would restart the trigger, which G6
    /// forbids until the next fire. The call runs under the pause lock, so no resume can come
    /// in between. If the trigger is still paused, the resume is told to leave it idle. If it
    /// was resumed meanwhile, the suspend cancels what the resume installed. The call then
    /// returns the version it installed.
    ///
    /// With `since`, the suspend that advanced to that version met a newer request rather
    /// than PAUSED. The call then does all this only if a resume installed with a newer
    /// version. It returns `None` otherwise. `Rare::resumed_at` records that version, written
    /// under this lock. If the refusing request was that resume's, the refused install read
    /// it. So this lock is taken after the resume's and sees its record. The call is bounded.
    /// Under the lock no pause or resume can come, so it happens once only. A record from
    /// 2^29 versions back may read as newer. That gives a second suspend, which the call's
    /// overlap with the newer request allows.
    fn suspend_paused(&self, since: Option<u32>) -> Option<u32> {
        let _guard = crate::sync::lock(self.runtime.pause_lock());
        if let Some(version) = since {
            // Relaxed: under the pause lock. See `Rare::resumed_at`.
            let resumed_at = self
                .rare()
                .resumed_at
                .load(std::sync::atomic::Ordering::Relaxed);
            if !crate::request::is_newer(resumed_at, version) {
                return None;
            }
        }
        if self.is_paused() {
            // Relaxed: read and written under the pause lock.
            self.rare()
                .stays_suspended
                .store(true, std::sync::atomic::Ordering::Relaxed);
            return None;
        }
        // No pause can come in between, since this lock is held.
        let (version, refused) = self.advance_to_idle();
        debug_assert_ne!(
            refused,
            Some(Refused::Paused),
            "paused without the pause lock"
        );
        Some(version)
    }
}

/// Fires into an already pending run that a thread makes before it yields its CPU once.
/// See [`give_way_in_a_storm`].
///
/// It is not used under loom, since a model thread's yield is loom's to schedule.
#[cfg(not(loom))]
const STORM_STREAK: u32 = 256;

#[cfg(not(loom))]
thread_local! {
    /// This thread's fires that coalesced into a pending run.
    ///
    /// The count wraps. The unit tests read it too.
    pub(super) static COALESCED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs after a fire that only coalesced into a pending run. Every [`STORM_STREAK`]th such
/// fire on this thread yields the CPU once.
///
/// The pending run is a reserved re-run, or a run queued and not yet taken. Such a fire
/// has nothing left to do, since the pending run serves it. A thread firing in a loop
/// makes only these. A machine may have fewer cores than busy threads. Then firers that
/// never block would hold the cores and starve the very worker that runs the task. A fire
/// storm's iterations per second then follow the kernel's fair share. Two firers and one
/// worker on two cores leave the worker two thirds of one. One `sched_yield` per
/// `STORM_STREAK` coalesced fires lets the worker run. It costs a fraction of a percent of
/// the firer's time, and nothing for any caller that does other work between fires.
///
/// Both kinds of pending run count. A fire into a queued run counts only when it queued
/// nothing itself. The run is queued between an iteration's end and the next one's start,
/// or while the worker that queued it waits for a CPU. Meanwhile every fire lands on the
/// queued run. Firers that only yielded into a reserved re-run kept the cores from that
/// very worker. Counting the fires into a queued run too raised both the iterations per
/// second and each firer's fires per second in scenario 4 of the benchmarks. A queued
/// run's fires are RMWs on the words that the worker is about to take. A longer streak
/// gave less. A run may also stay queued because every worker is busy elsewhere. There
/// the cost is one `sched_yield` per `STORM_STREAK` fires, within the noise of scenario 1's
/// "`fire()`, run already pending".
#[inline]
pub(super) fn give_way_in_a_storm() {
    #[cfg(not(loom))]
    COALESCED.with(|count| {
        let next = count.get().wrapping_add(1);
        count.set(next);
        if next % STORM_STREAK == 0 {
            std::thread::yield_now();
        }
    });
}
