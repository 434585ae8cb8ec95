//! One level of the timing wheel. It has 64 slots, each the head of an
//! intrusive list of entries. An `occupied` bitmap finds the next busy slot
//! in O(1).

/// Slots per level. Being a power of two, and exactly 64, matters. Slot
/// arithmetic is then shifts and masks, and one `u64` bitmap covers the
/// level.
pub(crate) const SLOTS: usize = 64;
/// `log2(SLOTS)`, so each level is 64 times coarser than the one below.
pub(crate) const SLOT_BITS: u32 = 6;
/// Enough levels for the whole `u64` microsecond range, since 11 × 6 ≥ 64
/// bits. The horizon is half a million years, so no deadline ever
/// overflows.
pub(crate) const LEVELS: usize = 11;
/// "No entry" in the intrusive links.
pub(crate) const NIL: u32 = u32::MAX;

/// One level. It holds list heads, the bitmap of non-empty slots, and per
/// slot the earliest deadline linked to it since it was last empty.
#[derive(Debug, Clone)]
pub(crate) struct Level {
    pub(crate) occupied: u64,
    pub(crate) heads: [u32; SLOTS],
    /// A lower bound on the deadlines in each slot, or `u64::MAX` if the
    /// slot is empty. It is exact until the earliest entry is removed, then
    /// early, never late. It lets the wheel's owner sleep until a slot's
    /// first deadline rather than until the slot starts and cascades.
    /// Waking at the slot's start would cost a second wake-up for the same
    /// deadline.
    pub(crate) earliest: [u64; SLOTS],
}

impl Level {
    pub(crate) const fn new() -> Self {
        Self {
            occupied: 0,
            heads: [NIL; SLOTS],
            earliest: [u64::MAX; SLOTS],
        }
    }

    /// Empties `slot`'s bookkeeping, once its list is taken or emptied.
    pub(crate) fn clear(&mut self, slot: usize) {
        self.heads[slot] = NIL;
        self.occupied &= !(1 << slot);
        self.earliest[slot] = u64::MAX;
    }
}

/// The width in µs of one slot at `level`, which is 64^level, saturating.
pub(crate) fn slot_range(level: usize) -> u64 {
    1u64.checked_shl(SLOT_BITS * level as u32)
        .unwrap_or(u64::MAX)
}

/// The width in µs of a whole `level`, 64 times its slot width, saturating.
pub(crate) fn level_range(level: usize) -> u64 {
    1u64.checked_shl(SLOT_BITS * (level as u32 + 1))
        .unwrap_or(u64::MAX)
}

/// The level an entry due at `when` belongs to, seen from `elapsed`. It is
/// the level of the highest bit in which the two times differ. Entries at
/// level `l` are therefore never in the same level-`l` slot as `elapsed`.
pub(crate) fn level_for(elapsed: u64, when: u64) -> usize {
    let masked = (elapsed ^ when) | (SLOTS as u64 - 1);
    let significant = (u64::BITS - 1 - masked.leading_zeros()) as usize;
    significant / SLOT_BITS as usize
}

/// The slot of `when` at `level`.
pub(crate) fn slot_for(when: u64, level: usize) -> usize {
    let shift = SLOT_BITS * level as u32;
    (when.checked_shr(shift).unwrap_or(0) as usize) & (SLOTS - 1)
}

/// The start time of the next occupied slot of `level` at or after
/// `elapsed`, if the level has any entry.
pub(crate) fn next_occupied(level_index: usize, level: &Level, elapsed: u64) -> Option<u64> {
    if level.occupied == 0 {
        return None;
    }
    let now_slot = slot_for(elapsed, level_index);
    let distance = level
        .occupied
        .rotate_right(now_slot as u32)
        .trailing_zeros() as usize;
    Some(slot_start(
        level_index,
        (now_slot + distance) % SLOTS,
        elapsed,
    ))
}

/// The start time of `slot` of `level_index`, in the turn of the level at or
/// after `elapsed`.
pub(crate) fn slot_start(level_index: usize, slot: usize, elapsed: u64) -> u64 {
    let level_start = if level_range(level_index) == u64::MAX {
        0
    } else {
        elapsed & !level_range(level_index).wrapping_sub(1)
    };
    let start = level_start.saturating_add(slot as u64 * slot_range(level_index));
    // A slot behind the current position belongs to the next turn of the
    // level. Its entries are due in the next level-sized block.
    if slot < slot_for(elapsed, level_index) {
        start.saturating_add(level_range(level_index))
    } else {
        start
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_the_highest_differing_bit() {
        assert_eq!(level_for(0, 0), 0);
        assert_eq!(level_for(0, 63), 0);
        assert_eq!(level_for(0, 64), 1);
        assert_eq!(level_for(0, 4095), 1);
        assert_eq!(level_for(0, 4096), 2);
        assert_eq!(level_for(63, 64), 1);
        assert_eq!(level_for(0, u64::MAX), LEVELS - 1);
    }

    #[test]
    fn slots_and_ranges() {
        assert_eq!(slot_for(65, 0), 1);
        assert_eq!(slot_for(65, 1), 1);
        assert_eq!(slot_for(u64::MAX, LEVELS - 1), 15);
        assert_eq!(slot_range(1), 64);
        assert_eq!(level_range(0), 64);
        assert_eq!(level_range(LEVELS - 1), u64::MAX);
    }

    #[test]
    fn next_occupied_wraps_to_the_next_turn() {
        let mut level = Level::new();
        level.occupied = 1 << 3;
        assert_eq!(next_occupied(0, &level, 1), Some(3));
        assert_eq!(next_occupied(0, &level, 5), Some(64 + 3));
        level.occupied = 1 << 2;
        assert_eq!(next_occupied(1, &level, 64 * 3 + 7), Some(4096 + 128));
    }
}
