//! Shutdown in one room: the ledger every runtime keeps (`ledger.rs`) and
//! the exact report it drafts (`report.rs`).
//!
//! # Exactness: how a fire racing shutdown is never lost
//!
//! Shutdown sets `closed`, closes the queues, then scans every registered
//! trigger under the report lock: it *closes* the request word (one RMW,
//! `Request::close`) and reads the state word with an RMW to list the
//! iteration in flight. A closed word refuses every install from then on.
//!
//! * **An install before the close** (in the word's modification order) is
//!   accepted. The close finds its request (or a newer one that stands for
//!   it) and lists it — or finds it claimed: by a worker (TAKEN), whose run
//!   is then in flight, or enters after the scan and is listed by it
//!   (`Ledger::admit_late`); or by a reservation, whose re-run the
//!   ending iteration lists when the closed word refuses it.
//! * **An install after the close** is refused: the fire returns
//!   `FireError::Shutdown`. No request can go in after the scan and be
//!   claimed by someone else before its firer could take it back, so
//!   nothing is both refused and run, nor listed beside an earlier run.
//! * **A claim rather than a request**: a worker's TAKEN that has not
//!   entered, a reservation, a RESUMING word. A worker's claim the scan
//!   finds idle and never started it lists itself, and makes the claim's
//!   `enter` fail (`Core::claim_unstarted`) — a fire refused by the closed
//!   word may have made it fail already, with its advance, and lists
//!   nothing: a refused fire may get there only after `shutdown` returned.
//!   A RESUMING word with no iteration running it settles itself, from the
//!   delay the last iteration returned (`Core::settle_at_close`).
//!   Otherwise the close leaves a mark in the word, and whoever then owes
//!   the run takes the mark first (`Request::take_mark`), so it is listed
//!   once, on one of the scheduler's own threads: the worker that enters
//!   late, the ending iteration whose re-run, re-arm or settle is refused,
//!   or whose newer claim a refused fire's advance cancelled (and a
//!   deferred run's, for the claim it came from).
//! * **Iterations**: a worker that *entered* after the scan read its
//!   state word synchronized with that read, so it sees `closed`; under
//!   the report lock it then finds the trigger not listed in flight, and
//!   discards the run, listing it under the mark. One that entered before
//!   the scan is listed in flight and runs to completion; its outcome is
//!   recorded.
//! * A trigger registered after the scan took its list starts closed.
//!
//! The report lock serializes the scan of each trigger with these
//! decisions, so a run is listed once: as discarded or as in flight.

mod ledger;
mod report;

pub(crate) use ledger::Ledger;
pub use report::{DiscardedRun, InFlightRun, ShutdownReport};
