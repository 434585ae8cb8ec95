//! What the Redis fleet examples (`fleet_redis.rs`, `fleet_faults.rs`)
//! share: the load as Redis counts it, its peak/mean over judged windows,
//! and an SVG of load per bucket.

#![allow(dead_code)]

use std::fmt::Write as _;
use std::time::Duration;

/// `HGETALL` calls the server has served so far (`INFO commandstats`).
pub fn hgetall_calls(con: &mut redis::Connection) -> Option<u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).ok()?;
    Some(
        info.lines()
            .find_map(|line| line.strip_prefix("cmdstat_hgetall:calls="))
            .and_then(|rest| rest.split(',').next())
            .and_then(|calls| calls.parse().ok())
            .unwrap_or(0),
    )
}

/// (peak, mean, peak / mean) of the load per second in `buckets[from..to]`
/// (each `bucket` long), judged over windows of `judged` buckets: with a
/// few hundred clients a single bucket holds too few calls to tell a wave
/// from noise.
pub fn peak_over_mean(
    buckets: &[u64],
    from: usize,
    to: usize,
    judged: usize,
    bucket: Duration,
) -> (f64, f64, f64) {
    let to = to.min(buckets.len());
    let windows: Vec<u64> = buckets[from.min(to)..to]
        .chunks_exact(judged)
        .map(|w| w.iter().sum())
        .collect();
    let per_second = 1.0 / (bucket.as_secs_f64() * judged as f64);
    let mean = windows.iter().sum::<u64>() as f64 / windows.len().max(1) as f64;
    let peak = windows.iter().copied().max().unwrap_or(0) as f64;
    (
        peak * per_second,
        mean * per_second,
        peak / mean.max(f64::MIN_POSITIVE),
    )
}

const W: f64 = 820.0;
const H: f64 = 380.0;
const LEFT: f64 = 60.0;
const BOTTOM: f64 = 40.0;

/// An SVG chart of calls per second over time.
pub struct Chart {
    out: String,
    span_s: f64,
    max: f64,
    bucket: Duration,
}

impl Chart {
    /// A chart `span_s` seconds wide whose largest bucket holds
    /// `max_count` calls, with its title, grid and time axis.
    pub fn new(title: &str, span_s: f64, max_count: u64, bucket: Duration) -> Self {
        let mut chart = Chart {
            out: String::new(),
            span_s,
            max: max_count.max(1) as f64,
            bucket,
        };
        let _ = writeln!(
            chart.out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="16" text-anchor="middle" font-size="14">{title}</text>"#,
            W / 2.0
        );
        let per_second = 1.0 / bucket.as_secs_f64();
        for step in 0..=4 {
            let q = chart.max * step as f64 / 4.0;
            let y = chart.y(q);
            let _ = writeln!(
                chart.out,
                r##"<line x1="{LEFT}" x2="{}" y1="{y}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{:.0}</text>"##,
                W - 20.0,
                LEFT - 6.0,
                y + 4.0,
                q * per_second,
            );
        }
        for second in (0..=span_s as u64).step_by(3) {
            let x = chart.x(second as f64);
            let _ = writeln!(
                chart.out,
                r#"<text x="{x}" y="{}" text-anchor="middle">{second} s</text>"#,
                H - BOTTOM + 16.0
            );
        }
        chart
    }

    fn x(&self, s: f64) -> f64 {
        LEFT + s / self.span_s * (W - LEFT - 20.0)
    }

    fn y(&self, q: f64) -> f64 {
        H - BOTTOM - q / self.max * (H - BOTTOM - 80.0)
    }

    /// A grey band from `from_s` to `to_s`, labelled.
    pub fn shade(&mut self, from_s: f64, to_s: f64, label: &str) {
        let (x0, x1) = (self.x(from_s), self.x(to_s));
        let _ = writeln!(
            self.out,
            r##"<rect x="{x0}" y="24" width="{}" height="{}" fill="#f2f2f2"/><text x="{}" y="{}" text-anchor="middle" fill="#777">{label}</text>"##,
            x1 - x0,
            H - BOTTOM - 24.0,
            (x0 + x1) / 2.0,
            H - BOTTOM - 6.0,
        );
    }

    /// The calls of each bucket, as a line (`dash`: extra SVG attributes).
    pub fn line(&mut self, buckets: &[u64], color: &str, dash: &str) {
        let points: Vec<String> = buckets
            .iter()
            .enumerate()
            .map(|(i, &q)| {
                let t = (i as f64 + 0.5) * self.bucket.as_secs_f64();
                format!("{:.1},{:.1}", self.x(t), self.y(q as f64))
            })
            .collect();
        let _ = writeln!(
            self.out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="1.5"{dash} points="{}"/>"#,
            points.join(" ")
        );
    }

    /// The `row`th legend entry.
    pub fn legend(&mut self, row: usize, color: &str, text: &str) {
        let ly = 40.0 + 16.0 * row as f64;
        let _ = writeln!(
            self.out,
            r#"<rect x="{}" y="{}" width="14" height="4" fill="{color}"/><text x="{}" y="{ly}">{text}</text>"#,
            LEFT + 20.0,
            ly - 4.0,
            LEFT + 40.0,
        );
    }

    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        self.out
    }
}
