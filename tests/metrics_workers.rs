//! Feature `metrics`: the `circulation_trigger_workers` gauge follows the
//! worker threads of every scheduler, and is back to zero once they have
//! all exited. The worker threads record on their own threads, so this
//! binary installs the debugging recorder for the whole process (alone in
//! it: a process has one global recorder).

#![cfg(feature = "metrics")]

use circulation_trigger::{Scheduler, Trigger};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use std::time::{Duration, Instant};

#[test]
fn the_workers_gauge_returns_to_zero_after_shutdown() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this process");
    let workers = || {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find(|(key, ..)| key.key().name() == "circulation_trigger_workers")
            .map_or(0.0, |(.., value)| match value {
                DebugValue::Gauge(gauge) => gauge.into_inner(),
                other => panic!("{other:?}"),
            })
    };
    for round in 0..3 {
        let scheduler = Scheduler::builder().workers(2).build().unwrap();
        assert_eq!(workers(), 2.0, "round {round}: two workers started");
        let trigger = Trigger::bind(&scheduler, || None);
        trigger.fire_and_wait(Duration::from_secs(10)).unwrap();
        scheduler.shutdown();
        assert!(scheduler.await_termination(Duration::from_secs(10)));
        // The last worker may record its exit just after the scheduler
        // reports termination: wait for it, boundedly.
        let deadline = Instant::now() + Duration::from_secs(10);
        while workers() != 0.0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(workers(), 0.0, "round {round}: every worker exited");
    }
}
