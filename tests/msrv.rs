//! The declared MSRV (`rust-version` in Cargo.toml) is true of the locked
//! dependencies: every normal dependency the crate builds with, all
//! features on, declares a `rust-version` at most ours (or none). Clippy's
//! `incompatible_msrv` lint (on in CI: `-D warnings`) checks the crate's
//! own use of the standard library against it. Dev-dependencies (tests,
//! benchmarks) are free to need more.

use std::collections::{HashMap, HashSet};
use std::process::Command;

/// `"1.80"` / `"1.71.1"` as comparable numbers.
fn version(text: &str) -> Vec<u64> {
    text.split('.').map(|part| part.parse().unwrap()).collect()
}

#[test]
fn every_normal_dependency_builds_on_our_rust_version() {
    // The platform it builds for here (others' dependencies, and the
    // model checker's `cfg(loom)` ones, are not part of this build).
    let rustc = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc runs");
    let host = String::from_utf8(rustc.stdout)
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("host: ").map(str::to_owned))
        .expect("rustc names its host");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--all-features",
            "--locked",
            "--offline",
            "--filter-platform",
            &host,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let packages: HashMap<&str, &serde_json::Value> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p))
        .collect();
    let nodes: HashMap<&str, &serde_json::Value> = metadata["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let root = packages
        .values()
        .find(|p| p["name"] == "circulation-trigger")
        .unwrap();
    let ours = version(
        root["rust_version"]
            .as_str()
            .expect("rust-version is declared"),
    );
    // Every package reachable through normal (not dev or build) edges.
    let (mut seen, mut stack) = (HashSet::new(), vec![root["id"].as_str().unwrap()]);
    while let Some(id) = stack.pop() {
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|kind| kind["kind"].is_null());
            let pkg = dep["pkg"].as_str().unwrap();
            if normal && seen.insert(pkg) {
                stack.push(pkg);
            }
        }
    }
    let too_new: Vec<String> = seen
        .iter()
        .map(|id| packages[id])
        .filter(|p| {
            p["rust_version"]
                .as_str()
                .is_some_and(|needs| version(needs) > ours)
        })
        .map(|p| format!("{} {} needs {}", p["name"], p["version"], p["rust_version"]))
        .collect();
    assert!(
        too_new.is_empty(),
        "dependencies newer than our rust-version {ours:?}: {too_new:?} \
         (resolve MSRV-aware: `cargo update`, with .cargo/config.toml's fallback)"
    );
    assert!(seen.len() > 5, "the walk found the dependencies: {seen:?}");
}
