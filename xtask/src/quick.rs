//! `cargo xtask test --quick`: the tier a contributor runs before sending a change, in a few
//! minutes. It takes the tests that need nothing, and the runs of the local stack (rl-cli's
//! `runs` module: atroposlib's real run-api, the fixture trainer, the arithmetic environment)
//! that need only the test venv. Everything else that is `#[ignore]`d is left out: the local
//! engine, verifiers' Pythons, torch, Chromium, SLURM, Node, and the slower test-venv tests of
//! the other modules. The reason each test gives is the one definition of what it needs; this
//! module reads it from the sources.

use std::path::{Path, PathBuf};

/// The reasons that need only the test venv: `needs the test venv: …`, optionally with what
/// of it in parentheses (`needs the test venv (atroposlib): …`).
fn needs_only_the_test_venv(reason: &str) -> bool {
    let Some(rest) = reason.strip_prefix("needs the test venv") else {
        return false;
    };
    let rest = match rest.strip_prefix(" (") {
        Some(inside) => match inside.split_once(')') {
            Some((_, after)) => after,
            None => return false,
        },
        None => rest,
    };
    rest.starts_with(':')
}

/// Each `#[ignore = "REASON"]` of `source` with the name of the test function it marks.
fn ignored_tests(source: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut reason: Option<String> = None;
    for line in source.lines() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("#[ignore = \"") {
            reason = rest.split_once("\"]").map(|(text, _)| text.to_owned());
            continue;
        }
        let Some(pending) = &reason else {
            continue;
        };
        let function = ["fn ", "pub fn ", "async fn ", "pub(crate) fn "]
            .iter()
            .find_map(|start| line.strip_prefix(start));
        if let Some(after) = function {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.push((name, pending.clone()));
            reason = None;
        }
    }
    found
}

/// The file of the local stack's run tests, which `--quick` keeps.
const LOCAL_STACK_RUNS: &str = "rl-cli/tests/it/runs.rs";

/// The nextest filter set of the tests `--quick` leaves out: every ignored test of the
/// workspace's crates but the local stack's runs that need only the test venv.
pub(crate) fn left_out_filter(crates: &Path) -> anyhow::Result<String> {
    let mut names: Vec<String> = ignored_tests_under(crates)
        .into_iter()
        .filter(|test| {
            !(test.path.ends_with(LOCAL_STACK_RUNS) && needs_only_the_test_venv(&test.reason))
        })
        .map(|test| test_filter(&test.name))
        .collect();
    names.sort();
    names.dedup();
    if names.is_empty() {
        anyhow::bail!("no `#[ignore]`d test found under {}", crates.display());
    }
    Ok(names.join(" | "))
}

/// An `#[ignore]`d test: its file, its function's name and the reason it gives.
pub(crate) struct IgnoredTest {
    pub(crate) path: PathBuf,
    pub(crate) name: String,
    pub(crate) reason: String,
}

/// Every `#[ignore]`d test of the Rust sources under `crates`.
pub(crate) fn ignored_tests_under(crates: &Path) -> Vec<IgnoredTest> {
    rust_sources(crates)
        .into_iter()
        .filter_map(|path| Some((std::fs::read_to_string(&path).ok()?, path)))
        .flat_map(|(source, path)| {
            ignored_tests(&source)
                .into_iter()
                .map(move |(name, reason)| IgnoredTest {
                    path: path.clone(),
                    name,
                    reason,
                })
        })
        .collect()
}

/// The nextest filter of one test by its function's name (unique among ignored tests: the
/// guard test below).
pub(crate) fn test_filter(name: &str) -> String {
    format!("test(/(^|::){name}$/)")
}

/// Every Rust file under `crates`.
fn rust_sources(crates: &Path) -> Vec<PathBuf> {
    crate::test::files_under(crates, &|path| {
        path.extension().is_some_and(|extension| extension == "rs")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_test_venv_is_quick() {
        assert!(needs_only_the_test_venv(
            "needs the test venv: `cargo xtask test` runs it"
        ));
        assert!(needs_only_the_test_venv(
            "needs the test venv (atroposlib): `cargo xtask test` runs it"
        ));
        for slow in [
            "needs the test venv and the local engine: `cargo xtask test` runs it",
            "needs the test venvs (verifiers v1, the local engine); run through cargo xtask test",
            "needs the test venv, the local engine and PyPI: `cargo xtask test` runs it",
            "needs Chromium: `cargo xtask test` runs it",
            "needs the test venv (unclosed: `cargo xtask test` runs it",
        ] {
            assert!(!needs_only_the_test_venv(slow), "{slow}");
        }
    }

    #[test]
    fn an_ignore_reason_is_read_with_the_test_it_marks() {
        let source = "#[test]\n#[ignore = \"needs Chromium: x\"]\nfn a_page_is_drawn() {}\n\
                      #[test]\nfn plain() {}\n";
        assert_eq!(
            ignored_tests(source),
            [("a_page_is_drawn".to_owned(), "needs Chromium: x".to_owned())]
        );
    }

    /// The engine's tests and the other modules' are left out, the local stack's runs kept.
    #[test]
    fn the_workspace_s_engine_tests_are_left_out_and_the_local_stack_s_runs_kept() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
        assert!(crates.join(LOCAL_STACK_RUNS).is_file());
        let filter = left_out_filter(&crates).unwrap();
        for left_out in [
            "checkpoints_are_models_and_compare_gives_a_verdict_from_real_samples",
            "the_trainers_python_unit_tests_pass",
        ] {
            assert!(filter.contains(&format!("::){left_out}$/")), "{left_out}");
        }
        assert!(!filter.contains(
            "a_run_goes_from_starting_to_running_to_completed_with_keys_only_in_the_environment"
        ));
    }

    /// Every `#[ignore` of the sources is read with its test, and no two ignored tests share a
    /// name: the filter names tests by their function's name alone.
    #[test]
    fn every_ignored_test_is_read_and_named_once() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
        let mut marks = 0;
        let mut names = Vec::new();
        for path in rust_sources(&crates) {
            let source = std::fs::read_to_string(&path).unwrap();
            marks += source
                .lines()
                .filter(|line| line.trim_start().starts_with("#[ignore"))
                .count();
            names.extend(ignored_tests(&source).into_iter().map(|(name, _)| name));
        }
        assert_eq!(names.len(), marks, "an `#[ignore` the reader does not take");
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "two ignored tests share a name");
    }
}
