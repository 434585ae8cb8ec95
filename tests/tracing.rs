//! The optional `tracing` integration: a span per iteration (trigger name
//! and version), events for panics, coalesced fires and shutdown. Runs with
//! `--features tracing` (the README's test command enables all features).
#![cfg(feature = "tracing")]

use circulation_trigger::{Scheduler, Trigger};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Records span names with their level and fields, fields recorded
/// later, entries into spans, and event messages with the span they came
/// in.
#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<String>>>, Arc<Mutex<Vec<u64>>>);

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }
}

impl Subscriber for Collector {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut log = self.0.lock().unwrap();
        let id = log.len() as u64 + 1;
        let mut fields = Fields(format!(
            "span {} id={id} level={}",
            span.metadata().name(),
            span.metadata().level()
        ));
        span.record(&mut fields);
        log.push(fields.0);
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut fields = Fields(format!("record id={}", span.into_u64()));
        values.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let inside = self.1.lock().unwrap().last().copied().unwrap_or(0);
        let mut fields = Fields(format!("event {} in={inside}", event.metadata().level()));
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
    fn enter(&self, span: &Id) {
        self.1.lock().unwrap().push(span.into_u64());
        let line = format!("enter id={}", span.into_u64());
        self.0.lock().unwrap().push(line);
    }
    fn exit(&self, _: &Id) {
        self.1.lock().unwrap().pop();
    }
}

#[test]
fn iterations_panics_coalesced_fires_and_shutdown_are_traced() {
    let collector = Collector::default();
    let log = collector.0.clone();
    tracing::subscriber::with_default(collector, || {
        let sim = Scheduler::builder().build_virtual();
        let mut runs = 0;
        let trigger = Trigger::builder(&sim)
            .name("traced")
            .start_version(41)
            .bind(move || {
                runs += 1;
                if runs == 2 {
                    panic!("second run fails");
                }
                Some(Duration::from_secs(1))
            });
        trigger.fire().unwrap();
        trigger.fire().unwrap(); // coalesced into the queued run
        sim.advance(Duration::from_secs(1));
        trigger.fire_after(Duration::from_secs(60)).unwrap();
        let _ = sim.shutdown_now();
    });
    let log = log.lock().unwrap().join("\n");
    assert!(
        log.contains("level=DEBUG trigger=\"traced\" version=43"),
        "{log}"
    );
    assert!(
        log.contains("event TRACE") && log.contains("fire coalesced"),
        "{log}"
    );
    assert!(
        log.contains("event ERROR") && log.contains("second run fails"),
        "{log}"
    );
    assert!(
        log.contains("scheduler shut down") && log.contains("discarded=1"),
        "{log}"
    );
}

#[test]
fn dropping_the_last_handle_with_a_run_pending_is_reported() {
    let collector = Collector::default();
    let log = collector.0.clone();
    tracing::subscriber::with_default(collector, || {
        let sim = Scheduler::builder().build_virtual();
        // The mistake: the handle is a temporary, dropped at the `;`.
        Trigger::builder(&sim)
            .name("forgotten")
            .bind(|| None)
            .fire_after(Duration::from_secs(1))
            .unwrap();
        // Kept until it ran, then dropped to stop it while armed for its
        // next period: nothing to report.
        let kept = Trigger::builder(&sim)
            .name("kept")
            .bind(|| Some(Duration::from_secs(60)));
        kept.fire().unwrap();
        sim.advance(Duration::from_secs(2));
        drop(kept);
    });
    let log = log.lock().unwrap();
    let warnings: Vec<_> = log.iter().filter(|l| l.contains("last handle")).collect();
    assert_eq!(warnings.len(), 1, "{log:#?}");
    assert!(warnings[0].contains("forgotten"), "{warnings:?}");
}

/// The iteration span shows at DEBUG, with the outcome and, for a timed
/// run, the lateness recorded on it.
#[test]
fn an_iteration_span_carries_version_lateness_and_outcome() {
    let collector = Collector::default();
    let log = collector.0.clone();
    tracing::subscriber::with_default(collector, || {
        let sim = Scheduler::builder().build_virtual();
        let trigger = Trigger::builder(&sim).name("timed").bind(|| None);
        trigger.fire_after(Duration::from_secs(1)).unwrap();
        sim.advance(Duration::from_secs(2));
    });
    let log = log.lock().unwrap();
    let span = log
        .iter()
        .find(|l| l.starts_with("span iteration") && l.contains("\"timed\""))
        .unwrap_or_else(|| panic!("{log:#?}"));
    assert!(
        span.contains("level=DEBUG") && span.contains("version=1"),
        "{span}"
    );
    let id = span.split_whitespace().nth(2).unwrap(); // "id=N"
    assert!(
        log.iter()
            .any(|l| l == &format!("record {id} lateness_us=0")),
        "{log:#?}"
    );
    assert!(
        log.iter()
            .any(|l| l == &format!("record {id} outcome=Completed")),
        "{log:#?}"
    );
}

/// An async iteration's span is entered at every poll: an event the
/// future emits after an `.await` is inside it.
#[cfg(feature = "tokio")]
#[test]
fn an_async_iteration_is_instrumented_across_its_awaits() {
    let collector = Collector::default();
    let log = collector.0.clone();
    tracing::subscriber::with_default(collector, || {
        // On virtual time `advance` polls the future, on this thread.
        let sim = Scheduler::builder().build_virtual();
        let trigger = Trigger::builder(&sim)
            .name("awaiting")
            .bind_async(|| async {
                tokio::task::yield_now().await;
                tokio::task::yield_now().await;
                tracing::info!("after two awaits");
                None
            });
        trigger.fire().unwrap();
        sim.advance(Duration::ZERO);
        assert_eq!(trigger.stats().iterations, 1);
    });
    let log = log.lock().unwrap();
    let span = log
        .iter()
        .find(|l| l.starts_with("span iteration") && l.contains("\"awaiting\""))
        .unwrap_or_else(|| panic!("{log:#?}"));
    let id = span
        .split_whitespace()
        .nth(2)
        .unwrap()
        .trim_start_matches("id=");
    let entries = log
        .iter()
        .filter(|l| **l == format!("enter id={id}"))
        .count();
    assert!(entries >= 3, "entered at every poll: {entries}\n{log:#?}");
    assert!(
        log.iter()
            .any(|l| l.contains("after two awaits") && l.contains(&format!("in={id}"))),
        "{log:#?}"
    );
    assert!(
        log.iter()
            .any(|l| *l == format!("record id={id} outcome=Completed")),
        "{log:#?}"
    );
}

/// An async timed run's span carries its lateness, as a sync one's does:
/// the span is made as the iteration starts and handed to its future.
#[cfg(feature = "tokio")]
#[test]
fn an_async_timed_iteration_span_carries_its_lateness() {
    let collector = Collector::default();
    let log = collector.0.clone();
    tracing::subscriber::with_default(collector, || {
        let sim = Scheduler::builder().build_virtual();
        let trigger = Trigger::builder(&sim)
            .name("async-timed")
            .bind_async(|| async {
                tokio::task::yield_now().await;
                None
            });
        trigger.fire_after(Duration::from_secs(1)).unwrap();
        sim.advance(Duration::from_secs(2));
        assert_eq!(trigger.stats().iterations, 1);
    });
    let log = log.lock().unwrap();
    let spans: Vec<_> = log
        .iter()
        .filter(|l| l.starts_with("span iteration") && l.contains("\"async-timed\""))
        .collect();
    assert_eq!(spans.len(), 1, "one span per iteration: {log:#?}");
    let id = spans[0].split_whitespace().nth(2).unwrap(); // "id=N"
    assert!(
        log.iter()
            .any(|l| l == &format!("record {id} lateness_us=0")),
        "{log:#?}"
    );
    assert!(
        log.iter()
            .any(|l| l == &format!("record {id} outcome=Completed")),
        "{log:#?}"
    );
}

#[test]
fn each_change_of_a_refreshers_freshness_is_an_event() {
    use circulation_trigger::Refresh;
    let collector = Collector::default();
    let log = collector.0.clone();
    tracing::subscriber::with_default(collector, || {
        let sim = Scheduler::builder().build_virtual();
        let mut up = true;
        let config = Refresh::builder(&sim)
            .trigger(|t| t.name("config"))
            .every(Duration::from_secs(30))
            .stale_after(Duration::from_secs(60))
            .bind(move || {
                let fetched = if up { Ok(1) } else { Err("down") };
                up = false;
                fetched
            });
        config.refresh_now().unwrap();
        sim.advance(Duration::from_secs(60));
    });
    let log = log.lock().unwrap();
    let changes: Vec<&String> = log
        .iter()
        .filter(|line| line.contains("refresh freshness changed"))
        .collect();
    assert_eq!(changes.len(), 2, "{changes:#?}");
    assert!(
        changes[0].contains("event INFO") && changes[0].contains("to=\"fresh\""),
        "{changes:#?}"
    );
    assert!(
        changes[1].contains("event WARN") && changes[1].contains("to=\"stale\""),
        "{changes:#?}"
    );
    assert!(changes[1].contains("\"config\""), "{changes:#?}");
}
