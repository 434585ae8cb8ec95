//! Models of the state word alone (`src/state.rs`, the crate's real type):
//! the three transitions under every interleaving, G1 and G6 at their
//! core, G12 across the wrap.
#![cfg(loom)]

mod common;

use circulation_trigger::model::{Enter, Exit, State};
use common::{run_model, Exclusive};
use loom::sync::Arc;
use loom::thread;

const STARTS: [u32; 2] = [0, (1 << 30) - 1];

/// One worker's attempt to run `version`: enter, touch the task state,
/// exit; returns the follow-up version if a reservation asked for one.
fn attempt(state: &State, cell: &Exclusive, version: u32) -> Option<u32> {
    match state.enter(version) {
        Enter::Entered => {
            cell.touch();
            match state.exit(version) {
                Exit::Rerun { version } => Some(version),
                Exit::Done { .. } => None,
            }
        }
        Enter::Reserved | Enter::Stale => None,
    }
}

#[test]
fn g1_enter_admits_one_runner_and_reservations_rerun_once() {
    for start in STARTS {
        run_model(move || {
            let state = Arc::new(State::new(start));
            let cell = Exclusive::default();
            let v = state.advance();
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    let (state, cell) = (state.clone(), cell.clone());
                    thread::spawn(move || {
                        let mut next = attempt(&state, &cell, v);
                        while let Some(version) = next {
                            next = attempt(&state, &cell, version);
                        }
                    })
                })
                .collect();
            workers.into_iter().for_each(|w| w.join().unwrap());
            let runs = cell.get();
            assert!((1..=2).contains(&runs), "runs = {runs}");
            let s = state.snapshot();
            assert!(!s.is_running() && !s.is_reserved());
        });
    }
}

#[test]
fn g6_advance_racing_exit_makes_the_runner_stale() {
    for start in STARTS {
        run_model(move || {
            let state = Arc::new(State::new(start));
            let v = state.advance();
            assert_eq!(state.enter(v), Enter::Entered);
            let suspender = {
                let state = state.clone();
                thread::spawn(move || state.advance())
            };
            let exit = state.exit(v);
            let newer = suspender.join().unwrap();
            // Either the exit saw the newer version (not live: its delay is
            // ignored) or it came first; then the newer version is live and
            // the runner's version is stale for any later enter.
            if exit == (Exit::Done { live: true }) {
                assert_eq!(state.enter(v), Enter::Stale);
            }
            assert_eq!(state.snapshot().version(), newer);
            assert!(!state.snapshot().is_running());
        });
    }
}

#[test]
fn advance_clears_a_pending_reservation() {
    run_model(|| {
        let state = Arc::new(State::new(0));
        let v = state.advance();
        assert_eq!(state.enter(v), Enter::Entered);
        let reserver = {
            let state = state.clone();
            thread::spawn(move || state.enter(v))
        };
        let newer = state.advance();
        let reserved = reserver.join().unwrap();
        match state.exit(v) {
            // The reservation landed after the advance? Impossible: it
            // names the old version, so it is Stale then.
            Exit::Rerun { version } => {
                assert_eq!(reserved, Enter::Reserved);
                assert_eq!(version, newer, "a rerun always serves the live version");
                unreachable!("advance came after the reservation and cleared it");
            }
            Exit::Done { live } => assert!(!live),
        }
    });
}
