//! `Refresh`: the latest good value for readers, kept through failures,
//! retried with a back-off, paused and resumed with its trigger — on
//! virtual time — and awaited by async readers (feature `tokio`).

mod common;

use circulation_trigger::refresh::Fetched;
use circulation_trigger::{
    policy::RetryBackoff, refresh::RefreshError, FireError, Refresh, Scheduler, WaitError,
};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// A config center the test scripts: each fetch takes the next answer.
#[derive(Clone, Default)]
struct Center(Arc<Mutex<Vec<Result<u32, String>>>>);

impl Center {
    fn answers(answers: &[Result<u32, &str>]) -> Self {
        let mut list: Vec<_> = answers.iter().map(|a| a.map_err(str::to_owned)).collect();
        list.reverse();
        Self(Arc::new(Mutex::new(list)))
    }

    fn fetch(&self) -> Result<u32, String> {
        self.0
            .lock()
            .unwrap()
            .pop()
            .unwrap_or(Err("no more answers".into()))
    }
}

#[test]
fn readers_see_the_latest_good_value_through_failures_and_back_off() {
    let sim = Scheduler::builder().build_virtual();
    let center = Center::answers(&[Ok(1), Err("down"), Err("down"), Ok(2), Ok(3)]);
    let c = center.clone();
    let config = Refresh::builder(&sim)
        .every(SECOND * 30)
        .retry(RetryBackoff::new(SECOND, SECOND * 60))
        .bind(move || c.fetch());
    let reader = config.reader();
    assert_eq!(config.get(), None, "nothing until the first fire");
    sim.advance(SECOND * 100);
    assert_eq!(config.trigger().stats().iterations, 0);

    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(config.get().as_deref(), Some(&1));
    let held = config.get().unwrap(); // a reader keeps its value

    sim.advance(SECOND * 30); // fails: the value stays, the error shows
    assert_eq!(reader.get().as_deref(), Some(&1));
    assert_eq!(
        reader.last_error().as_deref().map(String::as_str),
        Some("down")
    );
    sim.advance(SECOND); // retried after 1 s: fails again
    assert_eq!(config.failures(), 2);
    sim.advance(SECOND * 2 - Duration::from_micros(1));
    assert_eq!(
        config.failures() + config.refreshes(),
        3,
        "back-off is 2 s now"
    );
    sim.advance(Duration::from_micros(1)); // succeeds at 33 s
    assert_eq!(config.get().as_deref(), Some(&2));
    assert_eq!(config.last_error(), None);
    sim.advance(SECOND * 30); // back on the period
    assert_eq!(config.get().as_deref(), Some(&3));
    assert_eq!((config.refreshes(), config.failures()), (3, 2));
    assert_eq!(*held, 1);
}

#[test]
fn the_period_can_come_with_the_value() {
    let sim = Scheduler::builder().build_virtual();
    let center = Center::answers(&[Ok(10), Ok(60), Err("down"), Ok(5)]);
    let c = center.clone();
    // Each answer names the period, in seconds, until the next fetch.
    let config = Refresh::builder(&sim)
        .every(SECOND * 3) // after a failure (no back-off)
        .bind_conditional(move |_| {
            c.fetch()
                .map(|secs| Fetched::changed(secs).next_after(SECOND * secs))
        });
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(config.get().as_deref(), Some(&10));
    sim.advance(SECOND * 10);
    assert_eq!(config.get().as_deref(), Some(&60));
    sim.advance(SECOND * 60); // fails: retried after `every`
    assert_eq!(config.failures(), 1);
    sim.advance(SECOND * 3);
    assert_eq!(config.get().as_deref(), Some(&5));
    assert_eq!(config.refreshes(), 3);
}

#[test]
fn a_paused_refresh_fetches_nothing_and_resumes_on_its_period() {
    let sim = Scheduler::builder().build_virtual();
    let fetches = common::Counter::default();
    let f = fetches.clone();
    let config = Refresh::builder(&sim)
        .every(SECOND * 10)
        .bind(move || Ok::<_, String>(f.bump()));
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    config.trigger().pause(); // the feature switch
    assert_eq!(config.refresh_now(), Err(FireError::Paused));
    sim.advance(SECOND * 60);
    assert_eq!(fetches.get(), 1);
    assert_eq!(config.get().as_deref(), Some(&1), "the value stays");
    config.trigger().resume().unwrap();
    sim.advance(SECOND * 10);
    assert_eq!(config.get().as_deref(), Some(&2));
}

#[test]
fn without_a_back_off_a_failure_retries_a_period_later_and_a_limit_stops() {
    let sim = Scheduler::builder().build_virtual();
    let center = Center::answers(&[Err("a"), Ok(7)]);
    let c = center.clone();
    let config = Refresh::builder(&sim)
        .every(SECOND * 5)
        .bind(move || c.fetch());
    config.refresh_now().unwrap();
    sim.advance(SECOND * 5);
    assert_eq!(config.get().as_deref(), Some(&7));

    let center = Center::answers(&[Err("a"), Err("b"), Err("c"), Ok(1)]);
    let c = center.clone();
    let limited = Refresh::builder(&sim)
        .retry(RetryBackoff::new(SECOND, SECOND).max_retries(1))
        .bind(move || c.fetch());
    limited.refresh_now().unwrap();
    sim.advance(SECOND * 100);
    assert_eq!(limited.failures(), 2, "one retry, then it stops");
    assert_eq!(
        limited.last_error().as_deref().map(String::as_str),
        Some("b")
    );
    limited.refresh_now().unwrap(); // fired again: a fresh round
    sim.advance(Duration::ZERO);
    assert_eq!(limited.failures(), 3, "it failed again…");
    sim.advance(SECOND);
    assert_eq!(limited.get().as_deref(), Some(&1), "…and was retried");
}

#[test]
fn a_panicking_fetch_is_a_failure_that_is_retried() {
    common::quiet_panics();
    let sim = Scheduler::builder().build_virtual();
    let mut calls = 0;
    let config = Refresh::builder(&sim)
        .every(SECOND * 10)
        .retry(RetryBackoff::new(SECOND, SECOND))
        .bind(move || {
            calls += 1;
            if calls == 2 {
                panic!("boom: a fetch that panics");
            }
            Ok::<_, String>(calls)
        });
    config.refresh_now().unwrap();
    sim.advance(SECOND * 10); // the second fetch panics…
    assert_eq!((config.failures(), config.panics()), (1, 1));
    assert_eq!(config.get().as_deref(), Some(&1), "…the value stays…");
    sim.advance(SECOND); // …and it is retried after the back-off
    assert_eq!(config.get().as_deref(), Some(&3));
}

/// A fetch that succeeds, fails, panics, then succeeds again.
fn ok_err_panic_ok() -> impl FnMut() -> Result<u32, String> + Send + 'static {
    let mut calls = 0;
    move || {
        calls += 1;
        match calls {
            2 => Err("config center down".to_owned()),
            3 => panic!("boom: a fetch that panics"),
            n => Ok(n),
        }
    }
}

#[test]
fn refresh_and_wait_returns_the_fetched_value_or_why_there_is_none() {
    common::quiet_panics();
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let config = Refresh::builder(&scheduler)
        .every(Duration::from_secs(3_600))
        .bind(ok_err_panic_ok());
    let wait = || config.refresh_and_wait(common::PATIENCE);
    assert_eq!(wait().unwrap().as_ref(), &1);
    let failed = wait().unwrap_err();
    assert_eq!(
        failed,
        RefreshError::Failed(Arc::new("config center down".to_owned()))
    );
    assert_eq!(failed.to_string(), "the fetch failed: config center down");
    let panicked = wait().unwrap_err();
    assert_eq!(panicked, RefreshError::Panicked);
    assert_eq!(panicked.to_string(), "the fetch panicked");
    assert_eq!(
        config.get().as_deref(),
        Some(&1),
        "the last good value stays"
    );
    assert_eq!(wait().unwrap().as_ref(), &4);
    assert!(config.last_error().is_none());

    config.trigger().pause();
    assert_eq!(wait(), Err(RefreshError::Wait(WaitError::Paused)));
    config.trigger().resume().unwrap();
    scheduler.shutdown();
    assert_eq!(wait(), Err(WaitError::Shutdown.into()));
    assert_eq!(config.refreshes(), 2);
    assert!(scheduler.await_termination(common::PATIENCE));
}

#[test]
fn refresh_and_wait_on_virtual_time_times_out_unless_time_moves() {
    let sim = Scheduler::builder().build_virtual();
    let config = Refresh::builder(&sim).bind(ok_err_panic_ok());
    assert!(matches!(
        config.refresh_and_wait(Duration::from_millis(20)),
        Err(RefreshError::Wait(WaitError::Timeout))
    ));
    // The fire stands: the next advance serves it.
    sim.advance(Duration::ZERO);
    assert_eq!(config.get().as_deref(), Some(&1));
    // With another thread moving time, the call gets its fetch's answer.
    // Steps past the cooldown too: the second fetch waits for it.
    let answer = common::while_time_moves(&sim, Duration::from_millis(50), || {
        config.refresh_and_wait(common::PATIENCE)
    });
    assert_eq!(
        answer.unwrap_err(),
        RefreshError::Failed(Arc::new("config center down".to_owned()))
    );
    let error = RefreshError::<String>::Wait(WaitError::Timeout);
    assert_eq!(
        error.to_string(),
        "no fetch served the refresh: no iteration serving the fire finished in time"
    );
}

/// A value whose destructor panics when armed.
#[derive(Debug)]
struct Bomb(bool);

impl Drop for Bomb {
    fn drop(&mut self) {
        if self.0 {
            panic!("boom: a value that panics when dropped");
        }
    }
}

#[test]
fn an_iteration_that_panics_past_the_fetch_is_a_panic_to_the_waiter() {
    // The second fetch succeeds, but replacing the first value runs its
    // destructor, which panics: past the fetch's own catch, so the
    // iteration panics. The waiter hears of the panic, not of a value.
    common::quiet_panics();
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let mut calls = 0;
    let config = Refresh::builder(&scheduler)
        .every(Duration::from_secs(3_600))
        .bind(move || {
            calls += 1;
            Ok::<_, String>(Bomb(calls == 1))
        });
    assert!(config.refresh_and_wait(common::PATIENCE).unwrap().0);
    assert_eq!(
        config.refresh_and_wait(common::PATIENCE).unwrap_err(),
        RefreshError::Panicked
    );
    scheduler.shutdown();
    assert!(scheduler.await_termination(common::PATIENCE));
}

/// Readers on many threads never block the fetch nor see a torn value.
#[test]
fn readers_on_other_threads_read_while_it_refreshes() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let mut n = 0u64;
    let config = Refresh::builder(&scheduler)
        .every(Duration::from_micros(100))
        .bind(move || {
            n += 1;
            Ok::<_, String>((n, n * 2))
        });
    config.refresh_now().unwrap();
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let reader = config.reader();
            thread::spawn(move || {
                let mut newest = 0;
                for _ in 0..20_000 {
                    if let Some(value) = reader.get() {
                        assert_eq!(value.1, value.0 * 2, "a torn value");
                        assert!(value.0 >= newest, "went back in time");
                        newest = value.0;
                    }
                }
            })
        })
        .collect();
    for reader in readers {
        reader.join().unwrap();
    }
    common::eventually("a few refreshes", || config.refreshes() >= 3);
    scheduler.shutdown();
    assert!(scheduler.await_termination(common::PATIENCE));
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn async_readers_await_each_new_value() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let mut version = 0u32;
    let config = Refresh::builder(&scheduler)
        .every(Duration::from_secs(3_600))
        .bind(move || {
            version += 1;
            Ok::<_, String>(version)
        });
    let mut updates = config.subscribe();
    assert_eq!(*updates.borrow(), None);
    for expected in 1..=3 {
        config.refresh_now().unwrap();
        tokio::time::timeout(common::PATIENCE, updates.changed())
            .await
            .expect("a new value")
            .unwrap();
        assert_eq!(updates.borrow_and_update().as_deref(), Some(&expected));
    }
    scheduler.shutdown_async().await;
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn async_readers_get_the_last_value_then_learn_the_scheduler_terminated() {
    // The fetch in flight at shutdown is held until the shutdown has begun:
    // its value still reaches the readers, and only then does the channel
    // close — whatever the threads' timing.
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let (started_tx, started) = std::sync::mpsc::channel::<()>();
    let (go, gate) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(gate);
    let mut version = 0u32;
    let config = Refresh::builder(&scheduler)
        .every(Duration::from_secs(3_600))
        .bind(move || {
            version += 1;
            if version == 2 {
                started_tx.send(()).unwrap();
                gate.lock().unwrap().recv().unwrap();
            }
            Ok::<_, String>(version)
        });
    let mut updates = config.subscribe();
    config
        .refresh_and_wait_async(common::PATIENCE)
        .await
        .unwrap();
    config.refresh_now().unwrap();
    started
        .recv_timeout(common::PATIENCE)
        .expect("second fetch started");
    scheduler.shutdown();
    assert!(
        !scheduler.await_termination(std::time::Duration::ZERO),
        "the fetch is held"
    );
    go.send(()).unwrap();
    let mut seen = Vec::new();
    let closed = tokio::time::timeout(common::PATIENCE, async {
        while updates.changed().await.is_ok() {
            seen.push(*updates.borrow_and_update().as_deref().unwrap());
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "the channel closes once the scheduler has terminated"
    );
    assert_eq!(
        seen.last(),
        Some(&2),
        "the fetch in flight at shutdown is not lost"
    );
    assert!(scheduler.await_termination(std::time::Duration::ZERO));
    // Subscribed after termination: the last value, on a closed channel.
    let mut late = config.subscribe();
    assert_eq!(late.borrow().as_deref(), Some(&2));
    assert!(late.changed().await.is_err());
    // A refresh bound after termination starts closed too.
    let after = Refresh::builder(&scheduler).bind(|| Ok::<_, String>(0));
    assert!(after.subscribe().changed().await.is_err());
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn on_virtual_time_the_channel_closes_at_shutdown() {
    let sim = Scheduler::builder().build_virtual();
    let config = Refresh::builder(&sim).bind(|| Ok::<_, String>(7));
    let mut updates = config.subscribe();
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    assert!(updates.has_changed().unwrap());
    assert_eq!(updates.borrow_and_update().as_deref(), Some(&7));
    sim.shutdown();
    let changed = tokio::time::timeout(common::PATIENCE, updates.changed()).await;
    assert!(changed.expect("closed at shutdown").is_err());
    assert_eq!(updates.borrow().as_deref(), Some(&7));
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn on_virtual_time_a_fetch_in_flight_at_shutdown_sends_its_value_first() {
    // A virtual scheduler counts no thread for a sync fetch: shut down
    // from inside the fetch, it has terminated while the fetch still runs.
    // The fetch's value reaches the readers all the same, then the
    // channel closes.
    let sim = Arc::new(Scheduler::builder().build_virtual());
    let inside = Arc::clone(&sim);
    let config = Refresh::builder(&*sim).bind(move || {
        inside.shutdown();
        Ok::<_, String>(7)
    });
    let mut updates = config.subscribe();
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    assert!(sim.await_termination(std::time::Duration::ZERO));
    // Sent before the close (the channel started with `None`).
    assert_eq!(updates.borrow_and_update().as_deref(), Some(&7));
    let changed = tokio::time::timeout(common::PATIENCE, updates.changed()).await;
    assert!(changed.expect("closed once the fetch ended").is_err());
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn refresh_and_wait_async_returns_the_fetched_value_or_why_there_is_none() {
    common::quiet_panics();
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let config = Refresh::builder(&scheduler)
        .every(Duration::from_secs(3_600))
        .bind(ok_err_panic_ok());
    assert_eq!(
        config
            .refresh_and_wait_async(common::PATIENCE)
            .await
            .unwrap()
            .as_ref(),
        &1
    );
    // It fires when called: the fetch runs before the future is polled.
    let failed = config.refresh_and_wait_async(common::PATIENCE);
    common::eventually("the second fetch ran", || config.failures() == 1);
    assert!(matches!(failed.await, Err(RefreshError::Failed(_))));
    assert!(matches!(
        config.refresh_and_wait_async(common::PATIENCE).await,
        Err(RefreshError::Panicked)
    ));
    scheduler.shutdown_async().await;
    assert!(matches!(
        config.refresh_and_wait_async(common::PATIENCE).await,
        Err(RefreshError::Wait(WaitError::Shutdown))
    ));
}
