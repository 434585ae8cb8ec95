//! The only file that names `std::sync` or `loom`. It is a shim, so that
//! the model checker runs the crate's real code.
//!
//! Under `--cfg loom` the atomics, `Mutex`, `Condvar` and `UnsafeCell` come
//! from loom. Loom records every access and permutes the interleavings.
//! `Arc`/`Weak` stay std's in both builds. Loom's `Arc` has no `Weak`. And
//! the models check the orderings of our own atomics, not the reference
//! counts. The core's own counts (`core/counted.rs`) are std's too, and
//! checked by a model of their own.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64};

pub(crate) use std::sync::atomic::Ordering;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::fence;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::fence;
pub(crate) use std::sync::Arc;
#[cfg(feature = "tokio")]
pub(crate) use std::sync::Weak;

#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

/// Locks `mutex`, ignoring poisoning. No code of ours panics while holding
/// a lock, because tasks run outside every lock. So poison carries no
/// information.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(not(loom))]
    {
        mutex
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    #[cfg(loom)]
    {
        mutex.lock().unwrap()
    }
}

/// Waits on `condvar`, ignoring poisoning as [`lock`] does.
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    #[cfg(not(loom))]
    {
        condvar
            .wait(guard)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
    #[cfg(loom)]
    {
        condvar.wait(guard).unwrap()
    }
}

/// Waits on `condvar` for at most `timeout`. Loom has no timed wait, so
/// under the model checker the timeout may run out at any point. The lock
/// is then released, other threads run, and the lock is taken again.
/// Whatever a notifier did meanwhile is found in the guarded state. That is
/// exactly what a real waiter that timed out finds. Waits whose timeout the
/// models must not see run out get no timeout on the manual clock. The role
/// holder's wait is one of them.
pub(crate) fn wait_timeout<'a, T>(
    condvar: &Condvar,
    mutex: &'a Mutex<T>,
    guard: MutexGuard<'a, T>,
    timeout: std::time::Duration,
) -> MutexGuard<'a, T> {
    #[cfg(not(loom))]
    {
        let _ = mutex;
        condvar
            .wait_timeout(guard, timeout)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0
    }
    #[cfg(loom)]
    {
        let _ = (condvar, timeout);
        drop(guard);
        loom::thread::yield_now();
        mutex.lock().unwrap()
    }
}

/// An `UnsafeCell` with loom's closure-based API, so the same code compiles
/// against both and loom can detect concurrent access to the task.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T: ?Sized>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> UnsafeCell<T> {
    /// Gives `f` a raw pointer for mutation. The caller upholds exclusivity.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Lets another thread run, such as a writer that a reader waits for.
///
/// Unlike [`Backoff`], it yields under loom too. A loop that re-reads plain
/// loads, as a seqlock's reader does, ends only once the writer has run.
/// Loom runs the writer only when the reader yields.
pub(crate) fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Spin-then-yield backoff. It is crossbeam's in normal builds and does
/// nothing under the model checker. Every loop that backs off retries an
/// RMW, which reads the latest value. So the loop ends without yielding. A
/// loom yield would stop loom from exploring stale reads after it, which
/// hides ordering bugs. The ordering audit found exactly that.
pub(crate) struct Backoff {
    #[cfg(not(loom))]
    inner: crossbeam_utils::Backoff,
}

impl Backoff {
    #[inline]
    pub(crate) fn new() -> Self {
        Self {
            #[cfg(not(loom))]
            inner: crossbeam_utils::Backoff::new(),
        }
    }

    /// Backs off after a failed compare-exchange.
    #[inline]
    pub(crate) fn spin(&self) {
        #[cfg(not(loom))]
        self.inner.spin();
    }
}

/// Reference counts, which are std atomics even under loom, as `Arc`'s are.
/// Loom would explore every count change of every reference in every model.
/// `core/counted.rs` has a loom counter for the count's own model.
pub(crate) type CountU32 = std::sync::atomic::AtomicU32;
/// The fence that goes with [`CountU32`].
pub(crate) use std::sync::atomic::fence as count_fence;

/// Statistics counters, which are std atomics even under loom, on purpose.
/// They are Relaxed and order nothing. So modelling them would only grow
/// the state space the models explore.
pub(crate) type StatU64 = std::sync::atomic::AtomicU64;
/// See [`StatU64`].
pub(crate) type StatU32 = std::sync::atomic::AtomicU32;

/// A value behind one pointer, set once by whichever racing first user
/// installs it. Off loom, `once_cell`'s `OnceBox`.
#[cfg(not(loom))]
pub(crate) use once_cell::race::OnceBox;

/// Under loom, a `OnceBox` whose publication loom sees. `once_cell`'s own
/// uses std atomics, which loom cannot see. With this one, other threads
/// read the loom atomics inside the value after an edge the model knows.
#[cfg(loom)]
pub(crate) struct OnceBox<T> {
    ptr: loom::sync::atomic::AtomicPtr<T>,
}

#[cfg(loom)]
impl<T> OnceBox<T> {
    pub(crate) fn new() -> Self {
        Self {
            ptr: loom::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    pub(crate) fn with_value(value: Box<T>) -> Self {
        Self {
            ptr: loom::sync::atomic::AtomicPtr::new(Box::into_raw(value)),
        }
    }

    pub(crate) fn get(&self) -> Option<&T> {
        // Acquire: pairs with the installing compare-exchange's Release.
        let ptr = self.ptr.load(Ordering::Acquire);
        // SAFETY: a non-null pointer came from `Box::into_raw` and is freed
        // only in `drop`, which `&self` rules out.
        unsafe { ptr.as_ref() }
    }

    pub(crate) fn get_or_init(&self, init: impl FnOnce() -> Box<T>) -> &T {
        if let Some(value) = self.get() {
            return value;
        }
        let new = Box::into_raw(init());
        // Release on success: publishes the new value. The value it
        // replaces is null, so there is nothing to acquire. Acquire on
        // failure: reads a racing installer's value.
        let installed = match self.ptr.compare_exchange(
            std::ptr::null_mut(),
            new,
            Ordering::Release,
            Ordering::Acquire,
        ) {
            Ok(_) => new,
            Err(theirs) => {
                // SAFETY: `new` came from `Box::into_raw` above and was
                // never shared.
                drop(unsafe { Box::from_raw(new) });
                theirs
            }
        };
        // SAFETY: as in `get`.
        unsafe { &*installed }
    }
}

#[cfg(loom)]
impl<T> Drop for OnceBox<T> {
    fn drop(&mut self) {
        // A load, not `with_mut`, because the value's owner is freed
        // through std's atomic counts, whose hand-over loom does not see.
        // `&mut self` is the exclusivity, and the load orders nothing it
        // needs.
        let ptr = self.ptr.load(Ordering::Relaxed);
        if !ptr.is_null() {
            // SAFETY: the pointer came from `Box::into_raw`. `&mut self`
            // means no reference to the value is left.
            drop(unsafe { Box::from_raw(ptr) });
        }
    }
}

/// Drops a caught panic's payload, whose own `Drop` may panic in turn. That
/// panic is caught too, and its payload is leaked. So no unwind escapes
/// past the code that must run after a task. Handing RUNNING on and a
/// worker's loop are such code.
pub(crate) fn drop_payload(payload: Box<dyn std::any::Any + Send>) {
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(payload)));
    if let Err(again) = dropped {
        std::mem::forget(again);
    }
}

/// The refresher's value cell. Off loom it is `arc-swap`'s `ArcSwapOption`.
/// Readers read it through a [`ValueCache`], which writes nothing shared.
#[cfg(not(loom))]
pub(crate) struct ValueCell<T>(arc_swap::ArcSwapOption<T>);

/// A loaded [`ValueCell`]. The value stays valid while it is held.
#[cfg(not(loom))]
pub(crate) struct ValueGuard<T>(arc_swap::Guard<Option<Arc<T>>>);

/// What a [`ValueCache`] reads through. It is something that keeps a value
/// cell alive, such as a reader's handle on the refresher's shared state.
pub(crate) trait HoldsCell {
    type Value;
    fn cell(&self) -> &ValueCell<Self::Value>;
}

/// A reader's own copy of a [`ValueCell`]'s value. Each read revalidates it
/// by one load of the cell's pointer. A read writes only the cache, which
/// is the reader's own memory. A new value costs one full load, once. Off
/// loom it is `arc-swap`'s `Cache`.
#[cfg(not(loom))]
pub(crate) struct ValueCache<H: HoldsCell>(
    arc_swap::cache::Cache<CellOf<H>, Option<Arc<H::Value>>>,
);

/// [`ValueCache`]'s way to the `ArcSwapOption` inside a holder.
#[cfg(not(loom))]
pub(crate) struct CellOf<H>(H);

#[cfg(not(loom))]
impl<H: HoldsCell> std::ops::Deref for CellOf<H> {
    type Target = arc_swap::ArcSwapOption<H::Value>;

    #[inline]
    fn deref(&self) -> &Self::Target {
        &self.0.cell().0
    }
}

#[cfg(not(loom))]
impl<H: HoldsCell> ValueCache<H> {
    pub(crate) fn new(holder: H) -> Self {
        Self(arc_swap::cache::Cache::new(CellOf(holder)))
    }

    /// The value held now. A new value is loaded once, then kept.
    #[inline]
    pub(crate) fn load(&mut self) -> Option<&H::Value> {
        self.0.load().as_deref()
    }
}

#[cfg(not(loom))]
impl<T> ValueCell<T> {
    pub(crate) fn empty() -> Self {
        Self(arc_swap::ArcSwapOption::empty())
    }

    #[inline]
    pub(crate) fn load(&self) -> ValueGuard<T> {
        ValueGuard(self.0.load())
    }

    pub(crate) fn load_full(&self) -> Option<Arc<T>> {
        self.0.load_full()
    }

    /// Stores `value` and returns the one it replaced.
    pub(crate) fn swap(&self, value: Option<Arc<T>>) -> Option<Arc<T>> {
        self.0.swap(value)
    }

    /// Stores `value` if the cell is empty, and returns whether it did.
    pub(crate) fn install_if_empty(&self, value: Arc<T>) -> bool {
        let previous = self.0.compare_and_swap(&None::<Arc<T>>, Some(value));
        previous.is_none()
    }
}

#[cfg(not(loom))]
impl<T> ValueGuard<T> {
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }

    pub(crate) fn is_some(&self) -> bool {
        self.0.is_some()
    }
}

/// Under loom, a stand-in for `arc-swap` that loom sees. It is a pointer
/// swapped with Release and loaded with Acquire. `arc-swap`'s own swaps and
/// loads are SeqCst. A replaced value is retired, not freed, until the cell
/// drops. A reader may still be cloning it, and the models are short.
#[cfg(loom)]
pub(crate) struct ValueCell<T> {
    ptr: loom::sync::atomic::AtomicPtr<T>,
    retired: std::sync::Mutex<Vec<Arc<T>>>,
}

/// See the loom [`ValueCell`].
#[cfg(loom)]
pub(crate) struct ValueGuard<T>(Option<Arc<T>>);

#[cfg(loom)]
impl<T> ValueCell<T> {
    pub(crate) fn empty() -> Self {
        Self {
            ptr: loom::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            retired: std::sync::Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn load(&self) -> ValueGuard<T> {
        ValueGuard(self.load_full())
    }

    pub(crate) fn load_full(&self) -> Option<Arc<T>> {
        // Acquire: pairs with `swap`'s Release, so the value's contents are
        // those its writer stored.
        let ptr = self.ptr.load(Ordering::Acquire);
        if ptr.is_null() {
            return None;
        }
        // SAFETY: a non-null pointer came from `Arc::into_raw` in `swap`.
        // Its count is given back only in `drop`, which `&self` rules out.
        // The retired list keeps a replaced value's count up.
        unsafe {
            Arc::increment_strong_count(ptr);
            Some(Arc::from_raw(ptr))
        }
    }

    pub(crate) fn swap(&self, value: Option<Arc<T>>) -> Option<Arc<T>> {
        let new = value.map_or(std::ptr::null_mut(), |v| Arc::into_raw(v).cast_mut());
        // Release: publishes the new value. The old one needs no Acquire,
        // because the fetch that stored it happens before this one by
        // guarantee G2. And a stand-in weaker than `arc-swap` checks the
        // code above it harder.
        let old = self.ptr.swap(new, Ordering::Release);
        if old.is_null() {
            return None;
        }
        // SAFETY: `old` came from `Arc::into_raw` in an earlier swap, and
        // this swap took that count over.
        let old = unsafe { Arc::from_raw(old) };
        self.retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Arc::clone(&old));
        Some(old)
    }
}

#[cfg(loom)]
impl<T> ValueCell<T> {
    pub(crate) fn install_if_empty(&self, value: Arc<T>) -> bool {
        let new = Arc::into_raw(value).cast_mut();
        // Release: publishes the value, as `swap` does.
        let installed = self
            .ptr
            .compare_exchange(
                std::ptr::null_mut(),
                new,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok();
        if !installed {
            // SAFETY: `new` came from `Arc::into_raw` above and was never
            // shared.
            drop(unsafe { Arc::from_raw(new) });
        }
        installed
    }
}

#[cfg(loom)]
impl<T> Drop for ValueCell<T> {
    fn drop(&mut self) {
        // A load, because `&mut self` is the exclusivity, as in `OnceBox`'s drop.
        let ptr = self.ptr.load(Ordering::Relaxed);
        if !ptr.is_null() {
            // SAFETY: the cell's own count, from `Arc::into_raw`.
            drop(unsafe { Arc::from_raw(ptr) });
        }
    }
}

#[cfg(loom)]
impl<T> ValueGuard<T> {
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.as_deref()
    }

    pub(crate) fn is_some(&self) -> bool {
        self.0.is_some()
    }
}

/// The same revalidation as the off-loom [`ValueCache`], on the loom
/// stand-in's pointer.
#[cfg(loom)]
pub(crate) struct ValueCache<H: HoldsCell> {
    holder: H,
    cached: Option<Arc<H::Value>>,
}

#[cfg(loom)]
impl<H: HoldsCell> ValueCache<H> {
    pub(crate) fn new(holder: H) -> Self {
        let cached = holder.cell().load_full();
        Self { holder, cached }
    }

    pub(crate) fn load(&mut self) -> Option<&H::Value> {
        let cached = self.cached.as_ref().map_or(std::ptr::null(), Arc::as_ptr);
        // Relaxed: only whether the value changed is read here. A changed
        // one is loaded by `load_full`, whose Acquire reads its contents.
        let shared = self.holder.cell().ptr.load(Ordering::Relaxed);
        if !std::ptr::eq(cached, shared) {
            self.cached = self.holder.cell().load_full();
        }
        self.cached.as_deref()
    }
}
