//! The request word at shutdown: the scan closes it, so that every later
//! install is refused, and leaves a [`Mark`] where it found a claim rather
//! than a request; whoever then owes that claim's run takes the mark and
//! lists it (see the `shutdown` module).

use super::{Kind, Mark, Request, Step, Word};
use crate::sync::Ordering;

impl Request {
    /// The shutdown scan (under the report's lock): closes the word, so
    /// that every later install is refused, and returns the word it
    /// replaced. An armed request (AT or DUE) is the scan's to list; a
    /// claimed run (TAKEN) leaves the mark [`Mark::Claim`], a RESUMING word
    /// [`Mark::Resuming`]: the run either may still owe is listed by
    /// whoever takes the mark ([`take_mark`](Self::take_mark)); PAUSED
    /// leaves the paused bit; anything else a plain CLOSED.
    ///
    /// So an install either came before this in the word's modification
    /// order — its request is the scan's to list, or someone claimed it
    /// first and the claim's run is in flight, or owed under the mark — or
    /// after it, and is refused: a request can never go in after the scan
    /// and be claimed by someone other than its installer (a worker, a
    /// reservation), listed beside an earlier one. Acquire: over a claim,
    /// the scan reads the run's due mark (`Core::claim_unstarted`), which
    /// the timer wrote before its Release `expire` (or a zero-delay re-arm
    /// before its Release install); the claim's RMW continues that release
    /// sequence. Nothing else needs an edge: a refused install's caller
    /// only returns an error, and whoever reads the closed word and then
    /// lists takes the report's lock, which the scan holds while it closes
    /// — coherence puts that lock after the scan's.
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

    /// Takes the scan's `mark` (see [`close`](Self::close)), if `owed`
    /// judges the run it stands for (by the version the scan found) still
    /// owed; returns whether this call took it, and so lists that run. Of
    /// those who may owe it one lists it, always a thread of the
    /// scheduler's: the scan (a claim it found idle, a RESUMING word it
    /// settles), the worker whose claim enters after the scan, the ending
    /// iteration whose re-run, re-arm or settle the closed word refused, or
    /// whose newer claim a refused fire's advance cancelled. Relaxed: it
    /// orders nothing; the listing goes under the report's lock.
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
