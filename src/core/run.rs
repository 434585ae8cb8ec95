//! The runner side of a trigger.
//!
//! It covers the task cell, which the holder of RUNNING alone touches, and the run. A
//! worker, or an async trigger's executor, serves the live request. It takes the request,
//! enters RUNNING and calls the task. It then ends the iteration and hands on the re-run
//! or re-arm.
//!
//! # Ground rules
//!
//! Between `State::enter` returning `Entered` and `State::exit`, the runner holds
//! RUNNING. It is the only code that touches the task cell, `Core::task`. See the
//! invariant there. [`TaskCell`](super::TaskCell) itself is plain single-threaded code.
//! Everything an observer of an iteration's end may read is written before it is told, in
//! `end`. That covers the statistics, the shutdown report and the waiters. A re-run never
//! loops on the same thread. It goes back through the run queue, as G10 requires. The
//! exception is an async iteration ending in a poll, which adopts it, as [`Adopt`]
//! describes.

use super::iteration::{Iteration, Started};
use super::task_cell::Called;
use super::Counted;
use super::{Core, InboxPush, OnClosed, Runtime};
use crate::clock::{coalesce, deadline_us};
use crate::context::{self, Outcome};
use crate::request::{Installer, Kind, Mark, Refused};
use crate::state::{Enter, Exit};
use std::time::Duration;

/// Where a re-run due at once goes when an iteration ends.
///
/// `None` sends it through the run queue. `Some(slot)` is for an async iteration ending
/// in a poll. The re-run is served on the spot, and its future is put in `slot`. The
/// ending iteration polls it next in the same executor task. There is no worker wake-up
/// and no new spawn.
pub(crate) type Adopt<'a> = Option<&'a mut Option<Started>>;

/// What a run that took its request does next.
enum Start {
    /// It entered and runs.
    Run,
    /// It entered too soon after the last start. RUNNING goes back, and the run waits for
    /// the cooldown's end.
    Defer { end_us: u64, now_us: u64 },
    /// Not entered, being reserved or stale, or discarded at shutdown.
    Not,
}

impl<R: Runtime> Counted<Core<R>> {
    /// Worker side. Serves whatever request is live and due.
    ///
    /// Returns the re-armed trigger's inbox push, if its task asked for a next run. The
    /// caller delivers it, through [`InboxPush::deliver`] or the pool's next lock.
    pub(crate) fn dispatch(&self) -> Option<InboxPush> {
        // Acquire: see `queued` in `# Orderings`. Clear before reading.
        self.clear_queued();
        self.serve_due(None)
    }

    /// A dispatch on the executor, as [`dispatch`](Self::dispatch).
    ///
    /// An async run due at once is put in `adopt` for the caller to poll.
    pub(crate) fn dispatch_here(&self, adopt: &mut Option<Started>) -> Option<InboxPush> {
        // Acquire: see `queued` in `# Orderings`. Clear before reading.
        self.clear_queued();
        self.serve_due(Some(adopt))
    }

    /// Takes the due request, if any, and runs it.
    ///
    /// It is the body of [`dispatch`](Self::dispatch). It is also used where an async
    /// iteration re-runs in place.
    pub(super) fn serve_due(&self, adopt: Adopt<'_>) -> Option<InboxPush> {
        let version = self.request.take_due()?;
        if let Some(debounce) = self.debounce() {
            debounce.claimed(version);
        }
        // With waiters, the run is entered and decided under their lock, and
        // its start is recorded there. See "Verdicts that hold" in `wait.rs`.
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
}

impl<R: Runtime> Core<R> {
    /// Enters the iteration of the claimed `version` and decides whether it
    /// runs now.
    fn enter(&self, version: u32) -> Start {
        match self.state.enter(version) {
            Enter::Entered => {
                // Entered after the shutdown scan? Then the run is discarded and
                // listed, like any armed run. Only iterations already running when
                // shutdown began finish. It is listed under the scan's mark. The scan
                // left that mark for this claim when it could not make the claim
                // fail, in `Core::claim_unstarted`.
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

    /// The end of the minimum interval after the last start, and now, if that end is still
    /// ahead.
    ///
    /// It is read while holding RUNNING. The Acquire in `enter` makes the previous run's
    /// start visible.
    pub(super) fn cooldown_end(&self) -> Option<(u64, u64)> {
        let min_us = self.policies()?.min_interval_us;
        if min_us == 0 {
            return None;
        }
        // The real clock's start was rounded down to the microsecond. The run
        // began somewhere in [start, start + 1). So the interval surely has
        // passed only from start + 1 + min on. Virtual time is exact.
        let rounding = u64::from(!self.runtime.timing().clock.is_manual());
        let end_us = self
            .stats
            .last_start_us()?
            .saturating_add(min_us)
            .saturating_add(rounding);
        let now_us = self.runtime.timing().clock.now_us();
        (end_us > now_us).then_some((end_us, now_us))
    }
}

impl<R: Runtime> Counted<Core<R>> {
    /// A due run came too soon after the previous start.
    ///
    /// It gives RUNNING back without running, and arms the live request for the cooldown's
    /// end. Fires during the cooldown coalesce there, and the latest wins as always.
    pub(super) fn defer(&self, version: u32, end_us: u64, now_us: u64) -> Option<InboxPush> {
        let (exit, seen) = self.state.exit_seen(version);
        // No run happened. Suppose the shutdown scan read RUNNING before this
        // `exit`. Then the AcqRel `exit` read its AcqRel `touch`, so `closed` is
        // seen here. The scan holds the report's lock throughout, and it has
        // listed this trigger in flight. So strike it. Otherwise the scan reads
        // it idle and lists nothing in flight. Or it lists a later iteration's,
        // which `seen` tells from this one.
        if self.runtime.is_closed() {
            self.runtime.ledger().unlist(self, seen);
        }
        let live = match exit {
            Exit::Rerun { version } => version,
            Exit::Done { live: true } => version,
            Exit::Done { live: false } => {
                // Shut down. The claim this deferred run came from is owed its run
                // if the scan marked it, since it never ran. The run is at the
                // cooldown's end, if the claim was its own.
                self.list_marked_claim(version, || Some(Kind::at(end_us, now_us)));
                // A newer request rules. The exception is a resume that waits for
                // this deferred run's schedule, which is the last iteration's.
                let now_ns = self.runtime.timing().clock.now_ns();
                self.settle_resuming(self.last_delay.get(), now_ns, OnClosed::List);
                return None;
            }
        };
        self.publish_at_later(live, end_us, now_us, OnClosed::List)
    }

    /// Runs one iteration, then exits. This worker holds RUNNING.
    ///
    /// For an async task, it spawns the iteration's future instead, which exits when it
    /// completes. See `iteration.rs`.
    pub(super) fn run(&self, version: u32, adopt: Adopt<'_>) -> Option<InboxPush> {
        // A sync iteration's span, at DEBUG. It records the trigger, the version,
        // a timed run's lateness and the outcome. An async iteration gets its
        // span from its future in `iteration.rs`, entered at every poll. It gets
        // the lateness with the future, in [`Started`].
        #[cfg(feature = "tracing")]
        let span = if self.cancel_slot().is_none() {
            crate::context::iteration_span(self.name(), version)
        } else {
            tracing::Span::none()
        };
        #[cfg(feature = "tracing")]
        let _entered = span.enter();
        // An upper bound of now. See `Clock::deadline_base_ns`. A cooldown
        // measured from it ends no earlier. A lateness reads at most about 2 µs
        // high.
        let start_us = self.runtime.timing().clock.deadline_base_ns() / 1_000;
        let late = self
            .stats
            .started(version, start_us, || &self.rare().counters);
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
                // Spawned outside the cell's borrow. An executor that shut down drops
                // the job at once, which ends the iteration right here. The next
                // holder may then touch the cell.
                let started = Started {
                    version,
                    future,
                    late,
                };
                slot.spawner
                    .spawn(Box::pin(Iteration::new(Counted::clone(self), started)));
                None
            }
        }
    }

    /// An async iteration of `version` ended, on whichever thread polled it.
    ///
    /// It ends as in [`end`](Self::end), and delivers a re-arm at once. For `adopt`, see
    /// [`Adopt`]. It is `None` when the executor dropped the iteration unpolled. Serving on
    /// the spot there could recurse through an executor that drops every job.
    pub(crate) fn end_async(
        &self,
        version: u32,
        result: std::thread::Result<Option<Duration>>,
        outcome: Outcome,
        adopt: Adopt<'_>,
    ) {
        if let Some(push) = self.end(version, result, outcome, adopt) {
            push.deliver(self);
        }
    }

    /// Ends the iteration of `version`, which this thread holds RUNNING for.
    ///
    /// A panic is reported. The statistics, the waiters and the shutdown report learn the
    /// outcome. Then come `exit`, and the re-run or re-arm.
    pub(super) fn end(
        &self,
        version: u32,
        result: std::thread::Result<Option<Duration>>,
        outcome: Outcome,
        adopt: Adopt<'_>,
    ) -> Option<InboxPush> {
        // SAFETY: see the invariant on `Core::task`.
        let retry = self
            .task
            .with_mut(|cell| unsafe { (*cell).settle(&result) });
        // Everything an observer of this end may read is written before it is
        // told. The statistics are written before the panic hook runs. The
        // statistics, the shutdown report and `exit` come before the waiters
        // wake. Their lock orders the Relaxed counters.
        let panicked = outcome == Outcome::Panicked;
        // One clock read serves the statistics and the re-arm deadline. It is an
        // upper bound of now, as a deadline needs. See `Clock::deadline_base_ns`.
        let end_ns = self.runtime.timing().clock.deadline_base_ns();
        let ran_us = self.stats.ended(end_ns / 1_000);
        if panicked {
            self.rare().counters.panicked();
        }
        crate::metrics::iteration_ended(self.name(), outcome, ran_us);
        #[cfg(feature = "metrics")]
        {
            // A follow-up reserved, or a request newer than this run's, DUE or AT,
            // waits for its run.
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
        // The outcome goes to the shutdown report if the scan listed this run. It
        // is looked up before `exit`. It is looked up again after `exit` if the
        // scan had not run yet, since the scan may read RUNNING between the first
        // look and `exit`. The AcqRel `exit` then reads the scan's AcqRel `touch`.
        // So the second look sees `closed` and the scan's report. A scan after the
        // `exit` may have listed a later iteration instead. The version that the
        // `exit` read tells them apart. `loom_shutdown` checks every side.
        let recorded =
            self.runtime.is_closed() && self.runtime.ledger().finish(self, outcome, None);
        let (exit, seen) = self.state.exit_seen(version);
        if !recorded && self.runtime.is_closed() {
            self.runtime.ledger().finish(self, outcome, Some(seen));
        }
        // After `exit`, so a newer run may already have started, or even ended,
        // on another thread. The waiters' record only moves forward, and a newer
        // run serves this run's waiters too.
        if let Some(waiters) = self.existing_waiters() {
            waiters.finished(version, outcome);
        }
        match exit {
            // The follow-up goes back through the pool rather than looping here, so
            // a fire storm cannot pin this worker, as G10 requires.
            Exit::Rerun { version } => self.rerun(version, adopt),
            Exit::Done { live: true } => self.rearm(version, next?, end_ns, adopt),
            // A newer request rules. Ending in a poll, serve it here if it is due
            // and its firer has not reserved it yet. Under a storm, that is the
            // moment between a fire's `advance` and its `reserve`. The claim is
            // atomic. So the firer then finds nothing to hand the pool, or hands it
            // and the dispatch finds nothing.
            Exit::Done { live: false } => {
                // Resumed while this iteration ran, so its delay is the schedule. See
                // `Core::resume`.
                self.settle_resuming(next, end_ns, OnClosed::List);
                // Shut down while this iteration ran. A claim of a newer run that the
                // scan marked, and that was cancelled since, is listed here. Or this
                // run's own next one is, if only refused fires advanced past it.
                self.list_marked_claim(version, || self.next_run(next, end_ns));
                if adopt.is_some() {
                    self.serve_due(adopt)
                } else {
                    None
                }
            }
        }
    }

    /// `version` is due again at once.
    ///
    /// It goes through the run queue. For an async iteration ending in a poll, it is served
    /// on the spot instead. See [`Adopt`]. The pool's fairness of G10 is not at stake there.
    /// Serving only calls the task for its next future, which the executor task polls among
    /// the executor's others.
    pub(super) fn rerun(&self, version: u32, adopt: Adopt<'_>) -> Option<InboxPush> {
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

    /// Scheduler side. `version` is due again at once, as a re-run after a reservation or
    /// after a zero re-arm delay.
    pub(super) fn requeue(&self, version: u32) {
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
        &self,
        version: u32,
        delay: Duration,
        now_ns: u64,
        adopt: Adopt<'_>,
    ) -> Option<InboxPush> {
        if delay.is_zero() {
            // Due now, and marked so, as the timer marks a run it finds due. Its
            // lateness counts from here. The shutdown scan tells its claim from the
            // TAKEN word that the ending iteration leaves, since the version is the
            // same. See `claim_unstarted`.
            self.stats.marked_due(version, now_ns / 1_000);
            return self.rerun(version, adopt);
        }
        // A delay beyond the clock's range can never come due, so stop, as with
        // `None`.
        let deadline = self.rearm_deadline(delay, now_ns)?;
        self.publish_at_later(version, deadline, now_ns / 1_000, OnClosed::List)
    }
}

impl<R: Runtime> Core<R> {
    /// The run that an iteration returned at `now_ns` asks for with `next`, as its re-arm
    /// would arm it.
    ///
    /// `None` means no run, or one that can never come due.
    fn next_run(&self, next: Option<Duration>, now_ns: u64) -> Option<Kind> {
        match next? {
            delay if delay.is_zero() => Some(Kind::Due),
            delay => Some(Kind::at(
                self.rearm_deadline(delay, now_ns)?,
                now_ns / 1_000,
            )),
        }
    }

    /// The deadline, in µs, of the run that an iteration returned at `now_ns` asks for
    /// `delay` later, with `delay` above zero.
    ///
    /// The deadline is rounded up to the tick, then onto the coalescing grid if the scheduler
    /// coalesces. It is `None` past the clock's range. The re-arm and the shutdown report's
    /// listing of that run, in `list_marked_claim`, both come here. So the report names the
    /// very deadline the run would have had.
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
