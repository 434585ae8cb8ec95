//! The timer's inbox: triggers whose AT request changed, each at most once
//! (the IN_INBOX bit of the trigger's request word), and the rule that
//! wakes the role holder only when a new deadline is earlier than the one
//! it sleeps toward.
//!
//! # The wake-up protocol
//!
//! `sleep_until` holds the deadline the role holder sleeps toward: `AWAKE`
//! while the holder works, `FREE` (above every deadline) while the role is
//! free. It changes only under the pool lock. A free role is due at the
//! earliest deadline of its inbox's news (`inbox_next`), which every push
//! and every poke while it is free lowers under the lock; news that came
//! while it was held makes it due at once when it is put back (nobody
//! judged the pokes that found `AWAKE`).
//!
//! * The firer that sets IN_INBOX ([`Pool::inbox_push`]) takes the lock,
//!   pushes, reads the trigger's request with an RMW (`Request::touch`) and
//!   wakes the holder if that request's deadline is before `sleep_until`.
//!   If the role is free it wakes an idle worker to take it instead.
//! * A firer that finds IN_INBOX already set ([`Pool::poke`]) reads
//!   `sleep_until` without the lock. Either the pusher's `touch` came after
//!   this firer's publish in the request word's modification order — then
//!   the pusher judged this firer's deadline — or before it: then the
//!   firer's publish (Acquire) synchronized with `touch` (Release), which
//!   happened after every `sleep_until` store the pusher saw under the lock,
//!   so the firer reads that value or a later one. A later value is `FREE`
//!   (the firer takes the lock and lowers the free role's due time),
//!   `AWAKE` (the inbox will be drained, or is non-empty when the role is
//!   put back, which makes it due at once) or a new sleep,
//!   which the holder only starts with an empty inbox — after it cleared
//!   IN_INBOX, which this firer found set, so it read this firer's request.
//!
//! Relaxed is enough on `sleep_until`: every edge above is carried by the
//! lock or by the request word.

use super::{InboxItem, Pool, State, Wakes, AWAKE, NEVER};
use crate::core::{Core, Runtime};
use crate::request::Stamp;
use crate::sync::{Arc, Ordering};

/// Under the lock: the deadline a push of `core` asks the timer for — its
/// request's (read with the Release `touch` of the protocol above), or now
/// if its last handle is gone: the drop may have found IN_INBOX set by this
/// push and left the turn to it (see `Core::let_go`; the lock orders the
/// drop's handle count before this read, or this push before its poke).
pub(super) fn judge<R: Runtime>(core: &Core<R>, stamp: Stamp) -> Option<u64> {
    if core.handles_gone() {
        return Some(0);
    }
    core.request().touch().kind().deadline(stamp.now_us())
}

impl<R: Runtime> Pool<R> {
    /// Adds `core` (whose IN_INBOX flag this caller set); wakes the role
    /// holder if the trigger's current deadline is earlier than its sleep
    /// target. Returns `false` if the pool is closed (shut down).
    pub(crate) fn inbox_push(&self, core: &Arc<Core<R>>, stamp: Stamp) -> bool {
        self.push_inbox((Arc::clone(core), stamp), || judge(core, stamp))
    }

    /// Adds `core` (whose IN_INBOX flag this caller set) for a turn at once,
    /// whatever it requests: its last handle is gone, and the timer lets go
    /// of it at that turn (see `Core::let_go`). `false` if closed.
    pub(crate) fn inbox_push_now(&self, core: &Arc<Core<R>>, stamp: Stamp) -> bool {
        self.push_inbox((Arc::clone(core), stamp), || Some(0))
    }

    /// A trigger already in the inbox got a new deadline: wake the holder
    /// if the deadline is earlier than its sleep target.
    #[inline]
    pub(crate) fn poke(&self, deadline: u64) {
        // Relaxed: see the module docs.
        if deadline < self.sleep_until.load(Ordering::Relaxed) {
            self.poke_locked(deadline);
        }
    }

    /// Adds `core` to the inbox (its caller set IN_INBOX) and applies the
    /// wake-up protocol of `inbox.rs` through `judge`, which reads the
    /// trigger's deadline; `false` if closed.
    pub(super) fn push_inbox(
        &self,
        item: InboxItem<R>,
        judge: impl FnOnce() -> Option<u64>,
    ) -> bool {
        // A refused item is dropped after the guard (declared before it):
        // its reference may be the trigger's last.
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

    /// Under the lock: the inbox push proper (see [`push_inbox`](Self::push_inbox)).
    pub(super) fn add_to_inbox(
        &self,
        state: &mut State<R>,
        item: InboxItem<R>,
        judge: impl FnOnce() -> Option<u64>,
        taker: bool,
        wakes: &mut Wakes,
    ) {
        state.inbox.push(item);
        // A free role is due for the news at its deadline (a worker's look
        // for work takes it then, ahead of queued runs); news with no
        // deadline (a suspend) asks nothing by a time.
        let deadline = judge();
        state.inbox_next = state.inbox_next.min(deadline.unwrap_or(NEVER));
        if state.timer.is_some() {
            // The role is free: an idle worker takes it to read the news —
            // unless the caller is a worker about to look for work, which
            // takes it itself once its queue is done.
            if !taker {
                let _ = state.wake_idle(wakes);
            }
        } else if deadline.is_some_and(|deadline| self.earlier(state, deadline)) {
            let _ = state.wake_holder(wakes);
        }
    }

    /// The slow half of `poke` (see `inbox.rs`): under the lock, wakes the
    /// holder if `deadline` precedes its target.
    pub(crate) fn poke_locked(&self, deadline: u64) {
        let mut state = self.lock();
        let mut wakes = Wakes::default();
        if state.timer.is_some() {
            // The role is free: it is due for this news by its deadline.
            state.inbox_next = state.inbox_next.min(deadline);
        } else if self.earlier(&mut state, deadline) {
            let _ = state.wake_holder(&mut wakes);
        }
        drop(state);
        self.notify(wakes);
    }

    /// Under the lock: whether `deadline` precedes the holder's target; if
    /// so marks it awake, so later firers skip the lock.
    pub(super) fn earlier(&self, state: &mut State<R>, deadline: u64) -> bool {
        // Relaxed: the lock orders it (see `inbox.rs`).
        if deadline < self.sleep_until.load(Ordering::Relaxed) {
            self.sleep_until.store(AWAKE, Ordering::Relaxed);
            state.notified = true;
            true
        } else {
            false
        }
    }
}
