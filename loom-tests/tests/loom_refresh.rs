//! Models of the refresher's shared state on the crate's real code: the
//! value cell, the confirmation word, the readiness waiters and the last
//! outcome. Checked: a readiness waiter is woken by the first publish and
//! reads the value it confirms (G19); a reader that sees an "unchanged"
//! answer's confirmation reads the value it confirmed, never a
//! republished one (G21); `refresh_and_wait`'s report of a later fetch
//! reads what that fetch stored; a value read from the local copy at start
//! is read whole (G22).
#![cfg(loom)]

mod common;

use circulation_trigger::refresh::model::RefreshModel;
use common::run_model_bounded;
use loom::sync::Arc;
use loom::thread;

#[test]
fn a_readiness_waiter_is_woken_by_the_first_publish_and_reads_its_value() {
    run_model_bounded(3, || {
        let model = Arc::new(RefreshModel::new());
        let fetch = {
            let model = Arc::clone(&model);
            thread::spawn(move || model.publish(1))
        };
        // Blocks with no timeout: a lost wake-up deadlocks the model.
        model.wait_ready();
        assert_eq!(model.read(), Some(1), "ready, yet the value unseen");
        fetch.join().unwrap();
    });
}

#[test]
fn a_reader_that_sees_an_unchanged_confirmation_reads_the_value_it_confirms() {
    run_model_bounded(3, || {
        let model = Arc::new(RefreshModel::new());
        let fetch = {
            let model = Arc::clone(&model);
            thread::spawn(move || {
                model.publish(1);
                model.set_time_us(10);
                model.unchanged();
            })
        };
        let confirmed = model.confirmed_us();
        let value = model.read();
        if confirmed == Some(10) {
            assert_eq!(value, Some(1), "the unchanged answer's value unseen");
        }
        if confirmed.is_some() {
            assert_eq!(value, Some(1), "a confirmation without its value");
        }
        fetch.join().unwrap();
        assert_eq!(model.read(), Some(1));
        assert_eq!(model.confirmed_us(), Some(10));
    });
}

#[test]
fn a_reader_reads_a_published_value_whole_or_not_at_all() {
    run_model_bounded(3, || {
        let model = Arc::new(RefreshModel::new());
        let fetch = {
            let model = Arc::clone(&model);
            thread::spawn(move || {
                model.publish(1);
                model.publish(2);
            })
        };
        // No other edge: the value cell's own orderings carry the value,
        // into a reader's cache and out of it.
        let mut reader = model.reader();
        let first = reader.read();
        let second = reader.read();
        assert!(matches!(
            (first, second),
            (None, _) | (Some(1), Some(1 | 2)) | (Some(2), Some(2))
        ));
        fetch.join().unwrap();
    });
}

#[test]
fn a_value_carried_over_from_the_local_copy_is_read_whole() {
    run_model_bounded(3, || {
        let model = Arc::new(RefreshModel::new());
        let start = {
            let model = Arc::clone(&model);
            thread::spawn(move || assert!(model.carry(7)))
        };
        let mut reader = model.reader();
        assert!(matches!(reader.read(), None | Some(7)));
        start.join().unwrap();
        assert_eq!(reader.read(), Some(7));
    });
}

#[test]
fn a_reported_outcome_reads_what_its_fetch_stored() {
    run_model_bounded(3, || {
        let model = Arc::new(RefreshModel::new());
        let fetch = {
            let model = Arc::clone(&model);
            thread::spawn(move || {
                model.publish(1);
                model.fail("down");
            })
        };
        match model.last_outcome() {
            None | Some(Ok(1)) => {}
            Some(Err(error)) => assert_eq!(error, "down"),
            Some(other) => panic!("an outcome without what it reports: {other:?}"),
        }
        fetch.join().unwrap();
        assert_eq!(model.last_outcome(), Some(Err("down".to_owned())));
    });
}
