//! The core at shutdown.
//!
//! It covers the runs that the request word closed by the scan still owes. See
//! `Request::close`. They are listed once, and always by one of the scheduler's threads.
//! That is the scan itself, a worker whose claim enters late, or the iteration that ran
//! as the scan closed the word, as it ends. A fire refused by the closed word lists
//! nothing.

use super::{Core, Runtime};
use crate::request::{Kind, Mark};
use crate::state::Steal;

impl<R: Runtime> Core<R> {
    /// The shutdown scan closed the word over a claim, TAKEN, of `claimed`. Its `touch` read
    /// the state word idle. Returns whether the scan lists the claim's run, which never
    /// started. It runs under the report's lock.
    ///
    /// If the run started, nothing is owed. The last start recorded that version, and took
    /// the due mark the run was claimed with. The ended iteration's `exit`, which the touch
    /// read, published that start. A periodic run's re-arm keeps its version. So a fresh
    /// claim of it shows the last start's version too. The due mark tells it apart. That is
    /// `Counters::marked_due`, which the timer, or a zero-delay re-arm, writes before it
    /// publishes the run. The close's Acquire reads it through the claim's RMW.
    ///
    /// Otherwise the claim's `enter` is made to fail, through `State::steal`. It fails
    /// already if a fire advanced the version since. The closed word then refuses that fire.
    /// The scan lists the run now, since nobody else would. That fire is refused and lists
    /// nothing. If the worker enters first, it lists the run itself, in `admit_late`. It
    /// waits for this scan's lock, and finds the scan's mark.
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

    /// After an `exit` that left a newer version live, `Done { live: false }`, at shutdown.
    /// It lists the run of a claim that the scan marked, if that run was cancelled.
    ///
    /// The scan may have marked a claim of a newer run while an iteration ran. That claim is
    /// a reservation, or a worker's claim. Its run may have been cancelled by the scan's own
    /// advance past it, in `State::touch_for_scan`, or by a fire that the closed word refused.
    /// The call lists that run. It does not while an iteration runs. That iteration is the
    /// claim's own worker, which entered after this `exit`. That worker runs the run, or
    /// lists it in `admit_late`. Only a claim the scan found idle can enter. The scan made the
    /// others stale. The `exit` before this read the scan's `touch`, or a later RMW of its
    /// release sequence. So the look sees the closed word.
    ///
    /// `version` is the iteration that ended, or the deferred run that gave RUNNING back. A
    /// mark of its own version is its own claim, found in flight. Only the scan's advance and
    /// fires that the closed word refused moved past it. An accepted fire would have replaced
    /// the claim in the word before the close. So the run it asks for next is owed. `next`
    /// gives that run, and is called only then, with `None` for none. The run would be owed
    /// with neither advance too, since its re-arm would then be refused and listed by
    /// `list_owed`.
    pub(super) fn list_marked_claim(&self, version: u32, next: impl FnOnce() -> Option<Kind>) {
        let word = self.request.peek();
        if !matches!(
            word.kind(),
            Kind::Closed {
                mark: Mark::Claim,
                ..
            }
        ) {
            return; // every exit of a newer version comes here, for one load
        }
        let state = self.state.touch();
        if state.is_running() {
            return;
        }
        // A closed word's version never changes, so it is the claim's.
        let kind = if version == word.version() {
            // A suspend cancelled the next run, as it would have with no shutdown.
            // The closed word refused its install too. So nothing is owed. The
            // version the suspend records after its advance tells it, being newer
            // than this claim's. The only other advances past the claim are the
            // scan's and refused fires', which revive nothing. An end that reads
            // the suspend's advance before that record cannot tell, and lists.
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

    /// The scan closed a RESUMING word while no iteration ran.
    ///
    /// The schedule the resume waits to settle is then the last iteration's. Its `exit`,
    /// which the scan's `touch` read, published the delay it returned. The call returns the
    /// run that schedule asks for, if any. It takes the mark, so no later settle lists the
    /// run again. It runs under the report's lock.
    pub(crate) fn settle_at_close(&self, now_us: u64) -> Option<Kind> {
        let (kind, _) = self.schedule_of(self.last_delay.get(), now_us.saturating_mul(1_000));
        let owed = matches!(kind, Kind::Due | Kind::At { .. });
        (owed && self.request.take_mark(Mark::Resuming, |_| true)).then_some(kind)
    }

    /// The scheduler's own request for a run met the word that the shutdown scan closed.
    ///
    /// Such a request is a re-run, a re-arm, a cooldown's, or a resume's schedule. That run
    /// stood for an accepted fire or schedule, and is listed. This call lists it if it takes
    /// the scan's mark first. See `Request::take_mark`.
    pub(super) fn list_owed(&self, kind: Kind) {
        if self.request.take_mark(Mark::Claim, |_| true) {
            self.runtime.ledger().list(self, kind);
        }
    }
}
