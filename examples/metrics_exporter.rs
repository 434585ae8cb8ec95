//! The crate's metrics (feature `metrics`) served to Prometheus: the
//! application installs `metrics-exporter-prometheus` as the global
//! recorder, listening on 127.0.0.1; the triggers record through the
//! `metrics` facade. Runs two triggers for a while, then scrapes its own
//! endpoint and prints the crate's lines.
//!
//! ```sh
//! cargo run --release --features metrics --example metrics_exporter -- --run-for 2 --port 9898
//! # meanwhile, from another shell: curl -s 127.0.0.1:9898/metrics
//! ```

use circulation_trigger::{Scheduler, Trigger};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (run_for, port) = parse_args()?;
    // Spawns the HTTP listener on a thread of its own and installs the
    // recorder for the whole process.
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(([127, 0, 0, 1], port))
        .install()?;
    println!("serving http://127.0.0.1:{port}/metrics for {run_for:?}");

    let scheduler = Scheduler::new();
    let config = Trigger::builder(&scheduler).name("config").bind(|| {
        std::thread::sleep(Duration::from_millis(2)); // the fetch
        Some(Duration::from_millis(200))
    });
    let heartbeat = Trigger::builder(&scheduler)
        .name("heartbeat")
        .bind(|| Some(Duration::from_millis(100)));
    config.fire()?;
    heartbeat.fire()?;
    let end = Instant::now() + run_for;
    while Instant::now() < end {
        // Bursts of "refresh now": coalesced, and counted as such.
        for _ in 0..50 {
            config.fire()?;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    config.pause();
    let _ = config.fire(); // refused while paused: counted with reason="paused"

    let body = scrape(port)?;
    let lines: Vec<&str> = body
        .lines()
        .filter(|line| line.starts_with("circulation_trigger_") && !line.contains("_bucket"))
        .collect();
    for line in &lines {
        println!("{line}");
    }
    if !lines
        .iter()
        .any(|l| l.starts_with("circulation_trigger_iterations_total{trigger=\"config\""))
    {
        return Err("the scrape shows no iterations of \"config\"".into());
    }
    scheduler.shutdown();
    let _ = scheduler.await_termination(Duration::from_secs(5));
    let report = scheduler.shutdown_report().unwrap_or_default();
    println!("shut down: {report}");
    Ok(())
}

/// `GET /metrics` over plain HTTP/1.1, as Prometheus does.
fn scrape(port: u16) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut body = String::new();
    stream.read_to_string(&mut body)?;
    Ok(body)
}

/// `--run-for SECONDS` (default 2) and `--port PORT` (default: a free one).
fn parse_args() -> Result<(Duration, u16), Box<dyn std::error::Error>> {
    let mut run_for = Duration::from_secs(2);
    let mut port = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--run-for" => run_for = Duration::try_from_secs_f64(value.parse()?)?,
            "--port" => port = Some(value.parse()?),
            _ => return Err(format!("unknown argument {arg} (--run-for S, --port P)").into()),
        }
    }
    let port = match port {
        Some(port) => port,
        None => std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port(),
    };
    Ok((run_for, port))
}
