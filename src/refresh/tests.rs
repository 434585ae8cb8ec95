//! What only the crate can force: a subscriber between termination and
//! the telling of the termination hooks.

use super::Refresh;
use crate::scheduler::{OnTerminated, Scheduler};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

const PATIENCE: Duration = Duration::from_secs(20);

/// A termination hook that holds the thread telling it until let go.
struct Gate {
    entered: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
}

impl OnTerminated for Gate {
    fn terminated(&self) {
        let _ = self.entered.lock().unwrap().send(());
        let _ = self.release.lock().unwrap().recv_timeout(PATIENCE);
    }
}

#[test]
fn a_subscriber_after_termination_gets_a_closed_channel_before_the_hooks_are_told() {
    // The last thread to exit tells the hooks after releasing the live
    // count's lock, in the order they came: the gate, registered before
    // the refresh's, holds it there — terminated, the refresh's hook not
    // yet told — while the test subscribes.
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let gate: Arc<dyn OnTerminated> = Arc::new(Gate {
        entered: Mutex::new(entered_tx),
        release: Mutex::new(release_rx),
    });
    scheduler.shared.when_terminated(Arc::downgrade(&gate));
    let config = Refresh::builder(&scheduler).bind(|| Ok::<_, String>(1));
    let early = config.subscribe();
    scheduler.shutdown();
    entered_rx
        .recv_timeout(PATIENCE)
        .expect("the hooks are told");
    assert!(scheduler.await_termination(PATIENCE));
    let late = config.subscribe();
    assert!(
        late.has_changed().is_err(),
        "an open channel after termination"
    );
    assert!(early.has_changed().is_err(), "the early one is closed too");
    release_tx.send(()).unwrap();
}
