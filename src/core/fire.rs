//! The firer side of a trigger: `fire`, `fire_after` and their kin,
//! `fire_and_wait`, `suspend` — called from any thread, any number at once.
//!
//! # Ground rules
//!
//! A firer only ever does read-modify-writes on the state word (`advance`,
//! `advance_fire`, `reserve`) and the request word (`publish`, `take_due`,
//! `withdraw_own`), then hands the trigger on through `handoff.rs`. It
//! never touches the task cell, and it re-checks `is_closed` after
//! publishing (`confirm`), so a fire racing shutdown is either refused or
//! listed in the shutdown report (see `scheduler/lifecycle.rs`).

use super::{Core, OnClosed, Runtime};
use crate::clock::deadline_us;
use crate::context::{self, Outcome};
use crate::error::{FireError, WaitError};
use crate::request::{Kind, Word};
use crate::state::Reserve;
use crate::sync::Arc;
use std::time::Duration;

impl<R: Runtime> Core<R> {
    /// Requests a run as soon as a worker is free.
    pub(crate) fn fire(self: &Arc<Self>) -> Result<(), FireError> {
        self.fire_version().map(|_| ())
    }

    /// [`fire`](Self::fire), returning the version it installed.
    pub(super) fn fire_version(self: &Arc<Self>) -> Result<u32, FireError> {
        if self.runtime.is_closed() {
            return Err(FireError::Shutdown);
        }
        let (version, coalesced) = self.state.advance_fire();
        self.advanced(version, coalesced);
        if coalesced {
            // A re-run was already reserved and now serves this fire: one
            // RMW in all. The request word keeps the reservation's claim;
            // `exit` re-runs the live version, this one or newer (its
            // version kept within reach by `advanced`). Shutdown began
            // meanwhile: refuse; the reserved re-run stands for the
            // earlier, accepted fire, and `exit` lists it.
            if self.runtime.is_closed() {
                return Err(FireError::Shutdown);
            }
            return Ok(version);
        }
        let replaced = self.request.publish(version, Kind::Due, false);
        if replaced.is_some() && !self.reserve_inline() {
            self.schedule_run(OnClosed::Refuse);
        }
        self.confirm(version, Kind::Due, replaced)?;
        Ok(version)
    }

    /// Fires, then waits for the iteration that serves this fire (see
    /// `wait.rs`) for at most `timeout`.
    pub(crate) fn fire_and_wait(self: &Arc<Self>, timeout: Duration) -> Result<Outcome, WaitError> {
        let fired = self.fire_for_wait()?;
        let deadline = std::time::Instant::now().checked_add(timeout);
        self.waiters()
            .wait(fired, deadline, || self.runtime.is_closed())
    }

    /// A waiter's fire: refused from inside this trigger's own task;
    /// returns the version whose run the waiter waits for.
    pub(crate) fn fire_for_wait(self: &Arc<Self>) -> Result<u32, WaitError> {
        if context::is_running_here(self.address()) {
            return Err(WaitError::OwnTask);
        }
        // Created before the fire, so the run serving it reports to them.
        self.waiters();
        self.fire_version().map_err(|_| WaitError::Shutdown)
    }

    /// Fired while an iteration runs: do the dispatcher's job right here —
    /// claim the due request and set RESERVED — instead of waking a worker
    /// only to find the trigger busy. Under a fire storm this keeps the
    /// second worker asleep and the queue empty (G13). Returns `false` if a
    /// worker must still be given the run.
    pub(super) fn reserve_inline(&self) -> bool {
        if !self.state.snapshot().is_running() {
            return false;
        }
        // None: a worker already took it, or a newer non-due request
        // replaced it; either way someone else is in charge.
        let Some(version) = self.request.take_due() else {
            return true;
        };
        match self.state.reserve(version) {
            Reserve::Reserved | Reserve::Stale => true,
            // The iteration ended meanwhile: hand the request back.
            Reserve::NotRunning => self.request.publish(version, Kind::Due, false).is_none(),
        }
    }

    /// The firer's re-check after publishing (see `scheduler/lifecycle.rs`):
    /// if shutdown began meanwhile, refuse the fire. Its request is taken
    /// back — unless it replaced an armed one: then it stands for that
    /// earlier, accepted run, and stays for the shutdown scan to list.
    /// If someone listed or served it already, the fire was accepted.
    #[inline]
    pub(super) fn confirm(
        &self,
        version: u32,
        kind: Kind,
        replaced: Option<Word>,
    ) -> Result<(), FireError> {
        if !self.runtime.is_closed() {
            return Ok(());
        }
        let replaced_armed =
            replaced.is_some_and(|old| matches!(old.kind(), Kind::At { .. } | Kind::Due));
        if replaced_armed || self.request.withdraw_own(version, kind) {
            return Err(FireError::Shutdown);
        }
        Ok(())
    }

    /// Requests a run `delay` from now (latest request wins).
    #[inline]
    pub(crate) fn fire_after(self: &Arc<Self>, delay: Duration) -> Result<(), FireError> {
        self.fire_after_from(self.runtime.clock().now_ns(), delay)
    }

    /// Requests a run `delay` after `now_ns`.
    #[inline]
    pub(super) fn fire_after_from(
        self: &Arc<Self>,
        now_ns: u64,
        delay: Duration,
    ) -> Result<(), FireError> {
        if delay.is_zero() {
            return self.fire();
        }
        // The deadline is computed, checked, before the version moves: an
        // overflowing delay must not cancel the live chain (docs/DESIGN.md,
        // "Pitfalls").
        let deadline = deadline_us(now_ns, delay, self.runtime.tick_us())
            .ok_or(FireError::DelayTooLong(delay))?;
        if self.runtime.is_closed() {
            return Err(FireError::Shutdown);
        }
        let version = self.advance();
        let (kind, replaced) = self.publish_at(version, deadline, now_ns / 1_000, OnClosed::Refuse);
        self.confirm(version, kind, replaced)
    }

    /// Requests a run when the scheduler's clock shows `at_ns` (now, if it
    /// already has).
    pub(crate) fn fire_at_ns(self: &Arc<Self>, at_ns: u64) -> Result<(), FireError> {
        let now_ns = self.runtime.clock().now_ns();
        match at_ns.checked_sub(now_ns) {
            Some(delay) if delay > 0 => self.fire_after_from(now_ns, Duration::from_nanos(delay)),
            _ => self.fire(),
        }
    }

    /// Requests a run at `at` on the real clock (see `Trigger::fire_at`).
    pub(crate) fn fire_at(self: &Arc<Self>, at: std::time::Instant) -> Result<(), FireError> {
        match self.runtime.clock().instant_ns(at) {
            Some(at_ns) => self.fire_at_ns(at_ns),
            // Virtual time: the instant counts from the real now.
            None => self.fire_after(at.saturating_duration_since(std::time::Instant::now())),
        }
    }

    /// Requests a run after a uniformly random delay in `[0, window)`.
    /// The whole window must fit the clock's range, so whether the fire is
    /// refused never depends on the draw.
    pub(crate) fn fire_within(self: &Arc<Self>, window: Duration) -> Result<(), FireError> {
        let nanos = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return self.fire();
        }
        let now_ns = self.runtime.clock().now_ns();
        if deadline_us(now_ns, window, self.runtime.tick_us()).is_none() {
            return Err(FireError::DelayTooLong(window));
        }
        let delay = Duration::from_nanos(self.runtime.random_below(nanos));
        self.fire_after_from(now_ns, delay)
    }

    /// Cancels every pending request; an iteration in flight finishes.
    pub(crate) fn suspend(&self) {
        let version = self.advance();
        self.stats.suspended(version);
        // A newer request may already be installed: then it wins, as the
        // later call.
        let _ = self.request.publish(version, Kind::Idle, false);
        // After the publish: a waiter told "suspended" reads the trigger so.
        if let Some(waiters) = self.waiters.get() {
            waiters.suspended(version);
        }
    }
}
