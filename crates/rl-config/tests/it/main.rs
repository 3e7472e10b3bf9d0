//! Integration tests of rl-config over the fixture tree.

#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod fields;

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
