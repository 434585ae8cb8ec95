//! Models of the worker pool (G10, G13, G14, G15): workers running the
//! real worker loop take turns holding the timer role; a fire wakes a
//! worker; a holder that runs a task hands the role over, so a slow task
//! never holds another trigger's deadline — or, for a batch known to be
//! quick, keeps it, and if that batch blocks after all the monitor hands
//! the free role to a parked worker; a worker woken to take the role over
//! takes it ahead of a queued run; a worker the monitor starts
//! races shutdown; the monitor turns a free role due only for a stale
//! deadline itself, racing a fire, and starts no worker for it; a
//! coalesced re-arm never runs early; a stand-by takes the role of a
//! holder napping past its deadline, a fire meanwhile runs whoever holds
//! it, and the old holder passes on a wake-up meant for the taker. A lost
//! wake-up, or a role nobody takes, leaves every thread waiting: loom
//! reports it as a deadlock.
#![cfg(loom)]

mod common;

use circulation_trigger::model::{Harness, Watch};
use common::{run_model, Count, Exclusive};
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;
use std::time::Duration;

/// A one-shot gate a task waits on (loom's primitives: a missed signal
/// deadlocks the model).
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    fn wait(&self) {
        let (open, bed) = &*self.0;
        let mut open = open.lock().unwrap();
        while !*open {
            open = bed.wait(open).unwrap();
        }
    }

    fn open(&self) {
        *self.0 .0.lock().unwrap() = true;
        self.0 .1.notify_all();
    }
}

/// A trigger whose task opens the first gate, then waits at the second
/// (its worker stays busy until the model opens it).
fn blocker(h: &Harness) -> (circulation_trigger::Trigger, Gate, Gate) {
    let (started, release) = (Gate::default(), Gate::default());
    let (s, r) = (started.clone(), release.clone());
    let trigger = h.trigger(0, move || {
        s.open();
        r.wait();
        None
    });
    (trigger, started, release)
}

/// A trigger whose task does `first`, then shuts the scheduler down (so
/// the model's worker threads exit and can be joined).
fn closing_trigger(
    h: &Arc<Harness>,
    first: impl Fn() + Send + 'static,
) -> circulation_trigger::Trigger {
    let h2 = h.clone();
    h.trigger(0, move || {
        first();
        h2.scheduler().shutdown();
        None
    })
}

fn workers(h: &Arc<Harness>, n: usize) -> Vec<thread::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let h = h.clone();
            thread::spawn(move || h.run_worker(false))
        })
        .collect()
}

#[test]
fn g13_a_fire_wakes_a_worker_which_runs_the_task_once() {
    run_model(|| {
        let h = Arc::new(Harness::with_pool(2, 2));
        let cell = Exclusive::default();
        let c = cell.clone();
        let trigger = closing_trigger(&h, move || {
            c.touch();
        });
        let threads = workers(&h, 2);
        trigger.fire().unwrap();
        for t in threads {
            t.join().unwrap(); // deadlocks if no worker was woken
        }
        assert_eq!(cell.get(), 1);
    });
}

#[test]
fn g14_the_role_holder_hands_the_wheel_over_before_running_a_task() {
    run_model(|| {
        let h = Arc::new(Harness::with_pool(2, 2));
        let gate = Gate::default();
        // B, due at 20 µs, opens the gate A's task waits on, then shuts down.
        let g = gate.clone();
        let b = closing_trigger(&h, move || g.open());
        // A, due at 10 µs, moves time past B's deadline and blocks until B
        // has run: only another worker holding the wheel can run B.
        let (g, h2, ran) = (gate.clone(), h.clone(), Count::default());
        let a_ran = ran.clone();
        let a = h.trigger(0, move || {
            a_ran.bump();
            h2.set_time(20);
            h2.release_timer(); // the holder's timeout, on the manual clock
            g.wait();
            None
        });
        a.fire_after(Duration::from_micros(10)).unwrap();
        b.fire_after(Duration::from_micros(20)).unwrap();
        let threads = workers(&h, 2);
        h.set_time(10);
        h.release_timer();
        for t in threads {
            t.join().unwrap(); // deadlocks if A's worker kept the wheel
        }
        assert_eq!(ran.get(), 1);
    });
}

#[test]
fn g14_a_stand_by_takes_the_role_of_a_holder_napping_past_its_deadline() {
    // The holder naps toward 10 µs with its role in the pool. The other
    // worker parks as its stand-by, whose timed wait may run out at any
    // point. Time reaches the deadline, and the holder's own timeout races
    // the stand-by: whichever looks first holds the role. The run happens
    // once, and the holder that lost its role goes on as a worker.
    run_model(|| {
        let h = Arc::new(Harness::with_pool_napping(2, 2));
        let cell = Exclusive::default();
        let c = cell.clone();
        let trigger = closing_trigger(&h, move || {
            c.touch();
        });
        trigger.fire_after(Duration::from_micros(10)).unwrap();
        let threads = workers(&h, 2);
        while !h.holder_naps() {
            thread::yield_now();
        }
        h.set_time(10);
        h.release_timer(); // the holder's timeout, on the manual clock
        for t in threads {
            t.join().unwrap(); // deadlocks if the role was lost
        }
        assert_eq!(cell.get(), 1);
    });
}

#[test]
fn g14_a_fire_during_a_nap_runs_whoever_holds_the_role() {
    // A fire for 5 µs arrives while the holder naps toward 10 µs, racing a
    // stand-by that takes the role at 10 µs. The fire pokes the napping
    // holder, or the inbox reaches the stand-by that took over. Both
    // triggers run once, and the second to run shuts down.
    run_model(|| {
        let h = Arc::new(Harness::with_pool_napping(2, 2));
        let ran = Count::default();
        let make = |h: &Arc<Harness>| {
            let (h2, ran) = (h.clone(), ran.clone());
            h.trigger(0, move || {
                if ran.bump() == 2 {
                    h2.scheduler().shutdown();
                }
                None
            })
        };
        let (late, early) = (make(&h), make(&h));
        late.fire_after(Duration::from_micros(10)).unwrap();
        let threads = workers(&h, 2);
        while !h.holder_naps() {
            thread::yield_now();
        }
        early.fire_after(Duration::from_micros(5)).unwrap();
        h.set_time(10);
        h.release_timer(); // the holder's timeout, on the manual clock
        for t in threads {
            t.join().unwrap(); // deadlocks if the fire or the role was lost
        }
        assert_eq!(ran.get(), 2);
    });
}

#[test]
fn g14_a_holder_whose_nap_was_taken_passes_on_a_wake_up_meant_for_the_taker() {
    // A worker that comes after the deadline takes the role of a holder
    // napping toward 10 µs, and runs the due trigger. Then it sleeps as the
    // holder with an empty wheel, while the old holder still waits on the
    // same condition variable. A fire for 11 µs wakes the holder to file
    // it. The wake-up may reach the old holder, which must pass it on. If
    // it does not, nothing wakes the new holder, and the last loop never
    // ends, which loom reports.
    run_model(|| {
        let h = Arc::new(Harness::with_pool_napping(2, 2));
        let ran = Count::default();
        let r = ran.clone();
        let first = h.trigger(0, move || {
            r.bump();
            None
        });
        let (h2, r) = (h.clone(), ran.clone());
        let second = h.trigger(0, move || {
            r.bump();
            h2.scheduler().shutdown();
            None
        });
        first.fire_after(Duration::from_micros(10)).unwrap();
        let mut threads = workers(&h, 1);
        while !h.holder_naps() {
            thread::yield_now();
        }
        h.set_time(10);
        threads.extend(workers(&h, 1));
        while ran.get() == 0 || !h.holder_sleeps_holding() {
            thread::yield_now();
        }
        second.fire_after(Duration::from_micros(1)).unwrap();
        h.set_time(11);
        // The new holder may have filed the fire before the clock moved,
        // and napped toward 11 µs. Its timeout then ends the nap.
        while ran.get() < 2 {
            if h.holder_naps() {
                h.release_timer();
            }
            thread::yield_now();
        }
        for t in threads {
            t.join().unwrap();
        }
    });
}

#[test]
fn g14_a_known_quick_run_that_blocks_leaves_the_role_to_the_monitor() {
    run_model(|| {
        let h = Arc::new(Harness::with_pool(2, 2));
        let (gate, blocked) = (Gate::default(), Gate::default());
        // B, due at 1,000 µs, opens the gate A's second run waits on.
        let g = gate.clone();
        let b = closing_trigger(&h, move || g.open());
        // A's first run ends at once, so its second looks quick: the worker
        // that wakes for it runs it without waking a successor for the
        // role (B is far off) — and this time it blocks until B has run.
        let runs = Count::default();
        let (g, bl, h2, r) = (gate.clone(), blocked.clone(), h.clone(), runs.clone());
        let a = h.trigger(0, move || {
            if r.bump() == 2 {
                h2.set_time(1_000);
                h2.release_timer(); // a holder's timeout, if one sleeps
                bl.open();
                g.wait();
            }
            None
        });
        let threads = workers(&h, 2);
        a.fire().unwrap();
        while runs.get() == 0 {
            thread::yield_now();
        }
        a.fire_after(Duration::from_micros(10)).unwrap();
        b.fire_after(Duration::from_micros(1_000)).unwrap();
        h.set_time(10);
        h.release_timer(); // the holder's timeout, on the manual clock
        blocked.wait();
        // The role is free and B is due, with no worker on its way: the
        // monitor's two looks without progress wake a parked worker.
        let mut watch = Watch::default();
        let _ = h.monitor_check(&mut watch, 1_000);
        let _ = h.monitor_check(&mut watch, 1_000);
        for t in threads {
            t.join().unwrap(); // deadlocks if nobody took the role for B
        }
        assert_eq!(runs.get(), 2);
    });
}

#[test]
fn g14_the_monitor_turns_a_role_due_for_a_stale_deadline_and_a_racing_fire_is_kept() {
    run_model(|| {
        let h = Arc::new(Harness::with_pool(1, 1));
        let (blocker, started, gate) = blocker(&h);
        let stale = h.trigger(0, || None);
        let runs = Count::default();
        let r = runs.clone();
        let racing = Arc::new(closing_trigger(&h, move || {
            r.bump();
        }));
        stale.fire_after(Duration::from_micros(10)).unwrap();
        let threads = workers(&h, 1);
        blocker.fire().unwrap();
        started.wait(); // the only worker is blocked; the role is free
        stale.suspend(); // its wheel entry, due at 10, is stale now
        h.set_time(20);
        let firer = {
            let racing = racing.clone();
            thread::spawn(move || racing.fire_after(Duration::from_micros(5)).unwrap())
        };
        // Two looks without progress while the free role seems due: the
        // monitor turns the wheel itself, finds nothing due, and starts no
        // worker (nor counts the limit as hit).
        let mut watch = Watch::default();
        assert!(!h.monitor_check(&mut watch, 20));
        assert!(!h.monitor_check(&mut watch, 20));
        firer.join().unwrap();
        let stats = h.scheduler().stats();
        assert_eq!((stats.workers, stats.worker_limit_hits), (1, 0));
        // The fire that raced the monitor's turn is kept: once the worker
        // is free it takes the role and runs it at 25.
        gate.open();
        h.set_time(25);
        h.release_timer(); // the holder's timeout, on the manual clock
        for t in threads {
            t.join().unwrap(); // deadlocks if the racing fire was lost
        }
        assert_eq!(runs.get(), 1);
    });
}

#[test]
fn g14_a_worker_the_monitor_starts_races_shutdown_and_nothing_is_lost() {
    run_model(|| {
        let h = Arc::new(Harness::with_pool(1, 2));
        let (blocker, started, release) = blocker(&h);
        let runs = Count::default();
        let n = runs.clone();
        let waiting = circulation_trigger::Trigger::builder(h.scheduler())
            .name("waiting")
            .bind(move || {
                n.bump();
                None
            });
        let core = workers(&h, 1);
        blocker.fire().unwrap();
        started.wait();
        waiting.fire().unwrap(); // every worker is busy: it waits
        let mut watch = Watch::default();
        assert!(!h.monitor_check(&mut watch, 0), "one look is no stall");
        assert!(h.monitor_check(&mut watch, 0), "no progress: start one");
        assert_eq!(h.workers(), 2);
        let extra = {
            let h = h.clone();
            thread::spawn(move || h.run_worker(true))
        };
        h.scheduler().shutdown();
        release.open();
        for t in core.into_iter().chain([extra]) {
            t.join().unwrap();
        }
        let report = h.scheduler().shutdown_report().unwrap();
        let discarded = report
            .discarded()
            .iter()
            .filter(|run| run.trigger() == Some("waiting"))
            .count();
        assert_eq!(
            runs.get() + discarded,
            1,
            "the waiting run either ran or is listed discarded: {report}"
        );
    });
}

#[test]
fn g14_an_idle_extra_worker_retires_or_exits_at_shutdown_and_a_fire_still_runs() {
    run_model(|| {
        let h = Arc::new(Harness::with_pool(1, 2));
        let cell = Exclusive::default();
        let c = cell.clone();
        let trigger = closing_trigger(&h, move || {
            c.touch();
        });
        h.count_extra_worker(); // as the monitor does before starting it
        assert_eq!(h.workers(), 2);
        let threads = workers(&h, 1);
        let extra = {
            let h = h.clone();
            thread::spawn(move || h.run_worker(true))
        };
        trigger.fire().unwrap();
        for t in threads.into_iter().chain([extra]) {
            t.join().unwrap(); // deadlocks if the fire woke a retiring worker
        }
        assert_eq!(cell.get(), 1);
    });
}

#[test]
fn g15_a_coalesced_periodic_rearm_never_runs_early() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let runs = Count::default();
        let r = runs.clone();
        // Every run asks for the next in 1 s: served on a 2 ms grid.
        let trigger = h.trigger(0, move || {
            r.bump();
            Some(Duration::from_secs(1))
        });
        h.set_time(1_234);
        trigger.fire().unwrap();
        // The timer turns while the first run re-arms (same instant: time
        // stands still, so the deadline is 1_001_234 µs, served at 1_002_000).
        let timer = {
            let h = h.clone();
            thread::spawn(move || h.timer_turn(1_234))
        };
        assert_eq!(h.run_all(), 1);
        timer.join().unwrap();
        h.timer_turn(1_001_233);
        assert_eq!(h.run_all(), 0, "nothing before the deadline");
        h.timer_turn(1_001_999);
        assert_eq!(h.run_all(), 0, "nothing before the coalesced deadline");
        h.timer_turn(1_002_000);
        assert_eq!(h.run_all(), 1);
        assert_eq!(runs.get(), 2);
    });
}

#[test]
fn g14_a_worker_woken_for_the_role_takes_it_ahead_of_a_queued_run() {
    run_model(|| {
        let h = Arc::new(Harness::with_pool(3, 3));
        let gate = Gate::default();
        // B, due at 1,000 µs (far enough that a holder finding A2 queued
        // could think it comes back in time), opens the gate both A's wait
        // on, then shuts down.
        let g = gate.clone();
        let b = closing_trigger(&h, move || g.open());
        // A1 and A2, first runs due together at 10 µs, block until B has
        // run: the holder runs one, and of the two workers left one must
        // take the role — the successor, ahead of the other A; and if it
        // turns with A2 still queued, it must not count on coming back —
        // for B to run at all.
        let ran = Count::default();
        let blocker = |h2: Arc<Harness>, g: Gate, r: Count| {
            move || {
                if r.bump() == 2 {
                    h2.set_time(1_000);
                    h2.release_timer(); // the holder's timeout, on the manual clock
                }
                g.wait();
                None
            }
        };
        let a1 = h.trigger(0, blocker(h.clone(), gate.clone(), ran.clone()));
        let a2 = h.trigger(0, blocker(h.clone(), gate.clone(), ran.clone()));
        a1.fire_after(Duration::from_micros(10)).unwrap();
        a2.fire_after(Duration::from_micros(10)).unwrap();
        b.fire_after(Duration::from_micros(1_000)).unwrap();
        let threads = workers(&h, 3);
        h.set_time(10);
        h.release_timer();
        for t in threads {
            t.join().unwrap(); // deadlocks if the role is left free
        }
        assert_eq!(ran.get(), 2);
    });
}

/// What a periodic trigger's task keeps, until the timer lets go of the
/// trigger and a worker drops it: counts the drop, then shuts the
/// scheduler down so the model's workers exit (if the timer kept the
/// task, they would sleep toward its hour for ever: loom reports a
/// deadlock).
struct ShutsDown(Arc<Harness>, Count);

impl Drop for ShutsDown {
    fn drop(&mut self) {
        self.1.bump();
        self.0.scheduler().shutdown();
    }
}

/// Two workers (the one that runs the task is not the one that holds the
/// role, asleep, while the re-arm is pushed) and a trigger whose task,
/// holding a [`ShutsDown`], does `body` and re-arms for an hour.
fn hour_long_rearm(
    body: impl Fn() + Send + Sync + 'static,
) -> (Arc<Harness>, circulation_trigger::Trigger, Count) {
    let h = Arc::new(Harness::with_pool(2, 2));
    let drops = Count::default();
    let guard = ShutsDown(h.clone(), drops.clone());
    let trigger = h.trigger(0, move || {
        let _keep = &guard;
        body();
        Some(Duration::from_secs(3600))
    });
    (h, trigger, drops)
}

#[test]
fn the_last_handle_dropped_as_a_periodic_run_re_arms_frees_the_task_on_a_worker() {
    // The trigger's run re-arms for an hour; its last handle goes at any
    // point: before the run, during it, between the re-arm and its push
    // to the inbox (the push then sees no handle left and asks for a turn
    // at once), or once the deadline is on the wheel. In every case the
    // timer lets go of the trigger and a worker drops its task.
    run_model(|| {
        let (h, trigger, drops) = hour_long_rearm(|| {});
        let threads = workers(&h, 2);
        trigger.fire().unwrap();
        drop(trigger);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(drops.get(), 1, "freed once");
    });
}

#[test]
fn the_last_handle_of_a_paused_periodic_trigger_frees_the_task_on_a_worker() {
    // As above, but paused first: the drop's suspend then writes nothing,
    // and only the drop's Acquire read of the request word shows it that
    // the run asked for a deadline (so the timer may hold the trigger).
    run_model(|| {
        let (started, release) = (Gate::default(), Gate::default());
        let (s, r) = (started.clone(), release.clone());
        let (h, trigger, drops) = hour_long_rearm(move || {
            s.open();
            r.wait();
        });
        let threads = workers(&h, 2);
        trigger.fire().unwrap();
        started.wait();
        release.open();
        trigger.pause();
        drop(trigger);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(drops.get(), 1, "freed once");
    });
}
