//! The runner side of a trigger: the task cell, which the holder of
//! RUNNING alone touches, and the run — a worker (or an async trigger's
//! executor) serves the live request (takes it, enters RUNNING, calls the
//! task), then ends the iteration and hands on the re-run or re-arm.
//!
//! # Ground rules
//!
//! Between `State::enter` returning `Entered` and `State::exit`, the
//! runner holds RUNNING and is the only code that touches the task cell
//! (`Core::task`, see the invariant there; [`TaskCell`] itself is plain
//! single-threaded code). Everything an observer of an iteration's end may
//! read — statistics, the shutdown report, the waiters — is written before
//! it is told (`end`). A re-run never loops on the same thread: it goes
//! back through the run queue (G10), except for an async iteration ending
//! in a poll, which adopts it ([`Adopt`]).

use super::iteration::{Iteration, Started};
use super::task_cell::Called;
use super::{Core, InboxPush, OnClosed, Runtime};
use crate::clock::{coalesce, deadline_us};
use crate::context::{self, Outcome};
use crate::request::{Installer, Kind, Mark, Refused};
use crate::state::{Enter, Exit};
use crate::sync::{Arc, Ordering};
use std::time::Duration;

/// Where a re-run due at once when an iteration ends goes: `None`, through
/// the run queue; `Some(slot)`, for an async iteration ending in a poll,
/// served on the spot, its future put in `slot` for the ending iteration to
/// poll next in the same executor task (no worker wake-up, no new spawn).
pub(crate) type Adopt<'a> = Option<&'a mut Option<Started>>;

/// What a run that took its request does next.
enum Start {
    /// It entered and runs.
    Run,
    /// It entered too soon after the last start: RUNNING goes back, and
    /// the run waits for the cooldown's end.
    Defer { end_us: u64, now_us: u64 },
    /// Not entered (reserved, stale), or discarded at shutdown.
    Not,
}

impl<R: Runtime> Core<R> {
    /// Worker side: serves whatever request is live and due.
    /// Returns the re-armed trigger's inbox push, if its task asked for a
    /// next run: the caller delivers it ([`InboxPush::deliver`], or the
    /// pool's next lock).
    pub(crate) fn dispatch(self: &Arc<Self>) -> Option<InboxPush> {
        // Acquire: see `# Orderings` (queued); clear before reading.
        self.queued.swap(false, Ordering::Acquire);
        self.serve_due(None)
    }

    /// A dispatch on the executor: as [`dispatch`](Self::dispatch), an
    /// async run due at once put in `adopt` for the caller to poll.
    pub(crate) fn dispatch_here(
        self: &Arc<Self>,
        adopt: &mut Option<Started>,
    ) -> Option<InboxPush> {
        // Acquire: see `# Orderings` (queued); clear before reading.
        self.queued.swap(false, Ordering::Acquire);
        self.serve_due(Some(adopt))
    }

    /// Takes the due request, if any, and runs it: the body of
    /// [`dispatch`](Self::dispatch), also used where an async iteration
    /// re-runs in place.
    pub(super) fn serve_due(self: &Arc<Self>, adopt: Adopt<'_>) -> Option<InboxPush> {
        let version = self.request.take_due()?;
        if let Some(debounce) = self.debounce() {
            debounce.claimed(version);
        }
        // With waiters, entered and decided under their lock, the run's
        // start recorded there (see `wait.rs`, "Verdicts that hold").
        let start = match self.existing_waiters() {
            Some(waiters) => waiters.starting(
                version,
                || self.enter(version),
                |start| matches!(start, Start::Run),
            ),
            None => self.enter(version),
        };
        match start {
            Start::Run => self.run(version, adopt),
            Start::Defer { end_us, now_us } => self.defer(version, end_us, now_us),
            Start::Not => None,
        }
    }

    /// Enters the iteration of the claimed `version` and decides whether it
    /// runs now.
    fn enter(&self, version: u32) -> Start {
        match self.state.enter(version) {
            Enter::Entered => {
                // Entered after the shutdown scan? Then the run is discarded
                // (and listed), like any armed run: only iterations already
                // running when shutdown began finish. Listed under the
                // scan's mark, which the scan left for this claim when it
                // could not make the claim fail (`Core::claim_unstarted`).
                let discard = || {
                    let _ = self.state.exit(version);
                    self.request.take_mark(Mark::Claim, |_| true)
                };
                if self.runtime.is_closed() && !self.runtime.ledger().admit_late(self, discard) {
                    return Start::Not;
                }
                match self.cooldown_end() {
                    Some((end_us, now_us)) => Start::Defer { end_us, now_us },
                    None => Start::Run,
                }
            }
            Enter::Reserved | Enter::Stale => Start::Not,
        }
    }

    /// The end of the minimum interval after the last start, and now, if
    /// that end is still ahead. Read while holding RUNNING: the Acquire in
    /// `enter` makes the previous run's start visible.
    pub(super) fn cooldown_end(&self) -> Option<(u64, u64)> {
        let min_us = self.policies()?.min_interval_us;
        if min_us == 0 {
            return None;
        }
        // The real clock's start was rounded down to the microsecond: the
        // run began somewhere in [start, start + 1), so the interval surely
        // has passed only from start + 1 + min on. Virtual time is exact.
        let rounding = u64::from(!self.runtime.timing().clock.is_manual());
        let end_us = self
            .stats
            .last_start_us()?
            .saturating_add(min_us)
            .saturating_add(rounding);
        let now_us = self.runtime.timing().clock.now_us();
        (end_us > now_us).then_some((end_us, now_us))
    }

    /// A due run came too soon after the previous start: give RUNNING back
    /// without running, and arm the live request for the cooldown's end
    /// (fires during the cooldown coalesce there; latest wins as always).
    pub(super) fn defer(
        self: &Arc<Self>,
        version: u32,
        end_us: u64,
        now_us: u64,
    ) -> Option<InboxPush> {
        let (exit, seen) = self.state.exit_seen(version);
        // No run happened. If the shutdown scan read RUNNING before this
        // `exit`, the AcqRel `exit` read its AcqRel `touch`: `closed` is
        // seen here, and the scan (which holds the report's lock throughout)
        // has listed this trigger in flight — strike it. Otherwise the scan
        // reads it idle and lists nothing in flight — or a later
        // iteration's, which `seen` tells from this one.
        if self.runtime.is_closed() {
            self.runtime.ledger().unlist(self, seen);
        }
        let live = match exit {
            Exit::Rerun { version } => version,
            Exit::Done { live: true } => version,
            Exit::Done { live: false } => {
                // Shut down: the claim this deferred run came from, if the
                // scan marked it, is owed its run (it never ran) — at the
                // cooldown's end, if the claim was its own.
                self.list_marked_claim(version, || Some(Kind::at(end_us, now_us)));
                // A newer request rules — unless a resume waits for this
                // (deferred) run's schedule: the last iteration's.
                let now_ns = self.runtime.timing().clock.now_ns();
                self.settle_resuming(self.last_delay.get(), now_ns, OnClosed::List);
                return None;
            }
        };
        self.publish_at_later(live, end_us, now_us, OnClosed::List)
    }

    /// Runs one iteration (this worker holds RUNNING), then exits; or, for
    /// an async task, spawns the iteration's future, which exits when it
    /// completes (see `iteration.rs`).
    pub(super) fn run(self: &Arc<Self>, version: u32, adopt: Adopt<'_>) -> Option<InboxPush> {
        // A sync iteration's span, at DEBUG: trigger, version, lateness (a
        // timed run's), outcome. An async iteration gets its span from its
        // future (`iteration.rs`), entered at every poll, and the lateness
        // with the future ([`Started`]).
        #[cfg(feature = "tracing")]
        let span = if self.cancel_slot().is_none() {
            crate::context::iteration_span(self.name(), version)
        } else {
            tracing::Span::none()
        };
        #[cfg(feature = "tracing")]
        let _entered = span.enter();
        // An upper bound of now (see `Clock::deadline_base_ns`): a cooldown
        // measured from it ends no earlier, a lateness reads at most about
        // 2 µs high.
        let start_us = self.runtime.timing().clock.deadline_base_ns() / 1_000;
        let late = self.stats.started(version, start_us);
        if let Some(late) = late {
            #[cfg(feature = "tracing")]
            span.record("lateness_us", late);
            crate::metrics::lateness(self.name(), late);
        }
        context::reset_observed();
        if let Some(policies) = self.policies() {
            policies.started(start_us);
        }
        let called = {
            let _running = context::running(self.address());
            // SAFETY: see the invariant on `Core::task`.
            self.task.with_mut(|cell| unsafe { (*cell).call() })
        };
        match called {
            Called::Returned(result) => {
                let outcome = match &result {
                    Ok(_) if context::observed() => Outcome::Cancelled,
                    Ok(_) => Outcome::Completed,
                    Err(_) => Outcome::Panicked,
                };
                #[cfg(feature = "tracing")]
                span.record("outcome", tracing::field::debug(outcome));
                self.end(version, result, outcome, None)
            }
            Called::Started(future) if adopt.is_some() => {
                if let Some(slot) = adopt {
                    *slot = Some(Started {
                        version,
                        future,
                        late,
                    });
                }
                None
            }
            Called::Started(future) => {
                // An async task is always bound with its executor.
                let Some(slot) = self.cancel_slot() else {
                    return self.end(version, Ok(None), Outcome::Cancelled, None);
                };
                // Spawned outside the cell's borrow: an executor that drops
                // the job at once (it shut down) ends the iteration right
                // here, and the next holder may then touch the cell.
                let started = Started {
                    version,
                    future,
                    late,
                };
                slot.spawner
                    .spawn(Box::pin(Iteration::new(Arc::clone(self), started)));
                None
            }
        }
    }

    /// An async iteration of `version` ended (on whichever thread polled
    /// it): as [`end`](Self::end), delivering a re-arm at once.
    /// `adopt`: see [`Adopt`]; `None` when the executor dropped the
    /// iteration unpolled (serving on the spot there could recurse through
    /// an executor that drops every job).
    pub(crate) fn end_async(
        self: &Arc<Self>,
        version: u32,
        result: std::thread::Result<Option<Duration>>,
        outcome: Outcome,
        adopt: Adopt<'_>,
    ) {
        if let Some(push) = self.end(version, result, outcome, adopt) {
            push.deliver(self);
        }
    }

    /// Ends the iteration of `version`, which this thread holds RUNNING
    /// for: a panic is reported, statistics, waiters and the shutdown
    /// report learn the outcome, then `exit`, and the re-run or re-arm.
    pub(super) fn end(
        self: &Arc<Self>,
        version: u32,
        result: std::thread::Result<Option<Duration>>,
        outcome: Outcome,
        adopt: Adopt<'_>,
    ) -> Option<InboxPush> {
        // SAFETY: see the invariant on `Core::task`.
        let retry = self
            .task
            .with_mut(|cell| unsafe { (*cell).settle(&result) });
        // Everything an observer of this end may read is written before it
        // is told: the statistics before the panic hook runs, and the
        // statistics, the shutdown report and `exit` before the waiters
        // wake (their lock orders the Relaxed counters).
        let panicked = outcome == Outcome::Panicked;
        // One clock read serves the statistics and the re-arm deadline: an
        // upper bound of now, as a deadline needs (see
        // `Clock::deadline_base_ns`).
        let end_ns = self.runtime.timing().clock.deadline_base_ns();
        let ran_us = self.stats.ended(end_ns / 1_000);
        if panicked {
            self.rare().counters.panicked();
        }
        crate::metrics::iteration_ended(self.name(), outcome, ran_us);
        #[cfg(feature = "metrics")]
        {
            // A follow-up reserved, or a request newer than this run's
            // (DUE or AT) waits for its run.
            let state = self.state.snapshot();
            let pending = state.is_reserved()
                || matches!(self.request.peek().kind(), Kind::Due | Kind::At { .. });
            let (fires, coalesced) =
                self.stats
                    .fires_since_reported(state.version(), self.rare_counters(), pending);
            crate::metrics::fires(self.name(), fires, coalesced);
        }
        if let Some(policies) = self.policies() {
            policies.ended();
        }
        let next = match result {
            Ok(next) => next,
            Err(payload) => {
                self.runtime.report_panic(self.name(), payload.as_ref());
                crate::sync::drop_payload(payload);
                retry
            }
        };
        self.last_delay.returned(next);
        // The outcome goes to the shutdown report if the scan listed this
        // run: looked up before `exit`, or after it if the scan had not run
        // yet — it may read RUNNING between the first look and `exit`; the
        // AcqRel `exit` then reads the scan's AcqRel `touch`, so the second
        // look sees `closed` and the scan's report. A scan after the `exit`
        // may have listed a later iteration instead: the version the `exit`
        // read tells (`loom_shutdown` checks every side).
        let recorded =
            self.runtime.is_closed() && self.runtime.ledger().finish(self, outcome, None);
        let (exit, seen) = self.state.exit_seen(version);
        if !recorded && self.runtime.is_closed() {
            self.runtime.ledger().finish(self, outcome, Some(seen));
        }
        // After `exit`, so a newer run may already have started (or even
        // ended) on another thread: the waiters' record only moves forward,
        // and a newer run serves this run's waiters too.
        if let Some(waiters) = self.existing_waiters() {
            waiters.finished(version, outcome);
        }
        match exit {
            // The follow-up goes back through the pool rather than looping
            // here, so a fire storm cannot pin this worker (G10).
            Exit::Rerun { version } => self.rerun(version, adopt),
            Exit::Done { live: true } => self.rearm(version, next?, end_ns, adopt),
            // A newer request rules. Ending in a poll, serve it here if it is
            // due and its firer has not reserved it yet (under a storm, the
            // moment between a fire's `advance` and its `reserve`): the
            // claim is atomic, so the firer then finds nothing to hand the
            // pool, or hands it and the dispatch finds nothing.
            Exit::Done { live: false } => {
                // Resumed while this iteration ran: its delay is the
                // schedule (see `Core::resume`).
                self.settle_resuming(next, end_ns, OnClosed::List);
                // Shut down while this iteration ran: a claim of a newer
                // run the scan marked, cancelled since, is listed here —
                // or this run's own next one, if only refused fires
                // advanced past it.
                self.list_marked_claim(version, || self.next_run(next, end_ns));
                if adopt.is_some() {
                    self.serve_due(adopt)
                } else {
                    None
                }
            }
        }
    }

    /// `version` is due again at once: through the run queue, or served on
    /// the spot for an async iteration ending in a poll (see [`Adopt`]).
    /// The pool's fairness (G10) is not at stake there: serving only calls
    /// the task for its next future, which the executor task polls among
    /// the executor's others.
    pub(super) fn rerun(self: &Arc<Self>, version: u32, adopt: Adopt<'_>) -> Option<InboxPush> {
        if adopt.is_none() {
            self.requeue(version);
            return None;
        }
        match self.request.install(version, Kind::Due, Installer::Publish) {
            Ok(_) => self.serve_due(adopt),
            Err(refused) => {
                if refused == Refused::Closed {
                    self.list_owed(Kind::Due);
                }
                None
            }
        }
    }

    /// Scheduler side: `version` is due again at once (a re-run after a
    /// reservation, or a zero re-arm delay).
    pub(super) fn requeue(self: &Arc<Self>, version: u32) {
        match self.request.install(version, Kind::Due, Installer::Publish) {
            Ok(_) => {
                self.schedule_run(false);
            }
            Err(Refused::Closed) => self.list_owed(Kind::Due),
            Err(_) => {}
        }
    }

    /// The iteration of the live `version`, which returned at `now_ns`,
    /// asked for its next run `delay` later.
    pub(super) fn rearm(
        self: &Arc<Self>,
        version: u32,
        delay: Duration,
        now_ns: u64,
        adopt: Adopt<'_>,
    ) -> Option<InboxPush> {
        if delay.is_zero() {
            // Due now, and marked so, as the timer marks a run it finds
            // due: its lateness counts from here, and the shutdown scan
            // tells its claim from the TAKEN word the ending iteration
            // leaves (the version is the same; see `claim_unstarted`).
            self.stats.marked_due(version, now_ns / 1_000);
            return self.rerun(version, adopt);
        }
        // A delay beyond the clock's range can never come due: stop, as
        // with `None`.
        let deadline = self.rearm_deadline(delay, now_ns)?;
        self.publish_at_later(version, deadline, now_ns / 1_000, OnClosed::List)
    }

    /// The run an iteration that returned at `now_ns` asks for with
    /// `next`, as its re-arm would arm it (`None`: no run, or one that can
    /// never come due).
    fn next_run(&self, next: Option<Duration>, now_ns: u64) -> Option<Kind> {
        match next? {
            delay if delay.is_zero() => Some(Kind::Due),
            delay => Some(Kind::at(
                self.rearm_deadline(delay, now_ns)?,
                now_ns / 1_000,
            )),
        }
    }

    /// The deadline (µs) of the run an iteration that returned at `now_ns`
    /// asks for `delay` (> 0) later: rounded up to the tick, then onto the
    /// coalescing grid if the scheduler coalesces; `None` past the clock's
    /// range. The re-arm and the shutdown report's listing of that run
    /// (`list_marked_claim`) both come here, so the report names the very
    /// deadline the run would have had.
    #[inline]
    pub(super) fn rearm_deadline(&self, delay: Duration, now_ns: u64) -> Option<u64> {
        let deadline = deadline_us(now_ns, delay, self.runtime.timing().tick_us)?;
        Some(if self.runtime.timing().coalesce {
            coalesce(deadline, delay)
        } else {
            deadline
        })
    }
}
