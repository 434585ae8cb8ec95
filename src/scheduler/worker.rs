//! The scheduler's threads: workers, which run iterations and take turns
//! holding the timer role, and the monitor, which starts another worker
//! when work waits because every worker is busy (G14).
//!
//! ```text
//!            ┌──────────── next_work ◀──────────────┐
//!            ▼                                      │
//!  role free & due? ── yes ─▶ hold the role: turn, sleep, turn … ── due runs ─▶ put the role back
//!            │ no                                                                │
//!  queued run? ── yes ─▶ dispatch ───────────────────────────────────────────────┘ (runs the first itself)
//!            │ no
//!  park idle (LIFO bed; an extra worker retires after its keep-alive)
//! ```
//!
//! # The monitor
//!
//! Tasks may block (a config center that hangs until its RPC timeout), so
//! a fixed pool lets `workers` slow tasks freeze every other trigger — the
//! first flaw of `java.util.Timer`, at a larger N. The monitor looks at the
//! pool every half stall threshold; when work was pending at two looks in a
//! row with no worker picking anything up in between, it starts a worker,
//! up to the limit (and reports reaching it); if only the free timer role
//! was pending, it turns the wheel itself first, and starts a worker only
//! for runs that turn queues (the role's due time may be a stale deadline).
//! Like Go's `sysmon` it only ticks while the pool is active: after two
//! looks with nothing pending and no thread busy it parks, until a tick
//! after the timer role holder's next deadline or until a thread is
//! woken (see `Pool::monitor_sleep`). It also reports runs in flight
//! longer than their trigger's `stuck_after`, and never parks while such
//! a trigger lives (an async iteration occupies no worker).

use super::pool::{Bed, Carry, Look, Step, Watch, Work};
use super::Shared;
use crate::sync::{Arc, Condvar, Ordering};
use std::time::Duration;

/// A worker's life: take work until the pool closes (or, for an `extra`
/// worker, until it has been idle for the keep-alive).
pub(crate) fn run_worker(shared: &Arc<Shared>, extra: bool) {
    let _ = shared.enter_context();
    fine_timer_slack();
    let bed: Bed = Arc::new(Condvar::new());
    // The clock as this worker's last timer turn began.
    let mut now_hint = None;
    // A re-arm's inbox push and the timer turns' buffers (see `Carry`).
    let mut carry = Carry::default();
    loop {
        let (limits, clock) = (&shared.limits, &shared.timing.clock);
        let hint = now_hint.take();
        match shared
            .pool
            .next_work(&bed, extra, limits, clock, &mut carry, hint)
        {
            // The run's reference rides with its re-arm, if any, to the
            // inbox (see `Carry`).
            Work::Run(core) => carry.push = core.dispatch().map(|push| (core, push)),
            Work::Timer(timer) => {
                if hold_timer(shared, timer, &mut carry, extra, &mut now_hint) {
                    return; // retired, the role handed over
                }
            }
            Work::Exit => {
                if let Some((core, push)) = carry.push {
                    push.closed(&core);
                }
                return;
            }
        }
    }
}

/// Asks the kernel to wake this thread's timed waits within 1 µs of their
/// deadline instead of its default 50 µs slack: the role holder sleeps toward
/// microsecond deadlines, and any worker may hold the role. Linux only;
/// elsewhere (and under loom) nothing.
fn fine_timer_slack() {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        const SLACK_NS: libc::c_ulong = 1_000;
        // SAFETY:
        // - `prctl(PR_SET_TIMERSLACK, n)` takes one integer argument and
        //   changes only the calling thread's timer slack; it reads and
        //   writes no memory of ours;
        // - it cannot fail for a positive value; a failure would only leave
        //   the default slack, so its result is ignored.
        let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, SLACK_NS) };
    }
}

/// Holds the timer role: turn, then sleep toward the next deadline, until
/// a turn finds runs due (the role goes back, and this thread runs the
/// first of them) or the pool closes. Returns `true` if this `extra`
/// worker retired, handing the role over; leaves the last turn's clock
/// reading in `now_hint`.
fn hold_timer(
    shared: &Shared,
    mut timer: Box<super::timer::Timer<Shared>>,
    carry: &mut Carry<Shared>,
    extra: bool,
    now_hint: &mut Option<u64>,
) -> bool {
    let retire = extra.then_some(&shared.limits);
    loop {
        // Drained by the last `after_turn`.
        super::pool::trim(&mut carry.due);
        let now_us = shared.timing.clock.now_us();
        let mut estimate = timer.turn(now_us, &mut carry.inbox, &mut carry.due);
        // Outside every lock, before the holder sleeps, maybe for hours.
        timer.settle_let_go(&mut carry.due, &mut estimate);
        // Drained by the turn: before the holder sleeps, maybe for hours.
        super::pool::trim(&mut carry.inbox);
        match shared
            .pool
            .after_turn(timer, carry, estimate, now_us, &shared.timing.clock, retire)
        {
            Step::Turn(held) => timer = held,
            Step::Released => {
                *now_hint = Some(now_us);
                return false;
            }
            Step::Retired => return true,
            // Never queued: each was marked due before the shutdown scan
            // closed its word, so the scan lists it (see `Request::close`).
            // Dropped here, outside every lock.
            Step::Closed(never_queued) => {
                drop(never_queued);
                return false;
            }
        }
    }
}

/// One look of the monitor at the pool at `now_us` (see `Pool::monitor_check`),
/// turning the wheel if only the free timer role seemed due: whether a
/// worker must be started (already counted).
pub(crate) fn monitor_look(shared: &Shared, watch: &mut Watch, now_us: u64) -> bool {
    match shared.pool.monitor_check(watch, &shared.limits, now_us) {
        Look::Fine => false,
        Look::Start => true,
        Look::Turn(mut timer, mut items) => {
            let mut due = Vec::new();
            let mut estimate = timer.turn(now_us, &mut items, &mut due);
            timer.settle_let_go(&mut due, &mut estimate);
            let start = shared
                .pool
                .monitor_turned(watch, timer, &mut due, &shared.limits);
            // Left only if the pool closed meanwhile: never queued, and
            // listed by the shutdown scan (as a holder's `Step::Closed`);
            // dropped here, outside every lock.
            drop(due);
            start
        }
    }
}

/// The monitor's life: look, start a worker if the pool stalls, sleep a
/// tick; until the pool closes.
pub(crate) fn run_monitor(shared: &Arc<Shared>) {
    let tick = (shared.limits.stall / 2).max(Duration::from_micros(100));
    let mut watch = Watch::default();
    loop {
        let now_us = shared.timing.clock.now_us();
        if monitor_look(shared, &mut watch, now_us) {
            start_extra_worker(shared);
        }
        shared.ledger.check_stuck(now_us, |core, running_for| {
            shared.report_stuck(core, running_for)
        });
        let watches_nothing = || shared.ledger.watches_nothing();
        if !shared
            .pool
            .monitor_sleep(&mut watch, tick, &shared.timing.clock, watches_nothing)
        {
            return;
        }
    }
}

/// Starts a worker (`extra`: one that retires when idle).
pub(super) fn spawn_worker(shared: &Arc<Shared>, extra: bool) -> std::io::Result<()> {
    // Relaxed: a name counter; it orders nothing.
    let index = shared.next_worker.fetch_add(1, Ordering::Relaxed);
    let name = format!("{}worker-{index}", shared.prefix);
    let body = if extra {
        |shared: &Arc<Shared>| run_worker(shared, true)
    } else {
        |shared: &Arc<Shared>| run_worker(shared, false)
    };
    shared.spawn(name, body)
}

/// Starts a worker the monitor asked for (already counted in the pool); a
/// failure to start one is uncounted and reported, never fatal.
pub(super) fn start_extra_worker(shared: &Arc<Shared>) {
    if let Err(_error) = spawn_worker(shared, true) {
        shared.pool.worker_not_started();
        #[cfg(feature = "tracing")]
        tracing::error!(error = %_error, "could not start an extra worker");
    }
}
