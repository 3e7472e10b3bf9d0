//! rl finds everything the original tool's algorithm finds (run for real with CPython's `ast`),
//! and more: the aliased and inherited environments it misses.

use std::collections::BTreeSet;
use std::process::Command;

use rl_discovery::{ScanOptions, scan};

use crate::{fixture_environments, workspace_root};

fn original_scan(recursive: bool) -> BTreeSet<(String, String)> {
    let script = workspace_root().join("xtask/python/original_scan.py");
    let mut command = Command::new("python3");
    command.arg(script).arg(fixture_environments());
    if recursive {
        command.arg("--recursive");
    }
    // python3 is one of the two things the README asks of a machine.
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("python3 runs the original scan: {error}"));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let found: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    found
        .iter()
        .map(|env| {
            (
                env["file"].as_str().unwrap().to_owned(),
                env["class_name"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn finds_a_strict_superset_of_the_original() {
    for recursive in [false, true] {
        let original = original_scan(recursive);
        let ours: BTreeSet<(String, String)> = scan(
            &fixture_environments(),
            &ScanOptions {
                recursive,
                ..Default::default()
            },
        )
        .unwrap()
        .environments
        .into_iter()
        .map(|env| (env.file, env.class_name))
        .collect();
        let missed: Vec<_> = original.difference(&ours).collect();
        assert!(
            missed.is_empty(),
            "rl misses what the original finds: {missed:?}"
        );
        let extra: Vec<_> = ours
            .difference(&original)
            .map(|(_, class)| class.as_str())
            .collect();
        for expected in [
            "AliasedEnv",
            "GSM8kHardEnv",
            "GSM8kHarderEnv",
            "RelativeEnv",
            "AliasedChildEnv",
        ] {
            assert!(
                extra.contains(&expected),
                "{expected} should be found only by rl: {extra:?}"
            );
        }
    }
}
