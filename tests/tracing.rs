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

/// Records span names with their fields, and event messages.
#[derive(Clone, Default)]
struct Collector(Arc<Mutex<Vec<String>>>);

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
        let mut fields = Fields(format!("span {}", span.metadata().name()));
        span.record(&mut fields);
        let mut log = self.0.lock().unwrap();
        log.push(fields.0);
        Id::from_u64(log.len() as u64)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields(format!("event {}", event.metadata().level()));
        event.record(&mut fields);
        self.0.lock().unwrap().push(fields.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
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
        log.contains("span iteration trigger=\"traced\" version=43"),
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
        // Kept until it ran: nothing to report.
        let kept = Trigger::builder(&sim).name("kept").bind(|| None);
        kept.fire().unwrap();
        sim.advance(Duration::from_secs(2));
        drop(kept);
    });
    let log = log.lock().unwrap();
    let warnings: Vec<_> = log.iter().filter(|l| l.contains("last handle")).collect();
    assert_eq!(warnings.len(), 1, "{log:#?}");
    assert!(warnings[0].contains("forgotten"), "{warnings:?}");
}
