//! What the trigger core needs from the runtime that runs it, as one trait.
//!
//! The core names the trait and the scheduler implements it, as `impl Runtime for
//! Shared` in `scheduler/door.rs`. No file of `core/` imports the scheduler.
//!
//! This is tokio's `runtime::task::Schedule` in our terms. The task cell is
//! `Core<R: Runtime>`, holding an `Arc<R>`. The one scheduler type gives it a concrete
//! `R`. So every call below is static, and the core's size does not change. A unit test
//! can drive a `Core` with a runtime of its own and no threads.
//!
//! | the core needs to…                         | method                                            |
//! |--------------------------------------------|---------------------------------------------------|
//! | refuse work after shutdown                 | [`is_closed`](Runtime::is_closed)                 |
//! | read the time, round deadlines             | [`timing`](Runtime::timing)                       |
//! | hand a run to a worker                     | [`queue_run`](Runtime::queue_run)                 |
//! | hand a deadline to the timer               | [`to_timer`](Runtime::to_timer), [`poke_timer`](Runtime::poke_timer) |
//! | be listed by shutdown and stats            | [`ledger`](Runtime::ledger), [`watch`](Runtime::watch) |
//! | report a panic, count an async iteration   | [`report_panic`](Runtime::report_panic), [`async_alive`](Runtime::async_alive), [`refused_paused`](Runtime::refused_paused) |
//! | draw a `fire_within` delay                 | [`random_below`](Runtime::random_below)           |
//! | keep pause and resume apart                | [`pause_lock`](Runtime::pause_lock)               |

use super::Core;
use super::Counted;
use crate::clock::Timing;
use crate::request::Stamp;
use crate::shutdown::Ledger;
use crate::sync::Mutex;
use std::any::Any;

/// The runtime a trigger's core runs on. See the module docs.
pub(crate) trait Runtime: Send + Sync + Sized + 'static {
    /// Whether shutdown has begun.
    ///
    /// A fire that passes this check may still race shutdown. The scan's close of its request
    /// word then decides. See `Request::close`.
    fn is_closed(&self) -> bool;

    /// The runtime's clock and how deadlines round on it.
    fn timing(&self) -> &Timing;

    /// Queues a due run of `core` for a worker. With `wake`, it also wakes an idle one.
    /// Returns `false` if the runtime is closed.
    fn queue_run(&self, core: Counted<Core<Self>>, wake: bool) -> bool;

    /// Hands `core`, whose IN_INBOX flag this caller set, to the timer. Returns `false` if
    /// the runtime is closed.
    ///
    /// With `at_once`, the timer takes it in now, whatever it requests. That happens when its
    /// last handle is gone. See `Core::let_go`.
    fn to_timer(&self, core: &Counted<Core<Self>>, stamp: Stamp, at_once: bool) -> bool;

    /// Wakes the timer for a trigger already with it. See [`Turn`].
    fn poke_timer(&self, turn: Turn);

    /// The shutdown ledger, which holds the registry, the report and the cancel flag.
    fn ledger(&self) -> &Ledger<Self>;

    /// Puts a trigger with a `stuck_after` on the monitor's watch list,
    /// waking the monitor if it parked with nothing to watch.
    fn watch(&self, core: &Counted<Core<Self>>);

    /// A uniformly random number in `0..bound`, where `bound` is above zero.
    fn random_below(&self, bound: u64) -> u64;

    /// Counts a fire refused because its trigger was paused.
    ///
    /// It is a scheduler-wide figure, so no trigger spends bytes on it.
    fn refused_paused(&self) {}

    /// Counts a panic caught in a task and reports it.
    fn report_panic(&self, trigger: Option<&str>, payload: &(dyn Any + Send));

    /// An async iteration was spawned or ended. One alive is counted until it ends, so
    /// shutdown waits for it.
    fn async_alive(&self, alive: Alive);

    /// The lock that `pause` and `resume` take, and a fire never does.
    ///
    /// It keeps a resume from slipping between a pause's two steps. See `Core::pause`. There
    /// is one per runtime, since both calls are rare.
    fn pause_lock(&self) -> &Mutex<()>;
}

/// Why the timer is woken for a trigger it already holds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Turn {
    /// The trigger got an earlier deadline. The timer wakes if it sleeps past it.
    By(u64),
    /// The trigger lost its last handle, so the timer turns at once.
    Now,
}

/// An async iteration's life, as the runtime counts it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Alive {
    Started,
    Ended,
}
