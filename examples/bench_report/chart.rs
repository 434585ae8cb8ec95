//! The SVG chart of scenario 3: the lateness distribution of every peer as
//! a cumulative curve (x: `start − deadline`, log scale; y: share of runs).

use crate::lateness::Lateness;
use plotters::prelude::*;
use std::path::Path;

const COLORS: [RGBColor; 5] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
];

/// Writes the chart of `series` (name, samples pooled over `rounds`) to
/// `path`.
pub fn write_svg(
    path: &Path,
    series: &[(&str, &Lateness)],
    rounds: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let max = series
        .iter()
        .filter_map(|(_, l)| l.samples_us.last().copied())
        .fold(10.0f64, f64::max);
    let root = SVGBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Timer lateness: 2,000 triggers at random delays in [5 ms, 500 ms], × {rounds} rounds"
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((1.0f64..max * 1.5).log_scale(), 0.0f64..1.0)?;
    chart
        .configure_mesh()
        .x_desc("start − deadline (µs, log scale)")
        .y_desc("share of runs started (cumulative)")
        .x_label_formatter(&|us| format!("{us:.0}"))
        .draw()?;
    for (i, (name, lateness)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let n = lateness.samples_us.len().max(1) as f64;
        let points = lateness
            .samples_us
            .iter()
            .enumerate()
            .map(|(k, &us)| (us.max(1.0), (k + 1) as f64 / n));
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(format!(
                "{name}: p50 {:.0} µs, p99 {:.0} µs",
                lateness.quantile(0.5),
                lateness.quantile(0.99)
            ))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
