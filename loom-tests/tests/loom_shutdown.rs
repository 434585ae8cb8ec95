//! Models of shutdown racing the fire path: a fire is either refused or
//! was accepted before shutdown; nothing runs once shutdown has returned.
#![cfg(loom)]

mod common;

use circulation_trigger::model::Harness;
use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::{report::ShutdownReport, FireError, Outcome, WaitError};
use common::{a_waiter_racing, counted, run_model, run_model_bounded, Count};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

#[test]
fn shutdown_racing_fire_refuses_or_accepts_and_runs_nothing_after() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let runs = Count::default();
        let r = runs.clone();
        let trigger = h.trigger(0, move || {
            r.bump();
            Some(Duration::ZERO)
        });
        let firer = {
            let t = trigger.clone();
            thread::spawn(move || (t.fire(), t.fire_after(Duration::from_micros(5))))
        };
        let worker = spawn_worker(h.clone());
        h.scheduler().shutdown();
        let after_shutdown = runs.get();
        let (now, later) = firer.join().unwrap();
        worker.join().unwrap();
        // Refused fires are refused for good: fire after shutdown errs.
        for result in [now, later] {
            assert!(matches!(result, Ok(()) | Err(FireError::Shutdown)));
        }
        assert_eq!(trigger.fire(), Err(FireError::Shutdown));
        // Nothing new starts after shutdown: the queues are closed.
        h.timer_turn(10);
        assert!(!h.run_one(), "a run was dispatched after shutdown");
        // At most the one run the single worker had already taken from the
        // queue when shutdown began may still start.
        assert!(runs.get() <= after_shutdown + 1, "runs {}", runs.get());
    });
}

/// The report is exact: a fire racing shutdown is refused to its caller,
/// or accepted and then run or listed as discarded — exactly one of them.
#[test]
fn a_fire_racing_shutdown_is_refused_or_listed_never_lost() {
    for delayed in [false, true] {
        run_model(move || {
            let h = Arc::new(Harness::new());
            let runs = Count::default();
            let r = runs.clone();
            let trigger = circulation_trigger::Trigger::builder(h.scheduler())
                .name("raced")
                .bind(move || {
                    r.bump();
                    None
                });
            let firer = {
                let t = trigger.clone();
                thread::spawn(move || {
                    if delayed {
                        t.fire_after(Duration::from_micros(5))
                    } else {
                        t.fire()
                    }
                })
            };
            let worker = {
                let h = h.clone();
                thread::spawn(move || {
                    h.timer_turn(5);
                    h.run_one();
                })
            };
            h.scheduler().shutdown();
            let accepted = firer.join().unwrap().is_ok();
            worker.join().unwrap();
            h.timer_turn(10);
            h.run_all();
            let report = h.scheduler().shutdown_report().unwrap();
            let listed = report.discarded().len();
            let ran = runs.get();
            assert!(!h.is_armed(&trigger), "an armed request escaped the report");
            assert!(listed <= 1 && ran <= 1, "listed {listed}, ran {ran}");
            if accepted {
                assert_eq!(listed + ran, 1, "accepted: ran {ran}, listed {listed}");
            } else {
                assert_eq!(listed + ran, 0, "refused: ran {ran}, listed {listed}");
            }
        });
    }
}

/// A fire accepted before shutdown, whose run a worker has claimed but
/// not yet entered, while a second fire races shutdown: the second one's
/// advance makes the claimed run stale, so if it is then refused its
/// request must stand for the first fire's run (run or listed), never be
/// withdrawn with it — and never be run or listed as well as refused.
#[test]
fn a_refused_fire_never_takes_an_accepted_fires_claimed_run_with_it() {
    // Bound 4: the fire's advance must land between the scan's two looks
    // at the state word.
    run_model_bounded(4, || {
        let h = Arc::new(Harness::new());
        let runs = Count::default();
        let r = runs.clone();
        let trigger = circulation_trigger::Trigger::builder(h.scheduler())
            .name("claimed")
            .bind(move || {
                r.bump();
                None
            });
        trigger.fire().unwrap(); // accepted, queued
                                 // The worker claims it, then enters (or finds it stale).
        let (second, report) = worker_and_fire_racing_shutdown(&h, &trigger, |h| {
            h.run_one();
        });
        let (listed, ran) = (report.discarded().len(), runs.get());
        // The first fire is run or listed, once.
        assert!(listed + ran >= 1, "the accepted fire was lost ({second:?})");
        assert!(
            listed <= 1 && ran <= 2,
            "listed {listed}, ran {ran}, second {second:?}"
        );
        if second.is_err() {
            assert_eq!(listed + ran, 1, "refused, yet ran {ran}, listed {listed}");
        }
    });
}

/// `is_shutdown()` synchronizes with `shutdown()`: what the caller wrote
/// before shutting down is visible to whoever sees the scheduler shut down.
#[test]
fn is_shutdown_sees_what_preceded_shutdown() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let data = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
        let closer = {
            let (h, data) = (h.clone(), data.clone());
            thread::spawn(move || {
                data.store(1, loom::sync::atomic::Ordering::Relaxed);
                h.scheduler().shutdown();
            })
        };
        if h.is_shutdown() {
            assert_eq!(data.load(loom::sync::atomic::Ordering::Relaxed), 1);
        }
        closer.join().unwrap();
    });
}

/// A fire whose trigger is still marked queued when shutdown closes the
/// queue (the queued dispatch was dropped by the close) must still be
/// refused or listed: its install comes before the scan's close of the
/// request word (accepted, and listed with the first) or after it
/// (refused).
#[test]
fn a_fire_coalescing_onto_a_dropped_dispatch_is_refused_or_listed() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let trigger = circulation_trigger::Trigger::builder(h.scheduler())
            .name("queued")
            .bind(|| None);
        trigger.fire().unwrap(); // queued; no worker in this model
        let firer = {
            let t = trigger.clone();
            thread::spawn(move || t.fire())
        };
        h.scheduler().shutdown();
        let second = firer.join().unwrap();
        let report = h.scheduler().shutdown_report().unwrap();
        let listed = report.discarded().len();
        // The first fire was accepted before shutdown: listed. The second is
        // refused, or accepted and coalesced with the first (listed once).
        assert_eq!(listed, 1, "listed {listed}, second {second:?}");
        assert!(!h.run_one(), "nothing dispatched after shutdown");
        // Nothing is left armed and unaccounted for: an accepted second
        // fire was coalesced into the listed run, a refused one installed
        // nothing.
        assert!(!h.is_armed(&trigger), "an armed request escaped the report");
    });
}

/// An iteration that starts after shutdown began is listed in flight, or
/// not started at all (discarded and listed): the worker sees the scan
/// through the scan's RMW on the state word.
#[test]
fn a_run_starting_after_shutdown_began_is_listed() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let (trigger, runs) = counted(&h, 0, None);
        trigger.fire().unwrap();
        let worker = spawn_worker(h.clone());
        h.scheduler().shutdown();
        let before = runs.get();
        worker.join().unwrap();
        let report = h.scheduler().shutdown_report().unwrap();
        if runs.get() > before {
            assert_eq!(report.in_flight().len(), 1, "ran after shutdown, unlisted");
        }
        assert!(
            report.discarded().len() + runs.get() == 1,
            "exactly one of ran / listed"
        );
    });
}

/// A `fire_after` that finds its trigger already in the timer's inbox (an
/// earlier accepted request is armed) racing shutdown: exactly one run is
/// listed — the firer's request is refused or stands for both, never
/// listed beside the earlier one.
#[test]
fn a_second_fire_after_racing_shutdown_lists_exactly_one_run() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let trigger = circulation_trigger::Trigger::builder(h.scheduler())
            .name("raced")
            .bind(|| None);
        trigger.fire_after(Duration::from_micros(50)).unwrap(); // in the inbox
        let firer = {
            let t = trigger.clone();
            thread::spawn(move || t.fire_after(Duration::from_micros(5)))
        };
        h.scheduler().shutdown();
        let _accepted = firer.join().unwrap().is_ok();
        let report = h.scheduler().shutdown_report().unwrap();
        assert!(!h.is_armed(&trigger), "an armed request escaped the report");
        assert_eq!(report.discarded().len(), 1, "{report}");
    });
}

#[test]
fn an_iteration_ending_as_shutdown_begins_is_never_left_still_running() {
    // Without and with a fire during the run (`exit`'s done and re-run arms).
    for refire in [false, true] {
        run_model(move || {
            let h = Arc::new(Harness::new());
            let runs = Count::default();
            let r = runs.clone();
            let t = Arc::new(std::sync::OnceLock::<circulation_trigger::WeakTrigger>::new());
            let me = t.clone();
            let trigger = h.trigger(0, move || {
                if r.bump() == 1 && refire {
                    // Fired while running: RESERVED, so `exit` re-runs.
                    let _ = me.get().unwrap().upgrade().unwrap().fire();
                }
                None
            });
            t.set(trigger.downgrade()).ok().unwrap();
            trigger.fire().unwrap();
            let worker = {
                let h = h.clone();
                thread::spawn(move || {
                    h.run_one();
                })
            };
            h.scheduler().shutdown();
            worker.join().unwrap();
            // The run ended: if the scan listed it in flight, its outcome is
            // recorded, whichever side of the scan its end fell on.
            let report = h.scheduler().shutdown_report().unwrap();
            for run in report.in_flight() {
                assert_eq!(
                    run.outcome(),
                    circulation_trigger::Outcome::Completed,
                    "{report:?}"
                );
            }
            assert!(report.in_flight().len() <= 1);
        });
    }
}

/// Fires during an iteration (the first reserves the re-run, the second
/// coalesces into it) racing shutdown: every accepted fire is served by a
/// run that saw it, or a run is listed — and at most one run is listed.
#[test]
fn fires_during_a_run_racing_shutdown_are_run_or_listed() {
    // Bound 3: the double listing the close prevents needs three
    // preemptions (a second fire after the scan, claimed by the reservation
    // of the first).
    run_model_bounded(3, || fires_racing_shutdown([Op::Fire, Op::Fire], false));
}

/// As above, with a delayed request first and the timer turning.
#[test]
fn delayed_and_plain_fires_racing_shutdown_are_run_or_listed() {
    run_model_bounded(3, || fires_racing_shutdown([Op::FireAfter, Op::Fire], true));
}

/// A fire reserves a re-run of the iteration in flight; a delayed fire
/// after it, refused by shutdown, still advances the version, which
/// cancels the reservation: the ending iteration lists the re-run the
/// accepted fire is owed.
#[test]
fn a_delayed_fire_refused_by_shutdown_never_cancels_a_reserved_rerun() {
    run_model_bounded(3, || fires_racing_shutdown([Op::Fire, Op::FireAfter], true));
}

/// A firer's call.
#[derive(Clone, Copy)]
enum Op {
    Fire,
    FireAfter,
}

/// One trigger whose task records the highest fire number published before
/// it runs; one fire accepted (queued) first. A worker runs twice (turning
/// the timer in between if `timer`), a firer makes `ops` in turn, each
/// publishing its number first, and shutdown races both. Checked: the last
/// accepted fire is served by a run that saw it, or a run is listed; at
/// most one run is listed; nothing armed escapes the report.
fn fires_racing_shutdown(ops: [Op; 2], timer: bool) {
    use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let h = Arc::new(Harness::new());
    let data = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(AtomicUsize::new(0));
    let (d, s) = (data.clone(), seen.clone());
    let trigger = circulation_trigger::Trigger::builder(h.scheduler())
        .name("busy")
        .bind(move || {
            s.fetch_max(d.load(SeqCst), SeqCst);
            None
        });
    trigger.fire().unwrap(); // accepted, queued
    let worker = {
        let h = h.clone();
        thread::spawn(move || {
            h.run_one();
            if timer {
                h.timer_turn(10);
            }
            h.run_one();
        })
    };
    let firer = {
        let (t, data) = (trigger.clone(), data.clone());
        thread::spawn(move || {
            let mut last = 0;
            for (k, op) in (1..).zip(ops) {
                data.store(k, SeqCst);
                let result = match op {
                    Op::Fire => t.fire(),
                    Op::FireAfter => t.fire_after(Duration::from_micros(5)),
                };
                if result.is_ok() {
                    last = k;
                }
            }
            last
        })
    };
    h.scheduler().shutdown();
    let last = firer.join().unwrap();
    worker.join().unwrap();
    h.run_all();
    let report = h.scheduler().shutdown_report().unwrap();
    let listed = report.discarded().len();
    assert!(!h.is_armed(&trigger), "an armed request escaped the report");
    assert!(listed <= 1, "{report:?}");
    if seen.load(SeqCst) < last {
        let seen = seen.load(SeqCst);
        assert_eq!(listed, 1, "fire {last} lost: seen {seen}, {report:?}");
    }
}

/// A fire that returned `Ok` before `shutdown` was called is accounted for
/// in the report `shutdown` leaves — run already, in flight, or listed —
/// even when a worker has claimed its run and a later fire, refused, made
/// that claim stale: the scan lists such a claim itself, rather than leave
/// it to the refused fire, which may get to it only after `shutdown`
/// returned.
#[test]
fn a_fire_accepted_before_shutdown_is_in_the_report_it_leaves() {
    run_model_bounded(3, || {
        use loom::sync::atomic::{AtomicBool, Ordering::SeqCst};
        let h = Arc::new(Harness::new());
        let runs = Count::default();
        let r = runs.clone();
        let trigger = circulation_trigger::Trigger::builder(h.scheduler())
            .name("claimed")
            .bind(move || {
                r.bump();
                None
            });
        let first_done = Arc::new(AtomicBool::new(false));
        let worker = spawn_worker(h.clone());
        let firer = {
            let (t, done) = (trigger.clone(), first_done.clone());
            thread::spawn(move || {
                if t.fire().is_ok() {
                    done.store(true, SeqCst);
                }
                let _ = t.fire();
            })
        };
        let before = first_done.load(SeqCst);
        h.scheduler().shutdown();
        // The scheduler's own threads are waited for (as
        // `await_termination` does); the firer is not.
        worker.join().unwrap();
        let ran = runs.get();
        let report = h.scheduler().shutdown_report().unwrap();
        if before {
            let accounted = ran + report.discarded().len() + report.in_flight().len();
            assert!(accounted >= 1, "an accepted fire is missing: {report:?}");
        }
        firer.join().unwrap();
    });
}

/// A fire accepted before shutdown whose run a worker claims and then
/// defers (the cooldown is not over), while a later fire, refused by
/// shutdown, advances the version: the deferred run is owed to the
/// accepted fire, and is listed — once.
#[test]
fn a_deferred_run_racing_shutdown_is_listed_once() {
    // Bound 3: the refused fire's advance lands between the worker's
    // claim and its `enter`'s deferral.
    run_model_bounded(3, || {
        let h = Arc::new(Harness::new());
        let runs = Count::default();
        let r = runs.clone();
        let trigger = circulation_trigger::Trigger::builder(h.scheduler())
            .name("cooled")
            .policies(TriggerPolicies::new().min_interval(Duration::from_micros(50)))
            .bind(move || {
                r.bump();
                None
            });
        trigger.fire().unwrap();
        h.run_one(); // the first run, at time 0: the cooldown runs to 50 µs
        trigger.fire().unwrap(); // accepted, queued
                                 // The worker claims it, enters, and defers it (or finds it stale).
        let (second, report) = worker_and_fire_racing_shutdown(&h, &trigger, |h| {
            h.run_one();
        });
        let (listed, ran) = (report.discarded().len(), runs.get() - 1);
        assert_eq!(ran, 0, "the cooldown holds");
        assert_eq!(listed, 1, "second {second:?}: {report:?}");
        // Due at once if its claim never entered; at the cooldown's end if
        // it was deferred (before the scan, or while the scan looked).
        let due_in = report.discarded()[0].due_in();
        assert!(
            [Duration::ZERO, Duration::from_micros(50)].contains(&due_in),
            "{report:?}"
        );
    });
}

/// A periodic trigger's re-armed run, found due by the timer and claimed
/// by a worker, while a fire races shutdown: the re-arm keeps the version
/// the last run started with, so only the run's due mark tells the scan a
/// fresh claim from what an ended iteration leaves behind. If the fire is
/// refused, its advance makes the claim stale (maybe before shutdown even
/// began), and nobody but the scan can list the run: the periodic run is
/// run or listed, once. The timer turns on the worker's thread, so the
/// scan reads the due mark only through the request word (its Acquire
/// close).
#[test]
fn a_periodic_run_claimed_as_a_refused_fire_races_shutdown_is_run_or_listed() {
    periodic_claim_racing_shutdown(Duration::from_micros(10));
}

/// The same for a zero-delay re-arm, which the ending iteration queues at
/// once, marked due as the timer would.
#[test]
fn a_zero_delay_rerun_claimed_as_a_refused_fire_races_shutdown_is_run_or_listed() {
    periodic_claim_racing_shutdown(Duration::ZERO);
}

fn periodic_claim_racing_shutdown(period: Duration) {
    run_model_bounded(3, move || {
        let h = Arc::new(Harness::new());
        let runs = Count::default();
        let r = runs.clone();
        let trigger = circulation_trigger::Trigger::builder(h.scheduler())
            .name("periodic")
            .bind(move || (r.bump() == 1).then_some(period));
        trigger.fire().unwrap();
        h.run_one(); // the first run re-arms, keeping its version
        let (fired, report) = worker_and_fire_racing_shutdown(&h, &trigger, move |h| {
            if !period.is_zero() {
                h.timer_turn(10); // due: marked and queued (or discarded)
            }
            h.run_one(); // claims it, then enters (or finds it stale)
        });
        let (listed, ran) = (report.discarded().len(), runs.get() - 1);
        match fired {
            // Refused: the periodic run alone is owed.
            Err(_) => assert_eq!(listed + ran, 1, "ran {ran}, listed {listed}: {report:?}"),
            // Accepted: its run too, unless it superseded the periodic one.
            Ok(()) => assert!(
                (1..=2).contains(&(listed + ran)) && listed <= 1,
                "ran {ran}, listed {listed}: {report:?}"
            ),
        }
    });
}

/// A periodic run in flight at shutdown, while a fire races it: if the
/// scan found the run in flight and the fire was refused, the run's next
/// one is listed — whether the refused fire's advance landed before the
/// run's end (the end then finds a newer version live, and lists its own
/// next run under the scan's mark on its claim) or after it (its re-arm
/// is refused, and listed). Either way it is listed with the deadline its
/// re-arm would have armed: the run ends at 370 µs and asks for 2 s, which
/// the re-arm rounds up onto the 2 ms coalescing grid (2.002 s).
#[test]
fn a_periodic_run_in_flight_at_shutdown_has_its_next_run_listed_past_a_refused_fire() {
    run_model_bounded(3, || {
        let h = Arc::new(Harness::new());
        h.set_time(370);
        let runs = Count::default();
        let r = runs.clone();
        let trigger = circulation_trigger::Trigger::builder(h.scheduler())
            .name("periodic")
            .bind(move || (r.bump() == 1).then_some(Duration::from_secs(2)));
        trigger.fire().unwrap();
        let (fired, report) = worker_and_fire_racing_shutdown(&h, &trigger, |h| {
            h.run_one();
        });
        let listed = report.discarded().len();
        assert!(listed <= 1, "{report:?}");
        if fired.is_err() && !report.in_flight().is_empty() {
            assert_eq!(listed, 1, "the run's next run is missing: {report:?}");
            assert_eq!(
                report.discarded()[0].due_in(),
                Duration::from_micros(2_002_000 - 370),
                "not the deadline the re-arm would have armed: {report:?}"
            );
        }
    });
}

/// `resume` racing a fire and shutdown: a fire accepted after the resume's
/// install (and before the scan's close) is run or listed, once — the
/// resume never takes its own request back over it when it then finds the
/// scheduler shut down.
#[test]
fn a_resume_racing_shutdown_never_takes_an_accepted_fire_with_it() {
    run_model_bounded(3, || {
        let h = Arc::new(Harness::new());
        let runs = Count::default();
        let r = runs.clone();
        let trigger = circulation_trigger::Trigger::builder(h.scheduler())
            .name("switched")
            .bind(move || {
                r.bump();
                None
            });
        trigger.pause();
        let resumer = {
            let t = trigger.clone();
            thread::spawn(move || {
                let _ = t.resume();
            })
        };
        let firer = {
            let t = trigger.clone();
            thread::spawn(move || t.fire())
        };
        h.scheduler().shutdown();
        let fired = firer.join().unwrap();
        resumer.join().unwrap();
        h.run_all();
        let report = h.scheduler().shutdown_report().unwrap();
        let (listed, ran) = (report.discarded().len(), runs.get());
        assert!(!h.is_armed(&trigger), "an armed request escaped the report");
        assert!(listed + ran <= 1, "ran {ran}, listed {listed}: {report:?}");
        if fired.is_ok() {
            assert_eq!(listed + ran, 1, "the accepted fire was lost: {report:?}");
        }
    });
}

/// The shape several models share: a worker thread (`worker`, playing the
/// scheduler's side) and a thread firing `trigger` once race `shutdown` on
/// the model's thread; then the queue is drained, and the fire's result
/// and the report returned. Asserts that nothing armed escaped the report.
fn worker_and_fire_racing_shutdown(
    h: &Arc<Harness>,
    trigger: &circulation_trigger::Trigger,
    worker: impl FnOnce(&Harness) + Send + 'static,
) -> (Result<(), FireError>, ShutdownReport) {
    let worker = {
        let h = h.clone();
        thread::spawn(move || worker(&h))
    };
    let firer = {
        let t = trigger.clone();
        thread::spawn(move || t.fire())
    };
    h.scheduler().shutdown();
    let fired = firer.join().unwrap();
    worker.join().unwrap();
    h.run_all();
    let report = h.scheduler().shutdown_report().unwrap();
    assert!(!h.is_armed(trigger), "an armed request escaped the report");
    (fired, report)
}

/// A claim a worker took while another worker's iteration ran, and that
/// enters only after that iteration's `exit` — with shutdown's scan in
/// between: the scan lists the running iteration in flight, and the late
/// claim must not be admitted in its place (it is discarded and listed,
/// as any run not started at shutdown). The first run makes its own
/// second one due (a `fire_after` and a timer turn) for a second worker to
/// take; the second run, on the second worker, holds until the model has
/// read the report once the first worker is done, so an in-flight entry
/// for it still reads `StillRunning` then — if it started at all, it was
/// in flight at the scan or it must not have run.
#[test]
fn a_claim_entering_after_the_iteration_in_flight_ends_is_not_admitted_in_its_place() {
    run_model_bounded(3, || {
        let h = std::sync::Arc::new(Harness::new());
        let own = std::sync::Arc::new(std::sync::OnceLock::new());
        let (started, release) = (Flag::default(), Flag::default());
        let second_worker = std::sync::Arc::new(std::sync::OnceLock::new());
        let trigger = {
            let (weak_h, own) = (std::sync::Arc::downgrade(&h), own.clone());
            let (runs, started, release) = (Count::default(), started.clone(), release.clone());
            let second_worker = second_worker.clone();
            circulation_trigger::Trigger::builder(h.scheduler())
                .name("t")
                .bind(move || {
                    if runs.bump() == 1 {
                        let own: &circulation_trigger::WeakTrigger = own.get().unwrap();
                        let _ = own.upgrade().unwrap().fire_after(Duration::from_micros(1));
                        weak_h.upgrade().unwrap().timer_turn(10);
                    } else if second_worker.get() == Some(&thread::current().id()) {
                        started.set();
                        while !release.get() {
                            thread::yield_now();
                        }
                    }
                    None
                })
        };
        own.set(trigger.downgrade()).unwrap();
        trigger.fire().unwrap();
        let first = spawn_worker(h.clone());
        let second = {
            let (h, second_worker) = (h.clone(), second_worker.clone());
            thread::spawn(move || {
                second_worker.set(thread::current().id()).unwrap();
                h.run_one();
            })
        };
        h.scheduler().shutdown();
        first.join().unwrap();
        let report = h.scheduler().shutdown_report().unwrap();
        if started.get() {
            assert!(
                report
                    .in_flight()
                    .iter()
                    .any(|run| run.outcome() == Outcome::StillRunning),
                "a run started after the one in flight: {report:?}"
            );
        }
        release.set();
        second.join().unwrap();
        h.run_all();
        let report = h.scheduler().shutdown_report().unwrap();
        assert!(report.in_flight().len() <= 1, "{report:?}");
    });
}

/// A periodic run that suspends its own trigger while shutdown scans: the
/// suspend cancels the next run the iteration asks for (G6), whatever the
/// order of the suspend's advance, its install (refused once the scan
/// closed the word) and the scan's own advance past the iteration in
/// flight — so the report never lists that next run (10 µs on). It lists
/// the fire's own run (due at once) if that had not started.
#[test]
fn a_periodic_run_suspending_itself_as_shutdown_scans_has_no_next_run_listed() {
    run_model_bounded(3, || {
        let h = Arc::new(Harness::new());
        let own = std::sync::Arc::new(std::sync::OnceLock::new());
        let trigger = {
            let own = own.clone();
            circulation_trigger::Trigger::builder(h.scheduler())
                .name("self-suspending")
                .bind(move || {
                    let own: &circulation_trigger::WeakTrigger = own.get().unwrap();
                    own.upgrade().unwrap().suspend();
                    Some(Duration::from_micros(10))
                })
        };
        own.set(trigger.downgrade()).unwrap();
        trigger.fire().unwrap();
        let worker = spawn_worker(h.clone());
        h.scheduler().shutdown();
        worker.join().unwrap();
        h.run_all();
        let report = h.scheduler().shutdown_report().unwrap();
        assert!(report.discarded().len() <= 1, "{report:?}");
        for run in report.discarded() {
            assert_eq!(
                run.due_in(),
                Duration::ZERO,
                "a suspended next run: {report:?}"
            );
        }
        if !report.in_flight().is_empty() {
            assert!(report.discarded().is_empty(), "{report:?}");
        }
    });
}

/// `fire_and_wait` whose run a worker is entering as shutdown begins: a
/// run that entered before the scan finishes (it is in flight at
/// shutdown) and serves the fire. So the waiter — looking at any point of
/// the race, and once after — is told "shut down" only if no run served
/// it, and in the end gets the run's outcome or "shut down".
#[test]
fn a_waiter_is_told_shutdown_only_if_no_run_serves_it() {
    run_model(|| a_waiter_racing(WaitError::Shutdown, |h, _| h.scheduler().shutdown()));
}

/// A model thread that plays a worker for one run.
fn spawn_worker<H>(h: H) -> thread::JoinHandle<()>
where
    H: std::ops::Deref<Target = Harness> + Send + 'static,
{
    thread::spawn(move || {
        h.run_one();
    })
}

/// A flag between the model's threads.
#[derive(Clone, Default)]
struct Flag(Arc<loom::sync::atomic::AtomicBool>);

impl Flag {
    fn set(&self) {
        // SeqCst: test bookkeeping only.
        self.0.store(true, loom::sync::atomic::Ordering::SeqCst);
    }

    fn get(&self) -> bool {
        self.0.load(loom::sync::atomic::Ordering::SeqCst)
    }
}
