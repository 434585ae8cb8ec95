//! Models of G17, pause is a mode, on the crate's real code: `pause`
//! against fires, a run already claimed, the exit step's re-run and re-arm,
//! a delayed request and `suspend`; `resume` against a fire that began
//! before the pause (the one that can make a resume's request stale).
#![cfg(loom)]

mod common;

use circulation_trigger::model::Harness;
use circulation_trigger::{FireError, Trigger, WaitError};
use common::{a_waiter_racing, counted, run_model, run_model_bounded, Count};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

/// Versions to start from: 0, and just below the 30-bit wrap (G12).
const STARTS: [u32; 2] = [0, (1 << 30) - 1];

/// A thread that pauses `trigger`, then reports whether an iteration was
/// in flight and how many runs had counted themselves. Snapshot first: an
/// iteration seen idle has already counted itself (its exit Release
/// precedes the snapshot's Acquire).
fn pauser(trigger: &Trigger, runs: &Count) -> thread::JoinHandle<(usize, usize)> {
    let (t, runs) = (trigger.clone(), runs.clone());
    thread::spawn(move || {
        t.pause();
        let in_flight = usize::from(Harness::snapshot(&t).is_running());
        (in_flight, runs.get())
    })
}

/// A fire is accepted, or refused because the trigger is paused.
fn accepted(fired: Result<(), FireError>) -> bool {
    match fired {
        Ok(()) => true,
        Err(FireError::Paused) => false,
        Err(other) => panic!("{other}"),
    }
}

/// Runs started after `pause` returned: none. A worker claims and enters
/// runs while a user fires and another thread fires then pauses; a run
/// claimed before the pause (TAKEN) must find its version stale.
#[test]
fn g17_fires_racing_pause_start_nothing_after_it() {
    for start in STARTS {
        run_model(move || {
            let h = Arc::new(Harness::new());
            let (trigger, runs) = counted(&h, start, None);
            trigger.fire().unwrap();
            let worker = {
                let h = h.clone();
                thread::spawn(move || {
                    h.run_one();
                    h.run_one();
                })
            };
            let firer = {
                let t = trigger.clone();
                thread::spawn(move || accepted(t.fire()))
            };
            let (in_flight, at_pause) = pauser(&trigger, &runs).join().unwrap();
            firer.join().unwrap();
            worker.join().unwrap();
            h.run_all();
            assert!(
                runs.get() <= at_pause + in_flight,
                "a run started after pause: runs {}, at pause {at_pause}, in flight {in_flight}",
                runs.get()
            );
            assert_eq!(trigger.fire(), Err(FireError::Paused));
            assert!(!h.is_armed(&trigger));
        });
    }
}

/// The exit step racing `pause`: a task that circulates at once (re-run)
/// or later (re-arm) stops; `resume` then re-arms the delay it returned.
#[test]
fn g17_pause_racing_the_exit_step_stops_re_runs_and_re_arms() {
    for delay_us in [0, 10] {
        run_model_bounded(3, move || {
            let h = Arc::new(Harness::new());
            let (trigger, runs) = counted(&h, 0, Some(Duration::from_micros(delay_us)));
            trigger.fire().unwrap();
            let worker = {
                let h = h.clone();
                thread::spawn(move || {
                    h.run_one();
                    h.run_one();
                })
            };
            let (in_flight, at_pause) = pauser(&trigger, &runs).join().unwrap();
            worker.join().unwrap();
            h.run_all();
            h.timer_turn(1_000);
            h.run_all();
            let paused_runs = runs.get();
            assert!(
                paused_runs <= at_pause + in_flight,
                "a run started after pause: runs {paused_runs}, at pause {at_pause}, in flight {in_flight}"
            );
            // Back on the schedule the last run asked for, if one ran.
            assert!(trigger.resume().unwrap());
            // One run each way (a zero delay re-runs for ever: no run_all).
            h.run_one();
            h.timer_turn(2_000);
            if delay_us > 0 {
                h.run_one();
            }
            assert_eq!(runs.get(), paused_runs + usize::from(paused_runs > 0));
        });
    }
}

/// A delayed request racing `pause` never runs: it is replaced by the
/// pause, or refused by it.
#[test]
fn g17_a_delayed_request_racing_pause_never_runs() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let (trigger, runs) = counted(&h, 0, None);
        let firer = {
            let t = trigger.clone();
            thread::spawn(move || match t.fire_after(Duration::from_micros(10)) {
                Ok(()) | Err(FireError::Paused) => {}
                Err(other) => panic!("{other}"),
            })
        };
        let pauser = {
            let t = trigger.clone();
            thread::spawn(move || t.pause())
        };
        pauser.join().unwrap();
        firer.join().unwrap();
        h.timer_turn(100);
        h.run_all();
        assert_eq!(runs.get(), 0);
        assert!(!h.is_armed(&trigger));
    });
}

/// `resume` racing a fire that began before the pause: the fire is
/// refused, or cancelled by the pause, or served after the resume; the
/// resume's own schedule is never left stale (its request installed for
/// a version a refused fire moved past), so a run always follows.
#[test]
fn g17_a_resume_racing_a_fire_that_began_before_the_pause_loses_neither() {
    for start in STARTS {
        run_model_bounded(3, move || {
            let h = Arc::new(Harness::new());
            let (trigger, runs) = counted(&h, start, None);
            let firer = {
                let t = trigger.clone();
                thread::spawn(move || accepted(t.fire()))
            };
            let switch = {
                let t = trigger.clone();
                thread::spawn(move || {
                    t.pause();
                    assert!(t.resume_after(Duration::from_micros(10)).unwrap());
                })
            };
            switch.join().unwrap();
            firer.join().unwrap();
            h.run_all();
            h.timer_turn(100);
            h.run_all();
            assert!(runs.get() >= 1, "the resume's run was lost");
            assert!(!Harness::is_paused(&trigger));
        });
    }
}

/// `suspend` racing `pause`: the pause holds whatever their order, and a
/// resume then runs.
#[test]
fn g17_suspend_racing_pause_leaves_it_paused() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let (trigger, runs) = counted(&h, 0, None);
        trigger.fire_after(Duration::from_micros(10)).unwrap();
        let suspender = {
            let t = trigger.clone();
            thread::spawn(move || t.suspend())
        };
        let pauser = {
            let t = trigger.clone();
            thread::spawn(move || t.pause())
        };
        pauser.join().unwrap();
        suspender.join().unwrap();
        assert!(Harness::is_paused(&trigger));
        assert_eq!(trigger.fire(), Err(FireError::Paused));
        h.timer_turn(100);
        h.run_all();
        assert_eq!(runs.get(), 0);
        assert!(trigger.resume_after(Duration::ZERO).unwrap());
        h.run_all();
        assert_eq!(runs.get(), 1);
    });
}

/// `suspend` racing `pause` on a trigger with a schedule, then a resume
/// onto that schedule: the suspend holds whatever their order (G6) — it
/// came first, met the pause between its advance and its install, or came
/// after it — so nothing runs until the next fire.
#[test]
fn g6_a_suspend_racing_pause_outlives_the_resume() {
    a_suspend_racing(|trigger, suspender| {
        let pauser = {
            let t = trigger.clone();
            thread::spawn(move || t.pause())
        };
        pauser.join().unwrap();
        suspender.join().unwrap();
        assert!(Harness::is_paused(trigger));
        assert!(trigger.resume().unwrap());
    });
}

/// `suspend` racing a whole `pause` and `resume` on a trigger with a
/// schedule: the suspend holds whatever the order (G6) — before the pause,
/// during it, after the resume, or advanced before the resume and
/// installed after it, when the resume's request refuses its install as
/// newer (the suspend then tells by the resume's version that it must
/// suspend again) — so nothing runs until the next fire.
#[test]
fn g6_a_suspend_overlapping_a_pause_and_resume_outlives_them() {
    a_suspend_racing(|trigger, suspender| {
        trigger.pause();
        assert!(trigger.resume().unwrap());
        suspender.join().unwrap();
    });
}

/// The G6 suspend models: a trigger that ran once (its schedule: a run
/// 10 µs on) is suspended on a thread of its own while `pause_and_resume`
/// pauses and resumes it (and joins the suspender); after both, nothing
/// runs until the next fire.
fn a_suspend_racing(pause_and_resume: fn(&Trigger, thread::JoinHandle<()>)) {
    run_model(move || {
        let h = Arc::new(Harness::new());
        let (trigger, runs) = counted(&h, 0, Some(Duration::from_micros(10)));
        trigger.fire().unwrap();
        h.run_one(); // ran once: its schedule is a run 10 µs on
        let suspender = {
            let t = trigger.clone();
            thread::spawn(move || t.suspend())
        };
        pause_and_resume(&trigger, suspender);
        h.timer_turn(1_000);
        h.run_all();
        assert_eq!(runs.get(), 1, "the resume restarted a suspended trigger");
        trigger.fire().unwrap();
        h.run_all();
        assert_eq!(runs.get(), 2);
    });
}

/// `fire_and_wait` racing a pause and a resume onto an idle schedule: an
/// accepted fire is answered — served, or told "suspended" — never left
/// waiting. The fire that passed its paused check before the pause,
/// advanced after the pause's advance and installed after the resume is
/// refused as older and returns `Ok`; only the resume can tell its waiter.
#[test]
fn g17_a_waiter_whose_fire_a_pause_and_resume_cancel_is_told() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let (trigger, runs) = counted(&h, 0, None);
        let waiter = {
            let t = trigger.clone();
            thread::spawn(move || Harness::fire_for_wait(&t))
        };
        trigger.pause();
        assert!(trigger.resume().unwrap());
        let fired = waiter.join().unwrap();
        h.run_all();
        if let Ok(fired) = fired {
            let answer = Harness::wait_now(&trigger, fired);
            assert_ne!(answer, Err(WaitError::Timeout), "ran {}", runs.get());
            assert_eq!(answer.is_ok(), runs.get() == 1, "{answer:?}");
        }
    });
}

/// `fire_and_wait` whose run a worker is entering as a `suspend` (or a
/// `pause`) comes: one after the run's `enter` lets it finish (G6, G17),
/// and the run serves the fire. So the waiter — looking at any point of
/// the race, and once after — is told "suspended" only if no run served
/// it, and in the end gets the run's outcome or "suspended".
#[test]
fn a_waiter_is_told_suspended_only_if_no_run_serves_it() {
    run_model(|| a_waiter_racing(WaitError::Suspended, |_, t| t.suspend()));
    run_model(|| a_waiter_racing(WaitError::Suspended, |_, t| t.pause()));
}

/// `pause` racing `resume`: they serialize (the pause lock), so the trigger
/// ends paused (the resume came first and found nothing to do, or the
/// pause came last) or resumed with its schedule live — never resumed
/// with a request the pause's advance made stale.
#[test]
fn g17_pause_racing_resume_ends_paused_or_on_schedule() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let (trigger, runs) = counted(&h, 0, None);
        let pauser = {
            let t = trigger.clone();
            thread::spawn(move || t.pause())
        };
        // Finds the pause (then resumes it) or comes first (nothing to do).
        let resumer = {
            let t = trigger.clone();
            thread::spawn(move || t.resume_after(Duration::from_micros(10)).unwrap())
        };
        pauser.join().unwrap();
        let resumed = resumer.join().unwrap();
        h.timer_turn(100);
        h.run_all();
        if Harness::is_paused(&trigger) {
            assert!(!resumed || runs.get() == 0);
            assert_eq!(runs.get(), 0);
        } else {
            assert!(resumed);
            assert_eq!(runs.get(), 1, "resumed, but its run was lost");
        }
    });
}

/// `resume` while the iteration that began before the pause is still in
/// flight: that iteration's returned delay is the schedule — whether it
/// ends before the resume looks, between its look and its install, or
/// after — and exactly one of the two settles it.
#[test]
fn g17_a_resume_during_the_iteration_in_flight_adopts_its_delay() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let (trigger, runs) = counted(&h, 0, Some(Duration::from_micros(10)));
        trigger.fire().unwrap();
        let worker = {
            let h = h.clone();
            thread::spawn(move || {
                h.run_one();
            })
        };
        let switch = {
            let t = trigger.clone();
            thread::spawn(move || {
                t.pause();
                assert!(t.resume().unwrap());
            })
        };
        switch.join().unwrap();
        worker.join().unwrap();
        h.run_all();
        let before = runs.get();
        h.timer_turn(100);
        h.run_all();
        // Ran before the pause took it: back on its 10 µs schedule, one
        // more run. Never ran: nothing to resume.
        assert_eq!(
            runs.get(),
            before + usize::from(before > 0),
            "runs {before}"
        );
        assert!(!Harness::is_paused(&trigger));
    });
}
