//! The async refresher (feature `tokio`): the same `Refresh` as the
//! blocking one, its state lent to each fetch and kept through a dropped
//! one, and its fetches on virtual time — `tokio::fs` inside a paused
//! Tokio test with exact fetch times, and a clear error without a runtime.
#![cfg(feature = "tokio")]

mod common;

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::{
    policy::RetryBackoff, refresh::RefreshError, testing::VirtualScheduler, Refresh, Scheduler,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// A config file the test rewrites, in a directory of its own.
struct ConfigFile {
    dir: std::path::PathBuf,
}

impl ConfigFile {
    fn new(name: &str, content: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("circulation-trigger-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = Self { dir };
        file.write(content);
        file
    }

    fn path(&self) -> std::path::PathBuf {
        self.dir.join("config.txt")
    }

    /// Replaced atomically: a fetch never reads half a file.
    fn write(&self, content: &str) {
        let tmp = self.dir.join("config.tmp");
        std::fs::write(&tmp, content).unwrap();
        std::fs::rename(&tmp, self.path()).unwrap();
    }
}

impl Drop for ConfigFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// (virtual time before the read, after it) per fetch.
type ReadTimes = Arc<Mutex<Vec<(Duration, Duration)>>>;

/// The fetch's own state: where to read, and what it has seen.
struct FileClient {
    path: std::path::PathBuf,
    clock: circulation_trigger::testing::VirtualClock,
    times: ReadTimes,
}

fn file_refresher(
    sim: &VirtualScheduler,
    file: &ConfigFile,
) -> (Refresh<String, std::io::Error>, ReadTimes) {
    let times = Arc::new(Mutex::new(Vec::new()));
    let client = FileClient {
        path: file.path(),
        clock: sim.clock(),
        times: Arc::clone(&times),
    };
    let config = Refresh::builder(sim)
        .every(30 * SECOND)
        .bind_async(client, |client| {
            Box::pin(async move {
                let before = client.clock.now();
                let text = tokio::fs::read_to_string(&client.path).await?;
                client
                    .times
                    .lock()
                    .unwrap()
                    .push((before, client.clock.now()));
                Ok(text)
            })
        });
    (config, times)
}

#[tokio::test(start_paused = true)]
async fn a_tokio_fs_fetch_on_virtual_time_has_exact_fetch_times() {
    let file = ConfigFile::new("fs-paused", "v1");
    let sim = Scheduler::builder().build_virtual();
    let (config, times) = file_refresher(&sim, &file);
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    // The read ran on Tokio's blocking pool; `advance` waited for it in
    // real time, and no virtual time passed.
    assert_eq!(config.get().as_deref().map(String::as_str), Some("v1"));
    file.write("v2");
    sim.advance(95 * SECOND);
    assert_eq!(config.get().as_deref().map(String::as_str), Some("v2"));
    let expected: Vec<_> = [0, 30, 60, 90]
        .iter()
        .map(|&s| (s * SECOND, s * SECOND))
        .collect();
    assert_eq!(
        *times.lock().unwrap(),
        expected,
        "each read at its instant, taking no virtual time"
    );
    assert_eq!(config.refreshes(), 4);
    assert_eq!(sim.now(), 95 * SECOND);
}

#[tokio::test(start_paused = true)]
async fn a_failed_read_keeps_the_value_and_backs_off_on_virtual_time() {
    let file = ConfigFile::new("fs-missing", "v1");
    let sim = Scheduler::builder().build_virtual();
    let (config, times) = file_refresher(&sim, &file);
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    std::fs::remove_file(file.path()).unwrap();
    sim.advance(30 * SECOND);
    assert_eq!(config.get().as_deref().map(String::as_str), Some("v1"));
    let error = config.last_error().expect("the read failed");
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(config.failures(), 1);
    file.write("v3");
    sim.advance(30 * SECOND);
    assert_eq!(config.get().as_deref().map(String::as_str), Some("v3"));
    assert!(config.last_error().is_none());
    assert_eq!(
        times.lock().unwrap().len(),
        2,
        "the failed read logged nothing"
    );
}

#[test]
fn without_a_runtime_the_fetch_fails_with_an_error_naming_the_recipe() {
    let file = ConfigFile::new("fs-no-runtime", "v1");
    let sim = Scheduler::builder().build_virtual();
    let (config, _) = file_refresher(&sim, &file);
    // Another thread moves time (no runtime on it either) while this one
    // waits for the answer.
    let answer = common::while_time_moves(&sim, Duration::from_millis(100), || {
        config.refresh_and_wait(common::PATIENCE)
    });
    let error = answer.unwrap_err();
    assert!(matches!(error, RefreshError::NoRuntime), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("#[tokio::test"), "{message}");
    assert!(message.contains("runtime(handle)"), "{message}");
    // A failure like any other: counted, and retried — not a silent stop.
    assert_eq!((config.failures(), config.panics()), (1, 1));
    assert!(config.get().is_none());
    assert!(
        matches!(
            config.trigger().stats().state,
            circulation_trigger::report::TriggerState::Armed(_)
        ),
        "retried on its schedule"
    );
}

/// The state's contents, logged when the state is dropped.
struct Tracked {
    step: u32,
    dropped: Arc<Mutex<Vec<u32>>>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.dropped.lock().unwrap().push(self.step);
    }
}

#[test]
fn a_fetch_dropped_by_shutdown_now_leaves_the_state_as_it_was_left() {
    let sim = Scheduler::builder().build_virtual();
    let dropped = Arc::new(Mutex::new(Vec::new()));
    let state = Tracked {
        step: 0,
        dropped: Arc::clone(&dropped),
    };
    let clock = sim.clock();
    let config = Refresh::builder(&sim).bind_async(state, move |state| {
        let clock = clock.clone();
        Box::pin(async move {
            state.step += 1; // 1, then 11 after the first fetch ends
            clock.sleep(10 * SECOND).await;
            state.step += 10;
            Ok::<_, String>(state.step)
        })
    });
    config.refresh_now().unwrap();
    sim.advance(20 * SECOND);
    assert_eq!(config.get().as_deref(), Some(&11));
    config.refresh_now().unwrap();
    sim.advance(SECOND); // the second fetch is asleep, state.step == 12
    let report = sim.shutdown_now();
    assert_eq!(report.in_flight().len(), 1, "{report}");
    assert!(
        dropped.lock().unwrap().is_empty(),
        "the state went back to the refresher"
    );
    drop(config);
    drop(sim);
    assert_eq!(
        *dropped.lock().unwrap(),
        [12],
        "dropped once, as the cut fetch left it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_real_scheduler_it_is_the_same_refresh() {
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let config = Refresh::builder(&scheduler)
        .every(Duration::from_secs(3600))
        .retry(RetryBackoff::new(
            Duration::from_millis(1),
            Duration::from_millis(10),
        ))
        .trigger(|t| {
            t.name("async-config")
                .policies(TriggerPolicies::new().min_interval(Duration::ZERO))
        })
        .bind_async(0u32, |calls| {
            Box::pin(async move {
                tokio::time::sleep(Duration::from_millis(2)).await;
                *calls += 1;
                if *calls == 2 {
                    Err("config center down".to_owned())
                } else {
                    Ok(*calls)
                }
            })
        });
    let mut updates = config.subscribe();
    assert_eq!(
        *config
            .refresh_and_wait_async(common::PATIENCE)
            .await
            .unwrap(),
        1
    );
    updates.changed().await.unwrap();
    assert_eq!(updates.borrow_and_update().as_deref(), Some(&1));
    let failed = config.refresh_and_wait_async(common::PATIENCE).await;
    assert_eq!(
        failed.unwrap_err(),
        RefreshError::Failed(Arc::new("config center down".into()))
    );
    assert_eq!(
        config.get().as_deref(),
        Some(&1),
        "the last good value stays"
    );
    // Retried on the back-off, without a call.
    tokio::time::timeout(common::PATIENCE, updates.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(updates.borrow().as_deref(), Some(&3));
    assert_eq!(config.trigger().name(), Some("async-config"));
    let blocking = config.clone();
    let value = tokio::task::spawn_blocking(move || blocking.refresh_and_wait(common::PATIENCE))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(*value, 4);
    config.pause();
    assert!(config.refresh_now().is_err());
    scheduler.shutdown_async().await;
}

#[test]
fn a_runtime_can_be_given_to_bind_outside_one() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let config = Refresh::builder(&scheduler)
        .trigger(|t| t.runtime(runtime.handle().clone()))
        .bind_async(String::from("v"), |prefix| {
            Box::pin(async move {
                tokio::task::yield_now().await;
                prefix.push('1');
                Ok::<_, String>(prefix.clone())
            })
        });
    assert_eq!(*config.refresh_and_wait(common::PATIENCE).unwrap(), "v1");
    scheduler.shutdown();
    assert!(scheduler.await_termination(common::PATIENCE));
}

#[test]
fn a_panicking_async_fetch_is_a_failure_that_is_retried() {
    let sim = Scheduler::builder().build_virtual();
    let config = Refresh::builder(&sim)
        .every(30 * SECOND)
        .retry(RetryBackoff::new(2 * SECOND, 2 * SECOND))
        .bind_async(0u32, |calls| {
            Box::pin(async move {
                *calls += 1;
                assert!(*calls != 2, "a bug in the fetch");
                Ok::<_, String>(*calls)
            })
        });
    config.refresh_now().unwrap();
    sim.advance(Duration::ZERO);
    sim.advance(30 * SECOND); // the second fetch panics…
    assert_eq!((config.panics(), config.get().as_deref()), (1, Some(&1)));
    sim.advance(2 * SECOND); // …and is retried after the back-off
    assert_eq!(config.get().as_deref(), Some(&3));
}
