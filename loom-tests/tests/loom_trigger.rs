//! Models of the trigger contract on the crate's real code: G1 mutual
//! exclusion, G2 happens-before, G3 latest wins, G4 no lost fire, G5
//! coalescing, G6 suspend, G8 panic, G12 wrap, and drop. The model's
//! threads play users and workers through `model::Harness`.
#![cfg(loom)]

mod common;

use circulation_trigger::model::{Counted, Harness};
use common::{run_model, run_model_bounded, Count, Exclusive};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

/// Versions to start from: 0, and just below the 30-bit wrap (G12).
const STARTS: [u32; 2] = [0, (1 << 30) - 1];

fn counting(h: &Harness, version: u32) -> (circulation_trigger::Trigger, Exclusive) {
    let state = Exclusive::default();
    let s = state.clone();
    let trigger = h.trigger(version, move || {
        s.touch();
        None
    });
    (trigger, state)
}

#[test]
fn g1_two_fires_race_a_running_iteration() {
    for start in STARTS {
        run_model(move || {
            let h = Arc::new(Harness::new());
            let (trigger, state) = counting(&h, start);
            trigger.fire().unwrap();
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    let (h, t) = (h.clone(), trigger.clone());
                    thread::spawn(move || {
                        t.fire().unwrap();
                        h.run_one();
                        h.run_one();
                    })
                })
                .collect();
            h.run_one();
            workers.into_iter().for_each(|w| w.join().unwrap());
            h.run_all();
            let runs = state.get();
            assert!((1..=3).contains(&runs), "runs = {runs}");
            assert!(!Harness::snapshot(&trigger).is_running());
        });
    }
}

#[test]
fn g2_data_written_before_fire_is_seen_by_the_run_serving_it() {
    for start in STARTS {
        run_model(move || {
            let h = Arc::new(Harness::new());
            let data = Arc::new(AtomicUsize::new(0));
            let seen = Arc::new(AtomicUsize::new(usize::MAX));
            let (d, s) = (data.clone(), seen.clone());
            let trigger = h.trigger(start, move || {
                // Relaxed on purpose: visibility must come from the trigger.
                s.store(d.load(Ordering::Relaxed), Ordering::Relaxed);
                None
            });
            trigger.fire().unwrap();
            // A worker runs the first iteration while the user writes and
            // fires: the fire may be served by a reservation re-run.
            let worker = {
                let h = h.clone();
                thread::spawn(move || {
                    h.run_one();
                })
            };
            let user = {
                let (h, t) = (h.clone(), trigger.clone());
                thread::spawn(move || {
                    data.store(1, Ordering::Relaxed);
                    t.fire().unwrap();
                    h.run_one();
                })
            };
            worker.join().unwrap();
            user.join().unwrap();
            // Whatever is left: the re-run after a reservation, if any.
            h.run_all();
            assert_eq!(seen.load(Ordering::Relaxed), 1, "the last run saw the data");
        });
    }
}

#[test]
fn g2_iteration_n_writes_are_seen_by_iteration_n_plus_one_on_another_worker() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let data = Arc::new(AtomicUsize::new(0));
        let d = data.clone();
        let trigger = h.trigger(0, move || {
            // Relaxed: iteration N+1 must see N's write through the trigger.
            let n = d.load(Ordering::Relaxed);
            d.store(n + 1, Ordering::Relaxed);
            (n == 0).then_some(Duration::ZERO)
        });
        trigger.fire().unwrap();
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let h = h.clone();
                thread::spawn(move || {
                    h.run_one();
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join().unwrap());
        h.run_all();
        assert_eq!(data.load(Ordering::Relaxed), 2);
    });
}

#[test]
fn g3_g4_delayed_requests_latest_wins_with_a_running_iteration() {
    // (first, second) delays in µs; the second call is the latest.
    for (first, second) in [(500u64, 20u64), (20, 500)] {
        run_model(move || {
            let h = Arc::new(Harness::new());
            let (trigger, state) = counting(&h, 0);
            trigger.fire().unwrap();
            let worker = {
                let h = h.clone();
                thread::spawn(move || {
                    h.run_one();
                })
            };
            trigger.fire_after(Duration::from_micros(first)).unwrap();
            trigger.fire_after(Duration::from_micros(second)).unwrap();
            worker.join().unwrap();
            h.run_all();
            let first_run = state.get();
            // Not due yet at second - 1: nothing more runs.
            h.timer_turn(second - 1);
            h.run_all();
            assert_eq!(state.get(), first_run, "nothing runs early");
            h.timer_turn(second);
            h.run_all();
            assert_eq!(state.get(), first_run + 1, "the latest request runs");
            h.timer_turn(1_000);
            h.run_all();
            assert_eq!(state.get(), first_run + 1, "the superseded one never runs");
            assert!(h.timer_entries() == 0);
        });
    }
}

#[test]
fn g4_every_fire_is_served_by_a_run_that_sees_what_preceded_it() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        // Bit i is set (Relaxed) by firer i just before its fire; the last
        // run must see every bit: each fire is served (G4), with its data (G2).
        let marks = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(AtomicUsize::new(0));
        let state = Exclusive::default();
        let (m, s, st) = (marks.clone(), seen.clone(), state.clone());
        let trigger = h.trigger(0, move || {
            st.touch();
            s.store(m.load(Ordering::Relaxed), Ordering::Relaxed);
            None
        });
        trigger.fire().unwrap();
        let worker = {
            let h = h.clone();
            thread::spawn(move || {
                h.run_one();
            })
        };
        let firers: Vec<_> = (0..2)
            .map(|i| {
                let (h, t, m) = (h.clone(), trigger.clone(), marks.clone());
                thread::spawn(move || {
                    m.fetch_or(1 << i, Ordering::Relaxed);
                    t.fire().unwrap();
                    h.run_one();
                })
            })
            .collect();
        worker.join().unwrap();
        firers.into_iter().for_each(|f| f.join().unwrap());
        h.run_all();
        assert_eq!(seen.load(Ordering::Relaxed), 0b11, "a fire was not served");
        assert!((1..=3).contains(&state.get()), "runs = {}", state.get());
        assert!(h.queued() == 0 && !Harness::snapshot(&trigger).is_running());
    });
}

#[test]
fn g5_fires_while_running_coalesce_into_exactly_one_follow_up() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let entered = Arc::new(AtomicUsize::new(0));
        let release = Arc::new(AtomicUsize::new(0));
        let state = Exclusive::default();
        let (e, r, s) = (entered.clone(), release.clone(), state.clone());
        let trigger = h.trigger(0, move || {
            if s.touch() == 1 {
                e.store(1, Ordering::SeqCst);
                while r.load(Ordering::SeqCst) == 0 {
                    thread::yield_now();
                }
            }
            None
        });
        trigger.fire().unwrap();
        let worker = {
            let h = h.clone();
            thread::spawn(move || {
                h.run_one();
            })
        };
        while entered.load(Ordering::SeqCst) == 0 {
            thread::yield_now();
        }
        // The iteration is in flight: three fires from two threads.
        let firer = {
            let (h, t) = (h.clone(), trigger.clone());
            thread::spawn(move || {
                t.fire().unwrap();
                t.fire().unwrap();
                h.run_one();
            })
        };
        trigger.fire().unwrap();
        h.run_one();
        firer.join().unwrap();
        release.store(1, Ordering::SeqCst);
        worker.join().unwrap();
        h.run_all();
        assert_eq!(state.get(), 2, "exactly one follow-up");
    });
}

/// Bound 3: the stale read that a Relaxed `snapshot` allows (idle seen,
/// the iteration's writes not) needs three preemptions.
#[test]
fn g6_suspend_racing_the_exit_step_stops_everything() {
    for start in STARTS {
        run_model_bounded(3, move || {
            let h = Arc::new(Harness::new());
            let runs = Count::default();
            let r = runs.clone();
            let trigger = h.trigger(start, move || {
                r.bump();
                Some(Duration::ZERO) // would circulate forever
            });
            trigger.fire().unwrap();
            let worker = {
                let h = h.clone();
                thread::spawn(move || {
                    h.run_one();
                    h.run_one();
                })
            };
            trigger.suspend();
            // Snapshot first: an iteration seen idle here has already
            // counted itself (its exit Release precedes this Acquire).
            let in_flight = usize::from(Harness::snapshot(&trigger).is_running());
            let at_suspend = runs.get();
            worker.join().unwrap();
            h.run_all();
            assert!(runs.get() <= at_suspend + in_flight, "a run started after suspend: start {start}, runs {}, at suspend {at_suspend}, in flight {in_flight}", runs.get());
        });
    }
}

#[test]
fn g6_fire_fire_suspend_runs_nothing_after_suspend() {
    for start in STARTS {
        run_model_bounded(3, move || {
            let h = Arc::new(Harness::new());
            let runs = Count::default();
            let r = runs.clone();
            let trigger = h.trigger(start, move || {
                r.bump();
                None
            });
            let worker = {
                let h = h.clone();
                thread::spawn(move || {
                    h.run_one();
                    h.run_one();
                })
            };
            trigger.fire().unwrap();
            trigger.fire().unwrap();
            trigger.suspend();
            // Snapshot first: an iteration seen idle here has already
            // counted itself (its exit Release precedes this Acquire).
            let in_flight = usize::from(Harness::snapshot(&trigger).is_running());
            let at_suspend = runs.get();
            worker.join().unwrap();
            h.run_all();
            assert!(runs.get() <= at_suspend + in_flight, "a run started after suspend: start {start}, runs {}, at suspend {at_suspend}, in flight {in_flight}", runs.get());
        });
    }
}

#[test]
fn g8_a_panicking_iteration_releases_the_running_bit() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let runs = Count::default();
        let r = runs.clone();
        let trigger = h.trigger(0, move || {
            if r.bump() == 1 {
                panic!("first run fails");
            }
            None
        });
        trigger.fire().unwrap();
        let worker = {
            let h = h.clone();
            thread::spawn(move || {
                h.run_one();
            })
        };
        // Fire again once the failing run has started (an earlier fire would
        // legitimately coalesce into it).
        while runs.get() == 0 {
            thread::yield_now();
        }
        trigger.fire().unwrap();
        worker.join().unwrap();
        h.run_all();
        assert_eq!(runs.get(), 2, "the later fire runs");
        assert!(!Harness::snapshot(&trigger).is_running());
    });
}

#[test]
fn drop_of_the_last_handle_during_a_run_frees_the_task_once_after_it() {
    struct Guard(Count, Arc<AtomicUsize>);
    impl Drop for Guard {
        fn drop(&mut self) {
            assert_eq!(self.1.load(Ordering::SeqCst), 0, "freed during a run");
            self.0.bump();
        }
    }
    run_model(|| {
        let h = Arc::new(Harness::new());
        let drops = Count::default();
        let running = Arc::new(AtomicUsize::new(0));
        let guard = Guard(drops.clone(), running.clone());
        let trigger = h.trigger(0, move || {
            let _keep = &guard;
            guard.1.store(1, Ordering::SeqCst);
            guard.1.store(0, Ordering::SeqCst);
            Some(Duration::ZERO)
        });
        trigger.fire().unwrap();
        let worker = {
            let h = h.clone();
            thread::spawn(move || {
                h.run_one();
            })
        };
        drop(trigger);
        worker.join().unwrap();
        h.run_all();
        assert_eq!(drops.get(), 1, "freed exactly once");
    });
}

#[test]
fn the_last_handle_dropped_as_the_timer_turns_frees_an_armed_task() {
    // Wheel entries hold strong references: the trigger's hour-long
    // deadline, on the wheel or still in the inbox, would keep its task
    // alive for that hour. The last handle goes while the timer turns:
    // whichever comes first, the timer lets go of the trigger (the drop
    // takes it in at once, or the turn reads the suspend it finds), and
    // the task is freed once, with no wheel entry left. (The thread-less
    // driver drops what a turn let go of after its lock; a worker's turn
    // queues it for a worker instead: `loom_pool`.)
    struct Guard(Count);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.bump();
        }
    }
    run_model(|| {
        let h = Arc::new(Harness::new());
        let drops = Count::default();
        let guard = Guard(drops.clone());
        let trigger = h.trigger(0, move || {
            let _keep = &guard;
            None
        });
        trigger.fire_after(Duration::from_secs(3600)).unwrap();
        let timer = {
            let h = h.clone();
            thread::spawn(move || h.timer_turn(1))
        };
        drop(trigger);
        timer.join().unwrap();
        assert_eq!(drops.get(), 1, "freed once, with no further turn");
        assert_eq!(h.timer_entries(), 0);
    });
}

#[test]
fn g2_a_fire_coalescing_into_a_reserved_re_run_hands_its_data_to_it() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let data = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        let me = Arc::new(std::sync::OnceLock::<circulation_trigger::WeakTrigger>::new());
        let (d, s, m) = (data.clone(), seen.clone(), me.clone());
        let first = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let trigger = h.trigger(0, move || {
            if first.swap(false, std::sync::atomic::Ordering::Relaxed) {
                // Fired during its own run: the re-run is reserved.
                let _ = m.get().and_then(|w| w.upgrade()).map(|t| t.fire());
            }
            // Relaxed on purpose: visibility must come from the trigger.
            s.store(d.load(Ordering::Relaxed), Ordering::Relaxed);
            None
        });
        me.set(trigger.downgrade()).ok().unwrap();
        trigger.fire().unwrap();
        // The worker runs the first iteration and its re-run, while a user
        // writes and fires: while the re-run is reserved, this fire
        // coalesces into it with one RMW.
        let worker = {
            let h = h.clone();
            thread::spawn(move || {
                h.run_one();
                h.run_one();
            })
        };
        let user = {
            let (d, t) = (data.clone(), trigger.clone());
            thread::spawn(move || {
                d.store(1, Ordering::Relaxed);
                t.fire().unwrap();
            })
        };
        worker.join().unwrap();
        user.join().unwrap();
        h.run_all();
        assert_eq!(seen.load(Ordering::Relaxed), 1, "the last run saw the data");
    });
}

#[test]
fn the_last_handle_sees_the_fires_of_the_others() {
    // One handle fires and goes; the other goes too. Whichever is last
    // finds the first run pending (no worker runs it) and says so: the
    // handle count's Release/Acquire hands it the other handle's fire.
    run_model(|| {
        let h = Harness::new();
        let first = h.trigger(0, || None);
        let warnings = Harness::first_run_warnings(&first);
        let second = first.clone();
        let firer = thread::spawn(move || {
            first.fire().unwrap();
            drop(first);
        });
        drop(second);
        firer.join().unwrap();
        assert_eq!(warnings.count(), 1, "the last handle missed the fire");
    });
}

#[test]
fn counted_values_are_dropped_and_freed_after_every_use() {
    // The core's own reference counts (`core/counted.rs`), run with loom's
    // atomics. Three threads hold strong and weak handles, and any of
    // them may hold the last strong or the last weak count. Every
    // handle reads a loom cell of its count as it goes; the value's drop
    // and the free write them. A weakened Release or Acquire leaves a read
    // unordered before the write, a causality violation.
    run_model(|| {
        let value = Counted::new();
        let (clone, weak) = (value.clone(), value.downgrade());
        let weak_too = weak.clone();
        let strong = thread::spawn(move || drop(clone));
        let upgrader = thread::spawn(move || drop(weak.upgrade()));
        drop(value);
        drop(weak_too);
        strong.join().unwrap();
        upgrader.join().unwrap();
    });
}
