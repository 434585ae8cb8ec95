//! The core at shutdown: the runs the request word the scan closed (see
//! `Request::close`) still owes, listed once and always by a thread of the
//! scheduler's — the scan itself, a worker whose claim enters late, or the
//! iteration that ran as the scan closed the word, ending. A fire refused
//! by the closed word lists nothing.

use super::{Core, Runtime};
use crate::request::{Kind, Mark};
use crate::state::Steal;

impl<R: Runtime> Core<R> {
    /// The shutdown scan closed the word over a claim (TAKEN) of `claimed`,
    /// and its `touch` read the state word idle: whether the scan lists the
    /// claim's run, which never started. If it started, nothing is owed:
    /// the last start recorded that version (the ended iteration's `exit`,
    /// which the touch read, published it) and took the due mark the run
    /// was claimed with. A periodic run's re-arm keeps its version, so a
    /// fresh claim of it shows the last start's version too: it is told
    /// by that due mark (`Counters::marked_due`, which the timer — or a
    /// zero-delay re-arm — writes before it publishes the run; the close's
    /// Acquire reads it through the claim's RMW). Otherwise the claim's `enter`
    /// is made to fail (`State::steal`) — it fails already if a fire
    /// advanced the version since (then refused by the closed word) — and
    /// the scan lists the run now: nobody else would (that fire is refused
    /// and lists nothing). If the worker enters first, it lists the run
    /// itself (`admit_late`: it waits for this scan's lock, and finds the
    /// scan's mark). Under the report's lock.
    pub(crate) fn claim_unstarted(&self, claimed: u32) -> bool {
        if self.stats.last_started_version() == claimed && !self.stats.is_marked_due(claimed) {
            return false;
        }
        match self.state.steal(claimed) {
            Steal::Entered => return false,
            // The stolen advance is no fire.
            Steal::Stolen => self.rare().counters.not_a_fire(),
            Steal::Stale => {}
        }
        self.request.take_mark(Mark::Claim, |_| true)
    }

    /// After an `exit` that left a newer version live (`Done { live: false
    /// }`), shut down: the scan may have marked a claim of a newer run
    /// while an iteration ran (a reservation, or a worker's claim), whose
    /// run the scan's own advance past it (`State::touch_for_scan`), or
    /// a fire refused by the closed word, cancelled: list that run. Not
    /// while an iteration runs: that is the claim's own worker, which
    /// entered after this `exit` and runs the run, or lists it
    /// (`admit_late`) — only a claim the scan found idle can, the others
    /// it made stale. The `exit` before this read the scan's `touch` or a
    /// later RMW of its release sequence, so the look sees the closed
    /// word.
    ///
    /// `version`: the iteration that ended (or the deferred run that gave
    /// RUNNING back). A mark of its own version is its own claim, found in
    /// flight: only the scan's advance and fires the closed word refused
    /// moved past it (an accepted fire would have replaced the claim in
    /// the word before the close), so the run it asks for next (`next`,
    /// called only then: `None` for none) is owed — as it would be with
    /// neither, its re-arm then refused and listed (`list_owed`).
    pub(super) fn list_marked_claim(&self, version: u32, next: impl FnOnce() -> Option<Kind>) {
        let word = self.request.peek();
        if !matches!(
            word.kind(),
            Kind::Closed {
                mark: Mark::Claim,
                ..
            }
        ) {
            return; // every exit of a newer version comes here: one load
        }
        let state = self.state.touch();
        if state.is_running() {
            return;
        }
        // A closed word's version never changes: it is the claim's.
        let kind = if version == word.version() {
            // A suspend (its install refused by the closed word too)
            // cancelled the next run, as it would have with no shutdown:
            // nothing owed. Told by the version the suspend records after
            // its advance, newer than this claim's — the only other
            // advances past the claim are the scan's and refused fires',
            // which revive nothing (an end that reads the suspend's advance
            // before that record cannot tell, and lists).
            if self
                .rare_counters()
                .is_some_and(|counters| counters.suspended_since(version))
            {
                return;
            }
            match next() {
                Some(next) => next,
                None => return, // it asked for no next run
            }
        } else {
            Kind::Due
        };
        if self.request.take_mark(Mark::Claim, |_| true) {
            self.runtime.ledger().list(self, kind);
        }
    }

    /// The scan closed a RESUMING word while no iteration ran: the
    /// schedule the resume waits to settle is the last iteration's (its
    /// `exit`, which the scan's `touch` read, published the delay it
    /// returned); returns the run it asks for, if any, and takes the mark
    /// so no later settle lists it again. Under the report's lock.
    pub(crate) fn settle_at_close(&self, now_us: u64) -> Option<Kind> {
        let (kind, _) = self.schedule_of(self.last_delay.get(), now_us.saturating_mul(1_000));
        let owed = matches!(kind, Kind::Due | Kind::At { .. });
        (owed && self.request.take_mark(Mark::Resuming, |_| true)).then_some(kind)
    }

    /// The scheduler's own request for a run (a re-run, a re-arm, a
    /// cooldown's, a resume's schedule) met the word the shutdown scan
    /// closed: that run stood for an accepted fire or schedule, and is
    /// listed — by this call, if it takes the scan's mark first (see
    /// `Request::take_mark`).
    pub(super) fn list_owed(&self, kind: Kind) {
        if self.request.take_mark(Mark::Claim, |_| true) {
            self.runtime.ledger().list(self, kind);
        }
    }
}
