//! What only the crate can force, such as a subscriber between termination
//! and the telling of the termination hooks.

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
    // count's lock, in the order they came. The gate, registered before the
    // refresh's hook, holds that thread there while the test subscribes. The
    // scheduler has then terminated, and the refresh's hook is not yet told.
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

/// A future that is pending once, then ready.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            return std::task::Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    }
}

#[test]
fn the_fetch_after_a_dropped_one_sees_the_state_as_the_dropped_one_left_it() {
    use super::lend::{fetch_once, Lent};
    use super::{Course, FetchFuture, Fetched, Latest, Meta, Pace};
    use crate::refresh::Validator;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    fn fetch(seen: &mut Vec<u32>, _: Option<Validator>) -> FetchFuture<'_, Fetched<u32>, String> {
        Box::pin(async move {
            let step = u32::try_from(seen.len()).unwrap();
            seen.push(step); // left in the state before the await
            YieldOnce(false).await;
            seen.push(100 + step);
            Ok(Fetched::changed(step))
        })
    }
    let course = Course::new(Pace::new(Duration::from_secs(30), None), None);
    let lent = Lent::new(Vec::new(), fetch, course);
    let meta = Meta::new(
        crate::clock::Clock::real(),
        std::time::SystemTime::now(),
        None,
        None,
        None,
    );
    let latest = Latest::<u32, String>::new(meta);
    let mut cx = Context::from_waker(Waker::noop());

    // The first fetch is dropped at its await, as `shutdown_now` drops it.
    let mut first = Box::pin(fetch_once(Arc::clone(&lent), Arc::clone(&latest), None));
    assert!(first.as_mut().poll(&mut cx).is_pending());
    drop(first);

    // The next starts from [0], the first's step without its end.
    let mut second = Box::pin(fetch_once(Arc::clone(&lent), Arc::clone(&latest), None));
    assert!(second.as_mut().poll(&mut cx).is_pending());
    assert_eq!(
        second.as_mut().poll(&mut cx),
        Poll::Ready(Some(Duration::from_secs(30)))
    );
    assert_eq!(latest.value.load_full().as_deref(), Some(&1));
    let parts = lent.slot();
    assert_eq!(
        parts.as_ref().map(|p| p.state.clone()),
        Some(vec![0, 1, 101])
    );
}
