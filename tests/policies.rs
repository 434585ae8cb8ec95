//! Scheduling policies: phase-keeping periods (`PhaseKeeper`) and the
//! scheduler time tasks see (`scheduler_time`), on virtual time (exact
//! instants) and on the real scheduler (never early).

mod common;

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::{
    policy::{PhaseKeeper, RetryBackoff},
    scheduler_time, Scheduler, Trigger,
};
use common::eventually;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A trigger on `sim` whose task logs its scheduler time and returns
/// `next(now)`.
fn logging(
    sim: &circulation_trigger::testing::VirtualScheduler,
    mut next: impl FnMut(Duration) -> Option<Duration> + Send + 'static,
) -> (Trigger, Arc<Mutex<Vec<u64>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let trigger = Trigger::bind(sim, move || {
        let now = scheduler_time().expect("inside a task");
        l.lock().unwrap().push(now.as_secs());
        next(now)
    });
    (trigger, log)
}

#[test]
fn an_out_of_band_run_does_not_move_the_phase() {
    let sim = Scheduler::builder().build_virtual();
    let phase = PhaseKeeper::new(secs(60)).offset(secs(7));
    let (trigger, log) = logging(&sim, move |_| Some(phase.next_delay()));
    trigger
        .fire_after(phase.first_delay_from(sim.now()))
        .unwrap();
    sim.advance_to(secs(100));
    trigger.fire().unwrap(); // "refresh now"
    sim.advance_to(secs(300));
    // 127 s is 27 s after the out-of-band run (< half a period): skipped.
    assert_eq!(*log.lock().unwrap(), [7, 67, 100, 187, 247]);
}

#[test]
fn without_a_gap_no_slot_is_skipped() {
    let sim = Scheduler::builder().build_virtual();
    let phase = PhaseKeeper::new(secs(60))
        .offset(secs(7))
        .min_gap(Duration::ZERO);
    let (trigger, log) = logging(&sim, move |_| Some(phase.next_delay()));
    trigger.fire_after(secs(7)).unwrap();
    sim.advance_to(secs(100));
    trigger.fire().unwrap();
    sim.advance_to(secs(200));
    assert_eq!(*log.lock().unwrap(), [7, 67, 100, 127, 187]);
}

#[test]
fn a_plain_period_re_phases_on_every_out_of_band_run() {
    // The behaviour phase-keeping exists to avoid, for contrast.
    let sim = Scheduler::builder().build_virtual();
    let (trigger, log) = logging(&sim, |_| Some(secs(60)));
    trigger.fire_after(secs(7)).unwrap();
    sim.advance_to(secs(100));
    trigger.fire().unwrap();
    sim.advance_to(secs(230));
    assert_eq!(*log.lock().unwrap(), [7, 67, 100, 160, 220]);
}

#[test]
fn back_off_then_back_on_the_grid() {
    let sim = Scheduler::builder().build_virtual();
    let phase = PhaseKeeper::new(secs(60)).offset(secs(10));
    let mut backoff = RetryBackoff::new(secs(1), secs(30));
    // The service is down from 60 s to 76 s.
    let (trigger, log) = logging(&sim, move |now| {
        if now >= secs(60) && now < secs(76) {
            backoff.failed()
        } else {
            backoff.succeeded(secs(60));
            Some(phase.next_delay())
        }
    });
    trigger.fire_after(secs(10)).unwrap();
    sim.advance_to(secs(200));
    // 70 fails, retries at 71, 73 (fail), 77 (up): the next slot 130 is 53 s
    // away, so the grid resumes there.
    assert_eq!(*log.lock().unwrap(), [10, 70, 71, 73, 77, 130, 190]);
}

#[test]
fn jitter_around_the_slots_does_not_drift_the_grid() {
    circulation_trigger::policy::seed_jitter(3);
    let sim = Scheduler::builder().build_virtual();
    let phase = PhaseKeeper::new(secs(60)).min_gap(Duration::ZERO);
    let (trigger, log) = logging(&sim, move |_| {
        // Aim a little after each slot: ± 1 % of a 2 s lag.
        Some(circulation_trigger::policy::jittered(
            phase.next_delay() + secs(2),
            0.01,
        ))
    });
    trigger.fire().unwrap();
    sim.advance_to(secs(60 * 50));
    let log = log.lock().unwrap();
    for (k, &start) in log.iter().enumerate().skip(1) {
        let slot = 60 * k as u64;
        assert!(
            (slot + 1..=slot + 3).contains(&start),
            "run {k} at {start} s"
        );
    }
}

#[test]
fn scheduler_time_is_none_outside_tasks_and_real_inside() {
    assert_eq!(scheduler_time(), None);
    let scheduler = Scheduler::new();
    let seen = Arc::new(Mutex::new(None));
    let s = seen.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        *s.lock().unwrap() = scheduler_time();
        None
    });
    trigger.fire_after(Duration::from_millis(20)).unwrap();
    eventually("the run", || seen.lock().unwrap().is_some());
    let at = seen.lock().unwrap().unwrap();
    assert!(at >= Duration::from_millis(20), "started early: {at:?}");
    assert_eq!(trigger.stats().last_start.map(|t| t <= at), Some(true));
}

#[test]
fn phase_kept_runs_are_never_early_on_real_time() {
    let scheduler = Scheduler::new();
    let period = Duration::from_millis(30);
    let phase = PhaseKeeper::new(period).min_gap(Duration::ZERO);
    let starts = Arc::new(Mutex::new(Vec::new()));
    let s = starts.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        let now = scheduler_time().expect("inside a task");
        let mut starts = s.lock().unwrap();
        starts.push(now);
        (starts.len() < 8).then(|| phase.next_delay())
    });
    trigger.fire().unwrap();
    eventually("eight runs", || starts.lock().unwrap().len() == 8);
    let starts = starts.lock().unwrap();
    for pair in starts.windows(2) {
        // Each run aims at the first slot after the previous one.
        let slot_index = pair[0].as_nanos() / period.as_nanos() + 1;
        let slot = period * u32::try_from(slot_index).unwrap();
        assert!(
            pair[1] >= slot,
            "{:?} ran before its slot {slot:?}",
            pair[1]
        );
    }
}

#[test]
fn fire_at_elapsed_runs_at_that_scheduler_time_latest_wins() {
    let sim = Scheduler::builder().build_virtual();
    let (trigger, log) = logging(&sim, |_| None);
    trigger.fire_at_elapsed(secs(90)).unwrap();
    sim.advance_to(secs(100));
    trigger.fire_at_elapsed(secs(30)).unwrap(); // past: now
    sim.advance(Duration::ZERO);
    trigger.fire_at_elapsed(secs(200)).unwrap();
    trigger.fire_after(secs(10)).unwrap(); // latest wins: 110 s, not 200 s
    sim.advance_to(secs(300));
    assert_eq!(*log.lock().unwrap(), [90, 100, 110]);
    // Beyond the clock's range: refused, the armed request untouched.
    trigger.fire_at_elapsed(secs(400)).unwrap();
    assert!(matches!(
        trigger.fire_at_elapsed(Duration::MAX),
        Err(circulation_trigger::FireError::DelayTooLong(_))
    ));
    sim.advance_to(secs(500));
    assert_eq!(*log.lock().unwrap(), [90, 100, 110, 400]);
}

#[test]
fn fire_at_an_instant_is_never_early() {
    let scheduler = Scheduler::new();
    let ran = Arc::new(Mutex::new(None));
    let r = ran.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        *r.lock().unwrap() = Some(std::time::Instant::now());
        None
    });
    let at = std::time::Instant::now() + Duration::from_millis(30);
    trigger.fire_at(at).unwrap();
    eventually("the run", || ran.lock().unwrap().is_some());
    assert!(ran.lock().unwrap().unwrap() >= at, "ran before its instant");
    // A past instant runs at once; on virtual time an instant counts from now.
    trigger.fire_at(std::time::Instant::now()).unwrap();
    let sim = Scheduler::builder().build_virtual();
    let (virtual_trigger, log) = logging(&sim, |_| None);
    virtual_trigger
        .fire_at(std::time::Instant::now() + secs(3600))
        .unwrap();
    sim.advance(secs(3599));
    assert!(log.lock().unwrap().is_empty());
    sim.advance(secs(2));
    assert_eq!(log.lock().unwrap().len(), 1);
}

#[test]
fn a_cooldown_coalesces_fires_into_one_run_at_its_end() {
    let sim = Scheduler::builder().build_virtual();
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let trigger = Trigger::builder(&sim)
        .policies(TriggerPolicies::new().min_interval(secs(10)))
        .bind(move || {
            l.lock().unwrap().push(scheduler_time().unwrap().as_secs());
            None
        });
    trigger.fire().unwrap(); // 0 s
    sim.advance_to(secs(1));
    for _ in 0..1_000 {
        trigger.fire().unwrap(); // a storm: one run, at 10 s
    }
    sim.advance_to(secs(12));
    trigger.fire_after(secs(30)).unwrap(); // beyond the cooldown: at 42 s
    sim.advance_to(secs(50));
    trigger.fire_after(secs(1)).unwrap(); // inside it (42 + 10): at 52 s
    sim.advance_to(secs(100));
    assert_eq!(*log.lock().unwrap(), [0, 10, 42, 52]);
    let stats = trigger.stats();
    assert_eq!((stats.iterations, stats.fires), (4, 1_003));
}

#[test]
fn a_cooldown_spaces_a_periodic_task_and_its_reservations() {
    let sim = Scheduler::builder().build_virtual();
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let trigger = Trigger::builder(&sim)
        .policies(TriggerPolicies::new().min_interval(secs(5)))
        .bind(move || {
            l.lock().unwrap().push(scheduler_time().unwrap().as_secs());
            Some(secs(1)) // asks for 1 s: served every 5 s
        });
    trigger.fire().unwrap();
    sim.advance_to(secs(21));
    assert_eq!(*log.lock().unwrap(), [0, 5, 10, 15, 20]);
    trigger.suspend();
    sim.advance_to(secs(40));
    assert_eq!(
        log.lock().unwrap().len(),
        5,
        "suspend wins over a deferred run"
    );
}

#[test]
fn a_panic_policy_retries_after_a_back_off_and_resets_on_success() {
    common::quiet_panics();
    let sim = Scheduler::builder().build_virtual();
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let policy = circulation_trigger::policy::PanicPolicy::Retry(
        RetryBackoff::new(secs(1), secs(60)).max_retries(3),
    );
    let trigger = Trigger::builder(&sim)
        .policies(TriggerPolicies::new().on_panic(policy))
        .bind(move || {
            let now = scheduler_time().unwrap().as_secs();
            l.lock().unwrap().push(now);
            // Panics at 0, 1 and 3 s; fine at 7 s; panics for good from 100 s.
            assert!(now == 7 || (8..100).contains(&now), "boom at {now}");
            (now == 7).then_some(secs(93))
        });
    trigger.fire().unwrap();
    sim.advance_to(secs(200));
    // After success the back-off starts over: 100, then 3 retries (101,
    // 103, 107); the fourth consecutive failure reaches the retry limit and
    // stops the chain.
    assert_eq!(*log.lock().unwrap(), [0, 1, 3, 7, 100, 101, 103, 107]);
    assert_eq!(trigger.stats().panics, 7);
    assert_eq!(sim.stats().panics, 7);
    // The default policy stops at the first panic (G8).
    let stop = Trigger::bind(&sim, || panic!("once"));
    stop.fire().unwrap();
    sim.advance(secs(10));
    assert_eq!(stop.stats().iterations, 1);
}

#[test]
fn a_run_longer_than_stuck_after_is_reported_once() {
    let (tx, rx) = std::sync::mpsc::channel();
    let scheduler = Scheduler::builder()
        .stuck_hook(move |stuck| {
            tx.send((stuck.trigger().map(str::to_owned), stuck.running_for()))
                .unwrap()
        })
        .build()
        .unwrap();
    let release = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let r = release.clone();
    let trigger = Trigger::builder(&scheduler)
        .name("hung")
        .policies(TriggerPolicies::new().stuck_after(Duration::from_millis(30)))
        .bind(move || {
            let (open, bed) = &*r;
            let mut open = open.lock().unwrap();
            while !*open {
                open = bed.wait(open).unwrap();
            }
            None
        });
    trigger.fire().unwrap();
    let (name, running_for) = rx.recv_timeout(common::PATIENCE).expect("a report");
    assert_eq!(name.as_deref(), Some("hung"));
    assert!(running_for >= Duration::from_millis(30));
    assert!(trigger.stats().stuck);
    // Once per run: no second report while it stays stuck.
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    *release.0.lock().unwrap() = true;
    release.1.notify_all();
    eventually("the run ended", || {
        trigger.stats().iterations == 1 && !trigger.stats().stuck
    });
}

#[test]
fn a_cooldown_holds_on_real_time() {
    let scheduler = Scheduler::new();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let s = starts.clone();
    let cooldown = Duration::from_millis(40);
    // Each run logs its start as the scheduler recorded it (an `Instant`
    // read inside the task would add the task's own, unbounded, delay).
    let me = Arc::new(std::sync::OnceLock::<circulation_trigger::WeakTrigger>::new());
    let m = me.clone();
    let trigger = Trigger::builder(&scheduler)
        .policies(TriggerPolicies::new().min_interval(cooldown))
        .bind(move || {
            let me = m.get().and_then(|weak| weak.upgrade()).expect("set");
            s.lock()
                .unwrap()
                .push(me.stats().last_start.expect("running"));
            None
        });
    me.set(trigger.downgrade()).unwrap();
    // Fire flat out until four runs have happened.
    let deadline = std::time::Instant::now() + common::PATIENCE;
    while starts.lock().unwrap().len() < 4 {
        assert!(std::time::Instant::now() < deadline, "timed out");
        trigger.fire().unwrap();
        std::thread::yield_now();
    }
    let starts = starts.lock().unwrap();
    for pair in starts.windows(2) {
        assert!(pair[1] - pair[0] >= cooldown, "started within the cooldown");
    }
}

#[test]
fn a_panic_policy_retries_on_real_time() {
    common::quiet_panics();
    let scheduler = Scheduler::new();
    let calls = common::Counter::default();
    let c = calls.clone();
    let trigger = Trigger::builder(&scheduler)
        .policies(
            TriggerPolicies::new().on_panic(circulation_trigger::policy::PanicPolicy::Retry(
                RetryBackoff::new(Duration::from_millis(5), Duration::from_millis(50)),
            )),
        )
        .bind(move || {
            assert!(c.bump() > 2, "boom: flaky start");
            None
        });
    trigger.fire().unwrap();
    eventually("the third call succeeded", || calls.get() == 3);
    eventually("its statistics", || trigger.stats().iterations == 3);
    assert_eq!(trigger.stats().panics, 2);
    assert_eq!(scheduler.stats().panics, 2);
}

#[test]
fn hostile_values_for_the_new_entry_points_never_panic() {
    // G16 for the builder options and calls added with the elastic pool,
    // the policies and fire_and_wait: on the real and the virtual scheduler.
    let extremes = [Duration::ZERO, Duration::from_nanos(1), Duration::MAX];
    for &d in &extremes {
        let scheduler = Scheduler::builder()
            .max_workers(usize::MAX)
            .stall_threshold(d)
            .worker_keep_alive(d)
            .coalesce_periodic(d.is_zero())
            .build()
            .unwrap();
        let sim = Scheduler::builder()
            .max_workers(0)
            .stall_threshold(d)
            .build_virtual();
        for s in [&scheduler, &*sim] {
            let trigger = Trigger::builder(s)
                .policies(
                    TriggerPolicies::new()
                        .min_interval(d)
                        .stuck_after(d)
                        .on_panic(circulation_trigger::policy::PanicPolicy::Retry(
                            RetryBackoff::new(d, d),
                        )),
                )
                .bind(|| Some(Duration::MAX));
            let _ = trigger.fire_at_elapsed(d);
            let _ = trigger.fire_at(std::time::Instant::now());
            let _ =
                trigger.fire_and_wait(Duration::from_millis(1).min(d.max(Duration::from_nanos(1))));
            let _ = PhaseKeeper::new(d).offset(d).min_gap(d).first_delay_from(d);
        }
        sim.advance(secs(1));
        // Still working: a plain trigger runs.
        let probe = Trigger::bind(&scheduler, || None);
        assert_eq!(
            probe.fire_and_wait(common::PATIENCE),
            Ok(circulation_trigger::Outcome::Completed)
        );
        scheduler.shutdown();
        assert!(scheduler.await_termination(common::PATIENCE));
    }
}

#[test]
fn a_cooldown_deferral_is_never_reported_stuck() {
    // Fires during a cooldown take RUNNING for a moment without running
    // the task, hundreds of times here; none is a run, so none may be
    // reported stuck. The one real run may be: on a loaded machine its
    // thread can be preempted past 1 ms mid-run — and a run is reported
    // once. A deferral counted as a run would be reported over and over.
    let stuck = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let s = stuck.clone();
    let scheduler = Scheduler::builder()
        .workers(1)
        .stall_threshold(Duration::from_micros(200))
        .stuck_hook(move |_| {
            s.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })
        .build()
        .unwrap();
    let trigger = Trigger::builder(&scheduler)
        .policies(
            TriggerPolicies::new()
                .min_interval(secs(3600))
                .stuck_after(Duration::from_millis(1)),
        )
        .bind(|| None);
    trigger.fire_and_wait(secs(20)).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    let end = std::time::Instant::now() + Duration::from_millis(500);
    while std::time::Instant::now() < end {
        trigger.fire().unwrap();
    }
    let reports = stuck.load(std::sync::atomic::Ordering::Relaxed);
    assert!(reports <= 1, "{reports} stuck reports for one run");
    assert_eq!(trigger.stats().iterations, 1, "the cooldown held");
}

#[test]
fn the_panic_hook_reads_the_panic_in_the_trigger_statistics() {
    let me: Arc<std::sync::OnceLock<circulation_trigger::WeakTrigger>> = Arc::default();
    let seen = Arc::new(Mutex::new(None));
    let (m, s) = (me.clone(), seen.clone());
    let sim = Scheduler::builder()
        .panic_hook(move |_| {
            let trigger = m.get().and_then(|weak| weak.upgrade()).unwrap();
            let stats = trigger.stats();
            *s.lock().unwrap() = Some((stats.panics, stats.last_end.is_some()));
        })
        .build_virtual();
    let trigger = Trigger::bind(&sim, || -> Option<Duration> { panic!("boom") });
    me.set(trigger.downgrade()).unwrap();
    common::quiet_panics();
    trigger.fire().unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(*seen.lock().unwrap(), Some((1, true)));
}

#[test]
fn the_stuck_hook_may_bind_a_watched_trigger() {
    // The hook is user code and runs with no lock of the scheduler's held:
    // binding a trigger with `stuck_after` from it (which puts it on the
    // monitor's list) must not deadlock the monitor.
    let weak: Arc<std::sync::OnceLock<std::sync::Weak<Scheduler>>> = Arc::default();
    let (tx, rx) = std::sync::mpsc::channel();
    let (w, tx) = (weak.clone(), Mutex::new(tx));
    let scheduler = Arc::new(
        Scheduler::builder()
            .stuck_hook(move |_| {
                if let Some(scheduler) = w.get().and_then(std::sync::Weak::upgrade) {
                    drop(
                        Trigger::builder(&*scheduler)
                            .policies(TriggerPolicies::new().stuck_after(secs(3600)))
                            .bind(|| None),
                    );
                }
                let _ = tx.lock().unwrap().send(());
            })
            .build()
            .unwrap(),
    );
    weak.set(Arc::downgrade(&scheduler)).unwrap();
    // Two hung runs, one after the other: the monitor reports the second
    // too, so it survived the hook's first call.
    for round in 1..=2 {
        let release = common::Gate::default();
        let r = release.clone();
        let hung = Trigger::builder(&*scheduler)
            .policies(TriggerPolicies::new().stuck_after(Duration::from_millis(5)))
            .bind(move || {
                r.wait();
                None
            });
        hung.fire().unwrap();
        let reported = rx.recv_timeout(common::PATIENCE);
        release.open();
        assert!(reported.is_ok(), "round {round}: no report");
        eventually("the run ended", || hung.stats().iterations == 1);
    }
}

#[test]
fn cloned_retry_backoffs_draw_their_own_jitter() {
    // One policy cloned onto many triggers must not keep their retries in
    // step: each clone draws its own jitter (five equal draws of a 50 %
    // jitter by chance would take equal 64-bit seeds).
    let template = RetryBackoff::new(secs(1), secs(60)).jitter(0.5);
    let (mut a, mut b) = (template.clone(), template.clone());
    let first: Vec<_> = (0..5).map(|_| a.failed()).collect();
    let second: Vec<_> = (0..5).map(|_| b.failed()).collect();
    assert_ne!(first, second);
}

#[test]
fn a_fire_after_the_retry_limit_starts_a_fresh_round_of_retries() {
    let sim = Scheduler::builder().build_virtual();
    let policy = circulation_trigger::policy::PanicPolicy::Retry(
        RetryBackoff::new(secs(1), secs(1)).max_retries(1),
    );
    let trigger = Trigger::builder(&sim)
        .policies(TriggerPolicies::new().on_panic(policy))
        .bind(|| -> Option<Duration> { panic!("always down") });
    common::quiet_panics();
    trigger.fire().unwrap();
    sim.advance(secs(10)); // runs at 0 s and its one retry at 1 s, then stops
    assert_eq!(trigger.stats().iterations, 2);
    trigger.fire().unwrap(); // "refresh now" at 10 s
    sim.advance(secs(10));
    assert_eq!(
        trigger.stats().iterations,
        4,
        "the fire at 10 s and its retry at 11 s"
    );
}

/// `RetryBackoff::seed` is documented "Seeds the jitter, for deterministic
/// tests", but `TriggerBuilder::bind` clones the policy, and a clone draws
/// a fresh generator: the seed given to `circulation_trigger::policy::PanicPolicy::Retry` is ignored.
#[test]
fn a_seeded_retry_backoff_keeps_its_seed_once_bound() {
    common::quiet_panics();
    let backoff = || RetryBackoff::new(secs(1), secs(1_000)).jitter(0.5).seed(7);
    // What the seeded back-off itself produces.
    let mut reference = backoff();
    let expected: Vec<Duration> = (0..5).map(|_| reference.failed().unwrap()).collect();

    // No coalescing: a retry then runs exactly its delay later.
    let sim = Scheduler::builder()
        .coalesce_periodic(false)
        .build_virtual();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let (log, clock) = (starts.clone(), sim.clock());
    let trigger = Trigger::builder(&sim)
        .policies(
            TriggerPolicies::new()
                .on_panic(circulation_trigger::policy::PanicPolicy::Retry(backoff())),
        )
        .bind(move || -> Option<Duration> {
            log.lock().unwrap().push(clock.now());
            panic!("boom: always down");
        });
    trigger.fire().unwrap();
    sim.advance(secs(10_000));
    let starts = starts.lock().unwrap();
    let gaps: Vec<Duration> = starts.windows(2).map(|w| w[1] - w[0]).take(5).collect();
    // Virtual time is in whole microseconds: compare at that precision.
    let micros = |v: &[Duration]| -> Vec<u64> {
        v.iter()
            .map(|d| d.as_nanos().div_ceil(1_000) as u64)
            .collect()
    };
    assert_eq!(
        micros(&gaps),
        micros(&expected),
        "the retry delays ignore RetryBackoff::seed"
    );
}

/// `TriggerBuilder::policies` merges: a policy a later value leaves unset
/// keeps the earlier setting, and one it sets replaces it. A refresher's
/// one-second default cooldown therefore survives a user's debounce.
#[test]
fn policies_given_twice_merge_and_a_refreshers_cooldown_survives_a_debounce() {
    let sim = Scheduler::builder().build_virtual();
    let trigger = Trigger::builder(&sim)
        .policies(TriggerPolicies::new().min_interval(secs(10)))
        .policies(TriggerPolicies::new().debounce(Duration::from_millis(100), secs(1)))
        .bind(|| None);
    trigger.fire().unwrap();
    sim.advance(Duration::from_millis(100)); // debounced: the first run at 0.1 s
    trigger.fire().unwrap();
    sim.advance(secs(20)); // the cooldown from the first call holds the second to 10.1 s
    let stats = trigger.stats();
    assert_eq!(stats.iterations, 2);
    assert_eq!(stats.last_start, Some(Duration::from_millis(10_100)));

    let replaced = Trigger::builder(&sim)
        .policies(TriggerPolicies::new().min_interval(secs(10)))
        .policies(TriggerPolicies::new().min_interval(Duration::ZERO))
        .bind(|| None);
    replaced.fire().unwrap();
    sim.advance(Duration::ZERO);
    replaced.fire().unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(
        replaced.stats().iterations,
        2,
        "the later min_interval replaced it"
    );

    let config = circulation_trigger::Refresh::builder(&sim)
        .trigger(|t| t.policies(TriggerPolicies::new().debounce(Duration::from_millis(1), secs(1))))
        .bind(|| Ok::<_, String>(1u32));
    config.refresh_now().unwrap();
    sim.advance(Duration::from_millis(1));
    assert_eq!(config.refreshes(), 1);
    config.refresh_now().unwrap();
    sim.advance(Duration::from_millis(500));
    assert_eq!(
        config.refreshes(),
        1,
        "held by the default one-second cooldown"
    );
    sim.advance(secs(1));
    assert_eq!(config.refreshes(), 2);
}
