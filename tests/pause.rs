//! G17, pause is a mode: after `pause()` returns nothing starts until
//! `resume()`, whatever fires arrive; `resume()` brings the schedule back.
//! Deterministic cases on virtual time; one real-thread case where fires
//! and pause/resume race, checked whatever the interleaving.

mod common;

use circulation_trigger::{
    report::TriggerState, testing::VirtualScheduler, FireError, Scheduler, Trigger, WaitError,
};
use common::{Counter, Gate, PATIENCE};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

const PERIOD: Duration = Duration::from_secs(30);

/// A trigger that counts its runs and asks for the next one `PERIOD` later.
fn periodic(sim: &VirtualScheduler) -> (Trigger, Counter) {
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(sim, move || {
        r.bump();
        Some(PERIOD)
    });
    (trigger, runs)
}

/// A trigger whose task gets its own handle and its run's number (from
/// 1), and returns what `task` returns; and its run counter.
fn self_aware(
    sim: &VirtualScheduler,
    mut task: impl FnMut(&Trigger, usize) -> Option<Duration> + Send + 'static,
) -> (Trigger, Counter) {
    let runs = Counter::default();
    let slot: Arc<std::sync::OnceLock<circulation_trigger::WeakTrigger>> = Arc::default();
    let (r, s) = (runs.clone(), slot.clone());
    let trigger = Trigger::bind(sim, move || {
        let n = r.bump();
        task(&s.get().unwrap().upgrade().unwrap(), n)
    });
    slot.set(trigger.downgrade()).unwrap();
    (trigger, runs)
}

#[test]
fn a_burst_of_fires_while_paused_runs_nothing_and_resume_brings_back_the_schedule() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = periodic(&sim);
    trigger.fire().unwrap();
    sim.advance(Duration::from_secs(1));
    assert_eq!(runs.get(), 1);

    trigger.pause();
    assert!(trigger.stats().paused);
    assert_eq!(trigger.stats().state, TriggerState::Paused);
    for _ in 0..1_000 {
        assert_eq!(trigger.fire(), Err(FireError::Paused));
    }
    assert_eq!(
        trigger.fire_after(Duration::from_secs(1)),
        Err(FireError::Paused)
    );
    assert_eq!(
        trigger.fire_within(Duration::from_secs(1)),
        Err(FireError::Paused)
    );
    assert_eq!(
        trigger.fire_at_elapsed(sim.now() + Duration::from_secs(1)),
        Err(FireError::Paused)
    );
    // The armed period (due at 30 s) passes, and many more.
    sim.advance(Duration::from_secs(600));
    assert_eq!(runs.get(), 1, "nothing runs while paused");
    assert_eq!(sim.next_deadline(), None, "nothing is armed while paused");

    // Back on the schedule: the delay the last run returned, from now.
    let resumed_at = sim.now();
    assert_eq!(trigger.resume(), Ok(true));
    assert!(!trigger.stats().paused);
    assert_eq!(sim.next_deadline(), Some(resumed_at + PERIOD));
    sim.advance(PERIOD - Duration::from_micros(1));
    assert_eq!(runs.get(), 1, "never early");
    sim.advance(Duration::from_micros(1));
    assert_eq!(runs.get(), 2);
    sim.advance(PERIOD * 3);
    assert_eq!(runs.get(), 5, "and it keeps circulating");
    // Refused fires are not counted as fires.
    let stats = trigger.stats();
    assert_eq!(stats.iterations, 5);
    assert_eq!(stats.fires, 1);
}

#[test]
fn a_pause_during_a_run_keeps_that_run_and_remembers_its_delay() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = self_aware(&sim, |me, n| {
        // The first run pauses its own trigger, then asks for 10 s.
        if n == 1 {
            me.pause();
        }
        Some(Duration::from_secs(10))
    });
    trigger.fire().unwrap();
    sim.advance(Duration::from_secs(100));
    assert_eq!(runs.get(), 1, "the returned delay was not armed");
    assert!(trigger.stats().paused);
    assert!(trigger.resume().unwrap());
    sim.advance(Duration::from_secs(10));
    assert_eq!(runs.get(), 2, "resume re-armed the remembered 10 s");
}

#[test]
fn resume_after_takes_a_delay_of_its_own() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = periodic(&sim);
    trigger.pause();
    // Never ran: `resume` has no schedule to bring back.
    assert_eq!(trigger.resume(), Ok(true));
    sim.advance(PERIOD * 4);
    assert_eq!(runs.get(), 0, "a trigger that never ran stays idle");

    trigger.pause();
    assert_eq!(trigger.resume_after(Duration::ZERO), Ok(true));
    sim.advance(Duration::ZERO);
    assert_eq!(runs.get(), 1, "ZERO runs at once");

    trigger.pause();
    let before = sim.now();
    assert_eq!(trigger.resume_after(Duration::from_secs(5)), Ok(true));
    assert_eq!(sim.next_deadline(), Some(before + Duration::from_secs(5)));
    sim.advance(Duration::from_secs(5));
    assert_eq!(runs.get(), 2);
}

#[test]
fn bad_inputs_leave_the_trigger_paused_and_repeated_calls_change_nothing() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = periodic(&sim);
    // Not paused: resume changes nothing.
    trigger.fire_after(Duration::from_secs(3)).unwrap();
    assert_eq!(trigger.resume(), Ok(false));
    assert_eq!(trigger.resume_after(Duration::ZERO), Ok(false));
    sim.advance(Duration::from_secs(2));
    assert_eq!(runs.get(), 0, "the armed run was not moved");

    trigger.pause();
    trigger.pause(); // idempotent
    assert_eq!(
        trigger.resume_after(Duration::MAX),
        Err(FireError::DelayTooLong(Duration::MAX))
    );
    assert!(trigger.stats().paused, "a refused resume leaves it paused");
    sim.advance(Duration::from_secs(60));
    assert_eq!(runs.get(), 0);
    assert_eq!(trigger.resume(), Ok(true));
    assert_eq!(trigger.resume(), Ok(false));
}

#[test]
fn a_task_that_returned_a_delay_past_the_clock_resumes_idle() {
    let sim = Scheduler::builder().build_virtual();
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&sim, move || {
        r.bump();
        Some(Duration::MAX)
    });
    trigger.fire().unwrap();
    sim.advance(Duration::ZERO);
    trigger.pause();
    assert_eq!(trigger.resume(), Ok(true));
    assert!(!trigger.stats().paused);
    assert_eq!(sim.next_deadline(), None);
    trigger.fire().unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(runs.get(), 2);
}

#[test]
fn suspend_is_not_a_mode_pause_is() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = periodic(&sim);
    trigger.fire().unwrap();
    sim.advance(Duration::ZERO);
    trigger.suspend();
    trigger.fire().unwrap(); // the next fire starts it again
    sim.advance(Duration::ZERO);
    assert_eq!(runs.get(), 2);

    trigger.pause();
    trigger.suspend(); // changes nothing: still paused
    assert!(trigger.stats().paused);
    assert_eq!(trigger.fire(), Err(FireError::Paused));
    sim.advance(PERIOD * 2);
    assert_eq!(runs.get(), 2);
}

#[test]
fn fire_and_wait_on_a_paused_trigger_is_refused_and_a_waiter_is_released_by_pause() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let gate = Gate::default();
    let g = gate.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        g.wait();
        None
    });
    trigger.pause();
    assert_eq!(trigger.fire_and_wait(PATIENCE), Err(WaitError::Paused));
    trigger.resume().unwrap();

    // A run in flight holds the worker; a waiter's fire queues behind it;
    // a pause cancels that fire and releases the waiter.
    trigger.fire().unwrap();
    common::eventually("the first run starts", || {
        trigger.stats().state == TriggerState::Running
    });
    let waiter = {
        let trigger = trigger.clone();
        thread::spawn(move || trigger.fire_and_wait(PATIENCE))
    };
    common::eventually("the waiter's fire is reserved", || {
        trigger.stats().state == TriggerState::RunningWithRerun
    });
    trigger.pause();
    assert_eq!(waiter.join().unwrap(), Err(WaitError::Suspended));
    gate.open();
    scheduler.shutdown();
    assert!(scheduler.await_termination(PATIENCE));
    assert_eq!(trigger.stats().iterations, 1);
}

#[test]
fn after_shutdown_pause_works_and_resume_is_refused() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, _runs) = periodic(&sim);
    let (later, _later_runs) = periodic(&sim);
    trigger.pause();
    sim.shutdown();
    trigger.pause();
    assert_eq!(trigger.resume(), Err(FireError::Shutdown));
    assert!(trigger.stats().paused);
    // Paused first after shutdown: it says so too, and stays refused.
    assert!(!later.stats().paused);
    later.pause();
    assert!(later.stats().paused);
    assert_eq!(later.resume(), Err(FireError::Shutdown));
    assert_eq!(later.fire(), Err(FireError::Shutdown));
    // A paused trigger has nothing armed to report.
    assert!(sim.shutdown_report().unwrap().discarded().is_empty());
}

/// Firers hammer a trigger while a switch thread pauses and resumes it.
/// Whatever the interleaving: no run starts while the switch holds it
/// paused (from `pause()` returning to `resume()` being called), runs
/// never overlap, and after the last resume a fire is served.
#[test]
fn fires_racing_pause_and_resume_never_run_while_paused() {
    let scheduler = Scheduler::builder().workers(2).build().unwrap();
    let held = Arc::new(AtomicBool::new(false));
    let (violations, running, runs) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Counter::default(),
    );
    let trigger = {
        let (held, violations, running, runs) = (
            held.clone(),
            violations.clone(),
            running.clone(),
            runs.clone(),
        );
        Trigger::bind(&scheduler, move || {
            if held.load(Ordering::SeqCst) {
                violations.fetch_add(1, Ordering::SeqCst);
            }
            if running.fetch_add(1, Ordering::SeqCst) != 0 {
                violations.fetch_add(1, Ordering::SeqCst); // an overlap
            }
            runs.bump();
            thread::yield_now();
            running.fetch_sub(1, Ordering::SeqCst);
            Some(Duration::from_micros(50))
        })
    };
    let rounds = 300;
    let go = Arc::new(Barrier::new(3));
    let stop = Arc::new(AtomicBool::new(false));
    let firers: Vec<_> = (0..2)
        .map(|i| {
            let (trigger, go, stop) = (trigger.clone(), go.clone(), stop.clone());
            thread::spawn(move || {
                go.wait();
                let (mut accepted, mut refused) = (0u64, 0u64);
                let deadline = Instant::now() + PATIENCE;
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                    let fired = if i == 0 {
                        trigger.fire()
                    } else {
                        trigger.fire_after(Duration::from_micros(20))
                    };
                    match fired {
                        Ok(()) => accepted += 1,
                        Err(FireError::Paused) => refused += 1,
                        Err(other) => panic!("{other}"),
                    }
                }
                (accepted, refused)
            })
        })
        .collect();
    go.wait();
    for round in 0..rounds {
        trigger.pause();
        // A run already in flight at the pause may finish; once it has,
        // none may start.
        common::eventually("the run in flight ends", || {
            !matches!(
                trigger.stats().state,
                TriggerState::Running | TriggerState::RunningWithRerun
            )
        });
        held.store(true, Ordering::SeqCst);
        if round % 3 == 0 {
            thread::sleep(Duration::from_micros(200));
        }
        held.store(false, Ordering::SeqCst);
        match round % 3 {
            0 => trigger.resume().unwrap(),
            1 => trigger.resume_after(Duration::ZERO).unwrap(),
            _ => trigger.resume_after(Duration::from_micros(100)).unwrap(),
        };
    }
    stop.store(true, Ordering::Relaxed);
    for firer in firers {
        firer.join().unwrap();
    }
    assert_eq!(
        violations.load(Ordering::SeqCst),
        0,
        "a run started while paused, or two overlapped"
    );
    // Not paused at the end: a fire is served.
    let before = runs.get();
    assert_eq!(
        trigger.fire_and_wait(PATIENCE),
        Ok(circulation_trigger::Outcome::Completed)
    );
    assert!(runs.get() > before);
    scheduler.shutdown();
    assert!(scheduler.await_termination(PATIENCE));
}

/// Paused and resumed while an iteration runs (from inside it here, on
/// virtual time): the delay that iteration returns is the schedule.
#[test]
fn a_resume_during_a_run_adopts_the_delay_that_run_returns() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = self_aware(&sim, |me, n| {
        if n == 1 {
            me.pause();
            assert_eq!(me.resume(), Ok(true)); // its own run is in flight
        }
        // The first run asks for 7 s, later ones for 60 s.
        Some(Duration::from_secs(if n == 1 { 7 } else { 60 }))
    });
    trigger.fire().unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(runs.get(), 1);
    assert_eq!(sim.next_deadline(), Some(Duration::from_secs(7)));
    sim.advance(Duration::from_secs(7));
    assert_eq!(runs.get(), 2);
}

/// The same on real threads, with the run held at a gate while another
/// thread pauses and resumes.
#[test]
fn a_resume_while_a_run_is_held_adopts_its_delay_on_real_threads() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let gate = Gate::default();
    let (g, runs) = (gate.clone(), Counter::default());
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        if r.bump() == 1 {
            g.wait();
            return Some(Duration::from_millis(1));
        }
        None
    });
    trigger.fire().unwrap();
    common::eventually("the first run starts", || runs.get() == 1);
    trigger.pause();
    assert_eq!(trigger.resume(), Ok(true));
    gate.open();
    common::eventually("the 1 ms the held run asked for is honoured", || {
        runs.get() == 2
    });
    scheduler.shutdown();
    assert!(scheduler.await_termination(PATIENCE));
}

/// G6 through the off switch: a suspended trigger stays suspended across a
/// pause and a resume onto its schedule — suspended before the pause, or
/// while paused — until the next fire; `resume_after` still restarts it.
#[test]
fn a_suspended_trigger_stays_suspended_through_pause_and_resume() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = periodic(&sim);
    trigger.fire().unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(runs.get(), 1); // armed for 30 s

    // Suspended, then paused and resumed (a feature switch toggled).
    trigger.suspend();
    trigger.pause();
    assert_eq!(trigger.resume(), Ok(true));
    assert_eq!(trigger.stats().state, TriggerState::Suspended);
    sim.advance(PERIOD * 4);
    assert_eq!(runs.get(), 1, "the resume restarted a suspended trigger");

    // Twice over: the resume left it suspended, so the next pause sees it.
    trigger.pause();
    assert_eq!(trigger.resume(), Ok(true));
    sim.advance(PERIOD * 4);
    assert_eq!(runs.get(), 1);

    // The next fire restarts it, on its schedule again.
    trigger.fire().unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(runs.get(), 2);
    sim.advance(PERIOD);
    assert_eq!(runs.get(), 3);

    // Suspended while paused: the same.
    trigger.pause();
    trigger.suspend();
    assert!(trigger.stats().paused, "suspend is not a resume");
    assert_eq!(trigger.resume(), Ok(true));
    sim.advance(PERIOD * 4);
    assert_eq!(runs.get(), 3, "a suspend while paused was forgotten");

    // A pause and resume with no suspend in between: back on the schedule.
    trigger.fire().unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(runs.get(), 4);
    trigger.pause();
    assert_eq!(trigger.resume(), Ok(true));
    sim.advance(PERIOD);
    assert_eq!(runs.get(), 5);

    // `resume_after` asks for a run of its own: suspended or not.
    trigger.suspend();
    trigger.pause();
    assert_eq!(trigger.resume_after(Duration::from_secs(5)), Ok(true));
    sim.advance(Duration::from_secs(5));
    assert_eq!(runs.get(), 6);
}

/// A suspend during a run, then a pause and a resume while that run is
/// still in flight: its returned delay is ignored (G6), not adopted as a
/// resume during a run otherwise adopts it.
#[test]
fn a_run_in_flight_when_its_trigger_was_suspended_restarts_nothing_after_a_resume() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, runs) = self_aware(&sim, |me, n| {
        if n == 1 {
            me.suspend();
            me.pause();
            assert_eq!(me.resume(), Ok(true)); // its own run is in flight
        }
        Some(Duration::from_secs(7))
    });
    trigger.fire().unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(runs.get(), 1);
    assert_eq!(sim.next_deadline(), None, "the returned 7 s was armed");
    sim.advance(Duration::from_secs(60));
    assert_eq!(runs.get(), 1);
    assert_eq!(trigger.stats().state, TriggerState::Suspended);
}
