//! Models of the async iteration on the crate's real code, with a minimal
//! executor: a fire's dispatch runs as an executor job (a worker's, for
//! the scheduler's own runs), enters, and polls the iteration's future in
//! the same job; whichever thread polls it to completion exits the state
//! word, and a re-run due then is adopted by that job. Checked: G1 (the task
//! closure, run by workers, and the futures, polled by the executor's
//! threads, never touch the task state at once), G2 through the hand-over,
//! G4/G5 (fires during an `.await` give exactly one follow-up), and the
//! cancellation of `shutdown_now` (the wake-up is never lost).
#![cfg(loom)]

mod common;

use circulation_trigger::model::{Executor, Harness};
use circulation_trigger::Outcome;
use common::{run_model, run_model_bounded, Count, Exclusive};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Pending `.0` times (waking itself each time), then ready: `.await`s
/// that hand the iteration to whichever thread polls next.
struct Yields(u32);

impl Future for Yields {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            Poll::Ready(())
        } else {
            self.0 -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// Runs dispatches and woken jobs until neither has anything left.
fn drain(h: &Harness, executor: &Executor) {
    loop {
        let dispatched = h.run_all();
        let polled = executor.run_woken();
        if dispatched + polled == 0 {
            break;
        }
    }
}

#[test]
fn async_hand_over_keeps_exclusion_and_happens_before() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let executor = Executor::default();
        let state = Exclusive::default();
        let data = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let (s, d, n) = (state.clone(), data.clone(), seen.clone());
        let trigger = h.async_trigger(0, &executor, move || {
            // Where the dispatch runs: ordered after the previous future's
            // last touch (maybe on the other thread) only through that
            // future's `exit` and this `enter`.
            s.touch();
            let (s, d, n) = (s.clone(), d.clone(), n.clone());
            async move {
                Yields(1).await;
                s.touch(); // on the executor's thread
                           // Relaxed on purpose: visibility must come from the trigger.
                n.store(d.load(Ordering::Relaxed), Ordering::Relaxed);
                None
            }
        });
        trigger.fire().unwrap();
        // Two executor threads: the fire's dispatch, the future's polls and
        // a later dispatch may each land on either.
        let worker = {
            let executor = executor.clone();
            thread::spawn(move || {
                executor.poll_one();
                executor.poll_one();
            })
        };
        let poller = {
            let executor = executor.clone();
            thread::spawn(move || {
                executor.poll_one();
                executor.poll_one();
            })
        };
        data.store(1, Ordering::Relaxed);
        trigger.fire().unwrap();
        worker.join().unwrap();
        poller.join().unwrap();
        drain(&h, &executor);
        assert_eq!(seen.load(Ordering::Relaxed), 1, "the last run saw the data");
        assert_eq!(executor.pending(), 0);
        assert!(!Harness::snapshot(&trigger).is_running());
        let touches = state.get();
        assert!(touches == 2 || touches == 4, "touches = {touches}");
    });
}

#[test]
fn fires_during_an_await_give_exactly_one_follow_up() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let executor = Executor::default();
        let starts = Count::default();
        let st = starts.clone();
        let trigger = h.async_trigger(0, &executor, move || {
            st.bump();
            async {
                Yields(2).await;
                None
            }
        });
        trigger.fire().unwrap();
        // The fire's dispatch runs on the executor, which then polls the
        // iteration once: in flight from here on.
        h.run_all();
        executor.poll_one();
        let firers: Vec<_> = (0..2)
            .map(|_| {
                let t = trigger.clone();
                thread::spawn(move || t.fire().unwrap())
            })
            .collect();
        // The second poll (pending) races the fires; the iteration cannot
        // complete before both fired.
        let poller = {
            let executor = executor.clone();
            thread::spawn(move || {
                executor.poll_one();
            })
        };
        firers.into_iter().for_each(|f| f.join().unwrap());
        poller.join().unwrap();
        drain(&h, &executor);
        assert_eq!(starts.get(), 2, "two fires during an await: one follow-up");
        assert_eq!(executor.pending(), 0);
    });
}

#[test]
fn shutdown_now_cancels_an_awaiting_iteration_without_losing_its_wake_up() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let executor = Executor::default();
        let trigger = h.async_trigger(0, &executor, || async {
            std::future::pending::<()>().await; // only a cancel ends it
            None
        });
        trigger.fire().unwrap();
        let runner = {
            let (h, executor) = (h.clone(), executor.clone());
            thread::spawn(move || {
                h.run_one();
                executor.poll_one();
            })
        };
        h.shutdown_now_without_waiting();
        runner.join().unwrap();
        executor.run_woken();
        assert_eq!(executor.pending(), 0, "the cancel's wake-up was lost");
        let report = h.scheduler().shutdown_report().unwrap();
        match report.in_flight() {
            [run] => assert_eq!(
                run.outcome(),
                Outcome::Cancelled,
                "{report:?} {:?}",
                trigger.stats()
            ),
            [] => assert_eq!(report.discarded().len(), 1, "{report:?}"),
            more => panic!("{more:?}"),
        }
        assert!(h.is_terminated());
        assert!(!Harness::snapshot(&trigger).is_running());
    });
}

/// The async dispatch's side of the `queued` flag: a fire that finds the
/// trigger's dispatch job already queued (and so spawns none) is served by
/// that job — even when the request the job was queued for has since been
/// withdrawn, so the job's only work is the later fire's. The job clears
/// the flag with an Acquire `swap` that synchronizes with the firer's
/// Release one; without it the job could read the withdrawn request, find
/// nothing due and drop the fire.
#[test]
fn a_fire_finding_the_async_dispatch_queued_is_served_by_it() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let executor = Executor::default();
        let starts = Count::default();
        let st = starts.clone();
        let trigger = h.async_trigger(0, &executor, move || {
            st.bump();
            async { None }
        });
        trigger.fire().unwrap(); // a dispatch job is queued on the executor
        trigger.suspend(); // … and has nothing left to serve
        let firer = {
            let t = trigger.clone();
            thread::spawn(move || t.fire().unwrap())
        };
        let poller = {
            let executor = executor.clone();
            thread::spawn(move || {
                executor.poll_one();
            })
        };
        firer.join().unwrap();
        poller.join().unwrap();
        drain(&h, &executor);
        assert_eq!(starts.get(), 1, "the fire after the suspend was lost");
        assert_eq!(executor.pending(), 0);
    });
}

/// Fires during an `.await` racing `shutdown_now`, which cancels the
/// iteration at its next poll: every accepted fire is served by a run that
/// saw it, or a run is listed — and at most one is.
#[test]
fn fires_during_an_await_racing_shutdown_now_are_run_or_listed() {
    // Bound 3: the double listing the close prevents needs three
    // preemptions.
    run_model_bounded(3, || {
        let h = Arc::new(Harness::new());
        let executor = Executor::default();
        let data = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(AtomicUsize::new(0));
        let (d, s) = (data.clone(), seen.clone());
        let trigger = h.async_trigger(0, &executor, move || {
            let (d, s) = (d.clone(), s.clone());
            async move {
                s.fetch_max(d.load(Ordering::SeqCst), Ordering::SeqCst);
                Yields(1).await;
                None
            }
        });
        trigger.fire().unwrap();
        h.run_all();
        executor.poll_one(); // in flight, pending at its await
        let firer = {
            let (t, data) = (trigger.clone(), data.clone());
            thread::spawn(move || {
                let mut last = 0;
                for k in 1..=2 {
                    data.store(k, Ordering::SeqCst);
                    if t.fire().is_ok() {
                        last = k;
                    }
                }
                last
            })
        };
        let poller = {
            let executor = executor.clone();
            thread::spawn(move || {
                executor.poll_one();
            })
        };
        h.shutdown_now_without_waiting();
        let last = firer.join().unwrap();
        poller.join().unwrap();
        drain(&h, &executor);
        let report = h.scheduler().shutdown_report().unwrap();
        let listed = report.discarded().len();
        assert!(!h.is_armed(&trigger), "an armed request escaped");
        assert!(listed <= 1, "{report:?}");
        // A run that entered before the scan is in flight, and may be
        // cancelled before its future first runs: that run served the
        // fire too (the report says how it ended).
        let cancelled = report
            .in_flight()
            .iter()
            .any(|run| run.outcome() == Outcome::Cancelled);
        if seen.load(Ordering::SeqCst) < last && !cancelled {
            assert_eq!(listed, 1, "fire {last} lost: {report:?}");
        }
    });
}

/// An async iteration re-arming with zero delay, ending on the executor's
/// thread as shutdown begins, and a fire after that end racing the re-run:
/// the ending poll adopts the re-run — marks it due, installs and claims it
/// on the spot, with the same version as the run that just ended, and no
/// lock between its mark and the scan. The scan tells that claim from what
/// the ended iteration leaves behind only by the due mark, read through
/// the request word's release sequence (its Acquire close): if the fire is
/// refused, its advance makes the claim stale, and the re-run is listed —
/// once. (A fire whose advance overtakes the iteration's end, before the
/// scan, supersedes the re-arm before it is ever armed, as a `suspend`
/// would: the scan cannot tell the two apart, and lists nothing.)
#[test]
fn an_adopted_zero_delay_rerun_racing_shutdown_is_run_or_listed() {
    run_model_bounded(3, || {
        let h = Arc::new(Harness::new());
        let executor = Executor::default();
        let runs = Count::default();
        let r = runs.clone();
        let trigger = h.async_trigger(0, &executor, move || {
            let first = r.bump() == 1;
            async move {
                Yields(1).await;
                first.then_some(std::time::Duration::ZERO)
            }
        });
        trigger.fire().unwrap();
        h.run_all();
        executor.poll_one(); // in flight, pending at its await
        let poller = {
            let executor = executor.clone();
            thread::spawn(move || {
                executor.poll_one(); // ends it; adopts and starts the re-run
            })
        };
        let firer = {
            let (t, r) = (trigger.clone(), runs.clone());
            thread::spawn(move || {
                // After the first iteration's end: not running, or the
                // re-run has started.
                while Harness::snapshot(&t).is_running() && r.get() < 2 {
                    thread::yield_now();
                }
                t.fire()
            })
        };
        h.scheduler().shutdown();
        let fired = firer.join().unwrap();
        poller.join().unwrap();
        drain(&h, &executor);
        let report = h.scheduler().shutdown_report().unwrap();
        let (listed, ran) = (report.discarded().len(), runs.get() - 1);
        assert!(!h.is_armed(&trigger), "an armed request escaped the report");
        if fired.is_err() {
            assert_eq!(listed + ran, 1, "ran {ran}, listed {listed}: {report:?}");
        } else {
            assert!(
                (1..=2).contains(&(listed + ran)),
                "ran {ran}, listed {listed}: {report:?}"
            );
        }
    });
}
