//! The core driven by a runtime of the test's own, with no scheduler and no threads.
//!
//! [`TestRuntime`] queues runs and inbox pushes in plain vectors and moves a manual
//! clock. So a test plays the worker and the timer by hand, and sees every hand-off the
//! core makes.

use super::{Alive, Core, Runtime, TaskCell, Turn, SLOT_LIMIT};
use super::{Counted, WeakCounted};
use crate::clock::{Clock, ManualTime, Timing};
use crate::policy::trigger::PanicPolicy;
use crate::request::Stamp;
use crate::shutdown::Ledger;
use crate::sync::{Arc, AtomicBool, Mutex, Ordering};
use std::any::Any;
use std::time::Duration;

/// A runtime that only records what the core hands it.
pub(crate) struct TestRuntime {
    time: Arc<ManualTime>,
    timing: Timing,
    closed: AtomicBool,
    /// Runs handed to a worker, in order.
    pub(crate) queued: Mutex<Vec<Counted<Core<TestRuntime>>>>,
    /// Whether each of those hand-offs asked for a worker to be woken.
    pub(crate) wakes: Mutex<Vec<bool>>,
    /// Triggers handed to the timer, in order.
    pub(crate) to_timer: Mutex<Vec<WeakCounted<Core<TestRuntime>>>>,
    /// The stamps of those hand-offs, in the same order.
    pub(crate) stamps: Mutex<Vec<Stamp>>,
    /// Panics reported.
    pub(crate) panics: Mutex<Vec<String>>,
    ledger: Ledger<TestRuntime>,
    pausing: Mutex<()>,
    /// Run once by the next caller of `pause_lock`, before it locks.
    ///
    /// With it, a test forces what happens between a call's look and its lock.
    before_pause_lock: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl TestRuntime {
    pub(crate) fn new() -> Arc<Self> {
        let time = Arc::new(ManualTime::default());
        Arc::new(Self {
            timing: Timing {
                clock: Clock::Manual(Arc::clone(&time)),
                tick_us: 1,
                coalesce: false,
            },
            time,
            closed: AtomicBool::new(false),
            queued: Mutex::default(),
            wakes: Mutex::default(),
            to_timer: Mutex::default(),
            stamps: Mutex::default(),
            panics: Mutex::default(),
            ledger: Ledger::default(),
            pausing: Mutex::new(()),
            before_pause_lock: Mutex::new(None),
        })
    }

    /// Runs `hook` on the thread that next asks for the pause lock, before
    /// it takes it.
    pub(crate) fn before_pause_lock(&self, hook: impl FnOnce() + Send + 'static) {
        *self.before_pause_lock.lock().unwrap() = Some(Box::new(hook));
    }

    /// A trigger on this runtime running `task`.
    pub(crate) fn bind(
        self: &Arc<Self>,
        task: impl FnMut() -> Option<Duration> + Send + 'static,
    ) -> Counted<Core<Self>> {
        Core::new(
            Arc::clone(self),
            TaskCell::new(task, PanicPolicy::Stop),
            None,
            0,
        )
    }

    /// Plays a worker. Serves every queued run, and returns how many it took.
    pub(crate) fn run_queued(&self) -> usize {
        let queued = std::mem::take(&mut *self.queued.lock().unwrap());
        for core in &queued {
            assert!(core.dispatch().is_none(), "no re-arm in these tests");
        }
        queued.len()
    }
}

impl Runtime for TestRuntime {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
    fn timing(&self) -> &Timing {
        &self.timing
    }
    fn queue_run(&self, core: Counted<Core<Self>>, wake: bool) -> bool {
        self.queued.lock().unwrap().push(core);
        self.wakes.lock().unwrap().push(wake);
        !self.is_closed()
    }
    fn to_timer(&self, core: &Counted<Core<Self>>, stamp: Stamp, _at_once: bool) -> bool {
        self.to_timer.lock().unwrap().push(Counted::downgrade(core));
        self.stamps.lock().unwrap().push(stamp);
        !self.is_closed()
    }
    fn poke_timer(&self, _turn: Turn) {}
    fn ledger(&self) -> &Ledger<Self> {
        &self.ledger
    }
    fn watch(&self, _core: &Counted<Core<Self>>) {}
    fn random_below(&self, bound: u64) -> u64 {
        bound / 2
    }
    fn report_panic(&self, trigger: Option<&str>, _payload: &(dyn Any + Send)) {
        self.panics
            .lock()
            .unwrap()
            .push(trigger.unwrap_or("<unnamed>").to_owned());
    }
    fn async_alive(&self, _alive: Alive) {}
    fn pause_lock(&self) -> &Mutex<()> {
        let hook = self.before_pause_lock.lock().unwrap().take();
        if let Some(hook) = hook {
            hook();
        }
        &self.pausing
    }
}

#[test]
fn a_core_stays_within_its_byte_budget() {
    // 24 B of state words, the slot with its flags, the handle count and the
    // last delay. 40 B of statistics, with the two latenesses in one word and
    // the rare ones apart, behind `rare` with the policies. 32 B of task
    // cell, with a task of one pointer in place, and pointers to the runtime
    // and the rare part. No padding. The
    // reference counts add 8. No handle `Arc` is needed, since the handles
    // are counted here. Growing the core costs every idle trigger. The
    // runtime is a type parameter, so any runtime's core has the same size.
    // Feature `metrics` adds 16 B for the two counts it last reported.
    let budget = if cfg!(feature = "metrics") { 112 } else { 96 };
    let size = std::mem::size_of::<Core<TestRuntime>>();
    assert!(size <= budget, "{size}");
    // The one allocation: the counts in front take 8 B, not `Arc`'s 16.
    let allocation = super::counted::allocation_size::<Core<TestRuntime>>();
    assert!(allocation <= budget + 8, "{allocation}");
}

#[test]
fn a_trigger_gives_back_its_own_registry_slot_whatever_its_flags() {
    let runtime = TestRuntime::new();
    let slot = |core: &Core<TestRuntime>| core.marks.load(Ordering::Relaxed) & (SLOT_LIMIT - 1);
    let first = runtime.bind(|| None);
    let second = runtime.bind(|| None);
    let taken = slot(&second);
    assert_ne!(slot(&first), taken);
    // Both flags set, as a trigger queued and timed has them.
    second.mark_timed();
    assert!(!second.set_queued(Ordering::Relaxed));
    assert_eq!(slot(&second), taken, "the flags leave the slot as it was");
    drop(second);
    // The drop gave back the slot under the flags, so a new trigger takes it.
    let third = runtime.bind(|| None);
    assert_eq!(slot(&third), taken);
    assert_eq!(
        third.marks.load(Ordering::Relaxed),
        taken,
        "no flag is inherited"
    );
}

#[test]
fn fires_coalesce_into_one_queued_run_without_a_scheduler() {
    let runtime = TestRuntime::new();
    let runs = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&runs);
    let core = runtime.bind(move || {
        *counted.lock().unwrap() += 1;
        None
    });
    for _ in 0..3 {
        core.fire().unwrap();
    }
    // One queue slot, so the runtime was handed the trigger once, per G9.
    assert_eq!(runtime.queued.lock().unwrap().len(), 1);
    assert_eq!(runtime.run_queued(), 1);
    assert_eq!(*runs.lock().unwrap(), 1);
    // Served, so nothing is left and the next fire queues again.
    assert_eq!(runtime.run_queued(), 0);
    core.fire().unwrap();
    assert_eq!(runtime.run_queued(), 1);
    assert_eq!(*runs.lock().unwrap(), 2);
}

#[test]
fn fires_into_a_queued_run_count_toward_giving_way() {
    // A storm's fires while the run waits in the queue have nothing left to
    // do. Each counts toward the firer's next yield, as fires into a reserved
    // re-run do. The first fire queues the run and does not count.
    let runtime = TestRuntime::new();
    let core = runtime.bind(|| None);
    let counted = || super::fire::COALESCED.with(std::cell::Cell::get);
    let before = counted();
    core.fire().unwrap();
    assert_eq!(counted(), before, "the fire that queued the run");
    for _ in 0..300 {
        core.fire().unwrap();
    }
    assert_eq!(counted(), before + 300);
    assert_eq!(runtime.run_queued(), 1);
    core.fire().unwrap();
    assert_eq!(
        counted(),
        before + 300,
        "served: the next fire queues again"
    );
    // A dispatch popped the run and cleared its queue flag, not yet taking
    // the request. A fire then finds it due but queues it again itself. It
    // handed something on, so it does not count.
    let popped = std::mem::take(&mut *runtime.queued.lock().unwrap());
    assert_eq!(popped.len(), 1);
    core.clear_queued();
    core.fire().unwrap();
    assert_eq!(counted(), before + 300, "this fire queued the run");
    assert_eq!(runtime.queued.lock().unwrap().len(), 1);
    // The queued run holds the core, which holds the runtime. A scheduler's
    // shutdown takes its queue, and so does this, or Miri reports the leak.
    runtime.queued.lock().unwrap().clear();
}

#[test]
fn a_delayed_fire_goes_to_the_timer_once_and_runs_when_expired() {
    let runtime = TestRuntime::new();
    let core = runtime.bind(|| None);
    core.fire_after(Duration::from_millis(5)).unwrap();
    core.fire_after(Duration::from_millis(3)).unwrap();
    // Because of IN_INBOX, the second re-arm finds the trigger with the timer already.
    assert_eq!(runtime.to_timer.lock().unwrap().len(), 1);
    assert!(runtime.queued.lock().unwrap().is_empty());
    // Play the timer. The inbox item is read, and at its deadline expired.
    let seen = core.request().leave_inbox();
    assert_eq!(seen.kind().deadline(0), Some(3_000));
    runtime.time.set_us(3_000);
    assert!(core.expire(3_000), "the live deadline is due");
    core.runtime.queue_run(Counted::clone(&core), false);
    assert_eq!(runtime.run_queued(), 1);
    assert_eq!(core.stats().iterations, 1);
}

#[test]
fn a_re_run_stays_with_its_worker_however_long_the_iteration_ran() {
    // A firer's run wakes a worker. A fire reserved a re-run during a long
    // iteration, 5 ms on the manual clock. That re-run goes back to the queue
    // without waking anyone. The worker that ran it normally takes it next.
    let runtime = TestRuntime::new();
    let this: Arc<std::sync::OnceLock<WeakCounted<Core<TestRuntime>>>> = Arc::default();
    let (time, me) = (Arc::clone(&runtime.time), Arc::clone(&this));
    let mut iterations = 0;
    let core = runtime.bind(move || {
        iterations += 1;
        time.set_us(iterations * 5_000);
        if iterations == 1 {
            let core = me.get().and_then(WeakCounted::upgrade).expect("bound");
            core.fire().expect("open");
        }
        None
    });
    this.set(Counted::downgrade(&core)).unwrap();
    core.fire().unwrap();
    assert_eq!(runtime.run_queued(), 1);
    assert_eq!(core.stats().iterations, 1);
    assert_eq!(*runtime.wakes.lock().unwrap(), [true, false]);
    assert_eq!(runtime.run_queued(), 1, "the reserved re-run");
    assert_eq!(core.stats().iterations, 2);
}

#[test]
fn a_suspended_deadline_does_not_expire() {
    let runtime = TestRuntime::new();
    let core = runtime.bind(|| None);
    core.fire_after(Duration::from_millis(5)).unwrap();
    let _ = core.request().leave_inbox();
    core.suspend();
    runtime.time.set_us(5_000);
    assert!(!core.expire(5_000), "superseded by the suspend");
}

#[test]
fn a_deadline_re_armed_after_filing_expires_only_once_filed_again() {
    // The wheel entry keeps no copy of the word it was filed for. A newer AT
    // request sits in the inbox, behind IN_INBOX. So the entry's old deadline
    // finds nothing due. Once the timer takes the new one in, it is due.
    let runtime = TestRuntime::new();
    let core = runtime.bind(|| None);
    core.fire_after(Duration::from_millis(5)).unwrap();
    let _ = core.request().leave_inbox();
    core.fire_after(Duration::from_millis(9)).unwrap();
    runtime.time.set_us(5_000);
    assert!(!core.expire(5_000), "the 5 ms entry was superseded");
    let seen = core.request().leave_inbox();
    assert_eq!(seen.kind().deadline(5_000), Some(9_000));
    runtime.time.set_us(9_000);
    assert!(core.expire(9_000), "the re-filed deadline is due");
    assert_eq!(core.stats().iterations, 0);
    core.runtime.queue_run(Counted::clone(&core), false);
    assert_eq!(runtime.run_queued(), 1);
    assert_eq!(core.stats().iterations, 1);
}

#[test]
fn a_panic_is_reported_to_the_runtime() {
    let runtime = TestRuntime::new();
    let core = runtime.bind(|| panic!("a panic the runtime must hear of"));
    core.fire().unwrap();
    runtime.run_queued();
    assert_eq!(*runtime.panics.lock().unwrap(), ["<unnamed>"]);
}

#[test]
fn a_closed_runtime_refuses_fires() {
    let runtime = TestRuntime::new();
    let core = runtime.bind(|| None);
    runtime.closed.store(true, Ordering::Release);
    assert!(core.fire().is_err());
    assert!(core.fire_after(Duration::from_secs(1)).is_err());
}

#[test]
fn a_suspend_meeting_a_pause_lifted_meanwhile_tells_the_waiters_of_what_it_cancelled() {
    // The suspend sees the trigger paused. Before it takes the pause lock, a
    // resume lifts the pause and a waiter's fire is accepted. The suspend
    // then cancels that fire too. Its waiter hears "suspended" at once,
    // not after its whole timeout.
    use crate::core::ResumeTo;
    use crate::error::WaitError;
    use std::time::Instant;
    let runtime = TestRuntime::new();
    let runs = Arc::new(Mutex::new(0));
    let counted = Arc::clone(&runs);
    let core = runtime.bind(move || {
        *counted.lock().unwrap() += 1;
        None
    });
    core.pause();
    let waiter = Arc::new(Mutex::new(None));
    let (c, w) = (Counted::clone(&core), Arc::clone(&waiter));
    runtime.before_pause_lock(move || {
        assert!(c.resume(ResumeTo::Schedule).unwrap());
        let fired = c.fire_for_wait().expect("accepted: resumed");
        let deadline = Instant::now() + Duration::from_secs(20);
        let started = Instant::now();
        *w.lock().unwrap() = Some(std::thread::spawn(move || {
            let waited = c.waiters().wait(fired, Some(deadline));
            (waited, started.elapsed())
        }));
    });
    core.suspend();
    let waiting = waiter.lock().unwrap().take().expect("the hook ran");
    let (waited, took) = waiting.join().unwrap();
    assert_eq!(waited, Err(WaitError::Suspended));
    assert!(
        took < Duration::from_secs(10),
        "waited out its timeout: {took:?}"
    );
    // Nothing runs, since the suspend cancelled the accepted fire. Its
    // queued dispatch finds nothing to serve.
    runtime.run_queued();
    assert_eq!(*runs.lock().unwrap(), 0);
    assert!(!core.is_paused());
}
