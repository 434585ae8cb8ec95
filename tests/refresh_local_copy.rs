//! G22: a refresher with a local copy starts without its store — serving
//! the last value it saved, marked as such, its first fetch conditional on
//! the saved validator — and the copy is never torn, never another's
//! value: a crash mid-write (SIGKILL, in a loop, on a 4 MiB value) leaves
//! the old or the new one; a corrupt file or another schema is an error
//! the service sees; the file is owner-only.

mod common;

use circulation_trigger::policy::TriggerPolicies;
use circulation_trigger::refresh::{
    Fetched, Freshness, LocalCopy, LocalCopyError, Origin, StartPolicy, Validator,
};
use circulation_trigger::{refresh::RefreshError, Refresh, Scheduler, WaitError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

const SECOND: Duration = Duration::from_secs(1);

/// A directory of the test's own, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "circulation-trigger-copy-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text_copy(path: &Path, schema: &str) -> LocalCopy<String> {
    LocalCopy::new(
        path,
        schema,
        |value: &String| Ok::<_, std::io::Error>(value.as_bytes().to_vec()),
        |bytes| String::from_utf8(bytes.to_vec()),
    )
}

/// A versioned store that can be down.
#[derive(Clone, Default)]
struct Store {
    down: Arc<AtomicBool>,
    version: Arc<AtomicU64>,
    seen: Arc<std::sync::Mutex<Vec<Option<String>>>>,
}

impl Store {
    fn fetch(&self, last: Option<Validator>) -> Result<Fetched<String>, String> {
        self.seen
            .lock()
            .unwrap()
            .push(last.as_ref().map(ToString::to_string));
        if self.down.load(SeqCst) {
            return Err("store down".into());
        }
        let version = self.version.load(SeqCst);
        if last.is_some_and(|seen| seen == Validator::from(version)) {
            return Ok(Fetched::unchanged());
        }
        Ok(Fetched::changed(format!("config v{version}")).validator(version))
    }
}

fn refresher(
    scheduler: &Scheduler,
    store: &Store,
    copy: LocalCopy<String>,
) -> Refresh<String, String> {
    let store = store.clone();
    Refresh::builder(scheduler)
        .trigger(|t| t.policies(TriggerPolicies::new().min_interval(Duration::ZERO)))
        .every(Duration::from_secs(3600))
        .bind_conditional(move |last| store.fetch(last))
        .local_copy(copy)
}

#[test]
fn a_restart_with_the_store_down_serves_the_saved_value_then_confirms_it_unchanged() {
    let dir = Dir::new("restart");
    let path = dir.join("config.copy");
    let store = Store::default();
    store.version.store(7, SeqCst);

    // The first run: no file yet, a normal start; the value is saved.
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let first = refresher(&scheduler, &store, text_copy(&path, "v1"));
    assert!(first.local_copy_error().is_none(), "no file is no error");
    assert_eq!(
        first.start(StartPolicy::WaitForFetch(SECOND * 10)),
        Ok(Origin::Fetch)
    );
    // Saved on the fetch's thread, just after the value is published.
    common::eventually("the value is saved", || first.stats().copy_writes == 1);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "owner-only");
    }
    drop(first);
    scheduler.shutdown();

    // A restart while the store is down: the copy is served.
    store.down.store(true, SeqCst);
    store.seen.lock().unwrap().clear();
    let scheduler = Scheduler::builder().workers(1).build().unwrap();
    let second = refresher(&scheduler, &store, text_copy(&path, "v1"));
    let stats = second.stats();
    assert!(stats.has_value && !stats.confirmed);
    assert_eq!(stats.origin, Some(Origin::LocalCopy));
    assert_eq!(
        second.start(StartPolicy::WaitForFetch(Duration::from_millis(50))),
        Err(RefreshError::Wait(WaitError::Timeout)),
        "this policy wants a fetch"
    );
    assert_eq!(
        second.start(StartPolicy::WaitThenCopy(Duration::from_millis(50))),
        Ok(Origin::LocalCopy)
    );
    assert_eq!(
        second.start(StartPolicy::Immediately),
        Ok(Origin::LocalCopy)
    );
    let mut reader = second.reader();
    assert_eq!(reader.read().unwrap().origin(), Origin::LocalCopy);
    assert_eq!(
        reader.read().as_deref().map(String::as_str),
        Some("config v7")
    );

    // The store comes back unchanged: the first fetch was conditional on
    // the saved validator, and confirms the copy without a transfer.
    store.down.store(false, SeqCst);
    second.refresh_and_wait(SECOND * 10).unwrap();
    let stats = second.stats();
    assert!(stats.confirmed);
    assert_eq!(
        (stats.refreshes, stats.unchanged, stats.copy_writes),
        (0, 1, 0)
    );
    assert_eq!(stats.origin, Some(Origin::LocalCopy));
    assert!(store
        .seen
        .lock()
        .unwrap()
        .iter()
        .all(|v| v.as_deref() == Some("7")));

    // A new version replaces the copy's value and the copy.
    store.version.store(8, SeqCst);
    second.refresh_and_wait(SECOND * 10).unwrap();
    assert_eq!(reader.read().unwrap().origin(), Origin::Fetch);
    common::eventually("the new value is saved", || second.stats().copy_writes == 1);
    let saved = text_copy(&path, "v1").load().unwrap().unwrap();
    assert_eq!(saved.value, "config v8");
    assert_eq!(saved.validator, Some(Validator::from(8_u64)));
    scheduler.shutdown();
}

#[test]
fn a_carried_value_ages_from_when_it_was_saved() {
    let dir = Dir::new("age");
    let path = dir.join("config.copy");
    text_copy(&path, "v1")
        .save(&String::from("saved"), None)
        .unwrap();
    let sim = Scheduler::builder().build_virtual();
    let config = Refresh::builder(&sim)
        .stale_after(SECOND * 60)
        .bind(|| Err::<String, _>(String::from("down")))
        .local_copy(text_copy(&path, "v1"));
    assert_eq!(config.freshness(), Some(Freshness::Fresh));
    sim.advance(SECOND * 61);
    let stats = config.stats();
    assert_eq!(stats.freshness, Some(Freshness::Stale));
    assert_eq!(stats.transitions, 2, "fresh, then stale, as it happened");
}

#[test]
fn a_corrupt_copy_or_another_schema_is_an_error_and_serves_nothing() {
    let dir = Dir::new("corrupt");
    let path = dir.join("config.copy");
    let copy = text_copy(&path, "v1");
    copy.save(&String::from("a value"), Some(&Validator::from("e1")))
        .unwrap();

    let other = text_copy(&path, "v2");
    match other.load() {
        Err(LocalCopyError::Schema { expected, found }) => {
            assert_eq!((expected.as_str(), found.as_str()), ("v2", "v1"));
        }
        other => panic!("{other:?}"),
    }
    let sim = Scheduler::builder().build_virtual();
    let config = Refresh::builder(&sim)
        .bind(|| Err::<String, _>(String::from("down")))
        .local_copy(text_copy(&path, "v2"));
    assert!(config.get().is_none(), "never another schema's value");
    assert!(matches!(
        config.local_copy_error().as_deref(),
        Some(LocalCopyError::Schema { .. })
    ));
    assert_eq!(config.stats().copy_failures, 1);

    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let config = Refresh::builder(&sim)
        .bind(|| Err::<String, _>(String::from("down")))
        .local_copy(text_copy(&path, "v1"));
    assert!(config.get().is_none());
    assert!(matches!(
        config.local_copy_error().as_deref(),
        Some(LocalCopyError::Corrupt(_))
    ));

    std::fs::write(&path, &bytes[..10]).unwrap();
    assert!(matches!(copy.load(), Err(LocalCopyError::Corrupt(_))));

    let undecodable = LocalCopy::new(
        &path,
        "v1",
        |value: &String| Ok::<_, std::io::Error>(value.as_bytes().to_vec()),
        |_: &[u8]| Err::<String, _>("not this shape"),
    );
    copy.save(&String::from("a value"), None).unwrap();
    assert!(matches!(undecodable.load(), Err(LocalCopyError::Decode(_))));
}

#[test]
fn a_save_that_fails_is_counted_and_never_stops_the_refresh() {
    let dir = Dir::new("unwritable");
    let path = dir.join("missing-directory").join("config.copy");
    let sim = Scheduler::builder().build_virtual();
    let config = Refresh::builder(&sim)
        .every(SECOND * 10)
        .bind(|| Ok::<_, String>(String::from("value")))
        .local_copy(text_copy(&path, "v1"));
    config.refresh_now().unwrap();
    sim.advance(SECOND * 10); // two fetches, two failed saves
    let stats = config.stats();
    assert_eq!(
        (stats.refreshes, stats.copy_writes, stats.copy_failures),
        (2, 0, 2)
    );
    assert!(matches!(
        config.local_copy_error().as_deref(),
        Some(LocalCopyError::Io(_))
    ));
    assert_eq!(config.get().as_deref().map(String::as_str), Some("value"));
}

#[test]
fn leftovers_of_an_interrupted_save_are_removed_at_start() {
    let dir = Dir::new("leftovers");
    let path = dir.join("config.copy");
    let leftover = dir.join(".config.copy.tmp-1-0");
    std::fs::write(&leftover, b"half a save").unwrap();
    std::fs::write(dir.join("unrelated"), b"kept").unwrap();
    assert!(text_copy(&path, "v1").load().unwrap().is_none());
    assert!(!leftover.exists());
    assert!(dir.join("unrelated").exists());
}

/// The value the crash test saves: 4 MiB of one letter.
const BIG: usize = 4 << 20;

fn big_copy(path: &Path) -> LocalCopy<Vec<u8>> {
    LocalCopy::new(
        path,
        "big-v1",
        |value: &Vec<u8>| Ok::<_, std::io::Error>(value.clone()),
        |bytes| {
            let whole = bytes.len() == BIG && bytes.iter().all(|&b| b == bytes[0]);
            if whole {
                Ok(bytes.to_vec())
            } else {
                Err("a torn value")
            }
        },
    )
}

/// The crash test's writer, run as a child of the test below (named by
/// `CT_COPY_WRITER`): saves 'a' and 'b' values in turn until killed — with
/// the crate's atomic save, or (`CT_COPY_IN_PLACE`) by rewriting the file
/// in place, chunk by chunk. Run on its own, it checks one round trip.
#[test]
fn crash_test_writer() {
    let Ok(path) = std::env::var("CT_COPY_WRITER") else {
        let dir = Dir::new("writer-round-trip");
        let copy = big_copy(&dir.join("big.copy"));
        copy.save(&vec![b'a'; BIG], None).unwrap();
        assert_eq!(copy.load().unwrap().unwrap().value[0], b'a');
        return;
    };
    let path = PathBuf::from(path);
    let copy = big_copy(&path);
    let in_place = std::env::var_os("CT_COPY_IN_PLACE").is_some();
    // The bytes of a whole copy of each value, for the in-place writer.
    let images: Vec<Vec<u8>> = [b'a', b'b']
        .iter()
        .map(|&letter| {
            let side = path.with_extension(format!("image-{}", letter as char));
            big_copy(&side).save(&vec![letter; BIG], None).unwrap();
            std::fs::read(&side).unwrap()
        })
        .collect();
    let mut round = 0_usize;
    loop {
        let letter = [b'a', b'b'][round % 2];
        if in_place {
            use std::io::Write;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            for chunk in images[round % 2].chunks(64 * 1024) {
                file.write_all(chunk).unwrap();
                std::thread::sleep(Duration::from_micros(50));
            }
        } else {
            copy.save(&vec![letter; BIG], None).unwrap();
        }
        if round == 0 {
            println!("writing");
        }
        round += 1;
    }
}

/// Kills a writer child with SIGKILL at a random moment, `kills` times,
/// reading the copy back after each: returns how many reads were not a
/// whole 'a' or 'b' value.
fn torn_reads(in_place: bool, kills: usize) -> usize {
    use std::io::BufRead;
    let dir = Dir::new(if in_place {
        "crash-in-place"
    } else {
        "crash-atomic"
    });
    let path = dir.join("big.copy");
    big_copy(&path).save(&vec![b'a'; BIG], None).unwrap();
    let mut torn = 0;
    for kill in 0..kills {
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "--exact",
                "crash_test_writer",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CT_COPY_WRITER", &path)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        if in_place {
            command.env("CT_COPY_IN_PLACE", "1");
        }
        let mut child = command.spawn().unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let started = lines.find(|line| line.as_deref().is_ok_and(|l| l.contains("writing")));
        assert!(started.is_some(), "the writer never wrote");
        // A moment somewhere within the next few saves.
        std::thread::sleep(Duration::from_micros(500 + (kill as u64 * 7_919) % 15_000));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        match big_copy(&path).load() {
            Ok(Some(saved)) if saved.value.len() == BIG => {}
            _ => torn += 1,
        }
    }
    torn
}

#[cfg(unix)]
#[test]
fn a_crash_mid_write_leaves_the_old_value_or_the_new_never_a_torn_one() {
    assert_eq!(torn_reads(false, 20), 0, "the atomic save tore");
    // The same test fails a writer that writes in place: it can fail.
    assert!(torn_reads(true, 20) > 0, "an in-place writer never tore");
}

#[cfg(feature = "serde")]
#[test]
fn the_json_copy_round_trips_a_serde_value() {
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Config {
        limit: u32,
        name: String,
    }
    let dir = Dir::new("json");
    let copy = LocalCopy::json(dir.join("config.json.copy"), "config-v1");
    let value = Config {
        limit: 10,
        name: "service".into(),
    };
    copy.save(&value, Some(&Validator::from("etag-3"))).unwrap();
    let saved = copy.load().unwrap().unwrap();
    assert_eq!(saved.value, value);
    assert_eq!(saved.validator, Some(Validator::from("etag-3")));
}
