//! The request word at shutdown.
//!
//! The scan closes the word, so that every later install is refused. It leaves a
//! [`Mark`] where it found a claim rather than a request. Whoever then owes that claim's
//! run takes the mark and lists it. See the `shutdown` module.

use super::{Kind, Mark, Request, Step, Word};
use crate::sync::Ordering;

impl Request {
    /// The shutdown scan closes the word, under the report's lock. Every later install is
    /// then refused. Returns the word it replaced.
    ///
    /// An armed request, AT or DUE, is the scan's to list. A claimed run, TAKEN, leaves the
    /// mark [`Mark::Claim`]. A RESUMING word leaves [`Mark::Resuming`]. Whoever takes the
    /// mark lists the run that either may still owe. See [`take_mark`](Self::take_mark).
    /// PAUSED leaves the paused bit. Anything else leaves a plain CLOSED.
    ///
    /// So an install either came before this in the word's modification order, or after it.
    /// If it came before, its request is the scan's to list. Or someone claimed it first, and
    /// the claim's run is in flight or owed under the mark. If it came after, it is refused.
    /// A request can never go in after the scan and be claimed by someone other than its
    /// installer, such as a worker or a reservation. So it is never listed beside an earlier
    /// one.
    ///
    /// Acquire: over a claim, the scan reads the run's due mark, in
    /// `Core::claim_unstarted`. The timer wrote that mark before its Release `expire`. A
    /// zero-delay re-arm wrote it before its Release install. The claim's RMW continues that
    /// release sequence. Nothing else needs an edge. A refused install's caller only returns
    /// an error. Whoever reads the closed word and then lists takes the report's lock. The
    /// scan holds that lock while it closes, and coherence puts the later lock after the
    /// scan's.
    pub(crate) fn close(&self) -> Word {
        self.update(|current| {
            let (mark, paused) = match current.kind() {
                Kind::Closed { .. } => return Step::Keep(current),
                Kind::Taken => (Mark::Claim, false),
                Kind::Resuming => (Mark::Resuming, false),
                Kind::Paused => (Mark::None, true),
                _ => (Mark::None, false),
            };
            let closed = Kind::Closed { mark, paused };
            let word = Word::new(current.version(), closed).with_inbox_of(current.raw());
            Step::Store(word, Ordering::Acquire, current)
        })
    }

    /// Takes the scan's `mark` if `owed` judges the run it stands for still owed. See
    /// [`close`](Self::close). Returns whether this call took the mark, and so lists that run.
    ///
    /// `owed` judges by the version the scan found. Of those who may owe the run, one lists
    /// it, and that is always a thread of the scheduler's. It may be the scan, for a claim
    /// it found idle or a RESUMING word it settles. It may be the worker whose claim enters
    /// after the scan. It may be the ending iteration whose re-run, re-arm or settle the
    /// closed word refused. Or it may be the ending iteration whose newer claim a refused
    /// fire's advance cancelled.
    ///
    /// Relaxed: it orders nothing. The listing goes under the report's lock.
    pub(crate) fn take_mark(&self, mark: Mark, owed: impl Fn(u32) -> bool) -> bool {
        self.update(|current| {
            let Kind::Closed {
                mark: found,
                paused,
            } = current.kind()
            else {
                return Step::Keep(false);
            };
            if found != mark || !owed(current.version()) {
                return Step::Keep(false);
            }
            let kept = Kind::Closed {
                mark: Mark::None,
                paused,
            };
            let word = Word::new(current.version(), kept).with_inbox_of(current.raw());
            Step::Store(word, Ordering::Relaxed, true)
        })
    }
}
