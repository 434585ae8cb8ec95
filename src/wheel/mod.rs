//! A hierarchical timing wheel in pure, single-threaded code. It has O(1)
//! insert, re-key, removal and expiry, microsecond resolution, and a
//! horizon of the whole `u64` microsecond range.
//!
//! The wheel answers one question, *what is due at time t?* It holds no
//! policy, no clock and no atomics. Times are plain `u64` microseconds on a
//! caller-chosen epoch. The scheduler's timer thread owns one.
//!
//! ```text
//! level 0: 64 slots × 1 µs      level 1: 64 slots × 64 µs   …   level 10: slots × 2^60 µs
//! ┌─┬─┬─┬───┬─┐                 ┌──┬──┬───┬──┐
//! │ │●│ │ … │ │                 │  │●●│ … │  │   ● = entry in that slot's intrusive list
//! └─┴─┴─┴───┴─┘                 └──┴──┴───┴──┘
//! ```
//!
//! An entry lives at the level of the highest bit in which its deadline
//! differs from the wheel's current time. When time reaches a slot above
//! level 0, the slot's entries cascade down. A level-0 slot is one
//! microsecond, so every entry in it is due exactly at that slot's time. So
//! deadlines stay exact, never rounded to a coarse tick.
//!
//! The unit test `the_wheel_in_brief` shows it at work.

mod level;

use crate::chunked::Chunked;
use std::collections::HashMap;

#[cfg(test)]
use level::slot_start;
use level::{level_for, next_occupied, slot_for, slot_range, Level, LEVELS, NIL, SLOTS};

/// Identifies one entry of a [`Wheel`] until it expires or is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key(u32);

impl Key {
    /// The key as a plain integer, the index it was inserted at. It is never
    /// `u32::MAX`.
    pub fn into_raw(self) -> u32 {
        self.0
    }

    /// A key from `into_raw`. Any other value is a key
    /// too. It names no live entry, as [`Wheel::remove`] handles, or it
    /// names another one.
    pub fn from_raw(raw: u32) -> Self {
        Key(raw)
    }
}

#[derive(Debug)]
struct Entry<T> {
    /// The deadline's low 32 bits, or [`FAR`] with the deadline in
    /// `Wheel::far`. See [`Wheel::when_in`] for how the rest is rebuilt.
    when: u32,
    /// Previous in the slot list, or for the list's head a [`HEAD`] marker
    /// naming its slot, or [`NIL`] while the entry is vacant. So an entry
    /// needs no level, slot or liveness fields. With no value, as the
    /// timer's, that makes it 12 B.
    prev: u32,
    /// Next in the slot list.
    next: u32,
    /// Stale while the entry is vacant, which `prev` tells.
    value: T,
}

/// `Entry::when` of an entry whose deadline is in `Wheel::far`. A near
/// entry may hold it too, as its true low bits. The map tells them apart.
const FAR: u32 = u32::MAX;

/// Set in `prev` of a slot list's head. The low bits are
/// `level · SLOTS + slot`. Entry indices stay below it.
const HEAD: u32 = 1 << 31;

/// The `prev` marker of the head of `(level, slot)`'s list.
fn head_marker(level: usize, slot: usize) -> u32 {
    HEAD | (level * SLOTS + slot) as u32
}

/// The `(level, slot)` a head marker names.
fn marked_slot(marker: u32) -> (usize, usize) {
    let index = (marker & !HEAD) as usize;
    (index / SLOTS, index % SLOTS)
}

/// A hierarchical timing wheel holding values of type `T`.
///
/// See the [module docs](self) for the layout. Values are `Copy`, so a
/// vacant entry keeps a stale one rather than an `Option`'s tag. The timer's
/// values are `()`: its caller knows each entry's trigger from the index.
#[derive(Debug)]
pub struct Wheel<T> {
    elapsed: u64,
    levels: Box<[Level; LEVELS]>,
    /// In chunks, so that no growth copies every entry, as `chunked.rs` explains.
    entries: Chunked<Entry<T>>,
    /// The deadlines an entry's 32 bits cannot keep, by entry index. They
    /// lie 2^32 microseconds or more into a slot above level 5, which makes
    /// them due more than 71 minutes from now, or they passed that long
    /// ago. A timer's periodic triggers with shorter periods never come
    /// here, so their entries save the 4 bytes.
    far: HashMap<u32, u64>,
    len: usize,
}

impl<T: Copy> Wheel<T> {
    /// An empty wheel whose current time is `now`, in µs.
    ///
    /// The caller picks each entry's index, in
    /// [`insert_at`](Self::insert_at). A caller whose values carry a stable
    /// index of their own gives each value the same entry every time.
    /// Values that come due together then sit together in memory, so a
    /// slot's list is walked with few cache misses. A free list would
    /// scatter them a little more each time they are re-armed.
    pub fn new(now: u64) -> Self {
        Self {
            elapsed: now,
            levels: Box::new(std::array::from_fn(|_| Level::new())),
            entries: Chunked::new(),
            far: HashMap::new(),
            len: 0,
        }
    }

    /// The wheel's current time. Every entry due before it has expired.
    pub fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the wheel holds no entry.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `value` at entry `index`, due at `when` in µs, and returns its
    /// key, which is `index`. A time already past is due at the next
    /// [`poll`](Self::poll). `u64::MAX` is a valid deadline.
    ///
    /// # Edge cases
    ///
    /// `None`, changing nothing, if entry `index` is live, or if `index` is
    /// `2^31` or more. A wheel holding index `n` holds an entry, live or
    /// vacant, for every index below it too: 12 B each with no value.
    pub fn insert_at(&mut self, index: u32, when: u64, value: T) -> Option<Key> {
        if index >= HEAD || self.is_live(index) {
            return None;
        }
        while self.entries.len() <= index as usize {
            self.entries.push(Entry {
                when: 0,
                prev: NIL,
                next: NIL,
                value,
            });
        }
        self.entries[index as usize] = Entry {
            when: 0,
            prev: NIL,
            next: NIL,
            value,
        };
        self.link(index, when);
        self.len += 1;
        Some(Key(index))
    }

    /// Moves entry `key` to a new deadline in O(1), and returns whether
    /// `key` named a live entry.
    ///
    /// # Edge cases
    ///
    /// A `key` that names no live entry changes nothing and returns
    /// `false`. Such a key was removed, expired, or never issued. Keys are
    /// reused, so a stale key may name a newer entry.
    pub fn reschedule(&mut self, key: Key, when: u64) -> bool {
        if !self.is_live(key.0) {
            return false;
        }
        self.unlink(key.0);
        self.link(key.0, when);
        true
    }

    /// Removes entry `key` and returns its value.
    ///
    /// # Edge cases
    ///
    /// `None`, changing nothing, if `key` names no live entry, as for
    /// [`reschedule`](Self::reschedule).
    pub fn remove(&mut self, key: Key) -> Option<T> {
        if !self.is_live(key.0) {
            return None;
        }
        self.unlink(key.0);
        Some(self.release(key.0))
    }

    /// Removes every entry, handing each key and value to `taken` in no
    /// particular order. The current time stays. Every key issued so far
    /// then names no live entry, until later inserts reuse keys.
    pub fn drain(&mut self, mut taken: impl FnMut(Key, T)) {
        let old = std::mem::replace(self, Wheel::new(self.elapsed));
        for (index, entry) in old.entries.into_values().enumerate() {
            if entry.prev != NIL {
                taken(Key(index as u32), entry.value);
            }
        }
    }

    /// Whether entry `index` exists and is live: in a slot's list.
    fn is_live(&self, index: u32) -> bool {
        self.entries
            .get(index as usize)
            .is_some_and(|entry| entry.prev != NIL)
    }

    /// The value of entry `key`, if it is live.
    #[cfg(test)]
    pub fn get(&self, key: Key) -> Option<&T> {
        let entry = self.entries.get(key.0 as usize)?;
        (entry.prev != NIL).then_some(&entry.value)
    }

    /// The deadline of entry `key`, if it is live.
    #[cfg(test)]
    pub fn deadline(&self, key: Key) -> Option<u64> {
        if !self.is_live(key.0) {
            return None;
        }
        let mut marker = self.entries[key.0 as usize].prev;
        while marker & HEAD == 0 {
            marker = self.entries[marker as usize].prev;
        }
        let (level, slot) = marked_slot(marker);
        Some(self.when_in(key.0, level, slot_start(level, slot, self.elapsed)))
    }

    /// How many deadlines are kept apart, in `far`.
    #[cfg(test)]
    fn far_len(&self) -> usize {
        self.far.len()
    }

    /// The deadline of entry `index`, filed in the slot of `level` that
    /// starts at `start`.
    ///
    /// A near entry keeps its deadline's low 32 bits, and the slot gives the
    /// rest. Above level 0, a slot holds deadlines from its start to less
    /// than a slot's span after it. A near one lies less than 2^32
    /// microseconds in, as every one does up to level 5. At level 0, the
    /// slot of the current time also holds the deadlines that had passed
    /// when they were filed. The current time does not move until that slot
    /// is processed, and a near one passed less than 2^32 microseconds
    /// before it.
    fn when_in(&self, index: u32, level: usize, start: u64) -> u64 {
        let low = self.entries[index as usize].when;
        if low == FAR {
            if let Some(&when) = self.far.get(&index) {
                return when;
            }
        }
        if level == 0 {
            start - u64::from((start as u32).wrapping_sub(low))
        } else {
            start + u64::from(low.wrapping_sub(start as u32))
        }
    }

    /// Keeps entry `index`'s deadline `when`, filed at `level`. It goes in
    /// the entry's 32 bits if [`when_in`](Self::when_in) can rebuild it
    /// there, and in `far` otherwise.
    fn keep_when(&mut self, index: u32, when: u64, level: usize) {
        if self.entries[index as usize].when == FAR {
            self.forget_far(index);
        }
        let entry = &mut self.entries[index as usize];
        // Above level 0, `when_in` adds the low bits' distance from the slot's
        // start. So the deadline must lie less than 2^32 microseconds into its
        // slot, which holds at every level up to 5. Higher up it holds too for
        // a near deadline filed across a boundary of 2^36 microseconds or more.
        let near = if level == 0 {
            self.elapsed.saturating_sub(when) >> 32 == 0
        } else {
            (when & (slot_range(level) - 1)) >> 32 == 0
        };
        if near {
            entry.when = when as u32;
        } else {
            entry.when = FAR;
            self.far.insert(index, when);
        }
    }

    /// Forgets entry `index`'s deadline in `far`, if it is there, and gives
    /// the map's room back once it is mostly empty. A map never shrinks by
    /// itself, and a burst of far deadlines would otherwise keep its room.
    fn forget_far(&mut self, index: u32) {
        if self.far.remove(&index).is_some() && self.far.len() < self.far.capacity() / 4 {
            self.far.shrink_to(self.far.len() * 2);
        }
    }

    /// The earliest time at which [`poll`](Self::poll) may have an entry to
    /// expire. It is the earliest deadline linked to the next occupied
    /// slot. It is exact unless that entry was since removed or re-keyed.
    /// Then it is earlier than every deadline left, never later. A poll at
    /// that time finds nothing due but makes it exact again.
    pub fn next_expiration(&self) -> Option<u64> {
        self.next_slot().map(|(level, start)| {
            let earliest = self.levels[level].earliest[slot_for(start, level)];
            start.max(earliest)
        })
    }

    /// The lowest non-empty level and the start of its next occupied slot.
    /// Lower levels always come first. A level-`l` entry never shares its
    /// level-`l` slot with the current time, so it is due after every entry
    /// below it.
    fn next_slot(&self) -> Option<(usize, u64)> {
        self.levels.iter().enumerate().find_map(|(index, level)| {
            next_occupied(index, level, self.elapsed).map(|start| (index, start))
        })
    }

    /// Advances the wheel to `now` and hands every entry due at or before
    /// `now` to `expired`, in deadline order, removing it. Does nothing if
    /// `now` is before the wheel's current time. Entries with the same
    /// microsecond come out in no particular order among themselves. So do
    /// entries whose deadline had already passed when they were inserted,
    /// since those were filed at the wheel's time then.
    pub fn poll(&mut self, now: u64, mut expired: impl FnMut(Key, u64, T)) {
        while let Some((level, start)) = self.next_slot() {
            if start > now {
                break;
            }
            self.elapsed = self.elapsed.max(start);
            self.process_slot(level, start, &mut expired);
        }
        self.elapsed = self.elapsed.max(now);
    }

    /// Empties the slot starting at `start`. Level-0 entries expire, and
    /// higher ones cascade to a lower level relative to the new current
    /// time.
    fn process_slot(&mut self, level: usize, start: u64, expired: &mut impl FnMut(Key, u64, T)) {
        let slot = slot_for(start, level);
        let mut index = self.levels[level].heads[slot];
        self.levels[level].clear(slot);
        while index != NIL {
            let (next, when) = (
                self.entries[index as usize].next,
                self.when_in(index, level, start),
            );
            if let Some(entry) = self.entries.get(next as usize) {
                prefetch(entry);
            }
            if when <= self.elapsed {
                let value = self.release(index);
                expired(Key(index), when, value);
            } else {
                self.link(index, when);
            }
            index = next;
        }
    }

    /// Makes entry `index`, which is out of every list, vacant, and returns its value.
    fn release(&mut self, index: u32) -> T {
        let entry = self.entry_mut(index);
        entry.prev = NIL;
        let (far, value) = (entry.when == FAR, entry.value);
        if far {
            self.forget_far(index);
        }
        self.len -= 1;
        value
    }

    /// A live entry. Callers check [`is_live`](Self::is_live) first.
    fn entry_mut(&mut self, index: u32) -> &mut Entry<T> {
        let entry = &mut self.entries[index as usize];
        debug_assert!(entry.prev != NIL, "key names a removed entry");
        entry
    }

    /// Puts entry `index`, due at `when`, at the head of the slot that
    /// deadline maps to. A deadline already past goes in the current time's.
    fn link(&mut self, index: u32, when: u64) {
        let placed = when.max(self.elapsed);
        let level = level_for(self.elapsed, placed);
        let slot = slot_for(placed, level);
        self.keep_when(index, when, level);
        let head = self.levels[level].heads[slot];
        {
            let entry = &mut self.entries[index as usize];
            entry.prev = head_marker(level, slot);
            entry.next = head;
        }
        if head != NIL {
            self.entries[head as usize].prev = index;
        }
        let level = &mut self.levels[level];
        level.heads[slot] = index;
        level.occupied |= 1 << slot;
        level.earliest[slot] = level.earliest[slot].min(placed);
    }

    /// Takes entry `index` out of its slot list.
    fn unlink(&mut self, index: u32) {
        let entry = self.entry_mut(index);
        let (prev, next) = (entry.prev, entry.next);
        if prev & HEAD != 0 {
            // The head. Its successor, if any, becomes the head and takes
            // over the marker below.
            let (level, slot) = marked_slot(prev);
            debug_assert_eq!(self.levels[level].heads[slot], index);
            self.levels[level].heads[slot] = next;
            if next == NIL {
                self.levels[level].clear(slot);
            }
        } else {
            self.entries[prev as usize].next = next;
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
    }
}

/// Asks the CPU to start loading `entry`'s cache line. A slot's list is
/// walked one dependent load at a time, and with many entries each is a
/// cache miss. Expiring the current entry touches its trigger. Issuing the
/// next entry's load meanwhile overlaps the two. It is a hint only.
#[inline(always)]
fn prefetch<T>(entry: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86_64 CPU has. It only
    // hints the cache and never faults or reads into the program. And the
    // pointer comes from a live reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((entry as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = entry;
}

#[cfg(all(test, not(loom)))]
mod model_tests;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Inserts at the lowest vacant index.
    fn insert<T: Copy>(wheel: &mut Wheel<T>, when: u64, value: T) -> Key {
        let index = (0..)
            .find(|&index| !wheel.is_live(index))
            .expect("an index");
        wheel.insert_at(index, when, value).expect("vacant")
    }

    #[test]
    fn the_wheel_in_brief() {
        let mut wheel = Wheel::new(0);
        let a = insert(&mut wheel, 1_500, "a");
        let _b = insert(&mut wheel, 700, "b");
        assert!(wheel.reschedule(a, 300)); // re-key: still one entry for "a"
        assert_eq!(wheel.deadline(a), Some(300));
        assert_eq!(wheel.next_expiration(), Some(300)); // the earliest deadline

        let mut due = Vec::new();
        wheel.poll(1_000, |_key, when, value| due.push((when, value)));
        assert_eq!(due, [(300, "a"), (700, "b")]);
        assert!(wheel.is_empty());
    }

    fn drain<T: Copy>(wheel: &mut Wheel<T>, now: u64) -> Vec<(u64, T)> {
        let mut out = Vec::new();
        wheel.poll(now, |_, when, value| out.push((when, value)));
        out
    }

    #[test]
    fn expires_in_deadline_order_across_levels() {
        let mut wheel = Wheel::new(10);
        let deadlines = [10, 11, 73, 64, 4_095, 4_096, 300_000, 17_000_000_000];
        for (i, &when) in deadlines.iter().enumerate() {
            insert(&mut wheel, when, i as u32);
        }
        let mut sorted: Vec<_> = deadlines.to_vec();
        sorted.sort_unstable();
        let got: Vec<u64> = drain(&mut wheel, u64::MAX)
            .into_iter()
            .map(|(w, _)| w)
            .collect();
        assert_eq!(got, sorted);
        assert!(wheel.is_empty());
    }

    #[test]
    fn nothing_expires_early() {
        let mut wheel = Wheel::new(0);
        insert(&mut wheel, 5_000, 1);
        assert!(drain(&mut wheel, 4_999).is_empty());
        assert_eq!(wheel.elapsed(), 4_999);
        assert_eq!(drain(&mut wheel, 5_000), [(5_000, 1)]);
    }

    #[test]
    fn past_deadlines_expire_at_next_poll() {
        let mut wheel = Wheel::new(1_000);
        insert(&mut wheel, 3, 7);
        assert_eq!(wheel.next_expiration(), Some(1_000));
        assert_eq!(drain(&mut wheel, 1_000), [(3, 7)]);
    }

    #[test]
    fn reschedule_keeps_one_entry_and_reuses_slots() {
        let mut wheel = Wheel::new(0);
        let key = insert(&mut wheel, 1_000_000, 1);
        for when in (1..1_000).rev() {
            wheel.reschedule(key, when * 10);
        }
        assert_eq!(wheel.len(), 1);
        assert_eq!(wheel.deadline(key), Some(10));
        assert_eq!(drain(&mut wheel, 10), [(10, 1)]);
        let again = insert(&mut wheel, 99, 2);
        assert_eq!(again, key, "the freed entry is reused");
        assert_eq!(wheel.remove(again), Some(2));
        assert_eq!(wheel.next_expiration(), None);
    }

    #[test]
    fn dead_keys_change_nothing() {
        let mut wheel = Wheel::new(0);
        let key = insert(&mut wheel, 10, 1);
        assert_eq!(wheel.remove(key), Some(1));
        for dead in [key, Key::from_raw(7), Key::from_raw(u32::MAX)] {
            assert_eq!(wheel.remove(dead), None);
            assert!(!wheel.reschedule(dead, 5));
            assert_eq!(wheel.get(dead), None);
            assert_eq!(wheel.deadline(dead), None);
        }
        assert!(wheel.is_empty());
        assert_eq!(wheel.next_expiration(), None);
    }

    #[test]
    fn an_entry_with_no_value_is_12_bytes() {
        // The timer's entries hold no value: the index names the trigger.
        assert_eq!(std::mem::size_of::<Entry<()>>(), 12);
    }

    #[test]
    fn deadlines_far_either_way_are_kept_whole_and_given_back() {
        let now = 5u64 << 40;
        let mut wheel = Wheel::new(now);
        let cases = [
            ("an hour on", now + 3_600_000_000, 0),
            ("nineteen hours on, at level 5", now + (1 << 36) - 2, 0),
            ("at level 6, at its slot's start", now + (1 << 36), 0),
            (
                "at level 6, far into its slot",
                now + (1 << 36) + (1 << 32),
                1,
            ),
            ("a day on", now + 86_400_000_000, 1),
            ("the end of time", u64::MAX, 1),
            ("just past", now - 2, 0),
            ("an hour past", now - 3_600_000_000, 0),
            ("too long past", now - (1 << 32), 1),
            ("at the start", 0, 1),
        ];
        for (index, &(what, when, far)) in cases.iter().enumerate() {
            let before = wheel.far_len();
            let key = wheel.insert_at(index as u32, when, what).expect("vacant");
            assert_eq!(wheel.deadline(key), Some(when), "{what}");
            assert_eq!(wheel.far_len(), before + far, "{what}");
        }
        // Each comes out with its own deadline, the past ones first.
        let mut due = Vec::new();
        wheel.poll(u64::MAX, |_, when, what| due.push((what, when)));
        let mut expected: Vec<_> = cases.iter().map(|&(what, when, _)| (what, when)).collect();
        expected.sort_by_key(|&(_, when)| when.max(now));
        let past = 4; // in any order among themselves
        due[..past].sort_by_key(|&(_, when)| when);
        expected[..past].sort_by_key(|&(_, when)| when);
        assert_eq!(due, expected);
        assert_eq!(wheel.far_len(), 0, "nothing left behind");
    }

    #[test]
    fn a_far_deadline_moves_into_its_entry_as_it_comes_near() {
        let mut wheel = Wheel::new(0);
        let slot_start = 3u64 << 36;
        let when = slot_start + (1 << 33);
        let key = wheel.insert_at(0, when, ()).expect("vacant");
        assert_eq!(wheel.far_len(), 1);
        // The level-6 slot holding it cascades as it starts, about two hours
        // and a half before the deadline.
        wheel.poll(slot_start, |_, _, ()| panic!("early"));
        assert_eq!(wheel.far_len(), 0, "near now");
        assert_eq!(wheel.deadline(key), Some(when));
        assert!(drain_keys(&mut wheel, when - 1).is_empty());
        assert_eq!(drain_keys(&mut wheel, when), [(when, key)]);
    }

    #[test]
    fn a_near_deadline_ending_in_the_far_marker_is_kept_whole() {
        let now = 7u64 << 32;
        let mut wheel = Wheel::new(now);
        let when = now + u64::from(FAR); // its low bits are the marker
        let key = wheel.insert_at(3, when, ()).expect("vacant");
        assert_eq!(wheel.deadline(key), Some(when));
        assert_eq!(wheel.far_len(), 0, "the map holds far deadlines only");
        assert!(wheel.reschedule(key, now + 10));
        assert_eq!(wheel.far_len(), 0, "the re-key left nothing in the map");
        assert!(wheel.reschedule(key, when));
        assert_eq!(wheel.remove(key), Some(()));
        assert_eq!(wheel.far_len(), 0, "the removal left nothing in the map");
        wheel.insert_at(3, u64::MAX, ()).expect("vacant");
        wheel.insert_at(4, when, ()).expect("vacant");
        wheel.drain(|_, ()| {});
        assert_eq!(wheel.far_len(), 0, "a drained wheel keeps nothing");
    }

    #[test]
    fn a_near_deadline_across_a_high_boundary_stays_in_its_entry() {
        // Half a second either side of 2^36 microseconds, about 19 hours: the
        // highest bit that differs files it at level 6.
        let boundary = 1u64 << 36;
        let mut wheel = Wheel::new(boundary - 500_000);
        let when = boundary + 500_000;
        let key = wheel.insert_at(0, when, ()).expect("vacant");
        assert_eq!(wheel.far_len(), 0);
        assert_eq!(wheel.deadline(key), Some(when));
        assert!(drain_keys(&mut wheel, when - 1).is_empty());
        assert_eq!(drain_keys(&mut wheel, when), [(when, key)]);
    }

    #[test]
    fn the_far_map_gives_its_room_back() {
        let mut wheel = Wheel::new(0);
        for index in 0..1_000 {
            wheel
                .insert_at(index, u64::MAX - u64::from(index), ())
                .expect("vacant");
        }
        assert_eq!(wheel.far_len(), 1_000);
        let room = wheel.far.capacity();
        for index in 0..1_000 {
            assert_eq!(wheel.remove(Key::from_raw(index)), Some(()));
        }
        assert_eq!(wheel.far_len(), 0);
        assert!(
            wheel.far.capacity() < room / 8,
            "{} of {room}",
            wheel.far.capacity()
        );
    }

    fn drain_keys(wheel: &mut Wheel<()>, now: u64) -> Vec<(u64, Key)> {
        let mut out = Vec::new();
        wheel.poll(now, |key, when, ()| out.push((when, key)));
        out
    }

    #[test]
    fn drain_hands_out_each_live_key_with_its_value() {
        let mut wheel = Wheel::new(0);
        for index in [3, 9, 4] {
            wheel.insert_at(index, 100, index * 10).expect("vacant");
        }
        wheel.remove(Key::from_raw(9));
        let mut taken = Vec::new();
        wheel.drain(|key, value| taken.push((key.into_raw(), value)));
        taken.sort_unstable();
        assert_eq!(taken, [(3, 30), (4, 40)]);
    }

    #[test]
    fn a_drained_wheel_is_empty_and_its_old_keys_name_nothing() {
        let mut wheel = Wheel::new(10);
        let keys: Vec<_> = (0..3u32)
            .map(|i| insert(&mut wheel, 20 + u64::from(i), i))
            .collect();
        wheel.remove(keys[1]);
        let mut taken = Vec::new();
        wheel.drain(|_, value| taken.push(value));
        taken.sort_unstable();
        assert_eq!(taken, [0, 2]);
        assert!(wheel.is_empty());
        assert_eq!((wheel.elapsed(), wheel.next_expiration()), (10, None));
        for key in keys {
            assert_eq!(wheel.remove(key), None);
        }
        let again = insert(&mut wheel, 30, 7);
        assert_eq!(drain(&mut wheel, 30), [(30, 7)]);
        assert_eq!(wheel.remove(again), None);
    }

    #[test]
    fn each_entry_goes_where_it_is_told() {
        let mut wheel = Wheel::new(0);
        let far = wheel.insert_at(5, 300, "far").expect("vacant");
        assert_eq!(far.into_raw(), 5);
        assert_eq!(wheel.insert_at(5, 200, "again"), None, "live");
        assert_eq!(wheel.insert_at(HEAD, 200, "too far"), None);
        assert_eq!(wheel.len(), 1);
        let near = wheel.insert_at(0, 100, "near").expect("vacant");
        assert!(wheel.reschedule(far, 50));
        assert_eq!(drain(&mut wheel, 100), [(50, "far"), (100, "near")]);
        // Each index is vacant again once its entry has expired.
        assert_eq!(wheel.insert_at(0, 400, "near").map(Key::into_raw), Some(0));
        assert_eq!(wheel.insert_at(5, 500, "far").map(Key::into_raw), Some(5));
        assert_eq!(wheel.remove(near), Some("near"));
        let mut taken = Vec::new();
        wheel.drain(|_, value| taken.push(value));
        assert_eq!(taken, ["far"]);
        assert_eq!(wheel.insert_at(5, 600, "far").map(Key::into_raw), Some(5));
    }

    #[test]
    fn head_markers_name_every_slot_and_no_index() {
        for level in 0..LEVELS {
            for slot in 0..SLOTS {
                let marker = head_marker(level, slot);
                assert!(marker & HEAD != 0 && marker != NIL);
                assert_eq!(marked_slot(marker), (level, slot));
            }
        }
    }

    #[test]
    fn max_deadline_is_representable() {
        let mut wheel = Wheel::new(0);
        insert(&mut wheel, u64::MAX, 9);
        assert!(drain(&mut wheel, u64::MAX - 1).is_empty());
        assert_eq!(drain(&mut wheel, u64::MAX), [(u64::MAX, 9)]);
    }
}
