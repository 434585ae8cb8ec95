//! `fire_and_wait`: "refresh now and tell me when it is done". A waiter
//! fires, then waits for the first iteration that serves its fire — one
//! that entered with the fire's version or a newer one (30-bit wrapping
//! order; a run already in flight at the call has an older version and does
//! not count) — and returns that iteration's outcome. Concurrent waiters
//! share one run: the newest version serves them all.
//!
//! The waiters' state is allocated on a trigger's first `fire_and_wait`;
//! until then the run path pays one null check. It is a lock outside the
//! lock-free protocol — loom's under `--cfg loom`, so that the models see
//! a waiter's look, and a run's start, as steps.
//!
//! # Verdicts that hold
//!
//! "Suspended" and "shut down" are verdicts on a fire that no run has
//! served. A run that entered (`State::enter`) before a suspend's or a
//! pause's advance still runs (G6, G17), and so does one that entered
//! before the shutdown scan reached its trigger (an iteration in flight at
//! shutdown: the scan moves its version on, `State::touch_for_scan`; one
//! entering after finds the scheduler closed and is discarded under the
//! report's lock, `Ledger::admit_late`). So a run's `enter`, up to its
//! decision to run (recorded as its start) or not (a cooldown's deferral,
//! a run discarded at shutdown), happens under the waiters' lock
//! ([`Waiters::starting`]); the suspend, the pause, the resume (for the
//! fires the pause and it cancelled: no run starts while paused) and the
//! scan record themselves under that lock after their advance (the scan
//! after it has looked at the trigger). If the advance came after the `enter`, the
//! lock was held from before the `enter`, so the record comes after the
//! run's start. A waiter, which looks under the lock, is thus never told
//! "suspended" or "shut down" while a run that entered before that
//! suspend, pause or scan, and serves its fire, goes on to run. (A run
//! of a newer fire, made after the verdict, serves the fire too, as any
//! newer run does; the waiter has its answer by then.)

use crate::context::Outcome;
use crate::error::WaitError;
use crate::request::{at_least, is_newer};
use crate::state::VERSION_MASK;
use crate::sync::{lock, Condvar, Mutex};
use std::task::Waker;
use std::time::Instant;

/// A quarter of the 30-bit version ring: how far behind a record may fall
/// before `Waiters::age` forgets it.
const AGE_LIMIT: u32 = 1 << 28;

/// Records `version` in `slot` unless it holds a newer one (concurrent
/// calls may report out of order).
fn advance(slot: &mut Option<u32>, version: u32) {
    if slot.map_or(true, |newest| at_least(version, newest)) {
        *slot = Some(version);
    }
}

#[derive(Default)]
struct WaitState {
    /// The version of the last iteration that started.
    started: Option<u32>,
    /// The version and outcome of the last iteration that finished.
    finished: Option<(u32, Outcome)>,
    /// The version the last `suspend` installed — or a pause, or a resume
    /// (for the fires the pause and it cancelled).
    suspended: Option<u32>,
    /// The shutdown scan has looked at this trigger: nothing starts that
    /// has not started yet.
    scanned: bool,
    /// The version the last `Waiters::age` was told of.
    aged_at: Option<u32>,
    /// Async waiters to wake on the next change.
    /// Each pending async waiter's waker, under the waiter's id: a waiter
    /// dropped unfinished (timed out, a `select!` branch not taken)
    /// removes its own, so abandoned waiters leave nothing behind.
    wakers: Vec<(u64, Waker)>,
    /// The last async waiter's id.
    #[cfg(feature = "tokio")]
    next_id: u64,
}

/// Whether `recorded` is between a quarter and half the ring behind
/// `version` (see `Waiters::age`).
fn stale(version: u32, recorded: u32) -> bool {
    let behind = version.wrapping_sub(recorded) & VERSION_MASK;
    (AGE_LIMIT..=AGE_LIMIT * 2).contains(&behind)
}

impl WaitState {
    /// Whether `version` is too old to record (see `Waiters::age`).
    fn is_stale(&self, version: u32) -> bool {
        self.aged_at.is_some_and(|aged_at| stale(aged_at, version))
    }

    /// What a waiter for the fire of version `fired` gets now, if it is
    /// done waiting (see the module docs).
    fn check(&self, fired: u32) -> Option<Result<Outcome, WaitError>> {
        if let Some((version, outcome)) = self.finished {
            if at_least(version, fired) {
                return Some(Ok(outcome));
            }
        }
        let serving = self.started.is_some_and(|v| at_least(v, fired));
        if !serving {
            // Superseded before any run served it: a suspend, or shutdown
            // (nothing new starts). See "Verdicts that hold" above.
            if self.suspended.is_some_and(|v| is_newer(v, fired)) {
                return Some(Err(WaitError::Suspended));
            }
            if self.scanned {
                return Some(Err(WaitError::Shutdown));
            }
        }
        None
    }
}

/// The waiters of one trigger.
#[derive(Default)]
pub(crate) struct Waiters {
    state: Mutex<WaitState>,
    changed: Condvar,
}

impl Waiters {
    fn update(&self, f: impl FnOnce(&mut WaitState)) {
        let wakers = {
            let mut state = lock(&self.state);
            f(&mut state);
            std::mem::take(&mut state.wakers)
        };
        self.changed.notify_all();
        for (_, waker) in wakers {
            waker.wake();
        }
    }

    /// The shutdown scan has looked at this trigger (after its advance):
    /// a waiter whose fire no run has started for gives up.
    pub(crate) fn scanned(&self) {
        self.update(|s| s.scanned = true);
    }

    /// A run that took the request of `version` enters: `decide` enters
    /// it and decides whether it runs, under the waiters' lock (see
    /// "Verdicts that hold"); if `runs` says it does, its start is
    /// recorded before the lock is let go. Nobody is woken: a start only
    /// keeps a verdict from being given, so a waiter still waiting has
    /// nothing new to find.
    pub(crate) fn starting<T>(
        &self,
        version: u32,
        decide: impl FnOnce() -> T,
        runs: impl FnOnce(&T) -> bool,
    ) -> T {
        let mut state = lock(&self.state);
        let decided = decide();
        if runs(&decided) && !state.is_stale(version) {
            advance(&mut state.started, version);
        }
        decided
    }

    /// The iteration of `version` ended with `outcome`. Told after the
    /// trigger's `exit`, so a newer run may have been told first: the
    /// record keeps the newest (which serves every waiter the older one
    /// would have).
    pub(crate) fn finished(&self, version: u32, outcome: Outcome) {
        self.update(|s| {
            // A run that began a quarter of the ring ago or more (fired
            // into for that long) serves no waiter still waiting.
            if !s.is_stale(version)
                && s.finished
                    .map_or(true, |(newest, _)| at_least(version, newest))
            {
                s.finished = Some((version, outcome));
            }
        });
    }

    /// `suspend` installed `version`.
    pub(crate) fn suspended(&self, version: u32) {
        self.update(|s| advance(&mut s.suspended, version));
    }

    /// The trigger's version reached `version` (called once per 2^16
    /// versions): forgets every record between a quarter and half the
    /// ring behind it. Records only age, 2^16 versions between two calls,
    /// so none gets half the ring old — where the wrapping comparison
    /// would take it for newer than a fresh fire, and a waiter would
    /// return an outcome from long before its fire (a debounced trigger
    /// re-armed for hours without running, then `fire_and_wait`). The
    /// price, at that scale: a waiter whose serving run spans 2^28 fires
    /// gets the outcome of the re-run those fires reserved, which serves
    /// it too.
    /// A run's start or end reported after that is not recorded either.
    pub(crate) fn age(&self, version: u32) {
        let mut state = lock(&self.state);
        state.aged_at = Some(version);
        let s = &mut *state;
        s.started = s.started.filter(|&v| !stale(version, v));
        s.finished = s.finished.filter(|&(v, _)| !stale(version, v));
        s.suspended = s.suspended.filter(|&v| !stale(version, v));
    }

    /// Waits for the iteration serving the fire of version `fired` (see
    /// the module docs) until `deadline` (`None`: no limit).
    pub(crate) fn wait(&self, fired: u32, deadline: Option<Instant>) -> Result<Outcome, WaitError> {
        let mut state = lock(&self.state);
        loop {
            if let Some(done) = state.check(fired) {
                return done;
            }
            state = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(WaitError::Timeout);
                    }
                    crate::sync::wait_timeout(&self.changed, &self.state, state, left)
                }
                None => crate::sync::wait(&self.changed, state),
            };
        }
    }
}

#[cfg(feature = "tokio")]
impl Waiters {
    /// The async side of [`wait`](Self::wait): an async waiter for the fire
    /// of version `fired` gets its result, or leaves `waker` (under `id`,
    /// given on its first registration) to be woken on the next change.
    pub(crate) fn poll_wait(
        &self,
        fired: u32,
        id: &mut Option<u64>,
        waker: &Waker,
    ) -> std::task::Poll<Result<Outcome, WaitError>> {
        let mut state = lock(&self.state);
        // Checked and registered under one lock: a change either is seen
        // here or finds this waker.
        if let Some(done) = state.check(fired) {
            // Its waker, if still listed, goes with it (see `forget`).
            return std::task::Poll::Ready(done);
        }
        let id = *id.get_or_insert_with(|| {
            state.next_id += 1;
            state.next_id
        });
        // Registered once per waiter: a change takes every waker, and a
        // waiter polled again with a new waker replaces its own.
        match state.wakers.iter_mut().find(|(waiter, _)| *waiter == id) {
            Some((_, listed)) if listed.will_wake(waker) => {}
            Some((_, listed)) => listed.clone_from(waker),
            None => state.wakers.push((id, waker.clone())),
        }
        std::task::Poll::Pending
    }

    /// An async waiter dropped unfinished: its waker goes.
    pub(crate) fn forget(&self, id: u64) {
        let mut state = lock(&self.state);
        state.wakers.retain(|(waiter, _)| *waiter != id);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::state::VERSION_MASK;
    use proptest::prelude::*;
    use std::time::Duration;

    #[test]
    fn a_record_half_the_ring_old_never_serves_a_new_fire() {
        let waiters = Waiters::default();
        waiters.starting(5, || (), |_| true);
        waiters.finished(5, Outcome::Completed);
        // More than half the ring of versions later (a debounced trigger
        // re-armed for hours without running), aged every 2^16 versions on
        // the way, as the trigger's advances do.
        let fired = (5 + (1 << 29) + 10) & VERSION_MASK;
        let mut version = 5;
        while version != fired {
            version = (version + 1) & VERSION_MASK;
            if version & 0xFFFF == 0 {
                waiters.age(version);
            }
        }
        let soon = Some(Instant::now() + Duration::from_millis(30));
        assert_eq!(
            waiters.wait(fired, soon),
            Err(WaitError::Timeout),
            "the old run does not serve the new fire"
        );
        // Nor does such a run that ends only now (fired into all along).
        waiters.finished(5, Outcome::Panicked);
        assert_eq!(waiters.wait(fired, soon), Err(WaitError::Timeout));
        // A record a few versions behind stays (a waiter may still need it).
        waiters.finished(fired, Outcome::Completed);
        waiters.age((fired + 3) & VERSION_MASK);
        assert_eq!(waiters.wait(fired, soon), Ok(Outcome::Completed));
    }

    /// What happens to the trigger while a waiter waits.
    #[derive(Debug, Clone, Copy)]
    enum Event {
        /// Another fire (a newer version).
        Fire,
        /// A run of the live version starts (if none is running).
        Start,
        /// The running run ends with this outcome.
        Finish(Outcome),
        /// `suspend` (a newer version).
        Suspend,
        /// The scheduler shuts down.
        Close,
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            Just(Event::Fire),
            Just(Event::Start),
            Just(Event::Finish(Outcome::Completed)),
            Just(Event::Finish(Outcome::Panicked)),
            Just(Event::Suspend),
            Just(Event::Close),
        ]
    }

    /// The trigger's side of the history, reported to `waiters`.
    struct Trigger<'a> {
        waiters: &'a Waiters,
        live: u32,
        armed: bool,
        running: Option<u32>,
        closed: bool,
    }

    impl Trigger<'_> {
        /// Applies `event`; returns whether a run started.
        fn apply(&mut self, event: Event) -> bool {
            match event {
                Event::Fire => {
                    self.live = (self.live + 1) & VERSION_MASK;
                    self.armed = true;
                }
                Event::Start if self.armed && self.running.is_none() && !self.closed => {
                    self.armed = false;
                    self.running = Some(self.live);
                    self.waiters.starting(self.live, || (), |_| true);
                    return true;
                }
                Event::Start => {}
                Event::Finish(outcome) => {
                    if let Some(version) = self.running.take() {
                        self.waiters.finished(version, outcome);
                    }
                }
                Event::Suspend => {
                    self.live = (self.live + 1) & VERSION_MASK;
                    self.armed = false;
                    self.waiters.suspended(self.live);
                }
                Event::Close => {
                    self.closed = true;
                    self.waiters.scanned();
                }
            }
            false
        }
    }

    proptest! {
        /// A waiter woken at every change resolves exactly as the
        /// sequential model says, from the history alone: with the outcome
        /// of the first run of its version or a newer one to finish; else
        /// `Suspended` once a newer `suspend` came before any such run
        /// started, or `Shutdown` once closed before any started. Versions
        /// start anywhere, across the 30-bit wrap included.
        #[test]
        fn waiters_follow_the_sequential_model(
            start in prop_oneof![Just(VERSION_MASK - 3), 0..VERSION_MASK],
            before in proptest::collection::vec(event(), 0..6),
            after in proptest::collection::vec(event(), 0..24),
        ) {
            let waiters = Waiters::default();
            let mut trigger = Trigger {
                waiters: &waiters,
                live: start,
                armed: false,
                running: None,
                closed: false,
            };
            for event in before {
                trigger.apply(event);
            }
            if trigger.closed {
                return Ok(()); // a waiter's fire is refused after shutdown
            }
            // The waiter's fire: every run from now on serves it.
            trigger.apply(Event::Fire);
            let fired = trigger.live;
            let check = || waiters.state.lock().unwrap().check(fired);
            prop_assert_eq!(check(), None);
            let (mut model, mut serving_started, mut serving_running) = (None, false, false);
            for event in after {
                let started = trigger.apply(event);
                if model.is_some() {
                    break;
                }
                match event {
                    Event::Start if started => {
                        serving_started = true;
                        serving_running = true;
                    }
                    Event::Finish(outcome) if serving_running => model = Some(Ok(outcome)),
                    Event::Suspend if !serving_started => model = Some(Err(WaitError::Suspended)),
                    Event::Close if !serving_started => model = Some(Err(WaitError::Shutdown)),
                    _ => {}
                }
                prop_assert_eq!(check(), model, "after {:?}", event);
            }
        }
    }
}
