//! Unit tests of the per-trigger counters and their snapshots.
use super::*;

/// The rare counters of a test whose count never carries.
fn no_carry() -> &'static RareCounters {
    unreachable!("2^32 iterations in a unit test")
}

fn snapshot(counters: &Counters) -> TriggerStats {
    snapshot_with(counters, None)
}

fn snapshot_with(counters: &Counters, rare: Option<&RareCounters>) -> TriggerStats {
    let word = Word::new(1, Kind::Idle);
    // Version 1, idle. The version sits above the two bits.
    counters.snapshot(
        || rare,
        None,
        Snapshot::from_raw(1 << 2),
        word,
        0,
        false,
        false,
    )
}

#[test]
fn an_encoded_delay_is_never_shorter_and_close() {
    for delay in [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_micros(999_999),
        Duration::from_secs(30),
        Duration::from_secs(17 * 60) + Duration::from_nanos(7),
        Duration::from_secs(86_400 * 3),
        Duration::from_secs(86_400 * 365 * 5) + Duration::from_nanos(1),
    ] {
        let decoded = decode_delay(encode_delay(delay)).unwrap();
        assert!(decoded >= delay, "{delay:?} -> {decoded:?}");
        // Rounded up by under one unit of 1 µs, 1 ms or 1 s, and by
        // under a millionth of the delay past the first unit.
        assert!(decoded - delay < Duration::from_secs(1));
        assert!(decoded - delay <= Duration::from_micros(1) + delay / 1_000_000);
    }
    assert_eq!(decode_delay(encode_delay(Duration::MAX)), None);
    assert_eq!(
        decode_delay(encode_delay(Duration::from_secs(1 << 30))),
        None
    );
    let last = LastDelay::new();
    assert_eq!(last.get(), None);
    last.returned(Some(Duration::from_secs(30)));
    assert_eq!(last.get(), Some(Duration::from_secs(30)));
    last.returned(None);
    assert_eq!(last.get(), None);
}

#[test]
fn a_span_is_exact_to_the_microsecond_below_nine_minutes_and_never_longer() {
    let top = (1 << SPAN.value_bits) - 1;
    for us in [0, 1, 999_999, top] {
        assert_eq!(decode_span(encode_span(us)), Some(us), "{us}");
    }
    // Past the first unit it is rounded down, by under one unit of 1 ms or 1 s.
    for us in [top + 1, 86_400_000_001, 86_400_000_000 * 7 + 999_999] {
        let decoded = decode_span(encode_span(us)).unwrap();
        assert!(
            decoded <= us && us - decoded < 1_000_000,
            "{us} -> {decoded}"
        );
    }
    // About 17 years is the most, which a longer span reads as.
    let most = decode_span(encode_span(u64::MAX)).unwrap();
    assert_eq!(most, top * 1_000_000);
    assert_eq!(decode_span(encode_span(most + 5_000_000)), Some(most));
    // The flag is not part of the span, and `NO_SPAN` is none with or without it.
    assert_eq!(decode_span(IN_FLIGHT | encode_span(42)), Some(42));
    assert_eq!(decode_span(NO_SPAN), None);
    assert_eq!(decode_span(IN_FLIGHT | NO_SPAN), None);
}

#[test]
fn the_last_end_stays_known_while_the_next_iteration_runs() {
    let counters = Counters::new(0);
    let ends = |counters: &Counters| {
        let stats = snapshot(counters);
        (stats.last_start, stats.last_end, counters.last_run_us())
    };
    let us = Duration::from_micros;
    assert_eq!(ends(&counters), (None, None, None));
    counters.started(1, 1_000, no_carry);
    assert_eq!(
        ends(&counters),
        (Some(us(1_000)), None, None),
        "none ended yet"
    );
    assert_eq!(counters.ended(1_250), 250);
    assert_eq!(
        ends(&counters),
        (Some(us(1_000)), Some(us(1_250)), Some(250))
    );
    counters.started(2, 9_000, no_carry);
    assert_eq!(
        ends(&counters),
        (Some(us(9_000)), Some(us(1_250)), Some(0)),
        "the first end, kept as the gap before the second start"
    );
    // A snapshot while a start writes the pair waits for the start's end.
    let span = counters.last_span.swap(BUSY, Relaxed);
    let reading = std::sync::Barrier::new(2);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            reading.wait();
            ends(&counters)
        });
        reading.wait();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!reader.is_finished(), "a snapshot of a pair half written");
        counters.last_span.store(span, Release);
        assert_eq!(
            reader.join().unwrap(),
            (Some(us(9_000)), Some(us(1_250)), Some(0)),
            "the pair once written"
        );
    });
    // A run of an hour ends to the millisecond.
    let hour = 3_600_000_000;
    counters.ended(9_000 + hour + 123);
    let (_, end, ran) = ends(&counters);
    assert_eq!(ran, Some(hour));
    assert_eq!(end, Some(us(9_000 + hour)));
}

#[test]
fn a_long_run_and_a_long_gap_keep_the_end_within_a_millisecond() {
    let counters = Counters::new(0);
    let hour = 3_600_000_000;
    let end = 1_000 + hour + 123;
    counters.started(1, 1_000, no_carry);
    counters.ended(end);
    let ended_at = |counters: &Counters| {
        let stats = snapshot(counters);
        stats.last_end.map(|end| end.as_micros() as u64)
    };
    let first = ended_at(&counters).unwrap();
    assert!(first <= end && end - first < 1_000, "{first} for {end}");
    // Ten minutes later, a gap past the microsecond range, the next run starts.
    counters.started(2, end + 600_000_999, no_carry);
    let during = ended_at(&counters).unwrap();
    assert!(during.abs_diff(end) < 2_000, "{during} for {end}");
}

#[test]
fn lateness_saturates_instead_of_wrapping() {
    let counters = Counters::new(0);
    assert_eq!(snapshot(&counters).max_lateness, None);
    counters.marked_due(1, 10);
    counters.started(1, 10 + 5_000_000_000_000, no_carry); // ~58 days late
    let kept = decode_lateness(encode_lateness(LATENESS_MAX)).unwrap();
    let max = Duration::from_micros(u64::from(kept));
    assert!(kept > LATENESS_MAX - (LATENESS_MAX >> 11), "{kept}");
    assert_eq!(snapshot(&counters).last_lateness, Some(max));
    assert_eq!(snapshot(&counters).max_lateness, Some(max));
    counters.marked_due(1, 100);
    counters.started(1, 142, no_carry);
    let stats = snapshot(&counters);
    assert_eq!(stats.last_lateness, Some(Duration::from_micros(42)));
    assert_eq!(stats.max_lateness, Some(max), "the maximum stays");
}

#[test]
fn rare_counters_count_panics_suspends_and_wraps() {
    let counters = Counters::new(0);
    assert_eq!(snapshot(&counters).panics, 0);
    assert_eq!(snapshot(&counters).fires, 1, "one advance, a fire");
    let rare = RareCounters::new(0);
    for _ in 0..3 {
        rare.panicked();
    }
    assert_eq!(snapshot_with(&counters, Some(&rare)).panics, 3);
    // Version 1 was a suspend's. It made no fire, and the idle word at it
    // reads as suspended.
    rare.suspended(1);
    let stats = snapshot_with(&counters, Some(&rare));
    assert_eq!((stats.fires, stats.state), (0, TriggerState::Suspended));
    // A wrap later, at version 1 again, come 2^30 more advances, all fires.
    rare.wrapped();
    let fires = snapshot_with(&counters, Some(&rare)).fires;
    assert_eq!(fires, u64::from(VERSION_MASK) + 1);
    // A trigger that started at version 1 has made no fire there.
    assert_eq!(
        snapshot_with(&counters, Some(&RareCounters::new(1))).fires,
        0
    );
}

#[test]
fn the_iterations_carry_past_32_bits_into_the_rare_counters() {
    let counters = Counters::new(0);
    counters.iterations.store(u32::MAX - 1, Relaxed);
    let rare = RareCounters::new(0);
    let made = std::cell::Cell::new(0);
    let rare_made = || {
        made.set(made.get() + 1);
        &rare
    };
    counters.started(1, 1_000, rare_made);
    assert_eq!(made.get(), 0, "no carry below 2^32");
    assert_eq!(snapshot_with(&counters, None).iterations, (1 << 32) - 1);
    counters.ended(1_001);
    counters.started(1, 2_000, rare_made);
    assert_eq!(made.get(), 1, "the carry needs the rare counters");
    assert_eq!(counters.iterations.load(Relaxed), 0);
    assert!(counters.ran(), "ran, with 0 in the low 32 bits");
    assert_eq!(snapshot_with(&counters, Some(&rare)).iterations, 1 << 32);
    counters.ended(2_001);
    counters.started(1, 3_000, rare_made);
    assert_eq!(made.get(), 1, "one carry per wrap");
    assert_eq!(
        snapshot_with(&counters, Some(&rare)).iterations,
        (1 << 32) + 1
    );
}

#[test]
fn a_lateness_is_exact_below_4096_us_and_within_a_2048th_above() {
    let check = |us: u32| {
        let encoded = encode_lateness(us);
        assert_ne!(encoded, NO_LATENESS, "{us}");
        let kept = decode_lateness(encoded).unwrap();
        if us < 4_096 {
            assert_eq!(kept, us);
        }
        assert!(kept <= us && us - kept <= us >> 11, "{us} kept as {kept}");
        encoded
    };
    let edges = (0..32).flat_map(|bit| {
        let edge = 1u32 << bit;
        [edge - 1, edge, edge + 1]
    });
    let mut x = 0x2545_F491u32;
    let random = std::iter::repeat_with(move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    });
    let mut all: Vec<u32> = (0..70_000)
        .chain(edges)
        .chain(random.take(100_000))
        .map(|us| us.min(LATENESS_MAX))
        .collect();
    all.sort_unstable();
    // The codes keep the order, which the largest-so-far relies on.
    let codes: Vec<u16> = all.iter().map(|&us| check(us)).collect();
    assert!(codes.windows(2).all(|pair| pair[0] <= pair[1]));
    assert_eq!(decode_lateness(NO_LATENESS), None);
}

#[test]
fn the_last_and_the_largest_lateness_share_a_word() {
    let counters = Counters::new(0);
    let late = |counters: &Counters| {
        let stats = snapshot(counters);
        (stats.last_lateness, stats.max_lateness)
    };
    assert_eq!(late(&counters), (None, None));
    let us = Duration::from_micros;
    for (version, (due, start), expected) in [
        (1, (100, 350), (us(250), us(250))),
        (2, (1_000, 1_010), (us(10), us(250))),
        // 10,000,123 µs is kept to within a 2,048th.
        (3, (0, 10_000_123), (us(9_998_336), us(9_998_336))),
        (4, (20_000_000, 20_000_000), (us(0), us(9_998_336))),
    ] {
        counters.marked_due(version, due);
        assert_eq!(
            counters.started(version, start, no_carry),
            Some((start - due) as u32)
        );
        counters.ended(start + 1);
        assert_eq!(late(&counters), (Some(expected.0), Some(expected.1)));
    }
    // An untimed run leaves both.
    assert_eq!(counters.started(5, 30_000_000, no_carry), None);
    assert_eq!(late(&counters), (Some(us(0)), Some(us(9_998_336))));
}

#[test]
fn the_fires_served_carry_past_32_bits_with_the_iterations() {
    let counters = Counters::new(0);
    counters.iterations.store(u32::MAX, Relaxed);
    counters.served_fires.store(u32::MAX - 1, Relaxed);
    let rare = RareCounters::new(0);
    let made = std::cell::Cell::new(0);
    let rare_made = || {
        made.set(made.get() + 1);
        &rare
    };
    let counts = |counters: &Counters| counters.counts(Some(&rare));
    // A run of a new version: the iterations carry, the served fires not.
    counters.started(1, 1_000, rare_made);
    assert_eq!(made.get(), 1);
    assert_eq!(
        counts(&counters),
        Counts {
            iterations: 1 << 32,
            served: (1 << 32) - 1
        }
    );
    // A periodic run of the same version serves no fire.
    counters.started(1, 2_000, no_carry);
    assert_eq!(counts(&counters).served, (1 << 32) - 1);
    // Both carry in one start, which asks for the rare counters once.
    counters.iterations.store(u32::MAX, Relaxed);
    counters.started(2, 3_000, rare_made);
    assert_eq!(made.get(), 2, "once for both carries");
    assert_eq!(
        counts(&counters),
        Counts {
            iterations: 2 << 32,
            served: 1 << 32
        }
    );
    // Coalesced fires count against the whole served count. Eight wraps of
    // the 30-bit version and the snapshot's version 1 make 2^33 + 1 fires.
    rare.wraps.store(8, Relaxed);
    assert_eq!(
        snapshot_with(&counters, Some(&rare)).coalesced_fires,
        (1 << 32) + 1
    );
}

#[test]
fn a_trigger_ran_once_its_first_iteration_started() {
    let counters = Counters::new(0);
    assert!(!counters.ran());
    counters.started(1, 0, no_carry);
    assert!(counters.ran(), "a start at time 0 counts");
}
