//! `fire_and_wait`: "refresh now and tell me when it is done". A waiter
//! fires, then waits for the first iteration that serves its fire — one
//! that entered with the fire's version or a newer one (30-bit wrapping
//! order; a run already in flight at the call has an older version and does
//! not count) — and returns that iteration's outcome. Concurrent waiters
//! share one run: the newest version serves them all.
//!
//! The waiters' state is allocated on a trigger's first `fire_and_wait`;
//! until then the run path pays one null check. It is plain std locking
//! outside the lock-free protocol (the loom models never create it).

use crate::context::Outcome;
use crate::error::WaitError;
use crate::request::{at_least, is_newer};
use crate::state::VERSION_MASK;
use std::sync::{Condvar, Mutex, PoisonError};
use std::task::Waker;
use std::time::{Duration, Instant};

/// A quarter of the 30-bit version ring: how far behind a record may fall
/// before `Waiters::age` forgets it.
const AGE_LIMIT: u32 = 1 << 28;

/// How often a waiter looks whether the scheduler shut down meanwhile.
const CLOSED_POLL: Duration = Duration::from_millis(20);

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
    /// The version the last `suspend` installed.
    suspended: Option<u32>,
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
    fn check(&self, fired: u32, closed: impl Fn() -> bool) -> Option<Result<Outcome, WaitError>> {
        if let Some((version, outcome)) = self.finished {
            if at_least(version, fired) {
                return Some(Ok(outcome));
            }
        }
        let serving = self.started.is_some_and(|v| at_least(v, fired));
        if !serving {
            // Superseded before any run served it: a suspend, or shutdown
            // (nothing new starts).
            if self.suspended.is_some_and(|v| is_newer(v, fired)) {
                return Some(Err(WaitError::Suspended));
            }
            if closed() {
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
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            f(&mut state);
            std::mem::take(&mut state.wakers)
        };
        self.changed.notify_all();
        for (_, waker) in wakers {
            waker.wake();
        }
    }

    /// Wakes every waiter to re-check (the scheduler shut down).
    pub(crate) fn notify(&self) {
        self.update(|_| {});
    }

    /// An iteration of `version` starts.
    pub(crate) fn started(&self, version: u32) {
        self.update(|s| {
            if !s.is_stale(version) {
                advance(&mut s.started, version);
            }
        });
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
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.aged_at = Some(version);
        let s = &mut *state;
        s.started = s.started.filter(|&v| !stale(version, v));
        s.finished = s.finished.filter(|&(v, _)| !stale(version, v));
        s.suspended = s.suspended.filter(|&v| !stale(version, v));
    }

    /// Waits for the iteration serving the fire of version `fired` (see
    /// the module docs) until `deadline` (`None`: no limit).
    pub(crate) fn wait(
        &self,
        fired: u32,
        deadline: Option<Instant>,
        closed: impl Fn() -> bool,
    ) -> Result<Outcome, WaitError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(done) = state.check(fired, &closed) {
                return done;
            }
            let slice = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(WaitError::Timeout);
                    }
                    left.min(CLOSED_POLL)
                }
                None => CLOSED_POLL,
            };
            state = self
                .changed
                .wait_timeout(state, slice)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
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
        closed: impl Fn() -> bool,
    ) -> std::task::Poll<Result<Outcome, WaitError>> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        // Checked and registered under one lock: a change (or the shutdown
        // scan's notify, which comes after `closed` is set) either is seen
        // here or finds this waker.
        if let Some(done) = state.check(fired, closed) {
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
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.wakers.retain(|(waiter, _)| *waiter != id);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::state::VERSION_MASK;
    use proptest::prelude::*;

    #[test]
    fn a_record_half_the_ring_old_never_serves_a_new_fire() {
        let waiters = Waiters::default();
        waiters.started(5);
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
            waiters.wait(fired, soon, || false),
            Err(WaitError::Timeout),
            "the old run does not serve the new fire"
        );
        // Nor does such a run that ends only now (fired into all along).
        waiters.finished(5, Outcome::Panicked);
        assert_eq!(waiters.wait(fired, soon, || false), Err(WaitError::Timeout));
        // A record a few versions behind stays (a waiter may still need it).
        waiters.finished(fired, Outcome::Completed);
        waiters.age((fired + 3) & VERSION_MASK);
        assert_eq!(waiters.wait(fired, soon, || false), Ok(Outcome::Completed));
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
                    self.waiters.started(self.live);
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
                Event::Close => self.closed = true,
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
            let check = |closed: bool| {
                let state = waiters.state.lock().unwrap();
                state.check(fired, || closed)
            };
            prop_assert_eq!(check(false), None);
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
                prop_assert_eq!(check(trigger.closed), model, "after {:?}", event);
            }
        }
    }
}
