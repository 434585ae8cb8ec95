//! The timing wheel against a `BTreeMap` model. The tests run random
//! inserts, re-keys, removals and polls. Their deadlines include level
//! boundaries and times far beyond every level's range.

use super::{Key, Wheel};
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
enum Action {
    Insert(u64),
    /// Insert a deadline this far in the past.
    Past(u64),
    Reschedule(usize, u64),
    /// Re-key to a deadline this far in the past.
    RescheduleBack(usize, u64),
    Remove(usize),
    Poll(u64),
    /// Remove or re-key through a raw key that names no live entry.
    Dead(u32, u64),
}

/// Offsets that straddle level boundaries at 64^k ± 1, and the far future.
fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..200,
        3 => 0u64..300_000,
        2 => (1u32..11).prop_flat_map(|k| {
            let edge = 1u64.checked_shl(6 * k).unwrap_or(u64::MAX);
            (edge.saturating_sub(2)..=edge.saturating_add(2)).boxed()
        }),
        1 => any::<u64>(),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => offset().prop_map(Action::Insert),
        1 => offset().prop_map(Action::Past),
        2 => (any::<usize>(), offset()).prop_map(|(i, d)| Action::Reschedule(i, d)),
        1 => (any::<usize>(), offset()).prop_map(|(i, d)| Action::RescheduleBack(i, d)),
        1 => any::<usize>().prop_map(Action::Remove),
        3 => offset().prop_map(Action::Poll),
        1 => (any::<u32>(), offset()).prop_map(|(raw, d)| Action::Dead(raw, d)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn wheel_matches_a_sorted_map(start in 0u64..1 << 40, actions in prop::collection::vec(action(), 1..200)) {
        let mut wheel = Wheel::new(start);
        // model: key -> (deadline, id); ids make values unique
        let mut model: BTreeMap<u32, (u64, u32)> = BTreeMap::new();
        let mut keys: Vec<Key> = Vec::new();
        let mut next_id = 0u32;
        for action in actions {
            let now = wheel.elapsed();
            match action {
                Action::Insert(_) | Action::Past(_) => {
                    let when = match action {
                        Action::Past(offset) => now.saturating_sub(offset),
                        Action::Insert(offset) => now.saturating_add(offset),
                        _ => unreachable!("this arm takes inserts only"),
                    };
                    // Ids are never reused, so each one names a vacant index.
                    let key = wheel.insert_at(next_id, when, next_id).expect("vacant");
                    prop_assert!(model.insert(key.into_raw(), (when, next_id)).is_none());
                    keys.push(key);
                    next_id += 1;
                }
                Action::Reschedule(i, offset) | Action::RescheduleBack(i, offset)
                    if !keys.is_empty() =>
                {
                    let key = keys[i % keys.len()];
                    let when = match action {
                        Action::RescheduleBack(..) => now.saturating_sub(offset),
                        _ => now.saturating_add(offset),
                    };
                    prop_assert!(wheel.reschedule(key, when));
                    model.get_mut(&key.into_raw()).unwrap().0 = when;
                }
                Action::Remove(i) if !keys.is_empty() => {
                    let key = keys.swap_remove(i % keys.len());
                    let (_, id) = model.remove(&key.into_raw()).unwrap();
                    prop_assert_eq!(wheel.remove(key), Some(id));
                }
                Action::Dead(raw, offset) if !model.contains_key(&raw) => {
                    let key = Key::from_raw(raw);
                    prop_assert!(!wheel.reschedule(key, now.saturating_add(offset)));
                    prop_assert_eq!(wheel.remove(key), None);
                    prop_assert_eq!(wheel.get(key), None);
                }
                Action::Poll(offset) => {
                    let to = now.saturating_add(offset);
                    let mut got = Vec::new();
                    wheel.poll(to, |key, when, id| got.push((when, id, key)));
                    let mut expected: Vec<(u64, u32)> = model
                        .values()
                        .filter(|(when, _)| *when <= to)
                        .copied()
                        .collect();
                    expected.sort_unstable();
                    // Deadline order, with ties in any order. A deadline
                    // already past when it went in counts as the time it went
                    // in, which is `now`, since every poll empties the past.
                    prop_assert!(
                        got.windows(2).all(|w| w[0].0.max(now) <= w[1].0.max(now)),
                        "order: {:?}",
                        got
                    );
                    let mut got_sorted: Vec<(u64, u32)> = got.iter().map(|&(w, id, _)| (w, id)).collect();
                    got_sorted.sort_unstable();
                    prop_assert_eq!(&got_sorted, &expected);
                    for (_, _, key) in got {
                        model.remove(&key.into_raw());
                        keys.retain(|k| *k != key);
                    }
                    prop_assert_eq!(wheel.elapsed(), to.max(now));
                }
                _ => {}
            }
            prop_assert_eq!(wheel.len(), model.len());
            // The next expiration is never after the earliest deadline.
            if let Some(earliest) = model.values().map(|(w, _)| *w).min() {
                let next = wheel.next_expiration().unwrap();
                prop_assert!(next <= earliest.max(wheel.elapsed()));
            } else {
                prop_assert_eq!(wheel.next_expiration(), None);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Without removals or re-keys, the next expiration is the earliest
    /// deadline itself. It is not the start of the slot that holds that
    /// deadline. So the wheel's owner wakes once per deadline, not once
    /// more per cascade.
    #[test]
    fn next_expiration_is_the_earliest_deadline_without_removals(
        start in 0u64..1 << 40,
        steps in prop::collection::vec((prop::collection::vec(offset(), 0..8), offset()), 1..40),
    ) {
        let mut wheel = Wheel::new(start);
        let mut deadlines: Vec<u64> = Vec::new();
        let mut index = 0;
        for (inserts, poll) in steps {
            let now = wheel.elapsed();
            for offset in inserts {
                let when = now.saturating_add(offset);
                wheel.insert_at(index, when, ()).expect("vacant");
                index += 1;
                deadlines.push(when);
            }
            let to = now.saturating_add(poll);
            wheel.poll(to, |_, _, ()| {});
            deadlines.retain(|&when| when > to);
            let earliest = deadlines.iter().min().map(|&when| when.max(wheel.elapsed()));
            prop_assert_eq!(wheel.next_expiration(), earliest);
        }
    }
}

#[test]
fn a_million_entries_expire_in_order() {
    let mut wheel = Wheel::new(0);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for id in 0..1_000_000u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        wheel.insert_at(id, x % 10_000_000_000, id).expect("vacant");
    }
    let mut last = 0;
    let mut count = 0;
    wheel.poll(u64::MAX, |_, when, _| {
        assert!(when >= last);
        last = when;
        count += 1;
    });
    assert_eq!(count, 1_000_000);
}

/// Millions of random operations against the model. They are inserts,
/// re-keys, removals and polls, with deadlines near level boundaries and
/// far beyond every level's range. The seed is fixed, so a failure replays.
///
/// Each insert picks an index that is not live, among the indices below
/// twice the live count, so vacant entries are reused in no particular
/// order and the wheel also grows past its end.
#[test]
fn millions_of_random_operations_match_the_model() {
    let mut wheel = Wheel::new(1 << 20);
    let mut rng = 0x0123_4567_89AB_CDEFu64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut model: BTreeMap<(u64, u32), Key> = BTreeMap::new(); // (deadline, id) -> key
    let mut by_key: std::collections::HashMap<u32, (u64, u32)> = Default::default();
    let mut live: Vec<Key> = Vec::new();
    let mut id = 0u32;
    for _ in 0..2_000_000 {
        let now = wheel.elapsed();
        let offset = match next() % 8 {
            0 => next() % 64,
            1 => next() % 4_096,
            2 => {
                let edge = 1u64 << (6 * (1 + next() % 10));
                edge.wrapping_sub(1 + next() % 3) // just below a level boundary
            }
            3 => u64::MAX - now - next() % 1_000, // the far end of the range
            _ => next() % 5_000_000,
        };
        // One deadline in sixteen is in the past, by as much.
        let when = if next() % 16 == 0 {
            now.saturating_sub(offset)
        } else {
            now.saturating_add(offset)
        };
        match next() % 10 {
            0..=3 => {
                let span = 2 * live.len() as u64 + 8;
                let mut index = (next() % span) as u32;
                while by_key.contains_key(&index) {
                    index = (index + 1) % span as u32;
                }
                let key = wheel.insert_at(index, when, id).expect("a vacant index");
                assert_eq!(key.into_raw(), index);
                assert!(wheel.insert_at(index, when, id).is_none(), "live");
                model.insert((when, id), key);
                by_key.insert(key.into_raw(), (when, id));
                live.push(key);
                id += 1;
            }
            4..=5 if !live.is_empty() => {
                let key = live[(next() % live.len() as u64) as usize];
                let old = by_key[&key.into_raw()];
                model.remove(&old);
                assert!(wheel.reschedule(key, when));
                model.insert((when, old.1), key);
                by_key.insert(key.into_raw(), (when, old.1));
            }
            6 if !live.is_empty() => {
                let key = live.swap_remove((next() % live.len() as u64) as usize);
                let entry = by_key.remove(&key.into_raw()).unwrap();
                model.remove(&entry);
                assert_eq!(wheel.remove(key), Some(entry.1));
            }
            _ => {
                let to = now.saturating_add(next() % 3_000_000);
                let mut expected = Vec::new();
                while let Some((&(w, i), _)) = model.first_key_value() {
                    if w > to {
                        break;
                    }
                    let key = model.remove(&(w, i)).unwrap();
                    by_key.remove(&key.into_raw());
                    expected.push((w, i));
                }
                let mut got = Vec::new();
                wheel.poll(to, |key, w, i| {
                    got.push((w, i));
                    live.retain(|k| *k != key);
                });
                assert!(
                    got.windows(2).all(|p| p[0].0.max(now) <= p[1].0.max(now)),
                    "deadline order, the past counted as now"
                );
                got.sort_unstable();
                assert_eq!(got, expected);
            }
        }
        assert_eq!(wheel.len(), model.len());
    }
}
