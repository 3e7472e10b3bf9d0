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
