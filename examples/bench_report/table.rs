//! The markdown table: one row per metric, one column per implementation,
//! each peer cell with its ratio to ours (peer ÷ ours).

use crate::peers::delay_queue::DelayQueueTimers;
use crate::peers::heap_timer::HeapTimer;
use crate::peers::ours::{Ours, OursMillisTick};
use crate::peers::stp::Stp;
use crate::peers::tokio_watch::TokioWatch;
use crate::peers::Peer;
use std::fmt::Write as _;

/// Column order of the table (index 0 is ours).
pub const COLUMNS: [&str; 6] = [
    Ours::NAME,
    OursMillisTick::NAME,
    TokioWatch::NAME,
    DelayQueueTimers::NAME,
    Stp::NAME,
    HeapTimer::NAME,
];
/// Column of our crate (default tick): the ratios' denominator.
pub const OURS: usize = 0;
/// Column of our crate with a 1 ms tick.
pub const OURS_MS: usize = 1;
/// Column of the tokio driver-task peer.
pub const TOKIO: usize = 2;
/// Column of the `DelayQueue` peer.
pub const DELAY_QUEUE: usize = 3;
/// Column of the scheduled-thread-pool peer.
pub const STP: usize = 4;
/// Column of the binary-heap timer thread.
pub const HEAP: usize = 5;

/// How a metric's numbers print.
#[derive(Debug, Clone, Copy)]
pub enum Unit {
    /// Nanoseconds.
    Nanos,
    /// Microseconds.
    Micros,
    /// Bytes.
    Bytes,
    /// A rate.
    PerSecond,
    /// Seconds.
    Seconds,
    /// A count: printed bare, no ratio.
    Count,
    /// A ratio of two figures of one column: printed as `2.70×`, no ratio.
    Times,
}

/// One metric across the implementations.
#[derive(Debug, Clone)]
pub struct Row {
    /// Scenario number (1–5).
    pub scenario: u8,
    /// What is measured.
    pub metric: String,
    /// The goal for ours, as text.
    pub goal: String,
    /// Whether ours meets the goal (`None`: no goal to check).
    pub met: Option<bool>,
    /// How the values print.
    pub unit: Unit,
    /// One value per column (`None`: does not apply / not measured).
    pub values: [Option<f64>; 6],
    /// Free text appended to a cell (e.g. "capped").
    pub notes: [&'static str; 6],
}

impl Row {
    /// An empty row.
    pub fn new(scenario: u8, metric: impl Into<String>, unit: Unit) -> Self {
        Self {
            scenario,
            metric: metric.into(),
            goal: String::new(),
            met: None,
            unit,
            values: [None; 6],
            notes: [""; 6],
        }
    }

    /// Sets the goal text and whether ours meets it.
    pub fn goal(mut self, goal: impl Into<String>, met: Option<bool>) -> Self {
        self.goal = goal.into();
        self.met = met;
        self
    }

    /// Sets one column's value.
    pub fn set(mut self, column: usize, value: f64) -> Self {
        self.values[column] = Some(value);
        self
    }

    /// Peer ÷ ours for `column`, if both are known.
    pub fn ratio(&self, column: usize) -> Option<f64> {
        Some(self.values[column]? / self.values[OURS]?)
    }
}

/// Renders `rows` as a markdown table.
pub fn render(rows: &[Row]) -> String {
    let mut out = String::from("| # | metric | goal | met | ");
    out += &COLUMNS.join(" | ");
    out += " |\n|---|---|---|---|";
    out += &"---:|".repeat(COLUMNS.len());
    out.push('\n');
    for row in rows {
        let met = match row.met {
            Some(true) => "✅",
            Some(false) => "❌",
            None => "",
        };
        let _ = write!(
            out,
            "| {} | {} | {} | {met} |",
            row.scenario, row.metric, row.goal
        );
        for column in 0..COLUMNS.len() {
            let cell = match row.values[column] {
                None => "—".to_string(),
                Some(value) => {
                    let mut cell = format_value(value, row.unit);
                    if column != OURS && !matches!(row.unit, Unit::Count | Unit::Times) {
                        cell += &format_ratio(row.values[OURS].unwrap_or(f64::NAN), value);
                    }
                    cell + row.notes[column]
                }
            };
            let _ = write!(out, " {cell} |");
        }
        out.push('\n');
    }
    out
}

fn format_ratio(ours: f64, peer: f64) -> String {
    // Below display precision, ours counts as zero.
    if ours.abs() < 0.005 {
        return if peer.abs() < 0.005 { " (=)" } else { " (∞)" }.to_string();
    }
    let ratio = peer / ours;
    if ratio.abs() >= 100.0 {
        format!(" ({ratio:.0}×)")
    } else if ratio.abs() >= 10.0 {
        format!(" ({ratio:.1}×)")
    } else {
        format!(" ({ratio:.2}×)")
    }
}

/// `1234567.0` → `"1,234,567"`.
fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if value < 0.0 && digits != "0" {
        out.insert(0, '-');
    }
    out
}

fn format_value(value: f64, unit: Unit) -> String {
    if value.is_nan() {
        return "n/a".to_string();
    }
    match unit {
        Unit::Nanos if value < 100.0 => format!("{value:.1} ns"),
        Unit::Nanos => format!("{} ns", thousands(value)),
        Unit::Micros => format!("{} µs", thousands(value)),
        Unit::Bytes if value.abs() < 10.0 => format!("{value:.2} B"),
        Unit::Bytes if value.abs() < 1e5 => format!("{value:.0} B"),
        Unit::Bytes => format!("{:.1} MB", value / 1e6),
        Unit::PerSecond => format!("{}/s", thousands(value)),
        Unit::Seconds => format!("{value:.2} s"),
        Unit::Count => thousands(value),
        Unit::Times => format!("{value:.2}×"),
    }
}
