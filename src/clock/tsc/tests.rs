//! The fast clock's unit tests. They check its rate bound, anchors and
//! refresh decisions on synthetic clocks, and real readings against the
//! clock.

use super::*;

/// A clock running at `ns_per_tick` exactly, read with no delay. The raw
/// clock runs at the same rate, since nothing adjusts it.
fn pair_at(tsc: u64, ns_per_tick: f64) -> Pair {
    let ns = (tsc as f64 * ns_per_tick) as u64;
    Pair {
        before: tsc,
        ns,
        raw_ns: ns,
        after: tsc + 1,
        asleep_ns: 0,
    }
}

/// A kernel with no time daemon, like this machine's as `adjtimex` shows it.
const QUIET: Adjustments = Adjustments {
    tick: 10_000,
    nominal_tick: 10_000,
    freq: 0,
    offset: 0,
    constant: 2,
    status: 0x0040, // STA_UNSYNC
};

#[test]
fn the_learned_raw_rate_bounds_the_true_one_from_above() {
    for ns_per_tick in [0.25, 0.408_929, 1.0, 3.3] {
        let a = pair_at(1_000, ns_per_tick);
        let short = pair_at(
            1_000 + (LEARN_NS as f64 / ns_per_tick) as u64 / 2,
            ns_per_tick,
        );
        assert_eq!(learn(a, short), None, "too short a baseline");
        let b = pair_at(1_000 + (1e9 / ns_per_tick) as u64, ns_per_tick);
        let mult = learn(a, b).expect("a second of baseline");
        let exact = ns_per_tick * 2f64.powi(32);
        assert!(mult as f64 >= exact, "{mult} vs {exact}");
        assert!((mult as f64) < exact * (1.0 + 1e-6), "{mult} vs {exact}");
    }
    // A suspend in between teaches nothing either.
    let a = pair_at(1_000, 1.0);
    let slept = Pair {
        asleep_ns: 3_600_000_000_000,
        ..pair_at(2_000_000_000, 1.0)
    };
    assert_eq!(learn(a, slept), None);
    // Readings out of order teach nothing.
    let a = pair_at(1_000_000_000, 1.0);
    assert_eq!(learn(a, pair_at(1_000, 1.0)), None);
}

#[test]
fn an_anchor_serves_a_quarter_millisecond_rounding_up() {
    let ns_per_tick = 0.5;
    let first = pair_at(0, ns_per_tick);
    let pair = pair_at(4_000_000_000, ns_per_tick);
    let anchor = Anchor::new(pair, learn(first, pair).unwrap(), slew_ppm(QUIET).unwrap());
    let mut served = 0;
    for ticks in (0..1_000_000).step_by(997) {
        let tsc = pair.before + ticks;
        let exact = (tsc as f64 * ns_per_tick) as u64;
        match anchor.upper_ns(tsc) {
            Some(upper) => {
                served += 1;
                assert!(upper >= exact + REORDER_NS, "early: {upper} < {exact}");
                assert!(
                    upper <= exact + REORDER_NS + 600,
                    "too late: {upper} vs {exact}"
                );
            }
            None => assert!(ticks as f64 * ns_per_tick >= ANCHOR_NS as f64 * 0.99),
        }
    }
    assert!(served > 400, "served {served}");
    // Another CPU's TSC a little behind is not served.
    assert_eq!(anchor.upper_ns(pair.before - 1), None);
    assert_eq!(Anchor::NONE.upper_ns(0), None);
}

#[test]
fn an_anchor_that_fell_behind_the_clock_is_caught() {
    let pair = pair_at(1_000_000, 1.0);
    let anchor = Anchor::new(pair, 1 << 32, 0); // 1 ns per tick, no margin
    assert!(anchor.holds_at(pair_at(9_000_000, 1.0)));
    // The clock ran 1 % faster than the anchor assumed.
    let fast = Pair {
        before: 9_000_000,
        ns: 9_080_000,
        raw_ns: 9_000_000,
        after: 9_000_001,
        asleep_ns: 0,
    };
    assert!(!anchor.holds_at(fast));
}

#[test]
fn a_refresh_learns_renews_and_switches_off_when_behind() {
    let quiet = slew_ppm(QUIET);
    let first = pair_at(1_000, 1.0);
    let early = pair_at(1_000_000, 1.0); // 1 ms: too short to learn
    assert_eq!(
        renew(Anchor::NONE, early, first, 0, quiet),
        Renewal::Learning
    );
    let known = 1 << 32;
    assert_eq!(
        renew(Anchor::NONE, early, first, known, quiet),
        Renewal::Anchor(Anchor::new(early, known, quiet.unwrap()), None)
    );
    let later = pair_at(100_000_000, 1.0); // 100 ms: learns
    let Renewal::Anchor(anchor, Some(mult)) = renew(Anchor::NONE, later, first, 0, quiet) else {
        panic!("no rate learned");
    };
    assert_eq!(anchor, Anchor::new(later, mult, quiet.unwrap()));
    // At the next refresh the anchor held, its extrapolation at or ahead.
    let next = pair_at(100_300_000, 1.0);
    assert!(matches!(
        renew(anchor, next, first, mult, quiet),
        Renewal::Anchor(_, Some(_))
    ));
    // Adjustments that allow no bound, or none read, switch it off for good.
    assert_eq!(renew(anchor, next, first, mult, None), Renewal::Off);
    // A clock ahead of the anchor's extrapolation switches it off for good.
    let ahead = Pair {
        ns: next.ns + 1_000_000,
        ..next
    };
    assert_eq!(renew(anchor, ahead, first, mult, quiet), Renewal::Off);
    // Not judged, so not off. One such pair is read long after the anchor
    // served, by a thread that slept. Another is read under other
    // adjustments, because a daemon changed the rate since. The new anchor
    // follows that rate.
    let slept = Pair {
        ns: ahead.ns + 10_000_000,
        ..pair_at(110_300_000, 1.0)
    };
    assert!(matches!(
        renew(anchor, slept, first, mult, quiet),
        Renewal::Anchor(..)
    ));
    let slewing = Some(quiet.unwrap() + 83_333);
    let Renewal::Anchor(followed, _) = renew(anchor, ahead, first, mult, slewing) else {
        panic!("switched off by a daemon's change");
    };
    assert!(
        followed.mult > anchor.mult,
        "the new anchor follows the slew"
    );
}

#[test]
fn a_replaced_offset_keeps_its_share_for_two_seconds() {
    // A share of 100,000 ppm, seen at second 10.
    let (bound, remembered) = recent_share(0, 100_000, 10);
    assert_eq!(bound, 100_000);
    // The daemon replaced the offset, so adjtimex shows a small share. But
    // the kernel applies the old one until the second is over.
    let (bound, kept) = recent_share(remembered, 3, 11);
    assert_eq!((bound, kept), (100_000, remembered));
    let (bound, _) = recent_share(remembered, 3, 12);
    assert_eq!(bound, 100_000);
    // Forgotten after that. A larger share replaces a smaller one at once.
    let (bound, newer) = recent_share(remembered, 3, 13);
    assert_eq!(bound, 3);
    let (bound, _) = recent_share(newer, 70, 13);
    assert_eq!(bound, 70);
}

#[test]
fn the_kernels_adjustments_bound_the_rate_from_above() {
    // With no daemon, only the hidden allowance and the rounding remain.
    let quiet = slew_ppm(QUIET).unwrap();
    assert!((HIDDEN_PPM..HIDDEN_PPM + 5).contains(&quiet), "{quiet}");
    // Chrony slewing at its fastest makes the tick 8.33 % long.
    let slewing = Adjustments {
        tick: 10_833,
        ..QUIET
    };
    assert!(slew_ppm(slewing).unwrap() >= 83_300 + HIDDEN_PPM);
    // A tick as much short, and a negative frequency, make the clock slower.
    let slower = Adjustments {
        tick: 9_167,
        freq: -500 << 16,
        ..QUIET
    };
    assert!(slew_ppm(slower).unwrap() <= -83_300 - 500 + HIDDEN_PPM + 5);
    // +500 ppm of frequency.
    let fast = Adjustments {
        freq: 500 << 16,
        ..QUIET
    };
    assert_eq!(slew_ppm(fast).unwrap(), quiet + 500);
    // The loop applies a quarter of an offset of 100 ms a second, with time
    // constant 0. The bound counts up to twice as much, for last second's
    // offset. That gives 50,000 ppm.
    let offset_ns = Adjustments {
        offset: 100_000_000,
        constant: 0,
        status: 0x2000, // STA_NANO
        ..QUIET
    };
    assert!(slew_ppm(offset_ns).unwrap() >= 50_000 + HIDDEN_PPM);
    // The same offset negative, in µs, with the kernel's 32-bit cast undone.
    let negative_us = Adjustments {
        offset: i64::from((-100_000_000i64 as u32) / 1_000),
        constant: 0,
        status: 0,
        ..QUIET
    };
    let ppm = slew_ppm(negative_us).unwrap();
    assert!(
        (50_000 + HIDDEN_PPM..50_000 + HIDDEN_PPM + 10).contains(&ppm),
        "{ppm}"
    );
    // A pulse-per-second signal steering the phase allows no bound.
    let pps = Adjustments {
        status: 0x0004 | 0x0100,
        ..QUIET
    };
    assert_eq!(slew_ppm(pps), None);
}

#[test]
fn an_anchor_at_the_kernels_slew_stays_ahead_of_a_slewed_clock() {
    // The raw clock at 0.4 ns per tick, and the monotonic one 8.33 % faster.
    let raw_per_tick = 0.4;
    let first = pair_at(0, raw_per_tick);
    let later = pair_at(1_000_000_000, raw_per_tick);
    let raw_mult = learn(first, later).unwrap();
    let slewing = Adjustments {
        tick: 10_833,
        ..QUIET
    };
    let anchor = Anchor::new(later, raw_mult, slew_ppm(slewing).unwrap());
    let mono_per_tick = raw_per_tick * 1.0833;
    let mut served = 0;
    for ticks in (0..1_000_000).step_by(991) {
        let Some(upper) = anchor.upper_ns(later.before + ticks) else {
            continue;
        };
        served += 1;
        let exact = later.ns + (ticks as f64 * mono_per_tick) as u64;
        assert!(upper >= exact + REORDER_NS, "early: {upper} < {exact}");
    }
    assert!(served > 500, "served {served}");
    // Without the kernel's adjustments it would have been early.
    let unaware = Anchor::new(later, raw_mult, slew_ppm(QUIET).unwrap());
    let ticks = unaware.span - 1;
    let exact = later.ns + (ticks as f64 * mono_per_tick) as u64;
    assert!(unaware.upper_ns(later.before + ticks).unwrap() < exact);
}

#[test]
fn readings_are_never_behind_the_clock_and_close_to_it() {
    // Miri interprets each read in microseconds. So it checks the readings
    // for undefined behaviour in fewer rounds, and never gets two TSC reads
    // close enough for an anchor.
    let (rounds, reads) = if cfg!(miri) { (3, 20) } else { (40, 2_000) };
    let threads: Vec<_> = (0..3)
        .map(|thread| {
            std::thread::spawn(move || {
                for round in 0..rounds {
                    // Past the learning baseline, and anchors gone stale.
                    std::thread::sleep(std::time::Duration::from_micros(if round == 0 {
                        25_000
                    } else {
                        300 + thread * 200
                    }));
                    for _ in 0..reads {
                        let before = super::super::raw::now_ns().unwrap();
                        let Some(upper) = upper_ns() else {
                            assert!(cfg!(miri) || !trusted() || SHARED.off.load(Ordering::Relaxed));
                            continue;
                        };
                        let after = super::super::raw::now_ns().unwrap();
                        assert!(upper >= before, "behind the clock: {upper} < {before}");
                        assert!(upper <= after + 5_000, "{upper} vs {after}");
                    }
                }
                // Where the kernel trusts the TSC and tells its
                // adjustments, the fast path ran.
                if !cfg!(miri) && trusted() && adjustments().and_then(slew_ppm).is_some() {
                    assert_ne!(ANCHOR.with(Cell::get).span, 0, "no anchor");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    // Off only where the kernel's adjustments allow no bound, never by the
    // self-check. No time daemon slews this machine's clock.
    assert!(
        !SHARED.off.load(Ordering::Relaxed) || adjustments().and_then(slew_ppm).is_none(),
        "the self-check fired"
    );
}
