//! The off switch (G17): `pause` and `resume`, the two control calls that
//! take the runtime's pause lock; the firer side's share of the protocol
//! (the paused check, a refused publish) is in `fire.rs`, the request
//! word's (PAUSED, `install`) in `request.rs`. docs/DESIGN.md, "Pause",
//! has the whole protocol and the models that check it.

use super::fire::OnClosed;
use super::{Core, Runtime};
use crate::clock::deadline_us;
use crate::error::FireError;
use crate::request::{Kind, Refused};
use crate::sync::Arc;
use std::time::Duration;

impl<R: Runtime> Core<R> {
    /// **pause** (G17): installs PAUSED in the request word, then advances
    /// the state word. Once this returns, no iteration starts until
    /// [`resume`](Self::resume):
    /// - a request published before the PAUSED install is replaced by it,
    ///   and a run already claimed (TAKEN) enters with a version older than
    ///   this advance: `enter` finds it stale — unless it entered before the
    ///   advance, i.e. before this returned (an iteration in flight
    ///   finishes, as with `suspend`);
    /// - every publish after the install is refused (a fire, a delayed
    ///   request, a re-arm, a re-run, an expiry that finds the word
    ///   changed), and RESERVED, cleared by the advance, can only be set
    ///   again by a run claimed from a DUE request — none is installed.
    ///
    /// Pause and resume take the runtime's pause lock: each is two RMWs on
    /// two words, and a resume between a pause's two would be made stale
    /// by its advance. Fires never take it.
    pub(crate) fn pause(&self) {
        let guard = crate::sync::lock(self.runtime.pause_lock());
        if self.request.pause().kind() == Kind::Paused {
            return; // paused already: that pause advanced
        }
        self.close_burst();
        let version = self.advance();
        self.stats.suspended(version);
        drop(guard);
        // Waiters of a fire the pause cancelled are told "suspended".
        if let Some(waiters) = self.waiters.get() {
            waiters.suspended(version);
        }
    }

    /// Whether the trigger is paused.
    pub(crate) fn is_paused(&self) -> bool {
        self.request.peek().kind() == Kind::Paused
    }

    /// **resume** (G17): takes a paused trigger back on a schedule — a run
    /// `delay` from now (`Some(ZERO)`: at once), or with `None` no run at
    /// all (idle, not paused). Returns whether the trigger was paused.
    ///
    /// The request goes in with a fresh version (an advance) and only over
    /// PAUSED (`Request::install` with `resume`). A fire that passed its
    /// paused check before the pause and advances after this advance makes
    /// that version stale; if its publish came first, it was refused and
    /// raised the paused word's version past ours, so the install fails
    /// with `Newer` and we advance again — each such fire at most once,
    /// since new fires are refused by their check. If its publish comes
    /// after ours, it installs its newer request over ours and runs as a
    /// fire after the resume. A fire that advanced before ours and
    /// publishes after finds a newer version and returns `Ok`: it began
    /// before the pause took effect, which cancelled it (no fire is lost
    /// that `pause` did not cancel).
    pub(crate) fn resume(self: &Arc<Self>, delay: Option<Duration>) -> Result<bool, FireError> {
        if self.runtime.is_closed() {
            return Err(FireError::Shutdown);
        }
        let now_ns = self.runtime.clock().now_ns();
        let now_us = now_ns / 1_000;
        // Checked before anything changes: a delay too long leaves the
        // trigger paused.
        let (kind, deadline) = match delay {
            None => (Kind::Idle, 0),
            Some(delay) if delay.is_zero() => (Kind::Due, 0),
            Some(delay) => {
                let deadline = deadline_us(now_ns, delay, self.runtime.tick_us())
                    .ok_or(FireError::DelayTooLong(delay))?;
                (Kind::at(deadline, now_us), deadline)
            }
        };
        let guard = crate::sync::lock(self.runtime.pause_lock());
        if !self.is_paused() {
            return Ok(false);
        }
        let to_inbox = matches!(kind, Kind::At { .. });
        let (version, replaced) = loop {
            let version = self.advance();
            self.stats.not_a_fire();
            match self.request.install(version, kind, to_inbox, true) {
                Ok(replaced) => break (version, replaced),
                // A fire refused by the pause advanced past us: again.
                Err(Refused::Newer) => continue,
                // Only pause and resume change PAUSED, and we hold the lock.
                Err(Refused::NotPaused | Refused::Paused) => return Ok(false),
            }
        };
        drop(guard);
        match kind {
            Kind::Due if !self.reserve_inline() => self.schedule_run(OnClosed::Refuse),
            Kind::At { .. } => {
                if let Some(push) =
                    self.hand_to_timer(Ok(replaced), deadline, now_us, OnClosed::Refuse)
                {
                    push.deliver(OnClosed::Refuse);
                }
            }
            _ => {}
        }
        self.confirm(version, kind, Some(replaced))?;
        Ok(true)
    }
}
