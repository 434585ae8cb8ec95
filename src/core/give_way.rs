//! A firer that gives way under a fire storm.
//!
//! Without it, the threads firing would hold the cores that the task's worker needs.

/// Fires into an already pending run that a thread makes before it yields its CPU once.
/// See [`give_way_in_a_storm`].
///
/// It is not used under loom, since a model thread's yield is loom's to schedule.
#[cfg(not(loom))]
const STORM_STREAK: u32 = 256;

#[cfg(not(loom))]
thread_local! {
    /// This thread's fires that coalesced into a pending run.
    ///
    /// The count wraps. The unit tests read it too.
    pub(super) static COALESCED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Runs after a fire that only coalesced into a pending run. Every [`STORM_STREAK`]th such
/// fire on this thread yields the CPU once.
///
/// The pending run is a reserved re-run, or a run queued and not yet taken. Such a fire
/// has nothing left to do, since the pending run serves it. A thread firing in a loop
/// makes only these. A machine may have fewer cores than busy threads. Then firers that
/// never block would hold the cores and starve the very worker that runs the task. A fire
/// storm's iterations per second then follow the kernel's fair share. Two firers and one
/// worker on two cores leave the worker two thirds of one. One `sched_yield` per
/// `STORM_STREAK` coalesced fires lets the worker run. It costs a fraction of a percent of
/// the firer's time, and nothing for any caller that does other work between fires.
///
/// Both kinds of pending run count. A fire into a queued run counts only when it queued
/// nothing itself. The run is queued between an iteration's end and the next one's start,
/// or while the worker that queued it waits for a CPU. Meanwhile every fire lands on the
/// queued run. Firers that only yielded into a reserved re-run kept the cores from that
/// very worker. Counting the fires into a queued run too raised both the iterations per
/// second and each firer's fires per second in scenario 4 of the benchmarks. A queued
/// run's fires are RMWs on the words that the worker is about to take. A longer streak
/// gave less. A run may also stay queued because every worker is busy elsewhere. There
/// the cost is one `sched_yield` per `STORM_STREAK` fires, within the noise of scenario 1's
/// "`fire()`, run already pending".
#[inline]
pub(super) fn give_way_in_a_storm() {
    #[cfg(not(loom))]
    COALESCED.with(|count| {
        let next = count.get().wrapping_add(1);
        count.set(next);
        if next % STORM_STREAK == 0 {
            std::thread::yield_now();
        }
    });
}
