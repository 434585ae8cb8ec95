//! Models of the dispatch protocol (G9, G13): the hand-off from `fire` /
//! `fire_after` to the timer thread and the run queue. The timer is never
//! left asleep past a deadline (a missed wake-up shows as a loom deadlock,
//! since loom cannot time out a wait), never dispatches a run before its
//! deadline, and neither queue ever holds a trigger twice.
#![cfg(loom)]

mod common;

use circulation_trigger::model::Harness;
use common::{run_model_bounded, Count};

/// These models are small; bound 3 reaches the weak-memory case of the
/// wake-up protocol (a Relaxed read instead of `touch` fails only there).
fn run_model(model: impl Fn() + Sync + Send + 'static) {
    run_model_bounded(3, model);
}
use loom::sync::Arc;
use loom::thread;
use std::time::Duration;

fn counting(h: &Harness) -> (circulation_trigger::Trigger, Count) {
    let runs = Count::default();
    let r = runs.clone();
    (
        h.trigger(0, move || {
            r.bump();
            None
        }),
        runs,
    )
}

#[test]
fn g13_an_earlier_deadline_wakes_the_sleeping_timer() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        // Another trigger holds the timer's sleep target at 100 µs.
        let (other, _) = counting(&h);
        other.fire_after(Duration::from_micros(100)).unwrap();
        h.timer_turn(0);
        // The timer sleeps toward the start of the entry's slot (≤ 100 µs).
        let target = h.next_wake();
        assert!((11..=100).contains(&target), "target = {target}");
        let (trigger, runs) = counting(&h);
        let timer = {
            let h = h.clone();
            thread::spawn(move || h.timer_wait(target))
        };
        // First a later deadline (no wake-up needed), then an earlier one:
        // the second call may find the trigger already in the inbox.
        trigger.fire_after(Duration::from_micros(200)).unwrap();
        trigger.fire_after(Duration::from_micros(10)).unwrap();
        timer.join().unwrap(); // deadlocks if nobody woke the timer
        h.timer_turn(9);
        assert_eq!(h.queued(), 0, "nothing is dispatched before its deadline");
        h.timer_turn(10);
        assert_eq!(h.run_all(), 1);
        assert_eq!(runs.get(), 1);
        assert_eq!(h.timer_entries(), 1, "one entry: the other trigger's");
        h.timer_turn(300);
        h.run_all();
        assert_eq!(runs.get(), 1, "the superseded 200 µs request never runs");
    });
}

#[test]
fn g13_two_firers_and_the_timer_never_oversleep() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let (other, _) = counting(&h);
        other.fire_after(Duration::from_micros(100)).unwrap();
        h.timer_turn(0);
        let target = h.next_wake();
        assert!((31..=100).contains(&target), "target = {target}");
        let (trigger, runs) = counting(&h);
        let timer = {
            let h = h.clone();
            thread::spawn(move || h.timer_wait(target))
        };
        let firer = {
            let t = trigger.clone();
            thread::spawn(move || t.fire_after(Duration::from_micros(30)).unwrap())
        };
        trigger.fire_after(Duration::from_micros(20)).unwrap();
        firer.join().unwrap();
        timer.join().unwrap(); // deadlocks if nobody woke the timer
        h.timer_turn(30);
        assert_eq!(h.run_all(), 1, "exactly one of the two requests runs");
        assert_eq!(runs.get(), 1);
        assert_eq!(h.timer_entries(), 1);
    });
}

#[test]
fn g13_a_firer_finding_the_trigger_queued_still_wakes_the_timer() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let (other, _) = counting(&h);
        other.fire_after(Duration::from_micros(100)).unwrap();
        h.timer_turn(0);
        let target = h.next_wake();
        let (trigger, _) = counting(&h);
        let timer = {
            let h = h.clone();
            thread::spawn(move || h.timer_wait(target))
        };
        // A late deadline (needs no wake-up) races an early one (needs one),
        // from two threads: whichever is published last is the live one.
        let late = {
            let t = trigger.clone();
            thread::spawn(move || t.fire_after(Duration::from_micros(200)).unwrap())
        };
        trigger.fire_after(Duration::from_micros(10)).unwrap();
        late.join().unwrap();
        let live = h.live_deadline(&trigger).unwrap();
        if live < target {
            assert!(
                h.timer_awake(),
                "the timer sleeps past the live deadline {live}"
            );
        }
        h.release_timer();
        timer.join().unwrap();
    });
}

#[test]
fn g9_g13_fire_storm_queues_the_trigger_at_most_once() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let (trigger, runs) = counting(&h);
        let firers: Vec<_> = (0..2)
            .map(|_| {
                let (h, t) = (h.clone(), trigger.clone());
                thread::spawn(move || {
                    t.fire().unwrap();
                    assert!(h.queued() <= 1, "queued twice");
                    t.fire().unwrap();
                    assert!(h.queued() <= 1, "queued twice");
                })
            })
            .collect();
        h.run_one();
        assert!(h.queued() <= 1, "queued twice");
        firers.into_iter().for_each(|f| f.join().unwrap());
        h.run_all();
        assert!((1..=3).contains(&runs.get()));
        assert_eq!(h.queued(), 0);
        assert!(!Harness::snapshot(&trigger).is_running());
    });
}

#[test]
fn g9_rearming_keeps_one_timer_entry() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let (trigger, runs) = counting(&h);
        let timer = {
            let h = h.clone();
            thread::spawn(move || {
                h.timer_turn(0);
                assert!(h.timer_entries() <= 1);
            })
        };
        trigger.fire_after(Duration::from_micros(50)).unwrap();
        trigger.fire_after(Duration::from_micros(40)).unwrap();
        timer.join().unwrap();
        h.timer_turn(1);
        assert_eq!(h.timer_entries(), 1);
        h.timer_turn(40);
        assert_eq!(h.run_all(), 1);
        assert_eq!(runs.get(), 1);
        assert_eq!(h.timer_entries(), 0);
    });
}

#[test]
fn g15_a_re_arm_racing_the_expiry_of_the_old_deadline_is_never_served_early() {
    // The wheel entry keeps no copy of the word it was filed for: the
    // expiry reads the live word. A re-arm (a newer AT, in the inbox)
    // racing the old entry's expiry must not be taken for the old request.
    run_model(|| {
        let h = Arc::new(Harness::new());
        let (trigger, runs) = counting(&h);
        trigger.fire_after(Duration::from_micros(10)).unwrap();
        h.timer_turn(0); // the wheel holds the 10 µs entry
        h.set_time(15);
        let timer = {
            let h = h.clone();
            thread::spawn(move || h.timer_turn(15)) // the old entry is due
        };
        trigger.fire_after(Duration::from_micros(100)).unwrap(); // due at 115
        timer.join().unwrap();
        // Whichever came first, the re-arm replaced the old request: the
        // task does not run at 15 (a dispatch the expiry queued first
        // finds the re-arm, and serves nothing).
        h.run_all();
        assert_eq!(runs.get(), 0, "served early");
        h.timer_turn(15); // the re-arm, from the inbox
        assert_eq!(h.timer_entries(), 1);
        h.set_time(115);
        h.timer_turn(115);
        h.run_all();
        assert_eq!(runs.get(), 1);
        assert_eq!(h.timer_entries(), 0);
    });
}

#[test]
fn expire_hands_the_deadline_to_the_worker_that_measures_lateness() {
    run_model(|| {
        let h = Arc::new(Harness::new());
        let (trigger, runs) = counting(&h);
        // Queued by `fire`, then superseded by a timed request: the queued
        // dispatch may meet the timer's expiry of it from another thread.
        trigger.fire().unwrap();
        trigger.fire_after(Duration::from_micros(10)).unwrap();
        h.timer_turn(0); // the wheel holds the entry
        h.set_time(15);
        let timer = {
            let h = h.clone();
            thread::spawn(move || h.timer_turn(15)) // due at 10: marked late by 5
        };
        h.run_one(); // the queued dispatch, racing the expiry
        timer.join().unwrap();
        h.run_all();
        assert_eq!(runs.get(), 1);
        // Measured against the deadline the timer recorded (10 µs), not a
        // stale one (0): a Relaxed expiry lets the worker see the version
        // but not the deadline written before it.
        assert_eq!(Harness::last_lateness(&trigger), Some(5));
    });
}

/// A snapshot racing a run's start reads the last start and the last end as
/// a pair: the previous run's pair, or the new start with the previous end.
/// Read apart, the new start with the previous run's length made up an end
/// that never was. The two fields are a seqlock whose sequence is the span.
#[test]
fn a_snapshot_racing_a_runs_start_reads_a_start_an_end_and_a_count_that_were() {
    run_model(|| {
        // A std `Arc`, so that the task can hold the harness weakly and move
        // the manual clock to its run's end.
        let h = std::sync::Arc::new(Harness::new());
        let weak = std::sync::Arc::downgrade(&h);
        let runs = Count::default();
        let r = runs.clone();
        let trigger = h.trigger(0, move || {
            let h = weak.upgrade().expect("the harness outlives the runs");
            // Each run lasts 50 µs. So the second's end gives the span the
            // first's gave, and a snapshot must not take the span alone as
            // proof that no start came between its reads.
            h.set_time(if r.bump() == 1 { 150 } else { 250 });
            None
        });
        // The second start carries the count past its low 32 bits.
        Harness::preset_iterations(&trigger, u32::MAX - 1);
        h.set_time(100);
        trigger.fire().unwrap();
        h.run_one();
        h.set_time(200);
        trigger.fire().unwrap();
        let reader = {
            let trigger = trigger.clone();
            thread::spawn(move || {
                let stats = trigger.stats();
                (stats.last_start, stats.last_end, stats.iterations)
            })
        };
        h.run_one();
        let (start, end, iterations) = reader.join().unwrap();
        let us = |us: u64| Some(Duration::from_micros(us));
        assert_eq!(runs.get(), 2);
        // The end and the count are read with the start.
        if start == us(100) {
            assert_eq!(end, us(150), "the first run's pair");
            assert_eq!(iterations, u64::from(u32::MAX), "the first run's count");
        } else {
            assert_eq!(start, us(200));
            assert_eq!(iterations, 1 << 32, "the second run's count, carried");
            assert!(
                end == us(150) || end == us(250),
                "the second start with the first end or its own: {end:?}"
            );
        }
    });
}
