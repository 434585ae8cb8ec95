//! Unit tests of virtual time that move its clock behind the timer's back.

use super::*;
use crate::Trigger;
use std::sync::Mutex as StdMutex;

/// The clock jumps by `hold` with nobody holding the timer role. Every
/// worker was busy for that long, or the process stopped. So the timer
/// reads the inbox only then.
fn hold_timer_role(sim: &VirtualScheduler, hold: Duration) {
    let now = sim.driver.time.now_us();
    sim.driver.time.set_us(now + micros_up(hold));
}

/// A one-shot trigger that logs the virtual times it runs at.
fn logged_trigger(sim: &VirtualScheduler) -> (Trigger, Arc<StdMutex<Vec<Duration>>>) {
    let (clock, runs) = (sim.clock(), Arc::new(StdMutex::new(Vec::new())));
    let r = runs.clone();
    let trigger = Trigger::bind(sim, move || {
        r.lock().unwrap().push(clock.now());
        None
    });
    (trigger, runs)
}

/// A delayed run requested before a long pause of the timer role fires at
/// its deadline. It fires at once when the pause outlasted the deadline. It
/// is never early, never late and never lost, whatever the pause's length.
/// The test sets that length against the request word's 28-bit relative
/// deadline. That deadline wraps after 2^28 units of 1, 4, 16 … µs.
#[test]
fn a_delayed_run_survives_any_pause_of_the_timer_role() {
    let secs = Duration::from_secs;
    let delays = [
        Duration::from_millis(1),
        secs(30),
        secs(66),
        secs(68),
        secs(600),
        secs(5 * 3600),
    ];
    let holds = [
        secs(0),
        secs(100),
        secs(134),
        secs(135),
        secs(200),
        secs(300),
        secs(600),
        secs(3 * 3600),
        secs(10 * 3600),
        secs(30 * 86_400),
    ];
    for delay in delays {
        for hold in holds {
            let sim = Scheduler::builder().build_virtual();
            let (trigger, runs) = logged_trigger(&sim);
            sim.advance(secs(7)); // not at zero
            let deadline = sim.now() + delay;
            trigger.fire_after(delay).unwrap();
            hold_timer_role(&sim, hold);
            let held_until = sim.now();
            sim.advance_to(deadline.max(held_until) + secs(1));
            let expected = deadline.max(held_until);
            // A deadline over 2^26 µs away is kept in coarser units,
            // rounded up. So it is later by under 2^-25 of the delay.
            let rounding = delay / (1 << 25);
            let runs = runs.lock().unwrap();
            assert!(
                runs.len() == 1 && runs[0] >= expected && runs[0] <= expected + rounding,
                "fire_after({delay:?}), timer role held {hold:?}: ran at {runs:?}, \
                 due at {expected:?}"
            );
        }
    }
}

/// A request re-published while the trigger waits in the inbox is read
/// against the timer's clock. It is a newer version than the one pushed.
/// The reading is exact when the request is recent, as a re-published
/// request is.
#[test]
fn a_request_re_published_during_the_pause_is_exact_too() {
    let secs = Duration::from_secs;
    for hold in [secs(10), secs(600), secs(10 * 3600)] {
        let sim = Scheduler::builder().build_virtual();
        let (trigger, runs) = logged_trigger(&sim);
        trigger.fire_after(secs(30)).unwrap();
        hold_timer_role(&sim, hold);
        let deadline = sim.now() + secs(45);
        trigger.fire_after(secs(45)).unwrap(); // latest wins
        hold_timer_role(&sim, secs(5));
        sim.advance_to(deadline + secs(1));
        assert_eq!(*runs.lock().unwrap(), [deadline], "held {hold:?}");
    }
}
