//! The firer side of a trigger — `fire`, `fire_after` and their kin,
//! `fire_and_wait`, `suspend`, called from any thread, any number at once
//! — and the core's hand-offs to the runtime: a due run into the run queue
//! (`schedule_run`), a deadline into the timer's inbox (`publish_at`,
//! [`InboxPush`]), and the timer's expiry back (`expire`); what meets the
//! request word the shutdown scan closed is in `closed.rs`. The runner
//! side (`run.rs`) hands its re-runs and re-arms on through the same
//! doors.
//!
//! # Ground rules
//!
//! A firer only ever does read-modify-writes on the state word (`advance`,
//! `advance_fire`, `reserve`) and the request word (`install`, `take_due`),
//! then hands the trigger on. It never touches the task
//! cell. Its install decides a race with shutdown: one before the scan's
//! close of the word is accepted (the scan lists it, or its claim's run is
//! run or listed), one after it is refused (see the `shutdown` module).
//!
//! Two flags make every queue hold a trigger at most once (G9, G13):
//! `queued` (run queue) and IN_INBOX (timer inbox, a bit of the request
//! word, set by the same compare-exchange that installs an AT request). A
//! caller that sets a flag must push the trigger; one that finds it set
//! pushes nothing, and knows the pending dispatch (or inbox entry) will
//! read the request word after clearing the flag, so it serves the newest
//! request. The orderings of `queued` are in the module docs of `core`.

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

/// Whose request an install is, which decides what its refusal by the
/// word the shutdown scan closed means (see `Request::close`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnClosed {
    /// A firer's (or a resume's): refused to its caller.
    Refuse,
    /// The scheduler's own (a re-run, a re-arm, a cooldown's, a resume's
    /// schedule): the run it stood for is listed as discarded.
    List,
}

/// The push a trigger still owes the timer's inbox: its request now sits
/// behind IN_INBOX and must be put in the inbox — by
/// [`deliver`](Self::deliver), or by a worker under the pool lock it takes
/// next. No user code runs before that, so the wake-up protocol
/// (`scheduler/inbox.rs`) is unchanged: the push only happens a little
/// later, and judges the request it then reads.
///
/// It names no trigger: whoever holds it holds the trigger it came from
/// (the firer, or the worker with the run's own reference), and hands
/// that in. A worker's periodic run then costs no reference of its own.
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
    /// The stamp to push `core` with, `core` being the trigger this push
    /// came from (checked in debug builds).
    #[inline]
    pub(crate) fn stamp_for<R: Runtime>(self, core: &Core<R>) -> Stamp {
        #[cfg(debug_assertions)]
        debug_assert_eq!(self.from, core.address(), "a push goes with its trigger");
        let _ = core;
        self.stamp
    }

    /// Pushes `core` (the trigger this push came from) now. A closed pool
    /// takes nothing, and nothing more is needed: the request went in
    /// before the shutdown scan closed the word, so the scan lists it
    /// (see `Request::close`).
    pub(crate) fn deliver<R: Runtime>(self, core: &Arc<Core<R>>) {
        let _ = core.runtime.to_timer(core, self.stamp_for(core), false);
    }

    /// The pool was closed before the push: nothing to deliver (the scan
    /// lists the request, as in [`deliver`](Self::deliver)).
    pub(crate) fn closed<R: Runtime>(self, core: &Core<R>) {
        let _ = self.stamp_for(core);
    }
}

impl<R: Runtime> Core<R> {
    /// Requests a run as soon as a worker is free.
    pub(crate) fn fire(self: &Arc<Self>) -> Result<(), FireError> {
        self.fire_version().map(|_| ())
    }

    /// [`fire`](Self::fire), returning the version it installed: a run
    /// now, or for a debounced trigger the burst's run.
    pub(super) fn fire_version(self: &Arc<Self>) -> Result<u32, FireError> {
        match self.debounce() {
            Some(debounce) => self.fire_debounced(debounce),
            None => self.fire_now(),
        }
    }

    /// A debounced fire: a run `window` from now, capped at the burst's
    /// `max_wait` (see `policy::Debounce`). If the cap was computed from a
    /// burst that a starting run closed meanwhile, it could be early for
    /// the new burst this fire belongs to: fire again, `window` from now
    /// (latest wins).
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
                    debounce.unopen(start); // refused: no burst began
                }
                return Err(error);
            }
        };
        // Capped by a burst that a claimed run closed meanwhile — and that
        // run was not this fire's own: this fire begins the next burst.
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

    /// A run as soon as a worker is free (not debounced).
    fn fire_now(self: &Arc<Self>) -> Result<u32, FireError> {
        if self.runtime.is_closed() {
            return Err(self.refused_shutdown());
        }
        self.check_paused()?;
        let (version, coalesced) = self.state.advance_fire();
        self.advanced(version, coalesced);
        if coalesced {
            // A re-run was already reserved and now serves this fire: one
            // RMW in all. The request word keeps the reservation's claim;
            // `exit` re-runs the live version, this one or newer (its
            // version kept within reach by `advanced`). Shutdown began
            // meanwhile: refuse; the reserved re-run stands for the
            // earlier, accepted fire, and `exit` lists it.
            if self.runtime.is_closed() {
                return Err(FireError::Shutdown);
            }
            give_way_in_a_storm();
            return Ok(version);
        }
        let installed = self.request.install(version, Kind::Due, Installer::Publish);
        // Installed, the fire is accepted: the install came before the
        // shutdown scan's close of the word, so the scan lists the request,
        // or whoever claims it first runs it (or lists it, see
        // `Request::close`).
        let replaced = self.accepted(installed)?;
        let queued_here = replaced.is_some() && !self.reserve_inline() && self.schedule_run(true);
        if !queued_here && replaced.is_some_and(|old| old.kind() == Kind::Due) {
            // The run was already pending (queued, not yet taken) and now
            // serves this fire too: this fire handed nothing on.
            give_way_in_a_storm();
        }
        Ok(version)
    }

    /// Fires, then waits for the iteration that serves this fire (see
    /// `wait.rs`) for at most `timeout`.
    pub(crate) fn fire_and_wait(self: &Arc<Self>, timeout: Duration) -> Result<Outcome, WaitError> {
        let fired = self.fire_for_wait()?;
        let deadline = std::time::Instant::now().checked_add(timeout);
        self.waiters().wait(fired, deadline)
    }

    /// A waiter's fire: refused from inside this trigger's own task;
    /// returns the version whose run the waiter waits for.
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

    /// A fire's first look: refused at once while the trigger is paused
    /// (G17). Only the answer depends on this Relaxed look: a fire that
    /// passes it as `pause` begins is refused by the paused word, or its
    /// run is made stale by the pause's advance (see [`pause`](Self::pause)).
    #[inline]
    fn check_paused(&self) -> Result<(), FireError> {
        if self.request.peek().kind() == Kind::Paused {
            return Err(self.refused_paused());
        }
        Ok(())
    }

    /// A fire refused because the trigger is paused: counted out of line,
    /// so the fire path it branches off stays as small as before.
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

    /// Fired while an iteration runs: do the dispatcher's job right here —
    /// claim the due request and set RESERVED — instead of waking a worker
    /// only to find the trigger busy. Under a fire storm this keeps the
    /// second worker asleep and the queue empty (G13). Returns `false` if a
    /// worker must still be given the run.
    pub(super) fn reserve_inline(&self) -> bool {
        if !self.state.snapshot().is_running() {
            return false;
        }
        // None: a worker already took it, or a newer non-due request
        // replaced it; either way someone else is in charge.
        let Some(version) = self.request.take_due() else {
            return true;
        };
        match self.state.reserve(version) {
            Reserve::Reserved | Reserve::Stale => true,
            // The iteration ended meanwhile: hand the request back. Refused
            // by the closed word: nothing to hand on. The scan lists this claim if it
            // found it idle, or the iteration that ran as it closed the
            // word does, ending (`list_marked_claim`): the scheduler's own
            // threads list, never a firer's.
            Reserve::NotRunning => self
                .request
                .install(version, Kind::Due, Installer::Publish)
                .is_err(),
        }
    }

    /// Requests a run `delay` from now (latest request wins).
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
        // The deadline is computed, checked, before the version moves: an
        // overflowing delay must not cancel the live chain (docs/DESIGN.md,
        // "Pitfalls").
        let deadline = deadline_us(now_ns, delay, self.runtime.timing().tick_us)
            .ok_or(FireError::DelayTooLong(delay))?;
        if self.runtime.is_closed() {
            return Err(self.refused_shutdown());
        }
        self.check_paused()?;
        let version = self.advance();
        let (_, installed) = self.publish_at(version, deadline, now_ns / 1_000, OnClosed::Refuse);
        // Installed: accepted (as in `fire_now`).
        self.accepted(installed)?;
        Ok(version)
    }

    /// Requests a run when the scheduler's clock shows `at_ns` (now, if it
    /// already has).
    pub(crate) fn fire_at_ns(self: &Arc<Self>, at_ns: u64) -> Result<(), FireError> {
        let now_ns = self.runtime.timing().clock.now_ns();
        match at_ns.checked_sub(now_ns) {
            Some(delay) if delay > 0 => self.fire_after_from(now_ns, Duration::from_nanos(delay)),
            _ => self.fire_now().map(|_| ()),
        }
    }

    /// Requests a run at `at` on the real clock (see `Trigger::fire_at`).
    pub(crate) fn fire_at(self: &Arc<Self>, at: std::time::Instant) -> Result<(), FireError> {
        match self.runtime.timing().clock.instant_ns(at) {
            Some(at_ns) => self.fire_at_ns(at_ns),
            // Virtual time: the instant counts from the real now.
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

    /// A debounced burst whose run is cancelled is over: the next fire
    /// opens a new one.
    pub(super) fn close_burst(&self) {
        if let Some(debounce) = self.debounce() {
            debounce.close();
        }
    }

    /// A firer's install: `Ok(Some(replaced))`, `Ok(None)` if a newer
    /// request won, or the error of a paused or shut-down trigger — that
    /// fire advanced the version, but is refused: not counted as a fire.
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

    /// Puts the trigger in the run queue unless it is there already;
    /// returns whether this call put it there (or spawned its dispatch).
    /// `wake`: a firer's run wakes a worker; the scheduler's own (a worker
    /// re-queueing the trigger it just ran) wakes nobody, however long the
    /// iteration ran: that worker goes back to the queue itself and
    /// normally runs it, behind the runs queued before it (G10).
    ///
    /// Waking an idle worker as a standby for a long iteration's re-run was
    /// measured against re-running in place, with a task spinning 1 ms and
    /// two threads firing flat out on a 2-vCPU Linux 6.18 guest (scenario
    /// 4, the least iterations/s of 6 rounds, three processes each, builds
    /// alternated): standby 740–782/s, in place 785–822/s. The standby's
    /// wake-up puts a thread that must first win a CPU from the firers
    /// between two iterations; in place, the next iteration starts on the
    /// CPU the last one had. What the standby also covered: if that worker
    /// next takes an earlier queued run that blocks, with no other worker
    /// awake, the re-run waits for the monitor, within the stall threshold
    /// (G14), as any queued run behind a blocked worker does.
    ///
    /// An async trigger's dispatch goes to its executor instead (while the
    /// scheduler is open): it only spawns the iteration's future, which
    /// the same executor task then polls — no worker wake-up. A dispatch
    /// its executor drops unpolled falls back to the pool.
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

    /// Puts this trigger, its queue slot claimed, in the run queue, waking
    /// a worker if `wake`. A closed pool takes nothing, and nothing more is
    /// needed: the request went in before the shutdown scan closed the
    /// word, so the scan lists it, or its claim's run (see
    /// `Request::close`).
    pub(crate) fn push_to_pool(self: &Arc<Self>, wake: bool) {
        let _ = self.runtime.queue_run(Arc::clone(self), wake);
    }

    /// Sets `queued`; returns whether this caller must push the trigger. A
    /// trigger already queued is not pushed again (after shutdown the flag
    /// may stay set: nothing is queued any more).
    pub(super) fn claim_queue_slot(&self) -> bool {
        // Release: see `# Orderings` (queued).
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

    /// Installs "run at `deadline`" for `version` and tells the timer: the
    /// publish that sets IN_INBOX pushes the trigger to the inbox; one that
    /// finds it set only wakes the timer if the deadline is earlier than its
    /// sleep target.
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

    /// [`hand_to_timer`](Self::hand_to_timer), delivering the inbox push
    /// (if one is needed) at once.
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

    /// [`publish_at`](Self::publish_at), leaving the inbox push (if one is
    /// needed) to the caller: a worker hands it to the pool under the lock
    /// it takes next anyway. `on_closed`: whose request it is (see
    /// [`OnClosed`]).
    pub(super) fn publish_at_later(
        self: &Arc<Self>,
        version: u32,
        deadline: u64,
        now_us: u64,
        on_closed: OnClosed,
    ) -> Option<InboxPush> {
        self.install_at(version, deadline, now_us, on_closed).2
    }

    /// What both publishes share: install the AT request, then
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

    /// After an AT request for `deadline` was installed (or refused): the
    /// install that set IN_INBOX must push the trigger to the inbox — it
    /// returns the push —; one that found it set only wakes the timer if
    /// the deadline is earlier than its sleep target.
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
            // The scan closed the word: the scheduler's own request lists
            // the run it stood for; a firer's is refused (`accepted`).
            Err(Refused::Closed) => {
                if on_closed == OnClosed::List {
                    self.list_owed(stamp.kind());
                }
                None
            }
            // A newer request won (its caller tells the timer), or the
            // trigger is paused.
            Err(_) => None,
        }
    }

    /// Timer side: this trigger's wheel entry is due at `due_at_us`. Marks
    /// the AT request it was filed for DUE, unless a newer request replaced
    /// it; returns whether the trigger must be pushed to the run queue (the
    /// timer pushes a whole batch at once).
    ///
    /// The entry keeps no copy of the word it was filed for: that word is
    /// the one live now if the word is an AT request with IN_INBOX clear.
    /// Every AT install sets IN_INBOX (see `Request::install`) and only the
    /// timer's `leave_inbox` clears it, after which the same `take_in`
    /// files the word it read, moving this trigger's one entry. An AT word in the
    /// inbox is newer: the timer reads and files it when it takes the
    /// trigger in. (The read may be stale; the exact-word RMW in
    /// `Request::expire` then fails, as for a word replaced in between.)
    pub(crate) fn expire(&self, due_at_us: u64) -> bool {
        let seen = self.request.peek();
        if seen.in_inbox() || !matches!(seen.kind(), Kind::At { .. }) {
            return false;
        }
        self.stats.marked_due(seen.version(), due_at_us);
        self.request.expire(seen) && self.claim_queue_slot()
    }
}
