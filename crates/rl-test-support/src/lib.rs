//! Helpers for the integration tests of every crate (a dev-dependency only; nothing ships it).

#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};

/// The environment variable `cargo xtask test` sets to the test venv's Python.
pub const PYTHON_ENV: &str = "RL_TEST_PYTHON";

/// The workspace root, from this crate's own location in `crates/`.
///
/// # Panics
/// When the workspace is not where it was built (the tests cannot run then anyway).
pub fn workspace_root() -> PathBuf {
    #[allow(clippy::expect_used)]
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

/// The Python of the test venv (atroposlib, wandb, …), provided by `cargo xtask test` as
/// `RL_TEST_PYTHON`. Without it the tests that need it are skipped loudly — except under CI,
/// where they must run.
///
/// # Panics
/// Under CI (`CI` set) when `RL_TEST_PYTHON` is missing.
pub fn test_python(what_is_skipped: &str) -> Option<PathBuf> {
    match std::env::var_os(PYTHON_ENV).map(PathBuf::from) {
        Some(python) if python.exists() => Some(python),
        _ if std::env::var_os("CI").is_some() => {
            panic!("{PYTHON_ENV} is not set under CI: run the tests through `cargo xtask test`")
        }
        _ => {
            eprintln!(
                "SKIPPED: {PYTHON_ENV} is not set; run `cargo xtask test` for {what_is_skipped}"
            );
            None
        }
    }
}
