//! Feature `serde`: a config file (JSON here) sets a trigger's policies,
//! its back-off and its phase, with durations in human form; statistics
//! and the shutdown report serialize for a status endpoint.

#![cfg(feature = "serde")]

use circulation_trigger::{
    policy::{PhaseKeeper, RetryBackoff, TriggerPolicies},
    Refresh, Scheduler, Trigger,
};
use serde::Deserialize;
use std::time::Duration;

/// A service's config file: its refresh, and the trigger's policies.
#[derive(Deserialize)]
struct ServiceConfig {
    #[serde(with = "humantime_serde")]
    period: Duration,
    retry: RetryBackoff,
    phase: PhaseKeeper,
    name: String,
    trigger: TriggerPolicies,
}

const CONFIG: &str = r#"{
    "period": "30s",
    "retry": { "initial": "1s", "max": "1m", "max_retries": 3 },
    "phase": { "period": "1m", "offset": "15s", "min_gap": "10s" },
    "name": "config",
    "trigger": {
        "min_interval": "2s",
        "debounce": { "window": "500ms", "max_wait": "5s" },
        "stuck_after": "1m 30s",
        "on_panic": { "Retry": { "initial": "2s", "max": "10s" } }
    }
}"#;

#[test]
fn a_config_file_drives_a_running_refresh() {
    let config: ServiceConfig = serde_json::from_str(CONFIG).unwrap();
    assert_eq!(config.phase.period(), Duration::from_secs(60));
    let sim = Scheduler::builder().build_virtual();
    let mut answers = vec![Ok(2u32), Err("down"), Ok(1)].into_iter();
    let refresh = Refresh::builder(&sim)
        .every(config.period)
        .retry(config.retry)
        .trigger(|t| t.name(&config.name).policies(config.trigger.clone()))
        .bind(move || answers.next().unwrap_or(Ok(9)));
    assert_eq!(refresh.trigger().name(), Some("config"));
    // Debounced by the file's 500 ms window.
    for _ in 0..10 {
        refresh.refresh_now().unwrap();
    }
    sim.advance(Duration::from_millis(499));
    assert_eq!(refresh.refreshes(), 0);
    sim.advance(Duration::from_millis(1));
    assert_eq!(refresh.get().as_deref(), Some(&2));
    // The file's 30 s period, then its 1 s back-off after a failure —
    // held to the file's 2 s minimum interval.
    sim.advance(Duration::from_secs(30));
    assert_eq!(refresh.failures(), 1);
    sim.advance(Duration::from_secs(1));
    assert_eq!(refresh.get().as_deref(), Some(&2), "within the cooldown");
    sim.advance(Duration::from_secs(1));
    assert_eq!(refresh.get().as_deref(), Some(&1));
    assert_eq!(refresh.refreshes(), 2);

    // The phase from the file: slots at 15 s past each minute.
    assert_eq!(
        config.phase.first_delay_from(Duration::from_secs(5)),
        Duration::from_secs(10)
    );
}

#[test]
fn bad_config_is_a_clear_error() {
    let unknown = serde_json::from_str::<TriggerPolicies>(r#"{ "min_intervall": "1s" }"#);
    assert!(unknown.unwrap_err().to_string().contains("min_intervall"));
    let not_a_duration =
        serde_json::from_str::<RetryBackoff>(r#"{ "initial": "soon", "max": "1m" }"#);
    assert!(not_a_duration.is_err());
    // Two ways to choose the phase: one must go.
    let both = serde_json::from_str::<PhaseKeeper>(
        r#"{ "period": "1m", "offset": "15s", "random_offset": true }"#,
    );
    assert!(both.unwrap_err().to_string().contains("random_offset"));
    let random: PhaseKeeper =
        serde_json::from_str(r#"{ "period": "1m", "random_offset": true }"#).unwrap();
    assert_eq!(random.period(), Duration::from_secs(60));
    // Every field of the policies is optional.
    let empty: TriggerPolicies = serde_json::from_str("{}").unwrap();
    assert_eq!(
        format!("{empty:?}"),
        format!("{:?}", TriggerPolicies::new())
    );
}

#[test]
fn statistics_and_the_shutdown_report_serialize_for_a_status_endpoint() {
    let sim = Scheduler::builder().build_virtual();
    let trigger = Trigger::builder(&sim)
        .name("hourly")
        .bind(|| Some(Duration::from_secs(3_600)));
    trigger.fire_after(Duration::from_secs(90)).unwrap();
    sim.advance(Duration::from_secs(90));
    let stats = serde_json::to_value(trigger.stats()).unwrap();
    assert_eq!(stats["name"], "hourly");
    assert_eq!(stats["iterations"], 1);
    assert_eq!(stats["last_start"], "1m 30s");
    assert_eq!(stats["state"]["Armed"], "1h 1m 30s");
    let all = serde_json::to_value(sim.stats()).unwrap();
    assert_eq!(all["triggers"][0]["name"], "hourly");

    let report = sim.shutdown_now();
    let report = serde_json::to_value(&report).unwrap();
    assert_eq!(report["discarded"][0]["trigger"], "hourly");
    assert_eq!(report["discarded"][0]["due_in"], "1h");
}

#[test]
fn a_refreshers_statistics_serialize_for_a_status_endpoint() {
    let sim = Scheduler::builder().build_virtual();
    let config = circulation_trigger::Refresh::builder(&sim)
        .every(Duration::from_secs(3600))
        .stale_after(Duration::from_secs(60))
        .bind(|| Ok::<_, String>("v1"));
    config.refresh_now().unwrap();
    sim.advance(Duration::from_secs(90));
    let stats = serde_json::to_value(config.stats()).unwrap();
    assert_eq!(stats["freshness"], "Stale");
    assert_eq!(stats["age"], "1m 30s");
    assert_eq!(stats["refreshes"], 1);
    assert!(stats["last_confirmed"].as_str().unwrap().ends_with('Z'));
}
