//! The core's own reference count: a strong and a weak count of 32 bits each, in front of the
//! core, in its one allocation.
//!
//! `std::sync::Arc` keeps two counts of a `usize` each, 16 bytes in front of the value. Every
//! trigger is one such allocation, so its size is paid once per trigger, and an idle fleet holds
//! a hundred thousand of them. Two 32-bit counts take 8 bytes. A trigger never has anywhere
//! near 2^31 references, and a count that would pass [`MAX_COUNT`] aborts, as `Arc`'s does.
//!
//! The protocol is `Arc`'s, minus what the crate never uses (`get_mut`, `make_mut`, cyclic
//! construction), so nothing needs the weak count's lock.
//!
//! * A strong handle counts 1 in `strong`. Every strong handle together counts 1 in `weak`.
//! * The last strong handle drops the value in place, then drops that shared weak count.
//! * The last weak count frees the allocation.
//!
//! # Loom
//!
//! The counts are a [`Counter`] type parameter. The core counts with std's atomics in every
//! build, as it did with `Arc`. On loom's, the trigger models would explore every count
//! change of every reference, and they ran several times slower for no edge they check.
//! The count's own model runs this same code with `LoomCounter`, loom's atomic and a loom
//! cell per count. It is `loom_trigger`'s `counted_values_are_dropped_and_freed_after_every_use`.
//! Every handle reads the cell of its count as it goes. The value's drop writes the strong
//! count's cell, and the free writes the weak count's. A weakened Release or Acquire leaves a
//! read unordered before the write, which loom reports as a causality violation.

use crate::sync::{count_fence, CountU32 as AtomicU32, Ordering};
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;

/// The most references of either kind. Past it the count aborts rather than wrap, as `Arc`'s
/// does past `isize::MAX`. Only a leak, such as `mem::forget` in a loop, gets there.
const MAX_COUNT: u32 = u32::MAX / 2;

/// A 32-bit count as `Counted` uses it. `AtomicU32` in every build; `LoomCounter` in the
/// count's own loom model.
pub(crate) trait Counter {
    fn new(n: u32) -> Self;
    fn fetch_add(&self, n: u32, order: Ordering) -> u32;
    fn fetch_sub(&self, n: u32, order: Ordering) -> u32;
    /// Adds 1 unless the count is 0, Relaxed. Returns the count before.
    fn increment_unless_zero(&self) -> Option<u32>;
    /// A fence of the same memory model as the count.
    fn fence(order: Ordering);
    /// A holder of this count reaches the last point where it may use what the count guards.
    fn used(&self) {}
    /// The holder of the last count drops or frees what it guards.
    fn last_use(&self) {}
}

impl Counter for AtomicU32 {
    fn new(n: u32) -> Self {
        AtomicU32::new(n)
    }
    #[inline]
    fn fetch_add(&self, n: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_add(self, n, order)
    }
    #[inline]
    fn fetch_sub(&self, n: u32, order: Ordering) -> u32 {
        AtomicU32::fetch_sub(self, n, order)
    }
    fn increment_unless_zero(&self) -> Option<u32> {
        // Relaxed: see `WeakCounted::upgrade`, its one caller.
        self.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n != 0).then_some(n + 1)
        })
        .ok()
    }
    #[inline]
    fn fence(order: Ordering) {
        count_fence(order);
    }
}

/// Loom's atomic, and a loom cell that stands for what the count guards. Under `--cfg loom`
/// the sync shim's atomics, cell and fence are loom's.
#[cfg(loom)]
pub struct LoomCounter {
    n: crate::sync::AtomicU32,
    uses: crate::sync::UnsafeCell<()>,
}

#[cfg(loom)]
impl Counter for LoomCounter {
    fn new(n: u32) -> Self {
        Self {
            n: crate::sync::AtomicU32::new(n),
            uses: crate::sync::UnsafeCell::new(()),
        }
    }
    fn fetch_add(&self, n: u32, order: Ordering) -> u32 {
        self.n.fetch_add(n, order)
    }
    fn fetch_sub(&self, n: u32, order: Ordering) -> u32 {
        self.n.fetch_sub(n, order)
    }
    fn increment_unless_zero(&self) -> Option<u32> {
        // Relaxed: as the std counter's.
        self.n
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n != 0).then_some(n + 1)
            })
            .ok()
    }
    fn fence(order: Ordering) {
        crate::sync::fence(order);
    }
    fn used(&self) {
        self.uses.with(|_| ());
    }
    fn last_use(&self) {
        self.uses.with_mut(|_| ());
    }
}

/// The allocation: the two counts, then the value.
///
/// `repr(C)` keeps the counts in front, so they share the value's first cache line.
#[repr(C)]
struct Inner<T, C> {
    counts: Counts<C>,
    /// Dropped in place by the last strong handle, before the allocation is freed.
    value: std::mem::ManuallyDrop<T>,
}

/// The counts, apart from the value. Weak handles and dropping handles reach them with no
/// reference to the value, which the last strong handle may be dropping meanwhile.
struct Counts<C> {
    strong: C,
    /// The weak handles, plus 1 for all the strong ones together.
    weak: C,
}

impl<T, C> Inner<T, C> {
    /// The counts of the allocation at `ptr`.
    ///
    /// # Safety
    ///
    /// The allocation must stay alive for `'a`: the caller holds a count until then.
    #[inline]
    unsafe fn counts<'a>(ptr: NonNull<Self>) -> &'a Counts<C> {
        // SAFETY: the caller keeps the allocation alive. The place projection makes a
        // reference to the counts only, never to the value.
        unsafe { &*std::ptr::addr_of!((*ptr.as_ptr()).counts) }
    }
}

/// A strong handle: it keeps the value alive.
pub(crate) struct Counted<T, C: Counter = AtomicU32> {
    ptr: NonNull<Inner<T, C>>,
    /// The handle owns a share of a `T`, for the drop check.
    _owns: PhantomData<T>,
}

/// A weak handle: it keeps the allocation, not the value. [`WeakCounted::new`] has none.
pub(crate) struct WeakCounted<T, C: Counter = AtomicU32> {
    /// `None` for a handle made by `new`, which never had a value.
    ptr: Option<NonNull<Inner<T, C>>>,
}

// SAFETY: as for `Arc<T>`. A handle hands out `&T` to whichever thread holds it, and the last
// one drops the `T` on whichever thread it is. So both need `T: Send + Sync`.
unsafe impl<T: Send + Sync, C: Counter + Send + Sync> Send for Counted<T, C> {}
// SAFETY: see `Send` above.
unsafe impl<T: Send + Sync, C: Counter + Send + Sync> Sync for Counted<T, C> {}
// SAFETY: as for `Weak<T>`. An upgrade makes a strong handle, so the same bounds apply.
unsafe impl<T: Send + Sync, C: Counter + Send + Sync> Send for WeakCounted<T, C> {}
// SAFETY: see `Send` above.
unsafe impl<T: Send + Sync, C: Counter + Send + Sync> Sync for WeakCounted<T, C> {}

/// A handle is a pointer, so moving it never moves the value, as with `Arc`.
impl<T, C: Counter> Unpin for Counted<T, C> {}

/// Aborts on a count past [`MAX_COUNT`]. A panic could be caught, and a loop of leaks that
/// catches it could go on until the count wraps to 0, which would free a value still in use.
#[inline]
fn check(old: u32) {
    if old > MAX_COUNT {
        std::process::abort();
    }
}

impl<T, C: Counter> Counted<T, C> {
    /// A new allocation, with one strong handle.
    pub(crate) fn new(value: T) -> Self {
        let inner = Box::new(Inner {
            counts: Counts {
                strong: C::new(1),
                weak: C::new(1),
            },
            value: std::mem::ManuallyDrop::new(value),
        });
        Self {
            ptr: NonNull::from(Box::leak(inner)),
            _owns: PhantomData,
        }
    }

    #[inline]
    fn counts(&self) -> &Counts<C> {
        // SAFETY: a strong handle keeps the allocation, through the shared weak count.
        unsafe { Inner::counts(self.ptr) }
    }

    /// A weak handle to the same allocation.
    pub(crate) fn downgrade(this: &Self) -> WeakCounted<T, C> {
        // Relaxed: as `Arc::downgrade`'s. This handle keeps the allocation alive while the
        // count goes up, and the count hands nothing over.
        check(this.counts().weak.fetch_add(1, Ordering::Relaxed));
        WeakCounted {
            ptr: Some(this.ptr),
        }
    }

    /// Whether the two handles point to the same allocation.
    #[inline]
    pub(crate) fn ptr_eq(this: &Self, other: &Self) -> bool {
        this.ptr == other.ptr
    }

    /// The value's address, the same for every handle to it.
    #[inline]
    pub(crate) fn as_ptr(this: &Self) -> *const T {
        // SAFETY: a projection to the value, which the handle keeps, with no reference made.
        unsafe { std::ptr::addr_of!((*this.ptr.as_ptr()).value).cast() }
    }

    /// The handle as a bare pointer, its strong count kept. A holder that knows the pointer
    /// some other way keeps the count with no handle, and [`from_raw`](Self::from_raw) gives
    /// the handle back. The pointer is the one [`WeakCounted::as_raw`] gives.
    pub(crate) fn into_raw(this: Self) -> NonNull<()> {
        let ptr = Self::as_raw(&this);
        std::mem::forget(this);
        ptr
    }

    /// The pointer [`into_raw`](Self::into_raw) would give, the handle kept.
    pub(crate) fn as_raw(this: &Self) -> NonNull<()> {
        this.ptr.cast()
    }

    /// The handle [`into_raw`](Self::into_raw) gave up.
    ///
    /// # Safety
    ///
    /// `ptr` is an allocation's pointer, from `into_raw` or [`WeakCounted::as_raw`], of this
    /// `T` and `C`. The caller owns a strong count of it, one that `into_raw` kept, and hands
    /// that count to the handle.
    pub(crate) unsafe fn from_raw(ptr: NonNull<()>) -> Self {
        Self {
            ptr: ptr.cast(),
            _owns: PhantomData,
        }
    }

    /// The last strong handle is gone: drop the value, then the shared weak count.
    #[cold]
    fn drop_value(&mut self) {
        self.counts().strong.last_use();
        // Made before the value's drop, so it frees the allocation even if that drop unwinds,
        // as in `Arc`. A task's destructor may panic.
        let _shared_weak = WeakCounted {
            ptr: Some(self.ptr),
        };
        // SAFETY: the strong count reached 0, and it never rises from 0, since an upgrade
        // refuses it. So no other `&T` exists or will, and the value is dropped once. The
        // Acquire fence before this call orders every other handle's use before it. Other
        // handles reach only the counts, which the projection leaves out.
        unsafe {
            std::mem::ManuallyDrop::drop(&mut *std::ptr::addr_of_mut!((*self.ptr.as_ptr()).value))
        };
    }
}

/// The bytes of the one allocation a `Counted<T>` takes, counts and value.
#[cfg(test)]
pub(crate) const fn allocation_size<T>() -> usize {
    std::mem::size_of::<Inner<T, AtomicU32>>()
}

impl<T, C: Counter> Clone for Counted<T, C> {
    #[inline]
    fn clone(&self) -> Self {
        // Relaxed: as `Arc::clone`'s. The handle cloned keeps the value alive meanwhile, and
        // the new handle is passed to another thread by means that synchronize on their own.
        check(self.counts().strong.fetch_add(1, Ordering::Relaxed));
        Self {
            ptr: self.ptr,
            _owns: PhantomData,
        }
    }
}

impl<T, C: Counter> Drop for Counted<T, C> {
    #[inline]
    fn drop(&mut self) {
        self.counts().strong.used();
        // Release: every use of the value through this handle happens before the value's drop,
        // which Acquires below. The count's loom model fails without it.
        if self.counts().strong.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Acquire: pairs with every other handle's Release above, as in `Arc`'s drop. The same
        // model fails without it.
        C::fence(Ordering::Acquire);
        self.drop_value();
    }
}

impl<T, C: Counter> Deref for Counted<T, C> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the handle keeps the value alive. No `&mut T` exists but in the last strong
        // handle's drop, which this handle rules out.
        unsafe { &*std::ptr::addr_of!((*self.ptr.as_ptr()).value) }
    }
}

impl<T, C: Counter> WeakCounted<T, C> {
    /// A weak handle with no value. It never upgrades.
    pub(crate) const fn new() -> Self {
        Self { ptr: None }
    }

    /// The allocation's pointer, or null for a handle made by `new`. It is the pointer
    /// [`Counted::into_raw`] gives.
    pub(crate) fn as_raw(&self) -> *mut () {
        self.ptr
            .map_or(std::ptr::null_mut(), |ptr| ptr.as_ptr().cast())
    }

    /// The handle as a bare pointer, its weak count kept, or null for a handle made by `new`.
    pub(crate) fn into_raw(self) -> *mut () {
        let ptr = self.as_raw();
        std::mem::forget(self);
        ptr
    }

    /// The handle [`into_raw`](Self::into_raw) gave up.
    ///
    /// # Safety
    ///
    /// `ptr` is null, or it came from `into_raw` with this `T` and `C`, and the caller owns
    /// the weak count that `into_raw` kept, which it hands to the handle.
    pub(crate) unsafe fn from_raw(ptr: *mut ()) -> Self {
        Self {
            ptr: NonNull::new(ptr.cast()),
        }
    }

    /// A strong handle, while some other strong handle still keeps the value.
    pub(crate) fn upgrade(&self) -> Option<Counted<T, C>> {
        let ptr = self.ptr?;
        // SAFETY: a weak handle keeps the allocation, so its counts can be read.
        let inner = unsafe { Inner::counts(ptr) };
        // Relaxed: this weak handle reached this thread after the value was built, through a
        // hand-over that synchronizes on its own. The count only keeps 0 sticky.
        // `Arc::upgrade` acquires for `new_cyclic` only, which this type has no counterpart
        // of.
        let old = inner.strong.increment_unless_zero()?;
        check(old);
        Some(Counted {
            ptr,
            _owns: PhantomData,
        })
    }
}

impl<T, C: Counter> std::fmt::Debug for WeakCounted<T, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("(Weak)") // as `Weak`'s, since the value may be gone
    }
}

impl<T, C: Counter> Default for WeakCounted<T, C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, C: Counter> Clone for WeakCounted<T, C> {
    fn clone(&self) -> Self {
        if let Some(ptr) = self.ptr {
            // SAFETY: this handle keeps the allocation.
            // Relaxed: as `Weak::clone`'s, for `Counted::clone`'s reason.
            check(
                unsafe { Inner::counts(ptr) }
                    .weak
                    .fetch_add(1, Ordering::Relaxed),
            );
        }
        Self { ptr: self.ptr }
    }
}

impl<T, C: Counter> Drop for WeakCounted<T, C> {
    fn drop(&mut self) {
        let Some(ptr) = self.ptr else { return };
        // SAFETY: this count keeps the allocation until the decrement below.
        let inner = unsafe { Inner::counts(ptr) };
        inner.weak.used();
        // Release: this handle's reads of the counts happen before the free, and so does the
        // value's drop, when this is the strong handles' shared count. The count's loom model
        // fails without it.
        if inner.weak.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Acquire: pairs with every other weak count's Release above. The same model fails
        // without it.
        C::fence(Ordering::Acquire);
        inner.weak.last_use();
        // SAFETY: the last count is gone, so no handle can reach the allocation. The value was
        // dropped in place and is `ManuallyDrop`, so freeing the box drops only the counts.
        drop(unsafe { Box::from_raw(ptr.as_ptr()) });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// Counts its drops.
    struct Noted(Arc<AtomicUsize>);

    impl Drop for Noted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn noted() -> (Counted<Noted>, Arc<AtomicUsize>) {
        let drops = Arc::new(AtomicUsize::new(0));
        (Counted::new(Noted(drops.clone())), drops)
    }

    #[test]
    fn the_counts_take_eight_bytes() {
        assert_eq!(std::mem::size_of::<Inner<u64, AtomicU32>>(), 16);
        assert_eq!(std::mem::size_of::<Counted<u64>>(), 8);
        assert_eq!(std::mem::size_of::<WeakCounted<u64>>(), 8);
        assert_eq!(std::mem::size_of::<Option<Counted<u64>>>(), 8);
    }

    fn strong_count<T>(this: &Counted<T>) -> u32 {
        this.counts().strong.load(Ordering::Relaxed)
    }

    #[test]
    fn a_value_whose_drop_panics_still_frees_its_allocation() {
        // Miri reports a leak if the unwind skipped the shared weak count.
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("the task's destructor panics");
            }
        }
        let bomb: Counted<Bomb> = Counted::new(Bomb);
        let weak = Counted::downgrade(&bomb);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(bomb)));
        assert!(caught.is_err());
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn the_last_strong_handle_drops_the_value_once() {
        let (first, drops) = noted();
        let second = first.clone();
        assert_eq!(strong_count(&first), 2);
        assert!(Counted::ptr_eq(&first, &second));
        assert_eq!(Counted::as_ptr(&first), Counted::as_ptr(&second));
        drop(first);
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        drop(second);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_weak_handle_upgrades_only_while_a_strong_one_lives() {
        let (strong, drops) = noted();
        let weak = Counted::downgrade(&strong);
        let copy = weak.clone();
        let upgraded = weak.upgrade().expect("a strong handle lives");
        assert!(Counted::ptr_eq(&strong, &upgraded));
        assert_eq!(strong_count(&strong), 2);
        drop((strong, upgraded));
        assert_eq!(
            drops.load(Ordering::Relaxed),
            1,
            "the value goes with the last strong"
        );
        assert!(weak.upgrade().is_none());
        assert!(copy.upgrade().is_none(), "0 stays 0");
        drop(weak);
        drop(copy); // frees the allocation: Miri checks it happens once
    }

    #[test]
    fn a_weak_handle_may_outlive_or_precede_the_strong_ones() {
        let (strong, drops) = noted();
        let weak = Counted::downgrade(&strong);
        drop(weak); // the allocation stays for the strong handle
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        assert!(Counted::downgrade(&strong).upgrade().is_some());
        drop(strong); // the last handle of both kinds frees it
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        let none = WeakCounted::<Noted>::new();
        assert!(none.upgrade().is_none());
        assert!(WeakCounted::<Noted>::default().clone().upgrade().is_none());
    }

    #[test]
    fn handles_race_on_every_thread_and_the_value_goes_once() {
        let (strong, drops) = noted();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (mine, weak) = (strong.clone(), Counted::downgrade(&strong));
                std::thread::spawn(move || {
                    for _ in 0..1_000 {
                        drop((mine.clone(), weak.upgrade(), weak.clone()));
                    }
                    drop(mine);
                    weak
                })
            })
            .collect();
        drop(strong);
        let weaks: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert!(weaks.iter().all(|w| w.upgrade().is_none()));
    }
}
