//! A stable phase (`PhaseKeeper::keyed`): slots at a wall-clock phase
//! derived from an instance key, the same in every run, spread over a
//! fleet's keys, and run on the monotonic clock — a wall-clock step never
//! moves them.

use circulation_trigger::{policy::PhaseKeeper, testing::VirtualScheduler, Scheduler, Trigger};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SECOND: Duration = Duration::from_secs(1);

/// The wall-clock phase (time since the Unix epoch, modulo `period`) of
/// the first slot of the keeper `keeper` makes on a scheduler whose time
/// zero is `epoch`.
fn phase_of(
    epoch: SystemTime,
    period: Duration,
    keeper: impl FnOnce(&VirtualScheduler) -> PhaseKeeper,
) -> Duration {
    let sim = Scheduler::builder().build_virtual();
    sim.set_wall_epoch(epoch);
    let slot = epoch + keeper(&sim).first_delay_from(Duration::ZERO);
    let since = slot.duration_since(UNIX_EPOCH).unwrap();
    Duration::from_nanos((since.as_nanos() % period.as_nanos()) as u64)
}

/// The wall-clock phase of `key`'s keeper.
fn wall_phase(key: &str, epoch: SystemTime, period: Duration) -> Duration {
    phase_of(epoch, period, |sim| PhaseKeeper::keyed(period, key, sim))
}

#[test]
fn a_key_keeps_its_wall_clock_phase_across_restarts() {
    let period = SECOND * 60;
    let base = UNIX_EPOCH + SECOND * 1_700_000_000;
    let phase = wall_phase("host-17", base, period);
    for restart_after in [1, 59, 61, 3_617, 86_400 * 3 + 7] {
        let later = base + SECOND * restart_after + Duration::from_nanos(123_456_789);
        assert_eq!(
            wall_phase("host-17", later, period),
            phase,
            "{restart_after}"
        );
    }
    assert_ne!(wall_phase("host-18", base, period), phase);
}

#[test]
fn a_fleets_keys_spread_evenly_over_the_period() {
    let period = SECOND * 30;
    let base = UNIX_EPOCH + SECOND * 1_700_000_123;
    let mut bins = [0_u32; 10];
    for instance in 0..2_000 {
        let phase = wall_phase(&format!("service-{instance}.pod"), base, period);
        bins[(phase.as_nanos() * 10 / period.as_nanos()) as usize] += 1;
    }
    let mean = 200.0;
    let max = f64::from(*bins.iter().max().unwrap());
    assert!(max / mean <= 1.25, "bins {bins:?}");
}

#[test]
fn slots_run_on_the_monotonic_clock_whatever_the_wall_clock_does() {
    let period = SECOND * 60;
    let sim = Scheduler::builder().build_virtual();
    sim.set_wall_epoch(UNIX_EPOCH + SECOND * 1_700_000_000);
    let keeper = PhaseKeeper::keyed(period, "host-17", &sim);
    let trigger = Trigger::bind(&sim, move || Some(keeper.next_delay()));
    let first = keeper.first_delay_from(sim.now());
    trigger.fire_after(first).unwrap();
    // The wall clock steps back an hour: the schedule does not move.
    sim.set_wall_epoch(UNIX_EPOCH + SECOND * (1_700_000_000 - 3_600));
    sim.advance(first + period * 2 + SECOND);
    let stats = trigger.stats();
    assert_eq!(stats.iterations, 3);
    // On the slot, rounded up to the scheduler's tick: never early.
    let last = stats.last_start.unwrap();
    assert!(
        last >= first + period * 2 && last < first + period * 2 + SECOND,
        "{last:?}"
    );
}

/// The wall-clock phase of member `n`'s keeper.
fn ordinal_phase(n: u64, epoch: SystemTime, period: Duration) -> Duration {
    phase_of(epoch, period, |sim| PhaseKeeper::ordinal(period, n, sim))
}

#[test]
fn a_numbered_fleet_spreads_evenly_for_every_size_and_keeps_its_phase() {
    let period = SECOND * 3;
    let base = UNIX_EPOCH + SECOND * 1_700_000_000;
    for members in [7_u64, 20, 200, 1_000] {
        let mut phases: Vec<u128> = (0..members)
            .map(|n| ordinal_phase(n, base, period).as_nanos())
            .collect();
        phases.sort_unstable();
        let gaps: Vec<u128> = phases
            .windows(2)
            .map(|pair| pair[1] - pair[0])
            .chain([phases[0] + period.as_nanos() - phases[phases.len() - 1]])
            .collect();
        let (shortest, longest) = (gaps.iter().min().unwrap(), gaps.iter().max().unwrap());
        // The three-gap theorem with the golden ratio: longest ≤ φ² × shortest.
        assert!(
            longest * 1_000 <= shortest * 2_619,
            "{members}: {shortest} .. {longest}"
        );
        // Ten bins of the period each hold a tenth, within a member or two.
        let mut bins = [0_u64; 10];
        for phase in &phases {
            bins[(phase * 10 / period.as_nanos()) as usize] += 1;
        }
        let tenth = members / 10;
        assert!(
            bins.iter().all(|&bin| bin + 2 >= tenth && bin <= tenth + 2),
            "{members}: {bins:?}"
        );
    }
    // A restart later (the wall clock moved on) keeps every member's phase;
    // a member's phase does not depend on the fleet's size.
    for n in [0, 1, 17, 199] {
        let later = base + SECOND * 86_407 + Duration::from_nanos(987_654_321);
        assert_eq!(
            ordinal_phase(n, later, period),
            ordinal_phase(n, base, period)
        );
    }
    assert_ne!(
        ordinal_phase(1, base, period),
        ordinal_phase(2, base, period)
    );
}
