//! Integration tests of rl-config over the fixture tree.

#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod bad_input;
mod fields;
mod fork_settings;
mod hostile_sources;
mod hostile_verifiers;
mod locked;
mod python;
mod service;
mod trainer_edits;

use std::path::PathBuf;

pub(crate) use rl_test_support::workspace_root;

pub(crate) fn fixture_tree() -> PathBuf {
    workspace_root().join("fixtures/tinker-atropos")
}

pub(crate) fn fixture_scan() -> rl_discovery::Scan {
    let options = rl_discovery::ScanOptions {
        recursive: true,
        ..Default::default()
    };
    rl_discovery::scan(
        &fixture_tree().join("tinker_atropos/environments"),
        &options,
    )
    .unwrap()
}

/// A state directory of its own and settings pointing at the fixture tree, with the original
/// tool's locked values.
pub(crate) fn service() -> (tempfile::TempDir, rl_config::ConfigService) {
    let home = tempfile::tempdir().unwrap();
    let settings = rl_settings::Settings {
        tinker_atropos_root: Some(fixture_tree()),
        recursive_discovery: true,
        ..Default::default()
    };
    let service = rl_config::ConfigService::open(home.path(), settings).unwrap();
    (home, service)
}

pub(crate) fn test_python() -> PathBuf {
    rl_test_support::test_python()
}
