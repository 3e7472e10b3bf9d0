//! Integration tests of rl-config over the fixture tree.

#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod bad_input;
mod fields;
mod python;
mod service;
mod settings_and_secrets;

use std::path::{Path, PathBuf};

pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

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
    let settings = rl_config::Settings {
        tinker_atropos_root: Some(fixture_tree()),
        recursive_discovery: true,
        ..Default::default()
    };
    let service = rl_config::ConfigService::open(home.path(), settings).unwrap();
    (home, service)
}

/// The Python of the test venv (`cargo xtask test` provides it as `RL_TEST_PYTHON`). Without it
/// the Python checks are skipped loudly, except under CI, where they must run.
pub(crate) fn test_python() -> Option<PathBuf> {
    match std::env::var_os("RL_TEST_PYTHON").map(PathBuf::from) {
        Some(python) if python.exists() => Some(python),
        _ if std::env::var_os("CI").is_some() => {
            panic!("RL_TEST_PYTHON is not set under CI: run the tests through `cargo xtask test`")
        }
        _ => {
            eprintln!(
                "SKIPPED: RL_TEST_PYTHON is not set; run `cargo xtask test` for the Python checks"
            );
            None
        }
    }
}
