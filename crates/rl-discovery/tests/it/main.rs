//! Integration tests of rl-discovery over the fixture tree and over trees made on the fly.

#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod fixture_tree;
mod hostile_sources;
mod hostile_verifiers;
mod lookup;
mod python_parity;
mod resolution;
mod roots_and_files;
mod verifiers_packages;

use std::path::{Path, PathBuf};

pub(crate) use rl_test_support::workspace_root;

pub(crate) fn fixture_environments() -> PathBuf {
    workspace_root().join("fixtures/tinker-atropos/tinker_atropos/environments")
}

/// Writes `files` (relative path → content) into a fresh temporary folder.
pub(crate) fn tree(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

/// Scans `root` with sub-folders.
pub(crate) fn scan_recursive(root: &Path) -> rl_discovery::Scan {
    let options = rl_discovery::ScanOptions {
        recursive: true,
        ..Default::default()
    };
    rl_discovery::scan(root, &options).unwrap()
}
