//! The scheduler's threads. Workers run iterations and take turns holding
//! the timer role. The monitor starts another worker when work waits
//! because every worker is busy, as G14 requires.
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
//! Tasks may block, as a config center that hangs until its RPC timeout
//! does. So a fixed pool lets `workers` slow tasks freeze every other
//! trigger. That is the first flaw of `java.util.Timer`, at a larger N. The
//! monitor looks at the pool every half stall threshold. Work may be
//! pending at two looks in a row, with no worker picking anything up in
//! between. Then the monitor starts a worker, up to the limit, and reports
//! reaching the limit. If only the free timer role was pending, it turns
//! the wheel itself first. It then starts a worker only for runs that turn
//! queues, because the role's due time may be a stale deadline. Like Go's
//! `sysmon`, it only ticks while the pool is active. After two looks with
//! nothing pending and no thread busy, it parks. It sleeps until a tick
//! after the timer role holder's next deadline, or until a thread is woken,
//! in `Pool::monitor_sleep`. It also reports runs in flight longer than
//! their trigger's `stuck_after`. It never parks while such a trigger
//! lives, because an async iteration occupies no worker.

use super::pool::{Bed, Carry, Look, Step, Watch, Work};
use super::Shared;
use crate::sync::{Arc, Condvar, Ordering};
use std::time::Duration;

/// A worker's life. It takes work until the pool closes. An `extra` worker
/// also stops once it has been idle for the keep-alive.
pub(crate) fn run_worker(shared: &Arc<Shared>, extra: bool) {
    let _ = shared.enter_context();
    fine_timer_slack();
    let bed: Bed = Arc::new(Condvar::new());
    // The clock as this worker's last timer turn began.
    let mut now_hint = None;
    // A re-arm's inbox push and the timer turns' buffers, in a `Carry`.
    let mut carry = Carry::default();
    loop {
        let (limits, clock) = (&shared.limits, &shared.timing.clock);
        let hint = now_hint.take();
        match shared
            .pool
            .next_work(&bed, extra, limits, clock, &mut carry, hint)
        {
            // The run's reference rides with its re-arm, if any, to the inbox in `carry`.
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

/// Asks the kernel to wake this thread's timed waits within one microsecond
/// of their deadline. The kernel's default slack is fifty microseconds. The
/// role holder sleeps toward microsecond deadlines, and any worker may hold
/// the role. It works on Linux only, and does nothing elsewhere or under
/// loom.
fn fine_timer_slack() {
    #[cfg(all(target_os = "linux", not(loom)))]
    {
        const SLACK_NS: libc::c_ulong = 1_000;
        // SAFETY:
        // - `prctl(PR_SET_TIMERSLACK, n)` takes one integer argument and
        //   changes only the calling thread's timer slack. It reads and
        //   writes no memory of ours.
        // - It cannot fail for a positive value. A failure would only leave
        //   the default slack, so its result is ignored.
        let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, SLACK_NS) };
    }
}

/// Holds the timer role. It turns, then sleeps toward the next deadline,
/// until a turn finds runs due or the pool closes. With runs due, the role
/// goes back, and this thread runs the first of them. Returns `true` if
/// this `extra` worker retired, handing the role over. It leaves the last
/// turn's clock reading in `now_hint`.
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
        // The turn drained it. Trim it before the holder sleeps, maybe for hours.
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
            // Another worker holds the role now. This one looks for work.
            Step::TakenOver => return false,
            // Never queued. Each was marked due before the shutdown scan
            // closed its word, so the scan lists it, as `Request::close`
            // explains. Dropped here, outside every lock.
            Step::Closed(never_queued) => {
                drop(never_queued);
                return false;
            }
        }
    }
}

/// One look of the monitor at the pool at `now_us`, through
/// `Pool::monitor_check`. It turns the wheel if only the free timer role
/// seemed due. Returns whether a worker must be started, already counted.
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
            // Left only if the pool closed meanwhile. These runs were never
            // queued, and the shutdown scan lists them, as for a holder's
            // `Step::Closed`. Dropped here, outside every lock.
            drop(due);
            start
        }
    }
}

/// The monitor's life. Until the pool closes, it looks, starts a worker if
/// the pool stalls, and sleeps a tick.
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

/// Starts a worker. An `extra` one retires when idle.
pub(super) fn spawn_worker(shared: &Arc<Shared>, extra: bool) -> std::io::Result<()> {
    // Relaxed: a name counter that orders nothing.
    let index = shared.next_worker.fetch_add(1, Ordering::Relaxed);
    let name = format!("{}worker-{index}", shared.prefix);
    let body = if extra {
        |shared: &Arc<Shared>| run_worker(shared, true)
    } else {
        |shared: &Arc<Shared>| run_worker(shared, false)
    };
    shared.spawn(name, body)
}

/// Starts a worker the monitor asked for, already counted in the pool. A
/// failure to start one is uncounted and reported, never fatal.
pub(super) fn start_extra_worker(shared: &Arc<Shared>) {
    if let Err(_error) = spawn_worker(shared, true) {
        shared.pool.worker_not_started();
        #[cfg(feature = "tracing")]
        tracing::error!(error = %_error, "could not start an extra worker");
    }
}
