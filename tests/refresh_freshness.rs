//! G19 and G20: a refresher tells how fresh its value is (has a value,
//! confirmed, the time of the last confirmation, fresh / stale / expired,
//! each change reported as it happens), can be awaited until ready, and
//! gives each fetch a deadline — an async fetch dropped at it, a blocking
//! one reported once, its late result counted.

mod common;

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::refresh::Freshness;
use circulation_trigger::{policy::RetryBackoff, Refresh, Scheduler, WaitError};
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

const SECOND: Duration = Duration::from_secs(1);

/// A store that answers `Ok` while `up`, an error otherwise.
#[derive(Clone, Default)]
struct Store {
    down: Arc<std::sync::atomic::AtomicBool>,
    calls: Arc<AtomicU32>,
}

impl Store {
    fn fetch(&self) -> Result<u32, String> {
        let call = self.calls.fetch_add(1, SeqCst) + 1;
        if self.down.load(SeqCst) {
            Err(format!("store down at call {call}"))
        } else {
            Ok(call)
        }
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, SeqCst);
    }
}

#[test]
fn freshness_changes_are_reported_when_they_happen_not_when_someone_looks() {
    let sim = Scheduler::builder().build_virtual();
    let store = Store::default();
    let s = store.clone();
    let config = Refresh::builder(&sim)
        .every(SECOND * 30)
        .stale_after(SECOND * 60)
        .expire_after(SECOND * 300)
        .bind(move || s.fetch());
    let before = config.stats();
    assert!(!before.has_value && !before.confirmed);
    assert_eq!((before.freshness, before.last_confirmed), (None, None));

    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    store.set_down(true); // every fetch after the first fails
    assert_eq!(config.stats().transitions, 1, "none → fresh");

    // The watchdog reports each limit at the virtual instant it passes,
    // with nobody reading the state between.
    sim.advance(SECOND * 60 - Duration::from_micros(1));
    assert_eq!(config.stats().transitions, 1);
    sim.advance(Duration::from_micros(1));
    assert_eq!(config.stats().transitions, 2, "fresh → stale at 60 s");
    sim.advance(SECOND * 240 - Duration::from_micros(1));
    assert_eq!(config.stats().transitions, 2);
    sim.advance(Duration::from_micros(1));
    let stats = config.stats();
    assert_eq!(stats.transitions, 3, "stale → expired at 300 s");
    assert_eq!(stats.freshness, Some(Freshness::Expired));
    assert_eq!(stats.age, Some(SECOND * 300));
    assert!(stats.failing && stats.has_value && stats.confirmed);
    assert_eq!(config.get().as_deref(), Some(&1), "still served");

    // A good fetch confirms it again: fresh, reported, and watched anew.
    // (It comes at 301 s: the failed fetch at 300 s started a cooldown.)
    store.set_down(false);
    config.refresh_now().unwrap();
    sim.advance(SECOND);
    let stats = config.stats();
    assert_eq!(
        (stats.freshness, stats.transitions),
        (Some(Freshness::Fresh), 4)
    );
    store.set_down(true);
    sim.advance(SECOND * 60);
    assert_eq!(config.stats().transitions, 5, "stale again 60 s later");
    assert_eq!(config.freshness(), Some(Freshness::Stale));
}

#[test]
fn the_last_confirmation_is_wall_clock_time_read_once_plus_the_schedulers_time() {
    let before = SystemTime::now();
    let sim = Scheduler::builder().build_virtual();
    let after = SystemTime::now();
    let config = Refresh::builder(&sim)
        .every(SECOND * 30)
        .bind(|| Ok::<_, String>("v1"));
    sim.advance(SECOND * 100);
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    let confirmed = config.stats().last_confirmed.unwrap();
    assert!(confirmed >= before + SECOND * 100, "{confirmed:?}");
    assert!(confirmed <= after + SECOND * 100, "{confirmed:?}");
    let mut reader = config.reader();
    assert_eq!(
        reader.read().unwrap().confirmed_at(),
        Some(confirmed),
        "the read reports the same time"
    );

    // A virtual scheduler's wall clock can be set: exact times.
    let sim = Scheduler::builder().build_virtual();
    let epoch = std::time::UNIX_EPOCH + SECOND * 1_700_000_000;
    sim.set_wall_epoch(epoch);
    let config = Refresh::builder(&sim).bind(|| Ok::<_, String>("v1"));
    sim.advance(SECOND * 100);
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    assert_eq!(config.stats().last_confirmed, Some(epoch + SECOND * 100));
}

#[test]
fn a_failed_fetch_gives_no_value_and_no_readiness() {
    let sim = Scheduler::builder().build_virtual();
    let config = Refresh::builder(&sim).bind(|| Err::<u32, _>("down"));
    config.refresh_now().unwrap();
    sim.advance(SECOND * 100);
    let stats = config.stats();
    assert!(!stats.has_value && !stats.confirmed && stats.failing);
    assert_eq!(stats.freshness, None);
    assert_eq!(
        config.wait_ready(Duration::from_millis(20)),
        Err(WaitError::Timeout)
    );
}

#[test]
fn a_blocking_wait_for_readiness_ends_at_the_first_confirmation() {
    let sim = Scheduler::builder().build_virtual();
    let store = Store::default();
    store.set_down(true);
    let s = store.clone();
    let config = Refresh::builder(&sim)
        .retry(RetryBackoff::new(SECOND, SECOND * 8))
        .bind(move || s.fetch());
    config.refresh_now().unwrap();
    sim.advance(SECOND * 5); // three failures: at 0, 1 and 3 s
    store.set_down(false);
    let ready =
        common::while_time_moves(&sim, SECOND, || config.wait_ready(Duration::from_secs(20)));
    assert_eq!(ready, Ok(()));
    let stats = config.stats();
    assert!(stats.confirmed);
    assert_eq!((stats.failures, stats.refreshes), (3, 1));
    assert_eq!(config.reader().wait_ready(Duration::ZERO), Ok(()));
}

#[test]
#[cfg(feature = "tokio")] // the check needs Tokio's runtime context
fn a_blocking_wait_inside_a_tokio_runtime_is_an_error_not_a_deadlock() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sim = Scheduler::builder().build_virtual();
    let config = Refresh::builder(&sim).bind(|| Ok::<_, String>(1));
    runtime.block_on(async {
        assert_eq!(config.wait_ready(SECOND * 10), Err(WaitError::OnRuntime));
    });
    // Once ready, it answers at once anywhere.
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    runtime.block_on(async {
        assert_eq!(config.wait_ready(SECOND * 10), Ok(()));
    });
}

#[cfg(feature = "tokio")]
#[tokio::test]
async fn readiness_is_awaited_with_a_timeout() {
    let scheduler = Scheduler::new();
    let store = Store::default();
    store.set_down(true);
    let s = store.clone();
    let config = Refresh::builder(&scheduler)
        .trigger(|t| t.policies(TriggerPolicies::new().min_interval(Duration::ZERO)))
        .retry(RetryBackoff::new(
            Duration::from_millis(10),
            Duration::from_millis(10),
        ))
        .bind(move || s.fetch());
    config.refresh_now().unwrap();
    assert_eq!(
        config.ready(Duration::from_millis(50)).await,
        Err(WaitError::Timeout)
    );
    store.set_down(false);
    config.ready(SECOND * 20).await.unwrap();
    assert!(config.stats().confirmed);
    scheduler.shutdown_async().await;
}

#[test]
fn on_real_time_a_value_turns_stale_while_the_store_is_down() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let store = Store::default();
    let s = store.clone();
    let config = Refresh::builder(&scheduler)
        .every(Duration::from_secs(3600))
        .stale_after(Duration::from_millis(200))
        .bind(move || s.fetch());
    let start = Instant::now();
    config.refresh_and_wait(SECOND * 10).unwrap();
    // Two changes: none → fresh, then fresh → stale.
    common::eventually("the watchdog reports the value stale", || {
        config.stats().transitions == 2
    });
    assert!(start.elapsed() >= Duration::from_millis(200), "never early");
    assert_eq!(config.freshness(), Some(Freshness::Stale));
}

#[test]
fn a_blocking_fetch_past_its_deadline_is_reported_once_and_its_late_result_counts() {
    let (tx, stuck) = mpsc::channel();
    let scheduler = Scheduler::builder()
        .workers(2)
        .stuck_hook(move |run| {
            let _ = tx.send(run.trigger().map(str::to_owned));
        })
        .build()
        .unwrap();
    let (release_tx, release) = mpsc::channel::<()>();
    let release = std::sync::Mutex::new(release);
    let mut calls = 0;
    let config = Refresh::builder(&scheduler)
        .trigger(|t| {
            t.name("config")
                .policies(TriggerPolicies::new().min_interval(Duration::ZERO))
        })
        .every(Duration::from_secs(3600))
        .fetch_timeout(Duration::from_millis(50))
        .stale_after(Duration::from_millis(100))
        .expire_after(Duration::from_millis(200))
        .bind(move || {
            calls += 1;
            if calls == 2 {
                // Hangs until the test lets it go.
                let _ = release
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(30));
            }
            Ok::<_, String>(calls)
        });
    assert_eq!(*config.refresh_and_wait(SECOND * 10).unwrap(), 1);
    config.refresh_now().unwrap();
    let reported = stuck
        .recv_timeout(SECOND * 10)
        .expect("the overrun is reported");
    assert_eq!(reported.as_deref(), Some("config"));
    // Never two fetches at once: it holds, and the value ages meanwhile.
    // The watchdog reports each change (fresh, stale, expired) as it comes.
    common::eventually("the value expires while the fetch hangs", || {
        config.stats().transitions == 3
    });
    assert_eq!(config.freshness(), Some(Freshness::Expired));
    release_tx.send(()).unwrap();
    common::eventually("the late result counts", || {
        config.get().as_deref() == Some(&2)
    });
    let stats = config.stats();
    assert_eq!((stats.timeouts, stats.failures), (1, 0));
    assert!(stats.transitions >= 4, "fresh again: {stats:?}");
    assert!(
        stuck.try_recv().is_err(),
        "reported once, not once per check"
    );
}

#[cfg(feature = "tokio")]
mod asynchronous {
    use super::*;
    use circulation_trigger::refresh::RefreshError;

    /// The fetch's state: calls so far; the second hangs for an hour.
    fn hanging_second(
        calls: &mut u32,
    ) -> circulation_trigger::refresh::FetchFuture<'_, u32, String> {
        Box::pin(async move {
            *calls += 1; // kept in the state even when the fetch is dropped
            if *calls == 2 {
                tokio::time::sleep(Duration::from_secs(3600)).await;
            }
            Ok(*calls)
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn on_real_time_an_async_fetch_is_dropped_at_its_deadline() {
        let scheduler = Scheduler::new();
        let config = Refresh::builder(&scheduler)
            .trigger(|t| t.policies(TriggerPolicies::new().min_interval(Duration::ZERO)))
            .every(Duration::from_secs(3600))
            .fetch_timeout(Duration::from_millis(100))
            .bind_async(0, hanging_second);
        let first = config.refresh_and_wait_async(SECOND * 10).await.unwrap();
        assert_eq!(*first, 1);
        let start = Instant::now();
        let second = config.refresh_and_wait_async(SECOND * 10).await;
        assert_eq!(second, Err(RefreshError::TimedOut));
        assert!(start.elapsed() >= Duration::from_millis(100), "never early");
        assert!(start.elapsed() < SECOND * 5, "{:?}", start.elapsed());
        let stats = config.stats();
        assert_eq!((stats.timeouts, stats.failures), (1, 1));
        assert!(stats.failing);
        assert!(config.last_error().is_none(), "not one of the fetch's own");
        assert_eq!(config.last_failure(), Some(RefreshError::TimedOut));
        assert_eq!(stats.fetches, 2, "one new, one timed out");
        assert_eq!(config.get().as_deref(), Some(&1), "the value stays");
        // The state survived the dropped fetch: the third call is 3.
        let third = config.refresh_and_wait_async(SECOND * 10).await.unwrap();
        assert_eq!(*third, 3);
        scheduler.shutdown_async().await;
    }

    #[test]
    fn on_virtual_time_the_deadline_runs_on_virtual_time() {
        let sim = Scheduler::builder().build_virtual();
        let clock = sim.clock();
        let config = Refresh::builder(&sim)
            .every(SECOND * 30)
            .fetch_timeout(SECOND * 10)
            .stale_after(SECOND * 40)
            .bind_async(0_u32, move |calls| {
                let clock = clock.clone();
                Box::pin(async move {
                    *calls += 1;
                    // 5 s, then an hour, then 5 s again.
                    let took = if *calls == 2 { 3600 } else { 5 };
                    clock.sleep(SECOND * took).await;
                    Ok::<_, String>(*calls)
                })
            });
        config.refresh_now().unwrap();
        sim.advance(SECOND * 5);
        assert_eq!(
            config.get().as_deref(),
            Some(&1),
            "5 s: within the deadline"
        );
        // The second fetch starts at 35 s and is dropped at 45 s.
        sim.advance(SECOND * 40 - Duration::from_micros(1));
        assert_eq!(config.stats().timeouts, 0);
        sim.advance(Duration::from_micros(1));
        let stats = config.stats();
        assert_eq!((stats.timeouts, stats.failures), (1, 1));
        assert_eq!(stats.freshness, Some(Freshness::Stale), "confirmed at 5 s");
        // Retried a period later (no back-off): 75 s, done by 80 s.
        sim.advance(SECOND * 35);
        let stats = config.stats();
        assert_eq!(config.get().as_deref(), Some(&3));
        assert_eq!(stats.freshness, Some(Freshness::Fresh));
        assert_eq!(stats.transitions, 3, "fresh, stale, fresh");
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_does_not_let_virtual_time_run_past_a_fetch_waiting_on_io() {
        let dir = std::env::temp_dir().join(format!(
            "circulation-trigger-deadline-io-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.txt");
        std::fs::write(&path, "v1").unwrap();
        let sim = Scheduler::builder().build_virtual();
        let config = Refresh::builder(&sim)
            .fetch_timeout(Duration::from_micros(1))
            .bind_async(path, |path| {
                Box::pin(async move { tokio::fs::read_to_string(&*path).await })
            });
        config.refresh_now().unwrap();
        sim.advance(Duration::ZERO);
        sim.advance(Duration::from_micros(1));
        // Time moved only once the read was done: it beat its deadline.
        assert_eq!(config.get().as_deref().map(String::as_str), Some("v1"));
        assert_eq!(config.stats().timeouts, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
