//! A counting global allocator: exact live heap bytes of the whole process.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

/// Forwards to the system allocator and counts live bytes.
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees are ours; the counter does not touch
// the memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which
        // is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Relaxed);
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Relaxed);
        // SAFETY: `ptr` was allocated by this allocator (so by `System`)
        // with `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size as isize - layout.size() as isize, Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract, which
        // is `System.realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Live heap bytes right now (all threads).
pub fn heap() -> isize {
    LIVE.load(Relaxed)
}

/// Waits (up to 3 s) until the heap stops changing, so memory that an
/// earlier peer's threads free after it was dropped is not counted against
/// the next one; returns the settled heap size.
pub fn settled_heap() -> isize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let (mut last, mut still) = (heap(), 0);
    while still < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
        let now = heap();
        still = if now == last { still + 1 } else { 0 };
        last = now;
    }
    last
}
