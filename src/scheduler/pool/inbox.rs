//! The timer's inbox and its wake-up rule. The inbox holds the triggers
//! whose AT request changed, each at most once. The IN_INBOX bit of the
//! trigger's request word ensures that. The rule wakes the role
//! holder only when a new deadline is earlier than the one it sleeps
//! toward.
//!
//! # The wake-up protocol
//!
//! `sleep_until` holds the deadline the role holder sleeps toward. It is
//! `AWAKE` while the holder works, and `FREE` while the role is free.
//! `FREE` is above every deadline. `sleep_until` changes only under the
//! pool lock. A free role is due at the earliest deadline of its inbox's
//! news, `inbox_next`. Every push and every poke while the role is free
//! lowers `inbox_next` under the lock. News that came while the role was
//! held makes it due at once when it is put back. That is because nobody
//! judged the pokes that found `AWAKE`.
//!
//! * The firer that sets IN_INBOX calls [`Pool::inbox_push`]. It takes the
//!   lock and pushes. It reads the trigger's request with an RMW,
//!   `Request::touch`. It wakes the holder if that request's deadline is
//!   before `sleep_until`. If the role is free, it wakes an idle worker to
//!   take it instead.
//! * A firer that finds IN_INBOX already set calls [`Pool::poke`]. It reads
//!   `sleep_until` without the lock. In the request word's modification
//!   order, the pusher's `touch` came either after or before this firer's
//!   publish. If after, the pusher judged this firer's deadline. If before,
//!   the firer's Acquire publish synchronized with the Release `touch`.
//!   That `touch` happened after every `sleep_until` store the pusher saw
//!   under the lock. So the firer reads that value or a later one. A later
//!   value is one of three.
//!   - `FREE` sends the firer to take the lock and lower the free role's
//!     due time.
//!   - `AWAKE` means the inbox will be drained, or is non-empty when the
//!     role is put back. That makes the role due at once.
//!   - A new sleep is one the holder only starts with an empty inbox. So
//!     the holder started it after it cleared IN_INBOX, which this firer
//!     found set. So the holder read this firer's request.
//!
//! Relaxed is enough on `sleep_until`, because the lock or the request word
//! carries every edge above.

use super::{InboxItem, Pool, State, Wakes, AWAKE, NEVER};
use crate::core::Counted;
use crate::core::{Core, Runtime};
use crate::request::Stamp;
use crate::sync::Ordering;

/// Called under the lock. Returns the deadline a push of `core` asks the
/// timer for. That is its request's deadline, read with the Release `touch`
/// of the protocol above. It is now if the trigger's last handle is gone.
/// The drop may have found IN_INBOX set by this push and left the turn to
/// it, as `Core::let_go` explains. The lock orders the drop's handle count
/// before this read, or this push before the drop's poke.
pub(super) fn judge<R: Runtime>(core: &Core<R>, stamp: Stamp) -> Option<u64> {
    if core.handles_gone() {
        return Some(0);
    }
    core.request().touch().kind().deadline(stamp.now_us())
}

impl<R: Runtime> Pool<R> {
    /// Adds `core`, whose IN_INBOX flag this caller set. It wakes the role
    /// holder if the trigger's current deadline is earlier than its sleep
    /// target. Returns `false` if shutdown closed the pool.
    pub(crate) fn inbox_push(&self, core: &Counted<Core<R>>, stamp: Stamp) -> bool {
        self.push_inbox((Counted::clone(core), stamp), || judge(core, stamp))
    }

    /// Adds `core`, whose IN_INBOX flag this caller set, for a turn at
    /// once, whatever it requests. Its last handle is gone, and the timer
    /// lets go of it at that turn, as `Core::let_go` explains. Returns
    /// `false` if closed.
    pub(crate) fn inbox_push_now(&self, core: &Counted<Core<R>>, stamp: Stamp) -> bool {
        self.push_inbox((Counted::clone(core), stamp), || Some(0))
    }

    /// A trigger already in the inbox got a new deadline. This wakes the
    /// holder if the deadline is earlier than its sleep target.
    #[inline]
    pub(crate) fn poke(&self, deadline: u64) {
        // Relaxed: see the module docs.
        if deadline < self.sleep_until.load(Ordering::Relaxed) {
            self.poke_locked(deadline);
        }
    }

    /// Adds `core` to the inbox, after its caller set IN_INBOX. It applies
    /// the wake-up protocol of `inbox.rs` through `judge`, which reads the
    /// trigger's deadline. Returns `false` if closed.
    pub(super) fn push_inbox(
        &self,
        item: InboxItem<R>,
        judge: impl FnOnce() -> Option<u64>,
    ) -> bool {
        // A refused item is dropped after the guard, so it is declared
        // before it. Its reference may be the trigger's last.
        let refused;
        let mut state = self.lock();
        if state.closed {
            refused = item;
            drop(state);
            drop(refused);
            return false;
        }
        let mut wakes = Wakes::default();
        self.add_to_inbox(&mut state, item, judge, false, &mut wakes);
        drop(state);
        self.notify(wakes);
        true
    }

    /// The inbox push proper of [`push_inbox`](Self::push_inbox), under the lock.
    pub(super) fn add_to_inbox(
        &self,
        state: &mut State<R>,
        item: InboxItem<R>,
        judge: impl FnOnce() -> Option<u64>,
        taker: bool,
        wakes: &mut Wakes,
    ) {
        state.inbox.push(item);
        // A free role is due for the news at its deadline. A worker's look
        // for work takes it then, ahead of queued runs. News with no
        // deadline, such as a suspend, asks nothing by a time.
        let deadline = judge();
        state.inbox_next = state.inbox_next.min(deadline.unwrap_or(NEVER));
        if state.timer.is_some() {
            // The role is free, so an idle worker takes it to read the
            // news. A caller that is a worker about to look for work is the
            // exception. That worker takes the role itself once its queue
            // is done.
            if !taker {
                let _ = state.wake_idle(wakes);
            }
        } else if deadline.is_some_and(|deadline| self.earlier(state, deadline)) {
            let _ = state.wake_holder(wakes);
        }
    }

    /// The slow half of `poke`, from the protocol of the module docs. Under
    /// the lock, it wakes the holder if `deadline` precedes its target.
    pub(crate) fn poke_locked(&self, deadline: u64) {
        let mut state = self.lock();
        let mut wakes = Wakes::default();
        if state.timer.is_some() {
            // The role is free, so it is due for this news by its deadline.
            state.inbox_next = state.inbox_next.min(deadline);
        } else if self.earlier(&mut state, deadline) {
            let _ = state.wake_holder(&mut wakes);
        }
        drop(state);
        self.notify(wakes);
    }

    /// Called under the lock. Returns whether `deadline` precedes the
    /// holder's target. If so, it marks the holder awake, so later firers
    /// skip the lock.
    pub(super) fn earlier(&self, state: &mut State<R>, deadline: u64) -> bool {
        // Relaxed: the lock orders it, as the module docs explain.
        if deadline < self.sleep_until.load(Ordering::Relaxed) {
            self.sleep_until.store(AWAKE, Ordering::Relaxed);
            state.notified = true;
            true
        } else {
            false
        }
    }
}
