//! The exact shutdown report a user gets.
//!
//! It holds every run a shutdown discarded and every iteration it let finish. It is plain
//! public data.

use crate::context::Outcome;
use std::fmt;
use std::time::Duration;

/// A run that was armed when shutdown began, and was discarded.
///
/// It may also be the next run that an iteration in flight then asked for as it ended.
/// That is the delay its task returned, or a re-run its fires reserved. Shutdown discards
/// it too.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DiscardedRun {
    pub(super) trigger: Option<String>,
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub(super) due_in: Duration,
}

impl DiscardedRun {
    /// The trigger's name, if it has one.
    pub fn trigger(&self) -> Option<&str> {
        self.trigger.as_deref()
    }

    /// How long after shutdown began the run was due. `ZERO` means due at once.
    pub fn due_in(&self) -> Duration {
        self.due_in
    }
}

/// An iteration that was running when shutdown began.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct InFlightRun {
    pub(super) trigger: Option<String>,
    pub(super) outcome: Outcome,
}

impl InFlightRun {
    /// The trigger's name, if it has one.
    pub fn trigger(&self) -> Option<&str> {
        self.trigger.as_deref()
    }

    /// How the iteration ended, or that it had not yet.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }
}

/// Exactly what a shutdown discarded and what it let finish.
///
/// It lists every trigger that had an armed run, with its deadline, or whose iteration in
/// flight asked for one as it ended. It lists every iteration in flight with its outcome.
/// There are no false positives and no omissions. A fire racing the shutdown is either
/// refused to its caller or listed here.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ShutdownReport {
    pub(super) discarded: Vec<DiscardedRun>,
    pub(super) in_flight: Vec<InFlightRun>,
}

impl ShutdownReport {
    /// Armed runs that were discarded, in no particular order.
    pub fn discarded(&self) -> &[DiscardedRun] {
        &self.discarded
    }

    /// Iterations that were running when shutdown began.
    pub fn in_flight(&self) -> &[InFlightRun] {
        &self.in_flight
    }
}

fn name(trigger: Option<&str>) -> &str {
    trigger.unwrap_or("<unnamed>")
}

impl fmt::Display for ShutdownReport {
    /// One summary line, then one line per discarded run and per iteration in flight.
    ///
    /// The lines are separated, with no newline at the end. So `println!("{report}")` prints
    /// no blank line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "shutdown report: {} armed run(s) discarded, {} iteration(s) in flight",
            self.discarded.len(),
            self.in_flight.len()
        )?;
        for run in &self.discarded {
            write!(
                f,
                "\n  discarded  {:<24} due in {:?}",
                name(run.trigger()),
                run.due_in
            )?;
        }
        for run in &self.in_flight {
            write!(
                f,
                "\n  in flight  {:<24} {:?}",
                name(run.trigger()),
                run.outcome
            )?;
        }
        Ok(())
    }
}
