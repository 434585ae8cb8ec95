//! Push-style metrics through the `metrics` facade, behind the `metrics`
//! feature. The library records them. The application installs a recorder or
//! an exporter, such as one for Prometheus or StatsD. Without the feature
//! every function here is an empty inline one, so call sites need no `cfg`.
//!
//! | name | kind | labels | what |
//! |---|---|---|---|
//! | `circulation_trigger_iterations_total` | counter | `trigger`, `outcome` | iterations ended: `completed`, `panicked`, `cancelled` |
//! | `circulation_trigger_fires_total` | counter | `trigger` | fires accepted (counted when an iteration ends) |
//! | `circulation_trigger_coalesced_fires_total` | counter | `trigger` | fires served together with others, or superseded |
//! | `circulation_trigger_refused_fires_total` | counter | `trigger`, `reason` | fires refused: `paused`, `shutdown` |
//! | `circulation_trigger_run_duration_seconds` | histogram | `trigger` | how long each iteration ran |
//! | `circulation_trigger_lateness_seconds` | histogram | `trigger` | start minus deadline of each timed run (a zero-delay re-arm is due at its return) |
//! | `circulation_trigger_triggers` | gauge | — | live triggers, in every scheduler of the process |
//! | `circulation_trigger_workers` | gauge | — | worker threads, in every scheduler of the process |
//! | `circulation_trigger_refresh_freshness` | gauge | `trigger` | a refresher's value: 0 none, 1 fresh, 2 stale, 3 expired |
//! | `circulation_trigger_refresh_transitions_total` | counter | `trigger`, `to` | changes of that state: `fresh`, `stale`, `expired` |
//! | `circulation_trigger_refresh_last_confirmed_seconds` | gauge | `trigger` | wall-clock time (Unix seconds) of the last good or "unchanged" fetch |
//!
//! Unnamed triggers are labelled `<unnamed>`. Their keys are static, with no
//! allocation and no hashing per call. So an unnamed trigger's iteration costs
//! next to nothing when no recorder is installed. A named trigger's label is
//! its name, copied per call.

#[cfg(feature = "metrics")]
use crate::context::Outcome;

/// The label of a trigger.
#[cfg(feature = "metrics")]
fn label(trigger: Option<&str>) -> String {
    trigger.unwrap_or("<unnamed>").to_owned()
}

/// An iteration of `trigger` ended with `outcome` after `ran_us`.
#[inline]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn iteration_ended(
    trigger: Option<&str>,
    outcome: crate::context::Outcome,
    ran_us: u64,
) {
    #[cfg(feature = "metrics")]
    {
        let seconds = ran_us as f64 / 1e6;
        let Some(name) = trigger else {
            // Static keys for the unnamed label, as the module docs explain.
            let iterations = match outcome {
                Outcome::Completed => {
                    metrics::counter!("circulation_trigger_iterations_total", "trigger" => "<unnamed>", "outcome" => "completed")
                }
                Outcome::Panicked => {
                    metrics::counter!("circulation_trigger_iterations_total", "trigger" => "<unnamed>", "outcome" => "panicked")
                }
                Outcome::Cancelled => {
                    metrics::counter!("circulation_trigger_iterations_total", "trigger" => "<unnamed>", "outcome" => "cancelled")
                }
                Outcome::StillRunning => {
                    metrics::counter!("circulation_trigger_iterations_total", "trigger" => "<unnamed>", "outcome" => "still_running")
                }
            };
            iterations.increment(1);
            metrics::histogram!("circulation_trigger_run_duration_seconds", "trigger" => "<unnamed>")
                .record(seconds);
            return;
        };
        let outcome = match outcome {
            Outcome::Completed => "completed",
            Outcome::Panicked => "panicked",
            Outcome::Cancelled => "cancelled",
            Outcome::StillRunning => "still_running",
        };
        metrics::counter!("circulation_trigger_iterations_total", "trigger" => name.to_owned(), "outcome" => outcome)
            .increment(1);
        metrics::histogram!("circulation_trigger_run_duration_seconds", "trigger" => name.to_owned())
            .record(seconds);
    }
}

/// `fires` more fires were accepted, `coalesced` more of them coalesced.
#[cfg(feature = "metrics")]
pub(crate) fn fires(trigger: Option<&str>, fires: u64, coalesced: u64) {
    if fires > 0 {
        match trigger {
            None => metrics::counter!("circulation_trigger_fires_total", "trigger" => "<unnamed>"),
            Some(name) => {
                metrics::counter!("circulation_trigger_fires_total", "trigger" => name.to_owned())
            }
        }
        .increment(fires);
    }
    if coalesced > 0 {
        match trigger {
            None => metrics::counter!("circulation_trigger_coalesced_fires_total", "trigger" => "<unnamed>"),
            Some(name) => metrics::counter!("circulation_trigger_coalesced_fires_total", "trigger" => name.to_owned()),
        }
        .increment(coalesced);
    }
}

/// A timed run of `trigger` started `late_us` after its deadline.
#[inline]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn lateness(trigger: Option<&str>, late_us: u32) {
    #[cfg(feature = "metrics")]
    match trigger {
        None => metrics::histogram!("circulation_trigger_lateness_seconds", "trigger" => "<unnamed>"),
        Some(name) => metrics::histogram!("circulation_trigger_lateness_seconds", "trigger" => name.to_owned()),
    }
    .record(f64::from(late_us) / 1e6);
}

/// A fire of `trigger` was refused for `reason`, which is `paused` or `shutdown`.
#[inline]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn refused(trigger: Option<&str>, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!("circulation_trigger_refused_fires_total", "trigger" => label(trigger), "reason" => reason)
        .increment(1);
}

/// `delta` is `1` when a trigger was bound and `-1` when one was dropped.
#[inline]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn triggers(delta: f64) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("circulation_trigger_triggers").increment(delta);
}

/// `delta` is `1` when a worker thread started and `-1` when one exited, in any scheduler.
#[inline]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn workers(delta: f64) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("circulation_trigger_workers").increment(delta);
}

/// A refresher's freshness changed to `to`. `code` is the gauge's number for it.
#[inline]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn freshness(trigger: Option<&str>, to: &'static str, code: u8) {
    #[cfg(feature = "metrics")]
    {
        metrics::gauge!("circulation_trigger_refresh_freshness", "trigger" => label(trigger))
            .set(f64::from(code));
        metrics::counter!("circulation_trigger_refresh_transitions_total", "trigger" => label(trigger), "to" => to)
            .increment(1);
    }
}

/// A refresher's value was confirmed at `unix_secs` on the wall clock.
#[inline]
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn confirmed(trigger: Option<&str>, unix_secs: f64) {
    #[cfg(feature = "metrics")]
    metrics::gauge!("circulation_trigger_refresh_last_confirmed_seconds", "trigger" => label(trigger))
        .set(unix_secs);
}
