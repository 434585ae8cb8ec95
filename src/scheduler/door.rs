//! The one door from the trigger core into the runtime: `impl Runtime for
//! Shared`, everything `core/` may ask of the scheduler (the trait, with
//! what each method is for, is `core/runtime.rs`).
//!
//! The fields of `Shared` are private to `scheduler/`, and the core names
//! only the trait, so what the core may ask is one short list checked by
//! the compiler: a new need shows up in the trait, as one more method with
//! its reason, never as a reach into the pool or the lifecycle. The other
//! direction is as narrow: the runtime drives a trigger through
//! `Core::dispatch` (run a due request), `Core::expire` (the timer's look
//! at a deadline) and a few read-only accessors, listed in `core/mod.rs`.

use super::shared::Shared;

use super::report::{panic_message, TaskPanic};
use crate::clock::Clock;
use crate::context::Outcome;

use crate::core::{Core, Runtime};
use crate::request::Stamp;
use crate::sync::{lock, Arc, Ordering, Weak};
use std::any::Any;

/// A trigger's core, on this runtime.
pub(crate) type TriggerCore = Core<Shared>;

impl Runtime for Shared {
    /// Whether shutdown has begun. Acquire: pairs with the Release in
    /// `begin_shutdown` (see there). A fire that passes this check may still
    /// race shutdown: the scan's close of its request word then decides
    /// (see `Request::close`).
    #[inline]
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The scheduler's clock (real or virtual).
    #[inline]
    fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Deadlines are rounded up to a multiple of this (µs, ≥ 1).
    #[inline]
    fn tick_us(&self) -> u64 {
        self.tick_us
    }

    /// Whether delays returned by tasks may share wake-ups (see
    /// [`Builder::coalesce_periodic`](super::Builder::coalesce_periodic)).
    #[inline]
    fn coalesces(&self) -> bool {
        self.coalesce
    }

    /// Queues a due run of `core` for a worker (`wake`: also wake an idle
    /// one); `false` if the scheduler is closed.
    #[inline]
    fn queue_run(&self, core: Arc<Core<Self>>, wake: bool) -> bool {
        self.pool.push(core, wake)
    }

    /// Hands `core`, whose IN_INBOX flag this caller set, to the timer
    /// (see `inbox.rs`); `false` if the scheduler is closed.
    #[inline]
    fn to_timer(&self, core: &Arc<Core<Self>>, stamp: Stamp) -> bool {
        self.pool.inbox_push(core, stamp)
    }

    fn to_timer_now(&self, core: &Arc<Core<Self>>, stamp: Stamp) -> bool {
        let pushed = self.pool.inbox_push_now(core, stamp);
        if pushed && self.manual_timer.get().is_some() {
            // A thread-less driver turns only in an advance: take the
            // inbox in now.
            self.poke_timer_now();
        }
        pushed
    }

    fn poke_timer_now(&self) {
        let Some(timer) = self.manual_timer.get() else {
            return self.pool.poke_locked(0);
        };
        // A thread-less driver: take the inbox in now (as a turn would,
        // without expiring anything), so the trigger's entry goes.
        let mut items = self.pool.take_inbox();
        let let_go = {
            let mut timer = lock(timer);
            let now_us = self.clock.now_us();
            for (core, stamp) in items.drain(..) {
                timer.take_in(core, stamp, now_us);
            }
            timer.take_let_go()
        };
        drop(let_go);
    }

    /// A trigger already with the timer got an earlier `deadline`: wake the
    /// timer's holder if it sleeps past it.
    #[inline]
    fn poke_timer(&self, deadline: u64) {
        self.pool.poke(deadline);
    }

    /// Lists a new trigger for stats and the shutdown scan; returns its
    /// slot, and whether the scan has been.
    fn register(&self, core: Weak<Core<Self>>) -> (u32, bool) {
        self.lifecycle.register(core)
    }

    /// Frees the slot [`register`](Self::register) returned.
    fn unregister(&self, slot: u32) {
        self.lifecycle.unregister(slot);
    }

    /// Puts a trigger with a `stuck_after` on the monitor's watch list.
    fn watch(&self, core: &Arc<Core<Self>>) {
        self.lifecycle.watch(core);
        // After the push: a monitor that parked before it saw the list
        // empty (under the pool's lock) and is woken here. An async
        // trigger's run goes to its runtime without waking a worker, so
        // its first run would not wake the monitor.
        self.pool.unpark_monitor();
    }

    /// A run the closed request word refused, its listing claimed by the
    /// caller (see `Lifecycle::list`).
    fn list_discarded(&self, core: &Core<Self>, kind: crate::request::Kind) {
        self.lifecycle.list(core, kind);
    }

    /// An iteration entered after shutdown began: whether to run it (see
    /// `Lifecycle::admit_late`).
    fn admit_late(&self, core: &Core<Self>, discard: impl FnOnce() -> bool) -> bool {
        self.lifecycle.admit_late(core, discard)
    }

    /// Records how an iteration listed in flight ended; whether the scan
    /// had run (see `Lifecycle::finish`).
    fn finish_listed(&self, core: &Core<Self>, outcome: Outcome, seen: Option<u32>) -> bool {
        self.lifecycle.finish(core, outcome, seen)
    }

    /// A due run gave RUNNING back without running (a cooldown): strike it
    /// from the report's iterations in flight if the scan listed it (see
    /// `Lifecycle::unlist`).
    fn unlist_in_flight(&self, core: &Core<Self>, seen: u32) {
        self.lifecycle.unlist(core, seen);
    }

    /// Whether `shutdown_now` asked iterations in flight to stop.
    fn is_cancelled(&self) -> bool {
        self.lifecycle.is_cancelled()
    }

    /// A uniformly random number in `0..bound` (`bound` > 0): seeded on
    /// virtual time, a thread-local generator otherwise.
    fn random_below(&self, bound: u64) -> u64 {
        match &self.rng {
            Some(rng) => lock(rng).u64(..bound),
            None => crate::jitter::with_rng(|rng| rng.u64(..bound)),
        }
    }

    /// Counts a panic caught in a task and calls the panic hook.
    fn refused_paused(&self) {
        // Relaxed: a statistic; it orders nothing.
        self.refused_paused.fetch_add(1, Ordering::Relaxed);
    }

    fn report_panic(&self, trigger: Option<&str>, payload: &(dyn Any + Send)) {
        // Relaxed: a statistic; it orders nothing.
        self.panics.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "tracing")]
        tracing::error!(
            trigger = trigger.unwrap_or("<unnamed>"),
            message = panic_message(payload).as_str(),
            "task panicked"
        );
        if let Some(hook) = &self.panic_hook {
            let report = TaskPanic {
                trigger: trigger.map(str::to_owned),
                message: panic_message(payload),
            };
            // A panicking hook must not take the worker down with it.
            let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&report)));
            if let Err(payload) = called {
                crate::sync::drop_payload(payload);
            }
        }
    }

    /// An async iteration was spawned: counted alive (like a thread) until
    /// it ends, so shutdown waits for it.
    fn alive_started(&self) {
        *lock(&self.alive) += 1;
    }

    /// Makes the task context (`cancelled`, `scheduler_time`) answer for
    /// this scheduler on this thread; returns what it replaced, for
    /// `context::leave_thread`.
    fn enter_context(&self) -> Option<crate::context::Context> {
        crate::context::enter_thread(&self.lifecycle.cancel, &self.clock)
    }

    fn pause_lock(&self) -> &crate::sync::Mutex<()> {
        &self.pausing
    }

    /// An async iteration ended.
    fn alive_ended(&self) {
        self.thread_exited();
    }
}
