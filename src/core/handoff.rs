//! The core's hand-offs to the runtime: a due run into the run queue
//! (`schedule_run`), a deadline into the timer's inbox (`publish_at`,
//! [`InboxPush`]), a request that meets a closed runtime into the shutdown
//! report (`closed_under`), and the timer's expiry back (`expire`).
//!
//! # Ground rules
//!
//! Two flags make every queue hold a trigger at most once (G9, G13):
//! `queued` (run queue) and IN_INBOX (timer inbox, a bit of the request
//! word, set by the same compare-exchange that installs an AT request). A
//! caller that sets a flag must push the trigger; one that finds it set
//! pushes nothing, and knows the pending dispatch (or inbox entry) will
//! read the request word after clearing the flag, so it serves the newest
//! request. The orderings of `queued` are in the module docs of `core`.

use super::iteration::DispatchJob;
use super::runtime::SHARE_US;
use super::{Core, Runtime};
use crate::request::{Kind, Word};
use crate::sync::{Arc, Ordering};

/// What a request that meets a closed scheduler does (see `lifecycle.rs`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnClosed {
    /// A firer's request: left in place; the firer's `confirm` takes it
    /// back and refuses the fire.
    Refuse,
    /// The scheduler's own (expiry, re-run, re-arm): listed as discarded.
    List,
}

/// A trigger whose request now sits behind IN_INBOX and that must still be
/// put in the timer's inbox — by [`deliver`](Self::deliver), or by a worker
/// under the pool lock it takes next. No user code runs before that, so the
/// wake-up protocol (`scheduler/inbox.rs`) is unchanged: the push only
/// happens a little later, and judges the request it then reads.
#[must_use]
pub(crate) struct InboxPush<R: Runtime> {
    pub(crate) core: Arc<Core<R>>,
    pub(crate) now_us: u64,
}

impl<R: Runtime> InboxPush<R> {
    /// Pushes now; a closed pool makes the request discarded (and listed)
    /// for the scheduler's own requests, or refused for a firer's.
    fn deliver(self, on_closed: OnClosed) {
        if !self.core.runtime.to_timer(&self.core, self.now_us) {
            self.core.closed_under(on_closed);
        }
    }

    /// Pushes now; the scheduler's own request (a re-arm).
    pub(crate) fn deliver_now(self) {
        self.deliver(OnClosed::List);
    }

    /// The pool was closed before the push: list the re-arm as discarded.
    pub(crate) fn closed(self) {
        self.core.closed_under(OnClosed::List);
    }
}

impl<R: Runtime> Core<R> {
    /// Puts the trigger in the run queue unless it is there already. A
    /// firer's run wakes a worker; the scheduler's own (a worker
    /// re-queueing the trigger it just ran) wakes nobody — that worker goes
    /// back to the queue itself — unless that iteration ran long (see
    /// [`ran_long`](Self::ran_long)).
    ///
    /// An async trigger's dispatch goes to its executor instead (while the
    /// scheduler is open): it only spawns the iteration's future, which
    /// the same executor task then polls — no worker wake-up. A dispatch
    /// its executor drops unpolled falls back to the pool.
    pub(super) fn schedule_run(self: &Arc<Self>, on_closed: OnClosed) {
        if !self.claim_queue_slot(on_closed) {
            return;
        }
        if let Some(slot) = self.cancel_slot() {
            if !self.runtime.is_closed() {
                slot.spawner
                    .spawn(Box::pin(DispatchJob::new(Arc::clone(self))));
                return;
            }
        }
        let wake = on_closed == OnClosed::Refuse || self.ran_long();
        self.push_to_pool(on_closed, wake);
    }

    /// Whether this trigger's last iteration ran long enough (the pool's
    /// `SHARE_US`, the work worth waking a thread for) that its re-run
    /// should also wake a standby: an
    /// idle worker (or the role holder) that takes the run if it gets a
    /// CPU before the worker that queued it comes back to the queue. On a
    /// machine with more runnable threads than cores, a thread that has
    /// just spent its slice on user code is the one the kernel preempts
    /// next, while one that slept is favoured: first come, first served.
    /// Measured with a 1 ms task and two threads firing flat out on 2
    /// cores: re-running strictly in place gives about 575 iterations/s,
    /// strictly on the woken worker about 580/s, with a standby 570–750/s
    /// from one process to the next (about 650/s on average; the kernel's
    /// placement of the threads decides). The wake-up costs a few µs,
    /// under 2 % of such an iteration; quick iterations keep re-running in
    /// place with no wake-up at all.
    pub(super) fn ran_long(&self) -> bool {
        let share = SHARE_US;
        self.stats.last_run_us().is_some_and(|us| us >= share)
    }

    /// Puts this trigger, its queue slot claimed, in the run queue, waking
    /// a worker if `wake`.
    pub(crate) fn push_to_pool(self: &Arc<Self>, on_closed: OnClosed, wake: bool) {
        if !self.runtime.queue_run(Arc::downgrade(self), wake) {
            self.closed_under(on_closed);
        }
    }

    /// Sets `queued`; returns whether this caller must push the trigger. A
    /// trigger already queued is not pushed again — unless the queue was
    /// closed under it (see [`Core::closed_under`]).
    pub(super) fn claim_queue_slot(&self, on_closed: OnClosed) -> bool {
        // Release: see `# Orderings` (queued).
        if !self.queued.swap(true, Ordering::Release) {
            return true;
        }
        #[cfg(feature = "tracing")]
        tracing::trace!(
            trigger = self.name().unwrap_or("<unnamed>"),
            "fire coalesced into the queued run"
        );
        if self.runtime.is_closed() {
            self.closed_under(on_closed);
        }
        false
    }

    /// A request met a closed scheduler. The scheduler's own requests are
    /// listed as discarded here; a firer's is left for its `confirm`, which
    /// takes it back and refuses the fire.
    pub(super) fn closed_under(&self, on_closed: OnClosed) {
        if on_closed == OnClosed::List {
            self.runtime.discard_listed(self);
        }
    }

    /// Installs "run at `deadline`" for `version` and tells the timer: the
    /// publish that sets IN_INBOX pushes the trigger to the inbox; one that
    /// finds it set only wakes the timer if the deadline is earlier than its
    /// sleep target.
    pub(super) fn publish_at(
        self: &Arc<Self>,
        version: u32,
        deadline: u64,
        now_us: u64,
        on_closed: OnClosed,
    ) -> (Kind, Option<Word>) {
        let (kind, replaced, push) = self.publish_at_later(version, deadline, now_us, on_closed);
        if let Some(push) = push {
            push.deliver(on_closed);
        }
        (kind, replaced)
    }

    /// [`publish_at`](Self::publish_at), leaving the inbox push (if one is
    /// needed) to the caller: a worker hands it to the pool under the lock
    /// it takes next anyway. A request meeting a closed scheduler here is
    /// handled by `on_closed`: a firer's is left for its `confirm`.
    pub(super) fn publish_at_later(
        self: &Arc<Self>,
        version: u32,
        deadline: u64,
        now_us: u64,
        on_closed: OnClosed,
    ) -> (Kind, Option<Word>, Option<InboxPush<R>>) {
        let kind = Kind::at(deadline, now_us);
        let replaced = self.request.publish(version, kind, true);
        let push = match replaced {
            Some(old) if !old.in_inbox() => Some(InboxPush {
                core: Arc::clone(self),
                now_us,
            }),
            Some(_) => {
                self.runtime.poke_timer(deadline);
                if self.runtime.is_closed() {
                    self.closed_under(on_closed);
                }
                None
            }
            None => None, // a newer request won; its caller tells the timer
        };
        (kind, replaced, push)
    }

    /// Timer side: the AT request the timer read is due. Marks it DUE
    /// unless a newer request replaced it; returns whether the trigger must
    /// be pushed to the run queue (the timer pushes a whole batch at once).
    pub(crate) fn expire(&self, seen: Word, due_at_us: u64) -> bool {
        self.stats.marked_due(seen.version(), due_at_us);
        self.request.expire(seen) && self.claim_queue_slot(OnClosed::List)
    }
}
