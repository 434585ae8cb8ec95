//! G21 and G23's retry-after: a conditional fetch is handed its last
//! validator and may answer "unchanged" — freshness renewed, nothing
//! published, no subscriber woken, a failure with no value held; values
//! can be compared instead; a store's "retry after" sets the next fetch's
//! earliest time, capped, spread, with "refresh now" inside the window
//! served by one fetch at its end.

mod common;

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::refresh::{Fetched, Freshness, Validator};
use circulation_trigger::{policy::RetryBackoff, refresh::RefreshError, Refresh, Scheduler};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SECOND: Duration = Duration::from_secs(1);

/// A store with a version key: the value changes when the version does.
#[derive(Clone)]
struct VersionedStore {
    version: Arc<Mutex<u64>>,
    /// The validator each fetch was handed.
    seen: Arc<Mutex<Vec<Option<String>>>>,
}

impl VersionedStore {
    fn new() -> Self {
        Self {
            version: Arc::new(Mutex::new(1)),
            seen: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn fetch(&self, last: Option<Validator>) -> Result<Fetched<String>, String> {
        let version = *self.version.lock().unwrap();
        self.seen
            .lock()
            .unwrap()
            .push(last.as_ref().map(|v| v.as_str().to_owned()));
        if last.is_some_and(|seen| seen == Validator::from(version)) {
            return Ok(Fetched::unchanged());
        }
        Ok(Fetched::changed(format!("config v{version}")).validator(version))
    }

    fn bump(&self) {
        *self.version.lock().unwrap() += 1;
    }

    fn seen(&self) -> Vec<Option<String>> {
        self.seen.lock().unwrap().clone()
    }
}

fn some(text: &str) -> Option<String> {
    Some(text.to_owned())
}

#[test]
fn unchanged_renews_freshness_and_publishes_nothing() {
    let sim = Scheduler::builder().build_virtual();
    let store = VersionedStore::new();
    let s = store.clone();
    let config = Refresh::builder(&sim)
        .every(SECOND * 30)
        .stale_after(SECOND * 45)
        .bind_conditional(move |last| s.fetch(last));
    #[cfg(feature = "tokio")]
    let mut updates = config.subscribe();
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    let first = config.get().unwrap();
    #[cfg(feature = "tokio")]
    updates.borrow_and_update();

    sim.advance(SECOND * 90); // unchanged at 30, 60 and 90 s
    let stats = config.stats();
    assert_eq!((stats.refreshes, stats.unchanged), (1, 3));
    assert_eq!(
        stats.freshness,
        Some(Freshness::Fresh),
        "renewed every 30 s"
    );
    assert_eq!(stats.age, Some(Duration::ZERO));
    assert_eq!(stats.transitions, 1, "fresh all along");
    assert!(
        Arc::ptr_eq(&first, &config.get().unwrap()),
        "the same value, not republished"
    );
    #[cfg(feature = "tokio")]
    assert!(!updates.has_changed().unwrap(), "no subscriber woken");
    assert_eq!(store.seen(), [None, some("1"), some("1"), some("1")]);

    store.bump();
    sim.advance(SECOND * 30);
    assert_eq!(
        config.get().as_deref().map(String::as_str),
        Some("config v2")
    );
    #[cfg(feature = "tokio")]
    assert!(updates.has_changed().unwrap(), "a change wakes");
    assert_eq!(store.seen().last(), Some(&some("1")));
    sim.advance(SECOND * 30);
    assert_eq!(store.seen().last(), Some(&some("2")), "the new validator");
}

#[test]
fn unchanged_with_no_value_held_is_a_failure() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let config = Refresh::builder(&scheduler)
        .bind_conditional(|_| Ok::<Fetched<u32>, String>(Fetched::unchanged()));
    assert_eq!(
        config.refresh_and_wait(SECOND * 10),
        Err(RefreshError::NothingHeld)
    );
    let stats = config.stats();
    assert!(!stats.has_value && !stats.confirmed && stats.failing);
    assert_eq!((stats.fetches, stats.failures, stats.unchanged), (1, 1, 0));
    assert_eq!(config.last_failure(), Some(RefreshError::NothingHeld));
}

#[test]
fn unchanged_without_a_validator_keeps_it_and_a_value_without_one_forgets_it() {
    let sim = Scheduler::builder().build_virtual();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&seen);
    let mut call = 0;
    let config = Refresh::builder(&sim)
        .every(SECOND)
        .trigger(|t| t.policies(TriggerPolicies::new().min_interval(Duration::ZERO)))
        .bind_conditional(move |last: Option<Validator>| {
            s.lock().unwrap().push(last.map(|v| v.to_string()));
            call += 1;
            Ok::<_, String>(match call {
                1 => Fetched::changed(call).validator("etag-1"),
                2 => Fetched::unchanged(), // keeps "etag-1"
                3 => Fetched::unchanged().validator("etag-1b"),
                4 => Fetched::changed(call), // no validator: forgets it
                _ => Fetched::changed(call).validator("etag-5"),
            })
        });
    config.refresh_now().unwrap();
    sim.advance(SECOND * 5);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            None,
            some("etag-1"),
            some("etag-1"),
            some("etag-1b"),
            None,
            some("etag-5")
        ]
    );
}

#[test]
#[cfg(feature = "tokio")] // `subscribe`
fn compared_values_that_are_equal_count_as_unchanged() {
    let sim = Scheduler::builder().build_virtual();
    let mut call = 0;
    let config = Refresh::builder(&sim)
        .every(SECOND * 10)
        .bind(move || {
            call += 1;
            Ok::<_, String>(if call < 3 { "a" } else { "b" })
        })
        .compare_values();
    let mut updates = config.subscribe();
    config.refresh_now().unwrap();
    sim.advance(SECOND * 10); // "a" at 0 s, "a" again at 10 s
    updates.borrow_and_update();
    let stats = config.stats();
    assert_eq!((stats.refreshes, stats.unchanged), (1, 1));
    assert!(!updates.has_changed().unwrap());
    sim.advance(SECOND * 10); // "b"
    assert_eq!((config.stats().refreshes, config.stats().unchanged), (2, 1));
    assert!(updates.has_changed().unwrap());
    assert_eq!(config.get().as_deref(), Some(&"b"));
}

#[test]
fn without_comparison_an_equal_value_is_published() {
    let sim = Scheduler::builder().build_virtual();
    let config = Refresh::builder(&sim)
        .every(SECOND * 10)
        .bind(|| Ok::<_, String>("a"));
    config.refresh_now().unwrap();
    sim.advance(SECOND * 10);
    assert_eq!((config.stats().refreshes, config.stats().unchanged), (2, 0));
}

#[test]
#[cfg(feature = "tokio")] // `subscribe`
fn on_real_time_an_unchanged_answer_wakes_no_subscriber() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let store = VersionedStore::new();
    let s = store.clone();
    let config = Refresh::builder(&scheduler)
        .trigger(|t| t.policies(TriggerPolicies::new().min_interval(Duration::ZERO)))
        .bind_conditional(move |last| s.fetch(last));
    let first = config.refresh_and_wait(SECOND * 10).unwrap();
    let mut updates = config.subscribe();
    updates.borrow_and_update();
    let again = config.refresh_and_wait(SECOND * 10).unwrap();
    assert!(Arc::ptr_eq(&first, &again), "the value held, unchanged");
    assert!(!updates.has_changed().unwrap());
    assert_eq!(config.stats().unchanged, 1);
}

/// A store that throttles: its error names how long to wait.
#[derive(Debug, Clone, PartialEq)]
enum StoreError {
    Throttled(Duration),
    Down,
}

fn retry_after(error: &StoreError) -> Option<Duration> {
    match error {
        StoreError::Throttled(after) => Some(*after),
        StoreError::Down => None,
    }
}

/// The virtual times of each fetch, and a refresher whose first fetch
/// fails with `first`, the rest succeed.
fn throttled_once(
    sim: &circulation_trigger::testing::VirtualScheduler,
    backoff: Option<RetryBackoff>,
    first: StoreError,
) -> (Refresh<u32, StoreError>, Arc<Mutex<Vec<Duration>>>) {
    let times = Arc::new(Mutex::new(Vec::new()));
    let (t, clock) = (Arc::clone(&times), sim.clock());
    let mut builder = Refresh::builder(sim).every(SECOND * 600);
    if let Some(backoff) = backoff {
        builder = builder.retry(backoff);
    }
    let config = builder
        .bind(move || {
            let mut times = t.lock().unwrap();
            times.push(clock.now());
            if times.len() == 1 {
                return Err(first.clone());
            }
            Ok(u32::try_from(times.len()).unwrap())
        })
        .retry_after(retry_after);
    (config, times)
}

#[test]
fn retry_after_defers_every_refresh_in_its_window_to_one_fetch_at_its_end() {
    let sim = Scheduler::builder().build_virtual();
    let backoff = RetryBackoff::new(SECOND, SECOND * 120);
    let (config, times) = throttled_once(&sim, Some(backoff), StoreError::Throttled(SECOND * 30));
    config.refresh_now().unwrap();
    for _ in 0..29 {
        sim.advance(SECOND);
        config.refresh_now().unwrap(); // a burst all through the window
    }
    sim.advance(SECOND * 10);
    let times = times.lock().unwrap().clone();
    assert_eq!(times.len(), 2, "{times:?}");
    assert!(times[1] >= SECOND * 30, "never before the store asked");
    assert!(times[1] <= SECOND * 33, "spread over a tenth: {times:?}");
    assert_eq!(config.get().as_deref(), Some(&2));
}

#[test]
fn retry_after_is_capped_at_the_backoffs_maximum() {
    let sim = Scheduler::builder().build_virtual();
    let backoff = RetryBackoff::new(SECOND, SECOND * 60);
    let (config, times) = throttled_once(&sim, Some(backoff), StoreError::Throttled(SECOND * 3600));
    config.refresh_now().unwrap();
    sim.advance(SECOND * 70);
    let times = times.lock().unwrap().clone();
    assert_eq!(times.len(), 2);
    assert!(
        times[1] >= SECOND * 60 && times[1] <= SECOND * 66,
        "{times:?}"
    );
}

#[test]
fn without_a_backoff_retry_after_is_capped_at_the_period() {
    let sim = Scheduler::builder().build_virtual();
    let (config, times) = throttled_once(&sim, None, StoreError::Throttled(SECOND * 3600));
    config.refresh_now().unwrap();
    sim.advance(SECOND * 700);
    let times = times.lock().unwrap().clone();
    assert_eq!(times.len(), 2);
    assert!(
        times[1] >= SECOND * 600 && times[1] <= SECOND * 660,
        "{times:?}"
    );
}

#[test]
fn an_error_without_retry_after_keeps_the_backoff() {
    let sim = Scheduler::builder().build_virtual();
    let backoff = RetryBackoff::new(SECOND * 2, SECOND * 60);
    let (config, times) = throttled_once(&sim, Some(backoff), StoreError::Down);
    config.refresh_now().unwrap();
    sim.advance(SECOND * 5);
    assert_eq!(*times.lock().unwrap(), [Duration::ZERO, SECOND * 2]);
    assert_eq!(config.failures(), 1);
}

#[test]
fn a_fleet_told_the_same_delay_comes_back_spread() {
    let sim = Scheduler::builder().build_virtual();
    let fleet: Vec<_> = (0..50)
        .map(|_| {
            let backoff = RetryBackoff::new(SECOND, SECOND * 120);
            throttled_once(&sim, Some(backoff), StoreError::Throttled(SECOND * 30))
        })
        .collect();
    for (config, _) in &fleet {
        config.refresh_now().unwrap();
    }
    sim.advance(SECOND * 40);
    let mut retries: Vec<Duration> = fleet
        .iter()
        .map(|(_, times)| times.lock().unwrap()[1])
        .collect();
    retries.sort();
    retries.dedup();
    assert!(retries.len() > 40, "{} distinct retry times", retries.len());
    assert!(retries[0] >= SECOND * 30 && *retries.last().unwrap() <= SECOND * 33);
}

#[test]
fn on_real_time_a_retry_after_is_never_cut_short_by_refresh_now() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let starts = Arc::new(Mutex::new(Vec::new()));
    let s = Arc::clone(&starts);
    let config = Refresh::builder(&scheduler)
        .trigger(|t| t.policies(TriggerPolicies::new().min_interval(Duration::ZERO)))
        .bind(move || {
            let mut starts = s.lock().unwrap();
            starts.push(Instant::now());
            if starts.len() == 1 {
                return Err(StoreError::Throttled(Duration::from_millis(300)));
            }
            Ok(starts.len())
        })
        .retry_after(retry_after);
    let throttled = config.refresh_and_wait(SECOND * 10);
    assert_eq!(
        throttled,
        Err(RefreshError::Failed(Arc::new(StoreError::Throttled(
            Duration::from_millis(300)
        ))))
    );
    // Inside the window: served at once with the store's answer, and the
    // fetch it asks for waits for the window's end.
    let again = config.refresh_and_wait(SECOND * 10);
    assert!(matches!(again, Err(RefreshError::Failed(_))), "{again:?}");
    assert_eq!(starts.lock().unwrap().len(), 1);
    common::eventually("the fetch at the window's end", || {
        starts.lock().unwrap().len() == 2
    });
    let starts = starts.lock().unwrap();
    assert!(starts[1] - starts[0] >= Duration::from_millis(300));
    assert_eq!(config.get().as_deref(), Some(&2));
}

#[cfg(feature = "tokio")]
mod asynchronous {
    use super::*;

    #[test]
    fn an_async_conditional_fetch_gets_its_validator_and_answers_unchanged() {
        let sim = Scheduler::builder().build_virtual();
        let store = VersionedStore::new();
        let clock = sim.clock();
        let config = Refresh::builder(&sim)
            .every(SECOND * 30)
            .stale_after(SECOND * 45)
            .bind_async_conditional(store.clone(), move |store, last| {
                let clock = clock.clone();
                Box::pin(async move {
                    clock.sleep(SECOND).await; // the round trip
                    store.fetch(last)
                })
            });
        let mut updates = config.subscribe();
        config.refresh_now().unwrap();
        sim.advance(SECOND);
        updates.borrow_and_update();
        sim.advance(SECOND * 62); // unchanged, ending at 32 and 63 s
        let stats = config.stats();
        assert_eq!((stats.refreshes, stats.unchanged), (1, 2));
        assert_eq!(stats.freshness, Some(Freshness::Fresh));
        assert!(!updates.has_changed().unwrap());
        assert_eq!(store.seen(), [None, some("1"), some("1")]);
    }

    #[test]
    fn an_async_fetchs_retry_after_defers_the_next() {
        let sim = Scheduler::builder().build_virtual();
        let times = Arc::new(Mutex::new(Vec::new()));
        let clock = sim.clock();
        let config = Refresh::builder(&sim)
            .retry(RetryBackoff::new(SECOND, SECOND * 120))
            .bind_async(Arc::clone(&times), move |times| {
                let now = clock.now();
                Box::pin(async move {
                    let mut times = times.lock().unwrap();
                    times.push(now);
                    if times.len() == 1 {
                        return Err(StoreError::Throttled(SECOND * 30));
                    }
                    Ok(times.len())
                })
            })
            .retry_after(retry_after);
        config.refresh_now().unwrap();
        sim.advance(SECOND * 10);
        config.refresh_now().unwrap();
        sim.advance(SECOND * 30);
        let times = times.lock().unwrap().clone();
        assert_eq!(times.len(), 2, "{times:?}");
        assert!(times[1] >= SECOND * 30 && times[1] <= SECOND * 33);
    }
}
