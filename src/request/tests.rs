//! Unit tests of the request word, for encoding, decoding and transitions.

use super::*;

#[test]
fn word_round_trips() {
    for kind in [
        Kind::Idle,
        Kind::Due,
        Kind::Taken,
        Kind::At {
            exp: 38,
            mantissa: 12345,
        },
    ] {
        let word = Word::new(VERSION_MASK, kind);
        assert_eq!(word.version(), VERSION_MASK);
        assert_eq!(word.kind(), kind);
    }
}

#[test]
fn short_delays_keep_microseconds() {
    let now = 1_000_000_007;
    for delay in [1, 2, 999, 5_000, 500_000, 60_000_000] {
        let kind = Kind::at(now + delay, now);
        assert!(matches!(kind, Kind::At { exp: 0, .. }));
        assert_eq!(kind.deadline(now), Some(now + delay));
        // A reader a little later still decodes the same deadline.
        assert_eq!(kind.deadline(now + 30_000_000), Some(now + delay));
    }
}

#[test]
fn long_delays_round_up_never_early() {
    let now = 123_456_789;
    for delay in [3_600_000_000u64, 86_400_000_000, 10 * 365 * 86_400_000_000] {
        let deadline = now + delay;
        let decoded = Kind::at(deadline, now).deadline(now + 1).unwrap();
        assert!(decoded >= deadline);
        assert!(decoded - deadline < delay >> 24, "{decoded} vs {deadline}");
    }
    let kind = Kind::at(u64::MAX, 0);
    assert_eq!(kind.deadline(0), Some(u64::MAX));
}

#[test]
fn publish_refuses_older_versions() {
    let request = Request::new(10);
    assert!(request.publish(12, Kind::Due).is_some());
    assert!(request.publish(11, Kind::Idle).is_none());
    assert!(request.publish(12, Kind::Taken).is_some());
    assert_eq!(request.load().kind(), Kind::Taken);
    // Across the wrap-around, 0 is newer than VERSION_MASK.
    let request = Request::new(VERSION_MASK);
    assert!(request.publish(0, Kind::Due).is_some());
    assert!(request.publish(VERSION_MASK, Kind::Idle).is_none());
}

#[test]
fn the_inbox_bit_survives_every_transition_but_leave_inbox() {
    let request = Request::new(0);
    let old = request.publish(1, Kind::at(50, 0)).unwrap();
    assert!(!old.in_inbox());
    let old = request.publish(2, Kind::at(40, 0)).unwrap();
    assert!(
        old.in_inbox(),
        "the second publish finds the trigger queued"
    );
    assert!(request.publish(3, Kind::Due).unwrap().in_inbox());
    assert_eq!(request.take_due(), Some(3));
    assert!(request.load().in_inbox());
    let seen = request.leave_inbox();
    assert!(!seen.in_inbox() && !request.load().in_inbox());
    assert_eq!(seen.kind(), Kind::Taken);
}

#[test]
fn take_due_claims_once() {
    let request = Request::new(0);
    assert_eq!(request.take_due(), None);
    assert!(request.publish(1, Kind::Due).is_some());
    assert_eq!(request.take_due(), Some(1));
    assert_eq!(request.take_due(), None);
}

#[test]
fn expire_only_matches_the_read_word() {
    let request = Request::new(0);
    assert!(request.publish(1, Kind::at(500, 0)).is_some());
    let seen = request.leave_inbox();
    assert!(request.publish(2, Kind::at(900, 0)).is_some());
    assert!(!request.expire(seen));
    let seen = request.leave_inbox();
    assert!(request.expire(seen));
    assert_eq!(request.take_due(), Some(2));
}

#[test]
fn every_accepted_deadline_stays_within_the_horizon_once_encoded() {
    use crate::clock::{HORIZON_US, LAST_DEADLINE_US};
    for now in [
        0,
        1,
        1 << 20,
        1 << 40,
        LAST_DEADLINE_US / 2,
        LAST_DEADLINE_US,
    ] {
        for back in [0, 1, 1 << 10, (1 << 30) - 1, 1 << 30, 1 << 50] {
            let deadline = LAST_DEADLINE_US.saturating_sub(back).max(now);
            let decoded = Kind::at(deadline, now).deadline(now).unwrap();
            assert!(decoded >= deadline, "never early");
            assert!(decoded <= HORIZON_US, "{now} {deadline} -> {decoded}");
        }
    }
}

#[test]
fn a_stamp_rebuilds_the_pushed_deadline_however_late_it_is_read() {
    let hour = 3_600_000_000u64;
    for (now, deadline) in [(7, 60_000_007), (5, 5 + (1 << 26) - 1), (hour, hour + 1)] {
        let kind = Kind::at(deadline, now);
        let stamp = Stamp::new(9, kind, now);
        let seen = Word::new(9, kind);
        for late in [
            0,
            1 << 27,
            (1 << 28) + 12_345,
            600 * 1_000_000,
            30 * 24 * hour,
        ] {
            assert_eq!(
                stamp.deadline(seen, now + late),
                Some(deadline),
                "read {late} µs late"
            );
        }
        // A newer request, re-published in the inbox, is read near the timer's
        // clock. Without the stamp, the pushed one would be too.
        let at = (now + 5 * hour).next_multiple_of(1 << 10); // whole units
        let newer = Word::new(10, Kind::at(at, now + 4 * hour));
        assert_eq!(stamp.deadline(newer, now + 4 * hour), Some(at));
        assert_ne!(
            seen.kind().deadline(now + (1 << 28) + 12_345),
            Some(deadline)
        );
    }
}
