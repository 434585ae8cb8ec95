//! The graceful-shutdown example, for real: start the built example, send
//! it SIGTERM, check that it stops its subscription, prints the shutdown
//! report and exits 0.
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Builds the example with the profile of this test binary; returns its path.
fn example_binary(name: &str) -> PathBuf {
    let me = std::env::current_exe().unwrap();
    let profile_dir = me.parent().unwrap().parent().unwrap().to_path_buf(); // target/<profile>
    let mut build = Command::new(env!("CARGO"));
    build
        .args(["build", "--quiet", "--example", name])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile_dir.ends_with("release") {
        build.arg("--release");
    }
    assert!(
        build.status().unwrap().success(),
        "could not build the example"
    );
    profile_dir.join("examples").join(name)
}

#[test]
fn sigterm_shuts_the_service_down_gracefully() {
    let binary = example_binary("graceful_shutdown");
    let mut child = Command::new(&binary)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.starts_with("ready"), "{first}");
    std::thread::sleep(Duration::from_millis(300)); // let it consume a little

    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());

    let began = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "exit status {status}: {rest}");
    assert!(rest.contains("stopping: signal received"), "{rest}");
    assert!(rest.contains("shutdown report:"), "{rest}");
    // The periodic triggers were armed when it stopped: listed by name.
    assert!(
        rest.contains("config-refresh") && rest.contains("heartbeat"),
        "{rest}"
    );
    assert!(rest.contains("terminated: true"), "{rest}");
}
