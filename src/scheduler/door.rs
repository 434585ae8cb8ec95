//! The one door from the trigger core into the runtime. It is
//! `impl Runtime for Shared`, everything `core/` may ask of the scheduler.
//! The trait, with what each method is for, is in `core/runtime.rs`.
//!
//! The fields of `Shared` are private to `scheduler/`, and the core names
//! only the trait. So what the core may ask is one short list checked by
//! the compiler. A new need shows up in the trait as one more method with
//! its reason. It never shows up as a reach into the pool or the ledger.
//! The other direction is as narrow. The runtime drives a trigger through
//! `Core::dispatch`, which runs a due request, and `Core::expire`, the
//! timer's look at a deadline. It also uses a few read-only accessors,
//! listed in `core/mod.rs`.

use super::shared::Shared;
use crate::core::Counted;

use super::report::{panic_message, TaskPanic};
use crate::clock::Timing;
use crate::core::{Alive, Core, Runtime, Turn};
use crate::request::Stamp;
use crate::shutdown::Ledger;
use crate::sync::{lock, Ordering};
use std::any::Any;

/// A trigger's core, on this runtime.
pub(crate) type TriggerCore = Core<Shared>;

impl Runtime for Shared {
    /// Whether shutdown has begun. Acquire: pairs with the Release in
    /// `begin_shutdown`, which explains it. A fire that passes this check
    /// may still race shutdown. The scan's close of its request word then
    /// decides, in `Request::close`.
    #[inline]
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    #[inline]
    fn timing(&self) -> &Timing {
        &self.timing
    }

    /// Queues a due run of `core` for a worker, and with `wake` also wakes
    /// an idle one. It returns `false` if the scheduler is closed.
    #[inline]
    fn queue_run(&self, core: Counted<Core<Self>>, wake: bool) -> bool {
        self.pool.push(core, wake)
    }

    /// Hands `core`, whose IN_INBOX flag this caller set, to the timer
    /// through the inbox of `inbox.rs`. It returns `false` if the scheduler
    /// is closed.
    #[inline]
    fn to_timer(&self, core: &Counted<Core<Self>>, stamp: Stamp, at_once: bool) -> bool {
        if !at_once {
            return self.pool.inbox_push(core, stamp);
        }
        let pushed = self.pool.inbox_push_now(core, stamp);
        if pushed && self.manual_timer.get().is_some() {
            // A thread-less driver turns only in an advance, so take the inbox in now.
            self.turn_now();
        }
        pushed
    }

    fn poke_timer(&self, turn: Turn) {
        match turn {
            Turn::By(deadline) => self.pool.poke(deadline),
            Turn::Now => self.turn_now(),
        }
    }

    fn ledger(&self) -> &Ledger<Self> {
        &self.ledger
    }

    /// Puts a trigger with a `stuck_after` on the monitor's watch list.
    fn watch(&self, core: &Counted<Core<Self>>) {
        self.ledger.watch(core);
        // After the push. A monitor that parked before the push saw the
        // list empty, under the pool's lock. So it is woken here. An async
        // trigger's run goes to its runtime without waking a worker, so its
        // first run would not wake the monitor.
        self.pool.unpark_monitor();
    }

    /// A uniformly random number in `0..bound`, where `bound` > 0. It is
    /// seeded on virtual time and comes from a thread-local generator
    /// otherwise.
    fn random_below(&self, bound: u64) -> u64 {
        match &self.rng {
            Some(rng) => lock(rng).u64(..bound),
            None => crate::jitter::with_rng(|rng| rng.u64(..bound)),
        }
    }

    fn refused_paused(&self) {
        // Relaxed: a statistic that orders nothing.
        self.refused_paused.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a panic caught in a task and calls the panic hook.
    fn report_panic(&self, trigger: Option<&str>, payload: &(dyn Any + Send)) {
        // Relaxed: a statistic that orders nothing.
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

    /// An async iteration is counted alive like a thread until it ends,
    /// so shutdown waits for it.
    fn async_alive(&self, alive: Alive) {
        match alive {
            Alive::Started => *lock(&self.alive) += 1,
            Alive::Ended => self.thread_exited(),
        }
    }

    fn pause_lock(&self) -> &crate::sync::Mutex<()> {
        &self.pausing
    }
}

impl Shared {
    /// Gets the timer to take its inbox in at once. A trigger there lost
    /// its last handle, and its entry goes now.
    fn turn_now(&self) {
        let Some(timer) = self.manual_timer.get() else {
            return self.pool.poke_locked(0);
        };
        // A thread-less driver takes the inbox in now, as a turn would,
        // without expiring anything. So the trigger's entry goes.
        let mut items = self.pool.take_inbox();
        let let_go = {
            let mut timer = lock(timer);
            let now_us = self.timing.clock.now_us();
            for (core, stamp) in items.drain(..) {
                timer.take_in(core, stamp, now_us);
            }
            timer.take_let_go()
        };
        drop(let_go);
    }
}
