//! The trainer's own unit tests (`python/tests`, stdlib unittest) run in the test venv, the
//! Python runs use: advantages, datums, config errors, the served routes, rollout bounds.

use std::process::Command;

#[test]
#[ignore = "needs the test venv: `cargo xtask test` runs it"]
fn the_trainers_python_unit_tests_pass() {
    let python = rl_test_support::test_python();
    let programs = rl_test_support::workspace_root().join("crates/rl-python/python");
    let output = Command::new(python)
        .args(["-m", "unittest", "discover", "-s", "tests", "-t", "."])
        .current_dir(&programs)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    assert!(
        report
            .lines()
            .any(|line| line.starts_with("Ran ") && !line.starts_with("Ran 0 ")),
        "no test ran: {report}"
    );
}

/// The verifiers runner's tests of one API (`python/tests/test_verifiers_v0.py` or
/// `test_verifiers_v1.py`, with the core's) in a Python with that kind's verifiers (pinned in
/// `requirements/verifiers-v0.txt`, `verifiers-v1.txt`): skipped in the test venv, which has no
/// verifiers, they must all run there.
fn verifiers_tests_pass(python: &std::path::Path, module: &str) {
    let root = rl_test_support::workspace_root();
    let output = Command::new(python)
        .args(["-m", "unittest", module, "tests.test_verifiers_core"])
        .current_dir(root.join("crates/rl-python/python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", python.display()));
    let report = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    let summary = report.lines().last().unwrap_or_default();
    assert!(
        report
            .lines()
            .any(|line| line.starts_with("Ran ") && !line.starts_with("Ran 0 ")),
        "no test ran: {report}"
    );
    assert!(!summary.contains("skipped"), "tests were skipped: {report}");
}

#[test]
#[ignore = "needs verifiers' Pythons: `cargo xtask test` runs it"]
fn the_verifiers_v0_runner_tests_pass_against_the_real_verifiers() {
    verifiers_tests_pass(
        &rl_test_support::verifiers_pythons().v0,
        "tests.test_verifiers_v0",
    );
}

#[test]
#[ignore = "needs verifiers' Pythons: `cargo xtask test` runs it"]
fn the_verifiers_v1_runner_tests_pass_against_the_real_verifiers() {
    verifiers_tests_pass(
        &rl_test_support::verifiers_pythons().v1,
        "tests.test_verifiers_v1",
    );
}
