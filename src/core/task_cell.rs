//! The task cell, which only the RUNNING holder touches.
//!
//! It holds the task, with the back-off of a
//! [`PanicPolicy::Retry`] if it has one. It is stored in the
//! trigger's own allocation when it fits.
//!
//! A task is one of several kinds. It is sync or async, with or without a retry back-off.
//! So the cell keeps it behind a table of functions, as a trait object would. Unlike a
//! `Box<dyn _>`, the cell keeps a task no larger than a pointer *in place*. A closure that
//! captures one `Arc` or one reference is the common case. It costs the trigger no
//! allocation of its own. A larger task is boxed, with the box's pointer in the same
//! place.
//!
//! ```text
//! TaskCell (two pointers: 16 B on 64-bit targets, inside the core)
//! ┌──────────────────────┬───────────────────────────────────┐
//! │ &'static BodyTable   │ slot: the task (at most a pointer │
//! │ (call, settle, drop) │    in size and alignment), or a   │
//! │                      │    pointer to its box             │
//! └──────────────────────┴───────────────────────────────────┘
//! ```
//!
//! The cell itself is plain single-threaded code. The core's invariant on `Core::task`
//! says who may touch it and when.

use crate::async_task::{AsyncBody, AsyncTask, TaskFuture};
use crate::jitter::RetryBackoff;
use crate::policy::trigger::PanicPolicy;
use crate::task::Task;
use std::marker::PhantomData;
use std::mem::{align_of, size_of, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

/// A task that runs on the worker, or one whose iterations are futures,
/// with or without a retry back-off.
trait Body: Send + 'static {
    /// Calls the task, catching a panic.
    fn call(&mut self) -> Called;

    /// After an iteration's result, the delay before the next attempt.
    ///
    /// There is one if the task panicked under a retry policy. A normal return resets the
    /// policy.
    fn settle(&mut self, _result: &std::thread::Result<Option<Duration>>) -> Option<Duration> {
        None
    }
}

/// A task under [`PanicPolicy::Retry`].
///
/// The back-off lives beside it, in the task's box. With the back-off, it is larger than
/// a pointer.
struct Retrying<B> {
    body: B,
    backoff: RetryBackoff,
}

impl<B: Body> Body for Retrying<B> {
    fn call(&mut self) -> Called {
        self.body.call()
    }

    fn settle(&mut self, result: &std::thread::Result<Option<Duration>>) -> Option<Duration> {
        match result {
            Ok(_) => {
                self.backoff.reset();
                None
            }
            Err(_) => {
                let next = self.backoff.failed();
                if next.is_none() {
                    // Out of retries. The trigger stops until fired again, and that
                    // fire starts a fresh round of retries.
                    self.backoff.reset();
                }
                next
            }
        }
    }
}

/// A sync task.
struct SyncBody<T>(T);

impl<T: Task> Body for SyncBody<T> {
    fn call(&mut self) -> Called {
        Called::Returned(catch_unwind(AssertUnwindSafe(|| self.0.run())))
    }
}

impl<A: AsyncTask> Body for AsyncBody<A> {
    fn call(&mut self) -> Called {
        match catch_unwind(AssertUnwindSafe(|| self.task.start())) {
            Ok(future) => Called::Started(future),
            Err(payload) => Called::Returned(Err(payload)),
        }
    }
}

/// What calling the task gave.
pub(super) enum Called {
    /// A sync task returned or panicked.
    Returned(std::thread::Result<Option<Duration>>),
    /// An async task returned this iteration's future, to spawn on its
    /// executor.
    Started(TaskFuture),
}

/// One pointer's room, for the task itself or a pointer to its box.
type Slot = MaybeUninit<*mut ()>;

/// Whether a `B` is kept in the slot itself rather than boxed.
const fn fits<B>() -> bool {
    size_of::<B>() <= size_of::<Slot>() && align_of::<B>() <= align_of::<Slot>()
}

/// What the cell does with its task, for one task type.
///
/// It is a trait object's vtable, written out because the task may live in the cell
/// itself.
struct BodyTable {
    call: unsafe fn(*mut Slot) -> Called,
    settle: unsafe fn(*mut Slot, &std::thread::Result<Option<Duration>>) -> Option<Duration>,
    drop: unsafe fn(*mut Slot),
}

/// The [`BodyTable`] of a `B`, as a constant.
///
/// So `&Table::<B>::TABLE` is a `'static` promoted constant, one per task type.
struct Table<B>(PhantomData<B>);

impl<B: Body> Table<B> {
    const TABLE: BodyTable = BodyTable {
        call: call::<B>,
        settle: settle::<B>,
        drop: drop_body::<B>,
    };
}

/// The `B` a slot holds, in place or in its box.
///
/// # Safety
///
/// `slot` is the slot of a live [`TaskCell`] built from a `B`, and the
/// caller has the cell exclusively for `'a`.
unsafe fn body<'a, B>(slot: *mut Slot) -> &'a mut B {
    if fits::<B>() {
        // SAFETY: `with_body` wrote a `B` at the slot's start, since it fits in size
        // and alignment. The caller has the cell exclusively.
        unsafe { &mut *slot.cast::<B>() }
    } else {
        // SAFETY: `with_body` wrote the pointer of a boxed `B`, which lives until
        // `drop_body`. The caller has the cell exclusively.
        unsafe { &mut **slot.cast::<*mut B>() }
    }
}

/// # Safety
///
/// As [`body`].
unsafe fn call<B: Body>(slot: *mut Slot) -> Called {
    // SAFETY: passed on from the caller.
    unsafe { body::<B>(slot) }.call()
}

/// # Safety
///
/// As [`body`].
unsafe fn settle<B: Body>(
    slot: *mut Slot,
    result: &std::thread::Result<Option<Duration>>,
) -> Option<Duration> {
    // SAFETY: passed on from the caller.
    unsafe { body::<B>(slot) }.settle(result)
}

/// # Safety
///
/// As [`body`]. The cell is not used again.
unsafe fn drop_body<B>(slot: *mut Slot) {
    if fits::<B>() {
        // SAFETY: the slot holds a live `B`, as `body` says. It is dropped once,
        // since the cell is being dropped.
        unsafe { slot.cast::<B>().drop_in_place() }
    } else {
        // SAFETY: the pointer came from `Box::into_raw` in `with_body`. It is given
        // back once, since the cell is being dropped.
        drop(unsafe { Box::from_raw(*slot.cast::<*mut B>()) });
    }
}

/// The task of one trigger, in two pointers.
pub(crate) struct TaskCell {
    table: &'static BodyTable,
    slot: Slot,
}

// SAFETY: the slot owns a `B: Body`, in place or boxed. The trait requires `B`
// to be `Send`. Moving the cell to another thread moves only that `B`, as
// moving a `Box<dyn Body>` would.
unsafe impl Send for TaskCell {}

impl Drop for TaskCell {
    fn drop(&mut self) {
        // SAFETY: `table` and `slot` were built together by `with_body`. `&mut self`
        // is exclusive, and the cell is not used again.
        unsafe { (self.table.drop)(&mut self.slot) }
    }
}

impl TaskCell {
    pub(crate) fn new<T: Task>(task: T, on_panic: PanicPolicy) -> Self {
        Self::with_policy(SyncBody(task), on_panic)
    }

    #[cfg_attr(not(any(feature = "tokio", loom)), allow(dead_code))]
    pub(crate) fn new_async<A: AsyncTask>(body: AsyncBody<A>, on_panic: PanicPolicy) -> Self {
        Self::with_policy(body, on_panic)
    }

    fn with_policy<B: Body>(body: B, on_panic: PanicPolicy) -> Self {
        match on_panic {
            PanicPolicy::Stop => Self::with_body(body),
            PanicPolicy::Retry(backoff) => Self::with_body(Retrying { body, backoff }),
        }
    }

    fn with_body<B: Body>(body: B) -> Self {
        let mut slot = Slot::uninit();
        if fits::<B>() {
            // SAFETY: a `B` fits in the slot, in size and alignment. A `MaybeUninit`
            // may hold any bytes. `drop_body` drops it.
            unsafe { slot.as_mut_ptr().cast::<B>().write(body) };
        } else {
            slot.write(Box::into_raw(Box::new(body)).cast());
        }
        Self {
            table: &Table::<B>::TABLE,
            slot,
        }
    }

    /// Calls the task, catching a panic.
    pub(super) fn call(&mut self) -> Called {
        // SAFETY: `table` and `slot` were built together by `with_body`. `&mut self`
        // is exclusive.
        unsafe { (self.table.call)(&mut self.slot) }
    }

    /// After an iteration's result, the delay before the next attempt.
    ///
    /// There is one if the task panicked under a retry policy. A normal return resets the
    /// policy.
    pub(super) fn settle(
        &mut self,
        result: &std::thread::Result<Option<Duration>>,
    ) -> Option<Duration> {
        // SAFETY: as in `call`.
        unsafe { (self.table.settle)(&mut self.slot, result) }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::jitter::RetryBackoff;
    use crate::policy::trigger::Policies;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    use std::sync::Arc;

    #[test]
    fn async_support_costs_a_sync_trigger_no_bytes() {
        // One table pointer and one slot for any kind of task. A retry back-off
        // lives in the task's box. The async task's cancel slot and the name
        // live in the policy box, which is usually absent.
        assert_eq!(size_of::<TaskCell>(), 16);
        assert_eq!(size_of::<Option<Box<Policies>>>(), 8);
    }

    fn returned(called: Called) -> std::thread::Result<Option<Duration>> {
        match called {
            Called::Returned(result) => result,
            Called::Started(_) => panic!("a sync task started a future"),
        }
    }

    fn backoff() -> PanicPolicy {
        PanicPolicy::Retry(RetryBackoff::new(
            Duration::from_secs(1),
            Duration::from_secs(60),
        ))
    }

    /// Runs `cell` three times, each run expected to count in `runs` and return `delay`.
    ///
    /// Then it drops the cell, which must drop the task. The task is the only other holder of
    /// `runs`.
    fn runs_and_drops_once(mut cell: TaskCell, runs: &Arc<AtomicU32>, delay: Duration) {
        for round in 1..=3 {
            let result = returned(cell.call());
            assert_eq!(result.as_ref().ok(), Some(&Some(delay)));
            assert_eq!(cell.settle(&result), None);
            assert_eq!(runs.load(Relaxed), round);
        }
        assert_eq!(Arc::strong_count(runs), 2, "the cell holds the task");
        drop(cell);
        assert_eq!(
            Arc::strong_count(runs),
            1,
            "dropping the cell drops the task"
        );
    }

    #[test]
    fn a_task_of_one_pointer_stays_in_place() {
        let runs = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&runs);
        let task = move || {
            counted.fetch_add(1, Relaxed);
            Some(Duration::from_millis(7))
        };
        assert_eq!(size_of_val(&task), size_of::<*const ()>());
        fn fits_like<T>(_: &T) -> bool {
            fits::<SyncBody<T>>()
        }
        assert!(
            fits_like(&task),
            "a closure capturing one Arc is kept in place"
        );
        runs_and_drops_once(
            TaskCell::new(task, PanicPolicy::Stop),
            &runs,
            Duration::from_millis(7),
        );
    }

    #[test]
    fn a_larger_task_is_boxed() {
        let runs = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&runs);
        let extra = [3_u64; 3];
        let task = move || {
            counted.fetch_add(1, Relaxed);
            Some(Duration::from_millis(extra.iter().sum()))
        };
        assert!(!fits::<SyncBody<[u64; 4]>>());
        runs_and_drops_once(
            TaskCell::new(task, PanicPolicy::Stop),
            &runs,
            Duration::from_millis(9),
        );
        // A retry back-off makes even a one-pointer task too large.
        let counted = Arc::clone(&runs);
        runs.store(0, Relaxed);
        let task = move || {
            counted.fetch_add(1, Relaxed);
            Some(Duration::ZERO)
        };
        fn fits_retrying<T>(_: &T) -> bool {
            fits::<Retrying<SyncBody<T>>>()
        }
        assert!(!fits_retrying(&task), "a retrying task is boxed");
        runs_and_drops_once(TaskCell::new(task, backoff()), &runs, Duration::ZERO);
    }

    #[test]
    fn a_task_of_no_bytes_runs_too() {
        fn task() -> Option<Duration> {
            Some(Duration::from_secs(1))
        }
        assert_eq!(size_of_val(&task), 0);
        let mut cell = TaskCell::new(task, PanicPolicy::Stop);
        for _ in 0..2 {
            let result = returned(cell.call());
            assert_eq!(result.ok(), Some(Some(Duration::from_secs(1))));
        }
    }

    #[test]
    fn a_retry_policy_keeps_its_back_off_beside_the_task() {
        let mut cell = TaskCell::new(|| -> Option<Duration> { panic!("always") }, backoff());
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let result = returned(cell.call());
        std::panic::set_hook(hook);
        assert!(result.is_err());
        assert_eq!(cell.settle(&result), Some(Duration::from_secs(1)));
        assert_eq!(cell.settle(&result), Some(Duration::from_secs(2)));
        assert_eq!(cell.settle(&Ok(None)), None, "a normal return resets it");
        assert_eq!(cell.settle(&result), Some(Duration::from_secs(1)));
    }
}
