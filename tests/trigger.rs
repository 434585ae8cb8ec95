//! Integration tests of the trigger contract (docs/DESIGN.md, "Guarantees",
//! G1–G13) on the real, threaded scheduler. Time bounds are generous: they
//! check ordering ("not before", "eventually"), never speed.

mod common;

use circulation_trigger::{report::TriggerState, FireError, Scheduler, Trigger, WeakTrigger};
use common::{eventually, Counter, Storm};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

fn scheduler(workers: usize) -> Scheduler {
    Scheduler::builder().workers(workers).build().unwrap()
}

/// Waits until no iteration of `trigger` is in flight.
fn settle(trigger: &Trigger) {
    eventually("the iteration in flight ends", || {
        !matches!(
            trigger.stats().state,
            circulation_trigger::report::TriggerState::Running
                | circulation_trigger::report::TriggerState::RunningWithRerun
        )
    });
}

#[test]
fn g1_iterations_never_overlap() {
    let scheduler = scheduler(4);
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Counter::default();
    let runs = Counter::default();
    let (flag, o, r) = (inside.clone(), overlaps.clone(), runs.clone());
    let trigger = Trigger::bind(&scheduler, move || {
        if flag.swap(true, Ordering::SeqCst) {
            o.bump();
        }
        r.bump();
        thread::yield_now();
        flag.store(false, Ordering::SeqCst);
        Some(Duration::ZERO)
    });
    let storm = Storm::start(&trigger, 3, |t| {
        t.fire().unwrap();
        t.fire_after(Duration::from_micros(50)).unwrap();
    });
    thread::sleep(Duration::from_millis(300));
    storm.stop();
    trigger.suspend();
    settle(&trigger);
    assert_eq!(overlaps.get(), 0);
    assert!(runs.get() > 0);
}

#[test]
fn g2_task_state_needs_no_lock_and_sees_prior_writes() {
    let scheduler = scheduler(4);
    let shared = Arc::new(AtomicU64::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (data, log) = (shared.clone(), seen.clone());
    let mut history: Vec<u64> = Vec::new(); // plain FnMut state
    let trigger = Trigger::bind(&scheduler, move || {
        // Relaxed on purpose: visibility must come from the trigger (G2).
        history.push(data.load(Ordering::Relaxed));
        log.lock().unwrap().clone_from(&history);
        None
    });
    for round in 1..=50 {
        shared.store(round, Ordering::Relaxed);
        trigger.fire().unwrap();
        eventually("the fire is served", || {
            seen.lock().unwrap().len() == round as usize
        });
        assert_eq!(*seen.lock().unwrap().last().unwrap(), round);
    }
}

#[test]
fn g3_latest_wins_shorter_after_longer() {
    let scheduler = scheduler(2);
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        r.bump();
        None
    });
    let start = Instant::now();
    trigger.fire_after(Duration::from_millis(700)).unwrap();
    trigger.fire_after(Duration::from_millis(30)).unwrap();
    eventually("the shorter request runs", || runs.get() == 1);
    assert!(start.elapsed() >= Duration::from_millis(30));
    // The superseded 700 ms request never runs.
    thread::sleep(Duration::from_millis(1_200));
    assert_eq!(runs.get(), 1);
}

#[test]
fn g3_latest_wins_longer_after_shorter() {
    let scheduler = scheduler(2);
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        r.bump();
        None
    });
    let start = Instant::now();
    trigger.fire_after(Duration::from_millis(20)).unwrap();
    trigger.fire_after(Duration::from_millis(400)).unwrap();
    thread::sleep(Duration::from_millis(150));
    assert_eq!(runs.get(), 0, "the superseded 20 ms request must not run");
    eventually("the longer request runs", || runs.get() == 1);
    assert!(start.elapsed() >= Duration::from_millis(400));
    thread::sleep(Duration::from_millis(100));
    assert_eq!(runs.get(), 1);
}

#[test]
fn g3_fire_then_fire_after_cancels_the_immediate_run() {
    let scheduler = scheduler(1);
    let (gate_tx, gate_rx) = mpsc::channel::<()>();
    let blocker = Trigger::bind(&scheduler, move || {
        gate_rx.recv().unwrap();
        None
    });
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        r.bump();
        None
    });
    blocker.fire().unwrap(); // occupies the only worker
    eventually("the blocker runs", || {
        matches!(
            blocker.stats().state,
            circulation_trigger::report::TriggerState::Running
                | circulation_trigger::report::TriggerState::RunningWithRerun
        )
    });
    trigger.fire().unwrap();
    trigger.fire_after(Duration::from_secs(3600)).unwrap();
    gate_tx.send(()).unwrap();
    settle(&blocker);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(runs.get(), 0);
}

/// `fire_after(d)` for each `d`, one at a time: each run starts at least
/// `d` after the call began.
fn fire_after_never_runs_early(delays: impl IntoIterator<Item = Duration>) {
    let scheduler = scheduler(2);
    let (tx, rx) = mpsc::channel();
    let trigger = Trigger::bind(&scheduler, move || {
        tx.send(Instant::now()).unwrap();
        None
    });
    for delay in delays {
        let called = Instant::now();
        trigger.fire_after(delay).unwrap();
        let started = rx.recv_timeout(common::PATIENCE).unwrap();
        assert!(
            started - called >= delay,
            "{delay:?} ran after {:?}",
            started - called
        );
    }
}

#[test]
fn g4_fire_after_never_runs_early() {
    fire_after_never_runs_early([1, 5, 20, 75].map(Duration::from_millis));
}

#[test]
fn g4_g5_fires_during_a_run_give_exactly_one_follow_up() {
    let scheduler = scheduler(4);
    let entered = Arc::new(Barrier::new(2));
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let runs = Counter::default();
    let (e, r) = (entered.clone(), runs.clone());
    let trigger = Trigger::bind(&scheduler, move || {
        if r.bump() == 1 {
            e.wait();
            release_rx.recv().unwrap();
        }
        None
    });
    trigger.fire().unwrap();
    entered.wait();
    let firers: Vec<_> = (0..4)
        .map(|_| {
            let t = trigger.clone();
            thread::spawn(move || (0..250).for_each(|_| t.fire().unwrap()))
        })
        .collect();
    firers.into_iter().for_each(|f| f.join().unwrap());
    eventually("a fire reserved the follow-up", || {
        trigger.stats().state == circulation_trigger::report::TriggerState::RunningWithRerun
    });
    release_tx.send(()).unwrap();
    eventually("the follow-up runs", || runs.get() == 2);
    settle(&trigger);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(runs.get(), 2, "1,000 fires during a run give one follow-up");
}

#[test]
fn g6_suspend_stops_a_periodic_chain() {
    let scheduler = scheduler(2);
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        r.bump();
        Some(Duration::from_millis(1))
    });
    trigger.fire().unwrap();
    eventually("the chain circulates", || runs.get() >= 5);
    trigger.suspend();
    settle(&trigger);
    let after = runs.get();
    thread::sleep(Duration::from_millis(200));
    assert_eq!(runs.get(), after, "no iteration starts after suspend");
    trigger.fire().unwrap();
    eventually("fire restarts it", || runs.get() > after + 3);
}

#[test]
fn g6_suspend_during_a_run_ignores_its_returned_delay() {
    let scheduler = scheduler(2);
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        r.bump();
        entered_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        Some(Duration::ZERO)
    });
    trigger.fire().unwrap();
    entered_rx.recv().unwrap();
    trigger.fire().unwrap(); // would re-run...
    trigger.suspend(); // ...but suspend wins
    release_tx.send(()).unwrap();
    settle(&trigger);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(runs.get(), 1);
}

#[test]
fn g7_none_stops_until_fired() {
    let scheduler = scheduler(2);
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        let n = r.bump();
        (n % 3 != 0).then_some(Duration::from_millis(1))
    });
    trigger.fire().unwrap();
    eventually("three runs then stop", || runs.get() == 3);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(runs.get(), 3);
    trigger.fire().unwrap();
    eventually("fired again: three more", || runs.get() == 6);
}

#[test]
fn g8_panics_are_caught_reported_and_the_trigger_stays_usable() {
    let hooked = Arc::new(Mutex::new(Vec::new()));
    let h = hooked.clone();
    let scheduler = Scheduler::builder()
        .workers(1)
        .panic_hook(move |panic| h.lock().unwrap().push(panic.to_string()))
        .build()
        .unwrap();
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::builder(&scheduler).name("flaky").bind(move || {
        if r.bump() == 1 {
            panic!("boom");
        }
        None
    });
    let other_runs = Counter::default();
    let o = other_runs.clone();
    let other = Trigger::bind(&scheduler, move || {
        o.bump();
        None
    });
    trigger.fire().unwrap();
    eventually("the panic is counted", || scheduler.stats().panics == 1);
    settle(&trigger);
    assert!(
        !matches!(
            trigger.stats().state,
            circulation_trigger::report::TriggerState::Running
                | circulation_trigger::report::TriggerState::RunningWithRerun
        ),
        "running bit released"
    );
    assert_eq!(
        *hooked.lock().unwrap(),
        ["task of trigger `flaky` panicked: boom"]
    );
    // Stopped circulating, but usable; the other trigger is unaffected.
    trigger.fire().unwrap();
    other.fire().unwrap();
    eventually("both run", || runs.get() == 2 && other_runs.get() == 1);
}

#[test]
fn g10_a_zero_delay_loop_does_not_starve_others() {
    let scheduler = scheduler(1);
    let spins = Counter::default();
    let s = spins.clone();
    let hog = Trigger::bind(&scheduler, move || {
        s.bump();
        Some(Duration::ZERO)
    });
    let runs = Counter::default();
    let r = runs.clone();
    let other = Trigger::bind(&scheduler, move || {
        r.bump();
        Some(Duration::from_millis(1))
    });
    hog.fire().unwrap();
    other.fire().unwrap();
    eventually("the other trigger keeps running", || runs.get() >= 20);
    assert!(spins.get() > 20);
    hog.suspend();
}

#[test]
fn g10_a_reservation_storm_does_not_pin_the_worker() {
    let scheduler = scheduler(1);
    let stormed = Trigger::bind(&scheduler, || {
        thread::sleep(Duration::from_micros(200));
        None
    });
    let runs = Counter::default();
    let r = runs.clone();
    let other = Trigger::bind(&scheduler, move || {
        r.bump();
        Some(Duration::from_millis(1))
    });
    other.fire().unwrap();
    let storm = Storm::start(&stormed, 1, |t| t.fire().unwrap());
    let before = runs.get();
    eventually("the other trigger still runs", || runs.get() >= before + 20);
    storm.stop();
}

#[test]
fn g11_tasks_fire_each_other_and_themselves_without_deadlock() {
    let scheduler = scheduler(2);
    let ping_cell: Arc<OnceLock<WeakTrigger>> = Arc::default();
    let pong_cell: Arc<OnceLock<WeakTrigger>> = Arc::default();
    let (pings, pongs) = (Counter::default(), Counter::default());
    let (pc, c) = (pong_cell.clone(), pings.clone());
    let ping = Trigger::bind(&scheduler, move || {
        c.bump();
        if let Some(pong) = pc.get().and_then(WeakTrigger::upgrade) {
            pong.fire().unwrap();
        }
        None
    });
    let (pc, c) = (ping_cell.clone(), pongs.clone());
    let pong = Trigger::bind(&scheduler, move || {
        c.bump();
        if let Some(ping) = pc.get().and_then(WeakTrigger::upgrade) {
            ping.fire().unwrap();
        }
        None
    });
    ping_cell.set(ping.downgrade()).unwrap();
    pong_cell.set(pong.downgrade()).unwrap();
    // A third task drives itself: re-fires, re-arms and finally suspends
    // its own trigger from inside its run.
    let own_cell: Arc<OnceLock<WeakTrigger>> = Arc::default();
    let (me, c) = (own_cell.clone(), Counter::default());
    let own_runs = c.clone();
    let own = Trigger::bind(&scheduler, move || {
        let me = me.get().and_then(WeakTrigger::upgrade).unwrap();
        if c.bump() < 500 {
            me.fire_after(Duration::from_secs(60)).unwrap();
            me.fire().unwrap();
        } else {
            me.suspend();
        }
        Some(Duration::ZERO) // ignored: the calls above superseded this run
    });
    own_cell.set(own.downgrade()).unwrap();
    ping.fire().unwrap();
    own.fire().unwrap();
    eventually("ping-pong goes on", || {
        pings.get() > 1_000 && pongs.get() > 1_000
    });
    eventually("the self-driven task ran to its end", || {
        own_runs.get() == 500
    });
    settle(&own);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(own_runs.get(), 500);
    drop((ping, pong));
    scheduler.shutdown();
    assert!(scheduler.await_termination(common::PATIENCE));
}

#[test]
fn g12_behaviour_is_unchanged_across_the_version_wrap() {
    let scheduler = scheduler(2);
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::builder(&scheduler)
        .start_version((1 << 30) - 3)
        .bind(move || {
            r.bump();
            None
        });
    for expected in 1..=8 {
        trigger.fire_after(Duration::from_secs(3600)).unwrap();
        trigger.fire().unwrap();
        eventually("each fire runs once", || runs.get() == expected);
        settle(&trigger);
    }
    assert!(trigger.stats().version < 100, "the version wrapped");
    trigger.fire_after(Duration::from_millis(10)).unwrap();
    trigger.suspend();
    thread::sleep(Duration::from_millis(100));
    assert_eq!(runs.get(), 8, "suspend still wins after the wrap");
}

#[test]
fn g13_a_fire_storm_does_not_stop_the_task() {
    let scheduler = scheduler(2);
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        r.bump();
        thread::sleep(Duration::from_millis(1));
        None
    });
    let storm = Storm::start(&trigger, 2, |t| t.fire().unwrap());
    // Generous: the benchmark checks ~900/s; here only that it keeps going.
    eventually("the task keeps running under the storm", || {
        runs.get() >= 100
    });
    let fires = storm.stop();
    assert!(fires > runs.get() as u64);
}

#[test]
fn overflowing_delays_are_refused_without_touching_the_chain() {
    let scheduler = scheduler(2);
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        r.bump();
        Some(Duration::from_millis(1))
    });
    trigger.fire().unwrap();
    eventually("the chain circulates", || runs.get() >= 3);
    let version = trigger.stats().version;
    assert_eq!(
        trigger.fire_after(Duration::MAX),
        Err(FireError::DelayTooLong(Duration::MAX))
    );
    assert_eq!(trigger.stats().version, version, "version untouched");
    let before = runs.get();
    eventually("the chain still circulates", || runs.get() >= before + 3);
    // A task returning a huge delay just stops.
    let stopped = Counter::default();
    let s = stopped.clone();
    let huge = Trigger::bind(&scheduler, move || {
        s.bump();
        Some(Duration::MAX)
    });
    huge.fire().unwrap();
    eventually("it ran", || stopped.get() == 1);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(stopped.get(), 1);
}

#[test]
fn fires_after_shutdown_are_refused() {
    let scheduler = scheduler(1);
    let trigger = Trigger::bind(&scheduler, || None);
    scheduler.shutdown();
    assert_eq!(trigger.fire(), Err(FireError::Shutdown));
    assert_eq!(
        trigger.fire_after(Duration::from_secs(1)),
        Err(FireError::Shutdown)
    );
    trigger.suspend(); // still fine
    let message = FireError::Shutdown.to_string();
    assert!(message.contains("shut down"));
}

struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn dropping_the_last_handle_frees_the_task_despite_a_far_deadline() {
    let scheduler = scheduler(1);
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = DropFlag(dropped.clone());
    let trigger = Trigger::bind(&scheduler, move || {
        let _keep = &flag;
        None
    });
    trigger.fire_after(Duration::from_secs(3600)).unwrap();
    // The timer takes its inbox in order: once a trigger pushed after this
    // one has run, this one's hour-long deadline is on the wheel (not
    // merely in the inbox, where the turn would read the suspend instead).
    let (ran_tx, ran_rx) = mpsc::channel();
    let later = Trigger::bind(&scheduler, move || {
        let _ = ran_tx.send(());
        None
    });
    later.fire_after(Duration::from_millis(1)).unwrap();
    ran_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(matches!(trigger.stats().state, TriggerState::Armed(_)));
    let weak = trigger.downgrade();
    let clone = trigger.clone();
    drop(trigger);
    assert!(!dropped.load(Ordering::SeqCst), "a clone still holds it");
    drop(clone);
    eventually("the task is dropped", || dropped.load(Ordering::SeqCst));
    assert!(weak.upgrade().is_none());
}

#[test]
fn dropping_the_last_handle_of_a_trigger_never_armed_frees_its_task_in_the_drop() {
    // Only a trigger that asked for a deadline can be held by the timer
    // (and is freed by a worker, once the timer lets go of it): a trigger
    // only ever fired goes with its last handle, on the dropping thread.
    let scheduler = scheduler(1);
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = DropFlag(dropped.clone());
    let (ran_tx, ran_rx) = mpsc::channel();
    let trigger = Trigger::bind(&scheduler, move || {
        let _keep = &flag;
        let _ = ran_tx.send(());
        None
    });
    trigger.fire().unwrap();
    ran_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // The run has ended once the worker looks for work again: a second,
    // later trigger's run comes after it on the one worker.
    let (next_tx, next_rx) = mpsc::channel();
    let next = Trigger::bind(&scheduler, move || {
        let _ = next_tx.send(());
        None
    });
    next.fire().unwrap();
    next_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    drop(trigger);
    assert!(dropped.load(Ordering::SeqCst), "freed in the drop");
}

#[test]
fn dropping_the_last_handle_during_a_run_frees_the_task_after_it() {
    let scheduler = scheduler(1);
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = DropFlag(dropped.clone());
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        let _keep = &flag;
        r.bump();
        entered_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        Some(Duration::ZERO)
    });
    trigger.fire().unwrap();
    entered_rx.recv().unwrap();
    let (weak, clone) = (trigger.downgrade(), trigger.clone());
    drop(trigger);
    assert_eq!(weak.upgrade().as_ref(), Some(&clone), "a handle is left");
    drop(clone);
    // The run in flight holds the trigger, but no handle comes back.
    assert!(weak.upgrade().is_none(), "upgraded after the last handle");
    thread::sleep(Duration::from_millis(20));
    assert!(!dropped.load(Ordering::SeqCst), "still running");
    release_tx.send(()).unwrap();
    eventually("freed after the iteration", || {
        dropped.load(Ordering::SeqCst)
    });
    assert_eq!(runs.get(), 1, "the returned delay was ignored");
}

#[test]
fn debug_output_names_the_trigger() {
    let scheduler = scheduler(1);
    let trigger = Trigger::builder(&scheduler)
        .name("config-refresh")
        .bind(|| None);
    let text = format!("{trigger:?}");
    assert!(text.contains("config-refresh"), "{text}");
    assert!(text.contains("running: false"), "{text}");
}

/// Fires a trigger when dropped (captured by another trigger's task).
struct FireOnDrop(Trigger);

impl Drop for FireOnDrop {
    fn drop(&mut self) {
        let _ = self.0.fire();
    }
}

#[test]
fn a_task_dropped_on_a_worker_may_fire_from_its_destructor() {
    // Dropping the last handle just as a periodic run re-arms leaves the
    // worker's reference the last one: the task is dropped there, and its
    // captures' destructors run — here one fires another trigger, which
    // must not find the worker holding the scheduler's lock. Racy when
    // broken (the window is the re-arm's hand-over), so many rounds; a
    // deadlock would block a fire for ever, so the rounds run on a thread
    // of their own and the test gives up on them after a while.
    const ROUNDS: u64 = 2_000;
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let scheduler = scheduler(2);
        let fired = Counter::default();
        let f = fired.clone();
        let target = Trigger::bind(&scheduler, move || {
            f.bump();
            None
        });
        for round in 0..ROUNDS {
            let on_drop = FireOnDrop(target.clone());
            let periodic = Trigger::bind(&scheduler, move || {
                let _keep = &on_drop;
                Some(Duration::from_micros(20))
            });
            periodic.fire().unwrap();
            thread::sleep(Duration::from_micros(round % 97));
            drop(periodic);
        }
        // The scheduler is alive: it runs the target's last fire.
        let last = target.fire_and_wait(common::PATIENCE);
        done_tx.send((last, fired.get())).unwrap();
    });
    let (last, fired) = done_rx
        .recv_timeout(common::PATIENCE)
        .expect("the scheduler deadlocked");
    assert!(last.is_ok(), "{last:?}");
    assert!(fired >= 1);
}

/// A panic payload whose own `Drop` panics.
struct PanicsWhenDropped;

impl Drop for PanicsWhenDropped {
    fn drop(&mut self) {
        panic!("a payload that panics as it is dropped");
    }
}

#[test]
fn g8_a_panic_payload_that_panics_as_it_is_dropped_is_contained() {
    common::quiet_panics();
    // Real threads: the worker survives and the trigger stays usable.
    let scheduler = scheduler(2);
    let calls = Counter::default();
    let c = calls.clone();
    let trigger = Trigger::bind(&scheduler, move || {
        if c.bump() == 1 {
            std::panic::panic_any(PanicsWhenDropped);
        }
        None
    });
    assert_eq!(
        trigger.fire_and_wait(common::PATIENCE),
        Ok(circulation_trigger::Outcome::Panicked)
    );
    assert_eq!(
        trigger.fire_and_wait(common::PATIENCE),
        Ok(circulation_trigger::Outcome::Completed)
    );
    assert_eq!(scheduler.stats().panics, 1);
    // Virtual time: `advance` does not unwind.
    let sim = Scheduler::builder().build_virtual();
    let virtual_trigger = Trigger::bind(&sim, || std::panic::panic_any(PanicsWhenDropped));
    virtual_trigger.fire().unwrap();
    let advanced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sim.advance(Duration::from_secs(1))
    }));
    assert_eq!(advanced.ok(), Some(1));
}

#[test]
fn g4_g12_more_than_half_the_version_ring_of_coalesced_fires_keeps_the_follow_up() {
    // Fires into a reserved re-run bump only the state word's version; past
    // 2^29 of them (half the 30-bit ring) the request word must have kept
    // up, or the re-run's publish at `exit` is judged older and refused.
    const FIRES: u32 = (1 << 29) + 2;
    let sim = Scheduler::builder().build_virtual();
    let me: Arc<OnceLock<WeakTrigger>> = Arc::default();
    let cell = me.clone();
    let runs = Counter::default();
    let r = runs.clone();
    let trigger = Trigger::bind(&sim, move || {
        if r.bump() == 1 {
            let me = cell.get().and_then(WeakTrigger::upgrade).unwrap();
            for _ in 0..FIRES {
                let _ = me.fire();
            }
        }
        None
    });
    me.set(trigger.downgrade()).unwrap();
    trigger.fire().unwrap();
    sim.advance(Duration::from_secs(1));
    assert_eq!(runs.get(), 2, "fired while running: exactly one more run");
    assert_eq!(trigger.stats().coalesced_fires, u64::from(FIRES) - 1);
}

#[test]
fn g15_fire_after_is_never_early_at_microsecond_delays() {
    // Long enough for the fire path's clock to have learned its rate and
    // to read the TSC through an anchor (see `src/clock/tsc/mod.rs`).
    let scheduler = scheduler(1);
    let warm = Trigger::bind(&scheduler, || None);
    warm.fire_after(Duration::from_secs(1)).unwrap(); // starts the learning
    thread::sleep(Duration::from_millis(30));
    fire_after_never_runs_early(
        (0..300u64).map(|round| Duration::from_micros(20 + round % 7 * 70)),
    );
}
