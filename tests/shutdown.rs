//! Lifecycle: graceful and abrupt shutdown, the exact shutdown report,
//! cancellation, bounded drop, and a stress test of fires racing shutdown.

mod common;

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::{is_cancelled, FireError, Outcome, Scheduler, Trigger};
use common::{eventually, Counter, PATIENCE};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

#[test]
fn graceful_shutdown_reports_armed_runs_and_the_run_in_flight() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let busy = Trigger::builder(&scheduler).name("busy").bind(move || {
        entered_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        None
    });
    let hourly = Trigger::builder(&scheduler).name("hourly").bind(|| None);
    let queued = Trigger::builder(&scheduler).name("queued").bind(|| None);
    let idle = Trigger::builder(&scheduler).name("idle").bind(|| None);
    busy.fire().unwrap();
    entered_rx.recv().unwrap(); // the only worker is busy from here on
    hourly.fire_after(Duration::from_secs(3600)).unwrap();
    queued.fire().unwrap();
    idle.fire_after(Duration::from_secs(5)).unwrap();
    idle.suspend();

    scheduler.shutdown();
    let report = scheduler.shutdown_report().expect("shut down");
    let mut discarded: Vec<_> = report
        .discarded()
        .iter()
        .map(|run| (run.trigger().unwrap().to_owned(), run.due_in()))
        .collect();
    discarded.sort();
    assert_eq!(discarded.len(), 2, "{report}");
    assert_eq!(discarded[0].0, "hourly");
    assert!(
        discarded[0].1 > Duration::from_secs(3590) && discarded[0].1 <= Duration::from_secs(3601)
    );
    assert_eq!(discarded[1], ("queued".to_owned(), Duration::ZERO));
    assert_eq!(report.in_flight().len(), 1);
    assert_eq!(report.in_flight()[0].trigger(), Some("busy"));
    assert_eq!(report.in_flight()[0].outcome(), Outcome::StillRunning);

    release_tx.send(()).unwrap();
    assert!(scheduler.await_termination(PATIENCE));
    let report = scheduler.shutdown_report().unwrap();
    assert_eq!(report.in_flight()[0].outcome(), Outcome::Completed);
    let text = report.to_string();
    assert!(text.contains("hourly") && text.contains("busy"), "{text}");
    // One line each, no newline at the end (println! adds one).
    assert_eq!(text.lines().count(), 1 + report.discarded().len() + 1);
    assert!(!text.ends_with('\n'), "{text:?}");
}

#[test]
fn shutdown_now_cancels_and_reports_each_outcome() {
    // The grace must cover the panicking task's unwind, and its panic
    // message first: with `RUST_BACKTRACE=1` (as in CI) the standard hook
    // resolves a backtrace, which took over 500 ms once on a 2-core
    // machine beside a context-switching neighbour (the report then said
    // `StillRunning`). The stubborn task holds `shutdown_now` for all of it.
    let scheduler = Scheduler::builder()
        .workers(3)
        .shutdown_grace(Duration::from_secs(3))
        .build()
        .unwrap();
    let started = Arc::new(Barrier::new(4));
    let polite = {
        let s = started.clone();
        Trigger::builder(&scheduler).name("polite").bind(move || {
            s.wait();
            while !is_cancelled() {
                thread::sleep(Duration::from_millis(1));
            }
            None
        })
    };
    let panicky = {
        let s = started.clone();
        Trigger::builder(&scheduler).name("panicky").bind(move || {
            s.wait();
            while !is_cancelled() {
                thread::sleep(Duration::from_millis(1));
            }
            panic!("gave up");
        })
    };
    let stubborn_release = Arc::new(AtomicBool::new(false));
    let stubborn = {
        let (s, release) = (started.clone(), stubborn_release.clone());
        Trigger::builder(&scheduler).name("stubborn").bind(move || {
            s.wait();
            while !release.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(1));
            }
            None
        })
    };
    for trigger in [&polite, &panicky, &stubborn] {
        trigger.fire().unwrap();
    }
    started.wait();
    assert!(!is_cancelled(), "false outside tasks");
    let began = Instant::now();
    let report = scheduler.shutdown_now();
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "bounded by the grace period"
    );
    let outcome = |name: &str| {
        report
            .in_flight()
            .iter()
            .find(|run| run.trigger() == Some(name))
            .map(|run| run.outcome())
    };
    assert_eq!(outcome("polite"), Some(Outcome::Cancelled), "{report}");
    assert_eq!(outcome("panicky"), Some(Outcome::Panicked), "{report}");
    assert_eq!(outcome("stubborn"), Some(Outcome::StillRunning), "{report}");
    assert!(report.discarded().is_empty(), "{report}");
    stubborn_release.store(true, Ordering::SeqCst);
    assert!(scheduler.await_termination(PATIENCE));
    let later = scheduler.shutdown_report().unwrap();
    let stubborn_now = later
        .in_flight()
        .iter()
        .find(|r| r.trigger() == Some("stubborn"))
        .unwrap();
    assert_eq!(stubborn_now.outcome(), Outcome::Completed);
}

/// A scheduler with one worker stuck in a task until the returned flag is
/// set, and the given grace period.
fn stuck(grace: Duration) -> (Scheduler, Trigger, Arc<AtomicBool>) {
    let scheduler = Scheduler::builder()
        .workers(1)
        .shutdown_grace(grace)
        .build()
        .unwrap();
    let (entered_tx, entered_rx) = mpsc::channel();
    let release = Arc::new(AtomicBool::new(false));
    let r = release.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        entered_tx.send(()).unwrap();
        while !r.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(1));
        }
        None
    });
    trigger.fire().unwrap();
    entered_rx.recv().unwrap();
    (scheduler, trigger, release)
}

#[test]
fn drop_is_bounded_by_the_grace_period_and_detaches_a_stuck_thread() {
    let scheduler = Scheduler::builder()
        .workers(1)
        .shutdown_grace(Duration::from_secs(2))
        .build()
        .unwrap();
    let (entered_tx, entered_rx) = mpsc::channel();
    let release = Arc::new(AtomicBool::new(false));
    let ended = Arc::new(AtomicBool::new(false));
    let (r, e) = (release.clone(), ended.clone());
    let trigger = Trigger::bind(&scheduler, move || {
        entered_tx.send(()).unwrap();
        while !r.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(1));
        }
        e.store(true, Ordering::SeqCst);
        None
    });
    trigger.fire().unwrap();
    entered_rx.recv().unwrap();
    scheduler.shutdown();
    let report = scheduler.shutdown_report().unwrap();
    assert_eq!(report.in_flight()[0].outcome(), Outcome::StillRunning);
    let began = Instant::now();
    // The task never returns on its own: the drop detaches its thread and does not hang.
    drop(scheduler);
    let took = began.elapsed();
    // One grace period, not two.
    assert!(took >= Duration::from_millis(1_900), "{took:?}");
    assert!(took < Duration::from_millis(3_500), "{took:?}");
    // The detached thread still runs the task.
    assert!(!ended.load(Ordering::SeqCst), "the stuck task still runs");
    release.store(true, Ordering::SeqCst);
    eventually("the detached task returns", || ended.load(Ordering::SeqCst));
}

#[test]
fn plain_drop_is_bounded_too() {
    let (scheduler, _trigger, release) = stuck(Duration::from_millis(50));
    let began = Instant::now();
    drop(scheduler);
    assert!(began.elapsed() < Duration::from_secs(5));
    release.store(true, Ordering::SeqCst);
}

#[test]
fn the_report_is_none_before_shutdown_and_shutdown_is_idempotent() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    assert!(scheduler.shutdown_report().is_none());
    assert!(scheduler.shutdown_report().is_none());
    scheduler.shutdown();
    scheduler.shutdown();
    let _ = scheduler.shutdown_now();
    assert!(scheduler.shutdown_report().is_some());
    assert!(scheduler.await_termination(PATIENCE));
    assert!(scheduler.await_termination(std::time::Duration::ZERO));
    assert_eq!(scheduler.shutdown_report().unwrap().discarded().len(), 0);
}

/// Many threads fire many triggers once each while the scheduler shuts
/// down. Every fire is accounted for exactly once: refused to its caller,
/// or accepted and then either run or listed as discarded — never both,
/// never neither. That is checked whatever the interleaving; each kind of
/// outcome is also forced, outside the race, so the accounting of all
/// three is exercised in every round however the race itself falls.
#[test]
fn fires_racing_shutdown_are_refused_or_accounted_for() {
    for round in 0..20 {
        let scheduler = Scheduler::builder().workers(2).build().unwrap();
        let ran: Arc<Mutex<HashSet<String>>> = Arc::default();
        let bind = |name: String| {
            let ran = ran.clone();
            Trigger::builder(&scheduler)
                .name(name.clone())
                .bind(move || {
                    ran.lock().unwrap().insert(name.clone());
                    None
                })
        };
        let triggers: Vec<Trigger> = (0..400).map(|i| bind(format!("t{i}"))).collect();
        // Forced outcomes, outside the race: one fire that surely ran, one
        // that is surely armed at shutdown (listed), one surely refused.
        let (ran_first, armed, late) = (
            bind("ran".into()),
            bind("armed".into()),
            bind("late".into()),
        );
        let mut accepted: HashSet<String> = HashSet::new();
        ran_first.fire_and_wait(PATIENCE).unwrap();
        accepted.insert("ran".into());
        armed.fire_after(Duration::from_secs(3_600)).unwrap();
        accepted.insert("armed".into());
        let triggers = Arc::new(triggers);
        let go = Arc::new(Barrier::new(5));
        let firers: Vec<_> = (0..4)
            .map(|t| {
                let (triggers, go) = (triggers.clone(), go.clone());
                thread::spawn(move || {
                    go.wait();
                    let mut accepted = Vec::new();
                    for i in (t..triggers.len()).step_by(4) {
                        let result = if i % 3 == 0 {
                            triggers[i].fire()
                        } else {
                            triggers[i].fire_after(Duration::from_micros((i as u64 % 7) * 300))
                        };
                        match result {
                            Ok(()) => accepted.push(format!("t{i}")),
                            Err(FireError::Shutdown) => {}
                            Err(other) => panic!("unexpected {other}"),
                        }
                    }
                    accepted
                })
            })
            .collect();
        go.wait();
        thread::sleep(Duration::from_micros(200 * (round % 5)));
        scheduler.shutdown();
        assert!(matches!(late.fire(), Err(FireError::Shutdown)));
        accepted.extend(firers.into_iter().flat_map(|f| f.join().unwrap()));
        assert!(scheduler.await_termination(PATIENCE));
        let report = scheduler.shutdown_report().unwrap();
        let listed: Vec<String> = report
            .discarded()
            .iter()
            .map(|r| r.trigger().unwrap().to_owned())
            .collect();
        let listed_set: HashSet<String> = listed.iter().cloned().collect();
        assert_eq!(listed.len(), listed_set.len(), "listed twice: {report}");
        let ran = ran.lock().unwrap();
        for name in accepted.iter() {
            let (r, l) = (ran.contains(name), listed_set.contains(name));
            assert!(r ^ l, "round {round}: accepted {name}: ran {r}, listed {l}");
        }
        for name in listed_set.iter().chain(ran.iter()) {
            assert!(
                accepted.contains(name),
                "round {round}: {name} was never accepted"
            );
        }
        // The forced outcomes came out as forced.
        assert!(ran.contains("ran") && listed_set.contains("armed"));
        assert!(!ran.contains("late") && !listed_set.contains("late"));
        assert!(report
            .in_flight()
            .iter()
            .all(|r| r.outcome() == Outcome::Completed));
    }
}

#[test]
fn virtual_schedulers_report_too() {
    let sim = Scheduler::builder().build_virtual();
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::builder(&sim).name("periodic").bind(move || {
        r.bump();
        Some(Duration::from_secs(10))
    });
    trigger.fire().unwrap();
    sim.advance(Duration::from_secs(25));
    assert_eq!(runs.get(), 3);
    let report = sim.shutdown_now();
    assert_eq!(report.discarded().len(), 1);
    assert_eq!(report.discarded()[0].due_in(), Duration::from_secs(5));
    eventually("no threads to wait for", || {
        sim.await_termination(std::time::Duration::ZERO)
    });
}

#[test]
fn the_next_run_listed_for_a_run_in_flight_is_the_one_its_rearm_would_arm() {
    // A periodic run shuts its (virtual) scheduler down at 370 µs and asks
    // for its next run 60 s later: its re-arm, refused by the closed word,
    // lists the deadline it would have armed — rounded up onto the 2 ms
    // coalescing grid (60.002 s), or with coalescing off the exact one.
    // (Its end listing that run itself, past a fire refused after its
    // advance, is `loom_shutdown`'s to force.)
    for coalesce in [true, false] {
        let sim = Arc::new(
            Scheduler::builder()
                .coalesce_periodic(coalesce)
                .build_virtual(),
        );
        sim.advance(Duration::from_micros(370));
        let s = Arc::clone(&sim);
        let trigger = Trigger::builder(&*sim).name("periodic").bind(move || {
            s.shutdown();
            Some(Duration::from_secs(60))
        });
        trigger.fire().unwrap();
        sim.advance(Duration::ZERO);
        let report = sim.shutdown_report().expect("shut down");
        assert_eq!(report.in_flight().len(), 1, "{report:?}");
        assert_eq!(report.discarded().len(), 1, "{report:?}");
        let due_at = if coalesce { 60_002_000 } else { 60_000_370 };
        assert_eq!(
            report.discarded()[0].due_in(),
            Duration::from_micros(due_at - 370),
            "coalescing {coalesce}: {report:?}"
        );
    }
}

#[test]
fn a_cooldown_deferral_is_never_listed_in_flight() {
    // A fire during a cooldown takes RUNNING only to find it too early and
    // gives it back without running; a scan in that moment must not list
    // a run in flight (it would stay `StillRunning` for ever). Racy when
    // broken, so many rounds.
    let mut phantoms = 0;
    for _ in 0..100 {
        let scheduler = Arc::new(Scheduler::builder().workers(1).build().unwrap());
        let runs = Counter::default();
        let r = runs.clone();
        let trigger = Trigger::builder(&*scheduler)
            .policies(TriggerPolicies::new().min_interval(Duration::from_secs(3600)))
            .bind(move || {
                r.bump();
                None
            });
        trigger.fire_and_wait(PATIENCE).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (t, st) = (trigger.clone(), stop.clone());
        let firer = thread::spawn(move || {
            let mut fires = 0u64;
            while !st.load(Ordering::Relaxed) && fires < 50_000_000 && t.fire().is_ok() {
                fires += 1;
            }
        });
        thread::sleep(Duration::from_millis(3));
        let report = scheduler.shutdown_now();
        stop.store(true, Ordering::Relaxed);
        firer.join().unwrap();
        assert_eq!(runs.get(), 1, "the cooldown held");
        if !report.in_flight().is_empty() {
            phantoms += 1;
        }
    }
    assert_eq!(phantoms, 0, "reports listing a run that never ran");
}

#[test]
fn a_concurrent_second_shutdown_returns_the_full_report() {
    // The caller that loses the race to close must not return (or read
    // the report) before the winner's scan has listed every armed run.
    const ARMED: usize = 50_000;
    let mut short = 0;
    for _ in 0..6 {
        let scheduler = Arc::new(Scheduler::builder().workers(1).build().unwrap());
        let triggers: Vec<_> = (0..ARMED)
            .map(|_| {
                let t = Trigger::bind(&*scheduler, || None);
                t.fire_after(Duration::from_secs(3600)).unwrap();
                t
            })
            .collect();
        let s = scheduler.clone();
        let first = thread::spawn(move || s.shutdown());
        let deadline = Instant::now() + PATIENCE;
        while scheduler.shutdown_report().is_none() && Instant::now() < deadline {
            std::hint::spin_loop();
        }
        let seen = scheduler.shutdown_report().map(|r| r.discarded().len());
        let report = scheduler.shutdown_now();
        first.join().unwrap();
        if seen != Some(ARMED) || report.discarded().len() != triggers.len() {
            short += 1;
        }
    }
    assert_eq!(short, 0, "rounds where a report was read half made");
}

#[test]
fn a_task_dropped_by_the_shutdown_may_call_the_scheduler() {
    // A trigger whose last handle went while its run sat in the queue is
    // let go by the shutdown: its task's destructor runs outside the
    // scheduler's locks, so it may call the scheduler — here, for the
    // report, which waits for the shutdown's scan.
    struct AsksForTheReport(std::sync::Weak<Scheduler>, mpsc::Sender<bool>);
    impl Drop for AsksForTheReport {
        fn drop(&mut self) {
            if let Some(scheduler) = self.0.upgrade() {
                let _ = self.1.send(scheduler.shutdown_report().is_some());
            }
        }
    }
    let scheduler = Arc::new(Scheduler::builder().workers(1).build().unwrap());
    let (dropped_tx, dropped_rx) = mpsc::channel();
    let guard = AsksForTheReport(Arc::downgrade(&scheduler), dropped_tx);
    let (ran_tx, ran_rx) = mpsc::channel();
    let queued = Trigger::bind(&*scheduler, move || {
        let _ = &guard;
        ran_tx.send(()).unwrap();
        None
    });
    queued.fire().unwrap();
    ran_rx.recv_timeout(PATIENCE).unwrap(); // it has run: no first-run warning
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let busy = Trigger::bind(&*scheduler, move || {
        entered_tx.send(()).unwrap();
        let _ = release_rx.recv();
        None
    });
    busy.fire().unwrap();
    entered_rx.recv_timeout(PATIENCE).unwrap(); // the only worker is busy
    queued.fire().unwrap(); // queued behind it
    drop(queued); // the queue holds the last reference now
    let shutting = {
        let scheduler = Arc::clone(&scheduler);
        thread::spawn(move || scheduler.shutdown())
    };
    assert_eq!(
        dropped_rx.recv_timeout(PATIENCE),
        Ok(true),
        "the task was dropped, outside the shutdown's lock"
    );
    release_tx.send(()).unwrap();
    shutting.join().unwrap();
}

/// One trigger, two threads firing it flat out — `fire` and `fire_after`
/// mixed, so fires land during iterations (reserving, coalescing,
/// cancelling reservations) — racing each kind of shutdown. Whatever the
/// interleaving: the last accepted fire is served by a run that saw it
/// (each fire publishes its number before it fires), or a run is listed —
/// or, after `shutdown_now`, the iteration listed in flight was cancelled
/// —, and at most one run is listed: the report never lists a run twice,
/// nor misses one an accepted fire is owed.
#[test]
fn fires_during_runs_racing_shutdown_are_served_or_listed_once() {
    use std::sync::atomic::AtomicU64;
    for round in 0..60u64 {
        let scheduler = Scheduler::builder().workers(1).build().unwrap();
        let published = Arc::new(AtomicU64::new(0));
        let seen = Arc::new(AtomicU64::new(0));
        let trigger = {
            let (published, seen) = (published.clone(), seen.clone());
            Trigger::builder(&scheduler).name("busy").bind(move || {
                seen.fetch_max(published.load(Ordering::SeqCst), Ordering::SeqCst);
                thread::sleep(Duration::from_micros(20));
                None
            })
        };
        let next = Arc::new(AtomicU64::new(0));
        let go = Arc::new(Barrier::new(3));
        let firers: Vec<_> = (0..2)
            .map(|_| {
                let (trigger, published, next, go) =
                    (trigger.clone(), published.clone(), next.clone(), go.clone());
                thread::spawn(move || {
                    go.wait();
                    let mut last = 0;
                    // Bounded: shutdown comes within milliseconds.
                    for _ in 0..1_000_000 {
                        let k = next.fetch_add(1, Ordering::SeqCst) + 1;
                        published.fetch_max(k, Ordering::SeqCst);
                        let result = if k % 2 == 0 {
                            trigger.fire_after(Duration::from_micros((k % 7 + 1) * 50))
                        } else {
                            trigger.fire()
                        };
                        match result {
                            Ok(()) => last = k,
                            Err(FireError::Shutdown) => return last,
                            Err(other) => panic!("unexpected {other}"),
                        }
                    }
                    panic!("never refused");
                })
            })
            .collect();
        go.wait();
        thread::sleep(Duration::from_micros(300 * (round % 7)));
        let report = match round % 3 {
            0 => {
                scheduler.shutdown();
                assert!(scheduler.await_termination(PATIENCE));
                scheduler.shutdown_report().unwrap()
            }
            1 => scheduler.shutdown_now(),
            _ => {
                let report = scheduler.shutdown_now();
                assert!(scheduler.await_termination(PATIENCE));
                report
            }
        };
        let last = firers.into_iter().map(|f| f.join().unwrap()).max().unwrap();
        let listed = report.discarded().len();
        assert!(listed <= 1, "round {round}: listed twice: {report}");
        let cancelled = report
            .in_flight()
            .iter()
            .any(|run| run.outcome() == Outcome::Cancelled);
        if seen.load(Ordering::SeqCst) < last && !cancelled {
            assert_eq!(
                listed,
                1,
                "round {round}: fire {last} accepted, but no run saw it and none is listed: {report}"
            );
        }
    }
}

#[test]
fn a_periodic_run_in_flight_at_shutdown_has_its_next_run_listed() {
    // The run itself shuts the scheduler down (so the scan finds it in
    // flight), then — in one variant — fires, refused; then asks for its
    // next run, which is listed (with its due time) whether or not the
    // fire came. A fire whose advance races the scan is
    // `loom_shutdown`'s to force.
    for refused_fire in [false, true] {
        let scheduler = Arc::new(Scheduler::builder().workers(1).build().unwrap());
        let own: Arc<Mutex<Option<Trigger>>> = Arc::default();
        let fired = Arc::new(Mutex::new(None));
        let (s, o, f) = (Arc::clone(&scheduler), Arc::clone(&own), Arc::clone(&fired));
        let trigger = Trigger::builder(&*scheduler)
            .name("periodic")
            .bind(move || {
                s.shutdown();
                if refused_fire {
                    let trigger = o.lock().unwrap().take().expect("own handle");
                    *f.lock().unwrap() = Some(trigger.fire());
                }
                Some(Duration::from_secs(60))
            });
        *own.lock().unwrap() = Some(trigger.clone());
        trigger.fire().unwrap();
        assert!(scheduler.await_termination(PATIENCE));
        let report = scheduler.shutdown_report().unwrap();
        if refused_fire {
            assert_eq!(*fired.lock().unwrap(), Some(Err(FireError::Shutdown)));
        }
        assert_eq!(report.in_flight().len(), 1, "{report:?}");
        assert_eq!(report.in_flight()[0].outcome(), Outcome::Completed);
        let discarded = report.discarded();
        assert_eq!(
            discarded.len(),
            1,
            "refused fire {refused_fire}: {report:?}"
        );
        assert_eq!(discarded[0].trigger(), Some("periodic"));
        let due_in = discarded[0].due_in();
        assert!(
            due_in > Duration::from_secs(50) && due_in <= Duration::from_secs(61),
            "{due_in:?}"
        );
    }
}
