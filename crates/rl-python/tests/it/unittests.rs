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

/// The verifiers v0 runner's tests (`python/tests/test_verifiers_v0.py`) in a Python with
/// verifiers 0.3.x (pinned in `requirements/verifiers-v0.txt`): skipped in the test venv, which
/// has no verifiers, they must all run here.
#[test]
#[ignore = "needs the verifiers v0 venv (target/vf0-venv, from requirements/verifiers-v0.txt)"]
fn the_verifiers_v0_runner_tests_pass_against_the_real_verifiers() {
    let root = rl_test_support::workspace_root();
    let python = root.join("target/vf0-venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: python3.11 -m venv target/vf0-venv && target/vf0-venv/bin/pip install -r \
         crates/rl-python/requirements/verifiers-v0.txt",
        python.display()
    );
    let output = Command::new(&python)
        .args([
            "-m",
            "unittest",
            "tests.test_verifiers_v0",
            "tests.test_verifiers_core",
        ])
        .current_dir(root.join("crates/rl-python/python"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
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
