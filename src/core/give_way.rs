//! A firer that gives way: under a fire storm, the threads firing would
//! otherwise hold the cores the task's worker needs.

/// Fires into an already pending run a thread makes before it yields its
/// CPU once (see [`give_way_in_a_storm`]). Not under loom: a model
/// thread's yield is loom's to schedule.
#[cfg(not(loom))]
const STORM_STREAK: u32 = 256;

#[cfg(not(loom))]
thread_local! {
    /// This thread's fires that coalesced into a pending run (wrapping; the
    /// unit tests read it too).
    pub(super) static COALESCED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// After a fire that only coalesced into a pending run — a reserved re-run,
/// or a run queued and not yet taken: every [`STORM_STREAK`]th such fire
/// on this thread yields the CPU once.
///
/// Such a fire has nothing left to do — the pending run serves it — and a
/// thread firing in a loop makes only these. On a machine with fewer
/// cores than busy threads, firers that never block would hold the cores
/// and starve the very worker that runs the task (a fire storm's
/// iterations/s then follows the kernel's fair share: two firers and one
/// worker on two cores leave the worker two thirds of one). One
/// `sched_yield` per 256 coalesced fires lets the worker run: a fraction
/// of a percent of the firer's time, and nothing for any caller that does
/// other work between fires.
///
/// Both kinds count (a fire into a queued run only when it queued nothing
/// itself). While the run is queued — between an iteration's end and the
/// next one's start, or while the worker that queued it waits for a CPU —
/// every fire lands on the queued run, and firers that only yielded into a
/// reserved re-run kept the cores from that very worker. Counting these
/// too, scenario 4 (a 1 ms task, two firers, 2 cores, rounds of 2 s) ran
/// 984–990 iterations/s in eight rounds against 840–955, and each firer's
/// fires/s rose from about 24 M to 25–30 M: a queued run's fires are RMWs
/// on the words the worker is about to take. A longer streak for these
/// gave less (1,024: 967–989/s; 4,096: 886–954/s); the cost where a run
/// stays queued because every worker is busy elsewhere (scenario 1's
/// "`fire()`, run already pending") is one `sched_yield` per 256 fires,
/// about 2 ns a fire, within that figure's noise.
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
