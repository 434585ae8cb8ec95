//! What a fleet of refreshers needs: a shared budget (G23) that their
//! fetches together never exceed, served in turn, a refresh over budget
//! delayed and coalesced; fetches kept on a phase's slots, with retries
//! that never wait past the next slot.

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::refresh::Budget;
use circulation_trigger::{
    policy::{PhaseKeeper, RetryBackoff},
    Refresh, Scheduler,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// Fetch times, per refresher.
type Log = Arc<Mutex<Vec<(usize, Duration)>>>;

#[test]
fn refreshers_sharing_a_budget_never_exceed_it_and_none_starves() {
    let sim = Scheduler::builder().build_virtual();
    let budget = Budget::new(&sim, SECOND, 2);
    let log: Log = Arc::default();
    let configs: Vec<_> = (0..3)
        .map(|n| {
            let (log, clock) = (Arc::clone(&log), sim.clock());
            Refresh::builder(&sim)
                .trigger(|t| t.policies(TriggerPolicies::new().min_interval(Duration::ZERO)))
                .every(Duration::from_millis(100)) // each wants 10/s
                .budget(&budget)
                .bind(move || {
                    log.lock().unwrap().push((n, clock.now()));
                    Ok::<_, String>(n)
                })
        })
        .collect();
    for config in &configs {
        config.refresh_now().unwrap();
    }
    sim.advance(SECOND * 20);
    let log = log.lock().unwrap().clone();
    // Rate plus burst in any window: checked for windows of 1, 5 and 20 s
    // starting at every fetch.
    for window in [SECOND, SECOND * 5, SECOND * 20] {
        for &(_, start) in &log {
            let inside = log
                .iter()
                .filter(|&&(_, t)| t >= start && t < start + window)
                .count();
            let allowed = 2 + window.as_secs() as usize;
            assert!(inside <= allowed, "{inside} in {window:?} from {start:?}");
        }
    }
    assert!(log.len() >= 20, "the budget is used: {}", log.len());
    for n in 0..3 {
        let own = log.iter().filter(|&&(who, _)| who == n).count();
        assert!(own >= 6, "refresher {n} got {own} of {}", log.len());
    }
    let waited = configs[0].stats().budget_waited;
    assert!(waited > SECOND, "waiting is counted: {waited:?}");
    assert!(budget.stats().delayed > 0);
}

#[test]
fn a_refresh_over_budget_is_delayed_and_coalesced_never_dropped() {
    let sim = Scheduler::builder().build_virtual();
    let budget = Budget::new(&sim, SECOND * 10, 1);
    let log: Log = Arc::default();
    let (l, clock) = (Arc::clone(&log), sim.clock());
    let config = Refresh::builder(&sim)
        .every(SECOND * 3600)
        .budget(&budget)
        .bind(move || {
            l.lock().unwrap().push((0, clock.now()));
            Ok::<_, String>(())
        });
    config.refresh_now().unwrap();
    sim.advance(SECOND * 2);
    for _ in 0..1_000 {
        config.refresh_now().unwrap(); // over budget until 10 s
    }
    sim.advance(SECOND * 20);
    let times: Vec<Duration> = log.lock().unwrap().iter().map(|&(_, t)| t).collect();
    assert_eq!(
        times,
        [Duration::ZERO, SECOND * 10],
        "one fetch, at its slot"
    );
    assert_eq!(config.stats().budget_waited, SECOND * 8);
}

#[test]
fn a_phased_refresher_keeps_its_slots_through_refresh_now_and_failures() {
    let sim = Scheduler::builder().build_virtual();
    let slots = PhaseKeeper::new(SECOND * 60).offset(SECOND * 7);
    let log: Log = Arc::default();
    let (l, clock) = (Arc::clone(&log), sim.clock());
    let config = Refresh::builder(&sim)
        .phase(slots)
        .retry(RetryBackoff::new(SECOND * 40, SECOND * 600))
        .bind(move || {
            let now = clock.now();
            l.lock().unwrap().push((0, now));
            // Down from 100 s to 140 s.
            if now >= SECOND * 100 && now < SECOND * 140 {
                Err("down")
            } else {
                Ok(())
            }
        });
    config.refresh_now().unwrap(); // 0 s
    sim.advance_to(SECOND * 100);
    config.refresh_now().unwrap(); // 100 s: fails; 40 s back-off, capped at the slot
    sim.advance_to(SECOND * 250);
    let times: Vec<u64> = log
        .lock()
        .unwrap()
        .iter()
        .map(|&(_, t)| t.as_secs())
        .collect();
    // 0, 67 (slots), 100 (fired, fails), 127 (the slot before the
    // back-off's 140), 187, 247 (slots).
    assert_eq!(times, [0, 67, 100, 127, 187, 247]);
}

#[test]
fn a_back_offs_jitter_never_moves_a_phased_refresher_off_its_slots() {
    let sim = Scheduler::builder().seed(7).build_virtual();
    let slots = PhaseKeeper::new(SECOND * 60).offset(SECOND * 7);
    let log: Log = Arc::default();
    let (l, clock) = (Arc::clone(&log), sim.clock());
    let config = Refresh::builder(&sim)
        .phase(slots)
        .retry(RetryBackoff::new(SECOND, SECOND * 60).jitter(0.5))
        .bind(move || {
            l.lock().unwrap().push((0, clock.now()));
            Ok::<_, String>(())
        });
    config.trigger().fire_after(SECOND * 7).unwrap();
    sim.advance(SECOND * 250);
    let times: Vec<u64> = log
        .lock()
        .unwrap()
        .iter()
        .map(|&(_, t)| t.as_secs())
        .collect();
    assert_eq!(times, [7, 67, 127, 187, 247]);
}

#[test]
fn once_its_back_off_reaches_the_period_a_phased_refresher_retries_on_its_slots_only() {
    let sim = Scheduler::builder().seed(3).build_virtual();
    let slots = PhaseKeeper::new(SECOND * 10).offset(SECOND * 5);
    let log: Log = Arc::default();
    let (l, clock) = (Arc::clone(&log), sim.clock());
    let config = Refresh::builder(&sim)
        .phase(slots)
        .retry(RetryBackoff::new(SECOND * 2, SECOND * 10).jitter(0.5))
        .bind(move || {
            let now = clock.now();
            l.lock().unwrap().push((0, now));
            // Down from 15 s until 200 s.
            if now >= SECOND * 15 && now < SECOND * 200 {
                Err("down")
            } else {
                Ok(())
            }
        });
    config.trigger().fire_after(SECOND * 5).unwrap();
    sim.advance_to(SECOND * 260);
    let times: Vec<Duration> = log.lock().unwrap().iter().map(|&(_, t)| t).collect();
    // The back-off climbs 2, 4, 8 s (jittered) from the failure at 15 s,
    // so the retries before 45 s may fall between slots; from the 10 s
    // step on, every fetch is on a slot, the store's return included.
    let late: Vec<Duration> = times
        .iter()
        .copied()
        .filter(|&t| t >= SECOND * 45)
        .collect();
    assert!(
        late.iter()
            .all(|t| t.as_secs() % 10 == 5 && t.subsec_nanos() == 0),
        "{times:?}"
    );
    assert_eq!(
        late.len(),
        22,
        "one fetch per slot from 45 s to 255 s: {times:?}"
    );
    assert!(
        times
            .iter()
            .any(|&t| t > SECOND * 15 && t < SECOND * 45 && t.as_secs() % 10 != 5),
        "the early retries come sooner than the slots: {times:?}"
    );
}
