//! The off switch of G17: `pause` and `resume`. They are the two control calls that
//! take the runtime's pause lock. A suspend that meets a pause takes it too, so that a
//! resume does not undo it; that part of `suspend` is in `fire.rs`.
//!
//! The firer side's share of the protocol, the paused check, a refused publish and
//! `suspend`, is in `fire.rs`. The request word's share, PAUSED and `install`, is in `request/mod.rs`. The
//! "Pause" section of docs/DESIGN.md has the whole protocol and the models that check it.

use super::hand_off::OnClosed;
use super::Counted;
use super::{Core, Runtime};
use crate::clock::deadline_us;
use crate::error::FireError;
use crate::request::{Installer, Kind, Mark, Refused, Stamp};
use std::time::Duration;

impl<R: Runtime> Core<R> {
    /// **pause**, for G17. It installs PAUSED in the request word, then advances the state
    /// word.
    ///
    /// Once this returns, no iteration starts until [`resume`](Counted::resume), for two reasons.
    /// - The PAUSED install replaces a request published before it. A run already claimed,
    ///   TAKEN, enters with a version older than this advance. So `enter` finds it stale. The
    ///   exception is a run that entered before the advance, that is before this returned.
    ///   Such an iteration in flight finishes, as with `suspend`.
    /// - Every publish after the install is refused. That covers a fire, a delayed request, a
    ///   re-arm, a re-run, and an expiry that finds the word changed. The advance clears
    ///   RESERVED. Only a run claimed from a DUE request can set it again, and none is
    ///   installed.
    ///
    /// Pause and resume take the runtime's pause lock. Each is two RMWs on two words. A
    /// resume between a pause's two RMWs would be made stale by its advance. Fires never take
    /// the lock.
    pub(crate) fn pause(&self) {
        let guard = crate::sync::lock(self.runtime.pause_lock());
        let replaced = self.request.pause();
        if replaced.kind() == Kind::Paused || replaced.is_closed() {
            // Paused already, and that pause advanced. Or shut down, so nothing runs
            // any more and the scan's word stays.
            return;
        }
        let rare = self.rare();
        // Suspended means IDLE of the last suspend's version, with nothing fired
        // since. The trigger stays so through the resume, as G6 requires.
        // Relaxed: under the pause lock.
        let suspended =
            replaced.kind() == Kind::Idle && rare.counters.is_suspend(replaced.version());
        rare.stays_suspended
            .store(suspended, std::sync::atomic::Ordering::Relaxed);
        self.close_burst();
        let version = self.advance();
        rare.counters.suspended(version);
        drop(guard);
        // Waiters of a fire the pause cancelled are told "suspended".
        if let Some(waiters) = self.existing_waiters() {
            waiters.suspended(version);
        }
    }

    /// The scan closed a RESUMING word.
    ///
    /// The run the schedule asks for stood for an accepted resume. `kind` is that run, and
    /// IDLE means none. Whichever settle takes the scan's mark lists it.
    fn list_resumed(&self, kind: Kind) {
        if matches!(kind, Kind::Due | Kind::At { .. })
            && self.request.take_mark(Mark::Resuming, |_| true)
        {
            self.runtime.ledger().list(self, kind);
        }
    }

    /// Whether the trigger is paused.
    pub(crate) fn is_paused(&self) -> bool {
        matches!(
            self.request.peek().kind(),
            Kind::Paused | Kind::Closed { paused: true, .. }
        )
    }
}

impl<R: Runtime> Counted<Core<R>> {
    /// **resume**, for G17. It takes a paused trigger back on a schedule. Returns whether the
    /// trigger was paused.
    ///
    /// The schedule is the one its last iteration asked for, [`ResumeTo::Schedule`], or a run
    /// `delay` from now.
    ///
    /// The request goes in with a fresh version, from an advance. It goes in only over
    /// PAUSED, through `Installer::Resume`. Take a fire that passed its paused check before
    /// the pause and advances after this advance. It makes that version stale. If its
    /// publish came first, it was refused and raised the paused word's version past ours. So
    /// the install fails with `Newer` and we advance again. Each such fire does that at most
    /// once, since their check refuses new fires and suspends. If its publish comes after
    /// ours, it installs its newer request over ours and runs as a fire after the resume. A
    /// fire that advanced before ours and publishes after finds a newer version and returns
    /// `Ok`. It began before the pause took effect, and the pause cancelled it.
    ///
    /// A trigger may be resumed on its schedule while an iteration is in flight, one that
    /// began before the pause. It then waits for that iteration's delay. RESUMING goes in.
    /// Whichever comes second settles it into the request that delay asks for. That is the
    /// iteration's end, or this call seeing it ended. Both go through `settle_resuming`. It is
    /// one compare-exchange from the exact RESUMING word, so only one of them settles.
    pub(crate) fn resume(&self, to: ResumeTo) -> Result<bool, FireError> {
        if self.runtime.is_closed() {
            return Err(FireError::Shutdown);
        }
        let now_ns = self.runtime.timing().clock.now_ns();
        // Checked before anything changes, so a delay too long leaves the trigger
        // paused.
        let given = match to {
            ResumeTo::After(delay) => Some(self.request_for(Some(delay), now_ns)?),
            ResumeTo::Schedule => None,
        };
        let guard = crate::sync::lock(self.runtime.pause_lock());
        if !self.is_paused() {
            return Ok(false);
        }
        // Relaxed: under the pause lock. The flag is cleared, since it is for this
        // pause only.
        let suspended = self
            .rare()
            .stays_suspended
            .swap(false, std::sync::atomic::Ordering::Relaxed);
        // Under the lock, while paused, no iteration can start. So one seen ended
        // stays ended.
        let (kind, deadline) = match given {
            Some(request) => request,
            // Suspended before or during the pause, so idle until the next fire,
            // whatever an iteration in flight returns. G6 requires it.
            None if suspended => (Kind::Idle, 0),
            None if self.state.snapshot().is_running() => (Kind::Resuming, 0),
            None => self.schedule_of(self.last_delay.get(), now_ns),
        };
        let to_inbox = matches!(kind, Kind::At { .. });
        if to_inbox {
            self.mark_timed();
        }
        let (version, replaced) = loop {
            let version = self.advance();
            self.rare().counters.not_a_fire();
            match self.request.install(version, kind, Installer::Resume) {
                Ok(replaced) => break (version, replaced),
                // A fire refused by the pause advanced past us, so try again.
                Err(Refused::Newer) => continue,
                // Only pause and resume change PAUSED, and we hold the lock.
                Err(Refused::NotPaused | Refused::Paused) => return Ok(false),
                // The scan closed the word. It was PAUSED, so nothing is owed.
                Err(Refused::Closed) => return Err(FireError::Shutdown),
            }
        };
        if suspended && given.is_none() {
            // Still suspended. Its stats say so, and a later pause sees it.
            self.rare().counters.still_suspended(version);
        }
        // Relaxed: under the pause lock. See `Rare::resumed_at`.
        self.rare()
            .resumed_at
            .store(version, std::sync::atomic::Ordering::Relaxed);
        drop(guard);
        // Every fire that advanced between the pause's advance and this install lost
        // to one or the other. PAUSED refused it. Or it had passed its paused check
        // before the pause, and this newer version beat it. That fire returns `Ok`,
        // since it began before the pause took effect. None of them runs. Their
        // waiters hear "suspended", as the pause told those of what it cancelled,
        // rather than silence until their timeout.
        if let Some(waiters) = self.existing_waiters() {
            waiters.suspended(version);
        }
        self.close_burst();
        match kind {
            Kind::Due if !self.reserve_inline() => {
                self.schedule_run(true);
            }
            Kind::At { .. } => {
                let stamp = Stamp::new(version, kind, now_ns / 1_000);
                self.to_timer_now(Ok(replaced), stamp, deadline, OnClosed::Refuse)
            }
            // Did the iteration end before it could see our RESUMING? This is an RMW on
            // the state word, not a load. So this `touch` and the iteration's `exit` are
            // ordered. If the touch comes first, the AcqRel `exit` reads it. The
            // iteration's look at the request word after its `exit` then sees RESUMING
            // and settles it. If the exit comes first, the touch reads RUNNING clear and
            // we settle. We use the delay the iteration recorded before its `exit`, whose
            // Release the touch's Acquire reads. With two plain loads, both sides could
            // miss the other's write, in the store-buffering shape. Then no one would
            // settle, as `g17_a_resume_during_the_iteration…` shows.
            Kind::Resuming if !self.state.touch().is_running() => {
                self.settle_resuming(
                    self.last_delay.get(),
                    self.runtime.timing().clock.now_ns(),
                    OnClosed::Refuse,
                );
            }
            _ => {}
        }
        // Installed, the resume is accepted, shutdown or not. The install came before
        // the scan closed the word. So the scan lists its request, or the iteration or
        // worker that holds it runs or lists it. See `Request::close`.
        Ok(true)
    }
}

impl<R: Runtime> Core<R> {
    /// The request a delay asks for at `now_ns`.
    ///
    /// `None` asks for none, zero for a run now, and any other delay for a run at the
    /// deadline. It is an error if the deadline lies past the clock's range.
    fn request_for(&self, delay: Option<Duration>, now_ns: u64) -> Result<(Kind, u64), FireError> {
        Ok(match delay {
            None => (Kind::Idle, 0),
            Some(delay) if delay.is_zero() => (Kind::Due, 0),
            Some(delay) => {
                let deadline = deadline_us(now_ns, delay, self.runtime.timing().tick_us)
                    .ok_or(FireError::DelayTooLong(delay))?;
                (Kind::at(deadline, now_ns / 1_000), deadline)
            }
        })
    }

    /// The request the schedule asks for, as in [`request_for`](Self::request_for).
    ///
    /// A delay past the clock's range means none, since it never comes due.
    pub(super) fn schedule_of(&self, delay: Option<Duration>, now_ns: u64) -> (Kind, u64) {
        self.request_for(delay, now_ns).unwrap_or((Kind::Idle, 0))
    }
}

impl<R: Runtime> Counted<Core<R>> {
    /// Settles a RESUMING word into the request `delay` asks for. See
    /// [`resume`](Self::resume).
    ///
    /// The iteration that was in flight at the resume calls it at its end, with the delay it
    /// returned. Or the resume calls it, if that iteration had ended. It does nothing if the
    /// word is not RESUMING, because it was settled already or a newer request replaced it.
    pub(super) fn settle_resuming(
        &self,
        delay: Option<Duration>,
        now_ns: u64,
        on_closed: OnClosed,
    ) {
        let word = self.request.peek();
        if matches!(
            word.kind(),
            Kind::Closed {
                mark: Mark::Resuming,
                ..
            }
        ) {
            let (kind, _) = self.schedule_of(delay, now_ns);
            self.list_resumed(kind);
            return;
        }
        if word.kind() != Kind::Resuming {
            return;
        }
        let (kind, deadline) = self.schedule_of(delay, now_ns);
        let to_inbox = matches!(kind, Kind::At { .. });
        if to_inbox {
            self.mark_timed();
        }
        let replaced = match self
            .request
            .install(word.version(), kind, Installer::Settle)
        {
            Ok(replaced) => replaced,
            // The scan closed the RESUMING word. The schedule it waited for stood
            // for an accepted resume.
            Err(Refused::Closed) => {
                self.list_resumed(kind);
                return;
            }
            Err(_) => return,
        };
        match kind {
            Kind::Due => {
                self.schedule_run(on_closed == OnClosed::Refuse);
            }
            Kind::At { .. } => {
                let stamp = Stamp::new(word.version(), kind, now_ns / 1_000);
                self.to_timer_now(Ok(replaced), stamp, deadline, on_closed);
            }
            _ => {}
        }
    }
}

/// Where [`Counted::resume`] takes a paused trigger.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ResumeTo {
    /// The schedule its last iteration asked for.
    Schedule,
    /// A run this long from now. Zero means at once.
    After(Duration),
}
