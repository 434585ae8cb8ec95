//! Feature `metrics`: exact counts through `metrics-util`'s debugging
//! recorder on virtual time, and a real scrape of a Prometheus exporter
//! over HTTP on 127.0.0.1.

#![cfg(feature = "metrics")]

mod common;

use circulation_trigger::{FireError, Scheduler, Trigger};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::time::Duration;

/// `name{labels}` → value: counters and gauges as numbers, histograms as
/// their sample count.
fn readings(recorder: &DebuggingRecorder) -> HashMap<String, f64> {
    recorder
        .snapshotter()
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let name = format!("{}{{{}}}", key.name(), labels.join(","));
            let value = match value {
                DebugValue::Counter(n) => n as f64,
                DebugValue::Gauge(g) => g.into_inner(),
                DebugValue::Histogram(samples) => samples.len() as f64,
            };
            (name, value)
        })
        .collect()
}

/// Five fires, a timed run, a panicking timed run and a refused fire, on a
/// trigger named `name` (or unnamed): every metric counted exactly, under
/// the label `label`.
fn counted_exactly(name: Option<&str>, label: &str) {
    common::quiet_panics();
    let recorder = DebuggingRecorder::new();
    let metrics = metrics::with_local_recorder(&recorder, || {
        let sim = Scheduler::builder().build_virtual();
        let mut runs = 0;
        let task = move || {
            runs += 1;
            if runs == 3 {
                panic!("boom: the third run fails");
            }
            Some(Duration::from_secs(10))
        };
        let trigger = match name {
            Some(name) => Trigger::builder(&sim).name(name).bind(task),
            None => Trigger::bind(&sim, task),
        };
        for _ in 0..5 {
            trigger.fire().unwrap(); // 5 fires, one run: 4 coalesced
        }
        sim.advance(Duration::ZERO);
        sim.advance(Duration::from_secs(20)); // two timed runs, the second panics
        trigger.pause();
        assert_eq!(trigger.fire(), Err(FireError::Paused));
        readings(&recorder)
    });
    let get = |name: &str| {
        metrics
            .get(name)
            .copied()
            .unwrap_or_else(|| panic!("{name}: {metrics:#?}"))
    };
    let counted = |metric: &str, other: &str| {
        let labels = match other {
            "" => format!("trigger={label}"),
            // Sorted: `outcome` and `reason` come before `trigger`.
            other => format!("{other},trigger={label}"),
        };
        get(&format!("circulation_trigger_{metric}{{{labels}}}"))
    };
    assert_eq!(counted("iterations_total", "outcome=completed"), 2.0);
    assert_eq!(counted("iterations_total", "outcome=panicked"), 1.0);
    assert_eq!(counted("fires_total", ""), 5.0);
    assert_eq!(counted("coalesced_fires_total", ""), 4.0);
    assert_eq!(counted("refused_fires_total", "reason=paused"), 1.0);
    assert_eq!(counted("run_duration_seconds", ""), 3.0);
    // The two runs the timer started (the first was fired, not timed).
    assert_eq!(counted("lateness_seconds", ""), 2.0);
    assert_eq!(get("circulation_trigger_triggers{}"), 1.0);
}

/// `coalesced_fires_total` agrees with `TriggerStats::coalesced_fires`: a
/// fire still waiting for its run at an iteration's end is not counted as
/// coalesced then (it used to be, and again once served).
#[test]
fn coalesced_fires_are_counted_once_whenever_their_run_comes() {
    let recorder = DebuggingRecorder::new();
    let (metrics, stats) = metrics::with_local_recorder(&recorder, || {
        let sim = Scheduler::builder().build_virtual();
        let slot: std::sync::Arc<std::sync::OnceLock<circulation_trigger::WeakTrigger>> =
            Default::default();
        let s = slot.clone();
        let mut runs = 0;
        let trigger = Trigger::builder(&sim).name("refiring").bind(move || {
            runs += 1;
            // Every odd run fires its own trigger: a follow-up pending as
            // the run ends, served by a run of its own.
            if runs % 2 == 1 {
                s.get().unwrap().upgrade().unwrap().fire().unwrap();
            }
            None
        });
        slot.set(trigger.downgrade()).unwrap();
        for _ in 0..10 {
            trigger.fire().unwrap();
            sim.advance(Duration::from_secs(1));
        }
        // Three fires into one pending run: two coalesced (that run, the
        // 21st, fires itself once more).
        for _ in 0..3 {
            trigger.fire().unwrap();
        }
        sim.advance(Duration::from_secs(1));
        (readings(&recorder), trigger.stats())
    });
    assert_eq!(stats.fires, 24);
    assert_eq!(stats.iterations, 22);
    assert_eq!(stats.coalesced_fires, 2);
    let get = |name: &str| metrics.get(name).copied().unwrap_or(0.0);
    assert_eq!(
        get("circulation_trigger_fires_total{trigger=refiring}"),
        24.0
    );
    assert_eq!(
        get("circulation_trigger_coalesced_fires_total{trigger=refiring}"),
        2.0,
        "{metrics:#?}"
    );
}

#[test]
fn iterations_fires_refusals_durations_and_lateness_are_counted_exactly() {
    counted_exactly(Some("counted"), "counted");
}

#[test]
fn an_unnamed_trigger_is_counted_under_its_label() {
    // Its keys are static (no allocation per iteration): the same counts.
    counted_exactly(None, "<unnamed>");
}

/// A Prometheus exporter on a free loopback port, scraped for real.
#[test]
fn a_prometheus_scrape_shows_the_trigger() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (recorder, exporter) = {
        let _guard = runtime.enter();
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(([127, 0, 0, 1], port))
            .build()
            .unwrap()
    };
    let _server = runtime.spawn(exporter);
    metrics::with_local_recorder(&recorder, || {
        let sim = Scheduler::builder().build_virtual();
        let trigger = Trigger::builder(&sim).name("scraped").bind(|| None);
        for _ in 0..3 {
            trigger.fire().unwrap();
            sim.advance(Duration::ZERO);
        }
    });
    // The exporter serves on this runtime's thread: scrape from another.
    let scrape = std::thread::spawn(move || {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.set_read_timeout(Some(common::PATIENCE)).unwrap();
        write!(
            stream,
            "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut body = String::new();
        stream.read_to_string(&mut body).unwrap();
        body
    });
    let body = runtime.block_on(async {
        loop {
            if scrape.is_finished() {
                break scrape.join().unwrap();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(
        body.contains(
            r#"circulation_trigger_iterations_total{trigger="scraped",outcome="completed"} 3"#
        ),
        "{body}"
    );
    assert!(
        body.contains("circulation_trigger_run_duration_seconds"),
        "{body}"
    );
}

#[test]
fn a_refreshers_freshness_and_last_confirmation_are_exported_as_they_change() {
    use circulation_trigger::Refresh;
    let recorder = DebuggingRecorder::new();
    // A snapshot drains what it reads: one, at the end.
    let (late, wall) = metrics::with_local_recorder(&recorder, || {
        let sim = Scheduler::builder().build_virtual();
        let mut up = true;
        let config = Refresh::builder(&sim)
            .trigger(|t| t.name("config"))
            .every(Duration::from_secs(30))
            .stale_after(Duration::from_secs(60))
            .expire_after(Duration::from_secs(120))
            .bind(move || {
                let fetched = if up { Ok(1) } else { Err("down") };
                up = false;
                fetched
            });
        config.refresh_now().unwrap();
        sim.advance(Duration::from_secs(120));
        let wall = config.stats().last_confirmed.unwrap();
        (readings(&recorder), wall)
    });
    let gauge = "circulation_trigger_refresh_freshness{trigger=config}";
    let to = |state: &str| {
        format!("circulation_trigger_refresh_transitions_total{{to={state},trigger=config}}")
    };
    assert_eq!(late[gauge], 3.0, "expired, with nobody reading it");
    let changes = (late[&to("fresh")], late[&to("stale")], late[&to("expired")]);
    assert_eq!(changes, (1.0, 1.0, 1.0));
    let confirmed = late["circulation_trigger_refresh_last_confirmed_seconds{trigger=config}"];
    let expected = wall
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!(
        (confirmed - expected).abs() < 1e-3,
        "{confirmed} vs {expected}"
    );
}
