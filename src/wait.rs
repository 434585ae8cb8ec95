//! `fire_and_wait`, which means "refresh now and tell me when it is done".
//!
//! A waiter fires, then waits for the first iteration that serves its fire. That is one
//! that entered with the fire's version or a newer one, in 30-bit wrapping order. A run
//! already in flight at the call has an older version and does not count. The waiter
//! returns that iteration's outcome. Concurrent waiters share one run, since the newest
//! version serves them all.
//!
//! The waiters' state is allocated on a trigger's first `fire_and_wait`. Until then the
//! run path pays one null check. It is a lock outside the lock-free protocol. Under
//! `--cfg loom` it is loom's lock, so that the models see a waiter's look, and a run's
//! start, as steps.
//!
//! # Verdicts that hold
//!
//! "Suspended" and "shut down" are verdicts on a fire that no run has served. A run that
//! entered through `State::enter` before a suspend's or a pause's advance still runs, as
//! G6 and G17 require. So does one that entered before the shutdown scan reached its
//! trigger. That is an iteration in flight at shutdown, and the scan moves its version on
//! in `State::touch_for_scan`. One entering after finds the scheduler closed. It is
//! discarded under the report's lock, in `Ledger::admit_late`.
//!
//! So a run's `enter` happens under the waiters' lock, in [`Waiters::starting`]. That
//! holds up to its decision to run or not. A decision to run is recorded as its start. A
//! decision not to run is a cooldown's deferral, or a run discarded at shutdown. The
//! suspend, the pause, the resume and the scan record themselves under that lock after
//! their advance. The resume records for the fires that the pause and it cancelled,
//! since no run starts while paused. The scan records after it has looked at the trigger.
//! If the advance came after the `enter`, the lock was held from before the `enter`. So
//! the record comes after the run's start. A waiter looks under the lock. So it is never
//! told "suspended" or "shut down" while a run that serves its fire, and entered before
//! that suspend, pause or scan, goes on to run. A run of a newer fire, made after the
//! verdict, serves the fire too, as any newer run does. The waiter has its answer by
//! then.

use crate::context::Outcome;
use crate::error::WaitError;
use crate::request::{at_least, is_newer};
use crate::state::VERSION_MASK;
use crate::sync::{lock, Condvar, Mutex};
use std::task::Waker;
use std::time::Instant;

/// A quarter of the 30-bit version ring.
///
/// It is how far behind a record may fall before `Waiters::age` forgets it.
const AGE_LIMIT: u32 = 1 << 28;

/// Records `version` in `slot` unless it holds a newer one.
///
/// Concurrent calls may report out of order.
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
    /// The version the last `suspend` installed.
    ///
    /// A pause or a resume also records one here, for the fires that the pause and the resume
    /// cancelled.
    suspended: Option<u32>,
    /// The shutdown scan has looked at this trigger. Nothing starts that has not started yet.
    scanned: bool,
    /// The version the last `Waiters::age` was told of.
    aged_at: Option<u32>,
    /// Each pending async waiter's waker, under the waiter's id. They are woken on the next
    /// change.
    ///
    /// A waiter dropped unfinished removes its own. It may have timed out, or been a
    /// `select!` branch not taken. So abandoned waiters leave nothing behind.
    wakers: Vec<(u64, Waker)>,
    /// The last async waiter's id.
    #[cfg(feature = "tokio")]
    next_id: u64,
}

/// Whether `recorded` is between a quarter and half the ring behind `version`. See
/// `Waiters::age`.
fn stale(version: u32, recorded: u32) -> bool {
    let behind = version.wrapping_sub(recorded) & VERSION_MASK;
    (AGE_LIMIT..=AGE_LIMIT * 2).contains(&behind)
}

impl WaitState {
    /// Whether `version` is too old to record. See `Waiters::age`.
    fn is_stale(&self, version: u32) -> bool {
        self.aged_at.is_some_and(|aged_at| stale(aged_at, version))
    }

    /// What a waiter for the fire of version `fired` gets now, if it is done waiting. See the
    /// module docs.
    fn check(&self, fired: u32) -> Option<Result<Outcome, WaitError>> {
        if let Some((version, outcome)) = self.finished {
            if at_least(version, fired) {
                return Some(Ok(outcome));
            }
        }
        let serving = self.started.is_some_and(|v| at_least(v, fired));
        if !serving {
            // Superseded before any run served it, by a suspend or by shutdown,
            // after which nothing new starts. See "Verdicts that hold" above.
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

    /// The shutdown scan has looked at this trigger, after its advance.
    ///
    /// A waiter whose fire no run has started for gives up.
    pub(crate) fn scanned(&self) {
        self.update(|s| s.scanned = true);
    }

    /// A run that took the request of `version` enters.
    ///
    /// `decide` enters it and decides whether it runs, under the waiters' lock. See "Verdicts
    /// that hold". If `runs` says it does, its start is recorded before the lock is let go.
    /// Nobody is woken. A start only keeps a verdict from being given, so a waiter still
    /// waiting has nothing new to find.
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

    /// The iteration of `version` ended with `outcome`.
    ///
    /// It is told after the trigger's `exit`, so a newer run may have been told first. The
    /// record keeps the newest, which serves every waiter that the older one would have.
    pub(crate) fn finished(&self, version: u32, outcome: Outcome) {
        self.update(|s| {
            // A run that began a quarter of the ring ago or more serves no waiter
            // still waiting. It was fired into for that long.
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

    /// The trigger's version reached `version`. It is called once per 2^16 versions.
    ///
    /// It forgets every record between a quarter and half the ring behind `version`. Records
    /// only age, by 2^16 versions between two calls. So none gets half the ring old. There the
    /// wrapping comparison would take it for newer than a fresh fire. A waiter would then
    /// return an outcome from long before its fire. That could happen with a debounced
    /// trigger re-armed for hours without running, then `fire_and_wait`. The price shows at
    /// that scale. A waiter whose serving run spans 2^28 fires gets the outcome of the re-run
    /// those fires reserved, which serves it too. A run's start or end reported after that
    /// is not recorded either.
    pub(crate) fn age(&self, version: u32) {
        let mut state = lock(&self.state);
        state.aged_at = Some(version);
        let s = &mut *state;
        s.started = s.started.filter(|&v| !stale(version, v));
        s.finished = s.finished.filter(|&(v, _)| !stale(version, v));
        s.suspended = s.suspended.filter(|&v| !stale(version, v));
    }

    /// Waits for the iteration serving the fire of version `fired`, until `deadline`. See the
    /// module docs.
    ///
    /// A `deadline` of `None` means no limit.
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
    /// The async side of [`wait`](Self::wait).
    ///
    /// An async waiter for the fire of version `fired` gets its result. Or it leaves `waker`
    /// to be woken on the next change, under `id`, which its first registration gives.
    pub(crate) fn poll_wait(
        &self,
        fired: u32,
        id: &mut Option<u64>,
        waker: &Waker,
    ) -> std::task::Poll<Result<Outcome, WaitError>> {
        let mut state = lock(&self.state);
        // Checked and registered under one lock. So a change either is seen here
        // or finds this waker.
        if let Some(done) = state.check(fired) {
            // Its waker, if still listed, goes with it. See `forget`.
            return std::task::Poll::Ready(done);
        }
        let id = *id.get_or_insert_with(|| {
            state.next_id += 1;
            state.next_id
        });
        // Registered once per waiter. A change takes every waker, and a waiter
        // polled again with a new waker replaces its own.
        match state.wakers.iter_mut().find(|(waiter, _)| *waiter == id) {
            Some((_, listed)) if listed.will_wake(waker) => {}
            Some((_, listed)) => listed.clone_from(waker),
            None => state.wakers.push((id, waker.clone())),
        }
        std::task::Poll::Pending
    }

    /// An async waiter dropped unfinished, so its waker goes.
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
        // More than half the ring of versions later, aged every 2^16 versions on
        // the way, as the trigger's advances do. That is a debounced trigger
        // re-armed for hours without running.
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
        // Nor does such a run that ends only now, fired into all along.
        waiters.finished(5, Outcome::Panicked);
        assert_eq!(waiters.wait(fired, soon), Err(WaitError::Timeout));
        // A record a few versions behind stays, since a waiter may still need it.
        waiters.finished(fired, Outcome::Completed);
        waiters.age((fired + 3) & VERSION_MASK);
        assert_eq!(waiters.wait(fired, soon), Ok(Outcome::Completed));
    }

    /// What happens to the trigger while a waiter waits.
    #[derive(Debug, Clone, Copy)]
    enum Event {
        /// Another fire, which makes a newer version.
        Fire,
        /// A run of the live version starts, if none is running.
        Start,
        /// The running run ends with this outcome.
        Finish(Outcome),
        /// `suspend`, which makes a newer version.
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
        /// Applies `event`. Returns whether a run started.
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
        /// A waiter woken at every change resolves exactly as the sequential model says, from the
        /// history alone.
        ///
        /// It gets the outcome of the first run of its version, or of a newer one, to finish.
        /// Otherwise it gets `Suspended` once a newer `suspend` came before any such run started.
        /// Or it gets `Shutdown` once closed before any started. Versions start anywhere, across
        /// the 30-bit wrap included.
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
            // The waiter's fire. Every run from now on serves it.
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
