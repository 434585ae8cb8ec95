//! Shutdown in one room.
//!
//! It holds the ledger that every runtime keeps, in `ledger.rs`, and the exact report
//! that the ledger drafts, in `report.rs`. The ledger's registry keeps its slots in
//! `slots.rs`, where the timer reads them too.
//!
//! # Exactness: how a fire racing shutdown is never lost
//!
//! Shutdown sets `closed`, closes the queues, then scans every registered trigger under
//! the report lock. The scan *closes* the request word with one RMW, `Request::close`.
//! It reads the state word with an RMW to list the iteration in flight. A closed word
//! refuses every install from then on.
//!
//! * **An install before the close**, in the word's modification order, is accepted. The
//!   close finds its request, or a newer one that stands for it, and lists it. Or the
//!   close finds it claimed. A worker's claim is TAKEN. Its run is then in flight, or it
//!   enters after the scan and `Ledger::admit_late` lists it. A reservation's re-run is
//!   listed by the ending iteration, when the closed word refuses it.
//! * **An install after the close** is refused, and the fire returns
//!   `FireError::Shutdown`. No request can go in after the scan and be claimed by someone
//!   else before its firer could take it back. So nothing is both refused and run, nor
//!   listed beside an earlier run.
//! * **A claim rather than a request** is a worker's TAKEN that has not entered, a
//!   reservation, or a RESUMING word. The scan lists a worker's claim itself if it finds
//!   the trigger idle and the run never started. It also makes the claim's `enter` fail,
//!   in `Core::claim_unstarted`. A fire refused by the closed word may have made it fail
//!   already, with its advance. That fire lists nothing, since a refused fire may get
//!   there only after `shutdown` returned. The scan settles a RESUMING word with no
//!   iteration running it, from the delay the last iteration returned. That happens in
//!   `Core::settle_at_close`. Otherwise the close leaves a mark in the word. Whoever then
//!   owes the run takes the mark first, in `Request::take_mark`. So the run is listed
//!   once, on one of the scheduler's own threads. That is the worker that enters late, or
//!   the ending iteration whose re-run, re-arm or settle is refused. It may also be the
//!   ending iteration whose newer claim a refused fire's advance cancelled. For a
//!   deferred run, its thread lists the run of the claim it came from.
//! * **Iterations** that a worker *entered* after the scan read its state word
//!   synchronized with that read. So the worker sees `closed`. Under the report lock it
//!   then finds the trigger not listed in flight. It discards the run and lists it under
//!   the mark. An iteration that entered before the scan is listed in flight and runs to
//!   completion. Its outcome is recorded.
//! * A trigger registered after the scan took its list starts closed.
//!
//! The report lock serializes the scan of each trigger with these decisions. So a run is
//! listed once, as discarded or as in flight.

mod ledger;
mod report;
mod slots;

pub(crate) use ledger::Ledger;
pub use report::{DiscardedRun, InFlightRun, ShutdownReport};
pub(crate) use slots::Slots;
