//! One front page: README.md is the crate docs (docs.rs shows it), the
//! package's readme (crates.io shows it) and the repository's page. Those
//! three resolve relative links differently — or not at all — so the page
//! links only to absolute addresses, and it names every feature.

const README: &str = include_str!("../README.md");
const LIB: &str = include_str!("../src/lib.rs");
const CARGO_TOML: &str = include_str!("../Cargo.toml");

#[test]
fn the_crate_docs_are_the_readme() {
    assert!(LIB.contains("#![doc = include_str!(\"../README.md\")]"));
    // No second front page: no inner doc comment of its own.
    assert!(!LIB.lines().any(|line| line.starts_with("//!")));
    assert!(CARGO_TOML.contains("readme = \"README.md\""));
}

/// The targets of Markdown links and images: `[text](target)`, and
/// reference definitions `[name]: target`.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let tail = &rest[at + 2..];
            let end = tail.find(')').unwrap_or(tail.len());
            targets.push(tail[..end].to_owned());
            rest = &tail[end..];
        }
        if let Some(definition) = line.strip_prefix('[') {
            if let Some((_, target)) = definition.split_once("]: ") {
                targets.push(target.trim().to_owned());
            }
        }
        if let Some(at) = line.find("<img") {
            targets.push(line[at..].to_owned());
        }
    }
    targets
}

#[test]
fn the_readme_links_only_to_absolute_addresses() {
    let targets = link_targets(README);
    let relative: Vec<&String> = targets
        .iter()
        .filter(|t| !(t.starts_with("https://") || t.starts_with("http://")))
        .collect();
    assert!(
        relative.is_empty(),
        "relative links or images: {relative:?}"
    );
    // The check sees links at all.
    assert!(link_targets("[a](b) ![c](https://d)\n[e]: f").len() == 3);
}

#[test]
fn the_readme_names_every_feature() {
    let features = CARGO_TOML
        .split("[features]")
        .nth(1)
        .expect("a [features] table")
        .split("\n[")
        .next()
        .unwrap();
    let names: Vec<&str> = features
        .lines()
        .filter_map(|line| line.split_once(" = ").map(|(name, _)| name.trim()))
        .filter(|name| *name != "default")
        .collect();
    assert!(names.len() >= 4, "{names:?}");
    for name in names {
        assert!(
            README.contains(&format!("| `{name}` |")),
            "README's feature table lacks `{name}`"
        );
    }
}
