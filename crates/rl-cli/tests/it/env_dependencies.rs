//! An environment's own dependencies (issue 32, part 2): `plurals` (in the Atropos-shaped
//! checkout) imports `inflection`, which atroposlib does not bring, and names it, unpinned, in
//! the `requirements.txt` beside it. `rl select`, `rl envs show` and `rl doctor` name what the
//! run's Python lacks, `rl runs start` refuses the run before anything starts and says the
//! fix, `rl setup --env plurals` installs it from the registry into the managed Python (again:
//! nothing to do) and records the version it resolved, and the run then starts.
//!
//! The managed Python is made in the test's state directory as `rl setup` would leave it, but
//! in seconds: a venv whose site-packages reach the test venv's through a `.pth` file, so it
//! holds atroposlib and the trainer's pins while what is installed into it stays its own (the
//! test venv is never changed).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::runs::{Stack, assert_nothing_left};
use crate::training::SHORT_RUN;
use crate::{test_python, workspace_root};

const PACKAGE: &str = "inflection";

fn environments() -> PathBuf {
    std::fs::canonicalize(
        workspace_root().join("fixtures/tinker-atropos/atropos-checkout/environments"),
    )
    .unwrap()
}

/// `<home>/venvs/trainer`, as `rl setup` makes it, holding the test venv's packages.
fn managed_python(home: &Path) -> PathBuf {
    let venv = home.join("venvs/trainer");
    let python = rl_test_support::venv_over_the_test_venv(&venv);
    let absent = Command::new(&python)
        .args(["-c", &format!("import {PACKAGE}")])
        .output()
        .unwrap();
    assert!(
        !absent.status.success(),
        "{PACKAGE} must not be in the test venv for this test to mean anything"
    );
    python
}

/// The `dependencies` of an answer with the checkout's path made portable.
fn portable(dependencies: &Value, home: &std::path::Path) -> Value {
    let text = dependencies
        .to_string()
        .replace(&environments().display().to_string(), "[environments]")
        .replace(&home.display().to_string(), "[home]");
    serde_json::from_str(&text).unwrap()
}

#[test]
#[ignore = "needs the test venv, the local engine and PyPI: `cargo xtask test` runs it"]
fn a_missing_dependency_is_named_refused_installed_and_the_run_then_starts() {
    let home = tempfile::tempdir().unwrap();
    let python = managed_python(home.path());
    let engine = rl_test_support::local_engine();
    let settings = format!(
        "environments_dir = \"{}\"\n{}",
        environments().display(),
        rl_test_support::local_engine_settings(&python, &engine)
    );
    let (old, new) = SHORT_RUN;
    assert!(settings.contains(old));
    std::fs::write(home.path().join("config.toml"), settings.replace(old, new)).unwrap();
    let stack = Stack {
        home,
        tinker_key: None,
    };

    // Named by `rl select` and `rl envs show`.
    let selected = stack.json(&["select", "plurals"]);
    insta::assert_json_snapshot!(
        "plurals_missing",
        portable(&selected["dependencies"], stack.home.path())
    );
    let shown = stack.json(&["envs", "show", "plurals", "--recursive"]);
    assert_eq!(shown["dependencies"], selected["dependencies"], "{shown:#}");
    let human = stack.rl(&["select", "plurals"]);
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.contains("cannot import: inflection")
            && human.contains("fix: `rl setup --env plurals`"),
        "{human}"
    );

    // Named by `rl doctor`, as a required check with its fix.
    let doctor = stack.rl(&["doctor", "--json"]);
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|check| check["name"] == "environment dependencies")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(check["ok"], false, "{check:#}");
    assert_eq!(check["required"], true, "{check:#}");
    // The tools' words in JSON (`rl_health_check` answers the same); the doctor's table says
    // the command.
    assert_eq!(
        check["fix"], r#"rl_install_environment {"name": "plurals"}"#,
        "{check:#}"
    );
    assert!(
        check["detail"].as_str().unwrap().contains(PACKAGE),
        "{check:#}"
    );
    assert_eq!(report["healthy"], false, "{report:#}");

    // Refused by `rl runs start`, naming what is missing and the fix; nothing started.
    stack.refused(&["runs", "start", "--json"], "cannot import inflection");
    stack.refused(
        &["runs", "start", "--json"],
        r#"rl_install_environment {"name": "plurals"}"#,
    );
    let told = stack.rl(&["runs", "start"]);
    let told = String::from_utf8_lossy(&told.stderr);
    assert!(
        told.contains("install it with `rl setup --env plurals`"),
        "{told}"
    );
    let runs = stack.json(&["runs", "list"]);
    assert_eq!(runs["runs"], serde_json::json!([]), "{runs:#}");

    // `rl setup --env plurals` installs it from the registry and records the version.
    let set_up = stack.json(&["setup", "--env", "plurals"]);
    let installed = set_up["environment"]["installed"].as_array().unwrap();
    assert_eq!(installed.len(), 1, "{set_up:#}");
    let pinned = installed[0].as_str().unwrap();
    assert!(pinned.starts_with("inflection=="), "{set_up:#}");
    let record = stack.home.path().join("venvs/environments/plurals.txt");
    assert_eq!(
        set_up["environment"]["record"].as_str(),
        Some(record.to_str().unwrap())
    );
    let recorded = std::fs::read_to_string(&record).unwrap();
    assert!(recorded.lines().any(|line| line == pinned), "{recorded}");
    // Into the managed Python, never the test venv.
    assert!(
        rl_test_support::purelib(&python).join(PACKAGE).is_dir(),
        "{PACKAGE} is not in the managed venv"
    );
    assert!(
        !rl_test_support::purelib(&test_python())
            .join(PACKAGE)
            .exists()
    );

    // Idempotent: nothing left to install.
    let again = stack.json(&["setup", "--env", "plurals"]);
    assert_eq!(
        again["environment"]["installed"],
        serde_json::json!([]),
        "{again:#}"
    );
    let check = stack.json(&["setup", "--check", "--env", "plurals"]);
    assert_eq!(check["ready"], true, "{check:#}");

    // Now only its requirements file is said, with nothing missing; the run starts.
    let selected = stack.json(&["select", "plurals"]);
    insta::assert_json_snapshot!(
        "plurals_installed",
        portable(&selected["dependencies"], stack.home.path())
    );
    let (id, _) = stack.start_running();
    stack.json(&["runs", "stop", &id]);
    assert_nothing_left(&stack, &id);
}

/// `rl setup --env` with a name no environment has says so before minutes of installing, and
/// makes nothing.
#[test]
fn an_unknown_environment_is_refused_before_anything_is_installed() {
    let home = tempfile::tempdir().unwrap();
    let output = crate::rl_command(home.path())
        .args([
            "--root",
            "fixtures/tinker-atropos",
            "setup",
            "--env",
            "nope",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("no environment named 'nope'"),
        "{output:?}"
    );
    assert!(!home.path().join("venvs").exists(), "a venv was made");
}
