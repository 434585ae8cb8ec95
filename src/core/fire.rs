//! The firer side of a trigger, and the core's hand-offs to the runtime.
//!
//! The firer side is `fire`, `fire_after` and their kin, `fire_and_wait` and `suspend`.
//! Any thread may call them, any number at once. The hand-offs go through three doors.
//! A due run goes into the run queue, through `schedule_run`. A deadline goes into the
//! timer's inbox, through `publish_at` and [`InboxPush`]. The timer's expiry comes back
//! through `expire`. The runner side in `run.rs` hands its re-runs and re-arms on through
//! the same doors. What meets the request word that the shutdown scan closed is in
//! `closed.rs`.
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
//! Two flags make every queue hold a trigger at most once, as G9 and G13 require. The
//! `queued` flag covers the run queue. IN_INBOX covers the timer inbox. It is a bit of
//! the request word, set by the same compare-exchange that installs an AT request.
//!
//! A caller that sets a flag must push the trigger. One that finds it set pushes nothing.
//! It knows that the pending dispatch or inbox entry will read the request word after
//! clearing the flag. So that dispatch serves the newest request. The orderings of
//! `queued` are in the module docs of `core`.

use super::give_way::give_way_in_a_storm;
use super::iteration::DispatchJob;
use super::{Core, Runtime, Turn};
use crate::clock::deadline_us;
use crate::context::{self, Outcome};
use crate::error::{FireError, WaitError};
use crate::request::{is_newer, Installer, Kind, Refused, Stamp, Word};
use crate::state::Reserve;
use crate::sync::{Arc, Ordering};
use std::time::Duration;

/// Whose request an install is.
///
/// It decides what a refusal by the word that the shutdown scan closed means. See
/// `Request::close`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnClosed {
    /// A firer's or a resume's request. Its refusal goes to its caller.
    Refuse,
    /// The scheduler's own request, such as a re-run, a re-arm, a cooldown's or a resume's
    /// schedule. The run it stood for is listed as discarded.
    List,
}

/// The push a trigger still owes the timer's inbox.
///
/// Its request now sits behind IN_INBOX and must be put in the inbox. Either
/// [`deliver`](Self::deliver) does it, or a worker does it under the pool lock it takes
/// next. No user code runs before that, so the wake-up protocol of
/// `scheduler/pool/inbox.rs` is unchanged. The push only happens a little later, and
/// judges the request it then reads.
///
/// It names no trigger. Whoever holds it holds the trigger it came from, and hands that
/// in. That holder is the firer, or the worker with the run's own reference. A worker's
/// periodic run then costs no reference of its own.
#[must_use]
pub(crate) struct InboxPush {
    /// The request pushed and the clock its deadline is relative to.
    pub(crate) stamp: Stamp,
    /// The trigger's address, to check in debug builds that the push goes
    /// with the trigger it came from.
    #[cfg(debug_assertions)]
    from: usize,
}

impl InboxPush {
    /// The stamp to push `core` with. `core` is the trigger this push came from, which debug
    /// builds check.
    #[inline]
    pub(crate) fn stamp_for<R: Runtime>(self, core: &Core<R>) -> Stamp {
        #[cfg(debug_assertions)]
        debug_assert_eq!(self.from, core.address(), "a push goes with its trigger");
        let _ = core;
        self.stamp
    }

    /// Pushes `core`, the trigger this push came from, now.
    ///
    /// A closed pool takes nothing, and nothing more is needed. The request went in before
    /// the shutdown scan closed the word, so the scan lists it. See `Request::close`.
    pub(crate) fn deliver<R: Runtime>(self, core: &Arc<Core<R>>) {
        let _ = core.runtime.to_timer(core, self.stamp_for(core), false);
    }

    /// The pool was closed before the push, so there is nothing to deliver. The scan lists
    /// the request, as in [`deliver`](Self::deliver).
    pub(crate) fn closed<R: Runtime>(self, core: &Core<R>) {
        let _ = self.stamp_for(core);
    }
}

impl<R: Runtime> Core<R> {
    /// Requests a run as soon as a worker is free.
    pub(crate) fn fire(self: &Arc<Self>) -> Result<(), FireError> {
        self.fire_version().map(|_| ())
    }

    /// [`fire`](Self::fire), returning the version it installed. That is a run now, or for
    /// a debounced trigger the burst's run.
    pub(super) fn fire_version(self: &Arc<Self>) -> Result<u32, FireError> {
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
        self: &Arc<Self>,
        debounce: &crate::policy::Debounce,
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
    fn fire_now(self: &Arc<Self>) -> Result<u32, FireError> {
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
    pub(crate) fn fire_and_wait(self: &Arc<Self>, timeout: Duration) -> Result<Outcome, WaitError> {
        let fired = self.fire_for_wait()?;
        let deadline = std::time::Instant::now().checked_add(timeout);
        self.waiters().wait(fired, deadline)
    }

    /// A waiter's fire, refused from inside this trigger's own task. Returns the version
    /// whose run the waiter waits for.
    pub(crate) fn fire_for_wait(self: &Arc<Self>) -> Result<u32, WaitError> {
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

    /// Requests a run `delay` from now. The latest request wins.
    #[inline]
    pub(crate) fn fire_after(self: &Arc<Self>, delay: Duration) -> Result<(), FireError> {
        self.fire_after_from(self.runtime.timing().clock.deadline_base_ns(), delay)
    }

    /// Requests a run `delay` after `now_ns`.
    #[inline]
    pub(super) fn fire_after_from(
        self: &Arc<Self>,
        now_ns: u64,
        delay: Duration,
    ) -> Result<(), FireError> {
        self.fire_after_version(now_ns, delay).map(|_| ())
    }

    /// [`fire_after_from`](Self::fire_after_from), returning the version
    /// it installed. A zero delay is a run now, never debounced.
    #[inline]
    fn fire_after_version(
        self: &Arc<Self>,
        now_ns: u64,
        delay: Duration,
    ) -> Result<u32, FireError> {
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
        let (_, installed) = self.publish_at(version, deadline, now_ns / 1_000, OnClosed::Refuse);
        // Installed means accepted, as in `fire_now`.
        self.accepted(installed)?;
        Ok(version)
    }

    /// Requests a run when the scheduler's clock shows `at_ns`, or now if it already has.
    pub(crate) fn fire_at_ns(self: &Arc<Self>, at_ns: u64) -> Result<(), FireError> {
        let now_ns = self.runtime.timing().clock.now_ns();
        match at_ns.checked_sub(now_ns) {
            Some(delay) if delay > 0 => self.fire_after_from(now_ns, Duration::from_nanos(delay)),
            _ => self.fire_now().map(|_| ()),
        }
    }

    /// Requests a run at `at` on the real clock. See `Trigger::fire_at`.
    pub(crate) fn fire_at(self: &Arc<Self>, at: std::time::Instant) -> Result<(), FireError> {
        match self.runtime.timing().clock.instant_ns(at) {
            Some(at_ns) => self.fire_at_ns(at_ns),
            // On virtual time, the instant counts from the real now.
            None => self.fire_after(at.saturating_duration_since(std::time::Instant::now())),
        }
    }

    /// Requests a run after a uniformly random delay in `[0, window)`.
    /// The whole window must fit the clock's range, so whether the fire is
    /// refused never depends on the draw.
    pub(crate) fn fire_within(self: &Arc<Self>, window: Duration) -> Result<(), FireError> {
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

    /// Puts the trigger in the run queue unless it is there already. Returns whether this
    /// call put it there or spawned its dispatch.
    ///
    /// With `wake`, a firer's run wakes a worker. The scheduler's own run wakes nobody,
    /// however long the iteration ran. That is a worker re-queueing the trigger it just ran.
    /// The worker goes back to the queue itself and normally runs it, behind the runs queued
    /// before it, as G10 requires.
    ///
    /// Re-running in place beat waking an idle worker as a standby for a long iteration's
    /// re-run. docs/DESIGN.md gives the measurement. The standby's wake-up puts a thread
    /// between two iterations that must first win a CPU from the firers. In place, the next
    /// iteration starts on the CPU the last one had. The standby also covered one case. That
    /// worker may next take an earlier queued run that blocks, with no other worker awake.
    /// The re-run then waits for the monitor, within the stall threshold of G14. Any queued
    /// run behind a blocked worker waits the same way.
    ///
    /// An async trigger's dispatch goes to its executor instead, while the scheduler is open.
    /// It only spawns the iteration's future, which the same executor task then polls. No
    /// worker wakes up. A dispatch that its executor drops unpolled falls back to the pool.
    pub(super) fn schedule_run(self: &Arc<Self>, wake: bool) -> bool {
        if !self.claim_queue_slot() {
            return false;
        }
        if let Some(slot) = self.cancel_slot() {
            if !self.runtime.is_closed() {
                slot.spawner
                    .spawn(Box::pin(DispatchJob::new(Arc::clone(self))));
                return true;
            }
        }
        self.push_to_pool(wake);
        true
    }

    /// Puts this trigger, its queue slot claimed, in the run queue, waking a worker if
    /// `wake`.
    ///
    /// A closed pool takes nothing, and nothing more is needed. The request went in before
    /// the shutdown scan closed the word. So the scan lists it, or it lists its claim's run.
    /// See `Request::close`.
    pub(crate) fn push_to_pool(self: &Arc<Self>, wake: bool) {
        let _ = self.runtime.queue_run(Arc::clone(self), wake);
    }

    /// Sets `queued`. Returns whether this caller must push the trigger.
    ///
    /// A trigger already queued is not pushed again. After shutdown the flag may stay set,
    /// since nothing is queued any more.
    pub(super) fn claim_queue_slot(&self) -> bool {
        // Release: see the `queued` item of `# Orderings` in the module docs of `core`.
        if !self.queued.swap(true, Ordering::Release) {
            return true;
        }
        #[cfg(feature = "tracing")]
        tracing::trace!(
            trigger = self.name().unwrap_or("<unnamed>"),
            "fire coalesced into the queued run"
        );
        false
    }

    /// Installs "run at `deadline`" for `version` and tells the timer.
    ///
    /// The publish that sets IN_INBOX pushes the trigger to the inbox. One that finds it set
    /// only wakes the timer if the deadline is earlier than its sleep target.
    #[inline]
    pub(super) fn publish_at(
        self: &Arc<Self>,
        version: u32,
        deadline: u64,
        now_us: u64,
        on_closed: OnClosed,
    ) -> (Kind, Result<Word, Refused>) {
        let (kind, installed, push) = self.install_at(version, deadline, now_us, on_closed);
        if let Some(push) = push {
            push.deliver(self);
        }
        (kind, installed)
    }

    /// [`hand_to_timer`](Self::hand_to_timer), delivering the inbox push at once, if one is
    /// needed.
    #[inline]
    pub(super) fn to_timer_now(
        self: &Arc<Self>,
        installed: Result<Word, Refused>,
        stamp: Stamp,
        deadline: u64,
        on_closed: OnClosed,
    ) {
        if let Some(push) = self.hand_to_timer(installed, stamp, deadline, on_closed) {
            push.deliver(self);
        }
    }

    /// [`publish_at`](Self::publish_at), leaving the inbox push to the caller.
    ///
    /// A worker hands the push, if one is needed, to the pool under the lock it takes next
    /// anyway. `on_closed` says whose request it is. See [`OnClosed`].
    pub(super) fn publish_at_later(
        self: &Arc<Self>,
        version: u32,
        deadline: u64,
        now_us: u64,
        on_closed: OnClosed,
    ) -> Option<InboxPush> {
        self.install_at(version, deadline, now_us, on_closed).2
    }

    /// What both publishes share. It installs the AT request, then calls
    /// [`hand_to_timer`](Self::hand_to_timer).
    #[inline]
    fn install_at(
        self: &Arc<Self>,
        version: u32,
        deadline: u64,
        now_us: u64,
        on_closed: OnClosed,
    ) -> (Kind, Result<Word, Refused>, Option<InboxPush>) {
        let kind = Kind::at(deadline, now_us);
        self.mark_timed();
        let installed = self.request.install(version, kind, Installer::Publish);
        let stamp = Stamp::new(version, kind, now_us);
        let push = self.hand_to_timer(installed, stamp, deadline, on_closed);
        (kind, installed, push)
    }

    /// Runs after an AT request for `deadline` was installed or refused.
    ///
    /// The install that set IN_INBOX must push the trigger to the inbox, so this returns the
    /// push. One that found the flag set only wakes the timer if the deadline is earlier than
    /// its sleep target.
    #[inline]
    pub(super) fn hand_to_timer(
        self: &Arc<Self>,
        installed: Result<Word, Refused>,
        stamp: Stamp,
        deadline: u64,
        on_closed: OnClosed,
    ) -> Option<InboxPush> {
        match installed {
            Ok(old) if !old.in_inbox() => Some(InboxPush {
                stamp,
                #[cfg(debug_assertions)]
                from: self.address(),
            }),
            Ok(_) => {
                self.runtime.poke_timer(Turn::By(deadline));
                None
            }
            // The scan closed the word. The scheduler's own request lists the run it stood
            // for. A firer's request is refused, in `accepted`.
            Err(Refused::Closed) => {
                if on_closed == OnClosed::List {
                    self.list_owed(stamp.kind());
                }
                None
            }
            // A newer request won, and its caller tells the timer. Or the trigger is paused.
            Err(_) => None,
        }
    }

    /// Timer side. This trigger's wheel entry is due at `due_at_us`.
    ///
    /// Marks the AT request it was filed for DUE, unless a newer request replaced it. Returns
    /// whether the trigger must be pushed to the run queue. The timer pushes a whole batch at
    /// once.
    ///
    /// The entry keeps no copy of the word it was filed for. That word is the one live now if
    /// the word is an AT request with IN_INBOX clear. Every AT install sets IN_INBOX, as
    /// `Request::install` shows. Only the timer's `leave_inbox` clears it. After that, the
    /// same `take_in` files the word it read, moving this trigger's one entry. An AT word in
    /// the inbox is newer. The timer reads and files it when it takes the trigger in. The read
    /// may be stale. The exact-word RMW in `Request::expire` then fails, as for a word
    /// replaced in between.
    pub(crate) fn expire(&self, due_at_us: u64) -> bool {
        let seen = self.request.peek();
        if seen.in_inbox() || !matches!(seen.kind(), Kind::At { .. }) {
            return false;
        }
        self.stats.marked_due(seen.version(), due_at_us);
        self.request.expire(seen) && self.claim_queue_slot()
    }
}
