//! The registry's slots: one pointer per trigger, written under the registry's lock and
//! read by the timer without it.
//!
//! A trigger's wheel entry is at its slot's index and holds no pointer to the trigger. The
//! timer reads the pointer here when the entry comes due, is removed or is drained. So the
//! table must never move while the timer reads it. It is three levels of fixed tables. The
//! top one, 8 KiB, is made with the registry, and the others on first use. Each is kept
//! until the table goes. A read is three dependent loads, and the top two levels stay in
//! cache.
//!
//! Every load and store here is Relaxed. The registry's lock orders its own writes and
//! reads. The timer reads only the slot of a trigger whose reference it got through its
//! inbox, after that trigger was registered. That hand-over synchronizes, so the slot's
//! store and the stores of the tables on the way happen before the timer's loads.

use crate::core::{Counted, WeakCounted, SLOT_LIMIT};
use crate::sync::{AtomicPtr, Ordering::Relaxed};
use std::marker::PhantomData;
use std::ptr::{null_mut, NonNull};

/// A chunk holds 2^10 slots, 8 KiB, and a middle table 2^10 chunks. Under loom 4 of each,
/// and under Miri 16, since the checkers track each slot's atomic one by one.
const SHIFT: u32 = if cfg!(loom) {
    2
} else if cfg!(miri) {
    4
} else {
    10
};
const WIDTH: usize = 1 << SHIFT;
const MASK: usize = WIDTH - 1;
/// How many slots the table holds: every one below `SLOT_LIMIT`, or fewer under the
/// checkers.
pub(crate) const CAPACITY: usize = if cfg!(any(loom, miri)) {
    1 << (3 * SHIFT)
} else {
    SLOT_LIMIT as usize
};
/// Entries of the top table, which the table makes at once.
const TOP: usize = CAPACITY >> (2 * SHIFT);

type Chunk = [AtomicPtr<()>; WIDTH];
type Middle = [AtomicPtr<Chunk>; WIDTH];

fn table<P>() -> Box<[AtomicPtr<P>; WIDTH]> {
    Box::new(std::array::from_fn(|_| AtomicPtr::new(null_mut())))
}

/// The slots, shared by the registry's [`Writer`] and the timers that read them.
pub(crate) struct Slots<T> {
    top: Box<[AtomicPtr<Middle>]>,
    /// Each non-null slot owns a weak count of its trigger.
    _weak: PhantomData<WeakCounted<T>>,
}

impl<T> Slots<T> {
    fn new() -> Self {
        Self {
            top: (0..TOP).map(|_| AtomicPtr::new(null_mut())).collect(),
            _weak: PhantomData,
        }
    }

    /// Slot `index`, if the tables on the way exist.
    fn slot(&self, index: usize) -> Option<&AtomicPtr<()>> {
        let middle = self.top.get(index >> (2 * SHIFT))?.load(Relaxed);
        // SAFETY: a table is only freed by `drop`, which `&self` rules out. A non-null
        // pointer came from `Box::into_raw` in `Writer::slot`.
        let middle = unsafe { middle.as_ref() }?;
        let chunk = middle[(index >> SHIFT) & MASK].load(Relaxed);
        // SAFETY: as for the middle table.
        let chunk = unsafe { chunk.as_ref() }?;
        Some(&chunk[index & MASK])
    }

    /// Whether slot `index` holds the trigger `ptr`, a pointer from [`Counted::into_raw`].
    pub(crate) fn holds(&self, index: u32, ptr: NonNull<()>) -> bool {
        self.slot(index as usize)
            .is_some_and(|slot| slot.load(Relaxed) == ptr.as_ptr())
    }

    /// The strong handle that the holder of a wheel entry at `index` kept with
    /// [`Counted::into_raw`].
    ///
    /// # Safety
    ///
    /// The caller owns a strong count of the trigger registered at `index`, and hands it to
    /// the handle. It got that trigger through a hand-over that synchronizes, after the
    /// trigger was registered. The count keeps the trigger from unregistering, so the slot
    /// still holds it.
    pub(crate) unsafe fn counted(&self, index: u32) -> Counted<T> {
        let ptr = self
            .slot(index as usize)
            .and_then(|slot| NonNull::new(slot.load(Relaxed)))
            .expect("a trigger kept alive keeps its slot");
        // SAFETY: the slot holds the pointer `WeakCounted::into_raw` gave for this trigger,
        // the one `Counted::into_raw` gives. The caller owns the count.
        unsafe { Counted::from_raw(ptr) }
    }
}

/// Frees the tables. Every slot is empty by now: a trigger keeps its runtime, and so the
/// registry and these slots, alive until it has unregistered.
impl<T> Drop for Slots<T> {
    fn drop(&mut self) {
        // The slots are not read here. Under loom, the `Arc` that orders this drop after
        // each unregistration is std's, so the model checker could hand a load an older value.
        for middle in self.top.iter() {
            let middle = middle.load(Relaxed);
            if middle.is_null() {
                continue;
            }
            // SAFETY: it came from `Box::into_raw`, and `&mut self` makes this the last use.
            let middle = unsafe { Box::from_raw(middle) };
            for chunk in middle.iter() {
                let chunk = chunk.load(Relaxed);
                if !chunk.is_null() {
                    // SAFETY: as for the middle table.
                    drop(unsafe { Box::from_raw(chunk) });
                }
            }
        }
    }
}

/// The only writer of the [`Slots`], which the registry keeps under its lock. Its `&mut`
/// methods are so never concurrent with each other, nor with its `&self` ones.
pub(crate) struct Writer<T> {
    slots: crate::sync::Arc<Slots<T>>,
}

impl<T> Default for Writer<T> {
    fn default() -> Self {
        Self {
            slots: crate::sync::Arc::new(Slots::new()),
        }
    }
}

impl<T> Writer<T> {
    /// The slots, for a timer to read.
    pub(crate) fn shared(&self) -> crate::sync::Arc<Slots<T>> {
        crate::sync::Arc::clone(&self.slots)
    }

    /// Slot `index`, made with the tables on the way if they are missing. `index` is below
    /// [`CAPACITY`].
    fn slot(&mut self, index: usize) -> &AtomicPtr<()> {
        let middle = &self.slots.top[index >> (2 * SHIFT)];
        if middle.load(Relaxed).is_null() {
            middle.store(Box::into_raw(table::<Chunk>()).cast(), Relaxed);
        }
        // SAFETY: non-null now, from `Box::into_raw`, and freed only by `Slots::drop`.
        let middle = unsafe { &*middle.load(Relaxed) };
        let chunk = &middle[(index >> SHIFT) & MASK];
        if chunk.load(Relaxed).is_null() {
            chunk.store(Box::into_raw(table::<()>()), Relaxed);
        }
        // SAFETY: as for the middle table.
        let chunk = unsafe { &*chunk.load(Relaxed) };
        &chunk[index & MASK]
    }

    /// Puts `weak` in slot `index`, below [`CAPACITY`], which holds nothing.
    pub(crate) fn set(&mut self, index: u32, weak: WeakCounted<T>) {
        let slot = self.slot(index as usize);
        debug_assert!(slot.load(Relaxed).is_null(), "slot {index} is taken");
        slot.store(weak.into_raw(), Relaxed);
    }

    /// Empties slot `index` and returns what it held.
    pub(crate) fn take(&mut self, index: u32) -> WeakCounted<T> {
        let ptr = self
            .slots
            .slot(index as usize)
            .map_or(null_mut(), |slot| slot.swap(null_mut(), Relaxed));
        // SAFETY: the pointer is null or owns a weak count, from `set`, which the swap moved here.
        unsafe { WeakCounted::from_raw(ptr) }
    }

    /// A strong handle to the trigger in slot `index`, if it is still alive.
    pub(crate) fn upgrade(&self, index: u32) -> Option<Counted<T>> {
        let ptr = self.slots.slot(index as usize)?.load(Relaxed);
        // SAFETY: the slot owns a weak count, or is null. Only `take`, with `&mut self`,
        // gives the count up, so the borrowed handle stays valid while it upgrades. It is
        // never dropped, so the slot keeps its count.
        let weak = std::mem::ManuallyDrop::new(unsafe { WeakCounted::<T>::from_raw(ptr) });
        weak.upgrade()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    /// Counts its drops.
    struct Noted(std::sync::Arc<AtomicUsize>);

    impl Drop for Noted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn noted() -> (Counted<Noted>, std::sync::Arc<AtomicUsize>) {
        let drops = std::sync::Arc::new(AtomicUsize::new(0));
        (Counted::new(Noted(drops.clone())), drops)
    }

    #[test]
    fn a_slot_holds_its_trigger_weakly_at_every_level_of_the_tables() {
        let mut writer = Writer::default();
        let indices = [0, 1, WIDTH - 1, WIDTH, WIDTH * WIDTH + 5, CAPACITY - 1];
        let mut kept = Vec::new();
        for &index in &indices {
            let (value, drops) = noted();
            writer.set(index as u32, Counted::downgrade(&value));
            kept.push((index as u32, value, drops));
        }
        for (index, value, _) in &kept {
            let upgraded = writer.upgrade(*index).expect("alive");
            assert!(Counted::ptr_eq(&upgraded, value));
        }
        // A slot never set, in tables that exist and in tables that do not.
        assert!(writer.upgrade(2).is_none());
        assert!(writer.upgrade((3 * WIDTH) as u32).is_none());
        let (index, value, drops) = kept.pop().expect("one");
        drop(value);
        assert_eq!(
            drops.load(Ordering::Relaxed),
            1,
            "the slot's handle is weak"
        );
        assert!(writer.upgrade(index).is_none());
        assert!(writer.take(index).upgrade().is_none());
        // A slot taken is empty, and can be set again.
        let (index, value, _) = kept.pop().expect("one");
        assert!(writer.take(index).upgrade().is_some());
        assert!(writer.upgrade(index).is_none());
        writer.set(index, Counted::downgrade(&value));
        assert!(writer.upgrade(index).is_some());
        // As each trigger does before its runtime goes.
        for (index, value, drops) in kept {
            assert!(writer.take(index).upgrade().is_some());
            drop(value);
            assert_eq!(drops.load(Ordering::Relaxed), 1);
        }
        drop(writer.take(indices[indices.len() - 2] as u32));
    }

    #[test]
    fn a_kept_count_comes_back_as_the_same_handle() {
        let mut writer = Writer::default();
        let (value, drops) = noted();
        writer.set(7, Counted::downgrade(&value));
        let slots = writer.shared();
        let raw = Counted::into_raw(value.clone());
        // SAFETY: `raw` kept a strong count of the trigger in slot 7, set above.
        let back = unsafe { slots.counted(7) };
        assert_eq!(Counted::into_raw(back.clone()), raw);
        // SAFETY: the count the line above kept.
        drop(unsafe { Counted::<Noted>::from_raw(raw) });
        drop((back, value));
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert!(writer.take(7).upgrade().is_none());
        drop((writer, slots));
    }

    #[test]
    fn a_reader_reads_a_slot_while_the_writer_fills_others_and_makes_tables() {
        // The timer's case: it reads a trigger's slot, handed the trigger
        // through a channel, while the registry goes on registering others.
        // The indices run into a second chunk, then into a second middle
        // table, so the writer makes both while the reader reads.
        let mut writer = Writer::default();
        let slots = writer.shared();
        let indices: Vec<u32> = (0..WIDTH + 8)
            .chain(WIDTH * WIDTH - 4..WIDTH * WIDTH + 4)
            .map(|index| index as u32)
            .collect();
        let (values, drops): (Vec<_>, Vec<_>) = indices.iter().map(|_| noted()).unzip();
        let (send, receive) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut seen = 0;
            for (index, address) in receive {
                // SAFETY: the writer kept a strong count with `into_raw`
                // before it sent the index, after it set the slot.
                let counted: Counted<Noted> = unsafe { slots.counted(index) };
                assert_eq!(Counted::as_ptr(&counted) as usize, address);
                seen += 1;
                drop(counted);
            }
            seen
        });
        for (&index, value) in indices.iter().zip(&values) {
            writer.set(index, Counted::downgrade(value));
            let address = Counted::as_ptr(value) as usize;
            let _ = Counted::into_raw(value.clone());
            send.send((index, address)).expect("the reader is there");
        }
        drop(send);
        assert_eq!(reader.join().expect("no panic"), indices.len());
        drop(values);
        // The reader gave each kept count back, so each value is gone.
        assert!(drops.iter().all(|d| d.load(Ordering::Relaxed) == 1));
        for index in indices {
            assert!(writer.take(index).upgrade().is_none());
        }
    }
}
