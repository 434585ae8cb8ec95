//! The core's hand-offs to the runtime, for the firer side in `fire.rs` and the runner
//! side in `run.rs`. They go through three doors. A due run goes into the run queue,
//! through `schedule_run`. A deadline goes into the timer's inbox, through `publish_at`
//! and [`InboxPush`]. The timer's expiry comes back through `expire`.
//!
//! # Ground rules
//!
//! Two flags make every queue hold a trigger at most once, as G9 and G13 require. The
//! `queued` flag covers the run queue. IN_INBOX covers the timer inbox. It is a bit of
//! the request word, set by the same compare-exchange that installs an AT request.
//!
//! A caller that sets a flag must push the trigger. One that finds it set pushes nothing.
//! It knows that the pending dispatch or inbox entry will read the request word after
//! clearing the flag. So that dispatch serves the newest request. The orderings of
//! `queued` are in the module docs of `core`.

use super::iteration::DispatchJob;
use super::Counted;
use super::{Core, Runtime, Turn};
use crate::request::{Installer, Kind, Refused, Stamp, Word};
use crate::sync::Ordering;

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
    pub(crate) fn deliver<R: Runtime>(self, core: &Counted<Core<R>>) {
        let _ = core.runtime.to_timer(core, self.stamp_for(core), false);
    }

    /// The pool was closed before the push, so there is nothing to deliver. The scan lists
    /// the request, as in [`deliver`](Self::deliver).
    pub(crate) fn closed<R: Runtime>(self, core: &Core<R>) {
        let _ = self.stamp_for(core);
    }
}

impl<R: Runtime> Counted<Core<R>> {
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
    pub(super) fn schedule_run(&self, wake: bool) -> bool {
        if !self.claim_queue_slot() {
            return false;
        }
        if let Some(slot) = self.cancel_slot() {
            if !self.runtime.is_closed() {
                slot.spawner
                    .spawn(Box::pin(DispatchJob::new(Counted::clone(self))));
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
    pub(crate) fn push_to_pool(&self, wake: bool) {
        let _ = self.runtime.queue_run(Counted::clone(self), wake);
    }
}

impl<R: Runtime> Core<R> {
    /// Sets `queued`. Returns whether this caller must push the trigger.
    ///
    /// A trigger already queued is not pushed again. After shutdown the flag may stay set,
    /// since nothing is queued any more.
    pub(super) fn claim_queue_slot(&self) -> bool {
        // Release: see the `queued` item of `# Orderings` in the module docs of `core`.
        if !self.set_queued(Ordering::Release) {
            return true;
        }
        #[cfg(feature = "tracing")]
        tracing::trace!(
            trigger = self.name().unwrap_or("<unnamed>"),
            "fire coalesced into the queued run"
        );
        false
    }
}

impl<R: Runtime> Counted<Core<R>> {
    /// Installs "run at `deadline`" for `version` and tells the timer.
    ///
    /// The publish that sets IN_INBOX pushes the trigger to the inbox. One that finds it set
    /// only wakes the timer if the deadline is earlier than its sleep target.
    ///
    /// It returns the install's result alone, since its one caller needs nothing else.
    #[inline]
    pub(super) fn publish_at(
        &self,
        version: u32,
        deadline: u64,
        now_us: u64,
        on_closed: OnClosed,
    ) -> Result<Word, Refused> {
        let (_, installed, push) = self.install_at(version, deadline, now_us, on_closed);
        if let Some(push) = push {
            push.deliver(self);
        }
        installed
    }

    /// [`hand_to_timer`](Self::hand_to_timer), delivering the inbox push at once, if one is
    /// needed.
    #[inline]
    pub(super) fn to_timer_now(
        &self,
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
        &self,
        version: u32,
        deadline: u64,
        now_us: u64,
        on_closed: OnClosed,
    ) -> Option<InboxPush> {
        self.install_at(version, deadline, now_us, on_closed).2
    }

    /// What both publishes share. It installs the AT request, then calls
    /// [`hand_to_timer`](Self::hand_to_timer).
    ///
    /// Always inlined, so that its three results stay in registers. Returned through memory,
    /// they made the re-arm wait on stores that its later loads could not forward from.
    #[inline(always)]
    fn install_at(
        &self,
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
        &self,
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
}

impl<R: Runtime> Core<R> {
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
