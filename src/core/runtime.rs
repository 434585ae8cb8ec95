//! What the trigger core needs from the runtime that runs it, as one
//! trait: the core names it, the scheduler implements it
//! (`scheduler/door.rs`: `impl Runtime for Shared`), and no file of
//! `core/` imports the scheduler.
//!
//! This is tokio's `runtime::task::Schedule` in our terms: the task cell is
//! `Core<R: Runtime>`, holding an `Arc<R>`; the one scheduler type gives it
//! a concrete `R`, so every call below is static and the core's size does
//! not change. A unit test can drive a `Core` with a runtime of its own and
//! no threads.
//!
//! | the core needs to…                         | method                                            |
//! |--------------------------------------------|---------------------------------------------------|
//! | refuse work after shutdown                 | [`is_closed`](Runtime::is_closed)                 |
//! | read the time, round deadlines             | [`clock`](Runtime::clock), [`tick_us`](Runtime::tick_us), [`coalesces`](Runtime::coalesces) |
//! | hand a run to a worker                     | [`queue_run`](Runtime::queue_run)                 |
//! | hand a deadline to the timer               | [`to_timer`](Runtime::to_timer), [`to_timer_now`](Runtime::to_timer_now), [`poke_timer`](Runtime::poke_timer), [`poke_timer_now`](Runtime::poke_timer_now) |
//! | be listed by shutdown and stats            | [`register`](Runtime::register) … [`unlist_in_flight`](Runtime::unlist_in_flight) |
//! | report a panic, count an async iteration   | [`report_panic`](Runtime::report_panic), [`alive_started`](Runtime::alive_started) |
//! | set the task context for an async poll     | [`enter_context`](Runtime::enter_context), [`is_cancelled`](Runtime::is_cancelled) |
//! | keep pause and resume apart                | [`pause_lock`](Runtime::pause_lock)               |

use super::Core;
use crate::clock::Clock;
use crate::context::{Context, Outcome};
use crate::request::{Kind, Stamp};
use crate::sync::{Arc, Mutex, Weak};
use std::any::Any;

/// The runtime a trigger's core runs on (see the module docs).
pub(crate) trait Runtime: Send + Sync + Sized + 'static {
    /// Whether shutdown has begun. A fire that passes this check may still
    /// race shutdown: the scan's close of its request word then decides
    /// (see `Request::close`).
    fn is_closed(&self) -> bool;

    /// The runtime's clock (real or virtual).
    fn clock(&self) -> &Clock;

    /// Deadlines are rounded up to a multiple of this (µs, ≥ 1).
    fn tick_us(&self) -> u64;

    /// Whether delays returned by tasks may share wake-ups.
    fn coalesces(&self) -> bool;

    /// Queues a due run of `core` for a worker (`wake`: also wake an idle
    /// one); `false` if the runtime is closed.
    fn queue_run(&self, core: Arc<Core<Self>>, wake: bool) -> bool;

    /// Hands `core`, whose IN_INBOX flag this caller set, to the timer;
    /// `false` if the runtime is closed.
    fn to_timer(&self, core: &Arc<Core<Self>>, stamp: Stamp) -> bool;

    /// Hands `core`, whose IN_INBOX flag this caller set, to the timer for
    /// a turn at once, whatever it requests (its last handle is gone: see
    /// `Core::let_go`); `false` if the runtime is closed.
    fn to_timer_now(&self, core: &Arc<Core<Self>>, stamp: Stamp) -> bool;

    /// A trigger already in (or on its way to) the timer's inbox lost its
    /// last handle: get the timer to turn at once (see `Core::let_go`).
    fn poke_timer_now(&self);

    /// A trigger already with the timer got an earlier `deadline`: wake the
    /// timer if it sleeps past it.
    fn poke_timer(&self, deadline: u64);

    /// Lists a new trigger for stats and the shutdown scan; returns its
    /// slot, and whether the scan has been (it will not close this
    /// trigger's request word: the trigger starts closed).
    fn register(&self, core: Weak<Core<Self>>) -> (u32, bool);

    /// Frees the slot [`register`](Self::register) returned.
    fn unregister(&self, slot: u32);

    /// Puts a trigger with a `stuck_after` on the monitor's watch list.
    fn watch(&self, core: &Arc<Core<Self>>);

    /// A run the closed request word refused (see `Request::close`),
    /// whose listing this caller has claimed: list it as discarded.
    fn list_discarded(&self, core: &Core<Self>, kind: Kind);

    /// An iteration entered after shutdown began: whether to run it; if
    /// not, `discard` is called, and the run listed as discarded if it
    /// returns `true`.
    fn admit_late(&self, core: &Core<Self>, discard: impl FnOnce() -> bool) -> bool;

    /// Records how an iteration listed in flight ended; whether the
    /// shutdown scan had run. `seen`: the live version its `exit` read,
    /// once it has exited (the scan listed it only if it came before).
    fn finish_listed(&self, core: &Core<Self>, outcome: Outcome, seen: Option<u32>) -> bool;

    /// A due run gave RUNNING back without running (a cooldown), its
    /// `exit` reading the live version `seen`: strike it from the
    /// iterations in flight if the shutdown scan listed it.
    fn unlist_in_flight(&self, core: &Core<Self>, seen: u32);

    /// Whether `shutdown_now` asked iterations in flight to stop.
    fn is_cancelled(&self) -> bool;

    /// A uniformly random number in `0..bound` (`bound` > 0).
    fn random_below(&self, bound: u64) -> u64;

    /// Counts a fire refused because its trigger was paused (a
    /// scheduler-wide figure: no trigger spends bytes on it).
    fn refused_paused(&self) {}

    /// Counts a panic caught in a task and reports it.
    fn report_panic(&self, trigger: Option<&str>, payload: &(dyn Any + Send));

    /// An async iteration was spawned: counted alive until it ends, so
    /// shutdown waits for it.
    fn alive_started(&self);

    /// An async iteration ended.
    fn alive_ended(&self);

    /// Makes the task context (`cancelled`, `scheduler_time`) answer for
    /// this runtime on this thread; returns what it replaced, for
    /// `context::leave_thread`.
    fn enter_context(&self) -> Option<Context>;

    /// The lock `pause` and `resume` take (never a fire): it keeps a
    /// resume from slipping between a pause's two steps (see
    /// `Core::pause`). One per runtime: both are rare.
    fn pause_lock(&self) -> &Mutex<()>;
}
